//! The control plane: the gRPC Orchestrator service roles talk to.
//!
//! Registration and heartbeats keep the role table; agents pull, renew and
//! complete leases; judges record verdicts, and a Submit verdict settles its
//! task (made durable before the judge hears so); `WatchStatus` streams
//! snapshots to `hpcagent status`. Every call is checked against the caller's
//! role token ([`auth`]). Decisions are the scheduler's; this layer checks,
//! records and answers.

pub mod auth;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::orchestrator_server::{Orchestrator, OrchestratorServer};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::campaign::state::{Campaign, RoleState};
use crate::plan::Role;
use crate::scheduler::{Pull, RecordError, TaskState};
use crate::store::VerdictRecord;
use auth::Principal;

/// The service over a running campaign.
#[derive(Clone)]
pub struct Control {
    campaign: Arc<Campaign>,
}

impl Control {
    pub fn server(
        campaign: Arc<Campaign>,
    ) -> tonic::service::interceptor::InterceptedService<
        OrchestratorServer<Control>,
        impl tonic::service::Interceptor + Clone,
    > {
        let tokens = campaign.tokens.clone();
        OrchestratorServer::with_interceptor(Control { campaign }, auth::interceptor(tokens))
    }
}

fn role_of(principal: Principal) -> Option<Role> {
    match principal {
        Principal::Agent => Some(Role::Agent),
        Principal::Judge => Some(Role::Judge),
        Principal::Inference => Some(Role::Inference),
        Principal::Observer => None,
    }
}

fn pb_role(role: Role) -> pb::Role {
    match role {
        Role::Inference => pb::Role::Inference,
        Role::Agent => pb::Role::Agent,
        Role::Judge => pb::Role::Judge,
    }
}

/// A monotonic instant as Unix milliseconds (for clients on other clocks).
fn unix_ms(at: Instant) -> i64 {
    let now = Instant::now();
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64;
    if at >= now {
        unix + (at - now).as_millis() as i64
    } else {
        unix - (now - at).as_millis() as i64
    }
}

const ROLES: &[Principal] = &[Principal::Agent, Principal::Judge, Principal::Inference];

impl Control {
    /// The instance an agent's or role's request names must be known.
    fn known(&self, instance: &str) -> Result<(), Status> {
        if self.campaign.roles().contains_key(instance) {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!(
                "no role instance {instance:?} in this campaign's plan"
            )))
        }
    }
}

#[tonic::async_trait]
impl Orchestrator for Control {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::Assignment>, Status> {
        let principal = auth::require(&request, ROLES, "Register")?;
        let r = request.into_inner();
        let claimed = pb::Role::try_from(r.role).unwrap_or(pb::Role::Unspecified);
        let role = role_of(principal).expect("role principals");
        if claimed != pb_role(role) {
            return Err(Status::permission_denied(format!(
                "a {principal:?} token cannot register as {claimed:?}"
            )));
        }
        {
            let mut roles = self.campaign.roles();
            let entry = roles.get_mut(&r.instance).ok_or_else(|| {
                Status::invalid_argument(format!("no role instance {:?} in the plan", r.instance))
            })?;
            if entry.role != role {
                return Err(Status::permission_denied(format!(
                    "{} is not a {role} instance",
                    r.instance
                )));
            }
            entry.node = r.node.clone();
            entry.endpoint = r.endpoint.clone();
            entry.last_seen = Instant::now();
        }
        self.campaign
            .set_role_state(&r.instance, RoleState::Starting);
        if role == Role::Judge {
            self.campaign
                .scheduler()
                .judge(&r.instance, &format!("http://{}", r.endpoint), false);
        }
        let caps: Vec<String> = r
            .capabilities
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.campaign.store.event(
            &r.instance,
            "registered",
            &format!("{} pid {} {}", r.node, r.pid, caps.join(" ")),
        );
        tracing::info!(instance = %r.instance, node = %r.node, endpoint = %r.endpoint, "registered");
        Ok(Response::new(pb::Assignment {
            campaign: self.campaign.id.clone(),
            heartbeat_interval_ms: self.campaign.heartbeat_interval.as_millis() as u32,
            workers: self.campaign.workers_per_agent,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatReply>, Status> {
        let principal = auth::require(&request, ROLES, "Heartbeat")?;
        let r = request.into_inner();
        let (role, endpoint) = {
            let mut roles = self.campaign.roles();
            let entry = roles.get_mut(&r.instance).ok_or_else(|| {
                Status::invalid_argument(format!("no role instance {:?}", r.instance))
            })?;
            if Some(entry.role) != role_of(principal) {
                return Err(Status::permission_denied(format!(
                    "{} is not yours to heartbeat",
                    r.instance
                )));
            }
            entry.last_seen = Instant::now();
            (entry.role, entry.endpoint.clone())
        };
        let ready = pb::RoleState::try_from(r.state) == Ok(pb::RoleState::Ready);
        let current = self
            .campaign
            .roles()
            .get(&r.instance)
            .map(|e| e.state.clone());
        // A role the supervisor gave up on (or restarts) does not come back by heartbeating.
        if matches!(current, Some(RoleState::Starting | RoleState::Ready)) {
            self.campaign.set_role_state(
                &r.instance,
                if ready {
                    RoleState::Ready
                } else {
                    RoleState::Starting
                },
            );
        }
        let mut sched = self.campaign.scheduler();
        if role == Role::Judge {
            sched.judge(&r.instance, &format!("http://{endpoint}"), ready);
        }
        let lost = if role == Role::Agent {
            sched.renew_agent(&r.instance, &r.leases, Instant::now())
        } else {
            Vec::new()
        };
        Ok(Response::new(pb::HeartbeatReply {
            drain: sched.draining() || sched.finished(),
            lost_leases: lost,
        }))
    }

    async fn pull_task(
        &self,
        request: Request<pb::PullTaskRequest>,
    ) -> Result<Response<pb::PullTaskReply>, Status> {
        auth::require(&request, &[Principal::Agent], "PullTask")?;
        let r = request.into_inner();
        self.known(&r.instance)?;
        let pull = self
            .campaign
            .scheduler()
            .pull(&r.instance, r.worker, Instant::now());
        let reply = match pull {
            Pull::Done => pb::PullTaskReply {
                done: true,
                ..Default::default()
            },
            Pull::Wait => pb::PullTaskReply {
                retry_after_ms: 500,
                ..Default::default()
            },
            Pull::Lease(g) => {
                let g = *g;
                let dir = self.campaign.attempt_dir(&g.task.id, g.attempt);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Status::internal(format!("{}: {e}", dir.display())))?;
                let store = &self.campaign.store;
                store.attempt_started(
                    &g.task.id,
                    g.attempt,
                    &g.lease_id,
                    &r.instance,
                    r.worker,
                    &g.judge,
                );
                store.task_state(&g.task.id, "leased", g.attempt, 0.0);
                pb::PullTaskReply {
                    lease: Some(pb::Lease {
                        lease_id: g.lease_id,
                        task_id: g.task.id,
                        kernel: g.task.kernel,
                        language: g.task.language,
                        precision: g.task.precision,
                        attempt: g.attempt,
                        deadline_unix_ms: unix_ms(g.deadline),
                        budget_s: g.budget_left.as_secs_f64(),
                        judge_url: g.judge_url,
                        inference_url: String::new(),
                        attempt_dir: dir.display().to_string(),
                    }),
                    ..Default::default()
                }
            }
        };
        Ok(Response::new(reply))
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseReply>, Status> {
        auth::require(&request, &[Principal::Agent], "RenewLease")?;
        let r = request.into_inner();
        let mut sched = self.campaign.scheduler();
        let judge_url = if r.judge_failed {
            let url = sched
                .judge_failed(&r.lease_id)
                .ok_or_else(|| Status::not_found(format!("no active lease {}", r.lease_id)))?;
            self.campaign.store.event(
                "",
                "judge_failed",
                &format!("lease {} moved to {url}", r.lease_id),
            );
            url
        } else {
            String::new()
        };
        let deadline = sched
            .renew(&r.lease_id, Instant::now())
            .ok_or_else(|| Status::not_found(format!("no active lease {}", r.lease_id)))?;
        Ok(Response::new(pb::RenewLeaseReply {
            deadline_unix_ms: unix_ms(deadline),
            judge_url,
        }))
    }

    async fn complete_task(
        &self,
        request: Request<pb::CompleteTaskRequest>,
    ) -> Result<Response<pb::CompleteTaskReply>, Status> {
        auth::require(&request, &[Principal::Agent], "CompleteTask")?;
        let r = request.into_inner();
        let (end, task_id, attempt, settled) = {
            let mut sched = self.campaign.scheduler();
            let end = sched.complete(&r.lease_id, &r.outcome, Instant::now());
            let (task, attempt) = sched
                .attempt_of(&r.lease_id)
                .ok_or_else(|| Status::not_found(format!("no lease {}", r.lease_id)))?;
            let settled = matches!(task.state, TaskState::Settled(..));
            (end, task.spec.id.clone(), attempt, settled)
        };
        self.campaign.store.attempt_ended(
            &task_id,
            attempt,
            &r.outcome,
            r.tokens,
            &r.transcript_path,
            &r.message,
        );
        if let Some(end) = &end {
            self.campaign.attempt_ended(end, None);
        }
        Ok(Response::new(pb::CompleteTaskReply { settled }))
    }

    async fn record_result(
        &self,
        request: Request<pb::RecordResultRequest>,
    ) -> Result<Response<pb::RecordResultReply>, Status> {
        auth::require(&request, &[Principal::Judge], "RecordResult")?;
        let r = request.into_inner();
        let verdict = r
            .verdict
            .ok_or_else(|| Status::invalid_argument("no verdict"))?;
        let kind = pb::GradeKind::try_from(r.kind).unwrap_or(pb::GradeKind::Unspecified);
        let status = pb::Status::try_from(verdict.status).unwrap_or(pb::Status::Unspecified);
        let status_name = status
            .as_str_name()
            .trim_start_matches("STATUS_")
            .to_ascii_lowercase();
        let speedup = (verdict.speedup > 0.0).then_some(verdict.speedup);
        let now = Instant::now();
        self.campaign.grade_recorded(now);
        let (task_id, attempt, settled) = {
            let mut sched = self.campaign.scheduler();
            let Some((task, attempt)) = sched.attempt_of(&r.lease_id) else {
                return Err(Status::failed_precondition(format!(
                    "no lease {}",
                    r.lease_id
                )));
            };
            let spec = task.spec.clone();
            let kernel_of_verdict = verdict.task_id.rsplit('/').next().unwrap_or("");
            if kernel_of_verdict != spec.kernel
                || verdict.language != spec.language
                || verdict.precision != spec.precision
            {
                return Err(Status::invalid_argument(format!(
                    "the verdict is for {} {} {}, the lease for {} {} {}",
                    verdict.task_id,
                    verdict.language,
                    verdict.precision,
                    spec.kernel,
                    spec.language,
                    spec.precision
                )));
            }
            let settled = if kind == pb::GradeKind::Submit {
                match sched.record(&r.lease_id, &status_name, speedup, now) {
                    Ok(end) => end,
                    Err(e @ RecordError::AlreadySettled(_)) => {
                        return Err(Status::already_exists(e.to_string()));
                    }
                    Err(e @ RecordError::UnknownLease(_)) => {
                        return Err(Status::failed_precondition(e.to_string()));
                    }
                }
            } else {
                None
            };
            (spec.id, attempt, settled)
        };
        let verdict_json = verdict_json(&verdict, &status_name);
        let store = &self.campaign.store;
        store.verdict(VerdictRecord {
            task_id: task_id.clone(),
            attempt,
            lease_id: r.lease_id.clone(),
            kind: kind
                .as_str_name()
                .trim_start_matches("GRADE_KIND_")
                .to_ascii_lowercase(),
            judge: r.judge.clone(),
            status: status_name.clone(),
            speedup,
            median_ns: verdict.timing.as_ref().map(|t| t.median_ns),
            message: verdict.message.clone(),
            settled: settled.is_some(),
            verdict: verdict_json.clone(),
        });
        if let Some(end) = &settled {
            self.campaign.attempt_ended(end, Some(verdict_json));
            // The judge tells the agent only once the settle is on disk.
            store
                .flush()
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            tracing::info!(task = %task_id, status = %status_name, "settled");
        }
        Ok(Response::new(pb::RecordResultReply {
            settled: settled.is_some(),
        }))
    }

    type WatchStatusStream = ReceiverStream<Result<pb::StatusSnapshot, Status>>;

    async fn watch_status(
        &self,
        request: Request<pb::WatchStatusRequest>,
    ) -> Result<Response<Self::WatchStatusStream>, Status> {
        auth::require(
            &request,
            &[
                Principal::Observer,
                Principal::Agent,
                Principal::Judge,
                Principal::Inference,
            ],
            "WatchStatus",
        )?;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let campaign = self.campaign.clone();
        tokio::spawn(async move {
            loop {
                if tx.send(Ok(snapshot(&campaign))).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// The verdict as the store keeps it (JSON).
fn verdict_json(v: &pb::Verdict, status: &str) -> String {
    serde_json::json!({
        "status": status,
        "message": v.message,
        "speedup": v.speedup,
        "median_ns": v.timing.as_ref().map(|t| t.median_ns),
        "baseline_ns": v.baseline.as_ref().map(|t| t.median_ns),
        "max_abs_error": v.max_abs_error,
        "max_rel_error": v.max_rel_error,
        "hidden_passed": v.hidden_passed,
        "hidden_total": v.hidden_total,
        "deterministic": v.deterministic,
    })
    .to_string()
}

/// The campaign now, for status watchers and the progress line.
pub fn snapshot(campaign: &Campaign) -> pb::StatusSnapshot {
    let (counts, draining) = {
        let sched = campaign.scheduler();
        (sched.counts(), sched.draining())
    };
    let roles = campaign
        .roles()
        .iter()
        .map(|(name, e)| pb::RoleStatus {
            instance: name.clone(),
            role: pb_role(e.role) as i32,
            node: e.node.clone(),
            state: e.state.name().to_string(),
            restarts: e.restarts,
            endpoint: e.endpoint.clone(),
        })
        .collect();
    pb::StatusSnapshot {
        campaign: campaign.id.clone(),
        run_dir: campaign.run_dir.display().to_string(),
        tasks_total: counts.total,
        tasks_settled: counts.settled,
        tasks_running: counts.running,
        tasks_failed: counts.failed,
        tasks_pending: counts.pending,
        grades_per_minute: campaign.grades_per_minute(),
        draining,
        roles,
        elapsed_s: campaign.started.elapsed().as_secs_f64(),
    }
}

//! The control plane: the gRPC Orchestrator service roles talk to.
//!
//! Registration and heartbeats keep the role table; agents pull, renew and
//! complete leases; judges record verdicts, and a Submit verdict settles its
//! task (made durable before the judge hears so); `WatchStatus` streams
//! snapshots to `hpcagent status`. Every call is checked against the caller's
//! role token ([`auth`]). Decisions are the scheduler's; this layer checks,
//! records and answers.
//!
//! Lease traffic comes in batches (see the proto): an agent instance's
//! completions and pulls in one request of its `Leases` stream, a judge's
//! verdicts in one `RecordResults` call. A batch takes the scheduler lock
//! once, a batch of verdicts waits for one flush of the store, and each item
//! is answered, or refused, on its own.

mod graded;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hpcagent_common::AttemptOutcome;
use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::orchestrator_server::{Orchestrator, OrchestratorServer};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::auth::{self, Principal};
use crate::live::{Campaign, RoleState, service_of};
use crate::scheduler::{AttemptEnd, Completion, Grant, Pull, RecordError, Scheduler, Service};
use crate::store::{AgentReport, AttemptStart};
use graded::{Graded, check_verdict_matches};
use hpcagent_common::plan::Role;

/// The most items one batch may carry.
pub const MAX_BATCH: usize = 1024;

/// A listener's connections for a tonic server, with `TCP_NODELAY`: tonic
/// sets it only on listeners it binds itself, and without it each small
/// reply waits out Nagle's algorithm against the peer's delayed ACK (40 ms
/// on Linux), which made every RPC of a lease cycle that slow.
pub fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

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

    /// The answer to one message of an agent instance's lease stream.
    fn answer_leases(
        &self,
        principal: &Principal,
        r: pb::LeasesRequest,
    ) -> Result<pb::LeasesReply, Status> {
        principal.must_be(&r.instance, "pull or complete leases")?;
        check_batch(r.completions.len() + r.pulls.len(), "completions and pulls")?;
        let mut reply = pb::LeasesReply::default();
        let grants = {
            let now = Instant::now();
            let mut sched = self.campaign.scheduler();
            reply.completed = r
                .completions
                .into_iter()
                .map(|c| match self.complete(&mut sched, principal, c, now) {
                    Ok(settled) => pb::Completed {
                        settled,
                        refused: None,
                    },
                    Err(status) => pb::Completed {
                        settled: false,
                        refused: refusal(status),
                    },
                })
                .collect();
            self.grant(&mut sched, &r.instance, &r.pulls, now, &mut reply)
        };
        reply.leases = grants
            .into_iter()
            .map(|(worker, g)| self.lease(worker, g))
            .collect();
        Ok(reply)
    }

    /// The lease's usable `service` endpoint ("" if none now), after setting
    /// its current one aside when the agent reports it failed (at that URL).
    fn lease_endpoint(
        &self,
        sched: &mut Scheduler,
        service: Service,
        lease_id: &str,
        failed: Option<&str>,
    ) -> Result<String, Status> {
        let now = Instant::now();
        let endpoint = if let Some(failed_url) = failed {
            let current = sched.lease(lease_id).map(|l| match service {
                Service::Judge => l.judge.clone(),
                Service::Inference => l.inference.clone().unwrap_or_default(),
            });
            self.campaign.store.event(
                current.as_deref().unwrap_or(""),
                "endpoint_failed",
                &format!("reported by the agent of lease {lease_id}"),
            );
            sched.endpoint_failed(service, lease_id, failed_url, now)
        } else {
            sched.endpoint_for(service, lease_id, now)
        };
        Ok(endpoint
            .ok_or_else(|| Status::not_found(format!("lease {lease_id} has ended")))?
            .unwrap_or_default())
    }

    /// A lease for each of `agent`'s asking `workers` while there is work
    /// (and in `reply`, what the others should do), each start recorded
    /// under the scheduler lock, so the store sees grants and ends in the
    /// order they happened. The attempt's directory is the agent's to make:
    /// on a shared filesystem, metadata operations per lease on this node
    /// would bound the whole campaign.
    fn grant(
        &self,
        sched: &mut Scheduler,
        agent: &str,
        workers: &[u32],
        now: Instant,
        reply: &mut pb::LeasesReply,
    ) -> Vec<(u32, Grant)> {
        let mut grants = Vec::new();
        for &worker in workers {
            match sched.pull(agent, worker, now) {
                Pull::Lease(g) => grants.push((worker, *g)),
                Pull::Wait => {
                    reply.retry_after_ms = 500;
                    break;
                }
                Pull::Done => {
                    reply.done = true;
                    break;
                }
            }
        }
        let starts = grants.iter().map(|(worker, g)| AttemptStart {
            task: g.task.id.clone(),
            attempt: g.attempt,
            lease_id: g.lease_id.clone(),
            agent: agent.to_string(),
            worker: *worker,
            judge: g.judge.clone(),
            budget_used_s: g.budget_used.as_secs_f64(),
        });
        self.campaign.store.attempts_started(starts.collect());
        grants
    }

    /// A grant as its agent sees it.
    fn lease(&self, worker: u32, g: Grant) -> pb::Lease {
        let dir = self.campaign.attempt_dir(&g.task.id, g.attempt);
        pb::Lease {
            lease_id: g.lease_id,
            task_id: g.task.id,
            kernel: g.task.kernel,
            language: g.task.language,
            precision: g.task.precision,
            attempt: g.attempt,
            deadline_unix_ms: unix_ms(g.deadline),
            budget_s: g.budget_left.as_secs_f64(),
            judge_url: g.judge_url,
            inference_url: g.inference_url.unwrap_or_default(),
            attempt_dir: dir.display().to_string(),
            preset: g.task.preset.unwrap_or_default(),
            worker,
        }
    }

    /// One agent's completion, under the scheduler lock: whether its task
    /// is settled.
    fn complete(
        &self,
        sched: &mut Scheduler,
        agent: &Principal,
        c: pb::Completion,
        now: Instant,
    ) -> Result<bool, Status> {
        must_hold(sched, &c.lease_id, agent)?;
        let outcome = AttemptOutcome::from_wire(c.outcome)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let completion = sched
            .complete(&c.lease_id, outcome, now)
            .ok_or_else(|| Status::not_found(format!("no lease {}", c.lease_id)))?;
        let report = AgentReport {
            outcome: outcome.to_string(),
            tokens: c.tokens,
            transcript: c.transcript_path,
            message: c.message,
        };
        Ok(match completion {
            Completion::Ended(end) => {
                self.campaign.record_end(&end, Some(report), None, None);
                false
            }
            Completion::Settled { task, attempt } => {
                self.campaign.store.agent_report(&task, attempt, report);
                true
            }
            // It expired first: the record of its end stands.
            Completion::Late => false,
        })
    }

    /// One judge's verdict, under the scheduler lock: the attempt's end when
    /// it settled its task.
    fn record(
        &self,
        sched: &mut Scheduler,
        judge: &Principal,
        mut graded: Graded,
        now: Instant,
    ) -> Result<Option<AttemptEnd>, Status> {
        let lease_id = graded.record.lease_id.clone();
        let lease = sched
            .any_lease(&lease_id)
            .ok_or_else(|| Status::failed_precondition(format!("no lease {lease_id}")))?;
        judge.must_be(
            &lease.judge,
            &format!("record verdicts of lease {lease_id}"),
        )?;
        let (task, attempt) = sched.attempt_of(&lease_id).expect("the lease exists");
        check_verdict_matches(&graded.verdict, &task.spec)?;
        graded.record.task_id = task.spec.id.clone();
        graded.record.attempt = attempt;
        let end = if graded.kind == pb::GradeKind::Submit {
            let status = &graded.record.status;
            let verdict = (status.as_str(), graded.record.speedup);
            match sched.record(&lease_id, verdict, graded.submitter, now) {
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
        graded.record.settled = end.is_some();
        match &end {
            Some(end) => {
                let said = graded.agent_said.take();
                self.campaign
                    .record_end(end, None, Some(graded.record), said)
            }
            None => self.campaign.store.verdict(graded.record),
        }
        Ok(end)
    }
}

/// A batch (a `Leases` request, a `RecordResults` call) carries at most
/// [`MAX_BATCH`] items.
fn check_batch(items: usize, what: &str) -> Result<(), Status> {
    if items > MAX_BATCH {
        return Err(Status::invalid_argument(format!(
            "{items} {what} in one request; at most {MAX_BATCH}"
        )));
    }
    Ok(())
}

/// An item's refusal, as its batch reply carries it.
fn refusal(status: Status) -> Option<pb::Refusal> {
    Some(pb::Refusal {
        code: status.code() as i32,
        message: status.message().to_string(),
    })
}

fn pb_role(role: Role) -> pb::Role {
    match role {
        Role::Inference => pb::Role::Inference,
        Role::Agent => pb::Role::Agent,
        Role::Judge => pb::Role::Judge,
    }
}

/// The unsettled tasks' kernels, precisions and presets, each once, in the
/// order of the task list (the order leases go out): what a judge prepares
/// while agents think.
fn tasks_to_warm(sched: &Scheduler) -> Vec<pb::TaskToWarm> {
    let mut seen = std::collections::HashSet::new();
    sched
        .tasks()
        .iter()
        .filter(|t| !t.state.is_finished())
        .filter(|t| seen.insert((&t.spec.kernel, &t.spec.precision, &t.spec.preset)))
        .map(|t| pb::TaskToWarm {
            kernel: t.spec.kernel.clone(),
            preset: t.spec.preset.clone().unwrap_or_default(),
            precision: t.spec.precision.clone(),
        })
        .collect()
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

const ROLES: &[Option<Role>] = &[Some(Role::Agent), Some(Role::Judge), Some(Role::Inference)];
const AGENTS: &[Option<Role>] = &[Some(Role::Agent)];

/// Refuses a call about a lease its caller does not hold.
fn must_hold(sched: &Scheduler, lease_id: &str, agent: &Principal) -> Result<(), Status> {
    match sched.any_lease(lease_id) {
        Some(lease) => agent.must_be(&lease.agent, &format!("act on lease {lease_id}")),
        None => Err(Status::not_found(format!("no lease {lease_id}"))),
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
        principal.must_be(&r.instance, "register")?;
        let role = principal.role().expect("role principals");
        let claimed = pb::Role::try_from(r.role).unwrap_or(pb::Role::Unspecified);
        if claimed != pb_role(role) {
            return Err(Status::permission_denied(format!(
                "{} is a {role} instance, not {claimed:?}",
                r.instance
            )));
        }
        {
            let mut roles = self.campaign.roles();
            let entry = roles.get_mut(&r.instance).ok_or_else(|| {
                Status::invalid_argument(format!("no role instance {:?} in the plan", r.instance))
            })?;
            entry.node = r.node.clone();
            entry.endpoint = r.endpoint.clone();
            entry.last_seen = Instant::now();
            entry.slurm_step = (!r.slurm_step.is_empty()).then(|| r.slurm_step.clone());
            // What was said of its launch (held back by Slurm) is over.
            entry.detail.clear();
        }
        self.campaign
            .set_role_state(&r.instance, RoleState::Starting);
        if let Some(service) = service_of(role) {
            let url = match service {
                Service::Judge => format!("http://{}", r.endpoint),
                Service::Inference => format!("http://{}/v1", r.endpoint),
            };
            self.campaign
                .scheduler()
                .pool_mut(service)
                .registered(&r.instance, &url);
        }
        let caps: Vec<String> = r
            .capabilities
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.campaign.store.event(
            &r.instance,
            "registered",
            &format!(
                "{} pid {} {} {}",
                r.node,
                r.pid,
                r.slurm_step,
                caps.join(" ")
            ),
        );
        tracing::info!(instance = %r.instance, node = %r.node, endpoint = %r.endpoint, "registered");
        let warm = if role == Role::Judge {
            tasks_to_warm(&self.campaign.scheduler())
        } else {
            Vec::new()
        };
        Ok(Response::new(pb::Assignment {
            campaign: self.campaign.id.clone(),
            heartbeat_interval_ms: self.campaign.heartbeat_interval.as_millis() as u32,
            workers: self.campaign.workers_per_agent,
            warm,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatReply>, Status> {
        let principal = auth::require(&request, ROLES, "Heartbeat")?;
        let r = request.into_inner();
        principal.must_be(&r.instance, "heartbeat")?;
        let role = principal.role().expect("role principals");
        let ready = pb::RoleState::try_from(r.state) == Ok(pb::RoleState::Ready);
        let live = {
            let mut roles = self.campaign.roles();
            let entry = roles.get_mut(&r.instance).ok_or_else(|| {
                Status::invalid_argument(format!("no role instance {:?}", r.instance))
            })?;
            entry.last_seen = Instant::now();
            entry.detail = r.detail.clone();
            entry.state.is_live()
        };
        // A role the supervisor gave up on (or restarts) does not come back by heartbeating.
        if live {
            let state = if ready {
                RoleState::Ready
            } else {
                RoleState::Starting
            };
            self.campaign.set_role_state(&r.instance, state);
        }
        let mut sched = self.campaign.scheduler();
        if let Some(service) = service_of(role)
            && live
        {
            sched.pool_mut(service).ready(&r.instance, ready);
        }
        let lost = if role == Role::Agent {
            sched.renew_agent(&r.instance, &r.leases, Instant::now())
        } else {
            Vec::new()
        };
        let peer_judges = match role {
            Role::Judge => sched
                .pool_mut(Service::Judge)
                .others(&r.instance, Instant::now()),
            _ => Vec::new(),
        };
        Ok(Response::new(pb::HeartbeatReply {
            drain: sched.draining() || sched.finished(),
            lost_leases: lost,
            peer_judges,
        }))
    }

    type LeasesStream = ReceiverStream<Result<pb::LeasesReply, Status>>;

    async fn leases(
        &self,
        request: Request<tonic::Streaming<pb::LeasesRequest>>,
    ) -> Result<Response<Self::LeasesStream>, Status> {
        let principal = auth::require(&request, AGENTS, "Leases")?;
        let mut asks = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let control = self.clone();
        tokio::spawn(async move {
            while let Some(ask) = asks.message().await.transpose() {
                let reply = ask.and_then(|r| control.answer_leases(&principal, r));
                let refused = reply.is_err();
                if tx.send(reply).await.is_err() || refused {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseReply>, Status> {
        let principal = auth::require(&request, AGENTS, "RenewLease")?;
        let r = request.into_inner();
        let now = Instant::now();
        let mut sched = self.campaign.scheduler();
        must_hold(&sched, &r.lease_id, &principal)?;
        let failed = |reported: bool| reported.then_some(r.failed_url.as_str());
        let judge_url = self.lease_endpoint(
            &mut sched,
            Service::Judge,
            &r.lease_id,
            failed(r.judge_failed),
        )?;
        let inference_url = self.lease_endpoint(
            &mut sched,
            Service::Inference,
            &r.lease_id,
            failed(r.inference_failed),
        )?;
        let deadline = sched
            .renew(&r.lease_id, now)
            .ok_or_else(|| Status::not_found(format!("lease {} has ended", r.lease_id)))?;
        Ok(Response::new(pb::RenewLeaseReply {
            deadline_unix_ms: unix_ms(deadline),
            judge_url,
            inference_url,
        }))
    }

    async fn record_results(
        &self,
        request: Request<pb::RecordResultsRequest>,
    ) -> Result<Response<pb::RecordResultsReply>, Status> {
        let principal = auth::require(&request, &[Some(Role::Judge)], "RecordResults")?;
        let r = request.into_inner();
        check_batch(r.records.len(), "records")?;
        let now = Instant::now();
        let graded: Vec<_> = r
            .records
            .into_iter()
            .map(|record| Graded::read(&principal, record))
            .collect();
        let mut settled = Vec::new();
        let recorded: Vec<pb::Recorded> = {
            let mut sched = self.campaign.scheduler();
            graded
                .into_iter()
                .map(|graded| {
                    self.campaign.grade_recorded(now);
                    match graded.and_then(|g| self.record(&mut sched, &principal, g, now)) {
                        Ok(end) => {
                            let recorded = pb::Recorded {
                                settled: end.is_some(),
                                refused: None,
                            };
                            settled.extend(end);
                            recorded
                        }
                        Err(status) => pb::Recorded {
                            settled: false,
                            refused: refusal(status),
                        },
                    }
                })
                .collect()
        };
        if settled.is_empty() {
            return Ok(Response::new(pb::RecordResultsReply { recorded }));
        }
        // The judge tells the agent only once the settle is on disk.
        self.campaign
            .store
            .flush()
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        for end in &settled {
            tracing::info!(task = %end.task, attempt = end.attempt, "settled");
        }
        Ok(Response::new(pb::RecordResultsReply { recorded }))
    }

    type WatchStatusStream = ReceiverStream<Result<pb::StatusSnapshot, Status>>;

    async fn watch_status(
        &self,
        request: Request<pb::WatchStatusRequest>,
    ) -> Result<Response<Self::WatchStatusStream>, Status> {
        auth::require(
            &request,
            &[
                None,
                Some(Role::Agent),
                Some(Role::Judge),
                Some(Role::Inference),
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
            detail: e.detail.clone(),
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

#[cfg(test)]
mod tests;

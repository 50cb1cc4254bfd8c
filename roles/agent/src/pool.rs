//! The worker pool of one agent instance.
//!
//! `workers` loops each pull a lease, work it with the policy, and complete
//! it; heartbeats renew the leases in hand. An orchestrator that does not
//! answer a pull is asked again with backoff (the heartbeat ends the process
//! if it stays away). A worker stops when the orchestrator says there is
//! nothing left (or the campaign drains); the instance exits when its last
//! worker stops.

use std::path::Path;
use std::time::Duration;

use hpcagent_orchestrator::client::{Client, RoleContext, start_heartbeats};
use hpcagent_proto::v1 as pb;

use crate::baseline;
use crate::judge_link::JudgeLink;
use hpcagent_orchestrator::control::auth::JUDGE_TOKEN_VAR;

/// The longest wait between pulls the orchestrator did not answer.
const MAX_PULL_BACKOFF: Duration = Duration::from_secs(5);

/// How one attempt ended, as the agent reports it.
pub struct Attempt {
    pub outcome: &'static str,
    pub message: String,
}

/// Runs the agent instance `instance` of the campaign in `run_dir`.
pub async fn run(run_dir: &Path, instance: &str) -> anyhow::Result<()> {
    let judge_token = std::env::var(JUDGE_TOKEN_VAR).map_err(|_| {
        anyhow::anyhow!("{JUDGE_TOKEN_VAR} is not set: agents run inside `hpcagent up`")
    })?;
    let mut ctx = RoleContext::load(run_dir, instance).await?;
    let policy = ctx.config.settings.agent_policy;
    let capabilities = [("policy".to_string(), policy.to_string())]
        .into_iter()
        .collect();
    let assignment = ctx.register(pb::Role::Agent, "", capabilities).await?;
    let heartbeat = start_heartbeats(
        ctx.client.clone(),
        instance.to_string(),
        Duration::from_millis(assignment.heartbeat_interval_ms as u64),
    );
    heartbeat.set_ready(true);
    tracing::info!(instance, workers = assignment.workers, %policy, "agent ready");
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..assignment.workers {
        let worker = Worker {
            client: ctx.client.clone(),
            heartbeat: heartbeat.clone(),
            instance: instance.to_string(),
            judge_token: judge_token.clone(),
            index: worker,
        };
        workers.spawn(worker.work());
    }
    while let Some(done) = workers.join_next().await {
        if let Ok(Err(e)) = done {
            tracing::error!("worker: {e:#}");
        }
    }
    tracing::info!(instance, "no work left; exiting");
    Ok(())
}

/// One worker of the pool.
struct Worker {
    client: Client,
    heartbeat: hpcagent_orchestrator::client::Heartbeat,
    instance: String,
    judge_token: String,
    index: u32,
}

impl Worker {
    async fn work(mut self) -> anyhow::Result<()> {
        while let Some(lease) = self.pull().await? {
            self.heartbeat.hold(&lease.lease_id);
            tracing::info!(task = %lease.task_id, attempt = lease.attempt, judge = %lease.judge_url, "working");
            let mut judge = JudgeLink::new(self.client.clone(), &lease, &self.judge_token);
            let attempt = baseline::attempt(&mut judge, &lease, &self.instance).await;
            let completed = self
                .client
                .complete_task(pb::CompleteTaskRequest {
                    lease_id: lease.lease_id.clone(),
                    outcome: attempt.outcome.to_string(),
                    tokens: 0,
                    transcript_path: String::new(),
                    message: attempt.message,
                })
                .await;
            self.heartbeat.release(&lease.lease_id);
            if let Err(status) = completed {
                tracing::warn!(task = %lease.task_id, "complete: {}", status.message());
            }
        }
        Ok(())
    }

    /// The next lease; `None` once there is no more work.
    async fn pull(&mut self) -> anyhow::Result<Option<pb::Lease>> {
        let mut backoff = Duration::from_millis(250);
        loop {
            if self.heartbeat.draining() {
                return Ok(None);
            }
            let request = pb::PullTaskRequest {
                instance: self.instance.clone(),
                worker: self.index,
            };
            let reply = match self.client.pull_task(request).await {
                Ok(reply) => reply.into_inner(),
                Err(status) if transient(&status) => {
                    tracing::warn!("pull: {}; again in {backoff:?}", status.message());
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_PULL_BACKOFF);
                    continue;
                }
                Err(status) => anyhow::bail!("pull: {}", status.message()),
            };
            if reply.done {
                return Ok(None);
            }
            if let Some(lease) = reply.lease {
                return Ok(Some(lease));
            }
            tokio::time::sleep(Duration::from_millis(reply.retry_after_ms.max(100) as u64)).await;
        }
    }
}

/// A failure worth asking again after: the orchestrator is busy or away.
fn transient(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Internal
            | tonic::Code::ResourceExhausted
    )
}

//! The worker pool of one agent instance.
//!
//! `workers` loops each pull a lease, work it with the policy, and complete
//! it; heartbeats renew the leases in hand. A worker stops when the
//! orchestrator says there is nothing left (or the campaign drains); the
//! instance exits when its last worker stops.

use std::path::Path;
use std::time::Duration;

use hpcagent_orchestrator::client::{Client, RoleContext, start_heartbeats};
use hpcagent_proto::v1 as pb;

use crate::baseline;

/// How one attempt ended, as the agent reports it.
pub struct Attempt {
    pub outcome: &'static str,
    pub message: String,
}

/// Runs the agent instance `instance` of the campaign in `run_dir`.
pub async fn run(run_dir: &Path, instance: &str) -> anyhow::Result<()> {
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
        let (client, heartbeat, instance) =
            (ctx.client.clone(), heartbeat.clone(), instance.to_string());
        workers.spawn(async move { work(client, heartbeat, instance, worker).await });
    }
    while let Some(done) = workers.join_next().await {
        if let Ok(Err(e)) = done {
            tracing::error!("worker: {e:#}");
        }
    }
    tracing::info!(instance, "no work left; exiting");
    Ok(())
}

async fn work(
    mut client: Client,
    heartbeat: hpcagent_orchestrator::client::Heartbeat,
    instance: String,
    worker: u32,
) -> anyhow::Result<()> {
    loop {
        if heartbeat.draining() {
            return Ok(());
        }
        let reply = client
            .pull_task(pb::PullTaskRequest {
                instance: instance.clone(),
                worker,
            })
            .await
            .map_err(|s| anyhow::anyhow!("pull: {}", s.message()))?
            .into_inner();
        if reply.done {
            return Ok(());
        }
        let Some(lease) = reply.lease else {
            tokio::time::sleep(Duration::from_millis(reply.retry_after_ms.max(100) as u64)).await;
            continue;
        };
        heartbeat.hold(&lease.lease_id);
        tracing::info!(task = %lease.task_id, attempt = lease.attempt, judge = %lease.judge_url, "working");
        let attempt = baseline::attempt(&mut client, &lease, &instance).await;
        let completed = client
            .complete_task(pb::CompleteTaskRequest {
                lease_id: lease.lease_id.clone(),
                outcome: attempt.outcome.to_string(),
                tokens: 0,
                transcript_path: String::new(),
                message: attempt.message,
            })
            .await;
        heartbeat.release(&lease.lease_id);
        if let Err(status) = completed {
            tracing::warn!(task = %lease.task_id, "complete: {}", status.message());
        }
    }
}

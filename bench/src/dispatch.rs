//! `hpcagent bench dispatch`: how fast the control plane hands out leases.
//!
//! Simulated agents (tokio tasks, one gRPC connection each) run the real
//! protocol against a [`sim`] campaign: pull a lease, have the lease's
//! judge record an `ok` Submit verdict (which settles the task, durably,
//! before the judge hears back), complete the lease. A lease's latency is
//! pull to completion. Afterwards the store is read back: every task must
//! be settled exactly once, which is what the load test checks too.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hpcagent_orchestrator::client::Client;
use hpcagent_orchestrator::store::Reader;
use hpcagent_proto::v1 as pb;
use tokio::task::JoinSet;

use crate::sim::{self, Shape};
use crate::stats::Latency;

#[derive(Debug, Clone)]
pub struct Options {
    pub agents: usize,
    pub judges: usize,
    pub tasks: usize,
    /// Where the campaign's store goes (kept for inspection).
    pub run_dir: PathBuf,
}

/// What a dispatch run measured, and what the store says afterwards.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub agents: usize,
    pub judges: usize,
    pub leases: usize,
    pub seconds: f64,
    pub leases_per_s: f64,
    pub latency: Latency,
    pub tasks: usize,
    pub settled: usize,
    /// Tasks settled more than once.
    pub duplicates: usize,
    /// Tasks not settled when every agent was told the campaign is done.
    pub lost: usize,
}

/// What one agent did: its leases' latencies and when its last one ended.
struct AgentRun {
    latencies: Vec<Duration>,
    last: Option<Instant>,
}

pub async fn run(options: &Options) -> anyhow::Result<Outcome> {
    let shape = Shape {
        agents: options.agents,
        judges: options.judges,
        tasks: options.tasks,
        workers: 1,
        heartbeat: Duration::from_secs(5),
    };
    let sim = sim::start(&options.run_dir, &shape).await?;
    let judges = Arc::new(sim.judges_ready().await?);
    let mut agents = Vec::with_capacity(sim.agents.len());
    for name in &sim.agents {
        let mut client = sim.client(name).await?;
        sim::register(&mut client, name, pb::Role::Agent, "").await?;
        agents.push((name.clone(), client));
    }

    let start = Instant::now();
    let mut running = JoinSet::new();
    for (name, client) in agents {
        running.spawn(agent(name, client, judges.clone()));
    }
    let mut latencies = Vec::with_capacity(options.tasks);
    let mut last = start;
    while let Some(done) = running.join_next().await {
        let run = done.context("a simulated agent panicked")??;
        latencies.extend(run.latencies);
        last = last.max(run.last.unwrap_or(start));
    }
    let seconds = (last - start).as_secs_f64();
    sim.campaign.store.flush().await?;

    let reader = Reader::open(&options.run_dir)?;
    let tasks = reader.tasks()?;
    let settled = tasks.iter().filter(|t| t.state == "settled").count();
    let duplicates = reader.settlements()?.iter().filter(|(_, n)| *n > 1).count();
    Ok(Outcome {
        agents: options.agents,
        judges: options.judges,
        leases: latencies.len(),
        seconds,
        leases_per_s: latencies.len() as f64 / seconds.max(1e-9),
        latency: Latency::of(&mut latencies),
        tasks: tasks.len(),
        settled,
        duplicates,
        lost: tasks.len() - settled,
    })
}

/// One simulated agent: leases until the campaign says it is done.
async fn agent(
    name: String,
    mut client: Client,
    judges: Arc<BTreeMap<String, Client>>,
) -> anyhow::Result<AgentRun> {
    let mut run = AgentRun {
        latencies: Vec::new(),
        last: None,
    };
    loop {
        let began = Instant::now();
        let reply = client
            .pull_task(pb::PullTaskRequest {
                instance: name.clone(),
                worker: 0,
            })
            .await
            .with_context(|| format!("{name}: PullTask"))?
            .into_inner();
        if reply.done {
            return Ok(run);
        }
        let Some(lease) = reply.lease else {
            // Every task is leased: ask again soon (shorter than the
            // server's hint, which is sized for real agents).
            tokio::time::sleep(Duration::from_millis(
                u64::from(reply.retry_after_ms).min(20),
            ))
            .await;
            continue;
        };
        let mut judge = judges
            .get(&lease.judge_url)
            .with_context(|| format!("the lease names an unknown judge {}", lease.judge_url))?
            .clone();
        judge
            .record_result(sim::verdict_for(&lease))
            .await
            .with_context(|| format!("RecordResult for {}", lease.task_id))?;
        client
            .complete_task(pb::CompleteTaskRequest {
                lease_id: lease.lease_id.clone(),
                outcome: "submitted".into(),
                ..Default::default()
            })
            .await
            .with_context(|| format!("{name}: CompleteTask"))?;
        let now = Instant::now();
        run.latencies.push(now - began);
        run.last = Some(now);
    }
}

/// The report's lines.
pub fn render(outcome: &Outcome) -> String {
    format!(
        "hpcagent dispatch: {} agents, {} judges, {} leases in {:.2} s = {:.0} leases/s; \
         latency p50 {:.0} µs, p99 {:.0} µs\n\
         store: {}/{} tasks settled, {} settled twice, {} lost",
        outcome.agents,
        outcome.judges,
        outcome.leases,
        outcome.seconds,
        outcome.leases_per_s,
        outcome.latency.p50_us,
        outcome.latency.p99_us,
        outcome.settled,
        outcome.tasks,
        outcome.duplicates,
        outcome.lost
    )
}

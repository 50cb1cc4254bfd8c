//! `hpcagent bench dispatch`: how fast the control plane hands out leases.
//!
//! Simulated agents (tokio tasks) run the real protocol against a [`sim`]
//! campaign, grouped as a campaign groups them: agent instances (one gRPC
//! connection each, its pulls and completions batched as the agent pool
//! batches them) of `workers` agents. Each agent pulls a lease, makes the
//! attempt's directory, has the lease's judge record an `ok` Submit verdict
//! (which settles the task, durably, before the judge hears back), and
//! completes the lease. A lease's latency is pull to completion. Afterwards
//! the store is read back: every task must be settled exactly once, which is
//! what the load test checks too.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hpcagent_orchestrator::client::{self, Leases, Pulled, Records};
use hpcagent_orchestrator::store::Reader;
use hpcagent_proto::v1 as pb;
use tokio::task::JoinSet;

use crate::sim::{self, Shape};
use crate::stats::Latency;

#[derive(Debug, Clone)]
pub struct Options {
    /// Agents in all (workers of agent instances).
    pub agents: usize,
    /// Agents per agent instance.
    pub workers: usize,
    pub judges: usize,
    pub tasks: usize,
    /// Where the campaign's store goes (kept for inspection).
    pub run_dir: PathBuf,
}

/// What a dispatch run measured, and what the store says afterwards.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub agents: usize,
    pub instances: usize,
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
#[derive(Default)]
struct AgentRun {
    latencies: Vec<Duration>,
    last: Option<Instant>,
}

pub async fn run(options: &Options) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        options.workers > 0 && options.agents.is_multiple_of(options.workers),
        "{} agents do not make whole instances of {} workers",
        options.agents,
        options.workers
    );
    let shape = Shape {
        agents: options.agents / options.workers,
        judges: options.judges,
        tasks: options.tasks,
        workers: options.workers as u32,
        heartbeat: Duration::from_secs(5),
    };
    let sim = sim::start(&options.run_dir, &shape).await?;
    let judges = Arc::new(sim.judges_ready().await?);
    let mut instances = Vec::with_capacity(sim.agents.len());
    for name in &sim.agents {
        let mut client = sim.client(name).await?;
        sim::register(&mut client, name, pb::Role::Agent, "").await?;
        instances.push(Leases::new(client, name));
    }

    let start = Instant::now();
    let mut running = JoinSet::new();
    for leases in instances {
        for worker in 0..shape.workers {
            running.spawn(agent(leases.clone(), worker, judges.clone()));
        }
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
        instances: shape.agents,
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

/// One simulated agent: leases until the campaign says it is done. As the
/// agent pool does, it completes a lease and asks for the next together.
async fn agent(
    leases: Leases,
    worker: u32,
    judges: Arc<BTreeMap<String, Records>>,
) -> anyhow::Result<AgentRun> {
    let mut run = AgentRun::default();
    let mut began = Instant::now();
    let mut pulled = leases.pull(worker).await.context("Leases (pull)")?;
    loop {
        let lease = match pulled {
            Pulled::Lease(lease) => lease,
            Pulled::Done => return Ok(run),
            // Every task is leased: ask again soon (sooner than the
            // server's hint, which is sized for real agents).
            Pulled::Wait(wait) => {
                tokio::time::sleep(wait.min(Duration::from_millis(20))).await;
                began = Instant::now();
                pulled = leases.pull(worker).await.context("Leases (pull)")?;
                continue;
            }
        };
        client::make_attempt_dir(&lease)
            .with_context(|| format!("cannot make {}", lease.attempt_dir))?;
        judges
            .get(&lease.judge_url)
            .with_context(|| format!("the lease names an unknown judge {}", lease.judge_url))?
            .record(sim::verdict_for(&lease))
            .await
            .with_context(|| format!("RecordResults for {}", lease.task_id))?;
        let next_began = Instant::now();
        let completion = pb::Completion {
            lease_id: lease.lease_id.clone(),
            outcome: "submitted".into(),
            ..Default::default()
        };
        let (completed, next) = tokio::join!(leases.complete(completion), leases.pull(worker));
        completed.with_context(|| format!("Leases (complete) for {}", lease.task_id))?;
        let now = Instant::now();
        run.latencies.push(now - began);
        run.last = Some(now);
        began = next_began;
        pulled = next.context("Leases (pull)")?;
    }
}

/// The report's lines.
pub fn render(outcome: &Outcome) -> String {
    format!(
        "hpcagent dispatch: {} agents ({} instances), {} judges, {} leases in {:.2} s = {:.0} leases/s; \
         latency p50 {:.0} µs, p99 {:.0} µs\n\
         store: {}/{} tasks settled, {} settled twice, {} lost",
        outcome.agents,
        outcome.instances,
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

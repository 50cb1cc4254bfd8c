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
//!
//! A comparison ([`compare`]) runs rounds of hpcagent and its peers in turn
//! and takes the median of the rounds' ratios, as `bench judge` does. Its
//! rounds keep the store and the attempts' directories on a memory
//! filesystem when the machine has one, and one more run puts them on the
//! temporary directory's disk: on a disk the kernel's work on a lease's two
//! new directories can outweigh everything else (docs/benchmarks.md), and
//! it swings with what the filesystem did minutes before, while the control
//! plane's own cost is what the rounds compare.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hpcagent_common::{AttemptOutcome, Leases, Pulled, Records};
use hpcagent_orchestrator::store::{self, Reader};
use hpcagent_proto::v1 as pb;
use tokio::task::JoinSet;

use crate::peers;
use crate::sim::{self, Shape};
use crate::stats::{self, Latency, median};

#[derive(Debug, Clone)]
pub struct Options {
    /// Agents in all (workers of agent instances).
    pub agents: usize,
    /// Agents per agent instance.
    pub workers: usize,
    pub judges: usize,
    pub tasks: usize,
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
    /// The filesystem type of the run directory (store and attempts).
    pub filesystem: String,
}

/// What one agent did: its leases' latencies and when its last one ended.
#[derive(Default)]
struct AgentRun {
    latencies: Vec<Duration>,
    last: Option<Instant>,
}

/// One simulated campaign with its store and attempts in `run_dir`.
pub async fn run(options: &Options, run_dir: &Path) -> anyhow::Result<Outcome> {
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
    let sim = sim::start(run_dir, &shape).await?;
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

    let reader = Reader::open(run_dir)?;
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
        filesystem: store::filesystem_of(run_dir),
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
        hpcagent_common::make_attempt_dir(&lease)
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
            outcome: AttemptOutcome::Submitted.to_wire(),
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

/// Where a comparison's hpcagent runs keep their stores and attempts.
#[derive(Debug, Clone)]
pub enum Placement {
    /// This run directory, for one round, kept afterwards.
    Kept(PathBuf),
    /// A fresh directory per run under this one, deleted afterwards.
    Scratch(PathBuf),
}

/// The memory filesystem rounds go to when the machine has one.
const MEMORY: &str = "/dev/shm";

impl Placement {
    /// Where a comparison runs by default: its rounds on [`MEMORY`] when
    /// that is a memory filesystem and the temporary directory is not, and
    /// then one more run on the temporary directory's disk; otherwise
    /// everything in the temporary directory.
    pub fn scratch() -> (Placement, Option<Placement>) {
        let temp = std::env::temp_dir();
        let memory = Path::new(MEMORY);
        if !is_memory(&temp) && is_memory(memory) {
            (
                Placement::Scratch(memory.to_path_buf()),
                Some(Placement::Scratch(temp)),
            )
        } else {
            (Placement::Scratch(temp), None)
        }
    }

    /// The directory runs go in (or under).
    pub fn dir(&self) -> &Path {
        match self {
            Placement::Kept(dir) | Placement::Scratch(dir) => dir,
        }
    }

    /// One run; its scratch directory (if it has one) is deleted when the
    /// caller drops it.
    fn run(
        &self,
        runtime: &tokio::runtime::Runtime,
        options: &Options,
    ) -> anyhow::Result<(Outcome, Option<tempfile::TempDir>)> {
        match self {
            Placement::Kept(dir) => Ok((runtime.block_on(run(options, dir))?, None)),
            Placement::Scratch(base) => {
                let scratch = tempfile::Builder::new()
                    .prefix("hpcagent-bench-dispatch-")
                    .tempdir_in(base)
                    .with_context(|| {
                        format!("cannot make a scratch directory in {}", base.display())
                    })?;
                let outcome = runtime.block_on(run(options, &scratch.path().join("run")))?;
                Ok((outcome, Some(scratch)))
            }
        }
    }
}

fn is_memory(dir: &Path) -> bool {
    dir.is_dir() && store::is_memory_filesystem(&store::filesystem_of(dir))
}

/// One round: hpcagent, then each peer asked for (tasks per second, or why
/// it was not measured).
#[derive(Debug, Clone)]
pub struct Round {
    pub ours: Outcome,
    pub ray: PeerRate,
    pub hyperqueue: PeerRate,
}

/// A peer's tasks per second, why it was not measured, or `None` when it
/// was not asked for.
pub type PeerRate = Option<Result<f64, String>>;

/// A comparison's rounds, and the run on disk when there was one.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub options: Options,
    /// The directory the rounds ran in (or under).
    pub dir: PathBuf,
    pub rounds: Vec<Round>,
    /// The one run on disk, or why it failed, and the directory it ran under.
    pub on_disk: Option<(PathBuf, Result<Outcome, String>)>,
    /// Trivial tasks each peer ran (Ray) or was submitted (HyperQueue).
    pub peer_tasks: usize,
}

/// Runs `rounds` rounds of hpcagent (and of its peers, unless
/// `peer_tasks` is `None`), saying how each went through `progress`.
pub fn compare(
    runtime: &tokio::runtime::Runtime,
    options: &Options,
    placement: &Placement,
    on_disk: Option<&Placement>,
    rounds: usize,
    peer_tasks: Option<usize>,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Comparison> {
    if let Placement::Kept(dir) = placement {
        anyhow::ensure!(
            rounds == 1,
            "{} can hold one round, not {rounds}",
            dir.display()
        );
    }
    // Ray's script warms up before it measures; so does this: the first
    // run of a process pays for its allocator's arenas, the kernel's inode
    // and dentry slabs and the binary's pages being touched.
    let warm_up = Options {
        tasks: (options.tasks / 10).max(100),
        ..options.clone()
    };
    let beside = match placement {
        // On the kept directory's filesystem, but not in it: it holds its
        // one campaign.
        Placement::Kept(dir) => {
            let parent = dir.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
            Placement::Scratch(parent.to_path_buf())
        }
        Placement::Scratch(_) => placement.clone(),
    };
    // Kept until the comparison ends: on a disk, inodes deleted just before
    // a run slow its every new one (see docs/benchmarks.md).
    let _warm_up = beside.run(runtime, &warm_up).context("the warm-up run")?.1;
    let (mut ray_failed, mut hyperqueue_failed) = (None, None);
    let mut measured = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let ours = placement.run(runtime, options)?.0;
        let measured_round = Round {
            ours,
            ray: ask(peers::ray_tasks, peer_tasks, &mut ray_failed),
            hyperqueue: ask(peers::hq_submission, peer_tasks, &mut hyperqueue_failed),
        };
        progress(&format!(
            "dispatch: round {round} of {rounds} measured ({:.0} leases/s)",
            measured_round.ours.leases_per_s
        ));
        measured.push(measured_round);
    }
    // Its failure is a line of the report: the rounds stand without it.
    let on_disk = on_disk.map(|disk| {
        let outcome = disk
            .run(runtime, options)
            .map(|(outcome, _)| outcome)
            .map_err(|e| format!("{e:#}"));
        progress("dispatch: the run on disk measured");
        (disk.dir().to_path_buf(), outcome)
    });
    Ok(Comparison {
        options: options.clone(),
        dir: placement.dir().to_path_buf(),
        rounds: measured,
        on_disk,
        peer_tasks: peer_tasks.unwrap_or(0),
    })
}

/// A peer's rate for this round, unless it was not asked for. One that
/// failed is not asked again (a hung Ray costs its whole time limit each
/// time); its later rounds repeat why.
fn ask(
    peer: fn(usize) -> Result<f64, peers::PeerError>,
    tasks: Option<usize>,
    failed: &mut Option<String>,
) -> PeerRate {
    let tasks = tasks?;
    if let Some(why) = failed {
        return Some(Err(why.clone()));
    }
    // Kept as words: a round repeats them, and the report prints them.
    let rate = peer(tasks).map_err(|e| e.to_string());
    if let Err(why) = &rate {
        *failed = Some(why.clone());
    }
    Some(rate)
}

/// A round in one line: hpcagent and each peer measured.
fn round_line(round: &Round) -> String {
    let mut line = format!(
        "hpcagent {:.0} leases/s (p50 {:.0} µs, p99 {:.0} µs; {} lost, {} settled twice)",
        round.ours.leases_per_s,
        round.ours.latency.p50_us,
        round.ours.latency.p99_us,
        round.ours.lost,
        round.ours.duplicates
    );
    for (name, peer) in [("ray", &round.ray), ("hyperqueue", &round.hyperqueue)] {
        match peer {
            Some(Ok(per_s)) => line.push_str(&format!("; {name} {per_s:.0} tasks/s")),
            Some(Err(_)) => line.push_str(&format!("; {name} skipped")),
            None => {}
        }
    }
    line
}

/// The report: the median round, every round, the peers and the run on disk.
pub fn render(c: &Comparison) -> String {
    let mut by_rate: Vec<&Outcome> = c.rounds.iter().map(|r| &r.ours).collect();
    by_rate.sort_by(|a, b| a.leases_per_s.total_cmp(&b.leases_per_s));
    let Some(&mid) = by_rate.get(by_rate.len() / 2) else {
        return "hpcagent dispatch: no rounds".into();
    };
    let o = &c.options;
    let rounds = c.rounds.len();
    let mut lines = vec![format!(
        "hpcagent dispatch: {} agents ({} instances), {} judges, {} leases a round; store and \
         attempts on {} ({}){}{}",
        o.agents,
        o.agents / o.workers.max(1),
        o.judges,
        o.tasks,
        mid.filesystem,
        c.dir.display(),
        if rounds > 1 {
            format!(", the median of {rounds} rounds")
        } else {
            String::new()
        },
        if rounds > 1 && !store::is_memory_filesystem(&mid.filesystem) {
            " (no memory filesystem: each round ran after the last one's files were deleted)"
        } else {
            ""
        }
    )];
    if rounds > 1 {
        lines.extend(
            c.rounds
                .iter()
                .enumerate()
                .map(|(i, r)| format!("  round {}: {}", i + 1, round_line(r))),
        );
    }
    lines.push(format!(
        "hpcagent: {:.0} leases/s in {:.2} s; latency p50 {:.0} µs, p99 {:.0} µs{} [target ≥ 20000 \
         leases/s]",
        mid.leases_per_s,
        mid.seconds,
        mid.latency.p50_us,
        mid.latency.p99_us,
        if rounds > 1 {
            " (the median round)"
        } else {
            ""
        }
    ));
    lines.push(store_line(c.rounds.iter().map(|r| &r.ours)));
    lines.extend(peer_lines(
        c,
        "ray",
        "trivial remote tasks",
        "≥ 25×",
        |r| &r.ray,
    ));
    lines.extend(peer_lines(
        c,
        "hyperqueue",
        "`true` tasks submitted as one job",
        "—",
        |r| &r.hyperqueue,
    ));
    match &c.on_disk {
        Some((under, Ok(disk))) => lines.push(format!(
            "on disk ({}, {}): {:.0} leases/s in {:.2} s, {:.2}× the rate on {}; latency p50 {:.0} µs, \
             p99 {:.0} µs; {} lost, {} settled twice",
            disk.filesystem,
            under.display(),
            disk.leases_per_s,
            disk.seconds,
            disk.leases_per_s / mid.leases_per_s.max(1e-9),
            mid.filesystem,
            disk.latency.p50_us,
            disk.latency.p99_us,
            disk.lost,
            disk.duplicates
        )),
        Some((under, Err(why))) => {
            lines.push(format!("on disk ({}): failed: {why}", under.display()))
        }
        None => {}
    }
    lines.join("\n")
}

/// What the stores said afterwards, over every round.
fn store_line<'a>(runs: impl Iterator<Item = &'a Outcome>) -> String {
    let (mut settled, mut tasks, mut duplicates, mut lost) = (0, 0, 0, 0);
    for run in runs {
        settled += run.settled;
        tasks += run.tasks;
        duplicates += run.duplicates;
        lost += run.lost;
    }
    format!("store: {settled}/{tasks} tasks settled, {duplicates} settled twice, {lost} lost")
}

/// A peer's median rate and the median of the rounds' ratios against it,
/// or why it was not measured.
fn peer_lines(
    c: &Comparison,
    name: &str,
    what: &str,
    target: &str,
    of: fn(&Round) -> &PeerRate,
) -> Vec<String> {
    let asked: Vec<(&Round, &Result<f64, String>)> = c
        .rounds
        .iter()
        .filter_map(|r| of(r).as_ref().map(|p| (r, p)))
        .collect();
    if asked.is_empty() {
        return Vec::new();
    }
    if let Some((_, Err(why))) = asked.iter().find(|(_, p)| p.is_err()) {
        return vec![stats::skipped(name, why)];
    }
    let mut rates: Vec<f64> = asked
        .iter()
        .filter_map(|(_, p)| p.as_ref().ok().copied())
        .collect();
    let mut ratios: Vec<f64> = asked
        .iter()
        .filter_map(|(r, p)| p.as_ref().ok().map(|per_s| r.ours.leases_per_s / per_s))
        .collect();
    let spread = if ratios.len() > 1 {
        let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let high = ratios.iter().copied().fold(0.0, f64::max);
        format!(
            ", the median of {} rounds ({low:.2}× to {high:.2}×)",
            ratios.len()
        )
    } else {
        String::new()
    };
    let of_rounds = if rates.len() > 1 {
        format!(" (the median of {} rounds)", rates.len())
    } else {
        String::new()
    };
    vec![
        format!(
            "peer {name}: {} {what} at {:.0} tasks/s{of_rounds}",
            c.peer_tasks,
            median(&mut rates)
        ),
        stats::ratio_line(
            &format!("hpcagent vs {name}"),
            median(&mut ratios),
            &format!("the throughput{spread}"),
            target,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(leases_per_s: f64) -> Outcome {
        Outcome {
            agents: 10,
            instances: 1,
            judges: 1,
            leases: 100,
            seconds: 100.0 / leases_per_s,
            leases_per_s,
            latency: Latency::of(&mut []),
            tasks: 100,
            settled: 100,
            duplicates: 0,
            lost: 0,
            filesystem: "tmpfs".into(),
        }
    }

    fn comparison(rounds: Vec<Round>) -> Comparison {
        Comparison {
            options: Options {
                agents: 10,
                workers: 10,
                judges: 1,
                tasks: 100,
            },
            dir: PathBuf::from("/dev/shm"),
            rounds,
            on_disk: None,
            peer_tasks: 1000,
        }
    }

    #[test]
    fn the_ratio_is_the_median_of_the_rounds_own() {
        // A noisy round moves both of its numbers: its ratio stays in line.
        let round = |ours: f64, ray: f64| Round {
            ours: outcome(ours),
            ray: Some(Ok(ray)),
            hyperqueue: None,
        };
        // Their ratios are 20, 50 and 40: the median ratio is 40, while the
        // median rates (30,000 and 1,000) would say 30.
        let c = comparison(vec![
            round(30_000.0, 1500.0),
            round(15_000.0, 300.0),
            round(40_000.0, 1000.0),
        ]);
        let text = render(&c);
        assert!(text.contains("hpcagent: 30000 leases/s"), "{text}");
        assert!(
            text.contains(
                "peer ray: 1000 trivial remote tasks at 1000 tasks/s (the median of 3 rounds)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "hpcagent vs ray: 40.00× the throughput, the median of 3 rounds (20.00× to 50.00×)"
            ),
            "{text}"
        );
        assert!(
            text.contains("store: 300/300 tasks settled, 0 settled twice, 0 lost"),
            "{text}"
        );
        assert!(
            !text.contains("hyperqueue"),
            "a peer not asked for is not shown: {text}"
        );
    }

    #[test]
    fn a_peer_that_failed_in_a_round_is_skipped_with_its_reason() {
        let c = comparison(vec![
            Round {
                ours: outcome(30_000.0),
                ray: Some(Ok(1000.0)),
                hyperqueue: Some(Err("hyperqueue is not installed".into())),
            },
            Round {
                ours: outcome(30_000.0),
                ray: Some(Err("ray took over 300s".into())),
                hyperqueue: Some(Err("hyperqueue is not installed".into())),
            },
        ]);
        let text = render(&c);
        assert!(
            text.contains("peer ray: skipped (ray took over 300s)"),
            "{text}"
        );
        assert!(
            text.contains("peer hyperqueue: skipped (hyperqueue is not installed)"),
            "{text}"
        );
        assert!(!text.contains("vs ray"), "{text}");
    }

    #[test]
    fn a_kept_run_directory_holds_one_round() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let kept = Placement::Kept(PathBuf::from("/nonexistent/run"));
        let err = compare(
            &runtime,
            &comparison(Vec::new()).options,
            &kept,
            None,
            2,
            None,
            |_| {},
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("can hold one round, not 2"),
            "{err}"
        );
    }
}

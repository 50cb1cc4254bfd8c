//! `hpcagent bench`: the project's benchmarks, each against a peer measured
//! in the same run (see `hpcagent_bench`; results in docs/benchmarks.md).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use hpcagent_bench::{
    agreement, campaign, dispatch, judge, judge_peer, peers, scale, startup, stats,
};

use super::judge::runtime;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Lease throughput of the control plane and store, against Ray and HyperQueue.
    Dispatch(DispatchArgs),
    /// From `hpcagent up` to every agent and judge ready, against srun and Ray.
    Startup(StartupArgs),
    /// A grade against the same work by hand, and a cached resubmission.
    Judge(JudgeArgs),
    /// The judge's busy time over a baseline-policy campaign, against the same work by hand.
    Campaign(CampaignArgs),
    /// Speedups on HPCAgent-Bench's tasks against its own judge's, on the C its translator emits.
    Agreement(AgreementArgs),
    /// The orchestrator's CPU and memory for a simulated 1,000-node allocation.
    Scale(ScaleArgs),
    /// The simulated instances of `bench scale` (started by it).
    #[command(hide = true)]
    ScaleAgents(ScaleAgentsArgs),
}

#[derive(Debug, Args)]
struct DispatchArgs {
    /// Agents in all.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// Agents per agent instance (one instance per agent node).
    #[arg(long, default_value_t = 10)]
    workers: usize,
    #[arg(long, default_value_t = 4)]
    judges: usize,
    #[arg(long, default_value_t = 20_000)]
    tasks: usize,
    /// Keep the campaign's store and attempts here, for one round (default:
    /// a fresh directory per run, on /dev/shm when it is a memory
    /// filesystem, and one more run on the temporary directory's disk).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Rounds of hpcagent and its peers, an odd number; ratios are the
    /// median of the rounds'.
    #[arg(long, default_value_t = 5, value_parser = odd_count, conflicts_with = "run_dir")]
    rounds: usize,
    /// Trivial tasks each peer runs (Ray) or is submitted (HyperQueue).
    #[arg(long, default_value_t = 10_000)]
    peer_tasks: usize,
    /// Measure hpcagent only.
    #[arg(long)]
    no_peers: bool,
    /// Print each hpcagent run's outcome as a line of JSON (no peers).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct StartupArgs {
    /// The campaign whose agents and judges must get ready.
    #[arg(long, default_value = "examples/local.env")]
    env: PathBuf,
}

#[derive(Debug, Args)]
struct JudgeArgs {
    /// Rounds of (by hand, new source, cached); each ratio is the median of the rounds'.
    #[arg(long, default_value_t = 11)]
    repeats: usize,
    /// HPCAgent-Bench's `hpcagent-bench` executable (scripts/bench-peers.sh
    /// installs it from a checkout): then its judge is measured beside
    /// hpcagent's on its gemm at its S, after the bench above.
    #[arg(long, value_name = "EXE", requires = "hab_corpus")]
    peer_hab: Option<PathBuf>,
    /// The HPCAgent-Bench corpus both judges grade from
    /// (`<checkout>/hpcagent_bench/benchmarks`).
    #[arg(long, value_name = "DIR")]
    hab_corpus: Option<PathBuf>,
    /// Rounds of the comparison with HPCAgent-Bench's judge.
    #[arg(long, default_value_t = 3)]
    peer_rounds: usize,
    /// CPU-bound processes to spin on the node through the comparison with
    /// HPCAgent-Bench's judge: a node where other work runs.
    #[arg(long, default_value_t = 0, value_name = "N")]
    noise: usize,
}

#[derive(Debug, Args)]
struct AgreementArgs {
    /// HPCAgent-Bench's `hpcagent-bench` executable (scripts/bench-peers.sh
    /// installs it from a checkout).
    #[arg(long, value_name = "EXE")]
    peer_hab: PathBuf,
    /// The HPCAgent-Bench corpus both judges grade from
    /// (`<checkout>/hpcagent_bench/benchmarks`).
    #[arg(long, value_name = "DIR")]
    hab_corpus: PathBuf,
    /// Kernels to draw, across the tracks.
    #[arg(long, default_value_t = 10)]
    kernels: usize,
    /// The draw's seed: the same seed, the same kernels.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only this kernel, by its key (repeatable; instead of a draw).
    #[arg(long = "kernel", value_name = "KEY")]
    only: Vec<String>,
    /// Grades of each kernel by each judge, a round over the sample at a time; each judge's median is compared.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CampaignArgs {
    /// The campaign's preset: where the corpus's calls take 0.1–1 s.
    #[arg(long, default_value = "M")]
    preset: hpcagent_corpus::Preset,
    /// Only these kernels (repeatable; default: the whole corpus).
    #[arg(long = "kernel", value_name = "NAME")]
    kernels: Vec<String>,
    /// Where the campaign runs, kept after the bench (default: a new
    /// directory in the temporary one); a campaign that finished there is
    /// measured again, not run again.
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ScaleArgs {
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    #[arg(long, default_value_t = 10_000)]
    agents: usize,
    /// Seconds of each measured phase (heartbeats only, then with leases).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
}

#[derive(Debug, Args)]
struct ScaleAgentsArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    tokens: PathBuf,
    #[arg(long)]
    workers: u32,
    #[arg(long)]
    seconds: u64,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.bench {
        Bench::Dispatch(a) => dispatch_bench(a),
        Bench::Startup(a) => startup_bench(a),
        Bench::Judge(a) => judge_bench(a),
        Bench::Campaign(a) => campaign_bench(a),
        Bench::Agreement(a) => agreement_bench(a),
        Bench::Scale(a) => scale_bench(a),
        Bench::ScaleAgents(a) => {
            runtime()?.block_on(scale::agents(&a.url, &a.tokens, a.workers, a.seconds))
        }
    }
}

fn scratch(name: &str) -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("hpcagent-bench-{name}-"))
        .tempdir()
        .context("cannot make a scratch directory")
}

fn exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find the hpcagent executable")
}

/// An odd count, so that the median of the rounds is one of them.
fn odd_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n % 2 == 1 => Ok(n),
        Ok(n) => Err(format!(
            "{n} is not odd: the median of the rounds is one of them"
        )),
        Err(e) => Err(e.to_string()),
    }
}

fn dispatch_bench(a: DispatchArgs) -> anyhow::Result<()> {
    let options = dispatch::Options {
        agents: a.agents,
        workers: a.workers,
        judges: a.judges,
        tasks: a.tasks,
    };
    let ((placement, on_disk), rounds) = match a.run_dir {
        Some(dir) => ((dispatch::Placement::Kept(dir), None), 1),
        None => (dispatch::Placement::scratch(), a.rounds),
    };
    let peers = (!a.no_peers && !a.json).then_some(a.peer_tasks);
    let comparison = dispatch::compare(
        &runtime()?,
        &options,
        &placement,
        on_disk.as_ref(),
        rounds,
        peers,
        |line| eprintln!("{line}"),
    )?;
    super::end_quietly_when_stdout_closes();
    if a.json {
        let runs = comparison.rounds.iter().map(|r| &r.ours);
        let on_disk = comparison
            .on_disk
            .iter()
            .filter_map(|(_, o)| o.as_ref().ok());
        for outcome in runs.chain(on_disk) {
            println!("{}", serde_json::to_string(outcome)?);
        }
        return Ok(());
    }
    println!("{}", dispatch::render(&comparison));
    Ok(())
}

fn startup_bench(a: StartupArgs) -> anyhow::Result<()> {
    // It measures child processes and reads the store: no socket of its own.
    super::end_quietly_when_stdout_closes();
    let scratch = scratch("startup")?;
    let options = startup::Options {
        exe: exe()?,
        repo: std::env::current_dir()?,
        env: std::path::absolute(&a.env)?,
        work_dir: scratch.path().to_path_buf(),
    };
    let local = startup::measure(&options, startup::Executor::Local)?;
    println!("hpcagent up, local executor: every agent and judge ready in {local:.2} s");
    let config = hpcagent_common::config::load(Some(&options.env), Vec::new())?;
    let nodes = config.node_total();
    match peers::srun_true() {
        Ok(srun) => {
            println!("peer srun: one `srun true` in {srun:.2} s");
            let on_slurm = startup::measure(&options, startup::Executor::Slurm { nodes })?;
            println!(
                "hpcagent up, Slurm executor ({nodes} nodes): every agent and judge ready in \
                 {on_slurm:.2} s = {:.2} s + one srun [target ≤ 1.5 s + one srun]",
                on_slurm - srun
            );
            report_ray_startup(on_slurm);
        }
        Err(why) => {
            println!(
                "{}",
                stats::skipped("srun (and the Slurm executor)", &why.to_string())
            );
            report_ray_startup(local);
        }
    }
    Ok(())
}

fn report_ray_startup(ours: f64) {
    match peers::ray_startup() {
        Ok(ray) => {
            println!("peer ray: a head and one worker node alive in {ray:.2} s");
            println!(
                "{}",
                stats::ratio_line("ray vs hpcagent", ray / ours, "the time", "—")
            );
        }
        Err(why) => println!("{}", stats::skipped("ray", &why.to_string())),
    }
}

fn judge_bench(a: JudgeArgs) -> anyhow::Result<()> {
    let scratch = scratch("judge")?;
    let options = judge::Options {
        exe: exe()?,
        repo: std::env::current_dir()?,
        repeats: a.repeats,
        work_dir: scratch.path().to_path_buf(),
    };
    let outcome = judge::run_bench(&options)?;
    println!("{}", judge::render(&outcome, a.repeats));
    if let (Some(peer), Some(corpus)) = (a.peer_hab, a.hab_corpus) {
        let options = judge_peer::Options {
            exe: exe()?,
            repo: std::env::current_dir()?,
            corpus: std::path::absolute(corpus)?,
            peer,
            rounds: a.peer_rounds,
            work_dir: scratch.path().join("peer"),
            noise: a.noise,
        };
        // Measured whole before printing: once stdout may end the process
        // quietly, a write to a peer that went away would end it too.
        let outcomes = judge_peer::run_bench(&options)?;
        super::end_quietly_when_stdout_closes();
        for outcome in outcomes {
            println!("{}", judge_peer::render(&outcome));
        }
    }
    Ok(())
}

fn agreement_bench(a: AgreementArgs) -> anyhow::Result<()> {
    let scratch = scratch("agreement")?;
    let options = agreement::Options {
        exe: exe()?,
        repo: std::env::current_dir()?,
        corpus: std::path::absolute(a.hab_corpus)?,
        peer: a.peer_hab,
        kernels: a.kernels,
        seed: a.seed,
        only: a.only,
        rounds: a.rounds,
        work_dir: scratch.path().to_path_buf(),
    };
    let outcome = agreement::run_bench(&options)?;
    super::end_quietly_when_stdout_closes();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        println!("{}", agreement::render(&outcome));
    }
    // The summary is printed, but a bench that could not compare every
    // kernel did not measure what it was asked to.
    let failed = outcome.rows.iter().filter(|row| row.peer_failed).count();
    anyhow::ensure!(
        failed == 0,
        "HPCAgent-Bench's judge failed its requests for {failed} kernel(s): those are not compared"
    );
    Ok(())
}

fn campaign_bench(a: CampaignArgs) -> anyhow::Result<()> {
    let scratch = scratch("campaign")?;
    let options = campaign::Options {
        exe: exe()?,
        repo: std::env::current_dir()?,
        preset: a.preset,
        kernels: a.kernels,
        work_dir: scratch.path().to_path_buf(),
        run_dir: match a.run_dir {
            Some(dir) => std::path::absolute(dir)?,
            None => std::env::temp_dir().join(format!(
                "hpcagent-bench-campaign-{}",
                hpcagent_orchestrator::store::now() as u64
            )),
        },
    };
    let outcome = campaign::run_bench(&options)?;
    super::end_quietly_when_stdout_closes();
    println!("{}", campaign::render(&outcome));
    Ok(())
}

fn scale_bench(a: ScaleArgs) -> anyhow::Result<()> {
    let scratch = scratch("scale")?;
    let options = scale::Options {
        nodes: a.nodes,
        agents: a.agents,
        seconds: a.seconds,
        run_dir: scratch.path().join("run"),
        exe: exe()?,
    };
    let outcome = runtime()?.block_on(scale::run(&options))?;
    super::end_quietly_when_stdout_closes();
    println!("{}", scale::render(&outcome));
    Ok(())
}

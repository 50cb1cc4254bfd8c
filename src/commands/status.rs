//! `hpcagent status`: a campaign now, from its running orchestrator, or from
//! its store once it has ended.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use hpcagent_orchestrator::campaign::ENDPOINT_FILE;
use hpcagent_orchestrator::slurm::chain;
use hpcagent_orchestrator::slurm::sbatch::BATCH_LOG;
use hpcagent_orchestrator::store::{self, Reader};
use hpcagent_proto::v1 as pb;

use super::ConfigFlags;
use super::judge::runtime;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The campaign's run directory.
    #[arg(conflicts_with = "job")]
    run_dir: Option<PathBuf>,
    /// The Slurm job of the campaign (its run directory is RUN_ROOT/<job>).
    #[arg(long)]
    job: Option<String>,
    #[command(flatten)]
    config: ConfigFlags,
    #[arg(long)]
    json: bool,
}

pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    let run_dir = match (&args.run_dir, &args.job) {
        (Some(dir), _) => dir.clone(),
        (None, Some(job)) => args.config.load(Vec::new())?.settings.run_root.0.join(job),
        (None, None) => anyhow::bail!("name a run directory or --job ID"),
    };
    let endpoint = run_dir.join(ENDPOINT_FILE);
    let answer = if endpoint.is_file() {
        Some(runtime()?.block_on(live(&endpoint)))
    } else {
        None
    };
    // The runtime, and the connection with it, are gone: only printing is left.
    super::end_quietly_when_stdout_closes();
    match answer {
        Some(Ok(snapshot)) => print_live(&snapshot, &run_dir, args.json),
        Some(Err(e)) => {
            eprintln!("the orchestrator does not answer ({e:#}); reading the store");
            stored(&run_dir, args.json)
        }
        None => stored(&run_dir, args.json),
    }
}

async fn live(endpoint: &std::path::Path) -> anyhow::Result<pb::StatusSnapshot> {
    let text =
        std::fs::read_to_string(endpoint).with_context(|| format!("{}", endpoint.display()))?;
    let info: serde_json::Value = serde_json::from_str(&text)?;
    let address = info["address"].as_str().context("no address")?;
    let token = info["observer_token"].as_str().context("no token")?;
    let mut client = hpcagent_common::connect(address, token).await?;
    let mut stream = client
        .watch_status(pb::WatchStatusRequest {})
        .await?
        .into_inner();
    stream.message().await?.context("the stream ended at once")
}

fn print_live(s: &pb::StatusSnapshot, run_dir: &Path, json: bool) -> anyhow::Result<()> {
    let jobs = jobs(run_dir);
    // The store is on disk beside the orchestrator, which writes each
    // attempt's end as it comes: read, it says how agents ended so far.
    let ends = Reader::open(run_dir)
        .ok()
        .and_then(|reader| attempt_ends(&reader).ok())
        .unwrap_or_default();
    if json {
        let roles: Vec<serde_json::Value> = s
            .roles
            .iter()
            .map(|r| serde_json::json!({"instance": r.instance, "node": r.node, "state": r.state, "restarts": r.restarts, "endpoint": r.endpoint, "detail": r.detail}))
            .collect();
        let value = serde_json::json!({
            "campaign": s.campaign, "run_dir": s.run_dir, "running": true,
            "tasks": {"total": s.tasks_total, "settled": s.tasks_settled, "running": s.tasks_running,
                      "failed": s.tasks_failed, "pending": s.tasks_pending},
            "grades_per_minute": s.grades_per_minute, "draining": s.draining, "elapsed_s": s.elapsed_s,
            "attempts": ends, "roles": roles, "jobs": jobs_json(&jobs),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("campaign {} (running, {:.0} s)", s.campaign, s.elapsed_s);
    println!(
        "tasks: {} total, {} settled, {} running, {} pending, {} failed{}",
        s.tasks_total,
        s.tasks_settled,
        s.tasks_running,
        s.tasks_pending,
        s.tasks_failed,
        if s.draining { " (draining)" } else { "" }
    );
    println!("grades per minute: {:.1}", s.grades_per_minute);
    print_ends(&ends);
    print_jobs(&jobs);
    for r in &s.roles {
        println!(
            "  {:14} {:10} {:10} restarts {} {} {}",
            r.instance, r.node, r.state, r.restarts, r.endpoint, r.detail
        );
    }
    Ok(())
}

fn stored(run_dir: &Path, json: bool) -> anyhow::Result<()> {
    if !run_dir.join(store::FILE_NAME).exists() && run_dir.join(BATCH_LOG).exists() {
        return before_campaign(run_dir, json);
    }
    let jobs = jobs(run_dir);
    let reader = Reader::open(run_dir)?;
    let campaign = reader.campaign()?.context("no campaign in this store")?;
    let (id, state, started, ended) = (
        campaign.id,
        campaign.state,
        campaign.started_at,
        campaign.ended_at,
    );
    let tasks = reader.tasks()?;
    let count = |s: &str| tasks.iter().filter(|t| t.state == s).count();
    let by_agents = tasks.iter().filter(|t| t.by_agent()).count();
    let agents_failed = tasks.iter().filter(|t| t.agent_failed()).count();
    let ends = attempt_ends(&reader)?;
    if json {
        let value = serde_json::json!({
            "campaign": id, "run_dir": run_dir, "running": false, "state": state,
            "tasks": {"total": tasks.len(), "settled": count("settled"), "running": count("leased"),
                      "failed": count("failed"), "pending": count("pending"),
                      "settled_by_agents": by_agents, "agents_failed": agents_failed},
            "attempts": ends, "elapsed_s": ended.map(|e| e - started), "jobs": jobs_json(&jobs),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("campaign {id} ({state})");
    println!(
        "tasks: {} total, {} settled ({by_agents} by their agents), {} failed, {} not finished; \
         agents failed on {agents_failed}",
        tasks.len(),
        count("settled"),
        count("failed"),
        count("pending") + count("leased")
    );
    print_ends(&ends);
    print_jobs(&jobs);
    Ok(())
}

/// How the agents' attempts ended, by the end's word (`running` for one
/// that has not): the ends `results` and the report give per task,
/// counted, so that a campaign whose agents never ran does not read as
/// one whose agents found nothing.
fn attempt_ends(reader: &Reader) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut ends = BTreeMap::new();
    for attempt in reader.attempts()? {
        let end = match (attempt.ended_at, attempt.outcome.as_str()) {
            (None, _) | (_, "") => "running".to_string(),
            (Some(_), word) => word.to_string(),
        };
        *ends.entry(end).or_insert(0) += 1;
    }
    Ok(ends)
}

fn print_ends(ends: &BTreeMap<String, usize>) {
    if ends.is_empty() {
        return;
    }
    let counts: Vec<String> = ends.iter().map(|(end, n)| format!("{n} {end}")).collect();
    println!("agents' attempts: {}", counts.join(", "));
}

/// A submitted run whose campaign has no store: its job is queued or
/// starting, or it ended before `up` began the campaign (a refused
/// configuration, say), which its batch log tells.
fn before_campaign(run_dir: &Path, json: bool) -> anyhow::Result<()> {
    let job = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let slurm = chain::job_state(&job);
    // squeue lists an ended job for a while (MinJobAge) in its final state.
    let live = ["PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "SUSPENDED"];
    let state = match &slurm {
        Some(s) if live.contains(&s.as_str()) => "starting",
        _ => "never started",
    };
    let log = std::fs::read_to_string(run_dir.join(BATCH_LOG)).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(8)..].join("\n");
    if json {
        let value = serde_json::json!({
            "run_dir": run_dir, "running": false, "state": state,
            "job": job, "slurm_state": slurm.as_deref().map(str::to_lowercase),
            "log_tail": tail, "jobs": [],
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    match (state, slurm) {
        ("starting", Some(s)) => {
            println!(
                "job {job} is {}; its campaign has not begun",
                s.to_lowercase()
            )
        }
        _ => println!("job {job} ended before its campaign began; {BATCH_LOG} ends:\n{tail}"),
    }
    Ok(())
}

/// A Slurm job of the campaign's chain, with how it ended or Slurm's state
/// of it now.
#[derive(Debug)]
struct Job {
    job: String,
    link: u32,
    state: String,
}

fn jobs(run_dir: &Path) -> Vec<Job> {
    chain::read(run_dir)
        .into_iter()
        .map(|l| {
            let state = l.outcome.unwrap_or_else(|| {
                chain::job_state(&l.job).map_or("ended unrecorded".into(), |s| s.to_lowercase())
            });
            Job {
                job: l.job,
                link: l.link,
                state,
            }
        })
        .collect()
}

fn jobs_json(jobs: &[Job]) -> Vec<serde_json::Value> {
    jobs.iter()
        .map(|j| serde_json::json!({"job": j.job, "link": j.link, "state": j.state}))
        .collect()
}

fn print_jobs(jobs: &[Job]) {
    if jobs.is_empty() {
        return;
    }
    let chain: Vec<String> = jobs
        .iter()
        .map(|j| format!("{} ({})", j.job, j.state))
        .collect();
    println!("jobs: {}", chain.join(" → "));
}

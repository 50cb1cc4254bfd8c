//! `hpcagent status`: a campaign now, from its running orchestrator, or from
//! its store once it has ended.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use hpcagent_orchestrator::campaign::ENDPOINT_FILE;
use hpcagent_orchestrator::client;
use hpcagent_orchestrator::store::Reader;
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
        Some(Ok(snapshot)) => print_live(&snapshot, args.json),
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
    let mut client = client::connect(address, token).await?;
    let mut stream = client
        .watch_status(pb::WatchStatusRequest {})
        .await?
        .into_inner();
    stream.message().await?.context("the stream ended at once")
}

fn print_live(s: &pb::StatusSnapshot, json: bool) -> anyhow::Result<()> {
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
            "roles": roles,
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
    for r in &s.roles {
        println!(
            "  {:14} {:10} {:10} restarts {} {} {}",
            r.instance, r.node, r.state, r.restarts, r.endpoint, r.detail
        );
    }
    Ok(())
}

fn stored(run_dir: &std::path::Path, json: bool) -> anyhow::Result<()> {
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
    if json {
        let value = serde_json::json!({
            "campaign": id, "run_dir": run_dir, "running": false, "state": state,
            "tasks": {"total": tasks.len(), "settled": count("settled"), "running": count("leased"),
                      "failed": count("failed"), "pending": count("pending")},
            "elapsed_s": ended.map(|e| e - started),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("campaign {id} ({state})");
    println!(
        "tasks: {} total, {} settled, {} failed, {} not finished",
        tasks.len(),
        count("settled"),
        count("failed"),
        count("pending") + count("leased")
    );
    Ok(())
}

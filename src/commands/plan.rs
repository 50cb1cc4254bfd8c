//! `hpcagent plan`: the placement of a campaign on an allocation, without
//! launching anything.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use hpcagent_common::config::Config;
use hpcagent_common::plan::Plan;
use hpcagent_orchestrator::allocation::{Allocation, Sourced};
use hpcagent_orchestrator::placement;

use super::ConfigFlags;

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    config: ConfigFlags,
    /// Plan for these nodes (a Slurm hostlist) instead of the current allocation.
    #[arg(long, value_name = "EXPR")]
    nodelist: Option<String>,
    /// GPUs per node of the described allocation (checked against GPUS_PER_NODE).
    #[arg(long, value_name = "N", requires = "nodelist")]
    gpus_per_node: Option<u32>,
    /// CPUs per node of the described allocation (default: CPUS_PER_NODE).
    #[arg(long, value_name = "N", requires = "nodelist")]
    cpus_per_node: Option<u32>,
    /// The run directory the plan's paths point into (default: RUN_ROOT/<job id>).
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the plan as JSON to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let config = args.config.load(Vec::new())?;
    let (allocation, note) = allocation(&args, &config)?;
    let run_dir = match &args.run_dir {
        Some(dir) => std::path::absolute(dir)?,
        None => default_run_dir(&config, &allocation),
    };
    let layout = super::layout(&config, run_dir)?;
    let plan = placement::place(&config, &allocation, &layout)?;
    // A plan may be made away from the corpus (for another machine); where
    // the corpus is here, its tasks are checked as `up` would.
    let corpus = super::corpus_root(&config)?;
    if corpus.exists() {
        hpcagent_orchestrator::campaign::tasks::from_corpus(&config, &corpus)?;
    }
    if let Some(path) = &args.write {
        write_json(&plan, path)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        if let Some(note) = note {
            println!("{note}");
        }
        print!("{}", plan.render());
    }
    Ok(())
}

/// The allocation to plan for: described by flags, the current job, or (outside
/// Slurm) as many stand-in nodes as the configuration needs.
fn allocation(args: &PlanArgs, config: &Config) -> anyhow::Result<(Allocation, Option<String>)> {
    if let Some(nodelist) = &args.nodelist {
        let flag = |value, flag: &str| Sourced {
            value,
            source: flag.to_string(),
        };
        let allocation = Allocation::from_nodelist(
            nodelist,
            args.gpus_per_node.map(|n| flag(n, "--gpus-per-node")),
            args.cpus_per_node.map(|n| flag(n, "--cpus-per-node")),
        )?;
        return Ok((allocation, None));
    }
    if let Some(allocation) = Allocation::from_env(&|name| std::env::var(name).ok())? {
        return Ok((allocation, None));
    }
    let total = config.node_total();
    let nodelist = if total == 1 {
        "node1".to_string()
    } else {
        format!("node[1-{total}]")
    };
    let note = format!(
        "not in a Slurm allocation: planning on {total} stand-in nodes ({nodelist}); use --nodelist to name real ones\n"
    );
    Ok((
        Allocation::from_nodelist(&nodelist, None, None)?,
        Some(note),
    ))
}

fn default_run_dir(config: &Config, allocation: &Allocation) -> PathBuf {
    let name = allocation
        .job_id
        .clone()
        .unwrap_or_else(|| "dry-run".into());
    config.settings.run_root.0.join(name)
}

/// Writes the plan whole: a reader never sees half a plan.
fn write_json(plan: &Plan, path: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(plan)? + "\n";
    hpcagent_common::files::write_atomic(path, json.as_bytes(), 0o644)
        .with_context(|| format!("cannot write {}", path.display()))
}

//! `hpcagent submit`: validate, plan, and submit the campaign as one Slurm job.

use anyhow::Context;
use clap::Args;
use hpcagent_orchestrator::allocation::Allocation;
use hpcagent_orchestrator::placement;
use hpcagent_orchestrator::slurm::chain;
use hpcagent_orchestrator::slurm::edf;
use hpcagent_orchestrator::slurm::sbatch::{self, Campaign};
use std::path::PathBuf;

use super::ConfigFlags;

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    config: ConfigFlags,
    /// Continue the campaign of this run directory in a new job (after a
    /// drain, a time limit or a failure): settled tasks are not run again.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "env_file")]
    resume: Option<PathBuf>,
    /// Print the sbatch command and the rendered script; submit nothing.
    #[arg(long)]
    dry_run: bool,
    /// Extra sbatch arguments, after `--` (e.g. `-- --reservation=r1`).
    #[arg(last = true, value_name = "SBATCH_ARGS")]
    sbatch_args: Vec<String>,
}

pub fn run(args: SubmitArgs) -> anyhow::Result<()> {
    let (config, campaign) = match &args.resume {
        Some(dir) => {
            let (config, dir) = args.config.load_run_dir(dir)?;
            // One job at a time on a run directory: a second would wait on
            // its lock at best, and at worst run after the campaign ended.
            if let Some((job, state)) = chain::active_job(&dir) {
                anyhow::bail!(
                    "job {job} of this campaign is {} ({}); it continues the campaign \
                     (scancel {job} first to resume it with another job)",
                    state.to_lowercase(),
                    dir.display()
                );
            }
            (config, Campaign::Resume(dir))
        }
        None => (args.config.load(Vec::new())?, Campaign::New),
    };
    let exe = std::env::current_exe().context("cannot find the hpcagent executable")?;
    // Refuse a plan that cannot work before Slurm queues it for hours.
    let total = config.node_total();
    let stand_in = Allocation::from_nodelist(&format!("node[1-{total}]"), None, None)?;
    let layout = super::layout(&config, config.settings.run_root.0.join("%j"))?;
    let plan = placement::place(&config, &stand_in, &layout)?;
    hpcagent_orchestrator::campaign::tasks::from_corpus(&config, &super::corpus_root(&config)?)?;
    // The container images must be there before the job waits in the queue.
    let containers = edf::check_plan(&config, &plan);

    let job = sbatch::prepare(&config, &exe, campaign, &args.sbatch_args)?;
    if args.dry_run {
        println!("# {total} nodes; the script goes on stdin:");
        println!("{} <<'SCRIPT'", job.command_line());
        print!("{}", job.script);
        println!("SCRIPT");
        // The script is shown either way; a job that would be refused
        // exits as the submit itself would (a dry run that exits 0 reads
        // as one that would work).
        if containers.is_err() {
            eprintln!("the job would be refused:");
        }
        return Ok(containers?);
    }
    containers?;
    let submitted = sbatch::submit(&job)?;
    println!("submitted job {}", submitted.job_id);
    println!("run directory {}", submitted.run_dir.display());
    Ok(())
}

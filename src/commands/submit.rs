//! `hpcagent submit`: validate, plan, and submit the campaign as one Slurm job.

use anyhow::Context;
use clap::Args;
use hpcagent_orchestrator::allocation::Allocation;
use hpcagent_orchestrator::placement::{self, Layout};
use hpcagent_orchestrator::slurm::sbatch;

use super::ConfigFlags;

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    config: ConfigFlags,
    /// Print the sbatch command and the rendered script; submit nothing.
    #[arg(long)]
    dry_run: bool,
    /// Extra sbatch arguments, after `--` (e.g. `-- --reservation=r1`).
    #[arg(last = true, value_name = "SBATCH_ARGS")]
    sbatch_args: Vec<String>,
}

pub fn run(args: SubmitArgs) -> anyhow::Result<()> {
    let config = args.config.load(Vec::new())?;
    let exe = std::env::current_exe().context("cannot find the hpcagent executable")?;
    // Refuse a plan that cannot work before Slurm queues it for hours.
    let total = sbatch::node_total(&config);
    let stand_in = Allocation::from_nodelist(&format!("node[1-{total}]"), None, None)?;
    let layout = Layout {
        run_dir: config.settings.run_root.0.join("%j"),
        exe: exe.clone(),
    };
    placement::place(&config, &stand_in, &layout)?;

    let job = sbatch::prepare(&config, &exe, &args.sbatch_args)?;
    if args.dry_run {
        println!("# {total} nodes; the script goes on stdin:");
        println!("{} <<'SCRIPT'", job.command_line());
        print!("{}", job.script);
        println!("SCRIPT");
        return Ok(());
    }
    let submitted = sbatch::submit(&job)?;
    println!("submitted job {}", submitted.job_id);
    println!("run directory {}", submitted.run_dir.display());
    Ok(())
}

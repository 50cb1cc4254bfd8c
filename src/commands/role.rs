//! `hpcagent role <role>`: what runs inside a role step (started by `up`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::judge::runtime;

#[derive(Debug, Args)]
pub struct RoleArgs {
    #[command(subcommand)]
    role: RoleCommand,
}

#[derive(Debug, Subcommand)]
enum RoleCommand {
    /// Serve grades for the campaign.
    Judge(Instance),
    /// Work the campaign's tasks.
    Agent(Instance),
    /// Run this rank of a vLLM server of the plan.
    Inference(Instance),
}

#[derive(Debug, Args)]
struct Instance {
    /// The campaign's run directory (holds plan.json and env.resolved).
    #[arg(long)]
    run_dir: PathBuf,
    /// This instance's name in the plan, e.g. judge-0.
    #[arg(long)]
    instance: String,
}

pub fn run(args: RoleArgs) -> anyhow::Result<()> {
    super::init_logging();
    // The role's environment holds its tokens (and a judge's held-out secret):
    // processes of the same user (an agent CLI, a submission run without a
    // user of its own) must not read them from /proc.
    // SAFETY: prctl on this process only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
    match args.role {
        RoleCommand::Judge(i) => {
            runtime()?.block_on(hpcagent_judge::role::run(&i.run_dir, &i.instance))
        }
        RoleCommand::Agent(i) => {
            runtime()?.block_on(hpcagent_agent::pool::run(&i.run_dir, &i.instance))
        }
        RoleCommand::Inference(i) => {
            runtime()?.block_on(hpcagent_inference::run(&i.run_dir, &i.instance))
        }
    }
}

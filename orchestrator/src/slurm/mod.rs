//! Slurm, driven through its commands (`srun`, `sbatch`, `scontrol`, `scancel`).
//!
//! No Slurm library: the commands are the stable interface across versions and
//! sites. This module knows their flags and the Slurm 22.05 behaviours the
//! orchestrator relies on; it does not decide placement.

pub mod chain;
pub mod edf;
pub mod hetjob;
pub mod sbatch;

use std::path::Path;

/// One role step as `srun` must be told about it.
#[derive(Debug, Clone)]
pub struct StepSpec<'a> {
    /// `--job-name`: how the step is found again (`squeue -s`), since step ids
    /// follow the controller's creation order, not launch order.
    pub name: &'a str,
    /// One task per node, in rank order.
    pub nodes: &'a [String],
    pub cpus_per_task: u32,
    /// `Some(n)` gives `--gres=gpu:n` (`0` for CPU-only steps: a step without
    /// `--gres` takes every GPU of its nodes); `None` when the nodes have none.
    pub gpus: Option<u32>,
    /// `--het-group`: the component of a heterogeneous job the step runs in.
    pub het_group: Option<usize>,
    /// `--environment=<EDF>` for the Container Engine, per step (not `#SBATCH`).
    pub edf: Option<&'a str>,
    /// Where the step's `stdout` and `stderr` go.
    pub log_dir: &'a Path,
    pub command: &'a [String],
}

/// The `srun` argument vector for a step.
///
/// `--exact` with `--cpus-per-task` because without them a step takes all CPUs
/// of its nodes and the next step on the node waits ("Requested nodes are
/// busy"). `--kill-on-bad-exit` so one dead rank of a multi-node replica ends
/// the whole step, which the supervisor then sees.
pub fn srun_argv(step: &StepSpec<'_>) -> Vec<String> {
    let n = step.nodes.len();
    let mut argv = vec!["srun".to_string(), format!("--job-name={}", step.name)];
    if let Some(group) = step.het_group {
        argv.push(format!("--het-group={group}"));
    }
    argv.extend([
        format!("--nodes={n}"),
        format!("--ntasks={n}"),
        "--ntasks-per-node=1".into(),
        format!("--nodelist={}", crate::hostlist::compress(step.nodes)),
        "--exact".into(),
        format!("--cpus-per-task={}", step.cpus_per_task),
    ]);
    if let Some(gpus) = step.gpus {
        argv.push(format!("--gres=gpu:{gpus}"));
    }
    if let Some(edf) = step.edf {
        argv.push(format!("--environment={edf}"));
    }
    argv.push("--kill-on-bad-exit=1".into());
    // A restarted step adds to its logs instead of erasing the evidence.
    argv.push("--open-mode=append".into());
    argv.push(format!(
        "--output={}",
        step.log_dir.join("stdout").display()
    ));
    argv.push(format!("--error={}", step.log_dir.join("stderr").display()));
    argv.extend(step.command.iter().cloned());
    argv
}

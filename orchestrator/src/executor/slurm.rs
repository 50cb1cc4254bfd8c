//! Role instances as named `srun` steps of the allocation.
//!
//! The plan's srun line is run as a child of the orchestrator, with the role
//! environment (tokens included) in its environment, never on its command
//! line. A role reports its step (`SLURM_JOB_ID.SLURM_STEP_ID`) when it
//! registers, so launching asks the controller nothing. Its steps are looked
//! up by `--job-name` (`squeue -s`) only for instances that have not
//! registered: one query for all those slow to (is their step there at
//! all?), and on stopping one, whose srun then gets TERM, which cancels a
//! step still pending (an srun that ignores it while no step exists is
//! killed).
//! Stopping sends TERM through the controller (`scancel --ctld
//! --signal=TERM J.S`: plain `scancel J.S` SIGKILLs at once in 22.05, and
//! without `--ctld` the signal call fails when the job has other nodes), then
//! cancels the step after the grace period. Every Slurm command has a
//! timeout: a slow controller delays a stop, it does not hang the campaign.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::{Executor, LaunchError, Step, log_file};
use hpcagent_common::plan::RoleInstance;

/// The job's own requests, which sbatch exports and every srun reads as
/// its own options unless they are gone from its environment:
/// - memory: a step that asks for memory holds it, and a second step on
///   the node would wait for the first to end; without them a step is
///   given the job's memory on its node and shares it;
/// - GPUs: a step's `--gres=gpu:N` (the role's share of the node) beside
///   an inherited `--gpus-per-node` is refused by Slurm 26.05 and later
///   (`src/common/slurm_opt.c`), and `SLURM_TRES_PER_TASK` with the
///   step's own task layout ("mutually exclusive with --ntasks-per-gpu").
///   Steps state their GPUs themselves.
const NOT_INHERITED: [&str; 9] = [
    "SLURM_MEM_PER_NODE",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_SOCKET",
    "SLURM_GPUS_PER_TASK",
    "SLURM_CPUS_PER_GPU",
    "SLURM_TRES_PER_TASK",
];

pub struct SlurmExecutor {
    pub run_dir: PathBuf,
    /// The job's id, or a heterogeneous job's components' ids, as `squeue
    /// -j` takes them (comma-separated).
    pub jobs: String,
}

/// srun with `args`, the campaign's `env` and the instance's own, and none
/// of the job's requests ([`NOT_INHERITED`]).
fn srun(
    args: &[String],
    env: &[(String, String)],
    instance_env: &std::collections::BTreeMap<String, String>,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("srun");
    command
        .args(args)
        .envs(env.iter().cloned())
        .envs(instance_env.iter());
    for name in NOT_INHERITED {
        command.env_remove(name);
    }
    command
}

impl Executor for SlurmExecutor {
    async fn launch(
        &self,
        instance: &RoleInstance,
        env: &[(String, String)],
    ) -> Result<Step, LaunchError> {
        let dir = self.run_dir.join(&instance.log_dir);
        let (_, args) = instance.srun.split_first().ok_or(LaunchError::NoSrunLine)?;
        let mut command = srun(args, env, &instance.env);
        command
            .stdin(Stdio::null())
            .stdout(log_file(&dir, "srun.log")?)
            .stderr(log_file(&dir, "srun.log")?)
            .kill_on_drop(true);
        let child = command.spawn().map_err(LaunchError::Srun)?;
        let pid = child.id().ok_or(LaunchError::SrunVanished)?;
        Ok(Step {
            name: instance.name.clone(),
            child,
            pid,
            step_id: None,
        })
    }

    async fn stop(&self, step: &mut Step, grace: Duration) {
        let exited = matches!(step.child.try_wait(), Ok(Some(_)));
        let steps = match &step.step_id {
            Some(id) if exited => self.live_steps(std::slice::from_ref(id)).await,
            Some(id) => vec![id.clone()],
            None => {
                let named = self.steps_named(&step.name).await;
                if !exited {
                    // An instance that never registered holds no lease and
                    // serves nothing, and its step may not exist yet: srun
                    // waits while another step holds the node's CPUs or
                    // memory, and would start the role only once the
                    // campaign had freed them. TERM to srun cancels a pending
                    // step, and ends one that has begun.
                    // SAFETY: kill(2) on the srun this executor started (not
                    // reaped yet: only wait() reaps it).
                    unsafe { libc::kill(step.pid as i32, libc::SIGTERM) };
                    // Only a lookup that answered says there is no step.
                    if named.as_ref().is_some_and(Vec::is_empty) {
                        self.stop_pending(step).await;
                        return;
                    }
                }
                named.unwrap_or_default()
            }
        };
        for id in &steps {
            scancel(&["--ctld", "--signal=TERM", id]).await;
        }
        let stopped = if exited {
            // srun is gone already (it crashed, or its tasks ended): watch the steps.
            self.steps_gone(&steps, grace).await
        } else {
            tokio::time::timeout(grace, step.child.wait()).await.is_ok()
        };
        if !stopped {
            // No lookup first: a hung squeue would spend the time the campaign
            // gives its stops, and cancelling an ended step costs a warning.
            for id in &steps {
                scancel(&[id]).await;
            }
        }
        if tokio::time::timeout(Duration::from_secs(10), step.child.wait())
            .await
            .is_err()
        {
            let _ = step.child.kill().await;
        }
    }

    /// Those of `names` with no step in one `squeue`: their srun waits for
    /// Slurm to create it.
    async fn not_started(&self, names: &[String]) -> Option<HashMap<String, String>> {
        let steps = self.steps().await?;
        let started: HashSet<&str> = steps.iter().map(|(_, n)| n.as_str()).collect();
        Some(
            names
                .iter()
                .filter(|name| !started.contains(name.as_str()))
                .map(|name| {
                    let why = format!("Slurm has not started its step; srun waits ({HOLDERS})");
                    (name.clone(), why)
                })
                .collect(),
        )
    }

    fn name(&self) -> &'static str {
        "slurm"
    }
}

impl SlurmExecutor {
    /// Ends the srun of a step Slurm never started (TERM has been sent):
    /// nothing of the role runs, so there is nothing to wait for. srun
    /// mostly cancels its pending step on TERM at once, but has been seen
    /// to ignore it while it retries, which kept a finished campaign 20 s.
    async fn stop_pending(&self, step: &mut Step) {
        // srun may not say why for a long while (once 40 s of silence):
        // this and the supervisor's launch watch are all an operator hears.
        tracing::warn!(
            "{}: Slurm never started its step; srun was still waiting for it ({HOLDERS})",
            step.name
        );
        if tokio::time::timeout(PENDING_GRACE, step.child.wait())
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!(
            "{}: srun ignored TERM while it waited; killing it",
            step.name
        );
        let _ = step.child.kill().await;
        // In case the step began between the lookup and the kill.
        match self.steps_named(&step.name).await {
            Some(ids) => {
                for id in ids {
                    scancel(&[&id]).await;
                }
            }
            None => tracing::warn!(
                "{}: cannot tell whether its step began after all; if it did, it runs \
                 until the job ends",
                step.name
            ),
        }
    }

    /// This job's steps: (id, name); `None` when squeue did not answer.
    async fn steps(&self) -> Option<Vec<(String, String)>> {
        let out = slurm_command("squeue", &["-s", "-j", &self.jobs, "-h", "-o", "%i %j"]).await?;
        Some(
            out.lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(id, name)| (id.to_string(), name.trim().to_string()))
                .collect(),
        )
    }

    /// Step ids of this job's steps with this name; `None` when squeue did
    /// not answer.
    async fn steps_named(&self, name: &str) -> Option<Vec<String>> {
        let steps = self.steps().await?;
        Some(
            steps
                .into_iter()
                .filter(|(_, n)| n == name)
                .map(|(id, _)| id)
                .collect(),
        )
    }

    /// Whether all of `ids` end within `grace`; not when squeue cannot say.
    async fn steps_gone(&self, ids: &[String], grace: Duration) -> bool {
        let start = std::time::Instant::now();
        loop {
            let Some(listed) = self.steps().await else {
                return false;
            };
            if still_listed(ids, Some(listed)).is_empty() {
                return true;
            }
            if start.elapsed() >= grace {
                return false;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Those of `ids` that Slurm still lists.
    async fn live_steps(&self, ids: &[String]) -> Vec<String> {
        still_listed(ids, self.steps().await)
    }
}

/// Those of `ids` among the `listed` steps; all of them when squeue did not
/// answer (`None`): a step taken for gone is never cancelled, and runs until
/// the job ends, where cancelling one that has ended costs a warning.
fn still_listed(ids: &[String], listed: Option<Vec<(String, String)>>) -> Vec<String> {
    let Some(listed) = listed else {
        return ids.to_vec();
    };
    ids.iter()
        .filter(|id| listed.iter().any(|(l, _)| l == *id))
        .cloned()
        .collect()
}

/// What holds back a step Slurm has not started.
const HOLDERS: &str = "another step may hold its node's CPUs, memory or GPUs";

/// How long srun gets to cancel a pending step on TERM.
const PENDING_GRACE: Duration = Duration::from_secs(2);

/// How long one squeue or scancel may take.
const SLURM_COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs a Slurm client command; its stdout, or `None` (logged) if it failed
/// or took longer than [`SLURM_COMMAND_TIMEOUT`].
async fn slurm_command(program: &str, args: &[&str]) -> Option<String> {
    let run = tokio::process::Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(SLURM_COMMAND_TIMEOUT, run).await {
        Err(_) => {
            tracing::warn!(
                "{program} {}: no answer in {SLURM_COMMAND_TIMEOUT:?}",
                args.join(" ")
            );
            None
        }
        Ok(Err(e)) => {
            tracing::warn!("{program}: {e}");
            None
        }
        Ok(Ok(out)) if !out.status.success() => {
            tracing::warn!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            None
        }
        Ok(Ok(out)) => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
    }
}

async fn scancel(args: &[&str]) {
    slurm_command("scancel", args).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_inherits_none_of_the_jobs_gpu_or_memory_requests() {
        let command = srun(&["--gres=gpu:2".into()], &[], &Default::default());
        let removed: Vec<String> = command
            .as_std()
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        for name in [
            "SLURM_GPUS_PER_NODE",
            "SLURM_GPUS",
            "SLURM_TRES_PER_TASK",
            "SLURM_MEM_PER_NODE",
        ] {
            assert!(removed.iter().any(|r| r == name), "{name}: {removed:?}");
        }
    }

    #[test]
    fn a_step_is_taken_for_gone_only_when_squeue_answered_without_it() {
        let ids = vec!["7.0".to_string(), "7.1".to_string()];
        let listed = vec![("7.1".to_string(), "judge-0".to_string())];
        assert_eq!(still_listed(&ids, Some(listed)), ["7.1"]);
        assert_eq!(still_listed(&ids, Some(Vec::new())), Vec::<String>::new());
        assert_eq!(still_listed(&ids, None), ids, "squeue did not answer");
    }

    /// A stand-in for an srun that ignores TERM while its step is pending
    /// (no job of this id exists, so no step of it begins either).
    #[tokio::test]
    async fn an_srun_that_ignores_term_while_pending_is_killed_after_a_short_grace() {
        let dir = tempfile::tempdir().unwrap();
        let executor = SlurmExecutor {
            run_dir: dir.path().to_path_buf(),
            jobs: "4000000000".into(),
        };
        let ready = dir.path().join("trapped");
        let child = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "trap '' TERM; touch {}; while :; do sleep 0.1; done",
                ready.display()
            ))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let mut step = Step {
            name: "judge-9".into(),
            child,
            pid,
            step_id: None,
        };
        while !ready.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // SAFETY: kill(2) on the child above, not reaped yet.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        executor.stop_pending(&mut step).await;
        let status = step.child.try_wait().unwrap().expect("srun is gone");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }
}

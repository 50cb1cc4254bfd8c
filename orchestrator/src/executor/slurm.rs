//! Role instances as named `srun` steps of the allocation.
//!
//! The plan's srun line is run as a child of the orchestrator, with the role
//! environment (tokens included) in its environment, never on its command
//! line. The step is found by its `--job-name` (`squeue -s`): Slurm numbers
//! steps in the order its controller creates them, not the order they were
//! launched. Stopping sends TERM through the controller (`scancel --ctld
//! --signal=TERM J.S`: plain `scancel J.S` SIGKILLs at once in 22.05, and
//! without `--ctld` the signal call fails when the job has other nodes), then
//! cancels the step after the grace period.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Executor, Step, log_file};
use crate::plan::RoleInstance;

pub struct SlurmExecutor {
    pub run_dir: PathBuf,
    pub job_id: String,
}

impl Executor for SlurmExecutor {
    async fn launch(
        &self,
        instance: &RoleInstance,
        env: &[(String, String)],
    ) -> Result<Step, String> {
        let dir = self.run_dir.join(&instance.log_dir);
        let (_, args) = instance
            .srun
            .split_first()
            .ok_or("the plan has no srun line")?;
        let mut command = tokio::process::Command::new("srun");
        command
            .args(args)
            .envs(env.iter().cloned())
            .envs(instance.env.iter())
            .stdin(Stdio::null())
            .stdout(log_file(&dir, "srun.log")?)
            .stderr(log_file(&dir, "srun.log")?)
            .kill_on_drop(true);
        let known = self.steps_named(&instance.name).await;
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run srun: {e}"))?;
        let pid = child.id().ok_or("srun vanished at start")?;
        let step_id = self.wait_for_step(&instance.name, &known).await;
        if step_id.is_none() {
            tracing::warn!(instance = %instance.name, "step not seen in squeue yet");
        }
        Ok(Step {
            name: instance.name.clone(),
            child,
            pid,
            step_id,
        })
    }

    async fn stop(&self, step: &mut Step, grace: Duration) {
        if step.step_id.is_none() {
            step.step_id = self.steps_named(&step.name).await.pop();
        }
        if let Some(id) = &step.step_id {
            scancel(&["--ctld", "--signal=TERM", id]).await;
            if tokio::time::timeout(grace, step.child.wait()).await.is_ok() {
                return;
            }
            scancel(&[id]).await;
        }
        if tokio::time::timeout(Duration::from_secs(10), step.child.wait())
            .await
            .is_err()
        {
            let _ = step.child.kill().await;
        }
    }

    fn name(&self) -> &'static str {
        "slurm"
    }
}

impl SlurmExecutor {
    /// Step ids of this job's steps with this name.
    async fn steps_named(&self, name: &str) -> Vec<String> {
        let out = tokio::process::Command::new("squeue")
            .args(["-s", "-j", &self.job_id, "-h", "-o", "%i %j"])
            .output()
            .await;
        let Ok(out) = out else { return Vec::new() };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, n)| n.trim() == name)
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// The new step of this name (not in `known`), once Slurm lists it.
    async fn wait_for_step(&self, name: &str, known: &[String]) -> Option<String> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Some(id) = self
                .steps_named(name)
                .await
                .into_iter()
                .find(|id| !known.contains(id))
            {
                return Some(id);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }
}

async fn scancel(args: &[&str]) {
    let result = tokio::process::Command::new("scancel")
        .args(args)
        .output()
        .await;
    if let Ok(out) = result
        && !out.status.success()
    {
        tracing::warn!(
            "scancel {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
}

//! Role instances as child processes of this machine.
//!
//! Each instance runs the plan's role command in a process group of its own,
//! with its stdout and stderr in `roles/<name>/`, `HPCAGENT_NODE` naming its
//! virtual node, `HPCAGENT_PORT=0` and `HPCAGENT_HOST=127.0.0.1`: every
//! instance shares one network stack, so servers take an ephemeral port on
//! loopback and register the one they got.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::{Executor, LaunchError, Step, log_file};
use hpcagent_common::plan::RoleInstance;

pub struct LocalExecutor {
    pub run_dir: PathBuf,
}

impl Executor for LocalExecutor {
    async fn launch(
        &self,
        instance: &RoleInstance,
        env: &[(String, String)],
    ) -> Result<Step, LaunchError> {
        let dir = self.run_dir.join(&instance.log_dir);
        let (program, args) = instance
            .command
            .split_first()
            .ok_or(LaunchError::NoCommand)?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .envs(env.iter().cloned())
            .envs(instance.env.iter())
            .env(
                "HPCAGENT_NODE",
                instance
                    .nodes
                    .first()
                    .map(String::as_str)
                    .unwrap_or("local"),
            )
            .env("HPCAGENT_PORT", "0")
            .env("HPCAGENT_HOST", "127.0.0.1")
            .stdin(Stdio::null())
            .stdout(log_file(&dir, "stdout")?)
            .stderr(log_file(&dir, "stderr")?)
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn().map_err(|error| LaunchError::Start {
            program: program.clone(),
            error,
        })?;
        let pid = child.id().ok_or(LaunchError::Vanished)?;
        Ok(Step {
            name: instance.name.clone(),
            child,
            pid,
            step_id: None,
        })
    }

    async fn stop(&self, step: &mut Step, grace: Duration) {
        signal_group(step.pid, libc::SIGTERM);
        if tokio::time::timeout(grace, step.child.wait())
            .await
            .is_err()
        {
            signal_group(step.pid, libc::SIGKILL);
            let _ = step.child.wait().await;
        }
        // Whatever the role left in its group goes too.
        signal_group(step.pid, libc::SIGKILL);
    }

    /// A child process starts at once: nothing holds it back.
    async fn not_started(&self, _names: &[String]) -> Option<HashMap<String, String>> {
        None
    }

    fn name(&self) -> &'static str {
        "local"
    }
}

fn signal_group(pid: u32, signal: i32) {
    // SAFETY: kill(2) on the process group we created for the instance.
    unsafe { libc::kill(-(pid as i32), signal) };
}

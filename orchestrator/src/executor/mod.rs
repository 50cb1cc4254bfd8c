//! Executors: how a role instance of the plan becomes a running process.
//!
//! [`slurm::SlurmExecutor`] launches each instance as a named `srun` step of
//! the allocation; [`local::LocalExecutor`] runs the same role command as a
//! child process of this machine (each instance on a "virtual node"). Both
//! give the role the same environment contract, so the campaign code above
//! them is the same.

pub mod local;
pub mod slurm;

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use hpcagent_common::plan::RoleInstance;

/// A launched instance: its process (the role itself, or its `srun`).
pub struct Step {
    /// The instance name (the Slurm step's name).
    pub name: String,
    pub child: tokio::process::Child,
    pub pid: u32,
    /// `<job>.<step>` once Slurm has created the step.
    pub step_id: Option<String>,
}

/// Why an instance could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("the plan has no command")]
    NoCommand,
    #[error("the plan has no srun line")]
    NoSrunLine,
    #[error("{path}: {error}")]
    LogFile {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("cannot start {program}: {error}")]
    Start {
        program: String,
        error: std::io::Error,
    },
    #[error("cannot run srun: {0}")]
    Srun(std::io::Error),
    #[error("the process vanished at start")]
    Vanished,
    #[error("srun vanished at start")]
    SrunVanished,
}

/// Launches and stops role instances.
pub trait Executor: Send + Sync + 'static {
    /// Starts `instance` with `env` added to its environment.
    fn launch(
        &self,
        instance: &RoleInstance,
        env: &[(String, String)],
    ) -> impl Future<Output = Result<Step, LaunchError>> + Send;

    /// Asks the instance to stop (TERM), and kills it after `grace`.
    fn stop(&self, step: &mut Step, grace: Duration) -> impl Future<Output = ()> + Send;

    /// Which of the launched instances `names` the machine has not started
    /// yet, each to why; `None` when the executor cannot tell.
    fn not_started(
        &self,
        names: &[String],
    ) -> impl Future<Output = Option<HashMap<String, String>>> + Send;

    fn name(&self) -> &'static str;
}

/// Opens a role's log file for appending (a restarted role adds to it).
pub fn log_file(dir: &Path, name: &str) -> Result<std::fs::File, LaunchError> {
    let at = |path: &Path| {
        let path = path.to_path_buf();
        move |error| LaunchError::LogFile { path, error }
    };
    std::fs::create_dir_all(dir).map_err(at(dir))?;
    let path = dir.join(name);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(at(&path))
}

/// What an instance left for an operator to read when it failed, each part
/// named: the last lines of its stderr (of its stdout when it wrote no
/// stderr; a restarted role appends, so they may be an earlier launch's),
/// then those of its srun's own log. A step Slurm refused or never started
/// (an option this Slurm lacks, an unknown container environment) wrote
/// nothing else.
pub fn last_words(log_dir: &Path) -> String {
    let own = ["stderr", "stdout"]
        .into_iter()
        .map(|name| (name, log_tail(&log_dir.join(name), 50)))
        .find(|(_, tail)| !tail.trim().is_empty());
    let srun = Some(("srun.log", log_tail(&log_dir.join("srun.log"), 10)))
        .filter(|(_, tail)| !tail.trim().is_empty());
    own.into_iter()
        .chain(srun)
        .map(|(name, tail)| format!("{name}:\n{tail}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `lines` lines of a log file.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_words_are_the_role_s_then_srun_s() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        assert_eq!(last_words(dir.path()), "");
        write("srun.log", "srun: unrecognized option '--environment=x'\n");
        assert_eq!(
            last_words(dir.path()),
            "srun.log:\nsrun: unrecognized option '--environment=x'"
        );
        write("stdout", "serving\n");
        assert_eq!(
            last_words(dir.path()),
            "stdout:\nserving\nsrun.log:\nsrun: unrecognized option '--environment=x'"
        );
        write("stderr", "panicked\n");
        write("srun.log", "");
        assert_eq!(last_words(dir.path()), "stderr:\npanicked");
    }
}

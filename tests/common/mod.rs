//! Helpers shared by the CLI integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The hpcagent binary cargo built for these tests.
pub fn hpcagent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hpcagent"))
}

/// The repository root (examples, sbatch templates).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn example(name: &str) -> PathBuf {
    repo().join("examples").join(name)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks the local Slurm answers; the test command (scripts/test.sh) starts it.
pub fn require_slurm() {
    let ok = Command::new("sinfo")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Slurm answers (SLURM_CONF={:?}); run scripts/test.sh, or scripts/local-slurm/up.sh and \
         `. /tmp/hpcagent-slurm/env.sh`",
        std::env::var("SLURM_CONF").ok()
    );
}

/// One field of `scontrol show job -o <id>`.
pub fn job_field(job: &str, field: &str) -> Option<String> {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")).map(str::to_string))
}

/// Waits until the job has ended; returns its final state.
pub fn wait_for_job(job: &str, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        let state = job_field(job, "JobState").unwrap_or_default();
        if [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ]
        .contains(&state.as_str())
        {
            return state;
        }
        assert!(
            start.elapsed() < limit,
            "job {job} still {state} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

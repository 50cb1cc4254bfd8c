//! `hpcagent bench startup`: from `hpcagent up` starting to every agent and
//! judge ready, on the local executor and in a job on the local Slurm.
//!
//! The start is the `up` process's own start time (from `/proc`, so the wait
//! for a Slurm allocation is not counted); "ready" is the first `ready`
//! event of each non-inference instance in the store, stamped by the
//! orchestrator. The campaign is then stopped with TERM.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use hpcagent_orchestrator::store::Reader;

#[derive(Debug, Clone)]
pub struct Options {
    pub exe: PathBuf,
    pub repo: PathBuf,
    /// The campaign (its agents and judges are what must get ready).
    pub env: PathBuf,
    pub work_dir: PathBuf,
}

/// Where `up` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    Local,
    /// In an allocation of this many nodes, one role per node.
    Slurm {
        nodes: u32,
    },
}

/// Seconds from `up` starting to its last agent or judge ready.
pub fn measure(options: &Options, executor: Executor) -> anyhow::Result<f64> {
    let root = options.work_dir.join(match executor {
        Executor::Local => "local",
        Executor::Slurm { .. } => "slurm",
    });
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    let run_dir = root.join("run");
    let mut command = match executor {
        Executor::Local => Command::new(&options.exe),
        Executor::Slurm { nodes } => {
            let mut salloc = Command::new("salloc");
            salloc
                .arg(format!("--nodes={nodes}"))
                .args(["--exclusive", "--quiet"])
                .arg(&options.exe);
            salloc
        }
    };
    command
        .arg("up")
        .arg("--env")
        .arg(&options.env)
        .arg("--run-dir")
        .arg(&run_dir)
        .args(["--set", "KERNELS=gemm"])
        .current_dir(&options.repo)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let up = Campaign(command.spawn().context("cannot start hpcagent up")?);
    let seconds = wait_ready(&run_dir, Duration::from_secs(120));
    drop(up);
    seconds
}

/// Stops the campaign when dropped (TERM: its roles are stopped in order).
struct Campaign(Child);

impl Drop for Campaign {
    fn drop(&mut self) {
        // SAFETY: TERM to the process this bench started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn wait_ready(run_dir: &Path, limit: Duration) -> anyhow::Result<f64> {
    let started = Instant::now();
    loop {
        if let Some(seconds) = ready_after(run_dir)? {
            return Ok(seconds);
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "the roles were not all ready after {limit:?} (see {}/roles/)",
            run_dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Once every agent and judge of the plan has been ready: how long after
/// the orchestrator process started.
fn ready_after(run_dir: &Path) -> anyhow::Result<Option<f64>> {
    let (Ok(plan), Ok(endpoint)) = (
        std::fs::read_to_string(run_dir.join("plan.json")),
        std::fs::read_to_string(run_dir.join("orchestrator.json")),
    ) else {
        return Ok(None);
    };
    let plan: serde_json::Value = serde_json::from_str(&plan)?;
    let endpoint: serde_json::Value = serde_json::from_str(&endpoint)?;
    let pid = endpoint["pid"]
        .as_u64()
        .context("orchestrator.json has no pid")?;
    let waited: Vec<&str> = plan["instances"]
        .as_array()
        .context("plan.json has no instances")?
        .iter()
        .filter(|i| i["role"] != "inference")
        .filter_map(|i| i["name"].as_str())
        .collect();
    let Ok(reader) = Reader::open(run_dir) else {
        return Ok(None);
    };
    let events = reader.events().unwrap_or_default();
    let mut last = 0.0f64;
    for name in &waited {
        let first = events
            .iter()
            .find(|e| e.kind == "ready" && e.instance == *name);
        match first {
            Some(e) => last = last.max(e.at),
            None => return Ok(None),
        }
    }
    Ok(Some(last - process_start(pid as i32)?))
}

/// When process `pid` started, in Unix seconds (10 ms resolution).
fn process_start(pid: i32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("the orchestrator (pid {pid}) is gone"))?;
    // Fields after the command's closing parenthesis; starttime is field 22.
    let after = &stat[stat.rfind(')').context("odd /proc stat")? + 2..];
    let ticks: f64 = after
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .context("no start time in /proc stat")?;
    let boot: f64 = std::fs::read_to_string("/proc/stat")?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|b| b.trim().parse().ok())
        .context("no btime in /proc/stat")?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(boot + ticks / hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_started_in_the_recent_past() {
        let started = process_start(std::process::id() as i32).unwrap();
        let age = hpcagent_orchestrator::store::now() - started;
        assert!((-1.0..600.0).contains(&age), "started {age} s ago");
    }
}

//! Peers measured in the same run: Ray, HyperQueue, a bare `srun`. Each is
//! run as its own tool would be, with a time limit; one that is not
//! installed is skipped with the reason, never guessed.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Python that has the peers installed: `HPCAGENT_PEERS_PYTHON`, else
/// the venv `scripts/bench-peers.sh` makes, else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("HPCAGENT_PEERS_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
        .join(".cache/hpcagent/venv-peers/bin/python3");
    if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// Why a peer was not measured.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("cannot run {program}: {error}")]
    Run {
        program: String,
        error: std::io::Error,
    },
    #[error(transparent)]
    Wait(#[from] std::io::Error),
    #[error("{program} took over {limit:?}")]
    TimedOut { program: String, limit: Duration },
    /// It failed: its status and the last lines of its stderr.
    #[error("{program} failed ({status}): {tail}")]
    Failed {
        program: String,
        status: std::process::ExitStatus,
        tail: String,
    },
    #[error("unexpected peer output: {0:?}")]
    Output(String),
    #[error("{package} is not installed for {python} (scripts/bench-peers.sh installs it)")]
    NotInstalled { package: String, python: PathBuf },
}

/// Runs `command` to its end within `limit`; its stdout, or why not.
fn output_within(mut command: Command, limit: Duration) -> Result<String, PeerError> {
    let shown = format!("{:?}", command.get_program());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| PeerError::Run {
            program: shown.clone(),
            error,
        })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait()? {
            Some(status) => break status,
            None if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PeerError::TimedOut {
                    program: shown,
                    limit,
                });
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    if !status.success() {
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(PeerError::Failed {
            program: shown,
            status,
            tail: tail.join(" | "),
        });
    }
    Ok(out)
}

/// The number a peer script printed as `{"value": …}` on its last line.
fn value_of(out: &str) -> Result<f64, PeerError> {
    let last = out.lines().last().unwrap_or("");
    serde_json::from_str::<serde_json::Value>(last)
        .ok()
        .and_then(|v| v["value"].as_f64())
        .ok_or_else(|| PeerError::Output(last.to_string()))
}

/// Runs a peer's Python `script` (within five minutes) and reads the value
/// it printed last.
fn script_value(script: &str) -> Result<f64, PeerError> {
    let mut command = Command::new(python());
    command.args(["-c", script]);
    value_of(&output_within(command, Duration::from_secs(300))?)
}

/// Whether the peers' Python has the PyPI package `package`, or why not.
fn installed(package: &str) -> Result<(), PeerError> {
    let mut probe = Command::new(python());
    probe.args(["-c", &format!("import {package}")]);
    output_within(probe, Duration::from_secs(60))
        .map(drop)
        .map_err(|_| PeerError::NotInstalled {
            package: package.to_string(),
            python: python(),
        })
}

/// Ray: `n` trivial remote tasks on a local Ray; tasks per second.
pub fn ray_tasks(n: usize) -> Result<f64, PeerError> {
    installed("ray")?;
    let script = format!(
        r#"
import json, time, ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
@ray.remote
def nothing():
    return 0
ray.get([nothing.remote() for _ in range(200)])
start = time.perf_counter()
ray.get([nothing.remote() for _ in range({n})])
seconds = time.perf_counter() - start
ray.shutdown()
print(json.dumps({{"value": {n} / seconds}}))
"#
    );
    script_value(&script)
}

/// Ray: a head and one worker node until both are alive; seconds. Two
/// `ray start` on one host collide, so this uses Ray's own way to run
/// several nodes on one machine (`ray.cluster_utils.Cluster`, which starts
/// the same processes `ray start` does).
pub fn ray_startup() -> Result<f64, PeerError> {
    installed("ray")?;
    let script = r#"
import json, time
from ray.cluster_utils import Cluster
start = time.perf_counter()
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
seconds = time.perf_counter() - start
cluster.shutdown()
print(json.dumps({"value": seconds}))
"#;
    script_value(script)
}

/// HyperQueue: `n` `true` tasks submitted as one job to a local server
/// with one 2-core worker, until the server has accepted them; tasks per
/// second. The PyPI package carries HyperQueue's server and worker (the
/// same Rust code as its `hq` binary) and runs them inside Python. The
/// tasks' output is discarded (by default each task leaves two files in
/// the working directory).
pub fn hq_submission(n: usize) -> Result<f64, PeerError> {
    installed("hyperqueue")?;
    let script = format!(
        r#"
import json, tempfile, time
from hyperqueue import Job
from hyperqueue.cluster import LocalCluster, WorkerConfig
with tempfile.TemporaryDirectory() as server_dir, LocalCluster(server_dir=server_dir) as cluster:
    cluster.start_worker(WorkerConfig(cores=2))
    client = cluster.client()
    warm = Job()
    warm.program(["true"], stdout=None, stderr=None)
    client.wait_for_jobs([client.submit(warm)])
    job = Job()
    for _ in range({n}):
        job.program(["true"], stdout=None, stderr=None)
    start = time.perf_counter()
    client.submit(job)
    seconds = time.perf_counter() - start
print(json.dumps({{"value": {n} / seconds}}))
"#
    );
    script_value(&script)
}

/// One `srun true` (an allocation and its step) on the Slurm of this
/// shell; seconds.
pub fn srun_true() -> Result<f64, PeerError> {
    let mut command = Command::new("srun");
    command.args(["--nodes=1", "--ntasks=1", "true"]);
    let start = Instant::now();
    output_within(command, Duration::from_secs(120))?;
    Ok(start.elapsed().as_secs_f64())
}

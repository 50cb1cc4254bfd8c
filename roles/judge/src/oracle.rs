//! The Python the judge's NumPy oracle runs in: found, or provisioned.
//!
//! Owns choosing and checking that interpreter: `HPCAGENT_PYTHON` when the
//! operator names one (checked, never replaced), else `python3` when it has
//! NumPy, else a virtual environment this module makes once under the
//! user's cache directory (`<cache>/venv-oracle`) from PyPI. Does not own
//! running the reference ([`crate::data::DataCache`]) or its script.

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

/// The variable that names the oracle's Python.
pub const PYTHON_VAR: &str = "HPCAGENT_PYTHON";

/// How long importing NumPy may take (a cold Lustre can be slow).
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long making the environment and installing NumPy may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// What the environment installs: wheels exist for every platform the
/// judge runs on.
const NUMPY: &str = "numpy>=1.22";

/// The interpreter a judge runs its references with.
#[derive(Debug, Clone, PartialEq)]
pub struct Oracle {
    pub python: String,
    /// NumPy's version, as that interpreter reports it.
    pub numpy: String,
}

#[derive(Debug, Error)]
pub enum OracleError {
    #[error(
        "{PYTHON_VAR}={python} cannot run the judge's NumPy oracle: {why}; \
         install NumPy into it, or unset {PYTHON_VAR} to let the judge make its own"
    )]
    Named { python: String, why: CommandError },
    #[error(
        "the judge's oracle needs Python 3 with NumPy: python3 {found}, and making \
         one in {dir} failed: {why}; install NumPy (`python3 -m pip install numpy`, \
         or Debian's python3-numpy), or set {PYTHON_VAR} to a Python 3 that has it"
    )]
    Provision {
        found: String,
        dir: PathBuf,
        why: ProvisionError,
    },
}

/// Why making the environment failed.
#[derive(Debug, Error)]
pub enum ProvisionError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("python3 -m venv: {0}")]
    Venv(CommandError),
    #[error("pip install {NUMPY}: {0}")]
    Pip(CommandError),
    #[error(transparent)]
    Probe(#[from] CommandError),
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ProvisionError + '_ {
    move |error| ProvisionError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Why a command the oracle runs failed.
#[derive(Debug, Error)]
pub enum CommandError {
    #[error("a temporary file: {0}")]
    Temp(std::io::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot start it: {0}")]
    Start(std::io::Error),
    #[error("no answer within {0} s")]
    Timeout(u64),
    /// It failed: its status, and the last line it wrote to stderr.
    #[error("{status} ({last})")]
    Failed {
        status: std::process::ExitStatus,
        last: String,
    },
}

/// Finds the oracle's Python, making one under `cache` when none has
/// NumPy; `progress` hears of the installation, which takes a while.
pub fn find(cache: &Path, progress: impl Fn(&str)) -> Result<Oracle, OracleError> {
    if let Some(python) = std::env::var_os(PYTHON_VAR) {
        let python = python.to_string_lossy().into_owned();
        return probe(&python)
            .map(|numpy| Oracle {
                python: python.clone(),
                numpy,
            })
            .map_err(|why| OracleError::Named { python, why });
    }
    let found = match probe("python3") {
        Ok(numpy) => {
            return Ok(Oracle {
                python: "python3".into(),
                numpy,
            });
        }
        Err(why) => format!("cannot import NumPy ({why})"),
    };
    let dir = cache.join("venv-oracle");
    provision(&dir, progress).map_err(|why| OracleError::Provision { found, dir, why })
}

/// NumPy's version in `python`, or why it cannot import it.
pub fn probe(python: &str) -> Result<String, CommandError> {
    let out = run(
        Command::new(python).args(["-c", "import numpy; print(numpy.__version__)"]),
        PROBE_TIMEOUT,
    )?;
    Ok(out.trim().to_string())
}

/// The environment in `dir`: reused when a finished one is there, else made
/// anew (one judge at a time: the others wait on its lock, then reuse it).
fn provision(dir: &Path, progress: impl Fn(&str)) -> Result<Oracle, ProvisionError> {
    let parent = dir.parent().expect("the environment has a parent");
    std::fs::create_dir_all(parent).map_err(io_at(parent))?;
    let lock_path = dir.with_extension("lock");
    let lock = std::fs::File::create(&lock_path).map_err(io_at(&lock_path))?;
    let _held = hold(lock).map_err(io_at(&lock_path))?;
    let python = dir.join("bin").join("python");
    let python_str = python.to_string_lossy().into_owned();
    let ready = dir.join(".ready");
    if ready.exists()
        && let Ok(numpy) = probe(&python_str)
    {
        return Ok(Oracle {
            python: python_str,
            numpy,
        });
    }
    // A half-made environment (a judge killed while installing) goes.
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io_at(dir))?;
    }
    progress(&format!(
        "python3 has no NumPy: installing it for the judge's oracle into {} (once)",
        dir.display()
    ));
    run(
        Command::new("python3").arg("-m").arg("venv").arg(dir),
        INSTALL_TIMEOUT,
    )
    .map_err(ProvisionError::Venv)?;
    run(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--retries",
            "2",
            "--timeout",
            "30",
            NUMPY,
        ]),
        INSTALL_TIMEOUT,
    )
    .map_err(ProvisionError::Pip)?;
    let numpy = probe(&python_str)?;
    std::fs::write(&ready, &numpy).map_err(io_at(&ready))?;
    progress(&format!("NumPy {numpy} installed for the judge's oracle"));
    Ok(Oracle {
        python: python_str,
        numpy,
    })
}

/// Holds an exclusive `flock` on `file` until the returned file is dropped.
fn hold(file: std::fs::File) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Runs `command` to its end within `timeout`: its stdout, or why it failed
/// (with the last line it wrote to stderr). Its output goes to files, not
/// pipes, so a chatty installer cannot block on a full pipe.
fn run(command: &mut Command, timeout: Duration) -> Result<String, CommandError> {
    let (mut stdout, mut stderr) = (temp()?, temp()?);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(stdout.try_clone()?)
        .stderr(stderr.try_clone()?)
        .spawn()
        .map_err(CommandError::Start)?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait()? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommandError::Timeout(timeout.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let read = |file: &mut std::fs::File| {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        text
    };
    if status.success() {
        return Ok(read(&mut stdout));
    }
    let said = read(&mut stderr);
    let last = said
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(CommandError::Failed {
        status,
        last: last.trim().to_string(),
    })
}

fn temp() -> Result<std::fs::File, CommandError> {
    tempfile::tempfile().map_err(CommandError::Temp)
}

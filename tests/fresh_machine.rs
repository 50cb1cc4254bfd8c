//! The README's first command as a newcomer meets it: an empty home and
//! cache, and a `python3` without NumPy. The judges' oracle gets its own
//! Python (a venv under the user's cache, NumPy from PyPI) and the campaign
//! settles; a Python named for the oracle that cannot run it, or a machine
//! where none can be made, stops `up` at once, before any task is leased,
//! saying what to install.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{example, hpcagent, only_run_dir, stderr, stdout};

/// A Python 3 without NumPy: a venv of the system's, without its packages.
fn python_without_numpy(dir: &Path) -> PathBuf {
    let venv = dir.join("bare-python");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success(), "python3 -m venv");
    let python = venv.join("bin").join("python3");
    let has_numpy = Command::new(&python)
        .args(["-c", "import numpy"])
        .output()
        .unwrap()
        .status
        .success();
    assert!(!has_numpy, "the bare venv has NumPy");
    venv.join("bin")
}

/// `hpcagent up` on examples/local.env as a newcomer runs it: `home` as
/// HOME, nothing of this machine's caches or Python settings, `path_first`
/// before the system's PATH.
fn up_as_newcomer(home: &Path, path_first: &Path, sets: &[&str]) -> Output {
    let mut cmd = hpcagent();
    cmd.args(["up", "--env"])
        .arg(example("local.env"))
        .arg("--set")
        .arg(format!("RUN_ROOT={}", home.join("runs").display()))
        .env("HOME", home)
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", path_first.display()),
        )
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HPCAGENT_CACHE_DIR")
        .env_remove("HPCAGENT_PYTHON")
        .env_remove("PYTHONPATH")
        .env_remove("PYENV_VERSION")
        .current_dir(common::repo());
    for set in sets {
        cmd.args(["--set", set]);
    }
    cmd.output().unwrap()
}

#[test]
fn a_python_without_numpy_gets_an_oracle_of_its_own_and_the_campaign_settles() {
    let home = tempfile::tempdir().unwrap();
    let bare = python_without_numpy(home.path());
    let out = up_as_newcomer(home.path(), &bare, &["KERNELS=gemm,atax,histogram"]);
    let said = format!("{}\n{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("installing it for the judge's oracle"),
        "the installation was not announced: {said}"
    );
    let venv = home.path().join(".cache/hpcagent/venv-oracle");
    assert!(
        venv.join(".ready").is_file(),
        "no oracle under the user's cache"
    );
    let run_dir = only_run_dir(&home.path().join("runs"));
    let results = hpcagent()
        .args(["results", run_dir.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let results: serde_json::Value = serde_json::from_slice(&results.stdout).unwrap();
    let rows = results["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r["status"] == "ok"), "{rows:?}");

    // The next campaign finds the oracle made by the first.
    let again = up_as_newcomer(home.path(), &bare, &["KERNELS=gemm"]);
    let said = format!("{}\n{}", stdout(&again), stderr(&again));
    assert_eq!(again.status.code(), Some(0), "{said}");
    assert!(!said.contains("installing"), "installed twice: {said}");
}

#[test]
fn a_python_that_cannot_run_the_oracle_stops_up_before_any_task() {
    let home = tempfile::tempdir().unwrap();
    let bare = python_without_numpy(home.path());

    // Named by the operator: checked, never replaced.
    let started = Instant::now();
    let mut cmd = hpcagent();
    cmd.args(["up", "--env"])
        .arg(example("local.env"))
        .arg("--set")
        .arg(format!("RUN_ROOT={}", home.path().join("runs").display()))
        .env("HOME", home.path())
        .env("HPCAGENT_PYTHON", bare.join("python3"))
        .current_dir(common::repo());
    let out = cmd.output().unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        said.contains("HPCAGENT_PYTHON") && said.contains("NumPy"),
        "the error does not say what to fix: {said}"
    );
    assert!(
        !home.path().join("runs").exists(),
        "a campaign started: {said}"
    );

    // No NumPy anywhere and no way to make an environment (a `python3`
    // that cannot make a venv, as on Debian without python3-venv).
    let fake = home.path().join("fake-bin");
    std::fs::create_dir_all(&fake).unwrap();
    let python3 = fake.join("python3");
    std::fs::write(
        &python3,
        "#!/bin/sh\necho \"Error: ensurepip is not available\" >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python3, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let out = up_as_newcomer(home.path(), &fake, &[]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        said.contains("needs Python 3 with NumPy")
            && said.contains("ensurepip is not available")
            && said.contains("python3-numpy"),
        "the error does not say what is missing and how to get it: {said}"
    );
    assert!(!home.path().join("runs").exists(), "a campaign started");
}

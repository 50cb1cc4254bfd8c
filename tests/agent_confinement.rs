//! Agent CLIs are confined. A hostile one (tests/agents/hostile_agent.py),
//! in a local campaign run by an unprivileged user, tries to read the
//! orchestrator's and the roles' memory and environment, to signal and
//! trace them, to read and write the store, the judges' caches, other
//! tasks' workspaces and files outside its workspace, to reach the node's
//! Unix and TCP servers, and leaves a detached daemon behind. Every attempt
//! must be refused for want of permission, nothing may be written, the
//! daemon must be gone when the campaign ends, and the campaign must still
//! settle every task once. Each attempt is a row of the hostile table.

mod common;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;

use common::{
    Unprivileged, assert_settled_exactly_once, command_campaign, only_run_dir, repo, stderr, stdout,
};
use serde_json::Value;

#[test]
fn a_hostile_agent_cli_stays_in_its_sandbox() {
    let user = Unprivileged::new();
    let bait = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bait.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = bait.path().join("bait.sock");
    let unix = UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    unix.set_nonblocking(true).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let agent = repo().join("tests/agents/hostile_agent.py");

    let command = format!("/usr/bin/python3 {} {{mcp_config}}", agent.display());
    let out = command_campaign(user.hpcagent(), "gemm,atax", &command, &user.runs())
        .env("BAIT_UNIX", &socket)
        .env("BAIT_TCP", tcp.local_addr().unwrap().port().to_string())
        .output()
        .unwrap();
    // It attacks and never submits: its tasks are graded on their starters
    // for it, and a campaign whose agents all did no work exits 5.
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("agents failed on 2: 2 no submission"),
        "{}",
        stdout(&out)
    );
    let run_dir = only_run_dir(&user.runs());
    assert_settled_exactly_once(&run_dir);

    let mut failures = Vec::new();
    for task in ["gemm.c.fp64", "atax.c.fp64"] {
        let attempt = run_dir.join("tasks").join(task).join("attempt-1");
        let text =
            std::fs::read_to_string(attempt.join("workspace/report.json")).unwrap_or_else(|e| {
                let err = std::fs::read_to_string(attempt.join("agent.stderr")).unwrap_or_default();
                panic!("{task}: no report ({e}); agent.stderr:\n{err}")
            });
        let report: Value = serde_json::from_str(&text).unwrap();
        failures.extend(check_report(task, &report));
        for pid in report["daemon pids"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let pid = pid.as_u64().unwrap();
            let alive = std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("hostile_agent"));
            record(
                task,
                "a setsid daemon outlives the attempt",
                !alive,
                &format!("pid {pid} alive: {alive}"),
            );
            if alive {
                failures.push(format!("{task}: its daemon {pid} outlived the campaign"));
                // SAFETY: kill(2) on the leftover the test found.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        let written = attempt.join("pwned");
        if written.exists() {
            failures.push(format!("{} was written", written.display()));
        }
    }
    for path in [
        run_dir.join("pwned"),
        user.home().join("pwned"),
        Path::new("/tmp/hpcagent-pwned").to_path_buf(),
        Path::new("/dev/shm/hpcagent-pwned").to_path_buf(),
    ] {
        if path.exists() {
            failures.push(format!("{} was written", path.display()));
            let _ = std::fs::remove_file(&path);
        }
    }
    let tcp_reached = !matches!(tcp.accept(), Err(ref e) if e.kind() == ErrorKind::WouldBlock);
    let unix_reached = !matches!(unix.accept(), Err(ref e) if e.kind() == ErrorKind::WouldBlock);
    if tcp_reached || unix_reached {
        failures.push(format!(
            "the bait was reached: TCP {tcp_reached}, Unix {unix_reached}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What in one agent's report shows the sandbox did not hold; each entry
/// is recorded as a row.
fn check_report(task: &str, report: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let entries = report.as_object().expect("a report object");
    for (attack, result) in entries {
        if attack == "daemon pids" {
            continue;
        }
        let result = result.as_str().unwrap_or_default();
        // The attacks on the processes only count when they were found.
        let pass = match attack.strip_prefix("found ") {
            Some(_) => result == "yes",
            None => result.starts_with("blocked"),
        };
        record(task, attack, pass, result);
        if !pass {
            failures.push(format!("{task}: {attack}: {result}"));
        }
    }
    for needed in [
        "read the store",
        "ptrace hpcagent up",
        "connect to a Unix socket",
    ] {
        if !entries.contains_key(needed) {
            failures.push(format!("{task}: the report has no {needed:?}: {report}"));
        }
    }
    failures
}

fn record(task: &str, attack: &str, pass: bool, got: &str) {
    let expected = if attack.starts_with("found ") {
        "found"
    } else {
        "refused"
    };
    let case = format!(
        "agent CLI ({}): {attack}",
        task.split('.').next().unwrap_or(task)
    );
    common::suite::record("hostile", &case, expected, got, pass);
}

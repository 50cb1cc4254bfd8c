//! The `command` policy in a local campaign: an external agent CLI per task
//! (tests/agents/mcp_agent.py, a scripted stand-in for Claude Code or Codex)
//! that talks MCP to `hpcagent mcp` as its configuration says. One kernel's
//! agent submits through its tools; the other's crashes before submitting,
//! and the worker submits its workspace so the task still settles.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{
    assert_settled_exactly_once, command_campaign, hpcagent, only_run_dir, repo, stderr, stdout,
};
use serde_json::Value;

/// A local campaign over `kernels` whose agents are tests/agents/mcp_agent.py
/// with `options`: the run root holding its run directory, and how `up` ended.
fn campaign(kernels: &str, options: &str) -> (tempfile::TempDir, std::process::Output) {
    let root = tempfile::tempdir().unwrap();
    let agent = repo().join("tests/agents/mcp_agent.py");
    let command = format!("python3 {} {{mcp_config}} {options}", agent.display());
    let out = command_campaign(hpcagent(), kernels, &command, root.path())
        .output()
        .unwrap();
    (root, out)
}

#[test]
fn external_agents_work_through_mcp_and_a_crash_still_settles() {
    let (root, out) = campaign("gemm,atax", "--crash-on atax");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(root.path());
    assert_settled_exactly_once(&run_dir);

    let attempt = |task: &str| run_dir.join("tasks").join(task).join("attempt-1");
    let gemm = attempt("gemm.c.fp64");
    let log = std::fs::read_to_string(gemm.join("agent.stdout")).unwrap();
    assert!(log.contains("tools: task list_files read_file"), "{log}");
    let submitted = log
        .lines()
        .find(|l| l.starts_with("submit: "))
        .unwrap_or_default();
    assert!(submitted.contains("\"status\":\"ok\""), "{log}");
    let config = gemm.join("mcp.json");
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o600,
        "the MCP configuration carries the attempt's secret"
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        !text.contains("HPCAGENT_TOKEN"),
        "no campaign token reaches the CLI: {text}"
    );

    let atax = attempt("atax.c.fp64");
    let err = std::fs::read_to_string(atax.join("agent.stderr")).unwrap();
    assert!(
        err.contains("crashing on purpose"),
        "the crash's log is kept: {err}"
    );

    let reader = hpcagent_orchestrator::store::Reader::open(&run_dir).unwrap();
    let attempts = reader.attempts().unwrap();
    let outcome = |task: &str| {
        attempts
            .iter()
            .find(|a| a.task == task)
            .map(|a| (a.outcome.clone(), a.message.clone()))
            .unwrap()
    };
    assert_eq!(outcome("gemm.c.fp64").0, "submitted");
    let (crashed, message) = outcome("atax.c.fp64");
    assert_eq!(crashed, "crashed");
    assert!(
        message.contains("the solution file was submitted: ok"),
        "{message}"
    );
    let verdict: Value =
        serde_json::from_str(&std::fs::read_to_string(atax.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["status"], "ok");
}

/// A real CLI writes a closing message after its submit: it is given time
/// to, its end is recorded as it was, and the tools refuse it anything more.
#[test]
fn an_agent_that_lingers_after_its_submit_is_recorded_finished_and_refused_after() {
    let (root, out) = campaign("gemm", "--linger 3");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(root.path());
    assert_settled_exactly_once(&run_dir);
    let reader = hpcagent_orchestrator::store::Reader::open(&run_dir).unwrap();
    let attempts = reader.attempts().unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let attempt = &attempts[0];
    assert_eq!(attempt.outcome, "submitted", "{attempt:?}");
    assert!(
        attempt.message.contains("python3 exited 0") && attempt.message.contains("submitted: ok"),
        "{attempt:?}"
    );
    let dir = run_dir.join("tasks/gemm.c.fp64/attempt-1");
    let log = std::fs::read_to_string(dir.join("agent.stdout")).unwrap();
    assert!(
        log.contains("late write_file: error=True this attempt has submitted (ok) and is over"),
        "{log}"
    );
    assert!(
        !dir.join("workspace/late.c").exists(),
        "the late write landed"
    );
}

/// What an agent CLI leaves in its workspace is hostile: a FIFO (a naive
/// read waits forever for a writer and freezes the role instance), hard
/// links (read as the role's user, outside the CLI's sandbox) and a file
/// far bigger than memory. Each gets an answer within seconds; the one
/// agent instance, whose other worker grades an honest task meanwhile,
/// lives on unrestarted and both tasks settle `ok`.
#[test]
fn hostile_files_in_a_workspace_get_answers_and_the_instance_lives_on() {
    let bait_dir = tempfile::tempdir().unwrap();
    let bait = bait_dir.path().join("bait.txt");
    std::fs::write(&bait, "BAIT-SECRET-7311").unwrap();
    let (root, out) = campaign(
        "gemm,atax",
        &format!("--hostile-on gemm --bait {}", bait.display()),
    );
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(root.path());
    assert_settled_exactly_once(&run_dir);
    let log =
        std::fs::read_to_string(run_dir.join("tasks/gemm.c.fp64/attempt-1/agent.stdout")).unwrap();

    // (tool and path, an error expected, what the reply must say)
    let cases = [
        ("read_file fifo.c", true, "is a FIFO, not a plain file"),
        ("write_file fifo.c", true, "not a plain file"),
        ("score fifo.c", true, "is a FIFO, not a plain file"),
        ("read_file linked.c", true, "hard link"),
        ("write_file linked.c", true, "hard link"),
        ("read_file config.c", true, "hard link"),
        ("read_file twin.c", true, "has 2 names (a hard link)"),
        (
            "read_file huge.c",
            false,
            "[cut: the file has 1099511627776 bytes",
        ),
    ];
    for (call, error, says) in cases {
        let reply = log
            .lines()
            .find_map(|l| l.strip_prefix(&format!("hostile {call}: ")))
            .unwrap_or_else(|| panic!("no reply to {call} in {log}"));
        let seconds: f64 = reply
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.trim_end_matches('s').parse().ok())
            .unwrap_or(f64::MAX);
        // A hard link the sandbox did not let the CLI make reads as missing.
        let file = call.split(' ').nth(1).unwrap();
        let link = log
            .lines()
            .find(|l| l.starts_with(&format!("link {file}: ")))
            .unwrap_or_default();
        let made = link.is_empty() || link.ends_with(": made");
        let answered = reply
            .starts_with(&format!("error={}", if error { "True" } else { "False" }))
            && reply.contains(says);
        let pass = (answered || !made) && !reply.contains("BAIT-SECRET") && seconds < 5.0;
        let reply = if made {
            reply.to_string()
        } else {
            format!("({link}) {reply}")
        };
        common::suite::record(
            "hostile",
            &format!("agent CLI: {call} in its workspace"),
            &format!("answered within 5 s: {says}"),
            &reply,
            pass,
        );
        assert!(pass, "{call}: {reply}\n{log}");
    }
    assert_eq!(
        std::fs::read_to_string(&bait).unwrap(),
        "BAIT-SECRET-7311",
        "the bait was written through a link"
    );

    let reader = hpcagent_orchestrator::store::Reader::open(&run_dir).unwrap();
    let statuses: Vec<(String, Option<String>)> = reader
        .results()
        .unwrap()
        .into_iter()
        .map(|r| (r.task, r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("atax.c.fp64".to_string(), Some("ok".to_string())),
            ("gemm.c.fp64".to_string(), Some("ok".to_string()))
        ]
    );
    let events = reader.events().unwrap();
    let agent = |e: &&hpcagent_orchestrator::store::EventRow| e.instance.starts_with("agent");
    let launches = events
        .iter()
        .filter(agent)
        .filter(|e| e.kind == "launched")
        .count();
    let deaths: Vec<_> = events
        .iter()
        .filter(agent)
        .filter(|e| e.kind == "dead" || e.kind == "failed")
        .collect();
    assert_eq!((launches, deaths.len()), (1, 0), "{events:?}");
}

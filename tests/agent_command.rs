//! The `command` policy in a local campaign: an external agent CLI per task
//! (tests/agents/mcp_agent.py, a scripted stand-in for Claude Code or Codex)
//! that talks MCP to `hpcagent mcp` as its configuration says. One kernel's
//! agent submits through its tools; the other's crashes before submitting,
//! and the worker submits its workspace so the task still settles.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{assert_settled_exactly_once, example, hpcagent, only_run_dir, repo, stderr, stdout};
use serde_json::Value;

/// A local campaign over `kernels` whose agents are tests/agents/mcp_agent.py
/// with `options`: the run root holding its run directory, and how `up` ended.
fn campaign(kernels: &str, options: &str) -> (tempfile::TempDir, std::process::Output) {
    let root = tempfile::tempdir().unwrap();
    let agent = repo().join("tests/agents/mcp_agent.py");
    let out = hpcagent()
        .args(["up", "--env", example("local.env").to_str().unwrap()])
        .args(["--set", "AGENT_POLICY=command", "--set"])
        .arg(format!("KERNELS={kernels}"))
        .args(["--set", "AGENT_NODES=1", "--set", "JUDGE_NODES=1"])
        // The scripted agent needs no model; the policy still gets an endpoint.
        .args([
            "--set",
            "INFERENCE_URL=http://127.0.0.1:9/v1",
            "--set",
            "LLM_MODEL=none",
        ])
        .arg("--set")
        .arg(format!(
            "AGENT_COMMAND=python3 {} {{mcp_config}} {options}",
            agent.display()
        ))
        .arg("--set")
        .arg(format!("RUN_ROOT={}", root.path().display()))
        .current_dir(repo())
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

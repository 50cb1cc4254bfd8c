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
        message.starts_with("python3 exited 3")
            && message.contains("the worker submitted the solution file for it: ok"),
        "{message}"
    );
    // Graded, but marked as the starter, in the log and the results.
    let ends: Vec<(String, String)> = common::attempt_log(&run_dir)
        .iter()
        .map(|l| (l["outcome"].to_string(), l["submitted_by"].to_string()))
        .collect();
    assert!(
        ends.contains(&(r#""crashed""#.into(), r#""starter""#.into())),
        "{ends:?}"
    );
    assert!(
        ends.contains(&(r#""submitted""#.into(), r#""agent""#.into())),
        "{ends:?}"
    );
    let table = stdout(&out);
    let row = table.lines().find(|l| l.starts_with("atax ")).unwrap();
    assert!(
        row.contains("crashed") && row.contains("ok (starter)"),
        "{table}"
    );
    assert!(
        table.contains(
            "2 settled (1 by their agents, 1 ok; 1 graded for agents that did not submit)"
        ) && table.contains("agents failed on 1: 1 crashed"),
        "{table}"
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
    // Outside /tmp: an AGENT_COMMAND naming a file the sandbox hides is refused.
    let bait_dir = tempfile::tempdir_in(repo().join("target")).unwrap();
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

/// A campaign whose agents all crash reads as one: each task is graded on
/// its starter, marked as such, and `up` exits 5 (docs/operator-guide.md).
/// An agent that ends without submitting has the file it left graded,
/// and that grade's build log is kept with the attempt.
#[test]
fn agents_that_crash_or_leave_broken_code_are_recorded_as_they_ended() {
    let root = tempfile::tempdir().unwrap();
    let out = command_campaign(hpcagent(), "gemm,atax", "sh -c 'exit 3'", root.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("the agents of 2 of 2 tasks failed"),
        "{}",
        stderr(&out)
    );
    let run_dir = only_run_dir(root.path());
    let results = hpcagent()
        .args(["results", "--format", "json"])
        .arg(&run_dir)
        .output()
        .unwrap();
    let results: Value = serde_json::from_slice(&results.stdout).unwrap();
    let rows = results["tasks"].as_array().unwrap();
    assert_eq!(results["run"]["policy"], "command", "{results}");
    assert_eq!(
        results["run"]["agent_command"], "sh -c 'exit 3'",
        "{results}"
    );
    // Each row's cost: its attempts' time, and shares of the run's
    // node-hours that add up to them.
    let shares: f64 = rows
        .iter()
        .map(|r| r["cost"]["node_hours"].as_f64().unwrap())
        .sum();
    let run_hours = results["cost"]["node_hours"].as_f64().unwrap();
    assert!(run_hours > 0.0, "{results}");
    assert!(
        (shares - run_hours).abs() < 1e-9 * run_hours.max(1.0),
        "{results}"
    );
    for row in rows {
        assert!(row["cost"]["attempts_s"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(
            (&row["outcome"], &row["submitted_by"], &row["status"]),
            (
                &Value::from("crashed"),
                &Value::from("starter"),
                &Value::from("ok")
            ),
            "{row}"
        );
    }
    assert!(
        stdout(&out).contains("2 settled (0 by their agents, 0 ok;"),
        "{}",
        stdout(&out)
    );
    // The attempts' log says how each CLI ended, its exit code included.
    for line in common::attempt_log(&run_dir) {
        assert_eq!(line["outcome"], "crashed", "{line}");
        assert!(
            line["message"].as_str().unwrap_or("").contains("exited 3"),
            "{line}"
        );
    }
    // `status` says how the agents ended, not only what was graded.
    let status = hpcagent().arg("status").arg(&run_dir).output().unwrap();
    assert!(
        stdout(&status).contains("agents' attempts: 2 crashed")
            && stdout(&status).contains("2 settled (0 by their agents)"),
        "{}",
        stdout(&status)
    );
    let status = hpcagent()
        .args(["status", "--json"])
        .arg(&run_dir)
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        status["attempts"],
        serde_json::json!({"crashed": 2}),
        "{status}"
    );
    assert_eq!(status["tasks"]["agents_failed"], 2, "{status}");

    let root = tempfile::tempdir().unwrap();
    let broken = "sh -c 'for f in *.c; do echo \"this is not C\" > $f; done'";
    let out = command_campaign(hpcagent(), "gemm", broken, root.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let run_dir = only_run_dir(root.path());
    let log = run_dir.join("tasks/gemm.c.fp64/attempt-1/build.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("error"), "{text}");
    let table = stdout(&out);
    assert!(
        table.contains("no submission") && table.contains("build_error (left)"),
        "{table}"
    );
    assert!(
        table.contains("gemm c: build log in tasks/gemm.c.fp64/attempt-1/build.log"),
        "{table}"
    );
}

/// A CLI the sandbox cannot start: refused before anything starts when
/// `AGENT_COMMAND` names a file in a directory the sandbox hides; when the
/// program is not there at all, each attempt is recorded as one that could
/// not start, with the sandbox's word in agent.stderr, and no starter is
/// graded for it.
#[test]
fn a_cli_that_cannot_start_is_refused_or_recorded_as_never_run() {
    let hidden = tempfile::tempdir().unwrap();
    let script = hidden.path().join("cli.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = tempfile::tempdir().unwrap();
    for verb in ["plan", "up"] {
        let mut command = command_campaign(
            hpcagent(),
            "gemm",
            &script.display().to_string(),
            root.path(),
        );
        if verb == "plan" {
            command = hpcagent();
            command
                .args([
                    "plan",
                    "--env",
                    common::example("local.env").to_str().unwrap(),
                ])
                .args(["--set", "AGENT_POLICY=command", "--set"])
                .arg(format!("AGENT_COMMAND={}", script.display()));
        }
        let out = command.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{verb}: {err}");
        assert!(
            err.contains("AGENT_COMMAND")
                && err.contains(&script.display().to_string())
                && err.contains("which the agent sandbox hides"),
            "{verb}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(root.path()).unwrap().count(),
        0,
        "nothing started"
    );

    let out = command_campaign(hpcagent(), "gemm", "no-such-agent-cli --flag", root.path())
        .args(["--set", "MAX_ATTEMPTS=2"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let run_dir = only_run_dir(root.path());
    let ends: Vec<String> = common::attempt_log(&run_dir)
        .iter()
        .map(|l| l["outcome"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ends, ["could not start", "could not start"]);
    let err =
        std::fs::read_to_string(run_dir.join("tasks/gemm.c.fp64/attempt-1/agent.stderr")).unwrap();
    assert!(
        err.starts_with("agent sandbox: cannot start no-such-agent-cli"),
        "{err}"
    );
    assert!(
        !run_dir
            .join("tasks/gemm.c.fp64/attempt-1/verdict.json")
            .exists()
    );
}

/// hpcagent run from a directory the agent sandbox hides (a checkout under
/// /tmp): the CLI still starts its tool server, from a copy in the run
/// directory's `bin/` that its sandbox may read.
#[test]
fn the_tool_server_starts_where_hpcagent_lives_in_a_hidden_directory() {
    let hidden = tempfile::tempdir().unwrap();
    let exe = hidden.path().join("hpcagent");
    std::fs::copy(env!("CARGO_BIN_EXE_hpcagent"), &exe).unwrap();
    let root = tempfile::tempdir_in(repo().join("target")).unwrap();
    let agent = repo().join("tests/agents/mcp_agent.py");
    let command = format!("python3 {} {{mcp_config}}", agent.display());
    let out = command_campaign(
        std::process::Command::new(&exe),
        "gemm",
        &command,
        root.path(),
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(root.path());
    let ends = common::attempt_log(&run_dir);
    assert_eq!(
        (&ends[0]["outcome"], &ends[0]["submitted_by"]),
        (&Value::from("submitted"), &Value::from("agent")),
        "{ends:?}"
    );
    let config =
        std::fs::read_to_string(run_dir.join("tasks/gemm.c.fp64/attempt-1/mcp.json")).unwrap();
    let config: Value = serde_json::from_str(&config).unwrap();
    assert_eq!(
        config["mcpServers"]["hpcagent"]["command"],
        Value::from(run_dir.join("bin/hpcagent").display().to_string())
    );
}

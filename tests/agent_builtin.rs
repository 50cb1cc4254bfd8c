//! The built-in agent's loop, turn by turn, against a scripted
//! OpenAI-compatible stand-in (so every reply is chosen) and a real judge:
//! a 5xx is retried, prose gets a nudge, malformed arguments, unknown tools and
//! paths out of the workspace get error replies, a context overflow ends the
//! attempt, and whatever ends it, the task is submitted. The loop against a
//! real vLLM is tests/campaign_vllm.rs.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{JudgeServer, repo};
use hpcagent_agent::judge_link::JudgeLink;
use hpcagent_agent::lease;
use hpcagent_agent::llm::InferenceLink;
use hpcagent_agent::policy::Attempt;
use hpcagent_agent::policy::builtin::{self, Limits};
use hpcagent_agent::prompt;
use hpcagent_agent::tools::Toolbox;
use hpcagent_agent::workspace::Workspace;
use hpcagent_common::AttemptOutcome;
use hpcagent_proto::v1 as pb;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An OpenAI-compatible server that answers each request with the next
/// scripted (status, body) and keeps the request bodies.
struct StandIn {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl StandIn {
    async fn start(script: Vec<(u16, Value)>) -> StandIn {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            let mut script = script.into_iter();
            while let Ok((mut socket, _)) = listener.accept().await {
                let Some(body) = read_request(&mut socket).await else {
                    continue;
                };
                seen.lock().unwrap().push(body);
                let (status, reply) = script
                    .next()
                    .unwrap_or((500, json!({"error": "the script has ended"})));
                let text = reply.to_string();
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            }
        });
        StandIn { url, requests }
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// One HTTP request's JSON body (requests carry a content-length).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Value> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text[..end]
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            return serde_json::from_slice(&data[end + 4..end + 4 + length]).ok();
        }
    }
}

/// A chat completion with `content` and tool calls (name, arguments text).
fn reply(content: &str, calls: &[(&str, &str)], finish: &str) -> (u16, Value) {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    (
        200,
        json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
               "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

fn limits(max_turns: u32) -> Limits {
    Limits {
        model: "scripted".into(),
        max_turns,
        max_tokens: 1_000_000,
        turn_tokens: 128,
        temperature: 0.0,
        tool_choice: "auto".into(),
        profiling: false,
    }
}

/// Runs one attempt of gemm in C against `stand_in` and `judge`.
async fn run(stand_in: &StandIn, judge: &JudgeServer, dir: &Path, max_turns: u32) -> Attempt {
    let lease = pb::Lease {
        task_id: "gemm.c.fp64".into(),
        kernel: "gemm".into(),
        language: "c".into(),
        precision: "fp64".into(),
        attempt: 1,
        budget_s: 600.0,
        judge_url: judge.url.clone(),
        inference_url: stand_in.url.clone(),
        attempt_dir: dir.display().to_string(),
        ..Default::default()
    };
    // The orchestrator is needed only to move off a failing replica or judge.
    let orchestrator = hpcagent_common::connect_lazy("http://127.0.0.1:9", "unused").unwrap();
    let judge_link = JudgeLink::new(orchestrator.clone(), &lease, "unused");
    let workspace = Workspace::create(dir).unwrap();
    let tools = Toolbox::new(lease.clone(), judge_link, workspace, "agent-0", None);
    let llm = InferenceLink::new(orchestrator, &lease);
    let skills = prompt::load(&repo().join("skills")).unwrap();
    builtin::attempt(
        &lease,
        tools,
        llm,
        &limits(max_turns),
        &skills,
        lease::never_lost(),
    )
    .await
}

fn tool_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn transcript_kinds(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn the_loop_survives_what_models_do_and_submits() {
    let judge = JudgeServer::start(&[], &[], None);
    let stand_in = StandIn::start(vec![
        (503, json!({"error": "loading"})),
        reply("I will look at the task first.", &[], "stop"),
        reply(
            "",
            &[("write_file", r#"{"path": "solution.c", "content": "int ma"#)],
            "length",
        ),
        reply("", &[("compile", "{}")], "tool_calls"),
        reply(
            "",
            &[("read_file", r#"{"path": "../../secret"}"#)],
            "tool_calls",
        ),
        reply("", &[("task", "{}"), ("score", "{}")], "tool_calls"),
        reply("", &[("submit", "")], "tool_calls"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let attempt = run(&stand_in, &judge, dir.path(), 20).await;
    assert_eq!(
        attempt.outcome,
        AttemptOutcome::Submitted,
        "{}",
        attempt.message
    );
    assert!(
        attempt.message.contains("\"status\":\"ok\""),
        "{}",
        attempt.message
    );
    assert_eq!(
        attempt.tokens,
        6 * 110,
        "usage summed over the six answered turns"
    );

    let requests = stand_in.requests();
    assert_eq!(requests.len(), 7, "six turns and one retry of the 503");
    assert_eq!(requests[0], requests[1], "the retry is the same request");
    let first = &requests[0];
    assert_eq!(first["model"], "scripted");
    assert_eq!(first["max_tokens"], 128);
    assert_eq!(first["messages"][0]["role"], "system");
    assert!(
        first["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("void gemm_fp64(")
    );
    let nudge = requests[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(nudge["role"], "user");
    assert!(
        nudge["content"]
            .as_str()
            .unwrap()
            .contains("Answer with a tool call")
    );
    let errors = tool_messages(&requests[5]);
    assert!(
        errors[0].starts_with("error: the arguments are not valid JSON"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("there is no tool \"compile\""),
        "{errors:?}"
    );
    assert!(
        errors[2].contains("leads out of the workspace"),
        "{errors:?}"
    );
    let history = requests[3]["messages"].as_array().unwrap();
    let malformed = history.iter().rfind(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        malformed["tool_calls"][0]["function"]["arguments"], "{}",
        "a malformed call is kept as {{}} in the history"
    );
    let graded = tool_messages(&requests[6]);
    assert!(graded[3].contains("Task: gemm"), "{graded:?}");
    let score: Value = serde_json::from_str(&graded[4]).unwrap();
    assert_eq!(score["status"], "ok", "{score}");

    let verdict: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict["status"], "ok");
    let kinds = transcript_kinds(dir.path());
    assert_eq!(kinds.iter().filter(|k| *k == "reply").count(), 6);
    assert_eq!(kinds.iter().filter(|k| *k == "tool").count(), 6);
    assert_eq!(kinds.last().unwrap(), "end");
}

#[tokio::test]
async fn a_context_overflow_ends_the_attempt_and_the_workspace_is_submitted() {
    let judge = JudgeServer::start(&[], &[], None);
    let overflow = (
        400,
        json!({"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens"}),
    );
    let stand_in = StandIn::start(vec![overflow.clone(); 4]).await;
    let dir = tempfile::tempdir().unwrap();
    let attempt = run(&stand_in, &judge, dir.path(), 20).await;
    assert_eq!(
        attempt.outcome,
        AttemptOutcome::ContextOverflow,
        "{}",
        attempt.message
    );
    assert!(
        attempt
            .message
            .contains("the worker submitted the solution file for it: ok"),
        "the starting point (the baseline), submitted for the agent, settles the task: {}",
        attempt.message
    );
    let asked: Vec<Value> = stand_in
        .requests()
        .iter()
        .map(|r| r["max_tokens"].clone())
        .collect();
    assert_eq!(
        asked,
        [json!(128), json!(64)],
        "an overflow is retried once per halving of the completion budget, down to 64"
    );
}

#[tokio::test]
async fn prose_forever_ends_at_the_turn_budget() {
    let judge = JudgeServer::start(&[], &[], None);
    let stand_in = StandIn::start(vec![
        reply("Thinking.", &[], "stop"),
        reply("Still thinking.", &[], "stop"),
        reply("Never reached.", &[], "stop"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let attempt = run(&stand_in, &judge, dir.path(), 2).await;
    assert_eq!(attempt.outcome, AttemptOutcome::TurnBudget);
    assert_eq!(stand_in.requests().len(), 2);
    assert!(attempt.transcript.ends_with("transcript.jsonl"));
}

#[tokio::test]
async fn an_outside_endpoint_serves_a_local_campaign() {
    // INFERENCE_URL instead of planned vLLM servers: every agent asks it.
    let stand_in = StandIn::start(vec![
        reply("", &[("submit", "{}")], "tool_calls"),
        reply("", &[("submit", "{}")], "tool_calls"),
    ])
    .await;
    let root = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_hpcagent"))
        .args([
            "up",
            "--env",
            repo().join("examples/local.env").to_str().unwrap(),
        ])
        .args([
            "--set",
            "AGENT_POLICY=builtin",
            "--set",
            "KERNELS=gemm,atax",
        ])
        .args([
            "--set",
            "AGENT_NODES=1",
            "--set",
            "JUDGE_NODES=1",
            "--set",
            "LLM_MODEL=outside",
        ])
        .arg("--set")
        .arg(format!("INFERENCE_URL={}", stand_in.url))
        .arg("--set")
        .arg(format!("RUN_ROOT={}", root.path().display()))
        .current_dir(repo())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_dir = common::only_run_dir(root.path());
    common::assert_settled_exactly_once(&run_dir);
    let requests = stand_in.requests();
    assert_eq!(requests.len(), 2, "one turn per task");
    assert!(requests.iter().all(|r| r["model"] == "outside"));
    let attempts = hpcagent_orchestrator::store::Reader::open(&run_dir)
        .unwrap()
        .attempts()
        .unwrap();
    assert!(
        attempts
            .iter()
            .all(|a| a.outcome == "submitted" && a.tokens == 110),
        "{attempts:?}"
    );
}

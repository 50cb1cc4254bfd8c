//! Real agent CLIs as the `command` policy's agents: Claude Code and Codex at
//! the versions scripts/test.sh installs, each started through its line of
//! the operator guide ("Agent CLIs"), read from the guide as it is written.
//!
//! Two ways. A scripted model server of the tests' own
//! (tests/agents/model_server.py) answers as a model working the task would:
//! read the task, write a kernel, score it, submit it. A three-task campaign
//! must settle every task with the scripted kernel's verdict, the CLI's own
//! submit, and a transcript of its MCP calls: the CLI ↔ MCP ↔ judge path
//! with real clients. Then the campaign's own vLLM (the tiny random model of
//! scripts/local-llm/): the CLI starts, reaches the endpoint with its tools,
//! ends however the nonsense it gets makes it end, and its attempt is
//! recorded as it ended.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;

use common::{assert_settled_exactly_once, example, hpcagent, only_run_dir, repo, stderr, stdout};
use hpcagent_common::AttemptOutcome;
use hpcagent_orchestrator::store::{AttemptRow, Reader, TaskResult};
use serde_json::Value;

/// A CLI the suite drives, at the version scripts/test.sh pins.
struct Cli {
    program: &'static str,
    version: &'static str,
}

const CLAUDE: Cli = Cli {
    program: "claude",
    version: "2.1.328",
};
const CODEX: Cli = Cli {
    program: "codex",
    version: "0.169.0",
};

/// What the scripted model writes first in every kernel
/// (tests/agents/model_server.py), and in a kernel it breaks on purpose.
const MARKER: &str = "// hpcagent-scripted-kernel";
const BROKEN: &str = "hpcagent-scripted-broken";
/// The campaign's tools, in the order the scripted model calls them.
const SCRIPT: [&str; 5] = ["task", "read_file", "write_file", "score", "submit"];
const TOOLS: [&str; 8] = [
    "task",
    "list_files",
    "read_file",
    "write_file",
    "score",
    "submit",
    "profile",
    "finish",
];

impl Cli {
    /// The directory holding the CLI (scripts/test.sh's npm prefix), after
    /// checking it answers with its pinned version.
    fn bin_dir(&self) -> PathBuf {
        let prefix = std::env::var("HPCAGENT_AGENT_CLIS")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/hpcagent/npm")
            });
        let bin = prefix.join("node_modules/.bin");
        let version = Command::new(bin.join(self.program))
            .arg("--version")
            .output()
            .map(|o| stdout(&o))
            .unwrap_or_default();
        assert!(
            version.contains(self.version),
            "{} {} is not in {} (it says {version:?}): run scripts/test.sh, which installs it",
            self.program,
            self.version,
            bin.display()
        );
        bin
    }

    /// Its `AGENT_COMMAND` line in the operator guide, as written there.
    fn guide_line(&self) -> String {
        let guide = std::fs::read_to_string(repo().join("docs/operator-guide.md")).unwrap();
        let start = format!("AGENT_COMMAND={} ", self.program);
        let lines: Vec<&str> = guide.lines().filter(|l| l.starts_with(&start)).collect();
        assert_eq!(lines.len(), 1, "one line for {} in the guide", self.program);
        lines[0].strip_prefix("AGENT_COMMAND=").unwrap().to_string()
    }

    /// `up` with `env`, the CLI first on its PATH.
    fn up(&self, env: &Path, sets: &[String]) -> Output {
        let path = format!(
            "{}:{}",
            self.bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut up = hpcagent();
        up.args(["up", "--env", env.to_str().unwrap()])
            .env("PATH", path)
            .current_dir(repo());
        for set in sets {
            up.args(["--set", set]);
        }
        up.output().unwrap()
    }
}

/// The scripted model server, stopped when dropped.
struct ModelServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ModelServer {
    /// Starts it, logging into `dir`; it breaks the kernels of `broken`.
    fn start(dir: &Path, broken: &[&str]) -> ModelServer {
        let log = dir.join("model-requests.jsonl");
        let mut command = Command::new("python3");
        command
            .arg(repo().join("tests/agents/model_server.py"))
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped());
        for kernel in broken {
            command.args(["--break", kernel]);
        }
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the model server did not start: {line:?}"));
        ModelServer { child, port, log }
    }

    /// Every request it got, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One MCP call as a CLI's transcript shows it: the tool's short name and
/// the text it answered.
#[derive(Debug)]
struct McpCall {
    tool: String,
    reply: String,
}

/// The campaign's MCP calls in a transcript: Claude Code's stream-json
/// (`tool_use` then its `tool_result`), or Codex's `exec --json` events
/// (`mcp_tool_call` items).
fn mcp_calls(transcript: &str) -> Vec<McpCall> {
    let events: Vec<Value> = transcript
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut calls = Vec::new();
    let mut pending: Vec<(String, String)> = Vec::new(); // (Claude's id, tool)
    for event in &events {
        let text = |content: &Value| -> String {
            match content {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .filter_map(|i| i["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            }
        };
        let item = &event["item"];
        if event["type"] == "item.completed" && item["type"] == "mcp_tool_call" {
            if item["server"] == "hpcagent" {
                calls.push(McpCall {
                    tool: item["tool"].as_str().unwrap_or_default().to_string(),
                    reply: text(&item["result"]["content"]),
                });
            }
            continue;
        }
        for block in event["message"]["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => {
                    if let Some(tool) = block["name"]
                        .as_str()
                        .and_then(|n| n.strip_prefix("mcp__hpcagent__"))
                    {
                        let id = block["id"].as_str().unwrap_or_default().to_string();
                        pending.push((id, tool.to_string()));
                    }
                }
                Some("tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if let Some(at) = pending.iter().position(|(p, _)| p == id) {
                        let (_, tool) = pending.remove(at);
                        calls.push(McpCall {
                            tool,
                            reply: text(&block["content"]),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    calls
}

/// A campaign of the test's own, driven by the scripted model: three
/// kernels worked at once by one agent node, one judge, the CLI's guide
/// line. The scripted model breaks bicg's kernel.
fn scripted_campaign(cli: &Cli) {
    let dir = tempfile::tempdir().unwrap();
    let server = ModelServer::start(dir.path(), &["bicg"]);
    let runs = dir.path().join("runs");
    let env = dir.path().join("campaign.env");
    let text = format!(
        "# Three kernels, each worked by {program} against a scripted model.\n\
         SITE=local\n\
         AGENT_NODES=1\n\
         AGENTS_PER_NODE=3\n\
         JUDGE_NODES=1\n\
         KERNELS=gemm,atax,bicg\n\
         LANGUAGES=c\n\
         PRESET=S\n\
         AGENT_POLICY=command\n\
         AGENT_COMMAND={line}\n\
         INFERENCE_URL=http://127.0.0.1:{port}/v1\n\
         LLM_MODEL=scripted\n\
         MAX_ATTEMPTS=1\n\
         TASK_BUDGET=00:05:00\n\
         # Grades to 5%, not 1%: six grades share one judge slot, and the\n\
         # test proves whose kernel was graded, not its speed to a percent.\n\
         JUDGE_INTERVAL=5\n\
         JUDGE_TIME_CAP=5\n\
         TIME_LIMIT=00:15:00\n\
         DRAIN_SECONDS=60\n\
         RUN_ROOT={runs}\n",
        program = cli.program,
        line = cli.guide_line(),
        port = server.port,
        runs = runs.display(),
    );
    std::fs::write(&env, text).unwrap();
    let out = cli.up(&env, &[]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(&runs);
    assert_settled_exactly_once(&run_dir);
    let reader = Reader::open(&run_dir).unwrap();
    let attempts = reader.attempts().unwrap();
    let results = reader.results().unwrap();

    for (kernel, broken) in [("gemm", false), ("atax", false), ("bicg", true)] {
        let task = format!("{kernel}.c.fp64");
        let dir = run_dir.join("tasks").join(&task).join("attempt-1");
        let transcript = std::fs::read_to_string(dir.join("agent.stdout")).unwrap_or_default();
        let errors = std::fs::read_to_string(dir.join("agent.stderr")).unwrap_or_default();
        let context = format!("{task}:\n{transcript}\n{errors}");

        // The CLI made the script's calls through MCP, in order.
        let calls = mcp_calls(&transcript);
        let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(tools, SCRIPT, "{context}");

        // Its submit was graded, on the kernel the scripted model wrote.
        let submitted = std::fs::read_to_string(dir.join("submission.c")).unwrap();
        assert!(submitted.starts_with(MARKER), "{task}: {submitted}");
        assert_eq!(submitted.contains(BROKEN), broken, "{task}: {submitted}");
        let verdict: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json")).unwrap())
                .unwrap();
        let status = verdict["status"].as_str().unwrap();
        assert!(
            calls[4].reply.contains(&format!("\"status\":\"{status}\"")),
            "the CLI was told its verdict: {context}"
        );
        let result: &TaskResult = results.iter().find(|r| r.task == task).unwrap();
        assert_eq!(result.status.as_deref(), Some(status), "{result:?}");
        assert_eq!(result.submitted_by.as_deref(), Some("agent"), "{result:?}");
        if broken {
            // A kernel that returns at once cannot have the starter's verdict.
            assert_ne!(status, "ok", "{verdict}");
        } else {
            assert_eq!(status, "ok", "{verdict}");
            // The starter's code with a comment: about the baseline's speed.
            let speedup = result.speedup.unwrap();
            assert!((0.5..2.0).contains(&speedup), "{result:?}");
        }
        let attempt: Vec<&AttemptRow> = attempts.iter().filter(|a| a.task == task).collect();
        assert_eq!(attempt.len(), 1, "{attempt:?}");
        assert_eq!(
            attempt[0].outcome,
            AttemptOutcome::Submitted.as_str(),
            "{attempt:?}"
        );
        // The tokens the attempt's meter read in the scripted model's
        // answers (10 in, 10 out a turn) over its six turns.
        assert_eq!(attempt[0].tokens, 120, "{attempt:?}");
    }

    // Every model request offered the campaign's eight tools, one call a
    // turn; each task ended with its submit and a closing text.
    let requests: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    let api = if cli.program == "claude" {
        "/v1/messages"
    } else {
        "/v1/responses"
    };
    let mut answers = Vec::new();
    for request in &requests {
        assert_eq!(request["path"], api, "{}", request["path"]);
        let offered = tool_names(request);
        for tool in TOOLS {
            let named = offered
                .iter()
                .any(|o| *o == tool || o.ends_with(&format!("__{tool}")));
            assert!(named, "{tool} is not offered: {offered:?}");
        }
        answers.push(
            request["answer"]["call"]
                .as_str()
                .map(|c| c.rsplit("__").next().unwrap().to_string())
                .unwrap_or_else(|| "text".into()),
        );
    }
    for step in SCRIPT.iter().chain(&["text"]) {
        let n = answers.iter().filter(|a| a == step).count();
        assert_eq!(n, 3, "{step} answered {n} times: {answers:?}");
    }
    if cli.program == "claude" {
        // `--tools ""` and ENABLE_TOOL_SEARCH=false: ours only, offered directly.
        let first: Vec<&Value> = requests[0]["tools"].as_array().unwrap().iter().collect();
        assert_eq!(first.len(), TOOLS.len(), "{first:?}");
    }
}

/// The names of the tools a model request offered, as the scripted
/// server and the meter's `model.jsonl` both record them.
fn tool_names(request: &Value) -> Vec<&str> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn claude_code_driven_by_a_scripted_model_settles_every_task_with_its_kernel() {
    scripted_campaign(&CLAUDE);
}

#[test]
fn codex_driven_by_a_scripted_model_settles_every_task_with_its_kernel() {
    scripted_campaign(&CODEX);
}

/// One vLLM campaign at a time: two on a two-core machine starve each other.
static VLLM: Mutex<()> = Mutex::new(());

/// A campaign of examples/local-vllm.env (the campaign's own vLLM) with the
/// CLI's guide line as its agent, on one task; the run directory, and how
/// `up` ended.
fn vllm_campaign(cli: &Cli, root: &Path) -> (PathBuf, Output) {
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
    let example = example("local-vllm.env");
    let text = std::fs::read_to_string(&example).unwrap();
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in {}", example.display()))
            .to_string()
    };
    // The CLIs' own instructions and tool schemas are long in this tiny
    // model's byte-level vocabulary (Codex's first request: 34,000 tokens,
    // Claude Code's 11,400), beyond the 8192 the built-in agent needs: a
    // longer context than the model was made with (its weights are random
    // anyway), and a KV cache that holds one such request. The last of a
    // repeated vLLM flag wins.
    let extra = format!(
        "VLLM_EXTRA_ARGS={} --max-model-len 65536 --kv-cache-memory-bytes 268435456",
        value("VLLM_EXTRA_ARGS")
    );
    let env = format!(
        "INFERENCE_ENV={} VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        value("INFERENCE_ENV")
    );
    // A port of its own: another test's vLLM may hold the default.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sets = [
        "AGENT_POLICY=command".to_string(),
        format!("AGENT_COMMAND={}", cli.guide_line()),
        "KERNELS=gemm".into(),
        "AGENTS_PER_NODE=1".into(),
        "MAX_ATTEMPTS=1".into(),
        format!("VLLM_PORT={port}"),
        extra,
        env,
        format!("RUN_ROOT={}", root.display()),
    ];
    let out = cli.up(&example, &sets);
    (only_run_dir(root), out)
}

/// How the CLI's transcript says it ended: whether it submitted, and
/// whether it ended well (exit 0).
fn how_it_ended(cli: &Cli, transcript: &str) -> (bool, bool) {
    let submitted = mcp_calls(transcript).iter().any(|c| c.tool == "submit");
    let events: Vec<Value> = transcript
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ended_well = if cli.program == "claude" {
        events
            .iter()
            .any(|e| e["type"] == "result" && e["is_error"] == false)
    } else {
        events.iter().any(|e| e["type"] == "turn.completed")
            && !events
                .iter()
                .any(|e| e["type"] == "turn.failed" || e["type"] == "error")
    };
    (submitted, ended_well)
}

fn cli_against_vllm(cli: &Cli) {
    let _one = VLLM.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let (run_dir, out) = vllm_campaign(cli, root.path());
    let context = format!("{}\n{}", stdout(&out), stderr(&out));
    assert_settled_exactly_once(&run_dir);
    let dir = run_dir.join("tasks/gemm.c.fp64/attempt-1");
    let transcript = std::fs::read_to_string(dir.join("agent.stdout")).unwrap_or_default();
    let errors = std::fs::read_to_string(dir.join("agent.stderr")).unwrap_or_default();
    let context = format!("{context}\nagent.stdout:\n{transcript}\nagent.stderr:\n{errors}");

    // It reached the endpoint, with the API it speaks, and the model answered.
    let log = std::fs::read_to_string(run_dir.join("roles/inference-0/stderr")).unwrap_or_default()
        + &std::fs::read_to_string(run_dir.join("roles/inference-0/stdout")).unwrap_or_default();
    let route = if cli.program == "claude" {
        "\"POST /v1/messages"
    } else {
        "\"POST /v1/responses"
    };
    let answered = log
        .lines()
        .filter(|l| l.contains(route) && l.contains(" 200 OK"))
        .count();
    assert!(
        answered >= 1,
        "no {route} answered 200 in vLLM's log:\n{log}\n{context}"
    );

    // Its requests offered the model every tool of ours, as the meter in
    // front of the model saw them (Claude Code names them
    // mcp__hpcagent__<tool>; Codex sends a namespace mcp__hpcagent of them).
    let requests = std::fs::read_to_string(dir.join("model.jsonl")).unwrap_or_default();
    let offered: Vec<Value> = requests
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let offered_ours = offered.iter().any(|r| {
        let names = tool_names(r);
        r["status"] == 200
            && TOOLS.iter().all(|t| {
                names.contains(&format!("mcp__hpcagent__{t}").as_str())
                    || names.contains(&format!("mcp__hpcagent.{t}").as_str())
            })
    });
    assert!(
        offered_ours,
        "no request answered 200 offered all of {TOOLS:?}: {requests}\n{context}"
    );

    // It had its tools: Claude Code says so at its start; Codex, told the
    // server is required, would have exited 1 without them.
    let (submitted, ended_well) = how_it_ended(cli, &transcript);
    if cli.program == "claude" {
        let init: Value = transcript
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["type"] == "system" && e["subtype"] == "init")
            .unwrap_or_else(|| panic!("no init event: {context}"));
        assert_eq!(init["mcp_servers"][0]["status"], "connected", "{init}");
        let tools: Vec<&str> = init["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let ours: Vec<String> = TOOLS
            .iter()
            .map(|t| format!("mcp__hpcagent__{t}"))
            .collect();
        assert!(
            ours.iter().all(|t| tools.contains(&t.as_str())),
            "{tools:?}"
        );
    } else {
        assert!(
            ended_well,
            "Codex did not start its tools or its turn: {context}"
        );
    }

    // Its attempt is recorded as it ended.
    let expected = match (submitted, ended_well) {
        (true, _) => AttemptOutcome::Submitted,
        (false, true) => AttemptOutcome::Finished,
        (false, false) => AttemptOutcome::Crashed,
    };
    let reader = Reader::open(&run_dir).unwrap();
    let attempts = reader.attempts().unwrap();
    eprintln!(
        "{}: {answered} answered by vLLM, submitted: {submitted}, exit 0: {ended_well}; \
         recorded: {attempts:?}",
        cli.program
    );
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(
        attempts[0].outcome,
        expected.as_str(),
        "{attempts:?}\n{context}"
    );
    let log = common::attempt_log(&run_dir);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["outcome"], expected.as_str(), "{log:?}");
    let result = &reader.results().unwrap()[0];
    assert_eq!(
        result.outcome.as_deref(),
        Some(expected.as_str()),
        "{result:?}"
    );
    if submitted {
        assert_eq!(result.submitted_by.as_deref(), Some("agent"), "{result:?}");
    } else {
        // The worker graded what was left for it, and says so; an agent
        // that did not submit failed, and so did this campaign of one.
        assert_ne!(result.submitted_by.as_deref(), Some("agent"), "{result:?}");
        assert!(result.agent_failed(), "{result:?}");
        assert!(!out.status.success(), "{context}");
    }
}

#[test]
fn claude_code_reaches_the_campaigns_vllm_and_its_end_is_recorded() {
    cli_against_vllm(&CLAUDE);
}

#[test]
fn codex_reaches_the_campaigns_vllm_and_its_end_is_recorded() {
    cli_against_vllm(&CODEX);
}

//! `hpcagent mcp` with a real MCP client session (rmcp, over the server's
//! stdin/stdout) against a real judge: initialize, list the tools, read the
//! task, write a solution, score it; a path out of the workspace is refused.

mod common;

use std::path::Path;

use common::{JudgeServer, repo};
use hpcagent_agent::mcp::LeaseFile;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// A lease file for gemm in C on `judge`, under `dir`.
fn lease_file(dir: &Path, judge: &JudgeServer) -> std::path::PathBuf {
    let run_dir = dir.join("run");
    let attempt_dir = run_dir.join("tasks/gemm.c.fp64/attempt-1");
    std::fs::create_dir_all(&attempt_dir).unwrap();
    std::fs::write(run_dir.join("env.resolved"), "PRESET=S\n").unwrap();
    let lease = LeaseFile {
        run_dir: run_dir.clone(),
        instance: "agent-0".into(),
        lease_id: String::new(),
        task_id: "gemm.c.fp64".into(),
        kernel: "gemm".into(),
        language: "c".into(),
        precision: "fp64".into(),
        attempt: 1,
        judge_url: judge.url.clone(),
        attempt_dir: attempt_dir.display().to_string(),
        budget_end_unix_ms: i64::MAX / 2,
    };
    let path = attempt_dir.join("lease.json");
    std::fs::write(&path, serde_json::to_string(&lease).unwrap()).unwrap();
    path
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn call(name: &'static str, arguments: Value) -> CallToolRequestParams {
    let params = CallToolRequestParams::new(name);
    match arguments {
        Value::Object(map) => params.with_arguments(map),
        _ => params,
    }
}

#[tokio::test]
async fn an_mcp_client_reads_the_task_and_scores_against_a_real_judge() {
    let judge = JudgeServer::start(&[], &[], None);
    let dir = tempfile::tempdir().unwrap();
    let lease = lease_file(dir.path(), &judge);
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hpcagent"));
    command
        .args(["mcp", "--lease"])
        .arg(&lease)
        // Only a failing judge would make the server call the orchestrator.
        .env("HPCAGENT_ORCHESTRATOR", "http://127.0.0.1:9")
        .env("HPCAGENT_TOKEN", "unused")
        .env("HPCAGENT_JUDGE_TOKEN", "unused")
        .current_dir(repo());
    let client =
        ().serve(TokioChildProcess::new(command).unwrap())
            .await
            .expect("the MCP session starts");
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(info.server_info.as_ref().unwrap().name, "hpcagent");

    let tools = client.list_tools(None).await.unwrap();
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "task",
        "read_file",
        "write_file",
        "score",
        "submit",
        "profile",
        "finish",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }

    let task = client.call_tool(call("task", json!({}))).await.unwrap();
    assert!(text(&task).contains("void gemm_fp64("), "{}", text(&task));

    let source = std::fs::read_to_string(repo().join("tests/submissions/gemm_ok.c")).unwrap();
    let written = client
        .call_tool(call(
            "write_file",
            json!({"path": "solution.c", "content": source}),
        ))
        .await
        .unwrap();
    assert_eq!(written.is_error, Some(false), "{}", text(&written));
    let scored = client.call_tool(call("score", json!({}))).await.unwrap();
    let verdict: Value = serde_json::from_str(&text(&scored)).unwrap();
    assert_eq!(verdict["status"], "ok", "{verdict}");
    assert!(verdict["speedup"].as_f64().unwrap() > 0.0);

    let escaped = client
        .call_tool(call("read_file", json!({"path": "../lease.json"})))
        .await
        .unwrap();
    assert_eq!(escaped.is_error, Some(true));
    assert!(text(&escaped).contains("leads out of the workspace"));
    let unknown = client.call_tool(call("compile", json!({}))).await.unwrap();
    assert!(text(&unknown).contains("there is no tool \"compile\""));

    client.cancel().await.unwrap();
}

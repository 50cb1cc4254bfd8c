//! `hpcagent mcp` with a real MCP client session (rmcp, over the server's
//! stdin/stdout) against a real judge: the worker side serves an attempt's
//! tools on its socket, the MCP server forwards to it. Initialize, list the
//! tools, read the task, write a solution, score it; a path out of the
//! workspace is refused, and so is a client without the attempt's secret.

mod common;

use std::sync::Arc;

use common::{JudgeServer, repo};
use hpcagent_agent::judge_link::JudgeLink;
use hpcagent_agent::tool_server::{SECRET_VAR, ToolClient, ToolServer};
use hpcagent_agent::tools::Toolbox;
use hpcagent_agent::workspace::Workspace;
use hpcagent_proto::v1 as pb;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// The tools of an attempt at gemm in C on `judge`, as a worker serves them.
async fn serve_tools(dir: &std::path::Path, judge: &JudgeServer, secret: &str) -> ToolServer {
    let lease = pb::Lease {
        task_id: "gemm.c.fp64".into(),
        kernel: "gemm".into(),
        language: "c".into(),
        precision: "fp64".into(),
        attempt: 1,
        budget_s: 600.0,
        judge_url: judge.url.clone(),
        attempt_dir: dir.display().to_string(),
        ..Default::default()
    };
    // Only a failing judge would make the tools call the orchestrator.
    let orchestrator = hpcagent_common::connect_lazy("http://127.0.0.1:9", "unused").unwrap();
    let link = JudgeLink::new(orchestrator, &lease, "unused");
    let tools = Toolbox::new(
        lease,
        link,
        Workspace::create(dir).unwrap(),
        "agent-0",
        None,
    );
    ToolServer::start(Arc::new(tokio::sync::Mutex::new(tools)), secret.to_string())
        .await
        .unwrap()
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
    let server = serve_tools(dir.path(), &judge, "s3cret").await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hpcagent"));
    command
        .args(["mcp", "--tools"])
        .arg(server.addr().to_string())
        .env(SECRET_VAR, "s3cret")
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
        .call_tool(call("read_file", json!({"path": "../verdict.json"})))
        .await
        .unwrap();
    assert_eq!(escaped.is_error, Some(true));
    assert!(text(&escaped).contains("leads out of the workspace"));
    let unknown = client.call_tool(call("compile", json!({}))).await.unwrap();
    assert!(text(&unknown).contains("there is no tool \"compile\""));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_without_the_attempts_secret_gets_nothing() {
    let judge = JudgeServer::start(&[], &[], None);
    let dir = tempfile::tempdir().unwrap();
    let server = serve_tools(dir.path(), &judge, "right").await;
    let mut stranger = ToolClient::connect(server.addr(), "wrong".into())
        .await
        .unwrap();
    let refused = stranger.call("task", "{}").await.unwrap_err();
    assert!(refused.contains("another attempt's tools"), "{refused}");
    assert!(server.addr().ip().is_loopback(), "{}", server.addr());
    let addr = server.addr();
    drop(server);
    common::wait_until_async(
        std::time::Duration::from_secs(5),
        "the port to go with its server",
        || async {
            tokio::net::TcpStream::connect(addr)
                .await
                .is_err()
                .then_some(())
        },
    )
    .await;
}

/// Every malformed message gets the JSON-RPC error it calls for, and the
/// session goes on: rmcp alone answers some with silence.
#[tokio::test]
async fn malformed_messages_get_json_rpc_errors_and_the_session_goes_on() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let judge = JudgeServer::start(&[], &[], None);
    let dir = tempfile::tempdir().unwrap();
    let server = serve_tools(dir.path(), &judge, "s3cret").await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hpcagent"))
        .args(["mcp", "--tools"])
        .arg(server.addr().to_string())
        .env(SECRET_VAR, "s3cret")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = async |line: Vec<u8>| -> Value {
        stdin.write_all(&line).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        let reply = tokio::time::timeout(std::time::Duration::from_secs(10), replies.next_line())
            .await
            .expect("a reply, not silence")
            .unwrap()
            .unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    assert_eq!(exchange(init.to_string().into_bytes()).await["id"], 1);
    // A notification has no reply: the ping after it answers.
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let both = format!("{initialized}\n{ping}");
    assert_eq!(exchange(both.into_bytes()).await["id"], 9);

    let malformed = exchange(b"{\"jsonrpc\": \"2.0\", \"id\": 2, ".to_vec()).await;
    assert_eq!(malformed["error"]["code"], -32700, "{malformed}");
    let bad_params = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "write_file", "arguments": "solution.c"}});
    let bad_params = exchange(bad_params.to_string().into_bytes()).await;
    assert_eq!(
        (
            bad_params["id"].clone(),
            bad_params["error"]["code"].clone()
        ),
        (json!(3), json!(-32602))
    );
    let mut oversized = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big.c","content":""#.to_vec();
    oversized.extend(std::iter::repeat_n(b'x', 9 << 20));
    oversized.extend(b"\"}}}");
    let refused = exchange(oversized).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(!dir.path().join("workspace/big.c").exists());

    let task = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "task", "arguments": {}}});
    let task = exchange(task.to_string().into_bytes()).await;
    assert_eq!(task["id"], 5);
    assert!(
        task["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("gemm"),
        "{task}"
    );
}

/// When its attempt ends, the server closes every connection it accepted:
/// a client still holding one gets nothing more.
#[tokio::test]
async fn an_attempts_connections_close_with_it() {
    let judge = JudgeServer::start(&[], &[], None);
    let dir = tempfile::tempdir().unwrap();
    let server = serve_tools(dir.path(), &judge, "s3cret").await;
    let mut client = ToolClient::connect(server.addr(), "s3cret".into())
        .await
        .unwrap();
    assert!(client.call("list_files", "{}").await.is_ok());
    let addr = server.addr();
    drop(server);
    // The port closes with the task that holds the connections.
    common::wait_until_async(
        std::time::Duration::from_secs(5),
        "the server to stop",
        || async {
            tokio::net::TcpStream::connect(addr)
                .await
                .is_err()
                .then_some(())
        },
    )
    .await;
    let late = client
        .call("write_file", r#"{"path": "late.c", "content": "x"}"#)
        .await;
    assert!(late.is_err(), "{late:?}");
    assert!(!dir.path().join("workspace/late.c").exists());
}

//! The `command` policy: an external agent CLI per task.
//!
//! `AGENT_COMMAND` is a command line with placeholders: `{workspace}`,
//! `{prompt_file}`, `{prompt}`, `{model}`, `{endpoint}` (the OpenAI-compatible
//! base URL of the lease's replica, "" when the campaign has none) and
//! `{mcp_config}`. The worker fills the workspace, writes the prompt and an
//! MCP configuration (`mcp.json`) naming `hpcagent mcp` as the agent's tool
//! server, serves the attempt's tools to it ([`crate::tool_server`]: the CLI
//! gets no token, only this attempt's tools), and runs the CLI in the
//! workspace, confined, under a supervisor that kills everything the CLI
//! started when the attempt ends ([`crate::sandbox`]), with its output kept
//! in the attempt directory. It gets what is left of the
//! task's wall-clock budget, less a reserve for the final submit, and is
//! stopped if the lease is lost. Its exit maps to the outcome: `finished`
//! (0), `crashed` (any other code or a signal), `time budget` (stopped at the
//! deadline). If the agent did not submit through its tools, the workspace's
//! solution file is submitted for it.

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use std::sync::Arc;

use hpcagent_proto::v1 as pb;
use serde_json::json;
use tokio::sync::Mutex;

use crate::lease::LeaseWatch;
use crate::pool::Attempt;
use crate::prompt::Skill;
use crate::sandbox::{self, Spec};
use crate::starter;
use crate::tool_server::{SECRET_VAR, ToolServer};
use crate::tools::Toolbox;

/// Wall-clock kept back for the final submit.
const SUBMIT_RESERVE: Duration = Duration::from_secs(60);
/// Time the CLI's supervisor gets between TERM and KILL: its own grace for
/// the CLI, and a margin to kill what is left.
const STOP_GRACE: Duration = Duration::from_secs(8);

/// What the policy runs, and with what.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    pub template: Vec<String>,
    pub model: String,
    /// The hpcagent binary (`hpcagent mcp` in the MCP configuration, and
    /// the CLI's supervisor).
    pub exe: PathBuf,
    pub profiling: bool,
    /// The run directory: hidden from the CLI, but for its own attempt's.
    pub run_dir: PathBuf,
}

pub async fn attempt(
    policy: &CommandPolicy,
    lease: &pb::Lease,
    tools: Toolbox,
    skills: &[Skill],
    lost: LeaseWatch,
) -> Attempt {
    let tools = Arc::new(Mutex::new(tools));
    let (outcome, message) = match run(policy, lease, &tools, skills, lost).await {
        Ok(ended) => ended,
        Err(why) => ("error".to_string(), why),
    };
    let mut tools = tools.lock().await;
    let (outcome, message) = match (tools.submitted().map(str::to_string), outcome.as_str()) {
        (Some(status), "finished") => (
            "submitted".to_string(),
            format!("{message}; submitted: {status}"),
        ),
        (Some(status), _) => (outcome, format!("{message}; submitted: {status}")),
        // The CLI had its chance: what it left in the workspace is graded.
        (None, "finished" | "crashed" | "time budget") => match tools.final_submit().await {
            Some(reply) if reply.ends.as_deref() == Some("submitted") => {
                let status = tools.submitted().unwrap_or("unknown");
                (
                    outcome,
                    format!("{message}; the solution file was submitted: {status}"),
                )
            }
            Some(reply) => (
                outcome,
                format!("{message}; the final submit failed: {}", reply.text),
            ),
            None => (outcome, message),
        },
        (None, _) => (outcome, message),
    };
    Attempt {
        outcome,
        message,
        tokens: 0,
        transcript: Path::new(&lease.attempt_dir)
            .join("agent.stdout")
            .display()
            .to_string(),
    }
}

/// Prepares the attempt and runs the CLI: (outcome, message).
async fn run(
    policy: &CommandPolicy,
    lease: &pb::Lease,
    tools: &Arc<Mutex<Toolbox>>,
    skills: &[Skill],
    lost: LeaseWatch,
) -> Result<(String, String), String> {
    let dir = PathBuf::from(&lease.attempt_dir);
    let (briefing, workspace, budget) = {
        let mut tools = tools.lock().await;
        let briefing = starter::prepare(&mut tools, skills, policy.profiling).await?;
        let reserve = SUBMIT_RESERVE.max(tools.slowest_grade() * 3);
        (
            briefing,
            tools.workspace().root().to_path_buf(),
            tools.budget_left().saturating_sub(reserve),
        )
    };
    let prompt = format!("{}\n\n{}", briefing.system, briefing.task);
    let prompt_file = dir.join("prompt.md");
    write(&prompt_file, &prompt, 0o644)?;
    let secret = format!("{:032x}", rand::random::<u128>());
    let server = ToolServer::start(tools.clone(), secret.clone())
        .await
        .map_err(|e| format!("cannot serve the attempt's tools: {e}"))?;
    let mcp_config = dir.join("mcp.json");
    write(
        &mcp_config,
        &mcp_configuration(&policy.exe, server.addr(), &secret),
        0o600,
    )?;
    let values = BTreeMap::from([
        ("workspace", workspace.display().to_string()),
        ("prompt_file", prompt_file.display().to_string()),
        ("prompt", prompt),
        ("model", policy.model.clone()),
        ("endpoint", lease.inference_url.clone()),
        ("mcp_config", mcp_config.display().to_string()),
    ]);
    let argv = render(&policy.template, &values);
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let ports: Vec<u16> = [
        inference_port(&lease.inference_url),
        Some(server.addr().port()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let spec = Spec {
        env: cli_env(lease, &policy.model, &scratch),
        cwd: workspace.clone(),
        confinement: Spec::confine(&policy.run_dir, &dir, &[workspace.clone(), scratch], &ports),
        argv,
    };
    let name = spec.argv.first().cloned().unwrap_or_default();
    if name.is_empty() {
        return Ok(("error".into(), "AGENT_COMMAND is empty".into()));
    }
    let mut supervisor = tokio::process::Command::new(&policy.exe);
    supervisor.args(sandbox::ENTRY).env_clear();
    let stdin = serde_json::to_vec(&spec).map_err(|e| e.to_string())?;
    let run = Run {
        name: &name,
        dir: &dir,
        budget,
        lost,
    };
    let ended = execute(supervisor, stdin, &run).await;
    drop(server);
    Ok(ended)
}

/// The CLI's environment: the worker's, without anything of the campaign's
/// (tokens, the orchestrator's address), with its model's endpoint and a
/// scratch directory of its own.
fn cli_env(lease: &pb::Lease, model: &str, scratch: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !k.starts_with("HPCAGENT_"))
        .filter(|(k, _)| !["OPENAI_BASE_URL", "OPENAI_API_BASE", "TMPDIR"].contains(&k.as_str()))
        .collect();
    if !env.iter().any(|(k, _)| k == "OPENAI_API_KEY") {
        env.push(("OPENAI_API_KEY".into(), "EMPTY".into()));
    }
    env.extend([
        ("OPENAI_BASE_URL".into(), lease.inference_url.clone()),
        ("OPENAI_API_BASE".into(), lease.inference_url.clone()),
        ("HPCAGENT_MODEL".into(), model.to_string()),
        ("TMPDIR".into(), scratch.display().to_string()),
    ]);
    env
}

/// The TCP port of an endpoint URL (`http://host:port/v1`), or its scheme's.
fn inference_port(url: &str) -> Option<u16> {
    let url = reqwest::Url::parse(url).ok()?;
    url.port_or_known_default()
}

/// The MCP configuration that starts `hpcagent mcp` on this attempt's tool
/// server, with the attempt's secret.
fn mcp_configuration(exe: &Path, tools: std::net::SocketAddr, secret: &str) -> String {
    let config = json!({"mcpServers": {"hpcagent": {
        "command": exe.display().to_string(),
        "args": ["mcp", "--tools", tools.to_string()],
        "env": {SECRET_VAR: secret},
    }}});
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// Fills each `{name}` of the template, in one pass: a value that itself
/// holds `{…}` (a prompt, say) is left as it is.
fn render(template: &[String], values: &BTreeMap<&str, String>) -> Vec<String> {
    template
        .iter()
        .map(|arg| {
            let mut out = String::new();
            let mut rest = arg.as_str();
            while let Some(open) = rest.find('{') {
                out.push_str(&rest[..open]);
                let after = &rest[open + 1..];
                match after
                    .find('}')
                    .and_then(|close| values.get(&after[..close]).map(|value| (value, close)))
                {
                    Some((value, close)) => {
                        out.push_str(value);
                        rest = &after[close + 1..];
                    }
                    None => {
                        out.push('{');
                        rest = after;
                    }
                }
            }
            out.push_str(rest);
            out
        })
        .collect()
}

/// What one run of the CLI is given.
struct Run<'a> {
    /// The CLI's program, for messages.
    name: &'a str,
    dir: &'a Path,
    budget: Duration,
    lost: LeaseWatch,
}

/// Runs `command` (the CLI's supervisor, `stdin` its spec) until it exits,
/// the budget runs out or the lease is lost: (outcome, message).
async fn execute(
    mut command: tokio::process::Command,
    stdin: Vec<u8>,
    run: &Run<'_>,
) -> (String, String) {
    let program = run.name;
    let log = |name: &str| std::fs::File::create(run.dir.join(name)).map(Stdio::from);
    let (Ok(stdout), Ok(stderr)) = (log("agent.stdout"), log("agent.stderr")) else {
        return (
            "error".into(),
            format!("cannot create logs in {}", run.dir.display()),
        );
    };
    command
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return ("crashed".into(), format!("cannot start {program}: {e}")),
    };
    if let Some(mut pipe) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        // One that died at once closed its stdin: its status says why.
        let _ = pipe.write_all(&stdin).await;
    }
    let pgid = child.id().unwrap_or(0) as i32;
    let deadline = tokio::time::Instant::now() + run.budget;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tokio::time::sleep_until(deadline) => {
                stop(&mut child, pgid).await;
                return (
                    "time budget".into(),
                    format!("{program} was stopped after {:?}, the task's budget", run.budget),
                );
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if (run.lost)() {
                    stop(&mut child, pgid).await;
                    return ("lease lost".into(), format!("{program} was stopped: the lease was taken back"));
                }
            }
        }
    };
    match status {
        Ok(s) if s.success() => ("finished".into(), format!("{program} exited 0")),
        Ok(s) => (
            "crashed".into(),
            format!("{program} ended with {s}; its output is in agent.stdout and agent.stderr"),
        ),
        Err(e) => ("crashed".into(), format!("{program}: {e}")),
    }
}

/// TERM to the supervisor (which passes it on and cleans up), KILL after a
/// grace period.
async fn stop(child: &mut tokio::process::Child, pgid: i32) {
    signal_group(pgid, libc::SIGTERM);
    if tokio::time::timeout(STOP_GRACE, child.wait())
        .await
        .is_err()
    {
        signal_group(pgid, libc::SIGKILL);
        let _ = child.wait().await;
    }
    signal_group(pgid, libc::SIGKILL);
}

fn signal_group(pgid: i32, signal: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) on the process group made for the agent CLI.
        unsafe { libc::kill(-pgid, signal) };
    }
}

/// Writes a file created with `mode`.
fn write(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once_and_values_left_as_they_are() {
        let template: Vec<String> = [
            "agent",
            "--mcp-config={mcp_config}",
            "-p",
            "{prompt}",
            "{unknown}",
            "{",
        ]
        .map(String::from)
        .to_vec();
        let values = BTreeMap::from([
            ("mcp_config", "/a/mcp.json".to_string()),
            ("prompt", "write {workspace}/x".to_string()),
            ("workspace", "/w".to_string()),
        ]);
        assert_eq!(
            render(&template, &values),
            [
                "agent",
                "--mcp-config=/a/mcp.json",
                "-p",
                "write {workspace}/x",
                "{unknown}",
                "{"
            ]
        );
    }

    fn lease(dir: &Path) -> pb::Lease {
        pb::Lease {
            inference_url: "http://127.0.0.1:1/v1".into(),
            attempt_dir: dir.display().to_string(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn exits_map_to_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let sh = |script: &str| {
            let mut c = tokio::process::Command::new("sh");
            c.args(["-c", script]);
            c
        };
        let run = |budget: u64, lost: bool| Run {
            name: "sh",
            dir: dir.path(),
            budget: Duration::from_secs(budget),
            lost: Arc::new(move || lost),
        };
        let (outcome, _) = execute(sh("cat"), b"spec".to_vec(), &run(10, false)).await;
        assert_eq!(outcome, "finished");
        let out = std::fs::read_to_string(dir.path().join("agent.stdout")).unwrap();
        assert_eq!(out, "spec", "the supervisor reads its spec on stdin");
        let (outcome, message) = execute(sh("exit 3"), Vec::new(), &run(10, false)).await;
        assert_eq!(outcome, "crashed");
        assert!(message.contains("exit status: 3"), "{message}");
        let (outcome, _) = execute(sh("sleep 30"), Vec::new(), &run(1, false)).await;
        assert_eq!(outcome, "time budget");
        let (outcome, _) = execute(sh("sleep 30"), Vec::new(), &run(60, true)).await;
        assert_eq!(outcome, "lease lost");
    }

    #[test]
    fn the_cli_gets_no_campaign_variable_and_its_own_endpoint() {
        // SAFETY: a test-only variable, set before any thread reads it.
        unsafe { std::env::set_var("HPCAGENT_TOKEN", "secret-token") };
        let lease = lease(Path::new("/run/x"));
        let env = cli_env(&lease, "m", Path::new("/scratch"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HPCAGENT_TOKEN"), None);
        assert_eq!(get("OPENAI_BASE_URL"), Some("http://127.0.0.1:1/v1"));
        assert_eq!(get("HPCAGENT_MODEL"), Some("m"));
        assert_eq!(get("TMPDIR"), Some("/scratch"));
        assert_eq!(inference_port("http://127.0.0.1:1/v1"), Some(1));
        assert_eq!(inference_port("https://api.example/v1"), Some(443));
    }

    #[test]
    fn the_mcp_configuration_names_the_server_and_its_secret_only() {
        let config: serde_json::Value = serde_json::from_str(&mcp_configuration(
            Path::new("/bin/hpcagent"),
            "127.0.0.1:4000".parse().unwrap(),
            "s3cret",
        ))
        .unwrap();
        let server = &config["mcpServers"]["hpcagent"];
        assert_eq!(server["command"], "/bin/hpcagent");
        assert_eq!(server["args"], json!(["mcp", "--tools", "127.0.0.1:4000"]));
        assert_eq!(server["env"], json!({SECRET_VAR: "s3cret"}));
    }
}

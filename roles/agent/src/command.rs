//! The `command` policy: an external agent CLI per task.
//!
//! `AGENT_COMMAND` is a command line with placeholders: `{workspace}`,
//! `{prompt_file}`, `{prompt}`, `{model}`, `{endpoint}` (the OpenAI-compatible
//! base URL of the lease's replica) and `{mcp_config}`. The worker fills the
//! workspace, writes the prompt, the lease (`lease.json`) and an MCP
//! configuration (`mcp.json`, mode 0600: it carries the tokens) naming
//! `hpcagent mcp` as the agent's tool server, and runs the CLI in the
//! workspace, in a process group of its own, with its output kept in the
//! attempt directory. It gets what is left of the task's wall-clock budget,
//! less a reserve for the final submit. Its exit maps to the outcome:
//! `finished` (0), `crashed` (any other code or a signal), `time budget`
//! (killed at the deadline). If the agent did not submit through its tools,
//! the workspace's solution file is submitted for it.

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hpcagent_orchestrator::client::{ORCHESTRATOR_VAR, TOKEN_VAR};
use hpcagent_orchestrator::control::auth::JUDGE_TOKEN_VAR;
use hpcagent_proto::v1 as pb;
use serde_json::json;

use crate::mcp::{LEASE_FILE, LeaseFile};
use crate::pool::Attempt;
use crate::prompt::Skill;
use crate::starter;
use crate::tools::Toolbox;

/// Wall-clock kept back for the final submit.
const SUBMIT_RESERVE: Duration = Duration::from_secs(60);
/// Time a CLI gets between TERM and KILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What the policy runs, and with what.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    pub template: Vec<String>,
    pub model: String,
    /// The hpcagent binary (`hpcagent mcp` in the MCP configuration).
    pub exe: PathBuf,
    pub run_dir: PathBuf,
    pub instance: String,
    pub profiling: bool,
}

pub async fn attempt(
    policy: &CommandPolicy,
    lease: &pb::Lease,
    mut tools: Toolbox,
    skills: &[Skill],
) -> Attempt {
    let (outcome, message) = match run(policy, lease, &mut tools, skills).await {
        Ok(ended) => ended,
        Err(why) => ("error".to_string(), why),
    };
    tools.adopt_earlier_submit();
    let (outcome, message) = match (tools.submitted().map(str::to_string), outcome.as_str()) {
        (Some(status), "finished") => (
            "submitted".to_string(),
            format!("{message}; submitted: {status}"),
        ),
        (Some(status), _) => (outcome, format!("{message}; submitted: {status}")),
        (None, _) => match tools.final_submit().await {
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
    tools: &mut Toolbox,
    skills: &[Skill],
) -> Result<(String, String), String> {
    let dir = PathBuf::from(&lease.attempt_dir);
    let briefing = starter::prepare(tools, skills, policy.profiling).await?;
    let prompt = format!("{}\n\n{}", briefing.system, briefing.task);
    let prompt_file = dir.join("prompt.md");
    write(&prompt_file, &prompt, 0o644)?;
    let budget = tools.budget_left().saturating_sub(SUBMIT_RESERVE);
    let lease_file = dir.join(LEASE_FILE);
    let file = LeaseFile::new(
        lease,
        &policy.run_dir,
        &policy.instance,
        tools.budget_left().as_secs_f64(),
    );
    write(
        &lease_file,
        &serde_json::to_string_pretty(&file).unwrap_or_default(),
        0o600,
    )?;
    let mcp_config = dir.join("mcp.json");
    write(
        &mcp_config,
        &mcp_configuration(&policy.exe, &lease_file)?,
        0o600,
    )?;
    let values = BTreeMap::from([
        ("workspace", tools.workspace().root().display().to_string()),
        ("prompt_file", prompt_file.display().to_string()),
        ("prompt", prompt),
        ("model", policy.model.clone()),
        ("endpoint", lease.inference_url.clone()),
        ("mcp_config", mcp_config.display().to_string()),
    ]);
    let argv = render(&policy.template, &values);
    Ok(execute(
        &argv,
        tools.workspace().root(),
        &dir,
        lease,
        &policy.model,
        budget,
    )
    .await)
}

/// The MCP configuration that starts `hpcagent mcp` for this lease, with the
/// orchestrator's address and the tokens it needs.
fn mcp_configuration(exe: &Path, lease_file: &Path) -> Result<String, String> {
    let mut env = serde_json::Map::new();
    for var in [ORCHESTRATOR_VAR, TOKEN_VAR, JUDGE_TOKEN_VAR] {
        let value = std::env::var(var).map_err(|_| format!("{var} is not set"))?;
        env.insert(var.to_string(), json!(value));
    }
    let config = json!({"mcpServers": {"hpcagent": {
        "command": exe.display().to_string(),
        "args": ["mcp", "--lease", lease_file.display().to_string()],
        "env": env,
    }}});
    Ok(serde_json::to_string_pretty(&config).unwrap_or_default())
}

/// Fills each `{name}` of the template.
fn render(template: &[String], values: &BTreeMap<&str, String>) -> Vec<String> {
    template
        .iter()
        .map(|arg| {
            values.iter().fold(arg.clone(), |a, (name, value)| {
                a.replace(&format!("{{{name}}}"), value)
            })
        })
        .collect()
}

/// Runs the CLI until it exits or `budget` runs out: (outcome, message).
async fn execute(
    argv: &[String],
    workspace: &Path,
    dir: &Path,
    lease: &pb::Lease,
    model: &str,
    budget: Duration,
) -> (String, String) {
    let Some((program, args)) = argv.split_first() else {
        return ("error".into(), "AGENT_COMMAND is empty".into());
    };
    let log = |name: &str| std::fs::File::create(dir.join(name)).map(Stdio::from);
    let (Ok(stdout), Ok(stderr)) = (log("agent.stdout"), log("agent.stderr")) else {
        return (
            "error".into(),
            format!("cannot create logs in {}", dir.display()),
        );
    };
    let spawned = tokio::process::Command::new(program)
        .args(args)
        .current_dir(workspace)
        .env_remove(TOKEN_VAR)
        .env("OPENAI_BASE_URL", &lease.inference_url)
        .env("OPENAI_API_BASE", &lease.inference_url)
        .env(
            "OPENAI_API_KEY",
            std::env::var("OPENAI_API_KEY").unwrap_or_else(|_| "EMPTY".into()),
        )
        .env("HPCAGENT_MODEL", model)
        .env("HPCAGENT_LEASE_FILE", dir.join(LEASE_FILE))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return ("crashed".into(), format!("cannot start {program}: {e}")),
    };
    let pgid = child.id().unwrap_or(0) as i32;
    let status = match tokio::time::timeout(budget, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            signal_group(pgid, libc::SIGTERM);
            if tokio::time::timeout(STOP_GRACE, child.wait())
                .await
                .is_err()
            {
                signal_group(pgid, libc::SIGKILL);
                let _ = child.wait().await;
            }
            return (
                "time budget".into(),
                format!("{program} was stopped after {budget:?}, the task's budget"),
            );
        }
    };
    // Whatever the CLI left running goes with it.
    signal_group(pgid, libc::SIGKILL);
    match status {
        Ok(s) if s.success() => ("finished".into(), format!("{program} exited 0")),
        Ok(s) => (
            "crashed".into(),
            format!("{program} ended with {s}; its output is in agent.stdout and agent.stderr"),
        ),
        Err(e) => ("crashed".into(), format!("{program}: {e}")),
    }
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
    fn placeholders_are_filled_inside_arguments() {
        let template: Vec<String> = [
            "agent",
            "--mcp-config={mcp_config}",
            "-p",
            "{prompt}",
            "{unknown}",
        ]
        .map(String::from)
        .to_vec();
        let values = BTreeMap::from([
            ("mcp_config", "/a/mcp.json".to_string()),
            ("prompt", "do it".to_string()),
        ]);
        assert_eq!(
            render(&template, &values),
            [
                "agent",
                "--mcp-config=/a/mcp.json",
                "-p",
                "do it",
                "{unknown}"
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
        let sh = |script: &str| ["sh".to_string(), "-c".into(), script.to_string()];
        let run = |argv: [String; 3], budget: u64| {
            let dir = dir.path().to_path_buf();
            async move {
                execute(
                    &argv,
                    &dir,
                    &dir,
                    &lease(&dir),
                    "m",
                    Duration::from_secs(budget),
                )
                .await
            }
        };
        let (outcome, _) = run(sh("echo \"$OPENAI_BASE_URL $HPCAGENT_MODEL\""), 10).await;
        assert_eq!(outcome, "finished");
        let out = std::fs::read_to_string(dir.path().join("agent.stdout")).unwrap();
        assert_eq!(
            out.trim(),
            "http://127.0.0.1:1/v1 m",
            "the CLI learns its endpoint and model"
        );
        let (outcome, message) = run(sh("exit 3"), 10).await;
        assert_eq!(outcome, "crashed");
        assert!(message.contains("exit status: 3"), "{message}");
        let (outcome, _) = run(sh("sleep 30"), 1).await;
        assert_eq!(outcome, "time budget");
    }

    #[test]
    fn the_mcp_configuration_names_the_server_and_carries_its_tokens() {
        // SAFETY: this test alone sets these variables (tests of this module
        // do not read them concurrently).
        unsafe {
            std::env::set_var(ORCHESTRATOR_VAR, "http://o:1");
            std::env::set_var(TOKEN_VAR, "t1");
            std::env::set_var(JUDGE_TOKEN_VAR, "t2");
        }
        let config: serde_json::Value = serde_json::from_str(
            &mcp_configuration(Path::new("/bin/hpcagent"), Path::new("/r/lease.json")).unwrap(),
        )
        .unwrap();
        let server = &config["mcpServers"]["hpcagent"];
        assert_eq!(server["command"], "/bin/hpcagent");
        assert_eq!(server["args"], json!(["mcp", "--lease", "/r/lease.json"]));
        assert_eq!(server["env"][TOKEN_VAR], "t1");
        assert_eq!(server["env"][JUDGE_TOKEN_VAR], "t2");
    }
}

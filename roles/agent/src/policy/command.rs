//! The `command` policy: an external agent CLI per task.
//!
//! `AGENT_COMMAND` is a command line with placeholders: `{workspace}`,
//! `{prompt_file}`, `{prompt}`, `{model}`, `{endpoint}` (the OpenAI-compatible
//! base URL of the lease's replica, through the attempt's [`crate::meter`],
//! "" when the campaign has none),
//! `{anthropic_endpoint}` (the same server's Anthropic Messages API),
//! `{mcp_config}` and `{codex_home}`. The worker fills the workspace, writes
//! the prompt and the CLIs' configurations ([`crate::cli_config`]) naming
//! `hpcagent mcp` as the agent's tool
//! server, serves the attempt's tools to it ([`crate::tool_server`]: the CLI
//! gets no token, only this attempt's tools), and runs the CLI in the
//! workspace, confined, under a supervisor that kills everything the CLI
//! started when the attempt ends ([`crate::sandbox`]), with its output kept
//! in the attempt directory. It gets what is left of the
//! task's wall-clock budget, less a reserve for the final submit, and is
//! stopped if the lease is lost. After its submit (which ends the lease) it
//! gets a grace period to write its last words and exit. Its exit maps to
//! the outcome: `finished` (0), `crashed` (any other code or a signal),
//! `time budget` (stopped at the deadline). If the agent did not submit
//! through its tools, the workspace's solution file is submitted for it.
//! Its tokens are what its meter counted in the model's answers; without a
//! model, what the CLI said of itself ([`super::usage`]).

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hpcagent_common::AttemptOutcome;
use hpcagent_common::config::AGENT_COMMAND_PLACEHOLDERS;
use hpcagent_proto::v1 as pb;
use tokio::sync::Mutex;

use crate::cli_config;
use crate::lease::LeaseWatch;
use crate::meter::Meter;
use crate::prompt::Skill;
use crate::sandbox::{self, Spec};
use crate::starter;
use crate::tool_server::ToolServer;
use crate::tools::Toolbox;

use super::Attempt;

/// Wall-clock kept back for the final submit.
const SUBMIT_RESERVE: Duration = Duration::from_secs(60);
/// Time the CLI's supervisor gets between TERM and KILL: its own grace for
/// the CLI, and a margin to kill what is left.
const STOP_GRACE: Duration = Duration::from_secs(8);
/// How long a CLI may go on after its submit before it is stopped: real
/// ones write a closing message (a last model call) and then exit.
const SUBMIT_GRACE: Duration = Duration::from_secs(30);
/// What is kept of each of the CLI's output streams: the first and the last
/// this many bytes (one was seen writing 50 MB).
const LOG_HEAD: usize = 1 << 20;
const LOG_TAIL: usize = 1 << 20;

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
    let (outcome, message, metered) = match run(policy, lease, &tools, skills, lost).await {
        Ok(ran) => (ran.outcome, ran.message, ran.metered),
        Err(why) => (AttemptOutcome::Error, why, None),
    };
    let mut tools = tools.lock().await;
    let (outcome, message) = match (tools.submitted().map(str::to_string), outcome) {
        (Some(status), AttemptOutcome::Finished) => (
            AttemptOutcome::Submitted,
            format!("{message}; submitted: {status}"),
        ),
        (Some(status), _) => (outcome, format!("{message}; submitted: {status}")),
        // The CLI had its chance: what it left in the workspace is graded,
        // on its behalf. One that never ran had none, and its task is
        // tried again (or fails) rather than settle on the starter.
        (None, AttemptOutcome::Finished | AttemptOutcome::Crashed | AttemptOutcome::TimeBudget) => {
            (outcome, tools.submit_what_is_left(message, outcome).await)
        }
        (None, _) => (outcome, message),
    };
    let transcript = Path::new(&lease.attempt_dir).join("agent.stdout");
    // What the CLI wrote is its; read only as text, whatever it is.
    let said = std::fs::read(&transcript).unwrap_or_default();
    Attempt {
        outcome,
        message,
        tokens: metered
            .unwrap_or_else(|| super::usage::reported_tokens(&String::from_utf8_lossy(&said))),
        transcript: transcript.display().to_string(),
    }
}

/// How the CLI's run ended, and the tokens its model calls cost where the
/// attempt had a [`Meter`] (a campaign with a model).
struct Ran {
    outcome: AttemptOutcome,
    message: String,
    metered: Option<u64>,
}

/// Prepares the attempt and runs the CLI.
async fn run(
    policy: &CommandPolicy,
    lease: &pb::Lease,
    tools: &Arc<Mutex<Toolbox>>,
    skills: &[Skill],
    lost: LeaseWatch,
) -> Result<Ran, String> {
    let dir = PathBuf::from(&lease.attempt_dir);
    let (briefing, workspace, budget, submitted) = {
        let mut tools = tools.lock().await;
        let briefing = starter::prepare(&mut tools, skills, policy.profiling).await?;
        let reserve = SUBMIT_RESERVE.max(tools.slowest_grade() * 3);
        (
            briefing,
            tools.workspace().root().to_path_buf(),
            tools.budget_left().saturating_sub(reserve),
            tools.submit_seen(),
        )
    };
    let prompt = format!("{}\n\n{}", briefing.system, briefing.task);
    let prompt_file = dir.join("prompt.md");
    write(&prompt_file, &prompt, 0o644)?;
    let (exe, exe_dir) = tool_exe(&policy.exe, &policy.run_dir)?;
    let secret = format!("{:032x}", rand::random::<u128>());
    let server = ToolServer::start(tools.clone(), secret.clone())
        .await
        .map_err(|e| format!("cannot serve the attempt's tools: {e}"))?;
    // The CLI's model is the lease's, through the attempt's own meter.
    let meter = match lease.inference_url.as_str() {
        "" => None,
        url => Some(Meter::start(url, &dir.join("model.jsonl")).await?),
    };
    let endpoint = meter
        .as_ref()
        .map_or_else(|| lease.inference_url.clone(), Meter::endpoint);
    let mcp_config = dir.join("mcp.json");
    write(
        &mcp_config,
        &cli_config::mcp_json(&exe, server.addr(), &secret),
        0o600,
    )?;
    // Codex writes its sessions into its home: the CLI's own scratch.
    let scratch = dir.join("scratch");
    let codex_home = scratch.join("codex");
    for dir in [&codex_home, &scratch.join("tmp")] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let codex = cli_config::codex_toml(&exe, server.addr(), &secret, &policy.model, &endpoint);
    write(&codex_home.join("config.toml"), &codex, 0o600)?;
    let values = BTreeMap::from([
        ("workspace", workspace.display().to_string()),
        ("prompt_file", prompt_file.display().to_string()),
        ("prompt", prompt),
        ("model", policy.model.clone()),
        ("endpoint", endpoint.clone()),
        ("anthropic_endpoint", cli_config::anthropic_base(&endpoint)),
        ("mcp_config", mcp_config.display().to_string()),
        ("codex_home", codex_home.display().to_string()),
    ]);
    debug_assert!(
        values
            .keys()
            .eq(std::collections::BTreeSet::from(AGENT_COMMAND_PLACEHOLDERS).iter()),
        "the placeholders filled are the ones configuration checks accept"
    );
    let argv = render(&policy.template, &values);
    let ports: Vec<u16> = [meter.as_ref().map(Meter::port), Some(server.addr().port())]
        .into_iter()
        .flatten()
        .collect();
    let spec = Spec {
        env: cli_env(&endpoint, &policy.model, &scratch, &codex_home),
        cwd: workspace.clone(),
        confinement: Spec::confine(
            &policy.run_dir,
            &[dir.clone()].into_iter().chain(exe_dir).collect::<Vec<_>>(),
            &[workspace.clone(), scratch],
            &ports,
        ),
        argv,
    };
    let name = spec.argv.first().cloned().unwrap_or_default();
    if name.is_empty() {
        return Ok(Ran {
            outcome: AttemptOutcome::Error,
            message: "AGENT_COMMAND is empty".into(),
            metered: None,
        });
    }
    let mut supervisor = tokio::process::Command::new(&policy.exe);
    supervisor.args(sandbox::ENTRY).env_clear();
    let stdin = serde_json::to_vec(&spec).map_err(|e| e.to_string())?;
    let run = Run {
        name: &name,
        dir: &dir,
        budget,
        lost,
        submitted,
        submit_grace: SUBMIT_GRACE,
    };
    let (outcome, message) = execute(supervisor, stdin, &run).await;
    drop(server);
    Ok(Ran {
        outcome,
        message,
        metered: meter.as_ref().map(Meter::tokens),
    })
}

/// The hpcagent binary as the CLI can start it (`hpcagent mcp`): where it
/// is, unless the sandbox hides that (a checkout under /tmp); then a copy
/// in the run directory's `bin/`, with that directory to be made readable.
fn tool_exe(exe: &Path, run_dir: &Path) -> Result<(PathBuf, Option<PathBuf>), String> {
    let real = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    if !sandbox::hidden(run_dir)
        .iter()
        .any(|dir| real.starts_with(dir))
    {
        return Ok((exe.to_path_buf(), None));
    }
    let bin = run_dir.join("bin");
    let copy = bin.join("hpcagent");
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    if size(&copy).is_none() || size(&copy) != size(&real) {
        let failed =
            |e: std::io::Error| format!("copying {} into {}: {e}", real.display(), bin.display());
        std::fs::create_dir_all(&bin).map_err(failed)?;
        // Each worker copies under its own name and renames: a CLI never
        // starts a half-written binary.
        let part = bin.join(format!("hpcagent.{}.part", std::process::id()));
        std::fs::copy(&real, &part).map_err(failed)?;
        std::fs::rename(&part, &copy).map_err(failed)?;
    }
    Ok((copy, Some(bin)))
}

/// The CLI's environment: the worker's, without anything of the campaign's
/// (tokens, the orchestrator's address), with its model's `endpoint` (the
/// attempt's meter), a scratch directory of its own and the CLIs' settings
/// ([`cli_config::cli_variables`]).
fn cli_env(
    endpoint: &str,
    model: &str,
    scratch: &Path,
    codex_home: &Path,
) -> Vec<(String, String)> {
    const SET_HERE: &[&str] = &[
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "TMPDIR",
    ];
    let settings = cli_config::cli_variables(scratch, codex_home);
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !k.starts_with("HPCAGENT_"))
        .filter(|(k, _)| !SET_HERE.contains(&k.as_str()))
        .filter(|(k, _)| !settings.iter().any(|(name, _)| name == k))
        .collect();
    for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
        if !env.iter().any(|(k, _)| k == key) {
            env.push((key.into(), "EMPTY".into()));
        }
    }
    let anthropic = cli_config::anthropic_base(endpoint);
    env.extend([
        ("OPENAI_BASE_URL".into(), endpoint.to_string()),
        ("OPENAI_API_BASE".into(), endpoint.to_string()),
        // Claude Code: the campaign's model for its main and its small calls.
        ("ANTHROPIC_BASE_URL".into(), anthropic),
        ("ANTHROPIC_MODEL".into(), model.to_string()),
        ("ANTHROPIC_SMALL_FAST_MODEL".into(), model.to_string()),
        ("HPCAGENT_MODEL".into(), model.to_string()),
        // Apart from the CLIs' homes: Codex refuses to put its helper
        // binaries in a home that lies inside the temporary directory.
        ("TMPDIR".into(), scratch.join("tmp").display().to_string()),
    ]);
    env.extend(settings.into_iter().map(|(k, v)| (k.to_string(), v)));
    env
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
    /// Raised when the attempt submits: its lease then ends, and the CLI
    /// gets `submit_grace` ([`SUBMIT_GRACE`]) to exit on its own.
    submitted: Arc<AtomicBool>,
    submit_grace: Duration,
}

/// Runs `command` (the CLI's supervisor, `stdin` its spec) until it exits,
/// the budget runs out, the lease is lost or the grace after its submit is
/// over: (outcome, message). Its output is kept, capped, in the attempt
/// directory.
async fn execute(
    mut command: tokio::process::Command,
    stdin: Vec<u8>,
    run: &Run<'_>,
) -> (AttemptOutcome, String) {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return (
                AttemptOutcome::CouldNotStart,
                format!("cannot start the agent sandbox for {}: {e}", run.name),
            );
        }
    };
    let mut logs = Vec::new();
    if let Some(out) = child.stdout.take() {
        logs.push(tokio::spawn(keep_capped(out, run.dir.join("agent.stdout"))));
    }
    if let Some(err) = child.stderr.take() {
        logs.push(tokio::spawn(keep_capped(err, run.dir.join("agent.stderr"))));
    }
    if let Some(mut pipe) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        // One that died at once closed its stdin: its status says why.
        let _ = pipe.write_all(&stdin).await;
    }
    let ended = supervise(&mut child, run).await;
    for log in logs {
        // The supervisor killed the CLI's tree: its pipes close with it.
        match tokio::time::timeout(STOP_GRACE, log).await {
            Ok(Ok(Err(e))) => tracing::warn!("keeping {}'s output: {e}", run.name),
            Ok(_) => {}
            Err(_) => tracing::warn!("{}'s output did not end with it", run.name),
        }
    }
    match ended {
        (AttemptOutcome::Crashed, _, Some(sandbox::CANNOT_START)) => {
            match never_ran(&run.dir.join("agent.stderr")) {
                Some(why) => (AttemptOutcome::CouldNotStart, why),
                None => (ended.0, ended.1),
            }
        }
        (outcome, message, _) => (outcome, message),
    }
}

/// The sandbox's own word that the CLI never ran: the first line of its
/// stderr, when the sandbox wrote it.
fn never_ran(stderr: &Path) -> Option<String> {
    let text = std::fs::read_to_string(stderr).ok()?;
    let first = text.lines().next()?;
    first
        .starts_with(sandbox::CANNOT_START_SAYS)
        .then(|| first.to_string())
}

/// Waits for the CLI's end, stopping it at the budget, at a lost lease, or
/// when the grace after its submit is over: (outcome, message, the exit
/// code it ended with on its own).
async fn supervise(
    child: &mut tokio::process::Child,
    run: &Run<'_>,
) -> (AttemptOutcome, String, Option<i32>) {
    let program = run.name;
    let pgid = child.id().unwrap_or(0) as i32;
    let deadline = tokio::time::Instant::now() + run.budget;
    let mut submitted_at: Option<tokio::time::Instant> = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tokio::time::sleep_until(deadline) => {
                stop(child, pgid).await;
                return (
                    AttemptOutcome::TimeBudget,
                    format!("{program} was stopped after {:?}, the task's budget", run.budget),
                    None,
                );
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if run.submitted.load(Ordering::Acquire) {
                    // The submit settles the task and ends the lease: that is
                    // no loss, only the cue to finish.
                    let since = *submitted_at.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= run.submit_grace {
                        stop(child, pgid).await;
                        return (AttemptOutcome::Submitted, format!(
                            "{program} did not exit within {:?} of its submit and was stopped",
                            run.submit_grace
                        ), None);
                    }
                } else if (run.lost)() {
                    stop(child, pgid).await;
                    return (AttemptOutcome::LeaseLost, format!("{program} was stopped: the lease was taken back"), None);
                }
            }
        }
    };
    match status {
        Ok(s) if s.success() => (
            AttemptOutcome::Finished,
            format!("{program} exited 0"),
            Some(0),
        ),
        Ok(s) => {
            // The CLI's supervisor exits with the CLI's code, or 128 + the
            // signal that ended it.
            use std::os::unix::process::ExitStatusExt;
            let how = match (s.code(), s.signal()) {
                (Some(code), _) if code > 128 => format!("was killed by signal {}", code - 128),
                (Some(code), _) => format!("exited {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => format!("ended with {s}"),
            };
            (
                AttemptOutcome::Crashed,
                format!("{program} {how}; its output is in agent.stdout and agent.stderr"),
                s.code(),
            )
        }
        Err(e) => (AttemptOutcome::Crashed, format!("{program}: {e}"), None),
    }
}

/// Copies `stream` into `path`, keeping its first [`LOG_HEAD`] and last
/// [`LOG_TAIL`] bytes and saying how much was cut between them.
async fn keep_capped(
    mut stream: impl tokio::io::AsyncRead + Unpin,
    path: PathBuf,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut file = tokio::fs::File::create(&path).await?;
    let mut head_left = LOG_HEAD;
    let mut tail = std::collections::VecDeque::with_capacity(LOG_TAIL);
    let mut cut: u64 = 0;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let head = n.min(head_left);
        file.write_all(&buf[..head]).await?;
        head_left -= head;
        tail.extend(&buf[head..n]);
        if tail.len() > LOG_TAIL {
            let excess = tail.len() - LOG_TAIL;
            tail.drain(..excess);
            cut += excess as u64;
        }
    }
    if cut > 0 {
        let note = format!(
            "\n[hpcagent: {cut} bytes cut here; the first {LOG_HEAD} and the last {LOG_TAIL} are kept]\n"
        );
        file.write_all(note.as_bytes()).await?;
    }
    file.write_all(tail.make_contiguous()).await?;
    file.flush().await
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
            submitted: Arc::default(),
            submit_grace: Duration::from_secs(3),
        };
        let (outcome, _) = execute(sh("cat"), b"spec".to_vec(), &run(10, false)).await;
        assert_eq!(outcome, AttemptOutcome::Finished);
        let out = std::fs::read_to_string(dir.path().join("agent.stdout")).unwrap();
        assert_eq!(out, "spec", "the supervisor reads its spec on stdin");
        let (outcome, message) = execute(sh("exit 3"), Vec::new(), &run(10, false)).await;
        assert_eq!(outcome, AttemptOutcome::Crashed);
        assert!(message.starts_with("sh exited 3"), "{message}");
        let (outcome, message) = execute(sh("kill -9 $$"), Vec::new(), &run(10, false)).await;
        assert_eq!(outcome, AttemptOutcome::Crashed);
        assert!(
            message.starts_with("sh was killed by signal 9"),
            "{message}"
        );
        // The sandbox's own word that the CLI never ran, and its exit code.
        let never = format!(
            "echo '{} /tmp/cli: execve' >&2; exit 127",
            sandbox::CANNOT_START_SAYS
        );
        let (outcome, message) = execute(sh(&never), Vec::new(), &run(10, false)).await;
        assert_eq!(outcome, AttemptOutcome::CouldNotStart);
        assert!(message.contains("/tmp/cli: execve"), "{message}");
        let (outcome, _) = execute(sh("exit 127"), Vec::new(), &run(10, false)).await;
        assert_eq!(
            outcome,
            AttemptOutcome::Crashed,
            "a CLI's own 127 is its crash"
        );
        let (outcome, _) = execute(sh("sleep 30"), Vec::new(), &run(1, false)).await;
        assert_eq!(outcome, AttemptOutcome::TimeBudget);
        let (outcome, _) = execute(sh("sleep 30"), Vec::new(), &run(60, true)).await;
        assert_eq!(outcome, AttemptOutcome::LeaseLost);
    }

    #[tokio::test]
    async fn after_its_submit_a_cli_may_finish_within_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let sh = |script: &str| {
            let mut c = tokio::process::Command::new("sh");
            c.args(["-c", script]);
            c
        };
        // The submit ended the lease: the watch says lost, which is no loss.
        let run = Run {
            name: "sh",
            dir: dir.path(),
            budget: Duration::from_secs(60),
            lost: Arc::new(|| true),
            submitted: Arc::new(AtomicBool::new(true)),
            submit_grace: Duration::from_secs(3),
        };
        let (outcome, message) = execute(sh("sleep 1.5; echo bye"), Vec::new(), &run).await;
        assert_eq!(
            (outcome.as_str(), message.as_str()),
            ("no submission", "sh exited 0")
        );
        let (outcome, message) = execute(sh("sleep 30"), Vec::new(), &run).await;
        assert_eq!(outcome, AttemptOutcome::Submitted);
        assert!(
            message.contains("did not exit within 3s of its submit"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_flood_of_output_keeps_its_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut flood = b"HEAD".to_vec();
        flood.extend(std::iter::repeat_n(b'.', 5 << 20));
        flood.extend(b"TAIL");
        keep_capped(&flood[..], path.clone()).await.unwrap();
        let kept = std::fs::read(&path).unwrap();
        assert!(
            kept.len() < LOG_HEAD + LOG_TAIL + 200,
            "{} bytes",
            kept.len()
        );
        assert!(kept.starts_with(b"HEAD") && kept.ends_with(b"TAIL"));
        let text = String::from_utf8_lossy(&kept);
        assert!(text.contains(&format!(
            "[hpcagent: {} bytes cut here",
            flood.len() - LOG_HEAD - LOG_TAIL
        )));
        keep_capped(&b"short"[..], path.clone()).await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
    }

    #[test]
    fn the_cli_gets_no_campaign_variable_and_its_own_endpoint() {
        // SAFETY: a test-only variable, set before any thread reads it.
        unsafe { std::env::set_var("HPCAGENT_TOKEN", "secret-token") };
        let env = cli_env(
            "http://127.0.0.1:1/v1",
            "m",
            Path::new("/scratch"),
            Path::new("/scratch/codex"),
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HPCAGENT_TOKEN"), None);
        assert_eq!(get("OPENAI_BASE_URL"), Some("http://127.0.0.1:1/v1"));
        assert_eq!(get("HPCAGENT_MODEL"), Some("m"));
        assert_eq!(
            get("TMPDIR"),
            Some("/scratch/tmp"),
            "apart from the CLIs' homes"
        );
        assert_eq!(get("ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:1"));
        assert_eq!(get("ANTHROPIC_MODEL"), Some("m"));
        assert_eq!(get("CODEX_HOME"), Some("/scratch/codex"));
    }
}

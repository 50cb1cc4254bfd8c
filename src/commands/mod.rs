//! The subcommands, and what they share: configuration flags and error reporting.

pub mod bench;
pub mod compare;
pub mod config;
pub mod corpus;
pub mod edf;
pub mod judge;
pub mod mcp;
pub mod plan;
pub mod report;
pub mod results;
pub mod role;
pub mod status;
pub mod submit;
pub mod up;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use hpcagent_common::config::{self as cfg, Config, ConfigError, Override};
use hpcagent_common::{REFUSED_EXIT, Refused};
use hpcagent_orchestrator::allocation::AllocationError;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the resolved configuration and where each value came from.
    Config(config::ConfigArgs),
    /// Show which nodes run which role, and the exact srun lines.
    Plan(plan::PlanArgs),
    /// Submit the campaign as one Slurm job.
    Submit(submit::SubmitArgs),
    /// Run a campaign: in this Slurm job, or on this machine.
    Up(up::UpArgs),
    /// A campaign's progress: live from its orchestrator, or from its store.
    Status(status::StatusArgs),
    /// A campaign's tasks and their outcomes.
    Results(results::ResultsArgs),
    /// A campaign's report: an HTML page with figures, from its store.
    Report(report::ReportArgs),
    /// Runs side by side over their common tasks: per-task outcomes, Score, cost.
    Compare(compare::CompareArgs),
    /// Serve a judge, or ask one to describe, grade or profile.
    Judge(judge::JudgeArgs),
    /// Run one role instance of a campaign (started by `up`).
    #[command(hide = true)]
    Role(role::RoleArgs),
    /// Serve one lease's tools over MCP on stdin/stdout (for external agent CLIs).
    Mcp(mcp::McpArgs),
    /// List or check the task corpus.
    Corpus(corpus::CorpusArgs),
    /// Register the Container Engine environments, variables expanded.
    Edf(edf::EdfArgs),
    /// Measure hpcagent against peers: dispatch, startup, judge, scale.
    Bench(bench::BenchArgs),
}

impl Command {
    /// Whether the command only reads files and prints, from its start: it
    /// ends quietly when its reader goes away (see `end_quietly_when_stdout_closes`).
    /// The others keep SIGPIPE ignored: a judge writing to a runner that died
    /// at once must get an error, not end the judge. `status` and `bench`
    /// restore the default themselves, once their own gRPC is done.
    pub fn only_prints(&self) -> bool {
        matches!(
            self,
            Command::Config(_)
                | Command::Plan(_)
                | Command::Results(_)
                | Command::Report(_)
                | Command::Compare(_)
        ) || matches!(self, Command::Corpus(c) if c.only_prints())
    }
}

/// Lets SIGPIPE end the process, so that it ends quietly when its reader goes
/// away (`hpcagent results | head -1`), as Unix tools do, instead of panicking
/// in `println!`. Only for a process with nothing left to write but stdout:
/// gRPC writes with `writev`, which raises SIGPIPE where `send` would not, so
/// a peer closing its connection would end the process without a word.
pub fn end_quietly_when_stdout_closes() {
    // SAFETY: sets a process-wide disposition; no handler runs Rust code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Marks an error as a request that can never succeed as sent (exit code 2).
#[derive(Debug)]
pub struct InvalidRequest;

impl std::fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid request")
    }
}

/// Logs to stderr; `RUST_LOG` filters (default: info).
pub fn init_logging() {
    init_logging_at("info");
}

/// Logs warnings and errors only (commands with their own progress output).
pub fn init_logging_quiet() {
    init_logging_at("warn");
}

fn init_logging_at(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Role logs go to files: colour codes only on a terminal.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Where a campaign's steps find the binary, the corpus and the skills pages
/// (absolute: every node resolves them the same way).
pub fn layout(
    config: &Config,
    run_dir: PathBuf,
) -> anyhow::Result<hpcagent_orchestrator::placement::Layout> {
    use anyhow::Context;
    Ok(hpcagent_orchestrator::placement::Layout {
        run_dir,
        exe: std::env::current_exe().context("cannot find the hpcagent executable")?,
        corpus: corpus_root(config)?,
        skills: std::path::absolute(hpcagent_agent::prompt::default_root())?,
    })
}

/// The corpus a campaign runs: `CORPUS`, else the default one (absolute).
pub fn corpus_root(config: &Config) -> anyhow::Result<PathBuf> {
    match &config.settings.corpus {
        Some(dir) => Ok(dir.0.clone()),
        None => Ok(std::path::absolute(hpcagent_corpus::Corpus::default_root())?),
    }
}

/// Flags every command that reads a configuration takes.
#[derive(Debug, Args)]
pub struct ConfigFlags {
    /// The campaign's env file.
    #[arg(long = "env", value_name = "FILE")]
    pub env_file: Option<PathBuf>,
    /// Override a key (highest precedence); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl ConfigFlags {
    /// The configuration a run directory's campaign was started with
    /// (`env.resolved`), with this command's `--set` on top.
    pub fn load_run_dir(&self, dir: &Path) -> anyhow::Result<(Config, PathBuf)> {
        let dir = std::path::absolute(dir)?;
        let env = dir.join("env.resolved");
        anyhow::ensure!(
            env.is_file(),
            "{} is not a run directory (no env.resolved)",
            dir.display()
        );
        let flags = ConfigFlags {
            env_file: Some(env),
            set: self.set.clone(),
        };
        Ok((flags.load(Vec::new())?, dir))
    }

    /// Resolves the configuration, with `extra` flag-derived overrides on top.
    pub fn load(&self, extra: Vec<Override>) -> anyhow::Result<Config> {
        let mut overrides = Vec::new();
        for assignment in &self.set {
            let Some((key, value)) = assignment.split_once('=') else {
                return Err(ConfigError(vec![cfg::Diagnostic::new(
                    cfg::Origin::Cli(format!("--set {assignment}")),
                    None,
                    "expected --set KEY=VALUE",
                )])
                .into());
            };
            overrides.push(Override {
                flag: format!("--set {assignment}"),
                key: key.trim().to_string(),
                value: value.to_string(),
            });
        }
        overrides.extend(extra);
        Ok(cfg::load(self.env_file.as_deref(), overrides)?)
    }
}

/// Prints an error; configuration and input errors exit 2, everything else 1.
pub fn report_error(err: &anyhow::Error) -> ExitCode {
    if let Some(config) = err.downcast_ref::<ConfigError>() {
        for diagnostic in &config.0 {
            eprintln!("error: {diagnostic}");
        }
        eprintln!("nothing was launched");
        return ExitCode::from(2);
    }
    if err.downcast_ref::<InvalidRequest>().is_some() {
        eprintln!("error: {}", err.root_cause());
        return ExitCode::from(2);
    }
    eprintln!("error: {err:#}");
    if err.downcast_ref::<AllocationError>().is_some() {
        return ExitCode::from(2);
    }
    if err.downcast_ref::<Refused>().is_some() {
        return ExitCode::from(REFUSED_EXIT);
    }
    ExitCode::from(1)
}

//! `hpcagent`: one binary for every command and every role. This file only
//! parses the command line and dispatches; each command lives in `commands/`.

mod commands;

use std::process::ExitCode;

use clap::Parser;

use commands::Command;

/// Slurm-native orchestrator for agentic HPC benchmarks.
#[derive(Debug, Parser)]
#[command(name = "hpcagent", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Config(args) => commands::config::run(args),
        Command::Plan(args) => commands::plan::run(args),
        Command::Submit(args) => commands::submit::run(args),
        Command::Judge(args) => commands::judge::run(args),
        Command::Corpus(args) => commands::corpus::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => commands::report(&err),
    }
}

//! `hpcagent`: one binary for every command and every role. This file only
//! parses the command line and dispatches; each command lives in `commands/`.

mod commands;
#[cfg(test)]
mod doc_commands;

use std::process::ExitCode;

use clap::Parser;

use commands::Command;

/// mimalloc for the Rust side of every command: the orchestrator's lease
/// traffic allocates per message and per row, and glibc's malloc took 15%
/// of its profile; `bench dispatch` handles 18% more leases with it. C code
/// a submission loads keeps glibc's malloc (no symbols are overridden).
/// Version 2 without huge pages (Cargo.toml): version 3, and huge pages
/// zeroed at first touch, each cost about a millisecond at every process
/// start, and the judge starts a runner per grade.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Slurm-native orchestrator for agentic HPC benchmarks.
#[derive(Debug, Parser)]
#[command(name = "hpcagent", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(entry) = hpcagent_runner::entry(&args) {
        commands::judge::run_process(entry);
    }
    if args == hpcagent_agent::sandbox::ENTRY {
        std::process::exit(hpcagent_agent::sandbox::main());
    }
    let cli = Cli::parse();
    if cli.command.only_prints() {
        commands::end_quietly_when_stdout_closes();
    }
    let result = match cli.command {
        Command::Config(args) => commands::config::run(args).map(|()| ExitCode::SUCCESS),
        Command::Plan(args) => commands::plan::run(args).map(|()| ExitCode::SUCCESS),
        Command::Submit(args) => commands::submit::run(args).map(|()| ExitCode::SUCCESS),
        Command::Up(args) => commands::up::run(args),
        Command::Status(args) => commands::status::run(args).map(|()| ExitCode::SUCCESS),
        Command::Results(args) => commands::results::run(args).map(|()| ExitCode::SUCCESS),
        Command::Report(args) => commands::report::run(args).map(|()| ExitCode::SUCCESS),
        Command::Compare(args) => commands::compare::run(args).map(|()| ExitCode::SUCCESS),
        Command::Judge(args) => commands::judge::run(args).map(|()| ExitCode::SUCCESS),
        Command::Role(args) => commands::role::run(args).map(|()| ExitCode::SUCCESS),
        Command::Mcp(args) => commands::mcp::run(args).map(|()| ExitCode::SUCCESS),
        Command::Corpus(args) => commands::corpus::run(args).map(|()| ExitCode::SUCCESS),
        Command::Edf(args) => commands::edf::run(args).map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => commands::bench::run(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(err) => commands::report_error(&err),
    }
}

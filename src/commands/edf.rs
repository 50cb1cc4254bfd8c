//! `hpcagent edf install`: registers the project's Container Engine
//! environments with every variable expanded.
//!
//! The EDFs in `containers/edf/` are templates (`${SCRATCH}`),
//! and the engine expands variables only as a technical preview, on one
//! vCluster: what it reads must hold absolute paths. This renders each
//! template from this shell's environment into `~/.edf` (or `--to`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use hpcagent_orchestrator::slurm::edf;

#[derive(Debug, Args)]
pub struct EdfArgs {
    #[command(subcommand)]
    command: EdfCommand,
}

#[derive(Debug, Subcommand)]
enum EdfCommand {
    /// Render the EDF templates, variables expanded, where the engine looks.
    Install(InstallArgs),
}

#[derive(Debug, Args)]
struct InstallArgs {
    /// The templates (default: containers/edf of this checkout).
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// Where to write them (default: ~/.edf).
    #[arg(long, value_name = "DIR")]
    to: Option<PathBuf>,
}

pub fn run(args: EdfArgs) -> anyhow::Result<()> {
    let EdfCommand::Install(args) = args.command;
    let from = args.from.unwrap_or_else(default_templates);
    let to = match args.to {
        Some(dir) => dir,
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set: give --to")?)
            .join(".edf"),
    };
    let mut names: Vec<String> = std::fs::read_dir(&from)
        .with_context(|| format!("cannot read the EDF templates in {}", from.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    anyhow::ensure!(
        !names.is_empty(),
        "no EDF templates (*.toml) in {}",
        from.display()
    );
    // Each name resolves to its template first, whatever EDF_PATH says.
    let templates = std::path::absolute(&from)?.display().to_string();
    let var = |name: &str| match name {
        "EDF_PATH" => Some(templates.clone()),
        _ => std::env::var(name).ok(),
    };
    for name in names {
        let path = edf::render(&name, &var, &to).map_err(anyhow::Error::msg)?;
        println!("{}", path.display());
    }
    Ok(())
}

fn default_templates() -> PathBuf {
    [
        std::env::current_dir()
            .ok()
            .map(|d| d.join("containers/edf")),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("containers/edf")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_dir())
    .unwrap_or_else(|| PathBuf::from("containers/edf"))
}

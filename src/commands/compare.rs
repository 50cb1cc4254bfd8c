//! `hpcagent compare`: runs side by side over their common tasks.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The runs' directories, two or more (labelled A, B, … in this order).
    #[arg(num_args = 2.., required = true)]
    runs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Also write the comparison as a page, DIR/compare.html.
    #[arg(long, value_name = "DIR")]
    page: Option<PathBuf>,
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let comparison = hpcagent_report::Comparison::load(&args.runs)?;
    if comparison.tasks.is_empty() {
        anyhow::bail!("the runs have no task in common: nothing to compare");
    }
    match args.format {
        Format::Table => print!("{}", comparison.table()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&comparison)?),
    }
    if let Some(dir) = &args.page {
        std::fs::create_dir_all(dir)?;
        let page = dir.join("compare.html");
        std::fs::write(&page, comparison.page())?;
        eprintln!("{}", page.display());
    }
    Ok(())
}

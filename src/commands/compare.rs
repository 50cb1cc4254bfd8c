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
    /// Also write the comparison as a page, DIR/compare.html, with its figure.
    #[arg(long, value_name = "DIR")]
    page: Option<PathBuf>,
    /// A TrueType font for the figure's text [default: DejaVu Sans, where
    /// Linux distributions install it].
    #[arg(long, value_name = "FILE")]
    font: Option<PathBuf>,
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
        let page = comparison.write_page(dir, args.font.as_deref())?;
        eprintln!("{}", page.display());
    }
    Ok(())
}

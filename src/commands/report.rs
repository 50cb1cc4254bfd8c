//! `hpcagent report`: a campaign's store as an HTML page with figures.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The campaign's run directory.
    run_dir: PathBuf,
    /// Where the page and figures go [default: RUN_DIR/report].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// A TrueType font for the figures' text [default: DejaVu Sans, where
    /// Linux distributions install it].
    #[arg(long, value_name = "FILE")]
    font: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let options = hpcagent_report::Options {
        out_dir: args.out.unwrap_or_else(|| args.run_dir.join("report")),
        font: args.font,
    };
    let page = hpcagent_report::write(&args.run_dir, &options)?;
    println!("{}", page.display());
    Ok(())
}

//! `hpcagent results`: a campaign's tasks and their outcomes, from its store.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hpcagent_orchestrator::store::speedup::Speedup;
use hpcagent_orchestrator::store::{Reader, TaskResult};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Csv,
    Json,
}

#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// The campaign's run directory.
    run_dir: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

pub fn run(args: ResultsArgs) -> anyhow::Result<()> {
    let results = Reader::open(&args.run_dir)?.results()?;
    match args.format {
        Format::Table => print_table(&results),
        Format::Csv => {
            println!(
                "task,kernel,language,precision,attempts,state,status,speedup,speedup_low,speedup_high"
            );
            let number = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
            for r in &results {
                println!(
                    "{},{},{},{},{},{},{},{},{},{}",
                    r.task,
                    r.kernel,
                    r.language,
                    r.precision,
                    r.attempts,
                    r.state,
                    r.status.as_deref().unwrap_or(""),
                    number(r.speedup),
                    number(r.speedup_low),
                    number(r.speedup_high)
                );
            }
        }
        Format::Json => println!("{}", serde_json::to_string_pretty(&results)?),
    }
    Ok(())
}

/// The results as a table, with a summary line. The speedup, last since
/// its width varies, comes with its 95% interval, or as "no change".
pub fn print_table(results: &[TaskResult]) {
    // HPCAgent-Bench's path keys run to 80 characters and more.
    let width = results
        .iter()
        .map(|r| r.kernel.chars().count())
        .max()
        .unwrap_or(0)
        .max(28);
    println!(
        "{:width$} {:8} {:9} {:>8}  {:10} SPEEDUP",
        "TASK", "LANGUAGE", "PRECISION", "ATTEMPTS", "STATUS"
    );
    for r in results {
        let status = r.status.as_deref().unwrap_or(&r.state);
        let status = if r.state == "failed" {
            "failed"
        } else {
            status
        };
        let speedup = r.speedup.map_or_else(
            || "-".into(),
            |s| Speedup::new(s, r.speedup_low, r.speedup_high).to_string(),
        );
        println!(
            "{:width$} {:8} {:9} {:>8}  {:10} {}",
            r.kernel, r.language, r.precision, r.attempts, status, speedup
        );
    }
    let settled = results.iter().filter(|r| r.state == "settled").count();
    let ok = results
        .iter()
        .filter(|r| r.status.as_deref() == Some("ok"))
        .count();
    // A task of no change counts at its measured speedup: the mean says
    // where the campaign stands, the table which tasks changed.
    let geomean = hpcagent_report::geometric_mean(results.iter().filter_map(|r| r.speedup))
        .map_or_else(|| "-".to_string(), |mean| format!("{mean:.2}x"));
    println!(
        "{} tasks: {settled} settled ({ok} ok), {} failed; geometric mean speedup {geomean}",
        results.len(),
        results.iter().filter(|r| r.state == "failed").count()
    );
}

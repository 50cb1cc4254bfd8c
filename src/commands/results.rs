//! `hpcagent results`: a campaign's tasks and their outcomes, from its store.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hpcagent_common::speedup::Speedup;
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
    let reader = Reader::open(&args.run_dir)?;
    let results = reader.results()?;
    match args.format {
        Format::Table => print_table(&results),
        Format::Csv => {
            println!(
                "task,kernel,language,precision,attempts,state,status,speedup,speedup_low,speedup_high,outcome,submitted_by,build_log,track"
            );
            let number = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
            let text = |x: &Option<String>| x.clone().unwrap_or_default();
            for r in &results {
                println!(
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    r.task,
                    r.kernel,
                    r.language,
                    r.precision,
                    r.attempts,
                    r.state,
                    r.status.as_deref().unwrap_or(""),
                    number(r.speedup),
                    number(r.speedup_low),
                    number(r.speedup_high),
                    text(&r.outcome),
                    text(&r.submitted_by),
                    text(&r.build_log),
                    r.track
                );
            }
        }
        Format::Json => {
            // The run's identity above its rows: two runs' files say what
            // each was (docs/operator-guide.md, Results).
            let campaign = reader.campaign()?;
            let run = hpcagent_report::RunIdentity::of(&args.run_dir, campaign.as_ref());
            let score = hpcagent_report::score_results(&results);
            let attempts = reader.attempts()?;
            let cost = hpcagent_report::Cost::of(&args.run_dir, campaign.as_ref(), &attempts);
            // Each row with its own cost: its attempts' time and tokens,
            // and its share of the run's node- and GPU-hours.
            let costs = hpcagent_report::per_task(&attempts, &cost);
            let tasks: Vec<serde_json::Value> = results
                .iter()
                .map(|r| {
                    let mut row = serde_json::to_value(r)?;
                    row["cost"] = serde_json::to_value(
                        costs.get(r.task.as_str()).cloned().unwrap_or_default(),
                    )?;
                    Ok(row)
                })
                .collect::<serde_json::Result<_>>()?;
            let json =
                serde_json::json!({"run": run, "score": score, "cost": cost, "tasks": tasks});
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
    }
    Ok(())
}

/// The results as a table, with a summary line. AGENT is how the task's
/// last attempt ended; a status graded for an agent that did not submit
/// is marked as the worker's (`starter`: the file it was given, `left`:
/// the file as it left it). The speedup, last since its width varies,
/// comes with its 95% interval, or as "no change", and "suspect" when it
/// is above HPCAgent-Bench's plausibility gate.
pub fn print_table(results: &[TaskResult]) {
    // HPCAgent-Bench's path keys run to 80 characters and more.
    let width = results
        .iter()
        .map(|r| r.kernel.chars().count())
        .max()
        .unwrap_or(0)
        .max(28);
    println!(
        "{:width$} {:8} {:9} {:>8}  {:15} {:16} SPEEDUP",
        "TASK", "LANGUAGE", "PRECISION", "ATTEMPTS", "AGENT", "STATUS"
    );
    for r in results {
        let mut speedup = r.speedup.map_or_else(
            || "-".into(),
            |s| Speedup::new(s, r.speedup_low, r.speedup_high).to_string(),
        );
        if hpcagent_report::Graded::of(r).suspect() {
            speedup += &format!("; {}", hpcagent_report::suspect_words());
        }
        println!(
            "{:width$} {:8} {:9} {:>8}  {:15} {:16} {}",
            r.kernel,
            r.language,
            r.precision,
            r.attempts,
            r.outcome.as_deref().unwrap_or("-"),
            status(r),
            speedup
        );
    }
    for r in results
        .iter()
        .filter(|r| r.status.as_deref() == Some("build_error"))
    {
        if let Some(log) = &r.build_log {
            println!("{} {}: build log in {log}", r.kernel, r.language);
        }
    }
    println!("{}", summary(results));
    println!("{}", hpcagent_report::score_results(results));
}

/// A task's status as the table shows it.
fn status(r: &TaskResult) -> String {
    let status = match r.state.as_str() {
        "failed" => "failed",
        _ => r.status.as_deref().unwrap_or(&r.state),
    };
    match r.submitted_by.as_deref() {
        Some(by @ ("starter" | "left")) => format!("{status} ({by})"),
        _ => status.to_string(),
    }
}

/// The summary line: what the agents did, then the geometric mean over
/// the agents' own submits (a task of no change counts at its measured
/// speedup: the mean says where the campaign stands, the table which
/// tasks changed; a worker's submit for an agent is not the agent's).
pub fn summary(results: &[TaskResult]) -> String {
    let count = |f: &dyn Fn(&TaskResult) -> bool| results.iter().filter(|r| f(r)).count();
    let by_agents = count(&|r| r.by_agent());
    let ok = count(&|r| r.by_agent() && r.status.as_deref() == Some("ok"));
    let for_agents = count(&|r| r.state == "settled" && !r.by_agent());
    let failed = count(&|r| r.state == "failed");
    let mut ends = std::collections::BTreeMap::<&str, usize>::new();
    for r in results.iter().filter(|r| r.agent_failed()) {
        *ends
            .entry(r.outcome.as_deref().unwrap_or("unknown"))
            .or_default() += 1;
    }
    let geomean = hpcagent_report::geometric_mean(
        results
            .iter()
            .filter(|r| r.by_agent())
            .filter_map(|r| r.speedup),
    )
    .map_or_else(|| "-".to_string(), |mean| format!("{mean:.2}x"));
    let mut line = format!(
        "{} tasks: {} settled ({by_agents} by their agents, {ok} ok",
        results.len(),
        by_agents + for_agents
    );
    if for_agents > 0 {
        line += &format!("; {for_agents} graded for agents that did not submit");
    }
    line += &format!("), {failed} failed");
    if !ends.is_empty() {
        let ends: Vec<String> = ends.iter().map(|(end, n)| format!("{n} {end}")).collect();
        line += &format!(
            "; agents failed on {}: {}",
            count(&|r| r.agent_failed()),
            ends.join(", ")
        );
    }
    line + &format!("; geometric mean speedup of the agents' submits {geomean}")
}

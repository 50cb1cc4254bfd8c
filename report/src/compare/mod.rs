//! Runs side by side over the tasks they share: "model A against model B"
//! as one table, one JSON document or one page. Each run's identity comes
//! first; then, per common task, how it ended in each run (speedup with
//! its interval, or how the agent failed and what was graded instead);
//! then each run's solved count, HPCAgent-Bench Score and tokens over the
//! common tasks only, so that the numbers compare like with like; and the
//! common tasks whose speedups divide by different things in different
//! runs ([`denominator`]). Its page's figure is its own ([`figure`]).

mod denominator;
mod figure;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hpcagent_common::speedup::Speedup;
use hpcagent_orchestrator::store::{AttemptRow, CampaignRow, Reader, TaskResult};
use serde::Serialize;

use crate::score::{BenchScore, Graded, score_results};
use crate::{ReportError, RunIdentity};

pub use denominator::Unlike;

/// What a comparison reads of one run, once.
struct Loaded {
    label: String,
    dir: PathBuf,
    results: Vec<TaskResult>,
    attempts: Vec<AttemptRow>,
    campaign: Option<CampaignRow>,
    /// Each settled task's denominator ([`denominator::settled`]).
    denominators: BTreeMap<String, denominator::Measured>,
}

/// One run of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// A, B, C, … in the order given.
    pub label: String,
    pub dir: PathBuf,
    pub identity: RunIdentity,
    /// Over the common tasks.
    pub score: BenchScore,
    pub tokens: u64,
    /// The whole run's (its other tasks' too).
    pub cost: crate::Cost,
    #[serde(skip)]
    results: Vec<TaskResult>,
}

/// One mark of the comparison's figure: task `task` in run `run`.
pub(crate) struct Mark {
    pub task: usize,
    pub run: usize,
    pub speedup: Speedup,
}

/// Runs and the tasks they share.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub runs: Vec<Run>,
    /// The tasks every run has, in the first run's order.
    pub tasks: Vec<String>,
    /// Per common task, each run's cell as the table shows it.
    pub rows: Vec<Vec<String>>,
    /// Tasks some runs have and others not: left out.
    pub left_out: usize,
    /// Common tasks whose speedups divide by different things in
    /// different runs: theirs do not compare.
    pub unlike: Vec<Unlike>,
}

impl Comparison {
    pub fn load(dirs: &[PathBuf]) -> Result<Comparison, ReportError> {
        let mut loaded = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            loaded.push(load_run(label(i), dir)?);
        }
        let ids = |run: &Loaded| -> BTreeSet<String> {
            run.results.iter().map(|r| r.task.clone()).collect()
        };
        let all: BTreeSet<String> = loaded.iter().flat_map(ids).collect();
        let common: BTreeSet<String> = loaded
            .iter()
            .map(ids)
            .reduce(|a, b| a.intersection(&b).cloned().collect())
            .unwrap_or_default();
        let tasks: Vec<String> = loaded
            .first()
            .map(|first| {
                first
                    .results
                    .iter()
                    .map(|r| r.task.clone())
                    .filter(|t| common.contains(t))
                    .collect()
            })
            .unwrap_or_default();
        let named: Vec<&BTreeMap<String, denominator::Measured>> =
            loaded.iter().map(|run| &run.denominators).collect();
        let unlike = denominator::unlike(&tasks, &named);
        let mut runs = Vec::new();
        for run in loaded {
            let shared: Vec<TaskResult> = run
                .results
                .into_iter()
                .filter(|r| common.contains(&r.task))
                .collect();
            runs.push(Run {
                label: run.label,
                tokens: tokens(&run.attempts, &common),
                cost: crate::Cost::of(&run.dir, run.campaign.as_ref(), &run.attempts),
                identity: RunIdentity::of(&run.dir, run.campaign.as_ref()),
                dir: run.dir,
                score: score_results(&shared),
                results: shared,
            });
        }
        let rows = tasks
            .iter()
            .map(|task| {
                runs.iter()
                    .map(|run| {
                        run.results
                            .iter()
                            .find(|r| &r.task == task)
                            .map_or_else(|| "-".into(), cell)
                    })
                    .collect()
            })
            .collect();
        Ok(Comparison {
            left_out: all.len() - common.len(),
            runs,
            tasks,
            rows,
            unlike,
        })
    }

    /// The comparison as text: identities, the per-task table, the totals.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for run in &self.runs {
            let _ = writeln!(out, "{}  {}", run.label, describe(run));
        }
        let width = self.tasks.iter().map(|t| t.len()).max().unwrap_or(4).max(4);
        let columns: Vec<usize> = (0..self.runs.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|row| row[i].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(24)
            })
            .collect();
        let _ = write!(out, "\n{:width$}", "TASK");
        for (run, w) in self.runs.iter().zip(&columns) {
            let _ = write!(out, "  {:w$}", run.label);
        }
        out.push('\n');
        for (task, row) in self.tasks.iter().zip(&self.rows) {
            let _ = write!(out, "{task:width$}");
            for (cell, w) in row.iter().zip(&columns) {
                let _ = write!(out, "  {cell:w$}");
            }
            out.push('\n');
        }
        out.push('\n');
        for run in &self.runs {
            let _ = writeln!(
                out,
                "{}  {}; {} tokens; the whole run {:.2} node-hours",
                run.label, run.score, run.tokens, run.cost.node_hours
            );
        }
        let _ = write!(out, "over the {} tasks all runs have", self.tasks.len());
        if self.left_out > 0 {
            let _ = write!(out, " ({} others left out)", self.left_out);
        }
        out.push('\n');
        if !self.unlike.is_empty() {
            let _ = writeln!(
                out,
                "speedups over different denominators or arrays on other pages, which do not compare:"
            );
            for unlike in &self.unlike {
                let _ = writeln!(out, "  {}  {}", unlike.task, self.per_run(unlike));
            }
        }
        out
    }

    /// Each run's denominator of `unlike`'s task, labelled.
    fn per_run(&self, unlike: &Unlike) -> String {
        (self.runs.iter().zip(&unlike.denominators))
            .map(|(run, denominator)| format!("{} {denominator}", run.label))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Each common task's speedup in each run whose agent solved it.
    pub(crate) fn speedups(&self) -> Vec<Mark> {
        let mut marks = Vec::new();
        for (task, id) in self.tasks.iter().enumerate() {
            for (run, r) in self.runs.iter().enumerate() {
                let Some(result) = r.results.iter().find(|t| &t.task == id) else {
                    continue;
                };
                if let (true, Some(s)) = (Graded::of(result).solved, result.speedup) {
                    let speedup = Speedup::new(s, result.speedup_low, result.speedup_high);
                    marks.push(Mark { task, run, speedup });
                }
            }
        }
        marks
    }

    /// Writes the comparison's page, `compare.html`, and its figure into
    /// `dir` (made if missing); the page's path. `font` as for a report.
    pub fn write_page(&self, dir: &Path, font: Option<&Path>) -> Result<PathBuf, ReportError> {
        crate::font::register(font)?;
        std::fs::create_dir_all(dir).map_err(|source| crate::io_error(dir, source))?;
        let svg = crate::figures::write(self, dir)?;
        let page = dir.join("compare.html");
        std::fs::write(&page, self.page(&svg)).map_err(|source| crate::io_error(&page, source))?;
        Ok(page)
    }

    /// The comparison as one static page, with nothing else to load.
    fn page(&self, svg: &str) -> String {
        let mut html = String::from(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>hpcagent comparison</title>\n",
        );
        let _ = write!(
            html,
            "<style>{}</style>\n</head>\n<body>\n",
            crate::html::STYLE
        );
        html.push_str("<h1>Runs compared</h1>\n<table id=\"runs\">\n<tr><th>run</th><th>directory</th><th>what it was</th><th>solved</th><th>HPCAgent-Bench Score</th><th>fast_1 / 1.5 / 2</th><th>tokens</th><th>node-hours (whole run)</th></tr>\n");
        for run in &self.runs {
            let fast: Vec<String> = run
                .score
                .fast_p
                .iter()
                .map(|(_, x)| format!("{:.0}%", 100.0 * x))
                .collect();
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
                escape(&run.label),
                escape(&run.dir.display().to_string()),
                escape(&describe(run)),
                run.score.n_solved,
                run.score.n_tasks,
                run.score.score,
                fast.join(" / "),
                run.tokens,
                run.cost.node_hours
            );
        }
        html.push_str("</table>\n");
        html.push_str(&crate::html::inline_svg(
            figure::ID,
            "Speedup per task, run beside run",
            svg,
        ));
        html.push_str("<table id=\"tasks\">\n<tr><th>task</th>");
        for run in &self.runs {
            let _ = write!(html, "<th>{}</th>", escape(&run.label));
        }
        html.push_str("</tr>\n");
        for (task, row) in self.tasks.iter().zip(&self.rows) {
            let _ = write!(html, "<tr><td>{}</td>", escape(task));
            for cell in row {
                let _ = write!(html, "<td>{}</td>", escape(cell));
            }
            html.push_str("</tr>\n");
        }
        let _ = write!(
            html,
            "</table>\n<p class=\"note\">Over the {} tasks all runs have ({} others left out). \
             The Score is HPCAgent-Bench's formula (harness/metric.py) over one grade per task: \
             a task counts when its agent's own Submit was ok, at its speedup clamped to [1, 100], \
             and at 1 when the speedup's interval holds 1.</p>\n",
            self.tasks.len(),
            self.left_out
        );
        if !self.unlike.is_empty() {
            html.push_str(
                "<p class=\"note\" id=\"unlike\">Speedups over different denominators or \
                 arrays on other pages, which do not compare:</p>\n<ul>\n",
            );
            for unlike in &self.unlike {
                let _ = writeln!(
                    html,
                    "<li>{}: {}</li>",
                    escape(&unlike.task),
                    escape(&self.per_run(unlike))
                );
            }
            html.push_str("</ul>\n");
        }
        html.push_str("</body>\n</html>\n");
        html
    }
}

fn label(i: usize) -> String {
    let letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    match letters.get(i) {
        Some(&c) => (c as char).to_string(),
        None => format!("R{}", i + 1),
    }
}

fn load_run(label: String, dir: &Path) -> Result<Loaded, ReportError> {
    if !dir.join(hpcagent_orchestrator::store::FILE_NAME).is_file() {
        return Err(ReportError::NoStore(dir.to_path_buf()));
    }
    let reader = Reader::open(dir)?;
    Ok(Loaded {
        label,
        dir: dir.to_path_buf(),
        results: reader.results()?,
        attempts: reader.attempts()?,
        campaign: reader.campaign()?,
        denominators: denominator::settled(&reader.verdicts()?),
    })
}

/// Tokens the run's attempts spent on `tasks`.
fn tokens(attempts: &[AttemptRow], tasks: &BTreeSet<String>) -> u64 {
    attempts
        .iter()
        .filter(|a| tasks.contains(&a.task))
        .map(|a| a.tokens)
        .sum()
}

/// How a task ended in one run, in a few words.
fn cell(r: &TaskResult) -> String {
    let status = r.status.as_deref().unwrap_or(&r.state);
    if r.state == "failed" {
        return format!("failed: {status}");
    }
    let speedup = r
        .speedup
        .map(|s| format!(" {}", Speedup::new(s, r.speedup_low, r.speedup_high)))
        .unwrap_or_default();
    if r.agent_failed() {
        let ended = r.outcome.as_deref().unwrap_or("agent failed");
        let by = r.submitted_by.as_deref().unwrap_or("worker");
        return format!("agent {ended}; {by} graded {status}{speedup}");
    }
    format!("{status}{speedup}")
}

/// A run's identity in one line.
fn describe(run: &Run) -> String {
    let id = &run.identity;
    let mut parts = Vec::new();
    let mut put = |name: &str, value: &Option<String>| {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            parts.push(format!("{name} {v}"));
        }
    };
    put("policy", &id.policy);
    put("model", &id.model);
    put("command", &id.agent_command);
    put("preset", &id.preset);
    put("languages", &id.languages);
    put("corpus", &id.corpus);
    put("corpus version", &Some(id.corpus_version.clone()));
    put("site", &id.site);
    put("hpcagent", &Some(id.hpcagent.clone()));
    if !id.nodes.is_empty() {
        let nodes: Vec<String> = id.nodes.iter().map(|(r, n)| format!("{r} {n}")).collect();
        parts.push(format!("nodes {}", nodes.join(", ")));
    }
    parts.join("; ")
}

fn escape(text: &str) -> String {
    crate::html::escape(text)
}

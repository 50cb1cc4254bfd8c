//! `index.html`: the summary, every figure inlined as SVG, and the results
//! table, in one file that needs nothing else to be read.

use std::collections::BTreeMap;
use std::fmt::Write;

use hpcagent_common::speedup::Speedup;
use hpcagent_orchestrator::store::TaskRow;

use crate::data::{RunData, Summary, outcome};
use crate::figures::Figure;
use crate::time;

pub(crate) const STYLE: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; text-align: left; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
.note { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; }
figure { margin: 2em 0; }
figure svg { display: block; max-width: 100%; height: auto; }
";

/// The whole page.
pub fn page(data: &RunData, figures: &[Figure]) -> String {
    let summary = data.summary();
    let name = data
        .campaign
        .as_ref()
        .map_or_else(|| data.run_dir.display().to_string(), |c| c.id.clone());
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>hpcagent report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Campaign {}</h1>\n",
        escape(&name),
        escape(&name)
    );
    for note in notes(data, &summary) {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(&note));
    }
    html.push_str(&summary_table(data, &summary));
    html.push_str(&configuration(data));
    for figure in figures {
        html.push_str(&inline(figure));
    }
    html.push_str(&results_table(data));
    html.push_str("</body>\n</html>\n");
    html
}

/// What a reader must know before trusting the numbers: an empty, running
/// or unfinished campaign says so.
fn notes(data: &RunData, summary: &Summary) -> Vec<String> {
    let mut notes = Vec::new();
    if data.campaign.is_none() {
        notes.push("The store holds no campaign record: the campaign never got going.".into());
    }
    if data.tasks.is_empty() {
        notes.push("The campaign has no tasks yet: there is nothing to report.".into());
    } else if data.verdicts.is_empty() {
        notes.push("No verdicts yet: no task has been graded, so there are no speedups.".into());
    }
    let unsettled = summary.tasks - summary.settled - summary.failed;
    match summary.state.as_str() {
        "running" => notes.push(
            "The campaign is running, or stopped without recording its end: this is a snapshot \
             of its store."
                .into(),
        ),
        "finished" | "not started" => {}
        state if unsettled > 0 => notes.push(format!(
            "The campaign ended {state} with {unsettled} of {} tasks neither settled nor failed.",
            summary.tasks
        )),
        state => notes.push(format!("The campaign ended {state}.")),
    }
    if summary.failed > 0 {
        notes.push(format!(
            "{} of {} tasks failed: they ran out of attempts or budget without a verdict.",
            summary.failed, summary.tasks
        ));
    }
    if summary.agents_failed > 0 {
        notes.push(format!(
            "The agents of {} of {} tasks failed ({}): a grade of such a task is of the file \
             the worker submitted for its agent (the starter, or what the agent left), not the \
             agent's result, and the speedups below leave it out of their mean.",
            summary.agents_failed,
            summary.tasks,
            agent_ends(summary)
        ));
    }
    notes
}

fn summary_table(data: &RunData, summary: &Summary) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("state", summary.state.clone()),
        ("run directory", data.run_dir.display().to_string()),
    ];
    if let Some(c) = &data.campaign {
        rows.push(("started", time::utc(c.started_at)));
        if let Some(end) = c.ended_at {
            rows.push(("ended", time::utc(end)));
        }
        rows.push(("duration", time::duration(data.end() - c.started_at)));
    }
    if let Some(policy) = data.policy() {
        rows.push(("agent policy", policy));
    }
    if let Some(id) = &data.identity {
        let what = [
            ("model", &id.model),
            ("agent command", &id.agent_command),
            ("preset", &id.preset),
            ("languages", &id.languages),
            ("corpus", &id.corpus),
        ];
        for (key, value) in what {
            if let Some(value) = value {
                rows.push((key, value.clone()));
            }
        }
        if !id.nodes.is_empty() {
            let nodes: Vec<String> = id.nodes.iter().map(|(r, n)| format!("{r} {n}")).collect();
            rows.push(("nodes", nodes.join(", ")));
        }
        if !id.corpus_version.is_empty() {
            rows.push(("corpus version", id.corpus_version.clone()));
        }
        if !id.hpcagent.is_empty() {
            rows.push(("hpcagent", id.hpcagent.clone()));
        }
    }
    rows.extend([
        ("tasks", summary.tasks.to_string()),
        (
            "settled",
            format!(
                "{} ({} by their agents, {} ok)",
                summary.settled, summary.by_agents, summary.ok
            ),
        ),
        ("failed", summary.failed.to_string()),
        (
            "agents failed",
            match summary.agents_failed {
                0 => "0".into(),
                n => format!("{n} ({})", agent_ends(summary)),
            },
        ),
        ("grades", data.verdicts.len().to_string()),
        (
            "geometric-mean speedup (the agents' submits)",
            summary
                .geomean_speedup
                .map_or_else(|| "-".into(), |g| format!("{g:.2}x")),
        ),
        ("HPCAgent-Bench Score", data.bench_score().brief()),
        ("cost", cost(&data.cost())),
    ]);
    let mut html = String::from("<h2>Summary</h2>\n<table id=\"summary\">\n");
    for (key, value) in rows {
        let _ = writeln!(html, "<tr><th>{key}</th><td>{}</td></tr>", escape(&value));
    }
    html.push_str("</table>\n");
    html
}

/// The resolved configuration the run had, as `hpcagent config` prints
/// it (secrets redacted), folded.
fn configuration(data: &RunData) -> String {
    match &data.identity {
        Some(id) if !id.config.is_empty() => format!(
            "<details id=\"configuration\"><summary>The configuration it ran with</summary>\
             <pre>{}</pre></details>\n",
            escape(&id.config)
        ),
        _ => String::new(),
    }
}

/// A run's cost in one line.
fn cost(cost: &crate::Cost) -> String {
    let mut text = format!(
        "{} over {} nodes: {:.2} node-hours",
        time::duration(cost.wall_s),
        cost.nodes,
        cost.node_hours
    );
    if cost.gpus_per_node > 0 {
        text += &format!(", {:.2} GPU-hours", cost.gpu_hours);
    }
    text + &format!(
        "; {} tokens (as the model's answers stated them; a CLI without the campaign's model counts what it reported, or 0)",
        cost.tokens
    )
}

/// How the failed agents ended: "2 crashed, 1 could not start".
fn agent_ends(summary: &Summary) -> String {
    let ends: Vec<String> = summary
        .agent_ends
        .iter()
        .map(|(end, n)| format!("{n} {end}"))
        .collect();
    ends.join(", ")
}

/// A figure's SVG in the page, with the id a reader (or a test) finds it by.
fn inline(figure: &Figure) -> String {
    inline_svg(figure.kind.id(), figure.kind.title(), &figure.svg)
}

/// An SVG in a page, with the id a reader (or a test) finds it by, and
/// the files it is also in.
pub(crate) fn inline_svg(id: &str, title: &str, svg: &str) -> String {
    let svg = svg.trim_start().strip_prefix("<svg").unwrap_or(svg);
    format!(
        "<figure id=\"figure-{id}\">\n<h2>{title}</h2>\n\
         <svg id=\"{id}\" role=\"img\" aria-label=\"{title}\"{svg}\n\
         <figcaption>Also as <a href=\"{id}.svg\">{id}.svg</a> and \
         <a href=\"{id}.png\">{id}.png</a>.</figcaption>\n</figure>\n"
    )
}

fn results_table(data: &RunData) -> String {
    let mut html = String::from("<h2>Results</h2>\n");
    if data.tasks.is_empty() {
        html.push_str("<p>No tasks.</p>\n");
        return html;
    }
    html.push_str(&reasons_table(data));
    // A store from before tracks has none to show.
    let tracks = data.tasks.iter().any(|t| !t.track.is_empty());
    let run_cost = data.cost();
    let gpus = run_cost.gpus_per_node > 0;
    let _ = write!(
        html,
        "<table id=\"results\">\n<tr><th>task</th><th>kernel</th>{}<th>language</th>\
         <th>precision</th><th>agent</th><th>outcome</th><th>attempts</th><th>tokens</th>\
         <th>attempts' time</th><th>{}</th>\
         <th>settled by</th><th>speedup (95% interval)</th><th>verdict</th>\
         <th>evidence</th></tr>\n",
        if tracks { "<th>track</th>" } else { "" },
        if gpus {
            "node-hours (GPU-hours)"
        } else {
            "node-hours"
        },
    );
    let settled_by = data.settled_by();
    let tokens = data.tokens();
    let costs = crate::cost::per_task(&data.attempts, &run_cost);
    let messages = data.verdict_messages();
    let ends = data.attempt_ends();
    for t in &data.tasks {
        // A failed task's status says why it failed.
        let outcome = match (outcome(t), &t.status) {
            ("failed", Some(why)) => format!("failed: {why}"),
            (outcome, _) => match t.submitted_by.as_deref() {
                Some(by @ ("starter" | "left")) => format!("{outcome} ({by})"),
                _ => outcome.to_string(),
            },
        };
        let mut speedup = t.speedup.map_or_else(
            || "-".into(),
            |s| Speedup::new(s, t.speedup_low, t.speedup_high).to_string(),
        );
        if crate::Graded::of_row(t).suspect() {
            speedup += &format!("; {}", crate::score::suspect_words());
        }
        let cost = costs.get(t.id.as_str());
        let track = match tracks {
            true => format!("<td>{}</td>", escape(&t.track)),
            false => String::new(),
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td>{track}<td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td><td>{}</td>\
             <td class=\"number\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&t.id),
            escape(&t.kernel),
            escape(&t.language),
            escape(&t.precision),
            escape(&attempts_ended(&ends, t)),
            escape(&outcome),
            t.attempts,
            tokens.get(t.id.as_str()).copied().unwrap_or(0),
            cost.map_or_else(|| "-".into(), |c| time::duration(c.attempts_s)),
            cost.map_or_else(|| "-".into(), |c| hours(c, gpus)),
            escape(settled_by.get(t.id.as_str()).copied().unwrap_or("-")),
            escape(&speedup),
            escape(messages.get(t.id.as_str()).map_or("-", String::as_str)),
            evidence(data, t),
        );
    }
    html.push_str("</table>\n");
    let _ = writeln!(html, "<p id=\"cost-rule\">{}.</p>", crate::cost::SHARE_RULE);
    html
}

/// A task's share of the run's node-hours, and of its GPU-hours where it
/// had GPUs: "0.120 (0.480)".
fn hours(cost: &crate::TaskCost, gpus: bool) -> String {
    match gpus {
        true => format!("{:.3} ({:.3})", cost.node_hours, cost.gpu_hours),
        false => format!("{:.3}", cost.node_hours),
    }
}

/// How a task's agents ended: its last attempt's end, or each attempt's
/// in order when it had several ("crashed → submitted").
fn attempts_ended(ends: &BTreeMap<&str, Vec<&str>>, task: &TaskRow) -> String {
    match ends.get(task.id.as_str()) {
        Some(each) if each.len() > 1 => each.join(" → "),
        _ => task.outcome.clone().unwrap_or_else(|| "-".into()),
    }
}

/// Links to a task's last attempt: its directory (workspace, transcript,
/// verdict) and its build log when the build left one.
fn evidence(data: &RunData, task: &TaskRow) -> String {
    let Some(dir) = data.attempt_dir(task) else {
        return "-".into();
    };
    let link = |path: &std::path::Path, text: &str| {
        format!(
            "<a href=\"file://{}\">{text}</a>",
            escape(&path.display().to_string())
        )
    };
    let mut links = vec![link(&dir, &format!("attempt {}", task.attempts))];
    let log = dir.join("build.log");
    if log.is_file() {
        links.push(link(&log, "build log"));
    }
    links.join(" ")
}

/// Why tasks did not end well, grouped and counted.
fn reasons_table(data: &RunData) -> String {
    let reasons = data.failure_reasons();
    if reasons.is_empty() {
        return String::new();
    }
    let mut html = String::from(
        "<table id=\"reasons\">\n<tr><th>why tasks did not end well</th><th>tasks</th></tr>\n",
    );
    for (why, n) in reasons {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"number\">{n}</td></tr>",
            escape(&why)
        );
    }
    html.push_str("</table>\n");
    html
}

/// Text as HTML text or attribute value.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use hpcagent_orchestrator::store::{CampaignRow, TaskRow};

    use super::*;
    use crate::figures::Kind;

    fn data(kernel: &str) -> RunData {
        RunData {
            run_dir: PathBuf::from("/runs/1234"),
            campaign: Some(CampaignRow {
                id: "1234".into(),
                state: "running".into(),
                started_at: 0.0,
                ended_at: None,
                config: String::new(),
                hpcagent_version: String::new(),
                corpus_version: String::new(),
            }),
            tasks: vec![TaskRow {
                id: format!("{kernel}.c.fp64"),
                kernel: kernel.into(),
                track: "dense_linear_algebra".into(),
                language: "c".into(),
                precision: "fp64".into(),
                repeat: 0,
                state: "leased".into(),
                attempts: 1,
                budget_used_s: 0.0,
                status: None,
                speedup: None,
                speedup_low: None,
                speedup_high: None,
                outcome: None,
                submitted_by: None,
            }],
            attempts: Vec::new(),
            verdicts: Vec::new(),
            events: Vec::new(),
            identity: None,
        }
    }

    fn figures() -> Vec<Figure> {
        Kind::ALL
            .iter()
            .map(|&kind| Figure {
                kind,
                svg: "<svg width=\"10\" height=\"10\" xmlns=\"http://www.w3.org/2000/svg\"></svg>"
                    .into(),
            })
            .collect()
    }

    #[test]
    fn the_page_inlines_every_figure_and_needs_nothing_else() {
        let html = page(&data("gemm"), &figures());
        for kind in Kind::ALL {
            let id = kind.id();
            assert!(
                html.contains(&format!(
                    "<svg id=\"{id}\" role=\"img\" aria-label=\"{}\" width=",
                    kind.title()
                )),
                "{id}: {html}"
            );
            assert!(
                html.contains(&format!("<figure id=\"figure-{id}\">")),
                "{id}"
            );
        }
        for external in ["<script", "<img", "<link", "src=", "@import", "url("] {
            assert!(!html.contains(external), "{external} in {html}");
        }
        assert!(
            html.contains("this is a snapshot"),
            "a running campaign says so"
        );
        assert!(html.contains("<tr><td>gemm.c.fp64</td>"), "{html}");
    }

    /// A speedup above the plausibility gate is marked on its row and
    /// counted beside the Score, which counts it as computed.
    #[test]
    fn a_suspect_speedup_is_marked_and_counted_for_review() {
        let mut data = data("gemm");
        let task = &mut data.tasks[0];
        task.state = "settled".into();
        task.status = Some("ok".into());
        task.submitted_by = Some("agent".into());
        task.speedup = Some(5000.0);
        let html = page(&data, &figures());
        let row = html
            .lines()
            .find(|l| l.starts_with("<tr><td>gemm.c.fp64</td>"))
            .unwrap();
        assert!(
            row.contains("5000.00x; suspect (above 1000×, held for review)</td>"),
            "{row}"
        );
        assert!(
            html.contains(
                "<tr><th>HPCAgent-Bench Score</th><td>100.000 (1 of 1 solved; fast_1 100%, \
                 fast_1.5 100%, fast_2 100%; 1 suspect (above 1000×, held for review))</td></tr>"
            ),
            "{html}"
        );
        data.tasks[0].speedup = Some(999.0);
        let html = page(&data, &figures());
        assert!(!html.contains("suspect"), "{html}");
    }

    #[test]
    fn names_from_the_store_are_text_not_markup() {
        let html = page(&data("<b>x</b>&\"'"), &figures());
        assert!(!html.contains("<b>x</b>"), "{html}");
        assert!(
            html.contains("&lt;b&gt;x&lt;/b&gt;&amp;&quot;&#39;"),
            "{html}"
        );
    }
}

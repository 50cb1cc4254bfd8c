//! Reports of real stores, written through the orchestrator's own writer: a
//! store with nothing in it, a campaign that failed before any verdict, and
//! one that settled its tasks.

use std::path::{Path, PathBuf};

use hpcagent_orchestrator::store::{
    AgentReport, AttemptRecord, AttemptStart, Store, TaskRow, VerdictRecord,
};
use hpcagent_report::{FigureKind, Options, ReportError};

fn task(kernel: &str, language: &str) -> TaskRow {
    TaskRow {
        id: format!("{kernel}.{language}.fp64"),
        kernel: kernel.into(),
        track: match kernel {
            "softmax" => "ml",
            _ => "dense_linear_algebra",
        }
        .into(),
        language: language.into(),
        precision: "fp64".into(),
        repeat: 0,
        state: "pending".into(),
        attempts: 0,
        budget_used_s: 0.0,
        status: None,
        speedup: None,
        speedup_low: None,
        speedup_high: None,
        outcome: None,
        submitted_by: None,
    }
}

fn start(task: &str, attempt: u32, agent: &str) -> AttemptStart {
    AttemptStart {
        task: task.into(),
        attempt,
        lease_id: format!("{task}-{attempt}"),
        agent: agent.into(),
        worker: 0,
        judge: "judge-0".into(),
        budget_used_s: 0.0,
    }
}

/// A task settled by its first attempt with `speedup` and its 95%
/// `interval`, `tokens` spent.
fn settle(store: &Store, task: &str, speedup: f64, interval: (f64, f64), tokens: u64) {
    store.attempt_ended(AttemptRecord {
        task: task.into(),
        attempt: 1,
        state: "settled".into(),
        attempts: 1,
        status: Some("ok".into()),
        speedup: Some(speedup),
        agent: Some(AgentReport {
            outcome: "submitted".into(),
            tokens,
            ..AgentReport::default()
        }),
        verdict: Some(VerdictRecord {
            task_id: task.into(),
            attempt: 1,
            kind: "submit".into(),
            judge: "judge-0".into(),
            status: "ok".into(),
            speedup: Some(speedup),
            speedup_low: Some(interval.0),
            speedup_high: Some(interval.1),
            settled: true,
            ..VerdictRecord::default()
        }),
        ..AttemptRecord::default()
    });
}

fn write(run_dir: &Path) -> (PathBuf, String) {
    let out = run_dir.join("report");
    let options = Options {
        out_dir: out.clone(),
        font: None,
    };
    let page = hpcagent_report::write(run_dir, &options).unwrap();
    assert_eq!(page, out.join("index.html"));
    let html = std::fs::read_to_string(&page).unwrap();
    (out, html)
}

/// The text of every text element the SVG draws.
fn texts(svg: &str) -> Vec<&str> {
    svg.split("</text>")
        .filter_map(|before| before.rsplit_once(">\n"))
        .map(|(_, text)| text.trim_end_matches('\n'))
        .collect()
}

/// Every figure is in the page and beside it as SVG and PNG.
fn assert_every_figure(out: &Path, html: &str) {
    for kind in FigureKind::ALL {
        let id = kind.id();
        assert_eq!(
            html.matches(&format!("<svg id=\"{id}\"")).count(),
            1,
            "{id} inline once"
        );
        let svg = std::fs::read_to_string(out.join(format!("{id}.svg"))).unwrap();
        assert!(
            svg.trim_start().starts_with("<svg") && svg.contains("<text"),
            "{id}.svg"
        );
        let png = std::fs::read(out.join(format!("{id}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000,
            "{id}.png"
        );
    }
}

#[tokio::test]
async fn a_store_with_nothing_in_it_gets_a_page_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    Store::open(dir.path(), false)
        .unwrap()
        .flush()
        .await
        .unwrap();
    let (out, html) = write(dir.path());
    assert!(html.contains("the campaign never got going"), "{html}");
    assert!(html.contains("no tasks yet"), "{html}");
    assert!(html.contains("<td>not started</td>"), "{html}");
    assert_every_figure(&out, &html);
    let speedup = std::fs::read_to_string(out.join("speedup.svg")).unwrap();
    assert!(
        texts(&speedup).contains(&"No tasks yet"),
        "the figure says why it is empty"
    );
}

#[tokio::test]
async fn a_campaign_that_failed_before_any_verdict_says_what_became_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), false).unwrap();
    store.campaign_started("c1", dir.path(), None, "AGENT_POLICY=builtin  # default\n");
    store.add_tasks(vec![task("gemm", "c"), task("atax", "c")]);
    store.event("agent-0", "launched", "pid 1");
    store.event("agent-0", "dead", "exited (signal 9)");
    store.event("agent-0", "launched", "pid 2");
    store.attempts_started(vec![start("atax.c.fp64", 1, "agent-0")]);
    store.attempt_ended(AttemptRecord {
        task: "atax.c.fp64".into(),
        attempt: 1,
        state: "failed".into(),
        attempts: 1,
        status: Some("out of attempts".into()),
        ..AttemptRecord::default()
    });
    store.campaign_state("failed");
    store.flush().await.unwrap();

    let (out, html) = write(dir.path());
    assert!(html.contains("No verdicts yet"), "{html}");
    assert!(
        html.contains("ended failed with 1 of 2 tasks neither settled nor failed"),
        "{html}"
    );
    assert!(html.contains("<td>failed: out of attempts</td>"), "{html}");
    assert!(
        html.contains("<td>builtin</td>"),
        "the policy from the configuration"
    );
    assert_every_figure(&out, &html);
    let timeline = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    let drawn = texts(&timeline);
    for class in ["launch", "dead", "restart", "No grades yet"] {
        assert!(drawn.contains(&class), "{class} in the timeline: {drawn:?}");
    }
}

/// Three tasks settled (two tracks, two languages) and one of another
/// track that never ran.
#[tokio::test]
async fn a_settled_campaign_shows_each_speedup_and_who_got_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), false).unwrap();
    store.campaign_started("c2", dir.path(), None, "AGENT_POLICY=baseline  # default\n");
    store.add_tasks(vec![
        task("gemm", "c"),
        task("gemm", "cpp"),
        task("atax", "c"),
        task("softmax", "c"),
    ]);
    store.attempts_started(vec![start("gemm.c.fp64", 1, "agent-0")]);
    store.attempts_started(vec![start("gemm.cpp.fp64", 1, "agent-1")]);
    store.attempts_started(vec![start("atax.c.fp64", 1, "agent-0")]);
    settle(&store, "gemm.c.fp64", 2.0, (1.9, 2.1), 1200);
    settle(&store, "gemm.cpp.fp64", 8.0, (7.5, 8.5), 0);
    settle(&store, "atax.c.fp64", 1.0, (0.98, 1.02), 0);
    store.campaign_state("finished");
    store.flush().await.unwrap();

    let (out, html) = write(dir.path());
    assert!(
        !html.contains("class=\"note\""),
        "a finished campaign needs no note: {html}"
    );
    assert!(
        html.contains("<td>2.52x</td>"),
        "the geometric mean of 2, 8 and 1, no change counted too: {html}"
    );
    assert!(
        html.contains("<td class=\"number\">2.00x (1.90-2.10)</td>"),
        "{html}"
    );
    assert!(
        html.contains("<td class=\"number\">no change (1.00x, 0.98-1.02)</td>"),
        "{html}"
    );
    // Tokens, the attempts' time, its share of the node-hours, then who
    // settled it; the track beside the kernel.
    assert!(
        html.lines().any(|row| row.starts_with(
            "<tr><td>gemm.c.fp64</td><td>gemm</td><td>dense_linear_algebra</td><td>c</td>"
        ) && row
            .contains("<td class=\"number\">1200</td><td class=\"number\">")
            && row.contains("</td><td>agent-0</td>")),
        "{html}"
    );
    assert!(
        html.contains("<th>track</th>") && html.contains("<th>node-hours</th>"),
        "{html}"
    );
    assert!(
        html.contains("<p id=\"cost-rule\">A task's node-hours and GPU-hours are its share of the run's: the run's apportioned by the task's attempts' seconds over all attempts' seconds.</p>"),
        "the page says how a task's share is reckoned: {html}"
    );
    assert_every_figure(&out, &html);
    let speedup = std::fs::read_to_string(out.join("speedup.svg")).unwrap();
    let drawn = texts(&speedup);
    assert!(
        drawn.contains(&" 2.00x (1.90-2.10)  agent-0"),
        "each speedup and who got it: {drawn:?}"
    );
    assert!(drawn.contains(&" 8.00x (7.50-8.50)  agent-1"), "{drawn:?}");
    assert!(
        drawn.contains(&" no change (1.00x, 0.98-1.02)  agent-0"),
        "an interval that holds 1 is no change: {drawn:?}"
    );
    assert!(drawn.contains(&"cpp"), "one series per language: {drawn:?}");
    // The distribution: a panel per track, then one per language, each
    // series a staircase with its count and mean.
    let distribution = std::fs::read_to_string(out.join("distribution.svg")).unwrap();
    let drawn = texts(&distribution);
    for series in [
        "dense_linear_algebra: 3 of 3 solved, geometric mean 2.52x (of the solved)",
        "ml: 0 of 1 solved, geometric mean - (of the solved)",
        "c: 2 of 3 solved, geometric mean 1.41x (of the solved)",
        "cpp: 1 of 1 solved, geometric mean 8.00x (of the solved)",
    ] {
        assert!(drawn.contains(&series), "{series}: {drawn:?}");
    }
    for panel in ["per track", "per language"] {
        assert!(
            drawn.iter().any(|t| t.ends_with(panel)),
            "a panel {panel}: {drawn:?}"
        );
    }
    // Four staircases, two parity lines, and the legends' and axes' lines.
    assert!(
        distribution.matches("<polyline").count() >= 6,
        "{distribution}"
    );
}

#[test]
fn a_directory_without_a_store_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        out_dir: dir.path().join("report"),
        font: None,
    };
    let err = hpcagent_report::write(dir.path(), &options).unwrap_err();
    assert!(matches!(err, ReportError::NoStore(_)), "{err}");
    assert!(
        err.to_string().contains("no campaign ever ran there"),
        "{err}"
    );
    assert!(!options.out_dir.exists(), "nothing written");
}

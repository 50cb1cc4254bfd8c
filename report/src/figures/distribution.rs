//! How speedups are distributed: the share of tasks whose agents' own `ok`
//! submit reached at least each speedup (a complementary CDF on a log axis,
//! read as "x% of tasks at least this fast"), per track and per language,
//! with each series' geometric mean stated and what it leaves out: tasks
//! not solved by their agents count at no speedup in the share (as in
//! fast_p), never in the mean.
//!
//! A run over several tracks gets two panels on one speedup axis: a series
//! per track (its languages together), then a series per language (its
//! tracks together); a run over one track gets the second alone. Two
//! panels rather than one series per track and language: a corpus's tracks
//! times its languages are more lines than one plot can tell apart, and
//! the speedup figure already shows each kernel in each language.

use std::collections::BTreeMap;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawResult, color_of, faint_grid, placeholder};
use crate::data::{RunData, geometric_mean};
use crate::font::FAMILY;

/// What a panel's series are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Track,
    Language,
}

impl By {
    fn key(self, task: &hpcagent_orchestrator::store::TaskRow) -> String {
        match self {
            // A store from before tracks has none.
            By::Track if task.track.is_empty() => "(no track)".into(),
            By::Track => task.track.clone(),
            By::Language => task.language.clone(),
        }
    }

    fn words(self) -> &'static str {
        match self {
            By::Track => "per track",
            By::Language => "per language",
        }
    }
}

/// The panels `data` gets: per track where it has more than one, and per
/// language unless a one-language run's tracks already say everything.
pub fn panels(data: &RunData) -> Vec<By> {
    let count = |by: By| {
        let keys: std::collections::BTreeSet<String> =
            data.tasks.iter().map(|t| by.key(t)).collect();
        keys.len()
    };
    match (count(By::Track) > 1, count(By::Language) > 1) {
        (true, true) => vec![By::Track, By::Language],
        (true, false) => vec![By::Track],
        (false, _) => vec![By::Language],
    }
}

/// Per track or language: every task's speedup, `None` where its agent
/// solved nothing (or the speedup is not a finite one an axis can hold).
fn series(data: &RunData, by: By) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut series: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for t in &data.tasks {
        let solved = crate::Graded::of_row(t).solved;
        series
            .entry(by.key(t))
            .or_default()
            .push(t.speedup.filter(|s| solved && s.is_finite()));
    }
    series
}

/// The steps of one series: (speedup, share of all its tasks at least that fast).
fn steps(speedups: &[Option<f64>]) -> Vec<(f64, f64)> {
    let n = speedups.len() as f64;
    let mut solved: Vec<f64> = speedups
        .iter()
        .flatten()
        .copied()
        .filter(|s| *s > 0.0)
        .collect();
    solved.sort_by(|a, b| b.total_cmp(a));
    solved
        .iter()
        .enumerate()
        .map(|(i, &s)| (s, (i + 1) as f64 / n))
        .collect()
}

/// The speedups the figure draws, of every series.
fn drawn(data: &RunData) -> Vec<f64> {
    series(data, By::Language)
        .into_values()
        .flatten()
        .flatten()
        .filter(|s| *s > 0.0)
        .collect()
}

/// The figure's height: a panel's for each, or one for nothing to draw.
pub fn height(data: &RunData) -> u32 {
    const PANEL: u32 = 420;
    match drawn(data).is_empty() {
        true => PANEL,
        false => PANEL * panels(data).len() as u32,
    }
}

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, data: &RunData) -> DrawResult<DB> {
    let title = "Share of tasks at least this fast (agents' own ok submits)";
    let all = drawn(data);
    if all.is_empty() {
        return placeholder(area, title, "No task solved by its agent yet");
    }
    // One axis for every panel, so that they read against each other.
    let lo = all.iter().copied().fold(1.0, f64::min) / 1.5;
    let hi = all.iter().copied().fold(1.0, f64::max) * 1.5;
    let span = lo.min(0.5)..hi.max(2.0);
    let panels = panels(data);
    let areas = area.split_evenly((panels.len(), 1));
    for (by, area) in panels.into_iter().zip(&areas) {
        let caption = format!("{title}, {}", by.words());
        draw_panel(area, &caption, series(data, by), span.clone())?;
    }
    Ok(())
}

/// One panel: a staircase per series.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    series: BTreeMap<String, Vec<Option<f64>>>,
    span: std::ops::Range<f64>,
) -> DrawResult<DB> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(span.log_scale(), 0.0..1.05)?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .x_label_formatter(&|v| format!("{v}x"))
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .x_desc("speedup, log scale (the baseline is 1)")
        .y_desc("tasks at least this fast")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .draw()?;
    for (i, (name, speedups)) in series.iter().enumerate() {
        let color = color_of(i);
        let points = steps(speedups);
        // A staircase: each task holds its share until the next is reached.
        let mut path = Vec::new();
        let mut share = 0.0;
        for &(s, at_least) in &points {
            path.push((s, share));
            path.push((s, at_least));
            share = at_least;
        }
        let solved = points.len();
        let mean = geometric_mean(points.iter().map(|p| p.0))
            .map_or_else(|| "-".into(), |m| format!("{m:.2}x"));
        let label = format!(
            "{name}: {solved} of {} solved, geometric mean {mean} (of the solved)",
            speedups.len()
        );
        chart
            .draw_series(LineSeries::new(path, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
    }
    let parity = [(1.0, 0.0), (1.0, 1.05)];
    chart.draw_series(LineSeries::new(parity, BLACK.mix(0.4).stroke_width(1)))?;
    super::legend(&mut chart, SeriesLabelPosition::UpperRight, 14)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use hpcagent_orchestrator::store::TaskRow;

    use super::*;

    #[test]
    fn the_share_counts_every_task_and_the_unsolved_at_none() {
        // Four tasks: 3x, 1.5x, one unsolved, 0.8x.
        let steps = steps(&[Some(1.5), None, Some(3.0), Some(0.8)]);
        assert_eq!(steps, vec![(3.0, 0.25), (1.5, 0.5), (0.8, 0.75)]);
    }

    fn task(kernel: &str, track: &str, language: &str, speedup: Option<f64>) -> TaskRow {
        TaskRow {
            id: format!("{kernel}.{language}.fp64"),
            kernel: kernel.into(),
            track: track.into(),
            language: language.into(),
            precision: "fp64".into(),
            repeat: 0,
            state: if speedup.is_some() {
                "settled"
            } else {
                "failed"
            }
            .into(),
            attempts: 1,
            budget_used_s: 0.0,
            status: speedup.map(|_| "ok".into()),
            speedup,
            speedup_low: None,
            speedup_high: None,
            outcome: None,
            submitted_by: None,
        }
    }

    fn run(tasks: Vec<TaskRow>) -> RunData {
        RunData {
            run_dir: PathBuf::from("/runs/1"),
            campaign: None,
            tasks,
            attempts: Vec::new(),
            verdicts: Vec::new(),
            events: Vec::new(),
            identity: None,
        }
    }

    #[test]
    fn several_tracks_get_a_panel_per_track_and_one_per_language() {
        let data = run(vec![
            task("gemm", "dense_linear_algebra", "c", Some(2.0)),
            task("gemm", "dense_linear_algebra", "cpp", Some(4.0)),
            task("softmax", "ml", "c", None),
            task("softmax", "ml", "cpp", Some(1.5)),
        ]);
        assert_eq!(panels(&data), [By::Track, By::Language]);
        let tracks = series(&data, By::Track);
        assert_eq!(tracks["dense_linear_algebra"], [Some(2.0), Some(4.0)]);
        assert_eq!(tracks["ml"], [None, Some(1.5)]);
        let languages = series(&data, By::Language);
        assert_eq!(languages["c"], [Some(2.0), None]);
        assert_eq!(languages["cpp"], [Some(4.0), Some(1.5)]);

        // One language: its tracks say everything.
        let one_language = run(data.tasks[..1]
            .iter()
            .chain(&data.tasks[2..3])
            .cloned()
            .collect());
        assert_eq!(panels(&one_language), [By::Track]);
        // One track, or a store from before tracks: per language alone.
        let one_track = run(data.tasks[..2].to_vec());
        assert_eq!(panels(&one_track), [By::Language]);
        let mut untracked = data.tasks.clone();
        untracked.iter_mut().for_each(|t| t.track.clear());
        assert_eq!(panels(&run(untracked)), [By::Language]);
    }
}

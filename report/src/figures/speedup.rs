//! Speedup per kernel: one bar per language (and precision, when the
//! campaign has several) from 1 (the baseline) to its speedup on a log
//! axis (2x faster and 2x slower are as far from 1), its 95% interval drawn
//! as a whisker across the bar's end, labelled with the speedup and
//! interval ("no change" when that holds 1) and the agent instance that
//! settled it. On a linear axis from 0 the 1-2% differences between runs,
//! and the intervals, could not be seen.

use std::collections::{BTreeMap, BTreeSet};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use hpcagent_common::speedup::Speedup;
use hpcagent_orchestrator::store::TaskRow;

use super::axis::Bands;
use super::{DrawResult, color_of, faint_grid, placeholder};
use crate::data::{RunData, geometric_mean, outcome};
use crate::font::FAMILY;

/// The kernels, the series, and what each (kernel, series) cell shows.
struct Grid {
    kernels: Vec<String>,
    series: Vec<String>,
    cells: BTreeMap<(usize, usize), Cell>,
}

/// A cell: the geometric mean of its repeats' speedups and who settled them,
/// or, with no speedup yet, its first task's outcome.
enum Cell {
    Speedup {
        speedup: Speedup,
        agents: Vec<String>,
    },
    Outcome(String),
}

/// The geometric mean of the ok repeats' speedups, with an interval whose
/// ends are the geometric means of their lows and of their highs (only when
/// every repeat has one). That is no confidence interval of the mean: its
/// width in log terms is the mean of the repeats' widths, wider than the
/// interval of independent repeats combined, so a cell says "no change" at
/// least as often as a proper combination would, never less.
fn mean_of(ok: &[&TaskRow]) -> Option<Speedup> {
    let value = geometric_mean(ok.iter().filter_map(|t| t.speedup))?;
    let measured: Vec<_> = ok.iter().filter(|t| t.speedup.is_some()).collect();
    let ends = |end: fn(&TaskRow) -> Option<f64>| {
        let ends: Option<Vec<f64>> = measured.iter().map(|t| end(t)).collect();
        ends.and_then(|ends| geometric_mean(ends.into_iter()))
    };
    Some(Speedup::new(
        value,
        ends(|t| t.speedup_low),
        ends(|t| t.speedup_high),
    ))
}

impl Grid {
    fn of(data: &RunData) -> Grid {
        let precisions: BTreeSet<&str> = data.tasks.iter().map(|t| t.precision.as_str()).collect();
        let series_of = |language: &str, precision: &str| {
            if precisions.len() > 1 {
                format!("{language} {precision}")
            } else {
                language.to_string()
            }
        };
        let kernels = unique(data.tasks.iter().map(|t| t.kernel.clone()));
        let series = unique(
            data.tasks
                .iter()
                .map(|t| series_of(&t.language, &t.precision)),
        );
        let settled_by = data.settled_by();
        let mut members: BTreeMap<(usize, usize), Vec<_>> = BTreeMap::new();
        for t in &data.tasks {
            let k = kernels.iter().position(|k| *k == t.kernel).expect("listed");
            let name = series_of(&t.language, &t.precision);
            let s = series.iter().position(|s| *s == name).expect("listed");
            members.entry((k, s)).or_default().push(t);
        }
        let cells = members
            .into_iter()
            .map(|(key, tasks)| {
                let ok: Vec<&TaskRow> = tasks
                    .iter()
                    .copied()
                    .filter(|t| outcome(t) == "ok")
                    .collect();
                let cell =
                    match mean_of(&ok) {
                        Some(speedup) => Cell::Speedup {
                            speedup,
                            agents: unique(ok.iter().filter_map(|t| {
                                settled_by.get(t.id.as_str()).map(|a| a.to_string())
                            })),
                        },
                        None => Cell::Outcome(outcome(tasks[0]).to_string()),
                    };
                (key, cell)
            })
            .collect();
        Grid {
            kernels,
            series,
            cells,
        }
    }

    /// The smallest and largest of every speedup and interval end, with 1.
    fn range(&self) -> (f64, f64) {
        super::speedup_span(self.cells.values().filter_map(|c| match c {
            Cell::Speedup { speedup, .. } => Some(speedup),
            Cell::Outcome(_) => None,
        }))
    }
}

/// The log axis's ends: every bar and whisker inside, 1 well inside, and
/// room right of the longest bar for its label.
fn x_range(grid: &Grid) -> (f64, f64) {
    let (lo, hi) = grid.range();
    ((lo / 1.5).min(0.5), (hi * 6.0).max(4.0))
}

/// Distinct values in first-seen order of a sorted input (the store sorts
/// tasks by kernel, language, precision).
fn unique(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen
}

/// How many bar rows the figure needs.
pub fn rows(data: &RunData) -> usize {
    let grid = Grid::of(data);
    grid.kernels.len() * grid.series.len().max(1)
}

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, data: &RunData) -> DrawResult<DB> {
    let title = match data.policy() {
        Some(policy) => format!("Speedup over the baseline (agent policy: {policy})"),
        None => "Speedup over the baseline".to_string(),
    };
    let grid = Grid::of(data);
    if grid.kernels.is_empty() {
        return placeholder(area, &title, "No tasks yet");
    }
    let bands = Bands::down(grid.kernels.clone());
    let (x_min, x_max) = x_range(&grid);
    let mut chart = ChartBuilder::on(area)
        .caption(&title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(130)
        .build_cartesian_2d((x_min..x_max).log_scale(), bands.coord())?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .disable_y_mesh()
        .y_label_formatter(&|v| bands.label(*v))
        .x_label_formatter(&|v| format!("{v}x"))
        .x_desc("speedup, log scale (the baseline is 1; whiskers: 95% interval)")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .draw()?;
    let count = grid.series.len();
    for (s, name) in grid.series.iter().enumerate() {
        let color = color_of(s);
        let cells = || {
            grid.cells
                .iter()
                .filter(move |((_, series), _)| *series == s)
        };
        let bars = cells().filter_map(|((k, _), cell)| match cell {
            Cell::Speedup { speedup, .. } => {
                let (low, high) = bands.bar(*k, s, count);
                Some(Rectangle::new(
                    [(1.0, low), (speedup.value, high)],
                    color.filled(),
                ))
            }
            Cell::Outcome(_) => None,
        });
        chart
            .draw_series(bars)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], color.filled()));
        let whiskers = cells().filter_map(|((k, _), cell)| match cell {
            Cell::Speedup { speedup, .. } => {
                let (from, to) = speedup.interval?;
                let (low, high) = bands.bar(*k, s, count);
                let y = (low + high) / 2.0;
                Some(PathElement::new(
                    vec![(from, y), (to, y)],
                    BLACK.stroke_width(2),
                ))
            }
            Cell::Outcome(_) => None,
        });
        chart.draw_series(whiskers)?;
        let labels = cells().map(|((k, _), cell)| {
            let (low, high) = bands.bar(*k, s, count);
            // Right of the bar and its whisker, whichever ends further.
            let end = |s: &Speedup| s.interval.map_or(s.value, |(_, high)| high).max(s.value);
            let (x, text) = match cell {
                Cell::Speedup { speedup, agents } if agents.is_empty() => {
                    (end(speedup), speedup.to_string())
                }
                Cell::Speedup { speedup, agents } => {
                    (end(speedup), format!("{speedup}  {}", agents.join(", ")))
                }
                Cell::Outcome(outcome) => (x_min, format!("no speedup: {outcome}")),
            };
            let style = TextStyle::from((FAMILY, 13)).pos(Pos::new(HPos::Left, VPos::Center));
            Text::new(format!(" {text}"), (x, (low + high) / 2.0), style)
        });
        chart.draw_series(labels)?;
    }
    let parity = [(1.0, 0.0), (1.0, bands.len() as f64)];
    chart.draw_series(LineSeries::new(parity, BLACK.mix(0.4).stroke_width(1)))?;
    super::legend(&mut chart, SeriesLabelPosition::LowerRight, 14)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(speedup: f64, interval: Option<(f64, f64)>) -> TaskRow {
        TaskRow {
            id: format!("gemm.c.fp64#{speedup}"),
            kernel: "gemm".into(),
            track: "dense_linear_algebra".into(),
            language: "c".into(),
            precision: "fp64".into(),
            repeat: 0,
            state: "settled".into(),
            attempts: 1,
            budget_used_s: 0.0,
            status: Some("ok".into()),
            speedup: Some(speedup),
            speedup_low: interval.map(|(low, _)| low),
            speedup_high: interval.map(|(_, high)| high),
            outcome: None,
            submitted_by: None,
        }
    }

    #[test]
    fn a_cells_interval_is_the_geometric_means_of_its_repeats_ends() {
        let repeats = [ok(1.1, Some((1.05, 1.15))), ok(0.95, Some((0.9, 0.99)))];
        let mean = mean_of(&repeats.iter().collect::<Vec<_>>()).unwrap();
        let (low, high) = mean.interval.unwrap();
        assert!((mean.value - (1.1f64 * 0.95).sqrt()).abs() < 1e-12);
        assert!((low - (1.05f64 * 0.9).sqrt()).abs() < 1e-12, "{low}");
        assert!((high - (1.15f64 * 0.99).sqrt()).abs() < 1e-12, "{high}");
        assert!(
            mean.no_change(),
            "one faster, one slower: no change, {mean}"
        );
    }

    #[test]
    fn a_repeat_without_an_interval_leaves_the_cell_without_one() {
        let repeats = [ok(2.0, Some((1.9, 2.1))), ok(2.2, None)];
        let mean = mean_of(&repeats.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(mean.interval, None);
        assert_eq!(mean_of(&[]), None);
    }
}

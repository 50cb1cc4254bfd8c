//! Speedup per kernel: one bar per language (and precision, when the
//! campaign has several), labelled with the agent instance that settled it.

use std::collections::{BTreeMap, BTreeSet};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
    Speedup { value: f64, agents: Vec<String> },
    Outcome(String),
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
                let ok = || tasks.iter().filter(|t| outcome(t) == "ok");
                let cell =
                    match geometric_mean(ok().filter_map(|t| t.speedup)) {
                        Some(value) => Cell::Speedup {
                            value,
                            agents: unique(ok().filter_map(|t| {
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

    fn max_speedup(&self) -> f64 {
        self.cells
            .values()
            .filter_map(|c| match c {
                Cell::Speedup { value, .. } => Some(*value),
                Cell::Outcome(_) => None,
            })
            .fold(1.0, f64::max)
    }
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
    let x_max = (grid.max_speedup() * 1.35).max(1.5);
    let mut chart = ChartBuilder::on(area)
        .caption(&title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(130)
        .build_cartesian_2d(0.0..x_max, bands.coord())?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .disable_y_mesh()
        .y_label_formatter(&|v| bands.label(*v))
        .x_desc("speedup (the baseline is 1)")
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
            Cell::Speedup { value, .. } => {
                let (low, high) = bands.bar(*k, s, count);
                Some(Rectangle::new([(0.0, low), (*value, high)], color.filled()))
            }
            Cell::Outcome(_) => None,
        });
        chart
            .draw_series(bars)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], color.filled()));
        let labels = cells().map(|((k, _), cell)| {
            let (low, high) = bands.bar(*k, s, count);
            let (x, text) = match cell {
                Cell::Speedup { value, agents } if agents.is_empty() => {
                    (*value, format!("{value:.2}x"))
                }
                Cell::Speedup { value, agents } => {
                    (*value, format!("{value:.2}x  {}", agents.join(", ")))
                }
                Cell::Outcome(outcome) => (0.0, format!("no speedup: {outcome}")),
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

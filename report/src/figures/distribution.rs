//! How speedups are distributed: per language, the share of tasks whose
//! agents' own `ok` submit reached at least each speedup (a complementary
//! CDF on a log axis, read as "x% of tasks at least this fast"), with the
//! geometric mean stated and what it leaves out: tasks not solved by their
//! agents count at no speedup in the share (as in fast_p), never in the
//! mean.

use std::collections::BTreeMap;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawResult, color_of, faint_grid, placeholder};
use crate::data::{RunData, geometric_mean};
use crate::font::FAMILY;

/// Per language: every task's speedup, `None` where its agent solved nothing.
fn by_language(data: &RunData) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut series: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for t in &data.tasks {
        let solved = crate::Graded::of_row(t).solved;
        series
            .entry(t.language.clone())
            .or_default()
            .push(t.speedup.filter(|_| solved));
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

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, data: &RunData) -> DrawResult<DB> {
    let title = "Share of tasks at least this fast (agents' own ok submits)";
    let series = by_language(data);
    let all: Vec<f64> = series.values().flatten().flatten().copied().collect();
    if all.is_empty() {
        return placeholder(area, title, "No task solved by its agent yet");
    }
    let lo = all.iter().copied().fold(1.0, f64::min) / 1.5;
    let hi = all.iter().copied().fold(1.0, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d((lo.min(0.5)..hi.max(2.0)).log_scale(), 0.0..1.05)?;
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
    for (i, (language, speedups)) in series.iter().enumerate() {
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
            "{language}: {solved} of {} solved, geometric mean {mean} (of the solved)",
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
    use super::*;

    #[test]
    fn the_share_counts_every_task_and_the_unsolved_at_none() {
        // Four tasks: 3x, 1.5x, one unsolved, 0.8x.
        let steps = steps(&[Some(1.5), None, Some(3.0), Some(0.8)]);
        assert_eq!(steps, vec![(3.0, 0.25), (1.5, 0.5), (0.8, 0.75)]);
    }
}

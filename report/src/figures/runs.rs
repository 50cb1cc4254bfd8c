//! A comparison's figure: each common task's speedup in each run, side by
//! side on a log axis, with its 95% interval as a whisker; a task a run's
//! agent did not solve has no mark in that run.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axis::Bands;
use super::{DrawResult, color_of, faint_grid, placeholder};
use crate::compare::Comparison;
use crate::font::FAMILY;
use crate::{ReportError, io_error};

/// Its element id in the page and file stem.
pub const ID: &str = "speedups";

/// Draws the figure as `speedups.svg` and `speedups.png` in `out`; its SVG.
pub fn render(comparison: &Comparison, out: &Path) -> Result<String, ReportError> {
    let size = size(comparison);
    let failed = |e: &dyn std::fmt::Display| ReportError::Draw {
        figure: ID,
        why: e.to_string(),
    };
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        area.fill(&WHITE).map_err(|e| failed(&e))?;
        draw(&area, comparison).map_err(|e| failed(&e))?;
        area.present().map_err(|e| failed(&e))?;
    }
    let svg_path = out.join(format!("{ID}.svg"));
    std::fs::write(&svg_path, &svg).map_err(|source| io_error(&svg_path, source))?;
    let png_path = out.join(format!("{ID}.png"));
    let area = BitMapBackend::new(&png_path, size).into_drawing_area();
    area.fill(&WHITE).map_err(|e| failed(&e))?;
    draw(&area, comparison).map_err(|e| failed(&e))?;
    area.present().map_err(|e| failed(&e))?;
    Ok(svg)
}

/// Width and height: a band per task.
fn size(comparison: &Comparison) -> (u32, u32) {
    (960, (140 + 30 * comparison.tasks.len() as u32).max(320))
}

pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    comparison: &Comparison,
) -> DrawResult<DB> {
    let title = "Speedup per task, run beside run (the agents' own ok submits)";
    let marks = comparison.speedups();
    if marks.is_empty() {
        return placeholder(area, title, "No task solved by an agent in any run");
    }
    let (lo, hi) = super::speedup_span(marks.iter().map(|m| &m.speedup));
    let bands = Bands::down(comparison.tasks.clone());
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(160)
        .build_cartesian_2d(
            ((lo / 1.5).min(0.5)..(hi * 1.5).max(2.0)).log_scale(),
            bands.coord(),
        )?;
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
    let count = comparison.runs.len();
    for (r, run) in comparison.runs.iter().enumerate() {
        let color = color_of(r);
        let mine = || marks.iter().filter(move |m| m.run == r);
        let at = |task: usize| {
            let (low, high) = bands.bar(task, r, count);
            (low + high) / 2.0
        };
        chart
            .draw_series(
                mine().map(|m| Circle::new((m.speedup.value, at(m.task)), 5, color.filled())),
            )?
            .label(format!("{}: {}", run.label, run.dir.display()))
            .legend(move |(x, y)| Circle::new((x + 6, y), 5, color.filled()));
        chart.draw_series(mine().filter_map(|m| {
            let (from, to) = m.speedup.interval?;
            Some(PathElement::new(
                vec![(from, at(m.task)), (to, at(m.task))],
                color.stroke_width(2),
            ))
        }))?;
    }
    let parity = [(1.0, 0.0), (1.0, bands.len() as f64)];
    chart.draw_series(LineSeries::new(parity, BLACK.mix(0.4).stroke_width(1)))?;
    super::legend(&mut chart, SeriesLabelPosition::LowerRight, 14)
}

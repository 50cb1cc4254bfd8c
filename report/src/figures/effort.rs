//! Effort per task: attempts (left) and tokens over all attempts (right),
//! each bar coloured by the task's outcome.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::Bands;
use super::{DrawResult, faint_grid, placeholder, status_color};
use crate::data::{RunData, outcome};
use crate::font::FAMILY;

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, data: &RunData) -> DrawResult<DB> {
    let title = "Attempts and tokens per task";
    if data.tasks.is_empty() {
        return placeholder(area, title, "No tasks yet");
    }
    let area = area.titled(title, (FAMILY, 22))?;
    let (w, _) = area.dim_in_pixel();
    let (left, right) = area.split_horizontally(w / 2);
    let tokens = data.tokens();
    let colors: Vec<RGBColor> = data
        .tasks
        .iter()
        .map(|t| status_color(outcome(t)))
        .collect();
    let attempts: Vec<u64> = data.tasks.iter().map(|t| u64::from(t.attempts)).collect();
    panel(&left, data, "attempts", &attempts, &colors)?;
    let tokens: Vec<u64> = data
        .tasks
        .iter()
        .map(|t| tokens.get(t.id.as_str()).copied().unwrap_or(0))
        .collect();
    let label = if tokens.iter().all(|t| *t == 0) {
        "tokens (none reported)"
    } else {
        "tokens"
    };
    panel(&right, data, label, &tokens, &colors)
}

/// One horizontal bar per task, the first task on top.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    data: &RunData,
    what: &str,
    values: &[u64],
    colors: &[RGBColor],
) -> DrawResult<DB> {
    let bands = Bands::down(data.tasks.iter().map(|t| t.id.clone()).collect());
    let x_max = values.iter().copied().max().unwrap_or(0).max(1);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(170)
        .build_cartesian_2d(0..x_max + x_max / 4 + 1, bands.coord())?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .disable_y_mesh()
        .y_label_formatter(&|v| bands.label(*v))
        .x_desc(what)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 15))
        .draw()?;
    let bars = values
        .iter()
        .zip(colors)
        .enumerate()
        .map(|(i, (v, color))| {
            let (low, high) = bands.bar(i, 0, 1);
            Rectangle::new([(0, low), (*v, high)], color.filled())
        });
    chart.draw_series(bars)?;
    let labels = values.iter().enumerate().map(|(i, v)| {
        let style = TextStyle::from((FAMILY, 12)).pos(Pos::new(HPos::Left, VPos::Center));
        Text::new(format!(" {v}"), (*v, bands.middle(i)), style)
    });
    chart.draw_series(labels)?;
    Ok(())
}

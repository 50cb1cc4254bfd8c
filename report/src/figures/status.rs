//! The status breakdown: how many tasks ended each way, and how many grades
//! (every verdict, settling or not) each status got.

use std::collections::BTreeMap;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::Bands;
use super::{DrawResult, faint_grid, placeholder, status_color};
use crate::data::{RunData, outcome};
use crate::font::FAMILY;

/// The statuses in the order a reader expects them; any other comes after.
const ORDER: [&str; 8] = [
    "ok",
    "incorrect",
    "build_error",
    "timeout",
    "crash",
    "failed",
    "leased",
    "pending",
];

/// Counts per status, for tasks (final) and grades (every verdict).
fn counts(data: &RunData) -> (Vec<String>, [Vec<u32>; 2]) {
    let mut tasks: BTreeMap<&str, u32> = BTreeMap::new();
    for t in &data.tasks {
        *tasks.entry(outcome(t)).or_default() += 1;
    }
    let mut grades: BTreeMap<&str, u32> = BTreeMap::new();
    for v in &data.verdicts {
        *grades.entry(v.status.as_str()).or_default() += 1;
    }
    let rank = |s: &str| ORDER.iter().position(|o| *o == s).unwrap_or(ORDER.len());
    let mut statuses: Vec<&str> = tasks.keys().chain(grades.keys()).copied().collect();
    statuses.sort_by_key(|s| (rank(s), *s));
    statuses.dedup();
    let of = |m: &BTreeMap<&str, u32>| -> Vec<u32> {
        statuses
            .iter()
            .map(|s| m.get(s).copied().unwrap_or(0))
            .collect()
    };
    let series = [of(&tasks), of(&grades)];
    (statuses.into_iter().map(str::to_string).collect(), series)
}

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, data: &RunData) -> DrawResult<DB> {
    let title = "Tasks by outcome, grades by status";
    let (statuses, series) = counts(data);
    if statuses.is_empty() {
        return placeholder(area, title, "No tasks yet");
    }
    let y_max = series.iter().flatten().copied().max().unwrap_or(0) + 1;
    let bands = Bands::across(statuses.clone());
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(bands.coord(), 0..y_max + y_max / 5)?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .disable_x_mesh()
        .x_label_formatter(&|v| bands.label(*v))
        .y_desc("count")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .draw()?;
    let names = ["tasks (final outcome)", "grades (every verdict)"];
    for (s, counts) in series.iter().enumerate() {
        // Tasks solid, grades pale: the colour is the status either way.
        let shade = if s == 0 { 1.0 } else { 0.45 };
        let bars = statuses
            .iter()
            .zip(counts)
            .enumerate()
            .map(|(i, (status, n))| {
                let (low, high) = bands.bar(i, s, series.len());
                Rectangle::new(
                    [(low, 0), (high, *n)],
                    status_color(status).mix(shade).filled(),
                )
            });
        chart
            .draw_series(bars)?
            .label(names[s])
            .legend(move |(x, y)| {
                Rectangle::new(
                    [(x, y - 6), (x + 12, y + 6)],
                    BLACK.mix(shade * 0.6).filled(),
                )
            });
        let labels = counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let (low, high) = bands.bar(i, s, series.len());
                let style = TextStyle::from((FAMILY, 13)).pos(Pos::new(HPos::Center, VPos::Bottom));
                Text::new(n.to_string(), ((low + high) / 2.0, *n), style)
            });
        chart.draw_series(labels)?;
    }
    super::legend(&mut chart, SeriesLabelPosition::UpperRight, 14)
}

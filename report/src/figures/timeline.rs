//! The campaign over time: each role instance's events on its own row
//! (launch, restart, ready, dead, …) above every grade's speedup as the judges
//! reported it.

use std::collections::BTreeSet;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axis::Bands;
use super::{DrawResult, color_of, faint_grid, placeholder, status_color};
use crate::data::RunData;
use crate::font::FAMILY;

/// Event classes in legend order.
const CLASSES: [&str; 8] = [
    "launch",
    "restart",
    "registered",
    "ready",
    "finished",
    "dead",
    "failed",
    "other",
];

/// The row of events without an instance: the campaign's own (a drain).
const CAMPAIGN_ROW: &str = "campaign";

/// What an event marks on its row; `None` for "launching", which only
/// precedes the "launched" that is drawn.
fn class(kind: &str, launched_before: bool) -> Option<&'static str> {
    Some(match kind {
        "launching" => return None,
        "launched" if launched_before => "restart",
        "launched" => "launch",
        "registered" | "starting" => "registered",
        "ready" => "ready",
        "finished" => "finished",
        "dead" => "dead",
        "failed" => "failed",
        _ => "other",
    })
}

/// Good news green, bad news red, the rest told apart.
fn class_color(class: &str) -> RGBColor {
    match class {
        "launch" => color_of(0),
        "restart" => status_color("incorrect"),
        "registered" => color_of(7),
        "ready" => status_color("ok"),
        "finished" => color_of(4),
        "dead" => status_color("crash"),
        "failed" => status_color("failed"),
        _ => color_of(3),
    }
}

fn instances(data: &RunData) -> Vec<String> {
    let names: BTreeSet<&str> = data.events.iter().map(|e| e.instance.as_str()).collect();
    names
        .into_iter()
        .map(|n| if n.is_empty() { CAMPAIGN_ROW } else { n }.to_string())
        .collect()
}

/// Every drawn event: (seconds since the start, row, class).
fn marks(data: &RunData, rows: &[String]) -> Vec<(f64, usize, &'static str)> {
    let start = data.start();
    let mut launched = BTreeSet::new();
    data.events
        .iter()
        .filter_map(|e| {
            let name = if e.instance.is_empty() {
                CAMPAIGN_ROW
            } else {
                e.instance.as_str()
            };
            let row = rows.iter().position(|r| r == name)?;
            let class = class(&e.kind, launched.contains(name))?;
            if e.kind == "launched" {
                launched.insert(name.to_string());
            }
            Some((e.at - start, row, class))
        })
        .collect()
}

/// The grades panel's height, below the role rows.
pub const GRADES_HEIGHT: u32 = 300;

/// How many role rows the figure needs.
pub fn rows(data: &RunData) -> usize {
    instances(data).len()
}

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, data: &RunData) -> DrawResult<DB> {
    let title = "Roles and grades over the campaign";
    if data.events.is_empty() && data.verdicts.is_empty() {
        return placeholder(area, title, "Nothing has happened yet");
    }
    let area = area.titled(title, (FAMILY, 22))?;
    // A quarter more than the campaign's span: room for the legends on the
    // right, on both panels, so their times line up.
    let x_max = (data.end() - data.start()).max(1.0) * 1.25;
    let (_, h) = area.dim_in_pixel();
    let (top, bottom) = area.split_vertically(h.saturating_sub(GRADES_HEIGHT));
    roles(&top, data, x_max)?;
    if data.verdicts.is_empty() {
        return placeholder(&bottom, "Grades", "No grades yet");
    }
    grades(&bottom, data, x_max)
}

fn roles<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    data: &RunData,
    x_max: f64,
) -> DrawResult<DB> {
    let rows = instances(data);
    let marks = marks(data, &rows);
    let bands = Bands::down(rows);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(110)
        .build_cartesian_2d(0.0..x_max, bands.coord())?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .disable_y_mesh()
        .y_label_formatter(&|v| bands.label(*v))
        .label_style((FAMILY, 13))
        .draw()?;
    // A faint line through each row's life, first event to last.
    for row in 0..bands.len() {
        let times = marks.iter().filter(|m| m.1 == row).map(|m| m.0);
        let (first, last) = times.fold((f64::MAX, f64::MIN), |(a, b), t| (a.min(t), b.max(t)));
        if first <= last {
            let y = bands.middle(row);
            chart.draw_series(LineSeries::new([(first, y), (last, y)], BLACK.mix(0.25)))?;
        }
    }
    for class in CLASSES {
        let color = class_color(class);
        let points: Vec<_> = marks.iter().filter(|m| m.2 == class).collect();
        if points.is_empty() {
            continue;
        }
        let dots = points
            .iter()
            .map(|(t, row, _)| Circle::new((*t, bands.middle(*row)), 5, color.filled()));
        chart
            .draw_series(dots)?
            .label(class)
            .legend(move |(x, y)| Circle::new((x + 6, y), 5, color.filled()));
    }
    super::legend(&mut chart, SeriesLabelPosition::UpperRight, 13)
}

/// Each verdict at the time the judge reported it: filled if it settled its
/// task, hollow if not (a Score, or a refused Submit); no speedup draws at 0.
fn grades<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    data: &RunData,
    x_max: f64,
) -> DrawResult<DB> {
    let start = data.start();
    let y_max = data
        .verdicts
        .iter()
        .filter_map(|v| v.speedup)
        .fold(1.0, f64::max)
        * 1.25;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(110)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .light_line_style(faint_grid())
        .x_desc("seconds since the campaign started")
        .y_desc("speedup of the grade")
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 15))
        .draw()?;
    let statuses: BTreeSet<&str> = data.verdicts.iter().map(|v| v.status.as_str()).collect();
    for status in statuses {
        let color = status_color(status);
        let of_status = || data.verdicts.iter().filter(move |v| v.status == status);
        let dots = of_status().map(|v| {
            let at = (v.at - start, v.speedup.unwrap_or(0.0));
            let style = if v.settled {
                color.filled()
            } else {
                color.stroke_width(2)
            };
            Circle::new(at, 5, style)
        });
        chart
            .draw_series(dots)?
            .label(status)
            .legend(move |(x, y)| Circle::new((x + 6, y), 5, color.filled()));
    }
    super::legend(&mut chart, SeriesLabelPosition::LowerRight, 13)
}

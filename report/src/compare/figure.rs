//! A comparison's figure: each common task's speedup in each run, side by
//! side on a log axis, with its 95% interval as a whisker; a task a run's
//! agent did not solve has no mark in that run.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::Comparison;
use crate::figures::axis::Bands;
use crate::figures::{
    DrawResult, Drawing, color_of, faint_grid, legend, placeholder, speedup_span,
};
use crate::font::FAMILY;

/// Its element id in the page and file stem.
pub const ID: &str = "speedups";

impl Drawing for Comparison {
    fn id(&self) -> &'static str {
        ID
    }

    /// A band per task.
    fn size(&self) -> (u32, u32) {
        (960, (140 + 30 * self.tasks.len() as u32).max(320))
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let title = "Speedup per task, run beside run (the agents' own ok submits)";
        let marks = self.speedups();
        if marks.is_empty() {
            return placeholder(area, title, "No task solved by an agent in any run");
        }
        let (lo, hi) = speedup_span(marks.iter().map(|m| &m.speedup));
        let bands = Bands::down(self.tasks.clone());
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
        let count = self.runs.len();
        for (r, run) in self.runs.iter().enumerate() {
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
        legend(&mut chart, SeriesLabelPosition::LowerRight, 14)
    }
}

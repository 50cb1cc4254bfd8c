//! The figures: each drawn once for SVG (inlined in the page and written
//! beside it) and once for PNG, from the same code ([`Drawing`], [`write`]).
//! Owns the report's figures of a run ([`Kind`]) and what every figure
//! shares: axes in bands, colours, the grid, the legend, the placeholder.
//! A comparison's figure is the comparison's (`crate::compare`), drawn with
//! these.

pub(crate) mod axis;
mod distribution;
mod effort;
mod speedup;
mod status;
mod timeline;

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::data::RunData;
use crate::font::FAMILY;
use crate::{ReportError, io_error};

/// One figure of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Speedup,
    Distribution,
    Status,
    Effort,
    Timeline,
}

/// A drawn figure: its kind and its SVG text.
#[derive(Debug, Clone)]
pub struct Figure {
    pub kind: Kind,
    pub svg: String,
}

/// What drawing on a backend `DB` can fail with.
pub(crate) type DrawResult<DB> =
    Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Speedup,
        Kind::Distribution,
        Kind::Status,
        Kind::Effort,
        Kind::Timeline,
    ];

    /// The figure's file stem and its element id in the page.
    pub fn id(self) -> &'static str {
        match self {
            Kind::Speedup => "speedup",
            Kind::Distribution => "distribution",
            Kind::Status => "status",
            Kind::Effort => "effort",
            Kind::Timeline => "timeline",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::Speedup => "Speedup per kernel and language",
            Kind::Distribution => "How the speedups are distributed, per track and language",
            Kind::Status => "Outcomes: tasks and grades by status",
            Kind::Effort => "Attempts and tokens per task",
            Kind::Timeline => "Roles and grades over the campaign",
        }
    }

    /// Width and height in pixels: tall enough for one row per task or role.
    fn size(self, data: &RunData) -> (u32, u32) {
        let rows = |n: usize| (140 + 26 * n as u32).max(320);
        match self {
            Kind::Speedup => (960, rows(speedup::rows(data))),
            Kind::Distribution => (960, distribution::height(data)),
            Kind::Status => (960, 420),
            Kind::Effort => (960, rows(data.tasks.len())),
            Kind::Timeline => (960, rows(timeline::rows(data)) + timeline::GRADES_HEIGHT),
        }
    }

    fn draw<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, Shift>,
        data: &RunData,
    ) -> DrawResult<DB> {
        match self {
            Kind::Speedup => speedup::draw(area, data),
            Kind::Distribution => distribution::draw(area, data),
            Kind::Status => status::draw(area, data),
            Kind::Effort => effort::draw(area, data),
            Kind::Timeline => timeline::draw(area, data),
        }
    }
}

/// A figure as [`write`] draws it: the same code for its SVG and its PNG.
pub(crate) trait Drawing {
    /// Its file stem and its element id in the page.
    fn id(&self) -> &'static str;
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws it on `area`, already filled white.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

/// A report's figure: its kind, drawn from the run's data.
impl Drawing for (Kind, &RunData) {
    fn id(&self) -> &'static str {
        self.0.id()
    }

    fn size(&self) -> (u32, u32) {
        self.0.size(self.1)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        self.0.draw(area, self.1)
    }
}

/// Draws `figure` as `<id>.svg` and `<id>.png` in `out`; its SVG.
pub(crate) fn write(figure: &impl Drawing, out: &Path) -> Result<String, ReportError> {
    let (id, size) = (figure.id(), figure.size());
    let failed = |e: &dyn std::fmt::Display| ReportError::Draw {
        figure: id,
        why: e.to_string(),
    };
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        area.fill(&WHITE).map_err(|e| failed(&e))?;
        figure.draw(&area).map_err(|e| failed(&e))?;
        area.present().map_err(|e| failed(&e))?;
    }
    let svg_path = out.join(format!("{id}.svg"));
    std::fs::write(&svg_path, &svg).map_err(|source| io_error(&svg_path, source))?;
    let png_path = out.join(format!("{id}.png"));
    let area = BitMapBackend::new(&png_path, size).into_drawing_area();
    area.fill(&WHITE).map_err(|e| failed(&e))?;
    figure.draw(&area).map_err(|e| failed(&e))?;
    area.present().map_err(|e| failed(&e))?;
    Ok(svg)
}

/// Draws the report's figure of `kind` as `<id>.svg` and `<id>.png` in `out`.
pub fn render(kind: Kind, data: &RunData, out: &Path) -> Result<Figure, ReportError> {
    let svg = write(&(kind, data), out)?;
    Ok(Figure { kind, svg })
}

/// The smallest and largest of `speedups`' values and interval ends, with
/// 1: what a log speedup axis must hold.
pub(crate) fn speedup_span<'a>(
    speedups: impl Iterator<Item = &'a hpcagent_common::speedup::Speedup>,
) -> (f64, f64) {
    speedups
        .flat_map(|s| {
            let (low, high) = s.interval.unwrap_or((s.value, s.value));
            [s.value, low, high]
        })
        .filter(|v| *v > 0.0)
        .fold((1.0, 1.0), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// A figure with nothing to show yet says so in its middle.
pub(crate) fn placeholder<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    message: &str,
) -> DrawResult<DB> {
    let area = area.titled(title, (FAMILY, 22))?;
    let (w, h) = area.dim_in_pixel();
    let style = TextStyle::from((FAMILY, 18))
        .color(&RGBColor(90, 90, 90))
        .pos(Pos::new(HPos::Center, VPos::Center));
    area.draw(&Text::new(
        message.to_string(),
        (w as i32 / 2, h as i32 / 2),
        style,
    ))
}

/// The legend every figure draws: boxed, on a faint white ground.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FAMILY, font_size))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .draw()
}

/// A fixed colour per name, so a language or status keeps its colour across figures.
pub(crate) fn color_of(index: usize) -> RGBColor {
    const PALETTE: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(23, 190, 207),
    ];
    PALETTE[index % PALETTE.len()]
}

/// A status's colour: green is good, reds are the submission's fault or the
/// campaign's, grey is not finished.
fn status_color(status: &str) -> RGBColor {
    match status {
        "ok" => RGBColor(44, 160, 44),
        "incorrect" => RGBColor(255, 127, 14),
        "build_error" => RGBColor(148, 103, 189),
        "timeout" => RGBColor(188, 189, 34),
        "crash" => RGBColor(214, 39, 40),
        "failed" => RGBColor(120, 20, 20),
        "pending" | "leased" => RGBColor(170, 170, 170),
        _ => RGBColor(23, 190, 207),
    }
}

/// The minor grid: there to read values by, quieter than the data.
pub(crate) fn faint_grid() -> RGBAColor {
    BLACK.mix(0.04)
}

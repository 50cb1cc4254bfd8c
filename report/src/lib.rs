//! A campaign's report: its results store turned into a page a person reads.
//!
//! Owns reading a run directory's store through the orchestrator's read-only
//! [`Reader`](hpcagent_orchestrator::store::Reader), the campaign summary and
//! results table, the figures (drawn with plotters, each written as SVG and
//! PNG), and `index.html`, which inlines every figure so the page needs no
//! other file, no network and no JavaScript.
//!
//! Does not own the store (it never writes it; a running campaign can be
//! reported while its orchestrator writes), running or watching a campaign
//! (`hpcagent up`, `hpcagent status`), or the command line (`hpcagent report`).

mod compare;
mod cost;
mod data;
pub(crate) mod figures;
mod font;
mod html;
mod identity;
mod score;
mod time;

use std::path::{Path, PathBuf};

use hpcagent_orchestrator::store::{FILE_NAME, StoreError};

pub use compare::Comparison;
pub use cost::{Cost, TaskCost, per_task};
pub use data::geometric_mean;
pub use figures::Kind as FigureKind;
pub use identity::RunIdentity;
pub use score::{BenchScore, Graded, SUSPECT_ABOVE, bench_score, score_results, suspect_words};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{} has no results store ({}): no campaign ever ran there", .0.display(), FILE_NAME)]
    NoStore(PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Query(#[from] hpcagent_orchestrator::store::ReadError),
    #[error(
        "no font for the figures' text: none of {searched} exists; install DejaVu Sans \
         (Debian: apt-get install {}) or pass --font FILE",
        font::PACKAGE
    )]
    NoFont { searched: String },
    #[error("{}: not a font the figures can use", .0.display())]
    BadFont(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("drawing the {figure} figure: {why}")]
    Draw { figure: &'static str, why: String },
}

/// Where the report goes and what draws its text.
#[derive(Debug, Clone)]
pub struct Options {
    /// The report's directory (made if missing): `index.html` and each figure.
    pub out_dir: PathBuf,
    /// A TrueType font for the figures' text; `None` looks for DejaVu Sans
    /// where Linux distributions install it.
    pub font: Option<PathBuf>,
}

/// Writes the report of the campaign in `run_dir`; returns the page's path.
pub fn write(run_dir: &Path, options: &Options) -> Result<PathBuf, ReportError> {
    let data = data::RunData::load(run_dir)?;
    font::register(options.font.as_deref())?;
    let out = &options.out_dir;
    std::fs::create_dir_all(out).map_err(|source| io_error(out, source))?;
    let figures = FigureKind::ALL
        .iter()
        .map(|kind| figures::render(*kind, &data, out))
        .collect::<Result<Vec<_>, _>>()?;
    let page = out.join("index.html");
    std::fs::write(&page, html::page(&data, &figures)).map_err(|source| io_error(&page, source))?;
    Ok(page)
}

fn io_error(path: &Path, source: std::io::Error) -> ReportError {
    ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

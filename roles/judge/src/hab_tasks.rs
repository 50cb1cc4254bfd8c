//! An HPCAgent-Bench checkout as a judge's corpus: its manifests, each as
//! the judge grades it, those it cannot grade with why, and the operator's
//! overlay of C baselines (`BASELINES=DIR`, `<path key>/baseline.c`).
//!
//! This module finds tasks and their baselines; making their cases is
//! [`crate::data::hab`]'s, grading them [`crate::grade`]'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::corpus::hab::{self, Kernel as Manifested};
use crate::corpus::{Corpus, Kernel};

/// The tasks of one checkout.
#[derive(Debug, Clone)]
pub struct HabTasks {
    pub root: PathBuf,
    pub kernels: Vec<Manifested>,
    /// Manifests that do not load, or load but cannot be graded: key → why.
    pub refused: BTreeMap<String, String>,
    pub baselines: Option<PathBuf>,
}

/// Why a checkout cannot be read, or a task of it is not graded here.
#[derive(Debug, thiserror::Error)]
pub enum HabTaskError {
    #[error("cannot read {root}: {error}")]
    Read {
        root: PathBuf,
        error: std::io::Error,
    },
    #[error("{key} cannot be graded: {why}")]
    Refused { key: String, why: String },
    #[error(transparent)]
    Find(#[from] hab::HabError),
    #[error("{0} is not graded here")]
    NotGraded(String),
}

impl HabTasks {
    /// The checkout's tasks, and the corpus of those the judge can grade.
    pub fn load(
        root: &Path,
        baselines: Option<PathBuf>,
    ) -> Result<(HabTasks, Corpus), HabTaskError> {
        let (kernels, refusals) = hab::load(root).map_err(|error| HabTaskError::Read {
            root: root.to_path_buf(),
            error,
        })?;
        let (corpus, refused) = hab::graded_corpus(root, &kernels, refusals);
        let tasks = HabTasks {
            root: root.to_path_buf(),
            kernels,
            refused,
            baselines,
        };
        Ok((tasks, corpus))
    }

    /// A task by path key, or by stem when unambiguous; a refused one says why.
    pub fn find(&self, id: &str) -> Result<&Manifested, HabTaskError> {
        let key = id.trim().trim_matches('/').trim_end_matches(".yaml");
        let refused = |key: &str, why: &String| HabTaskError::Refused {
            key: key.to_string(),
            why: why.clone(),
        };
        if let Some(why) = self.refused.get(key) {
            return Err(refused(key, why));
        }
        let kernel = hab::find(&self.kernels, id)?;
        match self.refused.get(&kernel.key) {
            Some(why) => Err(refused(&kernel.key, why)),
            None => Ok(kernel),
        }
    }

    /// The graded form of a task in `corpus`.
    pub fn graded<'a>(&self, corpus: &'a Corpus, id: &str) -> Result<&'a Kernel, HabTaskError> {
        let key = &self.find(id)?.key;
        corpus
            .kernels
            .iter()
            .find(|k| &k.id == key)
            .ok_or_else(|| HabTaskError::NotGraded(key.clone()))
    }

    /// The overlay's C baseline of a task, when the overlay has one.
    pub fn baseline(&self, kernel: &Manifested) -> Option<PathBuf> {
        let file = self
            .baselines
            .as_ref()?
            .join(&kernel.key)
            .join("baseline.c");
        file.is_file().then_some(file)
    }
}

/// The symbol HPCAgent-Bench's translator gives the C it emits (the
/// module's name, the configuration suffix, `_fp64`), where it differs
/// from the task's: an overlay baseline it emitted is built with that name
/// defined to the task's.
pub fn translator_symbol(kernel: &Manifested) -> Option<String> {
    let module = kernel
        .manifest
        .module_name
        .as_deref()
        .unwrap_or(&kernel.stem);
    let short = kernel
        .manifest
        .short_name
        .as_deref()
        .unwrap_or(&kernel.stem)
        .to_lowercase();
    let suffix = kernel
        .abi
        .symbol
        .strip_suffix("_fp64")?
        .strip_prefix(short.as_str())?;
    let emitted = format!("{module}{suffix}_fp64");
    (emitted != kernel.abi.symbol).then_some(emitted)
}

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

impl HabTasks {
    /// The checkout's tasks, and the corpus of those the judge can grade.
    pub fn load(root: &Path, baselines: Option<PathBuf>) -> Result<(HabTasks, Corpus), String> {
        let (kernels, refusals) =
            hab::load(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
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
    pub fn find(&self, id: &str) -> Result<&Manifested, String> {
        let key = id.trim().trim_matches('/').trim_end_matches(".yaml");
        if let Some(why) = self.refused.get(key) {
            return Err(format!("{key} cannot be graded: {why}"));
        }
        let kernel = hab::find(&self.kernels, id).map_err(|e| e.to_string())?;
        match self.refused.get(&kernel.key) {
            Some(why) => Err(format!("{} cannot be graded: {why}", kernel.key)),
            None => Ok(kernel),
        }
    }

    /// The graded form of a task in `corpus`.
    pub fn graded<'a>(&self, corpus: &'a Corpus, id: &str) -> Result<&'a Kernel, String> {
        let key = &self.find(id)?.key;
        corpus
            .kernels
            .iter()
            .find(|k| &k.id == key)
            .ok_or_else(|| format!("{key} is not graded here"))
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

//! An HPCAgent-Bench checkout as a judge's corpus: its manifests, each as
//! the judge grades it, those it cannot grade with why, what each task's
//! speedup divides ([`Denominator`]), and the operator's overlay of C
//! baselines (`BASELINES=DIR`, `<path key>/baseline.c`).
//!
//! This module finds tasks and decides their denominators; making their
//! cases and their translator's C is [`crate::data::hab`]'s, grading them
//! [`crate::grade`]'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hpcagent_corpus::hab::{self, Kernel as Manifested};
use hpcagent_corpus::{Corpus, Kernel};

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

    /// What a grade of `kernel` times its speedup against: the overlay's C
    /// where the operator gave one, else the denominator HPCAgent-Bench
    /// times it against ([`hab_denominator`]).
    pub fn denominator(&self, kernel: &Manifested) -> Denominator {
        match self.baseline(kernel) {
            Some(file) => Denominator::Overlay(file),
            None => hab_denominator(kernel),
        }
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

/// What a task's speedup divides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denominator {
    /// The operator's C for it (`BASELINES`), timed in pairs beside the
    /// submission.
    Overlay(PathBuf),
    /// The single-core C HPCAgent-Bench's translator emits from its NumPy
    /// reference, made from the checkout itself, timed in pairs.
    Translator,
    /// The NumPy reference's fastest call on the same inputs.
    Numpy,
}

impl Denominator {
    /// How a verdict names it (its `denominator`).
    pub fn word(&self) -> &'static str {
        match self {
            Denominator::Overlay(_) => "baselines overlay",
            Denominator::Translator => "translator C",
            Denominator::Numpy => "numpy",
        }
    }
}

/// The denominator HPCAgent-Bench times `kernel` against by default (its
/// `measurement.baseline: auto`, `harness/grading.py`'s
/// `TRACK_DEFAULT_BASELINE`): its translator's single-core C on the
/// loop-level track and on a track it does not know (its default is C),
/// the NumPy reference on the machine-learning and scientific tracks. (The
/// two manifests with a `baseline:` block of their own, a vendored
/// multi-core Fortran source HPCAgent-Bench builds with each of its
/// compilers, are timed against NumPy here: this judge does not build it.)
pub fn hab_denominator(kernel: &Manifested) -> Denominator {
    match kernel.track.as_str() {
        "machine_learning" | "scientific_computing" => Denominator::Numpy,
        _ => Denominator::Translator,
    }
}

/// The function a translator's C exports: the one definition at the
/// start of a line that is not `static` (its helpers are), where there is
/// exactly one.
pub fn exported_symbol(source: &str) -> Option<String> {
    let mut names = source.lines().filter_map(|line| {
        let rest = line.strip_prefix("void ")?;
        let (name, _) = rest.split_once('(')?;
        let name = name.trim();
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        valid.then(|| name.to_string())
    });
    let first = names.next()?;
    names.all(|n| n == first).then_some(first)
}

/// The symbol C of HPCAgent-Bench's translator (emitted for the task, or
/// an overlay's) exports where it differs from the task's: the one it
/// defines ([`exported_symbol`]), else the one the translator would name
/// it ([`translator_symbol`]). Such C is built with that name defined to
/// the task's.
pub fn renaming(kernel: &Manifested, source: &str) -> Option<String> {
    let emitted = exported_symbol(source).or_else(|| translator_symbol(kernel))?;
    (emitted != kernel.abi.symbol).then_some(emitted)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest of `track` (none: the loop track's default) in a corpus
    /// of its own.
    fn kernel(track: Option<&str>) -> (tempfile::TempDir, Manifested) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t/k");
        std::fs::create_dir_all(&dir).unwrap();
        let taxonomy = track
            .map(|t| format!("taxonomy:\n  track: {t}\n"))
            .unwrap_or_default();
        std::fs::write(
            dir.join("k.yaml"),
            format!(
                "name: k\nparameters:\n  S: {{N: 8}}\n{taxonomy}\
                 init:\n  arrays:\n    x: (N,)\n    y: (N,)\noutput_args: [y]\n"
            ),
        )
        .unwrap();
        std::fs::write(dir.join("k_numpy.py"), "def k(x, y):\n    y[:] = x\n").unwrap();
        let (mut kernels, refused) = hpcagent_corpus::hab::load(root.path()).unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        (root, kernels.remove(0))
    }

    #[test]
    fn each_track_is_timed_against_what_hpcagent_bench_times_it_against() {
        for (track, expected) in [
            (Some("loop_level_reasoning"), Denominator::Translator),
            // A manifest without a track is on the loop track.
            (None, Denominator::Translator),
            (Some("machine_learning"), Denominator::Numpy),
            (Some("scientific_computing"), Denominator::Numpy),
            // A track HPCAgent-Bench does not know: its default, C.
            (Some("new_track"), Denominator::Translator),
        ] {
            let (_root, k) = kernel(track);
            assert_eq!(hab_denominator(&k), expected, "{track:?}");
        }
    }

    #[test]
    fn the_operator_s_overlay_wins_over_every_track_s_default() {
        for track in ["loop_level_reasoning", "machine_learning"] {
            let (root, k) = kernel(Some(track));
            let overlay = tempfile::tempdir().unwrap();
            let mut tasks = HabTasks {
                root: root.path().to_path_buf(),
                kernels: vec![k.clone()],
                refused: BTreeMap::new(),
                baselines: Some(overlay.path().to_path_buf()),
            };
            // An overlay without this task's C leaves the default.
            assert_eq!(tasks.denominator(&k), hab_denominator(&k));
            let file = overlay.path().join(&k.key).join("baseline.c");
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "void k_fp64(void) {}\n").unwrap();
            assert_eq!(tasks.denominator(&k), Denominator::Overlay(file.clone()));
            assert_eq!(tasks.denominator(&k).word(), "baselines overlay");
            tasks.baselines = None;
            assert_eq!(tasks.denominator(&k), hab_denominator(&k));
        }
    }

    #[test]
    fn the_translator_s_c_is_built_under_the_task_s_symbol() {
        let (_root, k) = kernel(None);
        assert_eq!(k.abi.symbol, "k_fp64");
        let helpers = "static inline double f(double a) { return a; }\n\
                       static void g(double *x) {}\n";
        // Its own name: nothing to rename.
        let same = format!(
            "{helpers}void k_fp64(const double *restrict x, double *restrict y, int64_t N) {{\n}}\n"
        );
        assert_eq!(renaming(&k, &same), None);
        // A sparse configuration's C is named without it (bicg_fp64 for
        // bicg_solvers_csr_fp64).
        let other = format!("{helpers}void bicg_fp64(const double *restrict x) {{\n}}\n");
        assert_eq!(exported_symbol(&other).as_deref(), Some("bicg_fp64"));
        assert_eq!(renaming(&k, &other).as_deref(), Some("bicg_fp64"));
        // Two exported functions: which one is not guessed.
        assert_eq!(
            exported_symbol("void a(int x) {}\nvoid b(int y) {}\n"),
            None
        );
    }
}

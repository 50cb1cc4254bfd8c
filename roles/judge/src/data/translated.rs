//! The C HPCAgent-Bench's translator emits for a task: the denominator
//! HPCAgent-Bench times its loop-level track against
//! ([`crate::hab_tasks::Denominator::Translator`]), made by its own code,
//! run in place from the checkout the judge reads its manifests from
//! (`hab_inputs.py`'s `translate`, in the judge's Python worker,
//! [`super::worker`]), never copied.
//!
//! A task's C is emitted once per judge cache and kept in
//! `<cache>/translated/`, beside the builds, under a key of the task's
//! files (manifest, reference, initializer) and of the translator's own
//! sources: a changed manifest or a changed translator emits it again. A
//! translation that fails is remembered for the judge's life (it takes
//! seconds, and a grade of the task would ask again), with why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::worker::WorkerError;
use super::{DataCache, write_private};
use hpcagent_corpus::fingerprint;
use hpcagent_corpus::hab::{self, Kernel as Manifested};

/// Bump when how a translation is asked for changes.
const TRANSLATION_VERSION: &str = "1";

/// The translator's sources, relative to the checkout: the packages that
/// emit C, and HPCAgent-Bench's code that feeds them a manifest.
const TRANSLATOR_DIRS: [&str; 2] = [
    "hpcagent_bench/numpy_translators/src/numpyto_common",
    "hpcagent_bench/numpy_translators/src/numpyto_c",
];
const TRANSLATOR_FILES: [&str; 3] = [
    "hpcagent_bench/emit_bridge.py",
    "hpcagent_bench/spec.py",
    "hpcagent_bench/harness/agent.py",
];

/// What the translator's Python needs beyond the standard library, as
/// HPCAgent-Bench's `setup.py` lists them for these modules.
pub const TRANSLATOR_MODULES: &str = "numpy, pyyaml, ml_dtypes, sympy";

/// A task's translated C.
#[derive(Debug, Clone)]
pub struct Translated {
    pub source: String,
    /// Where the judge keeps it.
    pub file: PathBuf,
}

/// Why a task's translated C cannot be had here.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TranslateError {
    #[error(
        "{checkout} has no HPCAgent-Bench translator ({missing} is missing): grade it from a \
         whole HPCAgent-Bench checkout, or give its C in BASELINES"
    )]
    NoTranslator { checkout: PathBuf, missing: PathBuf },
    #[error(
        "HPCAgent-Bench's translator needs Python modules {python} cannot import ({names}): \
         install them into it ({TRANSLATOR_MODULES}), name a Python that has them in \
         HPCAGENT_PYTHON, or give the task's C in BASELINES"
    )]
    Modules { python: String, names: String },
    #[error("HPCAgent-Bench's translator does not translate {key}: {why}")]
    Refused { key: String, why: String },
    #[error("HPCAgent-Bench's translator: {0}")]
    Io(String),
}

/// The translations a judge made or could not make, by cache key, and the
/// translators' versions, by checkout.
#[derive(Debug, Default, Clone)]
pub(super) struct Translations {
    versions: Arc<Mutex<HashMap<PathBuf, Result<String, TranslateError>>>>,
    failed: Arc<Mutex<HashMap<String, TranslateError>>>,
}

/// A hash of the translator's sources in `checkout`.
pub fn translator_version(checkout: &Path) -> Result<String, TranslateError> {
    let mut files = Vec::new();
    for dir in TRANSLATOR_DIRS {
        let dir = checkout.join(dir);
        if !dir.is_dir() {
            return Err(TranslateError::NoTranslator {
                checkout: checkout.to_path_buf(),
                missing: dir,
            });
        }
        python_files(&dir, &mut files).map_err(|e| TranslateError::Io(e.to_string()))?;
    }
    for file in TRANSLATOR_FILES {
        let file = checkout.join(file);
        if !file.is_file() {
            return Err(TranslateError::NoTranslator {
                checkout: checkout.to_path_buf(),
                missing: file,
            });
        }
        files.push(file);
    }
    files.sort();
    let mut parts = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(checkout).unwrap_or(file);
        parts.push(relative.to_string_lossy().into_owned().into_bytes());
        parts.push(
            std::fs::read(file)
                .map_err(|e| TranslateError::Io(format!("{}: {e}", file.display())))?,
        );
    }
    let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    Ok(fingerprint(&parts))
}

fn python_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if entry.file_name() != "__pycache__" {
                python_files(&path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "py") {
            out.push(path);
        }
    }
    Ok(())
}

/// What a failed translation's stderr says: the modules it could not
/// import, or its last lines.
pub fn classify(python: &str, key: &str, stderr: &str) -> TranslateError {
    let mut names: Vec<&str> = stderr
        .match_indices("No module named '")
        .filter_map(|(at, found)| {
            let rest = &stderr[at + found.len()..];
            let name = rest.split('\'').next()?;
            name.split('.').next()
        })
        .collect();
    names.sort();
    names.dedup();
    if !names.is_empty() {
        return TranslateError::Modules {
            python: python.to_string(),
            names: names.join(", "),
        };
    }
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("numpyto_c: emitted"))
        .collect();
    let tail = lines[lines.len().saturating_sub(4)..].join("\n");
    TranslateError::Refused {
        key: key.to_string(),
        why: if tail.is_empty() {
            "it wrote no C".into()
        } else {
            tail
        },
    }
}

impl DataCache {
    /// The C HPCAgent-Bench's translator emits for `manifested` (read from
    /// `root`, a checkout's `hpcagent_bench/benchmarks`), `fingerprint`
    /// being its files' hash: from the cache, or emitted now.
    pub async fn translated(
        &self,
        root: &Path,
        manifested: &Manifested,
        fingerprint: &str,
    ) -> Result<Translated, TranslateError> {
        let checkout = hab::checkout(root);
        let version = self.translator_version(&checkout)?;
        let hash = hpcagent_corpus::fingerprint(&[
            fingerprint.as_bytes(),
            version.as_bytes(),
            TRANSLATION_VERSION.as_bytes(),
        ]);
        let key = format!("{}-{}", manifested.stem, &hash[..24]);
        let file = self.root.join("translated").join(format!("{key}.c"));
        let lock = self.lock(&format!("translated-{key}"));
        let _held = lock.lock().await;
        if let Ok(source) = std::fs::read_to_string(&file) {
            return Ok(Translated { source, file });
        }
        if let Some(failed) = self
            .translations
            .failed
            .lock()
            .expect("translations")
            .get(&key)
        {
            return Err(failed.clone());
        }
        let made = self.translate(&checkout, &manifested.key).await;
        let source = match made {
            Ok(source) => source,
            Err(e) => {
                self.translations
                    .failed
                    .lock()
                    .expect("translations")
                    .insert(key, e.clone());
                return Err(e);
            }
        };
        write_private(&file, source.as_bytes()).map_err(|e| TranslateError::Io(e.to_string()))?;
        Ok(Translated { source, file })
    }

    /// The translator's version in `checkout`, hashed once per judge.
    fn translator_version(&self, checkout: &Path) -> Result<String, TranslateError> {
        let mut versions = self.translations.versions.lock().expect("translations");
        versions
            .entry(checkout.to_path_buf())
            .or_insert_with(|| translator_version(checkout))
            .clone()
    }

    /// Runs the translator on the task `key` of `checkout`, in the
    /// judge's Python worker.
    async fn translate(&self, checkout: &Path, key: &str) -> Result<String, TranslateError> {
        let worker = self
            .worker()
            .map_err(|e| TranslateError::Io(e.to_string()))?;
        let request = serde_json::json!({"op": "translate", "checkout": checkout, "key": key});
        match worker.call(request, self.reference_timeout).await {
            Ok(answer) => match answer["source"].as_str() {
                Some(source) if !source.trim().is_empty() => Ok(source.to_string()),
                _ => Err(classify(&self.python, key, "")),
            },
            Err(WorkerError::Failed(traceback)) => Err(classify(&self.python, key, &traceback)),
            Err(e) => Err(TranslateError::Io(e.to_string())),
        }
    }

    /// What the judge's Python runs with beyond the judge's environment:
    /// HPCAgent-Bench's modules compiled once into the judge's cache (its
    /// checkout may be read-only, and importing its package compiles
    /// seconds of it).
    pub(super) fn python_env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![("PYTHONPYCACHEPREFIX", self.root.join("pycache"))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_module_is_named_and_other_failures_say_their_last_lines() {
        let stderr = "Traceback (most recent call last):\n  File \"x\", line 1\n\
                      ModuleNotFoundError: No module named 'ml_dtypes'\n";
        assert!(matches!(
            classify("python3", "k", stderr),
            TranslateError::Modules { names, .. } if names == "ml_dtypes"
        ));
        // The emitter's own child names the module it lacked, with a
        // dotted path; the parent's error follows.
        let stderr = "ModuleNotFoundError: No module named 'sympy.core'\n\
                      RuntimeError: emit failed for k (c); rc=1\n";
        assert!(matches!(
            classify("python3", "k", stderr),
            TranslateError::Modules { names, .. } if names == "sympy"
        ));
        let stderr = "numpyto_c: emitted k_fp64.{c,cpp}\nline 1\nline 2\n\
                      NotImplementedError: np.fft is not supported\n";
        match classify("python3", "llr/k/k", stderr) {
            TranslateError::Refused { key, why } => {
                assert_eq!(key, "llr/k/k");
                assert!(why.ends_with("np.fft is not supported"), "{why}");
                assert!(!why.contains("emitted"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_checkout_without_the_translator_is_said_to_lack_it() {
        let checkout = tempfile::tempdir().unwrap();
        match translator_version(checkout.path()) {
            Err(TranslateError::NoTranslator { missing, .. }) => {
                assert!(missing.ends_with("numpyto_common"), "{}", missing.display())
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_translator_s_version_changes_with_its_sources() {
        let checkout = tempfile::tempdir().unwrap();
        for dir in TRANSLATOR_DIRS {
            std::fs::create_dir_all(checkout.path().join(dir)).unwrap();
            std::fs::write(checkout.path().join(dir).join("a.py"), "x = 1\n").unwrap();
        }
        for file in TRANSLATOR_FILES {
            let file = checkout.path().join(file);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, "y = 1\n").unwrap();
        }
        let first = translator_version(checkout.path()).unwrap();
        assert_eq!(translator_version(checkout.path()).unwrap(), first);
        let lowering = checkout.path().join(TRANSLATOR_DIRS[0]).join("lowering.py");
        std::fs::write(&lowering, "z = 2\n").unwrap();
        assert_ne!(translator_version(checkout.path()).unwrap(), first);
    }
}

//! Test data: inputs generated from (kernel, precision, sizes, seed), and the
//! NumPy reference's outputs for them, both cached on disk.
//!
//! Inputs live under `<cache>/inputs/<key>/`, reference outputs under
//! `<cache>/reference/<key>/`, both directories only the judge's user can
//! open: the run's supervisor (the judge's own process) reads the inputs,
//! the judge the references, and no runner of a slot's user can list them,
//! which would tell it the held-out cases' sizes, where its sandbox alone
//! does not hold it (weak isolation, without Landlock). Every
//! entry is written to a temporary name and renamed into place, so concurrent
//! judges and slots see either nothing or a complete entry. The two
//! directories of a key are one case, kept within a bound ([`bound`]).

pub mod ahead;
pub mod bound;
mod generate;
pub mod hab;
pub mod translated;
pub mod worker;

use hpcagent_common::words::tail;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use hpcagent_corpus::{DType, Kernel, Precision, Role, ScalarValue, Sizes, fingerprint};

const REFRUN: &str = include_str!("refrun.py");
/// Bump when generation changes: cached inputs of older versions are ignored.
const GENERATOR_VERSION: &str = "1";

/// One concrete problem: a kernel at a precision, sizes and seed.
#[derive(Debug, Clone)]
pub struct Case {
    pub precision: Precision,
    pub sizes: Sizes,
    pub seed: u64,
}

/// An array of a case, as stored on disk.
#[derive(Debug, Clone)]
pub struct ArrayData {
    pub name: String,
    pub dtype: DType,
    pub role: Role,
    pub shape: Vec<i64>,
    pub elements: usize,
    /// The generated input file; `None` for pure outputs.
    pub input: Option<PathBuf>,
}

/// A case's inputs, ready for the runner.
#[derive(Debug, Clone)]
pub struct CaseInputs {
    pub key: String,
    pub sizes: Sizes,
    pub arrays: Vec<ArrayData>,
    pub scalars: Vec<(String, ScalarValue, DType)>,
    pub workspace_bytes: u64,
    /// Keeps the case in the cache while these inputs are held.
    _pin: Arc<bound::Pin>,
}

#[cfg(test)]
impl CaseInputs {
    /// Inputs of `arrays` alone, in no cache.
    pub(crate) fn for_test(arrays: Vec<ArrayData>) -> CaseInputs {
        let pin = bound::Pins::default().pin(Path::new("/nonexistent"), "test");
        CaseInputs {
            key: "test".into(),
            sizes: Sizes::new(),
            arrays,
            scalars: Vec::new(),
            workspace_bytes: 0,
            _pin: Arc::new(pin),
        }
    }
}

/// A case's reference outputs: output name → file.
#[derive(Debug, Clone)]
pub struct Reference {
    pub outputs: BTreeMap<String, PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("invalid case: {0}")]
    Case(String),
    #[error("invalid case: {0}")]
    Size(#[from] hpcagent_corpus::SizeError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the reference failed: {0}")]
    Reference(String),
    /// The grade that asked said to stop before the reference's calls.
    #[error("the cases' making was cancelled before their reference was called")]
    Cancelled,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The cache of inputs and reference outputs under one root.
#[derive(Debug, Clone)]
pub struct DataCache {
    root: PathBuf,
    python: String,
    reference_timeout: Duration,
    /// Bytes of cases kept ([`bound`]).
    bound: u64,
    pins: bound::Pins,
    /// One trim at a time: two would count the same entries.
    trimming: Arc<Mutex<()>>,
    /// One lock per key, so two slots asking for the same case produce it once.
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// Which modules the Python lacks, by the set asked about: its
    /// installation does not change under a judge, and a check is a
    /// Python start (a tenth of a second or more) on every grade.
    missing: Arc<Mutex<HashMap<BTreeSet<String>, BTreeSet<String>>>>,
    /// HPCAgent-Bench's translator's versions, and the translations that
    /// failed ([`translated`]).
    translations: translated::Translations,
    /// The one Python that makes HPCAgent-Bench's cases and runs its
    /// translator, started on first use ([`worker`]).
    worker: Arc<Mutex<Option<Arc<worker::Worker>>>>,
}

impl DataCache {
    /// The cache under `root`, running references with `python`.
    pub fn new(root: PathBuf, python: String) -> DataCache {
        DataCache {
            root,
            python,
            reference_timeout: Duration::from_secs(900),
            bound: bound::DEFAULT_BYTES,
            pins: bound::Pins::default(),
            trimming: Arc::default(),
            locks: Arc::default(),
            missing: Arc::default(),
            translations: translated::Translations::default(),
            worker: Arc::default(),
        }
    }

    /// This cache, keeping at most `bytes` of cases not in use.
    pub fn with_bound(mut self, bytes: u64) -> DataCache {
        self.bound = bytes;
        self
    }

    /// The bytes of cases this cache keeps.
    pub fn bound(&self) -> u64 {
        self.bound
    }

    pub fn python(&self) -> &str {
        &self.python
    }

    /// The judge's Python worker (made, not started, on first use; its
    /// script in `<cache>/worker/`).
    pub(crate) fn worker(&self) -> Result<Arc<worker::Worker>, DataError> {
        let mut slot = self.worker.lock().expect("worker");
        if let Some(worker) = &*slot {
            return Ok(worker.clone());
        }
        let home = self.root.join("worker");
        create_private_dir(&home)?;
        let made = worker::Worker::new(&self.python, &home, hab::SCRIPT, self.python_env())
            .map_err(io(&home))?;
        let made = Arc::new(made);
        *slot = Some(made.clone());
        Ok(made)
    }

    /// Starts the worker ahead of the first request (a Python start and
    /// NumPy's import), in the background.
    pub fn start_worker(&self) {
        let Ok(worker) = self.worker() else {
            return;
        };
        let limit = self.reference_timeout;
        tokio::spawn(async move {
            if let Err(e) = worker.call(json!({"op": "ping"}), limit).await {
                tracing::warn!("starting the judge's Python worker: {e}");
            }
        });
    }

    /// Holds `key`'s case in the cache until the pin is dropped.
    fn pin(&self, key: &str) -> Arc<bound::Pin> {
        Arc::new(self.pins.pin(&self.root, key))
    }

    /// Brings the cache back within its bound, after a new entry.
    async fn trim(&self) {
        let (root, bytes, pins) = (self.root.clone(), self.bound, self.pins.clone());
        let trimming = self.trimming.clone();
        let trimmed = tokio::task::spawn_blocking(move || {
            let _one = trimming.lock().expect("trim lock");
            bound::trim(&root, bytes, &pins)
        })
        .await
        .unwrap_or_default();
        if trimmed.entries > 0 {
            tracing::info!(
                cases = trimmed.entries,
                mib = trimmed.bytes >> 20,
                bound_mib = bytes >> 20,
                "trimmed the least recently used cases"
            );
        }
    }

    fn lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().expect("lock table");
        locks.entry(key.to_string()).or_default().clone()
    }

    /// The case's inputs, generated on first use.
    pub async fn inputs(&self, kernel: &Kernel, case: &Case) -> Result<CaseInputs, DataError> {
        let key = case_key(kernel, case);
        let dir = self.root.join("inputs").join(&key);
        let mut arrays = Vec::new();
        for spec in &kernel.arrays {
            let elements = kernel.elements(spec, &case.sizes)?;
            let shape = kernel.shape(spec, &case.sizes)?;
            arrays.push(ArrayData {
                name: spec.name.clone(),
                dtype: spec.elem.resolve(case.precision),
                role: spec.role,
                shape,
                elements,
                input: spec
                    .role
                    .is_input()
                    .then(|| dir.join(format!("{}.bin", spec.name))),
            });
        }
        let scalars = kernel
            .scalars
            .iter()
            .map(|s| (s.name.clone(), s.value, s.elem.resolve(case.precision)))
            .collect();
        let workspace_bytes = kernel.workspace_bytes(&case.sizes)?;
        let pin = self.pin(&key);
        let lock = self.lock(&key);
        let _held = lock.lock().await;
        if !dir.is_dir() {
            let (kernel, case, dir) = (kernel.clone(), case.clone(), dir.clone());
            tokio::task::spawn_blocking(move || generate::write_inputs(&kernel, &case, &dir))
                .await
                .map_err(|e| DataError::Case(format!("input generation panicked: {e}")))??;
            self.trim().await;
        }
        Ok(CaseInputs {
            key,
            sizes: case.sizes.clone(),
            arrays,
            scalars,
            workspace_bytes,
            _pin: pin,
        })
    }

    /// The reference outputs for these inputs, computed on first use.
    pub async fn reference(
        &self,
        kernel: &Kernel,
        inputs: &CaseInputs,
    ) -> Result<Reference, DataError> {
        let dir = self.root.join("reference").join(&inputs.key);
        let outputs: BTreeMap<String, PathBuf> = inputs
            .arrays
            .iter()
            .filter(|a| a.role.is_output())
            .map(|a| (a.name.clone(), dir.join(format!("{}.bin", a.name))))
            .collect();
        let lock = self.lock(&format!("ref-{}", inputs.key));
        let _held = lock.lock().await;
        if !dir.is_dir() {
            self.run_reference(kernel, inputs, &dir).await?;
            self.trim().await;
        }
        Ok(Reference { outputs })
    }

    async fn run_reference(
        &self,
        kernel: &Kernel,
        inputs: &CaseInputs,
        dir: &Path,
    ) -> Result<(), DataError> {
        let parent = self.root.join("reference");
        create_private_dir(&parent)?;
        let script = self.root.join("refrun.py");
        if std::fs::read_to_string(&script).ok().as_deref() != Some(REFRUN) {
            write_private(&script, REFRUN.as_bytes()).map_err(io(&script))?;
        }
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&parent)
            .map_err(io(&parent))?;
        let spec = json!({
            "module": kernel.reference_path(),
            "function": kernel.ident(),
            "output_dir": tmp.path(),
            "arrays": inputs.arrays.iter().map(|a| json!({
                "name": a.name,
                "dtype": a.dtype.numpy(),
                "shape": a.shape,
                "role": match a.role { Role::In => "in", Role::Out => "out", Role::InOut => "inout" },
                "input": a.input,
            })).collect::<Vec<_>>(),
            "scalars": reference_scalars(inputs),
        });
        let mut child = tokio::process::Command::new(&self.python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                DataError::Reference(format!(
                    "cannot start {}: {e} (set HPCAGENT_PYTHON)",
                    self.python
                ))
            })?;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(spec.to_string().as_bytes())
            .await
            .map_err(|e| DataError::Reference(e.to_string()))?;
        drop(stdin);
        let output = tokio::time::timeout(self.reference_timeout, child.wait_with_output())
            .await
            .map_err(|_| {
                DataError::Reference(format!("no answer within {:?}", self.reference_timeout))
            })?
            .map_err(|e| DataError::Reference(e.to_string()))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(DataError::Reference(format!(
                "{} exited {}: {}",
                kernel.reference_path().display(),
                output.status,
                tail(&stderr, 2000)
            )));
        }
        publish(tmp.keep(), dir)
    }
}

/// A temporary directory in `parent` (made private if absent) where inputs
/// are written before [`publish`].
fn private_tempdir(parent: &Path) -> Result<tempfile::TempDir, DataError> {
    create_private_dir(parent)?;
    tempfile::Builder::new()
        .prefix(".tmp-")
        .tempdir_in(parent)
        .map_err(io(parent))
}

/// Renames a finished directory into place; another judge process's
/// identical one already there (it published the same entry first) wins.
fn publish(done: PathBuf, to: &Path) -> Result<(), DataError> {
    if let Err(e) = std::fs::rename(&done, to) {
        let _ = std::fs::remove_dir_all(&done);
        if !to.is_dir() {
            return Err(io(to)(e));
        }
    }
    Ok(())
}

/// Scalars and sizes by name, as the reference function takes them.
fn reference_scalars(inputs: &CaseInputs) -> serde_json::Map<String, serde_json::Value> {
    let mut map = serde_json::Map::new();
    for (name, value, _) in &inputs.scalars {
        let v = match value {
            ScalarValue::Int(i) => json!(i),
            ScalarValue::Real(f) => json!(f),
        };
        map.insert(name.clone(), v);
    }
    for (symbol, value) in &inputs.sizes {
        map.insert(symbol.clone(), json!(value));
    }
    map
}

/// The cache key of a case: changes when the kernel's files or the case change.
pub fn case_key(kernel: &Kernel, case: &Case) -> String {
    let sizes = serde_json::to_string(&case.sizes).expect("sizes serialize");
    let key = fingerprint(&[
        kernel.fingerprint.as_bytes(),
        case.precision.as_str().as_bytes(),
        sizes.as_bytes(),
        &case.seed.to_le_bytes(),
        GENERATOR_VERSION.as_bytes(),
        REFRUN.as_bytes(),
    ]);
    format!("{}-{}", kernel.ident(), &key[..24])
}

/// A directory only this user can enter (reference outputs live there).
pub fn create_private_dir(dir: &Path) -> Result<(), DataError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))
}

/// Writes one of the judge's own files whole, readable by the judge alone.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    hpcagent_common::files::write_atomic(path, bytes, 0o600)
}

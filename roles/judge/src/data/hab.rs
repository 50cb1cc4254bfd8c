//! Inputs of HPCAgent-Bench tasks, made in the judge's Python by
//! `hab_inputs.py` from the manifest's `init` block ([`InputPlan`]), as
//! HPCAgent-Bench makes them: for one seed, the same arrays to the bit; and
//! its NumPy reference's outputs for them, called as HPCAgent-Bench calls it.
//!
//! For a grade, a case is made once per judge cache ([`DataCache::hab_cases`],
//! the cases a grade asks for made in one request to the judge's Python
//! worker, [`super::worker`]): the arguments in
//! ABI order, each array's bytes as the submission takes them (beside the
//! kernel's own cases, in the judge's private inputs), and the reference's
//! outputs and, for an input set a grade times against NumPy, the time of
//! its call (in the private reference directory).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde::Deserialize;

use super::worker::Gate;
use super::{
    ArrayData, CaseInputs, DataCache, DataError, Reference, bound, create_private_dir, io,
    private_tempdir, publish,
};
use hpcagent_corpus::hab::{InputPlan, Kernel};
use hpcagent_corpus::{ScalarValue, fingerprint};

pub(super) const SCRIPT: &str = include_str!("hab_inputs.py");

/// One input as written: `<dir>/<name>.npy`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Made {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// Why an HPCAgent-Bench case cannot be made here.
#[derive(Debug, thiserror::Error)]
pub enum HabDataError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("cannot run {python}: {error}")]
    Python {
        python: String,
        error: std::io::Error,
    },
    #[error("{python} could not check its modules: {stderr}")]
    ModuleCheck { python: String, stderr: String },
    #[error("{python}'s module check: {error}")]
    ModuleAnswer {
        python: String,
        error: serde_json::Error,
    },
    #[error("{key} needs Python modules the judge's {python} cannot import: {names}")]
    MissingModules {
        key: String,
        python: String,
        names: String,
    },
    #[error("cannot read this node's memory: {0}")]
    Memory(String),
    #[error(
        "{key} at {preset} needs {need_gib:.1} GiB for its inputs and outputs; this node has \
         {have_gib:.1} GiB available: use a smaller preset"
    )]
    TooBig {
        key: String,
        preset: String,
        need_gib: f64,
        have_gib: f64,
    },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {error}")]
    Listing {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error(transparent)]
    Temp(std::io::Error),
    /// The input script failed: its status, and the last lines of its stderr.
    #[error("making the inputs failed ({status}):\n{tail}")]
    Failed {
        status: std::process::ExitStatus,
        tail: String,
    },
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> HabDataError + '_ {
    move |error| HabDataError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Those of `modules` that `python` cannot import (with the checkout on
/// its path): a task that needs one is refused, by name, with them.
pub fn missing_modules(
    python: &str,
    checkout: &Path,
    modules: &BTreeSet<String>,
) -> Result<BTreeSet<String>, HabDataError> {
    if modules.is_empty() {
        return Ok(BTreeSet::new());
    }
    const PROBE: &str = "import importlib, json, sys\n\
        sys.path[:0] = [sys.argv[1]]\n\
        missing = []\n\
        for name in json.loads(sys.argv[2]):\n\
        \x20   try:\n\
        \x20       importlib.import_module(name)\n\
        \x20   except Exception:\n\
        \x20       missing.append(name)\n\
        print(json.dumps(missing))\n";
    let list = serde_json::to_string(modules)?;
    let ran = Command::new(python)
        .args(["-c", PROBE])
        .arg(checkout)
        .arg(list)
        .output()
        .map_err(|error| HabDataError::Python {
            python: python.to_string(),
            error,
        })?;
    if !ran.status.success() {
        return Err(HabDataError::ModuleCheck {
            python: python.to_string(),
            stderr: String::from_utf8_lossy(&ran.stderr).trim().to_string(),
        });
    }
    serde_json::from_slice(&ran.stdout).map_err(|error| HabDataError::ModuleAnswer {
        python: python.to_string(),
        error,
    })
}

/// Refuses a preset whose inputs and outputs do not fit this node's
/// available memory (HPCAgent-Bench's larger presets reach 16 GiB), saying
/// how much they need.
pub fn check_fits(kernel: &Kernel, preset: &str) -> Result<(), HabDataError> {
    // Where an initializer decides a shape (a sparse matrix's nonzeros),
    // the need is known only once it has run.
    let Ok(need) = kernel.bytes(preset) else {
        return Ok(());
    };
    let mut system = sysinfo::System::new().map_err(|e| HabDataError::Memory(e.to_string()))?;
    system.refresh_memory();
    let have = system.available_memory();
    if need > have {
        const GIB: f64 = (1u64 << 30) as f64;
        return Err(HabDataError::TooBig {
            key: kernel.key.clone(),
            preset: preset.to_string(),
            need_gib: need as f64 / GIB,
            have_gib: have as f64 / GIB,
        });
    }
    Ok(())
}

/// What [`make_inputs`] wrote: the inputs, and the reference's outputs
/// for them (under `expected/`) when asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct MadeCase {
    pub inputs: Vec<Made>,
    pub expected: Option<Vec<Made>>,
}

/// Makes the inputs `plan` describes in `out` (created if absent) with
/// `python`, which must have NumPy; with `reference`, runs the NumPy
/// reference on them too.
pub fn make_inputs(
    python: &str,
    plan: &InputPlan,
    out: &Path,
    reference: bool,
) -> Result<MadeCase, HabDataError> {
    let flags: &[&str] = if reference { &["--reference"] } else { &[] };
    run_script(python, plan, out, flags)?;
    let listing = |name: &str| -> Result<Vec<Made>, HabDataError> {
        let listed = out.join(name);
        let text = std::fs::read_to_string(&listed).map_err(io_at(&listed))?;
        serde_json::from_str(&text).map_err(|error| HabDataError::Listing {
            path: listed.clone(),
            error,
        })
    };
    Ok(MadeCase {
        inputs: listing("inputs.json")?,
        expected: reference.then(|| listing("expected.json")).transpose()?,
    })
}

/// Runs `hab_inputs.py` on `plan` (one plan, or a list of them) into
/// `out` (created if absent).
fn run_script(
    python: &str,
    plan: &impl serde::Serialize,
    out: &Path,
    flags: &[&str],
) -> Result<(), HabDataError> {
    std::fs::create_dir_all(out).map_err(io_at(out))?;
    let work = tempfile::tempdir().map_err(HabDataError::Temp)?;
    let (script, plan_file) = (
        work.path().join("hab_inputs.py"),
        work.path().join("plan.json"),
    );
    std::fs::write(&script, SCRIPT).map_err(io_at(&script))?;
    let text = serde_json::to_string(plan)?;
    std::fs::write(&plan_file, text).map_err(io_at(&plan_file))?;
    let ran = Command::new(python)
        .arg(&script)
        .arg(&plan_file)
        .arg(out)
        .args(flags)
        .output()
        .map_err(|error| HabDataError::Python {
            python: python.to_string(),
            error,
        })?;
    if !ran.status.success() {
        let stderr = String::from_utf8_lossy(&ran.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(HabDataError::Failed {
            status: ran.status,
            tail: tail.join("\n"),
        });
    }
    Ok(())
}

/// What a grade needs of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Its inputs alone: it is timed in pairs against a baseline, which
    /// checks the submission's answers.
    Inputs,
    /// Its inputs and the reference's outputs for them (and the time of
    /// the call that made them, cold): it is checked.
    Reference,
    /// Those, the reference warmed up by a call before the first of the
    /// cases made together: the submission is timed on it against NumPy.
    TimedReference,
}

impl Need {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Need::Inputs => &["--case"],
            Need::Reference => &["--case", "--reference"],
            Need::TimedReference => &["--case", "--reference", "--warm"],
        }
    }
}

/// A case of an HPCAgent-Bench task, ready for a grade.
#[derive(Debug, Clone)]
pub struct HabCase {
    pub inputs: CaseInputs,
    /// The reference's outputs (none for a case made for its inputs alone).
    pub reference: Reference,
    /// The NumPy reference's call time on these inputs (none for a case
    /// made for its inputs alone).
    pub reference_ns: Vec<u64>,
    /// How long of each of those calls its threads waited for a CPU (the
    /// node's other work; 0 where the kernel keeps no account of it), one
    /// for each of `reference_ns`.
    pub reference_waited_ns: Vec<u64>,
    /// The NumPy and BLAS those calls ran on, as the worker names them
    /// ("NumPy 2.4.6; OpenBLAS 0.3.31 … SkylakeX …"); empty where none
    /// was timed.
    pub reference_runtime: String,
    /// The integer symbols it was made at: its plan's, or a fallback's.
    pub sizes: hpcagent_corpus::Sizes,
    /// Its directories in the cache: the arrays, and the reference's side.
    dirs: [PathBuf; 2],
}

impl HabCase {
    /// What the case takes in the cache (a walk of its directories: asked
    /// by warming, not by grades).
    pub fn bytes(&self) -> u64 {
        self.dirs.iter().map(|dir| bound::bytes_under(dir)).sum()
    }
}

/// One argument of `case.json`.
#[derive(Debug, Deserialize)]
struct CaseArg {
    name: String,
    pointer: bool,
    #[serde(default)]
    shape: Vec<i64>,
    #[serde(default)]
    value: serde_json::Value,
}

#[derive(Debug, Default, Deserialize)]
struct Timed {
    ns: Vec<u64>,
    #[serde(default)]
    waited_ns: Vec<u64>,
    #[serde(default)]
    runtime: String,
}

impl DataCache {
    /// Those of `modules` this cache's Python cannot import, checked once
    /// per judge (by its worker).
    pub async fn missing_modules(
        &self,
        checkout: &Path,
        modules: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, HabDataError> {
        if modules.is_empty() {
            return Ok(BTreeSet::new());
        }
        if let Some(known) = self.missing.lock().expect("module table").get(modules) {
            return Ok(known.clone());
        }
        let check = |stderr: String| HabDataError::ModuleCheck {
            python: self.python.clone(),
            stderr,
        };
        let worker = self.worker().map_err(|e| check(e.to_string()))?;
        let request = serde_json::json!({"op": "modules", "checkout": checkout, "names": modules});
        let answer = worker
            .call(request, self.reference_timeout)
            .await
            .map_err(|e| check(e.to_string()))?;
        let missing: BTreeSet<String> =
            serde_json::from_value(answer["missing"].clone()).map_err(|error| {
                HabDataError::ModuleAnswer {
                    python: self.python.clone(),
                    error,
                }
            })?;
        self.missing
            .lock()
            .expect("module table")
            .insert(modules.clone(), missing.clone());
        Ok(missing)
    }

    /// The cases `plans` describe for `kernel` (the task as the judge
    /// grades it), in order, each made on first use with what `need` says;
    /// those missing are made in one request to the judge's Python worker
    /// ([`super::worker`]: a Python start and NumPy's import cost more
    /// than a small case).
    pub async fn hab_cases(
        &self,
        kernel: &hpcagent_corpus::Kernel,
        plans: &[InputPlan],
        need: Need,
    ) -> Result<Vec<HabCase>, DataError> {
        self.hab_cases_gated(kernel, plans, need, None).await
    }

    /// As [`Self::hab_cases`], with the reference's calls of the cases it
    /// makes waiting for `gate`'s word where given, their inputs drawn
    /// before it ([`super::worker::Worker::call_gated`]); a word of false
    /// is [`DataError::Cancelled`].
    pub async fn hab_cases_gated(
        &self,
        kernel: &hpcagent_corpus::Kernel,
        plans: &[InputPlan],
        need: Need,
        gate: Option<Gate>,
    ) -> Result<Vec<HabCase>, DataError> {
        let mut keys = Vec::new();
        for plan in plans {
            let plan_text =
                serde_json::to_string(plan).map_err(|e| DataError::Case(e.to_string()))?;
            let hash = fingerprint(&[
                kernel.fingerprint.as_bytes(),
                plan_text.as_bytes(),
                SCRIPT.as_bytes(),
                need.flags().join(" ").as_bytes(),
            ]);
            keys.push(format!(
                "{}-{}",
                kernel.symbol(hpcagent_corpus::Precision::Fp64),
                &hash[..24]
            ));
        }
        let dirs = |key: &str| {
            (
                self.root.join("inputs").join(key),
                self.root.join("reference").join(key),
            )
        };
        let pins: Vec<_> = keys.iter().map(|key| self.pin(key)).collect();
        // Held in one order (sorted), so that two grades asking for cases
        // in common never wait on each other's.
        let mut order: Vec<&String> = keys.iter().collect();
        order.sort();
        order.dedup();
        let locks: Vec<_> = order.iter().map(|key| self.lock(key)).collect();
        let mut held = Vec::new();
        for lock in &locks {
            held.push(lock.lock().await);
        }
        let missing: Vec<(InputPlan, PathBuf, PathBuf)> = plans
            .iter()
            .zip(&keys)
            .filter_map(|(plan, key)| {
                let (inputs, reference) = dirs(key);
                (!(inputs.is_dir() && reference.is_dir()))
                    .then(|| (plan.clone(), inputs, reference))
            })
            .collect();
        if !missing.is_empty() {
            self.make_cases(&missing, need, gate).await?;
            self.trim().await;
        }
        drop(held);
        keys.into_iter()
            .zip(pins)
            .map(|(key, pin)| {
                let (inputs, reference) = dirs(&key);
                read_case(kernel, key, pin, &inputs, &reference)
            })
            .collect()
    }

    /// Removes a case no later grade will ask for (a grade's own timed
    /// input sets) from the cache.
    pub fn discard(&self, case: &HabCase) {
        for dir in &case.dirs {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                tracing::warn!("removing the used case {}: {e}", dir.display());
            }
        }
    }
}

impl DataCache {
    /// Makes the cases of `missing` (plan, its inputs' and its reference's
    /// directories) in one private directory, by the worker, then
    /// publishes each one's arrays under its inputs directory (read by the
    /// run's supervisor) and the rest under its reference directory.
    async fn make_cases(
        &self,
        missing: &[(InputPlan, PathBuf, PathBuf)],
        need: Need,
        gate: Option<Gate>,
    ) -> Result<(), DataError> {
        let private = self.root.join("reference");
        create_private_dir(&private)?;
        let made = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&private)
            .map_err(io(&private))?;
        let plans: Vec<&InputPlan> = missing.iter().map(|(plan, ..)| plan).collect();
        let request = serde_json::json!({
            "op": "cases", "plans": plans, "out": made.path(), "flags": need.flags(),
        });
        let worker = self.worker()?;
        let limit = self.reference_timeout;
        let answer = match gate {
            Some(gate) => worker.call_gated(request, gate, limit).await,
            None => worker.call(request, limit).await,
        }
        .map_err(|e| DataError::Reference(format!("making the inputs failed:\n{e}")))?;
        if answer["cancelled"].as_bool() == Some(true) {
            return Err(DataError::Cancelled);
        }
        let (root, missing, dir) = (
            self.root.clone(),
            missing.to_vec(),
            made.path().to_path_buf(),
        );
        // Renames, off the runtime; the temporary directory goes after.
        let published = tokio::task::spawn_blocking(move || publish_cases(&root, &missing, &dir))
            .await
            .map_err(|e| DataError::Case(format!("publishing the cases panicked: {e}")))?;
        drop(made);
        published
    }
}

/// Publishes the cases made under `made` (one directory each, in order).
fn publish_cases(
    root: &Path,
    missing: &[(InputPlan, PathBuf, PathBuf)],
    made: &Path,
) -> Result<(), DataError> {
    for (index, (_, inputs, reference)) in missing.iter().enumerate() {
        let case = made.join(index.to_string());
        let arrays = private_tempdir(&root.join("inputs"))?;
        for arg in case_args(&case)?.iter().filter(|a| a.pointer) {
            let file = format!("{}.bin", arg.name);
            let to = arrays.path().join(&file);
            std::fs::rename(case.join(&file), &to).map_err(io(&to))?;
        }
        publish(arrays.keep(), inputs)?;
        publish(case, reference)?;
    }
    Ok(())
}

fn case_args(dir: &Path) -> Result<Vec<CaseArg>, DataError> {
    let file = dir.join("case.json");
    let text = std::fs::read_to_string(&file).map_err(io(&file))?;
    serde_json::from_str(&text).map_err(|e| DataError::Case(format!("{}: {e}", file.display())))
}

/// The case as the grade passes it, from its published directories.
fn read_case(
    kernel: &hpcagent_corpus::Kernel,
    key: String,
    pin: Arc<bound::Pin>,
    inputs: &Path,
    reference: &Path,
) -> Result<HabCase, DataError> {
    let mut arrays = Vec::new();
    let mut scalars = Vec::new();
    for arg in case_args(reference)? {
        if arg.pointer {
            let spec = kernel
                .arrays
                .iter()
                .find(|a| a.name == arg.name)
                .ok_or_else(|| {
                    DataError::Case(format!("{} is not an array of the task", arg.name))
                })?;
            let elements = arg.shape.iter().product::<i64>().max(0) as usize;
            arrays.push(ArrayData {
                name: arg.name.clone(),
                dtype: spec.elem.resolve(hpcagent_corpus::Precision::Fp64),
                role: spec.role,
                shape: arg.shape,
                elements,
                input: Some(inputs.join(format!("{}.bin", arg.name))),
            });
        } else {
            let spec = kernel.scalars.iter().find(|s| s.name == arg.name);
            let dtype = spec
                .map(|s| s.elem.resolve(hpcagent_corpus::Precision::Fp64))
                .ok_or_else(|| {
                    DataError::Case(format!("{} is not a scalar of the task", arg.name))
                })?;
            let value = match &arg.value {
                serde_json::Value::Bool(b) => ScalarValue::Int(i64::from(*b)),
                v => match (v.as_i64(), v.as_f64()) {
                    (Some(i), _) => ScalarValue::Int(i),
                    (None, Some(f)) => ScalarValue::Real(f),
                    _ => return Err(DataError::Case(format!("{} has no value", arg.name))),
                },
            };
            scalars.push((arg.name, value, dtype));
        }
    }
    let outputs: BTreeMap<String, PathBuf> = arrays
        .iter()
        .filter(|a| a.role.is_output())
        .map(|a| {
            (
                a.name.clone(),
                reference.join("expected").join(format!("{}.bin", a.name)),
            )
        })
        .collect();
    let made_at = reference.join("symbols.json");
    let symbols: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&made_at).map_err(io(&made_at))?)
            .map_err(|e| DataError::Case(format!("{}: {e}", made_at.display())))?;
    let sizes = symbols
        .iter()
        .filter_map(|(name, value)| Some((name.clone(), value.as_i64()?)))
        .collect();
    let timed = reference.join("timing.json");
    let mut timed: Timed = std::fs::read_to_string(&timed)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    // A wait not measured is none: every call keeps its time.
    timed.waited_ns.resize(timed.ns.len(), 0);
    Ok(HabCase {
        inputs: CaseInputs {
            key,
            sizes: hpcagent_corpus::Sizes::new(),
            arrays,
            scalars,
            workspace_bytes: 0,
            _pin: pin,
        },
        reference: Reference { outputs },
        reference_ns: timed.ns,
        reference_waited_ns: timed.waited_ns,
        reference_runtime: timed.runtime,
        sizes,
        dirs: [inputs.to_path_buf(), reference.to_path_buf()],
    })
}

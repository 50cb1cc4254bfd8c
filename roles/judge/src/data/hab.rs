//! Inputs of HPCAgent-Bench tasks, made in the judge's Python by
//! `hab_inputs.py` from the manifest's `init` block ([`InputPlan`]), as
//! HPCAgent-Bench makes them: for one seed, the same arrays to the bit; and
//! its NumPy reference's outputs for them, called as HPCAgent-Bench calls it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;

use crate::corpus::hab::{InputPlan, Kernel};

const SCRIPT: &str = include_str!("hab_inputs.py");

/// One input as written: `<dir>/<name>.npy`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Made {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// Those of `modules` that `python` cannot import (with the checkout on
/// its path): a task that needs one is refused, by name, with them.
pub fn missing_modules(
    python: &str,
    checkout: &Path,
    modules: &BTreeSet<String>,
) -> Result<BTreeSet<String>, String> {
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
    let list = serde_json::to_string(modules).map_err(|e| e.to_string())?;
    let ran = Command::new(python)
        .args(["-c", PROBE])
        .arg(checkout)
        .arg(list)
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !ran.status.success() {
        return Err(format!(
            "{python} could not check its modules: {}",
            String::from_utf8_lossy(&ran.stderr).trim()
        ));
    }
    serde_json::from_slice(&ran.stdout).map_err(|e| format!("{python}'s module check: {e}"))
}

/// Refuses a preset whose inputs and outputs do not fit this node's
/// available memory (HPCAgent-Bench's larger presets reach 16 GiB), saying
/// how much they need.
pub fn check_fits(kernel: &Kernel, preset: &str) -> Result<(), String> {
    // Where an initializer decides a shape (a sparse matrix's nonzeros),
    // the need is known only once it has run.
    let Ok(need) = kernel.bytes(preset) else {
        return Ok(());
    };
    let mut system =
        sysinfo::System::new().map_err(|e| format!("cannot read this node's memory: {e}"))?;
    system.refresh_memory();
    let have = system.available_memory();
    if need > have {
        const GIB: f64 = (1u64 << 30) as f64;
        return Err(format!(
            "{} at {preset} needs {:.1} GiB for its inputs and outputs; this node has {:.1} GiB \
             available: use a smaller preset",
            kernel.key,
            need as f64 / GIB,
            have as f64 / GIB
        ));
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
) -> Result<MadeCase, String> {
    let io = |what: &Path| {
        let shown = what.display().to_string();
        move |e: std::io::Error| format!("{shown}: {e}")
    };
    std::fs::create_dir_all(out).map_err(io(out))?;
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (script, plan_file) = (
        work.path().join("hab_inputs.py"),
        work.path().join("plan.json"),
    );
    std::fs::write(&script, SCRIPT).map_err(io(&script))?;
    let text = serde_json::to_string(plan).map_err(|e| e.to_string())?;
    std::fs::write(&plan_file, text).map_err(io(&plan_file))?;
    let ran = Command::new(python)
        .arg(&script)
        .arg(&plan_file)
        .arg(out)
        .args(reference.then_some("--reference"))
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !ran.status.success() {
        let stderr = String::from_utf8_lossy(&ran.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "making the inputs failed ({}):\n{}",
            ran.status,
            tail.join("\n")
        ));
    }
    let listing = |name: &str| -> Result<Vec<Made>, String> {
        let listed = out.join(name);
        let text = std::fs::read_to_string(&listed).map_err(io(&listed))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", listed.display()))
    };
    Ok(MadeCase {
        inputs: listing("inputs.json")?,
        expected: reference.then(|| listing("expected.json")).transpose()?,
    })
}

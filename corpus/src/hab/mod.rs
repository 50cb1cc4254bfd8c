//! HPCAgent-Bench manifests, read in place: a checkout's
//! `hpcagent_bench/benchmarks/` directory is a corpus as it stands.
//!
//! Every `*.yaml` below the root whose stem does not start with `_` is a
//! manifest; its task id (its *path key*) is its path relative to the root
//! without `.yaml`, and the bare stem names it too when unambiguous. The
//! NumPy reference is `<module>_numpy.py` beside it. This module reads
//! manifests and derives what a submission must export (HPCAgent-Bench's "c-abi-v2":
//! the symbol, the arguments in its order, their C types and const-ness),
//! and what a case's inputs are made from: its sizes (a held-out case's
//! drawn within the manifest's constraints, [`sizes`]) and the plan the
//! judge's Python follows; generating inputs, calling the reference and
//! grading belong to the judge.

mod abi;
mod arrays;
mod graded;
mod inputs;
pub mod manifest;
mod pydef;
mod pyexpr;
mod sizes;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use abi::{Abi, Arg, NoCType, c_type, derive_abi};
pub use arrays::PlannedArray;
pub use graded::{FP64_TOLERANCE, graded_corpus};
pub use inputs::{
    InputPlan, ROTATIONS, ReferenceCall, Rotation, ShapeError, SparseArray, Symbols, Variation,
};
pub use manifest::Manifest;
pub use pydef::ReferenceError;

/// The presets a fixed-size reader grades at, in order.
pub const PRESETS: [&str; 4] = ["S", "M", "L", "XL"];

/// Why a manifest cannot be read, or a task of it cannot be graded.
#[derive(Debug, thiserror::Error)]
pub enum HabError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Yaml(#[from] serde_norway::Error),
    #[error("no manifest is {0:?}")]
    NoManifest(String),
    #[error("{id:?} is ambiguous: {keys}")]
    Ambiguous { id: String, keys: String },
    #[error("no reference {module}_numpy.py in {dir}")]
    NoReference { module: String, dir: String },
    #[error("{path}: {source}")]
    Reference {
        path: String,
        source: pydef::ReferenceError,
    },
    #[error("{0:?} is not a usable symbol")]
    Symbol(String),
    #[error("{arg}: {source}")]
    ArgType { arg: String, source: abi::NoCType },
    #[error("no preset {0}")]
    NoPreset(String),
    #[error("{key} has no preset {preset}")]
    KernelPreset { key: String, preset: String },
    #[error("{0} has no declared shape")]
    NoShape(String),
    #[error("{arg}: {source}")]
    Shape {
        arg: String,
        source: inputs::ShapeError,
    },
    #[error("an init.arrays name is not a string")]
    ArrayName,
    #[error("init.arrays.{name}: {source}")]
    ArraySpec {
        name: String,
        source: serde_norway::Error,
    },
    #[error("its outputs {0} are what the reference returns, not arguments a kernel writes")]
    ReturnedOutputs(String),
    #[error("argument {arg} is {dtype}, a type the judge does not pass yet")]
    UnpassedType { arg: String, dtype: String },
    #[error("argument {0} is a complex128 scalar, which the judge does not pass")]
    ComplexScalar(String),
    #[error("{0}: a case's plan needs the symbols to make it at")]
    NoDraw(String),
}

/// One loadable manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Kernel {
    /// The path key: `scientific_computing/dense_linear_algebra/gemm/gemm`.
    pub key: String,
    pub stem: String,
    pub name: String,
    pub track: String,
    pub level: u8,
    pub kind: String,
    pub presets: Vec<String>,
    /// The manifest, the kernel directory and the NumPy reference in it.
    #[serde(skip)]
    pub file: PathBuf,
    #[serde(skip)]
    pub dir: PathBuf,
    #[serde(skip)]
    pub reference: PathBuf,
    /// The reference's entry function, and what it is called with, in order.
    pub entry: String,
    pub inputs: Vec<String>,
    pub abi: Abi,
    #[serde(skip)]
    pub manifest: Manifest,
}

/// A manifest that cannot be loaded, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub key: String,
    pub reason: String,
}

/// Every manifest below `root`: the loadable ones, and the others with why.
pub fn load(root: &Path) -> Result<(Vec<Kernel>, Vec<Refusal>), std::io::Error> {
    let mut files = Vec::new();
    find_manifests(root, &mut files)?;
    files.sort();
    let mut kernels = Vec::new();
    let mut refused = Vec::new();
    for file in files {
        let key = path_key(root, &file);
        match read(root, &file, &key) {
            Ok(kernel) => kernels.push(kernel),
            Err(why) => refused.push(Refusal {
                key,
                reason: why.to_string(),
            }),
        }
    }
    Ok((kernels, refused))
}

/// Whether `root` is an HPCAgent-Bench checkout's corpus: manifests below
/// it, and no `kernel.toml` kernels (a corpus of those is read as one).
pub fn is_checkout(root: &Path) -> bool {
    // The walk for manifests first: it is cheap, and a plain corpus (none)
    // is then not loaded twice at a campaign's start.
    let mut files = Vec::new();
    if find_manifests(root, &mut files).is_err() || files.is_empty() {
        return false;
    }
    !crate::Corpus::load(root).is_ok_and(|c| !c.kernels.is_empty())
}

/// A kernel by path key, or by stem when exactly one has it.
pub fn find<'a>(kernels: &'a [Kernel], id: &str) -> Result<&'a Kernel, HabError> {
    let id = id.trim().trim_matches('/').trim_end_matches(".yaml");
    if let Some(k) = kernels.iter().find(|k| k.key == id) {
        return Ok(k);
    }
    let named: Vec<&Kernel> = kernels.iter().filter(|k| k.stem == id).collect();
    match named.as_slice() {
        [one] => Ok(one),
        [] => Err(HabError::NoManifest(id.to_string())),
        many => Err(HabError::Ambiguous {
            id: id.to_string(),
            keys: many
                .iter()
                .map(|k| k.key.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn find_manifests(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_dir() {
            if !name.starts_with('.') && name != "__pycache__" {
                find_manifests(&path, out)?;
            }
        } else if let Some(stem) = name.strip_suffix(".yaml")
            && !stem.starts_with('_')
        {
            out.push(path);
        }
    }
    Ok(())
}

fn path_key(root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file).with_extension("");
    relative.to_string_lossy().replace('\\', "/")
}

fn read(root: &Path, file: &Path, key: &str) -> Result<Kernel, HabError> {
    let text = std::fs::read_to_string(file)?;
    let manifest = Manifest::parse(&text)?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = match &manifest.relative_path {
        Some(relative) => root.join(relative),
        None => file.parent().unwrap_or(root).to_path_buf(),
    };
    let module = manifest.module_name.clone().unwrap_or_else(|| stem.clone());
    let reference = [format!("{module}_numpy.py"), format!("{module}.py")]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
        .ok_or_else(|| HabError::NoReference {
            module: module.clone(),
            dir: dir.display().to_string(),
        })?;
    let source = std::fs::read_to_string(&reference)?;
    let in_reference = |source| HabError::Reference {
        path: reference.display().to_string(),
        source,
    };
    let defs = pydef::defs(&source).map_err(in_reference)?;
    let entry = entry_def(&manifest, &module, &defs).map_err(in_reference)?;
    let abi = derive_abi(&manifest, &stem, &entry.positional)?;
    let taxonomy = manifest.taxonomy.clone().unwrap_or_default();
    let presets = PRESETS
        .iter()
        .filter(|p| manifest.parameters.contains_key(**p))
        .map(|p| p.to_string())
        .collect();
    Ok(Kernel {
        key: key.to_string(),
        name: manifest.name.clone().unwrap_or_else(|| stem.clone()),
        stem,
        track: taxonomy
            .track
            .unwrap_or_else(|| "loop_level_reasoning".into()),
        level: manifest.level.unwrap_or(1),
        kind: manifest
            .kind
            .clone()
            .unwrap_or_else(|| "microkernel".into()),
        presets,
        file: file.to_path_buf(),
        dir,
        reference,
        entry: entry.name.clone(),
        inputs: manifest
            .input_args
            .clone()
            .unwrap_or_else(|| entry.positional.clone()),
        abi,
        manifest,
    })
}

/// The reference's entry: `func_name`, else the only top-level def, else
/// the one named like the module.
fn entry_def<'a>(
    manifest: &Manifest,
    module: &str,
    defs: &'a [pydef::Def],
) -> Result<&'a pydef::Def, pydef::ReferenceError> {
    use pydef::ReferenceError;
    let by_name = |name: &str| defs.iter().find(|d| d.name == name);
    match (&manifest.func_name, defs) {
        (Some(name), _) => by_name(name).ok_or_else(|| ReferenceError::NoDef(name.clone())),
        (None, [only]) => Ok(only),
        (None, _) => by_name(module).ok_or_else(|| ReferenceError::NoEntry(module.to_string())),
    }
}

/// Modules a reference or initializer may import that a judge's Python
/// has without asking: NumPy, the standard library's usual ones, and the
/// run-wide float types the judge itself provides in place of
/// HPCAgent-Bench's package.
const PROVIDED: &[&str] = &[
    "numpy",
    "math",
    "cmath",
    "typing",
    "functools",
    "itertools",
    "collections",
    "dataclasses",
    "copy",
    "os",
    "sys",
    "pathlib",
    "json",
    "__future__",
    "hpcagent_bench.frameworks.framework",
];

/// The modules `source` imports at its top level (`import a.b`, `from a.b
/// import c`), as dotted paths.
fn imports(source: &str) -> BTreeSet<String> {
    source
        .lines()
        .filter_map(|line| {
            let rest = line
                .strip_prefix("import ")
                .or_else(|| line.strip_prefix("from "))?;
            let module = rest.split([' ', ',']).next()?.trim();
            (!module.is_empty() && !module.starts_with('.')).then(|| module.to_string())
        })
        .collect()
}

/// The directory `import hpcagent_bench` resolves from: `<root>/..` is the
/// package, its parent the checkout.
pub fn checkout(root: &Path) -> PathBuf {
    root.parent()
        .and_then(Path::parent)
        .unwrap_or(root)
        .to_path_buf()
}

/// The agent's wall-clock budget per level, as HPCAgent-Bench sets it.
pub fn level_budget_seconds(level: u8) -> u32 {
    match level {
        0 | 1 => 180,
        2 => 300,
        _ => 600,
    }
}

impl Kernel {
    /// The modules its reference (and its initializer's module) import
    /// beyond what a judge's Python is given: scipy, HPCAgent-Bench's own
    /// helpers. A judge whose Python cannot import them cannot grade it.
    pub fn needs(&self) -> BTreeSet<String> {
        let mut files = vec![self.reference.clone()];
        if self.manifest.init.func_name.is_some() {
            let module = self.manifest.module_name.as_deref().unwrap_or(&self.stem);
            files.push(self.dir.join(format!("{module}.py")));
        }
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|source| imports(&source))
            .filter(|m| {
                let top = m.split('.').next().unwrap_or(m);
                !PROVIDED.contains(&m.as_str()) && !PROVIDED.contains(&top)
            })
            .collect()
    }

    /// The hint files that apply, general first: in the corpus root, each
    /// directory down to the kernel's, then its subtrack's
    /// (`subtracks/<subtrack>`), then its own, each directory's
    /// `hints.j2` and then its `hints_lvl<level>.j2`.
    pub fn hints(&self, root: &Path) -> Vec<PathBuf> {
        let relative = self.dir.strip_prefix(root).unwrap_or(&self.dir);
        let parts: Vec<_> = relative.components().collect();
        let mut dirs: Vec<PathBuf> = (0..parts.len())
            .map(|i| parts[..i].iter().fold(root.to_path_buf(), |d, p| d.join(p)))
            .collect();
        if let Some(subtrack) = self
            .manifest
            .taxonomy
            .as_ref()
            .and_then(|t| t.subtrack.as_ref())
        {
            dirs.push(root.join("subtracks").join(subtrack));
        }
        dirs.push(self.dir.clone());
        let level = format!("hints_lvl{}.j2", self.level);
        dirs.iter()
            .flat_map(|d| [d.join("hints.j2"), d.join(&level)])
            .filter(|f| f.is_file())
            .collect()
    }
}

#[cfg(test)]
mod tests;

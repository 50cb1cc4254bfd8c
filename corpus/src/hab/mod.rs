//! HPCAgent-Bench manifests, read in place: a checkout's
//! `hpcagent_bench/benchmarks/` directory is a corpus as it stands.
//!
//! Every `*.yaml` below the root whose stem does not start with `_` is a
//! manifest; its task id (its *path key*) is its path relative to the root
//! without `.yaml`, and the bare stem names it too when unambiguous. The
//! NumPy reference is `<module>_numpy.py` beside it. This module reads
//! manifests and derives what a submission must export (HPCAgent-Bench's "c-abi-v2":
//! the symbol, the arguments in its order, their C types and const-ness);
//! generating inputs, calling the reference and grading belong to the judge.

mod graded;
pub mod manifest;
mod pydef;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_norway::Value;

pub use graded::FP64_TOLERANCE;
pub use manifest::Manifest;

/// The presets a fixed-size reader grades at, in order.
pub const PRESETS: [&str; 4] = ["S", "M", "L", "XL"];

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

/// What a submission exports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Abi {
    pub symbol: String,
    /// In call order, the workspace pair last.
    pub args: Vec<Arg>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Arg {
    pub name: String,
    /// The NumPy dtype name (`float64`, `int64`, `bool`, `int4` …).
    pub dtype: String,
    pub pointer: bool,
    /// Pointers the kernel must not write (every one but the outputs).
    pub constant: bool,
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
            Err(reason) => refused.push(Refusal { key, reason }),
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
pub fn find<'a>(kernels: &'a [Kernel], id: &str) -> Result<&'a Kernel, String> {
    let id = id.trim().trim_matches('/').trim_end_matches(".yaml");
    if let Some(k) = kernels.iter().find(|k| k.key == id) {
        return Ok(k);
    }
    let named: Vec<&Kernel> = kernels.iter().filter(|k| k.stem == id).collect();
    match named.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no manifest is {id:?}")),
        many => Err(format!(
            "{id:?} is ambiguous: {}",
            many.iter()
                .map(|k| k.key.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
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

fn read(root: &Path, file: &Path, key: &str) -> Result<Kernel, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
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
        .ok_or_else(|| format!("no reference {module}_numpy.py in {}", dir.display()))?;
    let source = std::fs::read_to_string(&reference).map_err(|e| e.to_string())?;
    let defs = pydef::defs(&source).map_err(|e| format!("{}: {e}", reference.display()))?;
    let entry = entry_def(&manifest, &module, &defs)
        .map_err(|e| format!("{}: {e}", reference.display()))?;
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
) -> Result<&'a pydef::Def, String> {
    let by_name = |name: &str| defs.iter().find(|d| d.name == name);
    match (&manifest.func_name, defs) {
        (Some(name), _) => by_name(name).ok_or_else(|| format!("no def {name}")),
        (None, [only]) => Ok(only),
        (None, _) => by_name(module)
            .ok_or_else(|| format!("several defs and none named {module}: set func_name")),
    }
}

/// The ABI as HPCAgent-Bench derives it (c-abi-v2): pointers sorted by name, then
/// scalars and size symbols sorted together, then the workspace pair.
pub fn derive_abi(m: &Manifest, stem: &str, def_params: &[String]) -> Result<Abi, String> {
    let symbol = symbol(m, stem)?;
    let inputs: Vec<String> = m.input_args.clone().unwrap_or_else(|| def_params.to_vec());
    let declared = declared_arrays(m)?;
    let arrays = by_name(&declared);
    let array_args: Vec<String> = m.array_args.clone().unwrap_or_else(|| {
        inputs
            .iter()
            .filter(|i| arrays.contains_key(i.as_str()))
            .cloned()
            .collect()
    });
    let outputs: BTreeSet<&str> = m.output_args.iter().map(String::as_str).collect();
    let mut pointers = pointers(m, &array_args, &arrays, &outputs)?;
    let (symbols, shape_names) = (size_symbols(m), shape_names(m, &arrays));
    // Without a declared shape there is no evidence a symbol goes unused:
    // every one is kept.
    let kept: BTreeSet<String> = symbols
        .into_iter()
        .filter(|s| shape_names.is_empty() || inputs.contains(s) || shape_names.contains(s))
        .collect();
    let pointer_names: BTreeSet<String> = pointers.iter().map(|p| p.name.clone()).collect();
    let mut scalars: Vec<Arg> = kept
        .iter()
        .map(|s| scalar(m, s, true))
        .collect::<Result<_, _>>()?;
    for input in &inputs {
        let plain = !array_args.contains(input)
            && !kept.contains(input)
            && !pointer_names.contains(input)
            && !matches!(input.as_str(), "np" | "numpy");
        if plain && !scalars.iter().any(|s| &s.name == input) {
            scalars.push(scalar(m, input, false)?);
        }
    }
    // Python's order: bytewise (uppercase < `_` < lowercase).
    pointers.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    scalars.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut args = pointers;
    args.extend(scalars);
    args.push(Arg {
        name: "workspace".into(),
        dtype: "uint8".into(),
        pointer: true,
        constant: false,
    });
    args.push(Arg {
        name: "workspace_size".into(),
        dtype: "int64".into(),
        pointer: false,
        constant: true,
    });
    for arg in &args {
        c_type(&arg.dtype).map_err(|e| format!("{}: {e}", arg.name))?;
    }
    Ok(Abi { symbol, args })
}

/// `lower(short_name)`, the first configuration's key, `_fp64`.
fn symbol(m: &Manifest, stem: &str) -> Result<String, String> {
    let short = m.short_name.as_deref().unwrap_or(stem).to_lowercase();
    let suffix = m
        .configurations
        .as_ref()
        .and_then(|c| c.keys().next())
        .and_then(Value::as_str)
        .map(|k| format!("_{k}"))
        .unwrap_or_default();
    let symbol = format!("{short}{suffix}_fp64");
    let starts_with_letter = symbol
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter || symbol.len() > 63 {
        return Err(format!("{symbol:?} is not a usable symbol"));
    }
    Ok(symbol)
}

/// The `init.arrays` entries, in declaration order (an array's random
/// stream is its position), each in its long form.
fn declared_arrays(m: &Manifest) -> Result<Vec<PlannedArray>, String> {
    let mut out = Vec::new();
    for (name, spec) in &m.init.arrays {
        let name = name
            .as_str()
            .ok_or("an init.arrays name is not a string")?
            .to_string();
        let array = match spec {
            Value::Mapping(_) => {
                let spec: manifest::ArraySpec = serde_norway::from_value(spec.clone())
                    .map_err(|e| format!("init.arrays.{name}: {e}"))?;
                PlannedArray {
                    name,
                    shape: spec.shape,
                    dtype: spec.dtype,
                    dist: spec.dist,
                    domain: spec.domain,
                }
            }
            shape => PlannedArray {
                name,
                shape: shape.clone(),
                dtype: None,
                dist: None,
                domain: None,
            },
        };
        out.push(array);
    }
    Ok(out)
}

/// The declared arrays by name.
type Arrays<'a> = BTreeMap<&'a str, &'a PlannedArray>;

fn by_name(declared: &[PlannedArray]) -> Arrays<'_> {
    declared.iter().map(|a| (a.name.as_str(), a)).collect()
}

/// The pointers, in `array_args` order; a sparse array in a non-dense
/// format of the active configuration becomes its layout's buffers.
fn pointers(
    m: &Manifest,
    array_args: &[String],
    arrays: &Arrays<'_>,
    outputs: &BTreeSet<&str>,
) -> Result<Vec<Arg>, String> {
    let dtypes = m.init.dtypes.clone().unwrap_or_default();
    let mut out = Vec::new();
    for name in array_args {
        if matches!(name.as_str(), "np" | "numpy") {
            continue;
        }
        if let Some((_, layout, variant)) = active_layout(m, name) {
            for buffer in &variant.buffers {
                let dtype = buffer
                    .dtype
                    .clone()
                    .or_else(|| layout.default_dtype.clone())
                    .unwrap_or_else(|| "float64".into());
                out.push(Arg {
                    name: buffer.name.clone(),
                    dtype,
                    pointer: true,
                    constant: true,
                });
            }
            continue;
        }
        let dtype = arrays
            .get(name.as_str())
            .and_then(|a| a.dtype.clone())
            .or_else(|| dtypes.get(name).cloned())
            .unwrap_or_else(|| "float64".into());
        out.push(Arg {
            name: name.clone(),
            dtype,
            pointer: true,
            constant: !outputs.contains(name.as_str()),
        });
    }
    Ok(out)
}

/// The layout of sparse array `name` in the active (first) configuration,
/// where that configuration stores it in a format with buffers: (format,
/// layout, variant).
fn active_layout<'a>(
    m: &'a Manifest,
    name: &str,
) -> Option<(
    &'a str,
    &'a manifest::SparseLayout,
    &'a manifest::SparseVariant,
)> {
    let format = m
        .configurations
        .as_ref()?
        .values()
        .next()?
        .as_mapping()?
        .get(name)?
        .as_str()?;
    let layout = m.sparse_layouts.as_ref()?.get(name)?;
    let variant = layout.variants.get(format).filter(|_| format != "dense")?;
    Some((format, layout, variant))
}

/// The preset symbols (every preset but `fuzzed`) and the config knobs.
fn size_symbols(m: &Manifest) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = m
        .parameters
        .iter()
        .filter(|(preset, _)| preset.as_str() != "fuzzed")
        .flat_map(|(_, values)| values.keys().filter_map(Value::as_str).map(str::to_string))
        .collect();
    match &m.config {
        Some(Value::Mapping(knobs)) => {
            out.extend(knobs.keys().filter_map(Value::as_str).map(str::to_string));
        }
        Some(Value::Sequence(rows)) => {
            for row in rows.iter().filter_map(Value::as_mapping) {
                out.extend(row.keys().filter_map(Value::as_str).map(str::to_string));
            }
        }
        _ => {}
    }
    out
}

/// Every identifier in an array's or a sparse buffer's shape.
fn shape_names(m: &Manifest, arrays: &Arrays<'_>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for decl in arrays.values() {
        identifiers(&decl.shape, &mut out);
    }
    for layout in m.sparse_layouts.iter().flat_map(BTreeMap::values) {
        if let Some(shape) = &layout.logical_shape {
            identifiers(shape, &mut out);
        }
        for buffer in layout.variants.values().flat_map(|v| &v.buffers) {
            identifiers(&buffer.shape, &mut out);
        }
    }
    out
}

fn identifiers(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::String(text) => {
            let mut word = String::new();
            for c in text.chars().chain(std::iter::once(' ')) {
                if c.is_ascii_alphanumeric() || c == '_' {
                    word.push(c);
                } else {
                    if word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                        out.insert(word.clone());
                    }
                    word.clear();
                }
            }
        }
        Value::Sequence(items) => items.iter().for_each(|i| identifiers(i, out)),
        _ => {}
    }
}

/// A scalar's type: `init.dtypes` if listed; a size symbol's from its
/// preset or knob values (bool, float, else int64); a plain scalar's from its
/// `init.scalars` default (int or bool: int64; else float64).
fn scalar(m: &Manifest, name: &str, size_symbol: bool) -> Result<Arg, String> {
    let listed = m.init.dtypes.as_ref().and_then(|d| d.get(name)).cloned();
    let dtype = match listed {
        Some(dtype) => dtype,
        None if size_symbol => {
            let mut values: Vec<&Value> =
                m.parameters.values().filter_map(|p| p.get(name)).collect();
            values.extend(knob_values(m, name));
            if values.iter().any(|v| v.is_bool()) {
                "bool".into()
            } else if values.iter().any(|v| v.is_f64()) {
                "float64".into()
            } else {
                "int64".into()
            }
        }
        None => {
            let default = m.init.scalars.as_ref().and_then(|s| s.get(name));
            match default {
                Some(v) if v.is_i64() || v.is_u64() || v.is_bool() => "int64".into(),
                _ => "float64".into(),
            }
        }
    };
    Ok(Arg {
        name: name.to_string(),
        dtype,
        pointer: false,
        constant: true,
    })
}

/// Each config knob's value in a single-configuration run: the first of
/// its domain, its pinned value, or the first row's.
fn knob_defaults(m: &Manifest) -> Vec<(String, Value)> {
    match &m.config {
        Some(Value::Mapping(knobs)) => knobs
            .iter()
            .filter_map(|(name, knob)| {
                let knob = knob.as_mapping()?;
                let first = knob
                    .get("domain")
                    .and_then(Value::as_sequence)
                    .and_then(|d| d.first())
                    .or_else(|| knob.get("value"))?;
                Some((name.as_str()?.to_string(), first.clone()))
            })
            .collect(),
        Some(Value::Sequence(rows)) => rows
            .first()
            .and_then(Value::as_mapping)
            .map(|row| {
                row.iter()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.clone())))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The values a config knob may take: its domain, its pinned value, or its
/// column of a list of rows.
fn knob_values<'a>(m: &'a Manifest, name: &str) -> Vec<&'a Value> {
    match &m.config {
        Some(Value::Mapping(knobs)) => match knobs.get(name) {
            Some(Value::Mapping(knob)) => {
                let domain = knob.get("domain").and_then(Value::as_sequence);
                domain
                    .into_iter()
                    .flatten()
                    .chain(knob.get("value"))
                    .collect()
            }
            _ => Vec::new(),
        },
        Some(Value::Sequence(rows)) => rows
            .iter()
            .filter_map(Value::as_mapping)
            .filter_map(|row| row.get(name))
            .collect(),
        _ => Vec::new(),
    }
}

/// What a task's inputs are made from, for the judge's Python
/// (`hab_inputs.py`): the manifest's `init` block at one preset.
#[derive(Debug, Clone, Serialize)]
pub struct InputPlan {
    pub dir: PathBuf,
    pub module: String,
    /// The directory `import hpcagent_bench` resolves from: the checkout.
    pub checkout: PathBuf,
    pub initializer: Option<String>,
    pub initializer_args: Vec<String>,
    /// The names the generator's results are bound to, in order.
    pub outputs: Vec<String>,
    /// In declaration order: each array's random stream is its position.
    pub arrays: Vec<PlannedArray>,
    pub scalars: serde_norway::Mapping,
    pub dtypes: BTreeMap<String, String>,
    pub symbols: serde_norway::Mapping,
    pub seed: u64,
    pub precision: String,
    pub reference: ReferenceCall,
    /// The symbol's arguments in order, for the case a grade passes.
    pub abi: Vec<Arg>,
    /// A held-out case's variant of the draw; `None` for HPCAgent-Bench's own.
    pub rotation: Option<Rotation>,
    /// The sparse arrays the active configuration passes as buffers: an
    /// initializer that makes a SciPy matrix has it taken apart into them.
    pub sparse: Vec<SparseArray>,
}

/// A sparse array as the symbol takes it: its format and, by role
/// (`indptr`, `indices`, `data`, `row`, `col`, `offsets` …), its buffers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SparseArray {
    pub name: String,
    pub format: String,
    /// (role, buffer name), in the layout's order.
    pub buffers: Vec<(String, String)>,
}

/// A held-out case's variant: every float array the declarative path
/// draws comes from `dist`, scaled by `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rotation {
    pub dist: &'static str,
    pub scale: f64,
}

/// HPCAgent-Bench's five held-out variants, in its order.
pub const ROTATIONS: [Rotation; 5] = [
    Rotation {
        dist: "uniform",
        scale: 1.0,
    },
    Rotation {
        dist: "lognormal",
        scale: 1.0,
    },
    Rotation {
        dist: "normal",
        scale: 1.0,
    },
    Rotation {
        dist: "uniform",
        scale: 3.0,
    },
    Rotation {
        dist: "lognormal",
        scale: 0.1,
    },
];

/// How the NumPy reference is called: positionally, `args` in order, its
/// `outputs` being what it returns when it returns that many values, else
/// the buffers it was passed and changed.
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceCall {
    pub path: PathBuf,
    pub function: String,
    pub args: Vec<String>,
    pub outputs: Vec<String>,
}

/// An `init.arrays` entry as the input plan gives it.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedArray {
    pub name: String,
    pub shape: Value,
    pub dtype: Option<String>,
    pub dist: Option<String>,
    pub domain: Option<Value>,
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

    /// Bytes of every array the call passes (inputs and outputs) at
    /// `preset`, from their shapes and dtypes; an error where a shape
    /// depends on what an initializer decides (a sparse matrix's `nnz`).
    pub fn bytes(&self, preset: &str) -> Result<u64, String> {
        let m = &self.manifest;
        let sizes: BTreeMap<String, i64> = m
            .parameters
            .get(preset)
            .ok_or_else(|| format!("no preset {preset}"))?
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_i64()?)))
            .chain(
                knob_defaults(m)
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, v.as_i64()?))),
            )
            .chain(
                m.init
                    .scalars
                    .iter()
                    .chain(&m.init.constants)
                    .flatten()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_i64()?))),
            )
            .collect();
        let declared = declared_arrays(m)?;
        let arrays = by_name(&declared);
        let buffers: BTreeMap<&str, &Value> = m
            .sparse_layouts
            .iter()
            .flat_map(BTreeMap::values)
            .flat_map(|l| l.variants.values())
            .flat_map(|v| &v.buffers)
            .map(|b| (b.name.as_str(), &b.shape))
            .collect();
        let mut total: u64 = 0;
        for arg in self
            .abi
            .args
            .iter()
            .filter(|a| a.pointer && a.name != "workspace")
        {
            let shape = arrays
                .get(arg.name.as_str())
                .map(|a| &a.shape)
                .or_else(|| buffers.get(arg.name.as_str()).copied())
                .ok_or_else(|| format!("{} has no declared shape", arg.name))?;
            let elements = elements(shape, &sizes).map_err(|e| format!("{}: {e}", arg.name))?;
            total = total.saturating_add(elements.saturating_mul(item_size(&arg.dtype)));
        }
        Ok(total)
    }

    /// The plan of this task's inputs at `preset` from `seed`.
    pub fn input_plan(
        &self,
        root: &Path,
        preset: &str,
        seed: u64,
        precision: &str,
    ) -> Result<InputPlan, String> {
        let m = &self.manifest;
        let mut symbols = m
            .parameters
            .get(preset)
            .cloned()
            .ok_or_else(|| format!("{} has no preset {preset}", self.key))?;
        // A single-configuration run takes each knob's first value.
        for (knob, value) in knob_defaults(m) {
            symbols.entry(Value::String(knob)).or_insert(value);
        }
        let arrays = declared_arrays(m)?;
        let mut dtypes = m.init.dtypes.clone().unwrap_or_default();
        // An array's own dtype wins over an init.dtypes entry.
        for array in &arrays {
            if let Some(dtype) = &array.dtype {
                dtypes.insert(array.name.clone(), dtype.clone());
            }
        }
        let scalars = m.init.scalars.clone().unwrap_or_default();
        let outputs = m.init.output_args.clone().unwrap_or_else(|| {
            let names = arrays.iter().map(|a| a.name.clone());
            names
                .chain(scalars.keys().filter_map(Value::as_str).map(str::to_string))
                .collect()
        });
        let checkout = checkout(root);
        Ok(InputPlan {
            dir: self.dir.clone(),
            module: m.module_name.clone().unwrap_or_else(|| self.stem.clone()),
            checkout,
            initializer: m.init.func_name.clone(),
            initializer_args: m.init.input_args.clone().unwrap_or_default(),
            outputs,
            arrays,
            scalars,
            dtypes,
            symbols,
            seed,
            precision: precision.to_string(),
            reference: ReferenceCall {
                path: self.reference.clone(),
                function: self.entry.clone(),
                args: self.inputs.clone(),
                outputs: m.output_args.clone(),
            },
            abi: self.abi.args.clone(),
            rotation: None,
            sparse: m
                .sparse_layouts
                .iter()
                .flat_map(|layouts| layouts.keys())
                .filter_map(|name| {
                    let (format, _, variant) = active_layout(m, name)?;
                    Some(SparseArray {
                        name: name.clone(),
                        format: format.to_string(),
                        buffers: variant
                            .buffers
                            .iter()
                            .map(|b| (b.role.clone(), b.name.clone()))
                            .collect(),
                    })
                })
                .collect(),
        })
    }
}

/// Elements of a shape (`(N, M + 1)`, `N`, `[nnz]`, `()`) at `sizes`.
fn elements(shape: &Value, sizes: &BTreeMap<String, i64>) -> Result<u64, String> {
    let dims: Vec<String> = match shape {
        Value::Number(n) => vec![n.to_string()],
        Value::Sequence(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => serde_norway::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            })
            .collect(),
        Value::String(text) => {
            let inner = text.trim();
            let inner = inner
                .strip_prefix('(')
                .and_then(|i| i.strip_suffix(')'))
                .unwrap_or(inner);
            inner
                .split(',')
                .map(|d| d.trim().to_string())
                .filter(|d| !d.is_empty())
                .collect()
        }
        other => return Err(format!("shape {other:?} is not understood")),
    };
    let mut n: u64 = 1;
    for dim in dims {
        // Python's floor division; shapes never go negative.
        let value = crate::Expr::parse(&dim.replace("//", "/"))?.eval(sizes)?;
        n = n.saturating_mul(u64::try_from(value.max(0)).unwrap_or(0));
    }
    Ok(n)
}

/// Bytes of one element of a NumPy dtype (int4 is stored in a byte).
fn item_size(dtype: &str) -> u64 {
    match dtype {
        "complex128" => 16,
        "float64" | "int64" | "uint64" => 8,
        "float32" | "int32" | "uint32" => 4,
        "float16" | "int16" | "uint16" => 2,
        _ => 1,
    }
}

/// The C type of a NumPy dtype (int4 is stored one value per byte).
pub fn c_type(dtype: &str) -> Result<&'static str, String> {
    Ok(match dtype {
        "float64" => "double",
        "float32" => "float",
        "float16" => "_Float16",
        "int64" => "int64_t",
        "int32" => "int32_t",
        "int16" => "int16_t",
        "int8" | "int4" => "int8_t",
        "uint64" => "uint64_t",
        "uint32" => "uint32_t",
        "uint16" => "uint16_t",
        "uint8" => "uint8_t",
        "complex128" => "double _Complex",
        "bool" => "bool",
        other => return Err(format!("dtype {other} has no C type here")),
    })
}

impl Abi {
    /// The C prototype: `restrict` pointers, const where not written.
    pub fn c_prototype(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| {
                let ty = c_type(&a.dtype).unwrap_or("void");
                match (a.pointer, a.constant) {
                    (true, true) => format!("const {ty} *restrict {}", a.name),
                    (true, false) => format!("{ty} *restrict {}", a.name),
                    (false, _) => format!("{ty} {}", a.name),
                }
            })
            .collect();
        format!("void {}({})", self.symbol, args.join(", "))
    }
}

#[cfg(test)]
mod tests;

//! What a task's inputs are made from ([`InputPlan`], for the judge's
//! Python): the manifest's `init` block at one case's symbols and seed, how
//! its reference is called, the sparse arrays the symbol takes as buffers,
//! and the held-out variants of the draw; and the bytes a case's arrays take.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_norway::{Mapping, Value};

use super::abi::Arg;
use super::arrays::{PlannedArray, active_layout, by_name, declared_arrays};
use super::{HabError, Kernel, Manifest, checkout};

/// The symbols a case binds, by name: its sizes, each knob's value and
/// other parameters (integers, floats, bools), as the manifest writes them.
pub type Symbols = Mapping;

impl Kernel {
    /// The symbols a case at `preset` binds: the preset's parameters and,
    /// as a single-configuration run takes them, each knob's first value.
    pub fn preset_symbols(&self, preset: &str) -> Result<Mapping, HabError> {
        let mut symbols = self
            .manifest
            .parameters
            .get(preset)
            .cloned()
            .ok_or_else(|| HabError::KernelPreset {
                key: self.key.clone(),
                preset: preset.to_string(),
            })?;
        for (knob, value) in knob_defaults(&self.manifest) {
            symbols.entry(Value::String(knob)).or_insert(value);
        }
        Ok(symbols)
    }

    /// Bytes of every array the call passes (inputs and outputs) at
    /// `preset`, from their shapes and dtypes; an error where a shape
    /// depends on what an initializer decides (a sparse matrix's `nnz`).
    pub fn bytes(&self, preset: &str) -> Result<u64, HabError> {
        self.bytes_at(&self.preset_symbols(preset)?)
    }

    /// [`Self::bytes`] of a case binding `symbols`.
    pub fn bytes_at(&self, symbols: &Mapping) -> Result<u64, HabError> {
        let sizes = self.integers(symbols);
        let mut total: u64 = 0;
        for (arg, shape) in self.pointer_shapes()? {
            let elements = dims(&shape, &sizes)
                .map_err(|source| HabError::Shape {
                    arg: arg.name.clone(),
                    source,
                })?
                .iter()
                .fold(1u64, |n, d| {
                    n.saturating_mul(u64::try_from((*d).max(0)).unwrap_or(0))
                });
            total = total.saturating_add(elements.saturating_mul(item_size(&arg.dtype)));
        }
        Ok(total)
    }

    /// Each pointer the call passes, with its declared shape (a sparse
    /// buffer's from its layout).
    pub(super) fn pointer_shapes(&self) -> Result<Vec<(&Arg, Value)>, HabError> {
        let m = &self.manifest;
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
        self.abi
            .args
            .iter()
            .filter(|a| a.pointer && a.name != "workspace")
            .map(|arg| {
                let shape = arrays
                    .get(arg.name.as_str())
                    .map(|a| &a.shape)
                    .or_else(|| buffers.get(arg.name.as_str()).copied())
                    .ok_or_else(|| HabError::NoShape(arg.name.clone()))?;
                Ok((arg, shape.clone()))
            })
            .collect()
    }

    /// The integer symbols a shape may name in a case binding `symbols`:
    /// those, the initializer's scalars and its constants.
    pub(super) fn integers(&self, symbols: &Mapping) -> BTreeMap<String, i64> {
        let init = &self.manifest.init;
        init.scalars
            .iter()
            .chain(&init.constants)
            .flatten()
            .chain(symbols)
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_i64()?)))
            .collect()
    }

    /// The plan of this task's inputs for a case binding `symbols`
    /// (see [`Self::preset_symbols`]), drawn from `seed`.
    pub fn input_plan(
        &self,
        root: &Path,
        symbols: Mapping,
        seed: u64,
        precision: &str,
    ) -> Result<InputPlan, HabError> {
        let m = &self.manifest;
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
            vary: None,
            fallbacks: Vec::new(),
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

/// How a case's values come to differ from the public case's where its
/// sizes do not: what the manifest's generator varies with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variation {
    /// Drawn from the case's seed: the declarative path, or an initializer
    /// that takes `rng`.
    Seeded,
    /// An initializer that draws from a seed of its own among its
    /// arguments (`seed`, or a knob that `selects: seed`): a case gets its
    /// own value there.
    SeedArgument(String),
    /// An initializer that makes its values from the sizes alone (as
    /// PolyBench's index formulas do): the judge's Python transforms them,
    /// keeping what the initializer guarantees (see `hab_inputs.py`).
    Transform,
}

impl Kernel {
    /// What this task's generator varies its values with.
    pub fn variation(&self) -> Variation {
        let init = &self.manifest.init;
        let Some(function) = &init.func_name else {
            return Variation::Seeded;
        };
        let module = self.manifest.module_name.as_deref().unwrap_or(&self.stem);
        let source = std::fs::read_to_string(self.dir.join(format!("{module}.py")));
        let takes_rng = source
            .ok()
            .and_then(|source| super::pydef::defs(&source).ok())
            .and_then(|defs| defs.into_iter().find(|d| &d.name == function))
            .is_some_and(|def| def.accepts("rng"));
        if takes_rng {
            return Variation::Seeded;
        }
        let seeds = |name: &&String| {
            *name == "seed"
                || self
                    .manifest
                    .config
                    .as_ref()
                    .and_then(|c| c.get(name.as_str()))
                    .and_then(|knob| knob.get("selects"))
                    .is_some_and(|s| s.as_str() == Some("seed"))
        };
        match init.input_args.iter().flatten().find(seeds) {
            Some(name) => Variation::SeedArgument(name.clone()),
            None => Variation::Transform,
        }
    }

    /// The plan of a case other than the public one, binding the first
    /// of `draws` (the others its fallbacks, in order) and drawn from
    /// `seed`: its values differ from the public case's as
    /// [`Self::variation`] says, whether or not its sizes do.
    pub fn variant_plan(
        &self,
        root: &Path,
        mut draws: Vec<Symbols>,
        seed: u64,
        precision: &str,
    ) -> Result<InputPlan, HabError> {
        if draws.is_empty() {
            return Err(HabError::NoDraw(self.key.clone()));
        }
        let symbols = draws.remove(0);
        let mut plan = self.input_plan(root, symbols, seed, precision)?;
        plan.fallbacks = draws;
        match self.variation() {
            Variation::Seeded => {}
            Variation::SeedArgument(name) => {
                // Within 31 bits, which every seeding function takes, and
                // never the value the public case is made with.
                let public = plan
                    .symbols
                    .get(&name)
                    .or_else(|| plan.scalars.get(&name))
                    .and_then(Value::as_i64);
                let mut value = (seed >> 33) as i64;
                if Some(value) == public {
                    value += 1;
                }
                let key = Value::String(name);
                if plan.scalars.contains_key(&key) {
                    plan.scalars.insert(key.clone(), Value::from(value));
                }
                for symbols in std::iter::once(&mut plan.symbols).chain(&mut plan.fallbacks) {
                    symbols.insert(key.clone(), Value::from(value));
                }
            }
            Variation::Transform => plan.vary = Some(seed),
        }
        Ok(plan)
    }
}

impl Kernel {
    /// How each array may be drawn afresh for every timed pair by the
    /// judge's own generator, as a native kernel's are, at the shapes a
    /// call passes (array name → shape): the declarative path's
    /// distributions (uniform, normal, lognormal, a sign domain as
    /// positive values) and its index fill beyond one dimension (integers
    /// below the smallest extent). `None` where what the manifest's
    /// generator makes is more than such a draw: an initializer's arrays,
    /// a sparse layout, a permutation (a one-dimensional index array), a
    /// negative or interval domain, a distribution of its own.
    pub fn fresh_draws(
        &self,
        shapes: &BTreeMap<String, Vec<i64>>,
    ) -> Option<BTreeMap<String, crate::Init>> {
        use crate::Init;
        let m = &self.manifest;
        if m.init.func_name.is_some() || m.sparse_layouts.is_some() {
            return None;
        }
        let declared = declared_arrays(m).ok()?;
        let dtypes = m.init.dtypes.clone().unwrap_or_default();
        let mut draws = BTreeMap::new();
        for arg in self
            .abi
            .args
            .iter()
            .filter(|a| a.pointer && a.name != "workspace")
        {
            let array = declared.iter().find(|a| a.name == arg.name)?;
            let shape = shapes.get(&arg.name)?;
            let dtype = array.dtype.as_ref().or(dtypes.get(&array.name));
            let init = match dtype.map(String::as_str) {
                Some(integer) if integer.starts_with("int") || integer.starts_with("uint") => {
                    match shape.as_slice() {
                        [] | [_] => return None,
                        extents => Init::Int {
                            lo: 0,
                            hi: (*extents.iter().min()?).max(2),
                        },
                    }
                }
                Some("bool") => return None,
                _ => {
                    let dist = match array.dist.as_deref() {
                        None | Some("uniform") => Init::Uniform,
                        Some("normal") => Init::Normal,
                        Some("lognormal") => Init::Lognormal,
                        Some(_) => return None,
                    };
                    match array.domain.as_ref().map(|d| d.as_str()) {
                        None | Some(Some("any")) => dist,
                        Some(Some("positive" | "nonneg")) if dist == Init::Lognormal => dist,
                        Some(Some("positive" | "nonneg")) => Init::Positive,
                        _ => return None,
                    }
                }
            };
            draws.insert(arg.name.clone(), init);
        }
        Some(draws)
    }
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
    /// For an initializer whose values do not depend on the seed: the seed
    /// of the transformation that makes this case's values differ from the
    /// public case's ([`super::Variation::Transform`]); `None` for the
    /// values as the initializer makes them.
    pub vary: Option<u64>,
    /// Symbols to make the case at instead, in order, where the initializer
    /// or the reference refuses `symbols` (drawn sizes a relation of the
    /// manifest's does not hold at: [`Kernel::size_draws`]).
    pub fallbacks: Vec<Symbols>,
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

/// Why a shape has no number of elements at these sizes.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The shape as YAML, as Rust's `Debug` shows it.
    #[error("shape {0} is not understood")]
    NotUnderstood(String),
    #[error(transparent)]
    Expr(#[from] crate::ExprError),
}

/// The dimensions of a shape (`(N, M + 1)`, `N`, `[nnz]`, `()`) at `sizes`.
pub(super) fn dims(shape: &Value, sizes: &BTreeMap<String, i64>) -> Result<Vec<i64>, ShapeError> {
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
        other => return Err(ShapeError::NotUnderstood(format!("{other:?}"))),
    };
    dims.iter()
        // Python's floor division; shapes never go negative.
        .map(|dim| Ok(crate::Expr::parse(&dim.replace("//", "/"))?.eval(sizes)?))
        .collect()
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

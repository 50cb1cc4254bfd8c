//! What a task's inputs are made from ([`InputPlan`], for the judge's
//! Python): the manifest's `init` block at one preset and seed, how its
//! reference is called, the sparse arrays the symbol takes as buffers, and
//! the held-out variants of the draw; and the bytes a preset's arrays take.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_norway::Value;

use super::abi::{Arg, active_layout};
use super::{HabError, Kernel, Manifest, checkout, manifest};

impl Kernel {
    /// Bytes of every array the call passes (inputs and outputs) at
    /// `preset`, from their shapes and dtypes; an error where a shape
    /// depends on what an initializer decides (a sparse matrix's `nnz`).
    pub fn bytes(&self, preset: &str) -> Result<u64, HabError> {
        let m = &self.manifest;
        let sizes: BTreeMap<String, i64> = m
            .parameters
            .get(preset)
            .ok_or_else(|| HabError::NoPreset(preset.to_string()))?
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
                .ok_or_else(|| HabError::NoShape(arg.name.clone()))?;
            let elements = elements(shape, &sizes).map_err(|source| HabError::Shape {
                arg: arg.name.clone(),
                source,
            })?;
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
    ) -> Result<InputPlan, HabError> {
        let m = &self.manifest;
        let mut symbols =
            m.parameters
                .get(preset)
                .cloned()
                .ok_or_else(|| HabError::KernelPreset {
                    key: self.key.clone(),
                    preset: preset.to_string(),
                })?;
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

/// The `init.arrays` entries, in declaration order (an array's random
/// stream is its position), each in its long form.
pub(super) fn declared_arrays(m: &Manifest) -> Result<Vec<PlannedArray>, HabError> {
    let mut out = Vec::new();
    for (name, spec) in &m.init.arrays {
        let name = name.as_str().ok_or(HabError::ArrayName)?.to_string();
        let array =
            match spec {
                Value::Mapping(_) => {
                    let spec: manifest::ArraySpec = serde_norway::from_value(spec.clone())
                        .map_err(|source| HabError::ArraySpec {
                            name: name.clone(),
                            source,
                        })?;
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
pub(super) type Arrays<'a> = BTreeMap<&'a str, &'a PlannedArray>;

pub(super) fn by_name(declared: &[PlannedArray]) -> Arrays<'_> {
    declared.iter().map(|a| (a.name.as_str(), a)).collect()
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

/// Why a shape has no number of elements at these sizes.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The shape as YAML, as Rust's `Debug` shows it.
    #[error("shape {0} is not understood")]
    NotUnderstood(String),
    #[error(transparent)]
    Expr(#[from] crate::ExprError),
}

/// Elements of a shape (`(N, M + 1)`, `N`, `[nnz]`, `()`) at `sizes`.
fn elements(shape: &Value, sizes: &BTreeMap<String, i64>) -> Result<u64, ShapeError> {
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

//! `kernel.toml`: the raw format and its validation into a [`Kernel`].
//!
//! ```toml
//! description = "C := alpha*A*B + beta*C"
//! tags = ["polybench"]
//! precisions = ["fp64", "fp32"]          # default; integer kernels: ["i64"]
//! fixed = ["K"]                          # sizes held-out cases keep as they are
//! workspace = "N * 8"                    # scratch bytes, optional
//! notes = "..."                          # shown to agents with the task
//! plausible_speedup = 200.0              # confirm a submit above it (default: the judge's)
//!
//! [sizes]
//! S = { NI = 60, NJ = 70, NK = 80 }      # every preset names every symbol
//!
//! [arrays.A]
//! shape = ["NI", "NK"]                   # expressions over size symbols
//! role = "in"                            # in | out | inout
//! init = "uniform"                       # uniform | normal | lognormal | positive | zeros | int(lo, hi)
//! dtype = "real"                         # real (the precision's float) | f64 | f32 | i32 | i64
//!
//! [scalars.alpha]
//! value = 1.5                            # dtype "real" by default, or "i64"
//!
//! [tolerance.fp32]
//! rtol = 1e-3
//! atol = 1e-5
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{
    ArraySpec, CorpusError, DType, ElemType, Expr, ExprError, Init, Kernel, Precision, Preset,
    Role, ScalarSpec, ScalarValue, SizeError, Tolerance, fingerprint,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    name: Option<String>,
    description: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    precisions: Vec<String>,
    #[serde(default)]
    fixed: Vec<String>,
    workspace: Option<String>,
    #[serde(default)]
    notes: String,
    plausible_speedup: Option<f64>,
    sizes: BTreeMap<String, BTreeMap<String, i64>>,
    arrays: BTreeMap<String, RawArray>,
    #[serde(default)]
    scalars: BTreeMap<String, RawScalar>,
    #[serde(default)]
    tolerance: BTreeMap<String, Tolerance>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArray {
    shape: Vec<String>,
    role: Role,
    #[serde(default = "default_init")]
    init: String,
    #[serde(default = "default_dtype")]
    dtype: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScalar {
    value: toml::Value,
    #[serde(default = "default_dtype")]
    dtype: String,
}

fn default_init() -> String {
    "uniform".into()
}

fn default_dtype() -> String {
    "real".into()
}

/// Reads and validates the kernel in `dir` (under the corpus `root`).
pub fn load(root: &Path, dir: &Path) -> Result<Kernel, CorpusError> {
    let manifest = dir.join("kernel.toml");
    let fail = |message: String| CorpusError {
        path: manifest.clone(),
        message,
    };
    let text = std::fs::read_to_string(&manifest).map_err(|e| fail(e.to_string()))?;
    let raw: RawKernel = toml::from_str(&text).map_err(|e| fail(e.to_string()))?;
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| fail(format!("{name}: {e}")));
    let reference = read("reference.py")?;
    let baseline = read("baseline.c")?;
    let id = dir
        .strip_prefix(root)
        .unwrap_or(dir)
        .to_string_lossy()
        .trim_matches('/')
        .to_string();
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let track = id
        .split('/')
        .next()
        .filter(|t| *t != id)
        .unwrap_or("")
        .to_string();
    let kernel = build(
        raw,
        id,
        dir_name,
        track,
        dir,
        text.as_bytes(),
        &reference,
        &baseline,
    )
    .map_err(|e| fail(e.to_string()))?;
    Ok(kernel)
}

/// Why a `kernel.toml` is refused; its words are the operator's.
#[derive(Debug, thiserror::Error)]
enum ManifestError {
    #[error("kernel name {0:?}: letters, digits, '_' and '-' only")]
    Name(String),
    /// A preset or precision this corpus does not know (its `FromStr` words).
    #[error("{0}")]
    UnknownName(String),
    #[error("sizes: preset {0} is missing")]
    MissingPreset(Preset),
    #[error("sizes: preset {preset} names {names:?}, preset S names {symbols:?}")]
    PresetSymbols {
        preset: Preset,
        names: Vec<String>,
        symbols: Vec<String>,
    },
    #[error("sizes: {preset}.{symbol} = {value} must be at least 1")]
    SizeBelowOne {
        preset: Preset,
        symbol: String,
        value: i64,
    },
    #[error(transparent)]
    Expr(#[from] ExprError),
    #[error("array {0}: integer kernels have no `real` arrays")]
    RealInIntegerKernel(String),
    #[error("no output array (role out or inout)")]
    NoOutput,
    #[error("scalar {scalar}: value {value} does not fit dtype {dtype}")]
    ScalarDtype {
        scalar: String,
        value: String,
        dtype: String,
    },
    #[error("symbol {0} is used in a shape but has no size")]
    UnsizedSymbol(String),
    #[error("{0} is both a size and an argument")]
    SizeIsArgument(String),
    #[error("fixed: {0} is not a size")]
    FixedNotSize(String),
    #[error("preset {preset}: {source}")]
    PresetBytes { preset: Preset, source: SizeError },
    #[error("{0:?} is not a usable argument name")]
    Ident(String),
    #[error("dtype {0:?}: real, f64, f32, i32 or i64")]
    Dtype(String),
    #[error("init {0:?}: uniform, normal, lognormal, positive, zeros or int(lo, hi)")]
    Init(String),
    #[error("int(lo, hi) needs two bounds")]
    InitBounds,
    #[error("bad bound {0:?}")]
    InitBound(String),
    #[error("int({lo}, {hi}) is empty")]
    EmptyInit { lo: i64, hi: i64 },
}

#[allow(clippy::too_many_arguments)]
fn build(
    raw: RawKernel,
    id: String,
    dir_name: String,
    track: String,
    dir: &Path,
    manifest: &[u8],
    reference: &[u8],
    baseline: &[u8],
) -> Result<Kernel, ManifestError> {
    let name = raw.name.unwrap_or(dir_name);
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(ManifestError::Name(name));
    }
    let precisions = if raw.precisions.is_empty() {
        vec![Precision::Fp64, Precision::Fp32]
    } else {
        raw.precisions
            .iter()
            .map(|p| p.parse())
            .collect::<Result<Vec<_>, _>>()
            .map_err(ManifestError::UnknownName)?
    };

    let mut presets = BTreeMap::new();
    for (preset, sizes) in raw.sizes {
        let preset = preset
            .parse::<Preset>()
            .map_err(ManifestError::UnknownName)?;
        presets.insert(preset, sizes);
    }
    for preset in Preset::ALL {
        if !presets.contains_key(&preset) {
            return Err(ManifestError::MissingPreset(preset));
        }
    }
    let symbols: Vec<String> = presets[&Preset::S].keys().cloned().collect();
    for (preset, sizes) in &presets {
        if sizes.keys().ne(symbols.iter()) {
            return Err(ManifestError::PresetSymbols {
                preset: *preset,
                names: sizes.keys().cloned().collect(),
                symbols,
            });
        }
        if let Some((k, v)) = sizes.iter().find(|(_, v)| **v < 1) {
            return Err(ManifestError::SizeBelowOne {
                preset: *preset,
                symbol: k.clone(),
                value: *v,
            });
        }
    }

    let mut arrays = Vec::new();
    for (array_name, a) in raw.arrays {
        check_ident(&array_name)?;
        let shape = a
            .shape
            .iter()
            .map(|s| Expr::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let elem = elem_type(&a.dtype)?;
        let init = parse_init(&a.init)?;
        if elem == ElemType::Real && precisions.contains(&Precision::I64) {
            return Err(ManifestError::RealInIntegerKernel(array_name));
        }
        arrays.push(ArraySpec {
            name: array_name,
            shape,
            shape_text: a.shape,
            role: a.role,
            elem,
            init,
        });
    }
    arrays.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    if !arrays.iter().any(|a| a.role.is_output()) {
        return Err(ManifestError::NoOutput);
    }

    let mut scalars = Vec::new();
    for (scalar_name, s) in raw.scalars {
        check_ident(&scalar_name)?;
        let elem = elem_type(&s.dtype)?;
        let value = match (&s.value, elem) {
            (toml::Value::Integer(i), ElemType::Fixed(DType::I64 | DType::I32)) => {
                ScalarValue::Int(*i)
            }
            (toml::Value::Integer(i), _) => ScalarValue::Real(*i as f64),
            (toml::Value::Float(f), ElemType::Real | ElemType::Fixed(DType::F64 | DType::F32)) => {
                ScalarValue::Real(*f)
            }
            (other, _) => {
                return Err(ManifestError::ScalarDtype {
                    scalar: scalar_name,
                    value: other.to_string(),
                    dtype: s.dtype,
                });
            }
        };
        scalars.push(ScalarSpec {
            name: scalar_name,
            elem,
            value,
        });
    }

    let workspace = raw.workspace.as_deref().map(Expr::parse).transpose()?;
    let mut used = Vec::new();
    for a in &arrays {
        a.shape.iter().for_each(|e| e.symbols(&mut used));
    }
    if let Some(w) = &workspace {
        w.symbols(&mut used);
    }
    for s in &used {
        if !symbols.contains(s) {
            return Err(ManifestError::UnsizedSymbol(s.clone()));
        }
    }
    for s in &symbols {
        check_ident(s)?;
        if scalars.iter().any(|sc| &sc.name == s) || arrays.iter().any(|a| &a.name == s) {
            return Err(ManifestError::SizeIsArgument(s.clone()));
        }
    }
    for f in &raw.fixed {
        if !symbols.contains(f) {
            return Err(ManifestError::FixedNotSize(f.clone()));
        }
    }
    let mut tolerances = BTreeMap::new();
    for (p, t) in raw.tolerance {
        let precision = p.parse::<Precision>().map_err(ManifestError::UnknownName)?;
        tolerances.insert(precision, t);
    }

    let kernel = Kernel {
        id,
        name,
        track,
        dir: dir.to_path_buf(),
        description: raw.description.trim().to_string(),
        tags: raw.tags,
        precisions,
        presets,
        arrays,
        scalars,
        size_symbols: symbols,
        workspace,
        fixed: raw.fixed,
        tolerances,
        notes: raw.notes.trim().to_string(),
        fingerprint: fingerprint(&[manifest, reference, baseline]),
        symbol: None,
        budget_seconds: None,
        plausible_speedup: raw.plausible_speedup,
    };
    for preset in Preset::ALL {
        for &precision in &kernel.precisions {
            let sizes = kernel.sizes(preset);
            kernel
                .bytes(sizes, precision)
                .map_err(|source| ManifestError::PresetBytes { preset, source })?;
        }
    }
    Ok(kernel)
}

fn check_ident(name: &str) -> Result<(), ManifestError> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok && !["workspace", "workspace_size"].contains(&name) {
        Ok(())
    } else {
        Err(ManifestError::Ident(name.to_string()))
    }
}

fn elem_type(text: &str) -> Result<ElemType, ManifestError> {
    Ok(match text {
        "real" => ElemType::Real,
        "f64" => ElemType::Fixed(DType::F64),
        "f32" => ElemType::Fixed(DType::F32),
        "i32" => ElemType::Fixed(DType::I32),
        "i64" => ElemType::Fixed(DType::I64),
        other => return Err(ManifestError::Dtype(other.to_string())),
    })
}

fn parse_init(text: &str) -> Result<Init, ManifestError> {
    let t = text.trim();
    Ok(match t {
        "uniform" => Init::Uniform,
        "normal" => Init::Normal,
        "lognormal" => Init::Lognormal,
        "positive" => Init::Positive,
        "zeros" => Init::Zeros,
        _ => {
            let inner = t
                .strip_prefix("int(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| ManifestError::Init(t.to_string()))?;
            let (lo, hi) = inner.split_once(',').ok_or(ManifestError::InitBounds)?;
            let parse = |s: &str| {
                s.trim()
                    .parse::<i64>()
                    .map_err(|_| ManifestError::InitBound(s.to_string()))
            };
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if lo >= hi {
                return Err(ManifestError::EmptyInit { lo, hi });
            }
            Init::Int { lo, hi }
        }
    })
}

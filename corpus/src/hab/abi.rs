//! The ABI as HPCAgent-Bench derives it ("c-abi-v2"): the symbol (the
//! lowercased short name, the active configuration's suffix, `_fp64`),
//! the pointers sorted bytewise (a sparse array in the active
//! configuration's format as its buffers), then the scalars and size
//! symbols sorted together, then the workspace pair; each argument's C
//! type and const-ness.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_norway::Value;

use super::arrays::{Arrays, active_layout, by_name, declared_arrays};
use super::{HabError, Manifest};

/// What a submission exports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Abi {
    pub symbol: String,
    /// In call order, the workspace pair last.
    pub args: Vec<Arg>,
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Arg {
    pub name: String,
    /// The NumPy dtype name (`float64`, `int64`, `bool`, `int4` …).
    pub dtype: String,
    pub pointer: bool,
    /// Pointers the kernel must not write (every one but the outputs).
    pub constant: bool,
}

/// The ABI as HPCAgent-Bench derives it (c-abi-v2): pointers sorted by name, then
/// scalars and size symbols sorted together, then the workspace pair.
pub fn derive_abi(m: &Manifest, stem: &str, def_params: &[String]) -> Result<Abi, HabError> {
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
    let mut pointers = pointers(m, &array_args, &arrays, &outputs);
    let (symbols, shape_names) = (size_symbols(m), shape_names(m, &arrays));
    // Without a declared shape there is no evidence a symbol goes unused:
    // every one is kept.
    let kept: BTreeSet<String> = symbols
        .into_iter()
        .filter(|s| shape_names.is_empty() || inputs.contains(s) || shape_names.contains(s))
        .collect();
    let pointer_names: BTreeSet<String> = pointers.iter().map(|p| p.name.clone()).collect();
    let mut scalars: Vec<Arg> = kept.iter().map(|s| scalar(m, s, true)).collect();
    for input in &inputs {
        let plain = !array_args.contains(input)
            && !kept.contains(input)
            && !pointer_names.contains(input)
            && !matches!(input.as_str(), "np" | "numpy");
        if plain && !scalars.iter().any(|s| &s.name == input) {
            scalars.push(scalar(m, input, false));
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
        c_type(&arg.dtype).map_err(|source| HabError::ArgType {
            arg: arg.name.clone(),
            source,
        })?;
    }
    Ok(Abi { symbol, args })
}

/// `lower(short_name)`, the first configuration's key, `_fp64`.
fn symbol(m: &Manifest, stem: &str) -> Result<String, HabError> {
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
        return Err(HabError::Symbol(symbol));
    }
    Ok(symbol)
}

/// The pointers, in `array_args` order; a sparse array in a non-dense
/// format of the active configuration becomes its layout's buffers.
fn pointers(
    m: &Manifest,
    array_args: &[String],
    arrays: &Arrays<'_>,
    outputs: &BTreeSet<&str>,
) -> Vec<Arg> {
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
    out
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
fn scalar(m: &Manifest, name: &str, size_symbol: bool) -> Arg {
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
    Arg {
        name: name.to_string(),
        dtype,
        pointer: false,
        constant: true,
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

/// A NumPy dtype with no C type the judge passes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("dtype {0} has no C type here")]
pub struct NoCType(pub String);

/// The C type of a NumPy dtype (int4 is stored one value per byte).
pub fn c_type(dtype: &str) -> Result<&'static str, NoCType> {
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
        other => return Err(NoCType(other.to_string())),
    })
}

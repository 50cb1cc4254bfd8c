//! The arrays a manifest declares, as both the ABI and the input plan read
//! them: the `init.arrays` entries in their long form and in declaration
//! order, by name, and the sparse layout the active configuration stores an
//! array in.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_norway::Value;

use super::{HabError, Manifest, manifest};

/// An `init.arrays` entry in its long form, as the input plan gives it.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedArray {
    pub name: String,
    pub shape: Value,
    pub dtype: Option<String>,
    pub dist: Option<String>,
    pub domain: Option<Value>,
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

/// The layout of sparse array `name` in the active (first) configuration,
/// where that configuration stores it in a format with buffers: (format,
/// layout, variant).
pub(super) fn active_layout<'a>(
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

//! An HPCAgent-Bench manifest (`<stem>.yaml`) as it is written: a closed
//! set of top-level keys, each typed as far as a reader of the ABI needs.
//! Keys the reader does not use are accepted and kept as YAML values, so an
//! unknown key is still an error, as it is for HPCAgent-Bench's loader.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_norway::{Mapping, Value};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: Option<String>,
    pub short_name: Option<String>,
    pub module_name: Option<String>,
    pub relative_path: Option<String>,
    pub func_name: Option<String>,
    /// Preset → symbol → value (integers, and bools or floats for knobs
    /// that live in presets).
    #[serde(default)]
    pub parameters: BTreeMap<String, Mapping>,
    pub dimensions: Option<Value>,
    /// Mapping form (`sym: {domain: [..]} | {value: v}`) or a list of rows.
    pub config: Option<Value>,
    pub constraints: Option<Value>,
    pub fuzz: Option<Value>,
    pub precisions: Option<Vec<String>>,
    pub taxonomy: Option<Taxonomy>,
    pub kind: Option<String>,
    pub level: Option<u8>,
    pub notes: Option<Value>,
    #[serde(rename = "_note")]
    pub note: Option<Value>,
    #[serde(rename = "_note_concurrency")]
    pub note_concurrency: Option<Value>,
    pub init: Init,
    pub output_args: Vec<String>,
    pub input_args: Option<Vec<String>>,
    pub array_args: Option<Vec<String>>,
    pub loop_level_reasoning: Option<Value>,
    pub sparse_layouts: Option<BTreeMap<String, SparseLayout>>,
    /// Ordered: the first is the active one (and suffixes the symbol).
    pub configurations: Option<Mapping>,
    pub distributions: Option<Value>,
    pub variants: Option<Value>,
    pub mpi: Option<Value>,
    pub baseline: Option<Value>,
    pub languages: Option<Value>,
    pub timeout_s: Option<Value>,
    pub tags: Option<Value>,
    pub min_precision: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taxonomy {
    pub track: Option<String>,
    pub subtrack: Option<String>,
    pub dwarf: Option<String>,
    pub domain: Option<String>,
    pub tags: Option<Vec<String>>,
    pub scale: Option<String>,
    pub min_precision: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Init {
    /// Array name → its shape (or a spec with one), in declaration order.
    #[serde(default)]
    pub arrays: Mapping,
    pub scalars: Option<Mapping>,
    /// Types of scalars and symbols crossing the ABI.
    pub dtypes: Option<BTreeMap<String, String>>,
    pub constants: Option<Mapping>,
    pub func_name: Option<String>,
    pub input_args: Option<Vec<String>>,
    pub output_args: Option<Vec<String>>,
    pub workspace: Option<Value>,
}

/// An `init.arrays` entry in its long form.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArraySpec {
    pub shape: Value,
    pub dtype: Option<String>,
    pub dist: Option<String>,
    pub domain: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseLayout {
    pub logical_shape: Option<Value>,
    pub default_dtype: Option<String>,
    #[serde(default)]
    pub variants: BTreeMap<String, SparseVariant>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseVariant {
    #[serde(default)]
    pub buffers: Vec<SparseBuffer>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseBuffer {
    pub role: String,
    pub name: String,
    pub shape: Value,
    pub dtype: Option<String>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, serde_norway::Error> {
        serde_norway::from_str(text)
    }
}

//! An HPCAgent-Bench kernel in the form the judge grades every task in
//! ([`crate::Kernel`]): its ABI's arrays and by-value arguments with their
//! types, in HPCAgent-Bench's order, and HPCAgent-Bench's tolerance rule.
//!
//! What this form cannot say is left to the case: shapes and the values of
//! scalars come from the inputs HPCAgent-Bench's generator makes (an
//! initializer may decide both), never from shape expressions here.

use std::collections::BTreeMap;
use std::path::Path;

use super::HabError;
use super::Kernel as Manifested;
use crate::{
    ArraySpec, Corpus, DType, ElemType, Init, Kernel, Precision, Preset, Role, ScalarSpec,
    ScalarValue, Sizes, Tolerance, fingerprint,
};

/// The corpus of `kernels` (read from `root`) in their graded form, and
/// those that cannot be graded with why (path key → reason), the manifests
/// `load` refused among them.
pub fn graded_corpus(
    root: &Path,
    kernels: &[Manifested],
    refusals: Vec<super::Refusal>,
) -> (Corpus, BTreeMap<String, String>) {
    let mut refused: BTreeMap<String, String> =
        refusals.into_iter().map(|r| (r.key, r.reason)).collect();
    let mut graded = Vec::new();
    for kernel in kernels {
        match kernel.graded() {
            Ok(k) => graded.push(k),
            Err(why) => {
                refused.insert(kernel.key.clone(), why.to_string());
            }
        }
    }
    let corpus = Corpus {
        root: root.to_path_buf(),
        kernels: graded,
    };
    (corpus, refused)
}

/// HPCAgent-Bench's tolerances: by precision only, `atol` as given.
pub const FP64_TOLERANCE: Tolerance = Tolerance::plain(1e-9, 1e-11);

impl Manifested {
    /// This kernel as the judge grades it, or why it cannot be: an
    /// argument of a type the judge does not pass (complex, half precision).
    pub fn graded(&self) -> Result<Kernel, HabError> {
        let returned: Vec<&str> = self
            .manifest
            .output_args
            .iter()
            .filter(|name| !self.abi.args.iter().any(|a| a.pointer && &a.name == *name))
            .map(String::as_str)
            .collect();
        if !returned.is_empty() {
            return Err(HabError::ReturnedOutputs(returned.join(", ")));
        }
        let mut arrays = Vec::new();
        let mut scalars = Vec::new();
        for arg in &self.abi.args {
            if arg.name == "workspace" || arg.name == "workspace_size" {
                continue;
            }
            let dtype = DType::from_numpy(&arg.dtype).ok_or_else(|| HabError::UnpassedType {
                arg: arg.name.clone(),
                dtype: arg.dtype.clone(),
            })?;
            if dtype == DType::C128 && !arg.pointer {
                return Err(HabError::ComplexScalar(arg.name.clone()));
            }
            if arg.pointer {
                arrays.push(ArraySpec {
                    name: arg.name.clone(),
                    shape: Vec::new(),
                    shape_text: Vec::new(),
                    // Outputs hold generated data before the call, as
                    // HPCAgent-Bench fills them, and references may read them.
                    role: if self.manifest.output_args.contains(&arg.name) {
                        Role::InOut
                    } else {
                        Role::In
                    },
                    elem: ElemType::Fixed(dtype),
                    init: Init::Uniform,
                });
            } else {
                scalars.push(ScalarSpec {
                    name: arg.name.clone(),
                    elem: ElemType::Fixed(dtype),
                    // The case's inputs carry the value.
                    value: ScalarValue::Int(0),
                });
            }
        }
        Ok(Kernel {
            id: self.key.clone(),
            // Task ids are path keys: a stem alone may name several.
            name: self.key.clone(),
            track: self.track.clone(),
            dir: self.dir.clone(),
            description: self.name.clone(),
            tags: Vec::new(),
            precisions: vec![Precision::Fp64],
            presets: self.preset_sizes(),
            arrays,
            scalars,
            size_symbols: Vec::new(),
            workspace: None,
            fixed: Vec::new(),
            tolerances: BTreeMap::from([(Precision::Fp64, FP64_TOLERANCE)]),
            notes: String::new(),
            fingerprint: self.fingerprint(),
            symbol: Some(self.abi.symbol.clone()),
            budget_seconds: Some(super::level_budget_seconds(self.level)),
            plausible_speedup: None,
        })
    }

    /// The integer sizes of each preset the manifest has.
    fn preset_sizes(&self) -> BTreeMap<Preset, Sizes> {
        Preset::ALL
            .into_iter()
            .filter_map(|preset| {
                let values = self.manifest.parameters.get(preset.as_str())?;
                let sizes = values
                    .iter()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_i64()?)))
                    .collect();
                Some((preset, sizes))
            })
            .collect()
    }

    /// A hash of the manifest, its reference and its initializer's module:
    /// a case made from older files is not reused.
    pub fn fingerprint(&self) -> String {
        let module = self.manifest.module_name.as_deref().unwrap_or(&self.stem);
        let files = [
            self.file.clone(),
            self.reference.clone(),
            self.dir.join(format!("{module}.py")),
        ];
        let contents: Vec<Vec<u8>> = files
            .iter()
            .map(|f| std::fs::read(f).unwrap_or_default())
            .collect();
        let parts: Vec<&[u8]> = std::iter::once(self.key.as_bytes())
            .chain(contents.iter().map(Vec::as_slice))
            .collect();
        fingerprint(&parts)
    }
}

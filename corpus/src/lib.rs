//! The task corpus: `benchmarks/<track>/<kernel>/` directories, each with
//! `kernel.toml` (the manifest), `reference.py` (the NumPy oracle) and
//! `baseline.c` (the speedup denominator), and the languages a task may be
//! solved in.
//!
//! This crate reads and validates manifests and answers questions about a
//! kernel at a preset (sizes, bytes, the ABI). It does not generate data or
//! run anything: the judge does, and the orchestrator only plans tasks from
//! it, so neither depends on the other for it.

pub mod abi;
pub mod expr;
pub mod hab;
pub mod language;
mod manifest;

pub use language::Language;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use expr::{Expr, ExprError};

/// Why a kernel's arrays have no size at these sizes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error(transparent)]
    Expr(#[from] ExprError),
    #[error("array {array} has a dimension of {dim}")]
    Dimension { array: String, dim: i64 },
    #[error("array size overflows")]
    Overflow,
    #[error("array too large")]
    TooLarge,
    #[error("negative workspace")]
    NegativeWorkspace,
}

/// Sizes of one case: size symbol → value.
pub type Sizes = BTreeMap<String, i64>;

/// A problem-size preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Preset {
    S,
    M,
    L,
    #[serde(rename = "XL")]
    Xl,
}

impl Preset {
    pub const ALL: [Preset; 4] = [Preset::S, Preset::M, Preset::L, Preset::Xl];

    pub fn as_str(self) -> &'static str {
        match self {
            Preset::S => "S",
            Preset::M => "M",
            Preset::L => "L",
            Preset::Xl => "XL",
        }
    }

    /// Byte ceiling of the preset's arrays (at fp64): inputs, outputs and workspace.
    pub fn byte_ceiling(self) -> u64 {
        const GIB: u64 = 1 << 30;
        match self {
            Preset::S => GIB / 4,
            Preset::M => 4 * GIB,
            Preset::L => 8 * GIB,
            Preset::Xl => 16 * GIB,
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown preset {s:?} (S, M, L, XL)"))
    }
}

/// The numeric variant of a kernel: its `real` type, and the symbol's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    /// Integer kernels: no `real` arrays, exact comparison.
    I64,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::I64 => "i64",
        }
    }

    /// Default tolerances (rtol, atol); integers compare exactly.
    pub fn default_tolerance(self) -> Tolerance {
        match self {
            Precision::Fp64 => Tolerance::scaled(1e-9, 1e-11),
            Precision::Fp32 => Tolerance::scaled(1e-3, 1e-5),
            Precision::I64 => Tolerance::scaled(0.0, 0.0),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fp64" | "f64" | "double" => Ok(Precision::Fp64),
            "fp32" | "f32" | "float" => Ok(Precision::Fp32),
            "i64" | "int" => Ok(Precision::I64),
            other => Err(format!("unknown precision {other:?} (fp64, fp32, i64)")),
        }
    }
}

/// |expected − actual| ≤ atol + rtol·|expected|.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
    /// Whether `atol` scales with the output's largest |value| (this
    /// corpus's rule, so tiny and huge outputs are judged alike), or is
    /// used as given (NumPy's `allclose`, HPCAgent-Bench's rule).
    #[serde(default = "yes")]
    pub scaled: bool,
}

fn yes() -> bool {
    true
}

impl Tolerance {
    /// `atol` scaled by the output's largest |value|.
    pub const fn scaled(rtol: f64, atol: f64) -> Tolerance {
        Tolerance {
            rtol,
            atol,
            scaled: true,
        }
    }

    /// `atol` as given.
    pub const fn plain(rtol: f64, atol: f64) -> Tolerance {
        Tolerance {
            rtol,
            atol,
            scaled: false,
        }
    }

    /// What a timed call is held to: twice this tolerance, its `atol`
    /// scaled by the output's largest |value| whatever this rule says. The
    /// check is there to catch work skipped or an answer replayed, not to
    /// grade accuracy (the public and held-out cases do, by this rule), and
    /// a grade makes up to 20 timed calls on values of its own. Under a
    /// plain `atol` (HPCAgent-Bench's rule) an element whose sum cancels to
    /// near zero fails on rounding the size of its terms: HPCAgent-Bench's
    /// `product` at S (terms of 1e6, sums of 1e7) has one such element in
    /// about 1 of 10,000 sets, and an honest loop was graded `incorrect`
    /// on -0.2465956938 against NumPy's -0.2465956972.
    pub const fn for_timed_calls(self) -> Tolerance {
        Tolerance {
            rtol: 2.0 * self.rtol,
            atol: 2.0 * self.atol,
            scaled: true,
        }
    }
}

/// An element type as stored in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F64,
    F32,
    I32,
    I64,
    // The narrower types only HPCAgent-Bench manifests use.
    I16,
    I8,
    U16,
    U8,
    /// C's `bool`, one byte.
    Bool,
    /// `double _Complex`: the real part, then the imaginary.
    C128,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::C128 => 16,
        }
    }

    /// The type of a NumPy dtype name, where the judge can pass it
    /// (`int4` is stored one value per byte, as `int8`).
    pub fn from_numpy(name: &str) -> Option<DType> {
        Some(match name {
            "float64" => DType::F64,
            "float32" => DType::F32,
            "int64" => DType::I64,
            "int32" => DType::I32,
            "int16" => DType::I16,
            "int8" | "int4" => DType::I8,
            "uint16" => DType::U16,
            "uint8" => DType::U8,
            "bool" => DType::Bool,
            "complex128" => DType::C128,
            _ => return None,
        })
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32)
    }

    /// An integer (or `bool`) element from its little-endian bytes (not
    /// for floats or complex numbers).
    pub fn int_le(self, raw: &[u8]) -> i64 {
        let mut wide = [0u8; 8];
        wide[..raw.len()].copy_from_slice(raw);
        let value = i64::from_le_bytes(wide);
        let bits = 8 * raw.len() as u32;
        match self {
            // Sign-extend from the element's own width.
            DType::I32 | DType::I16 | DType::I8 if bits < 64 => {
                (value << (64 - bits)) >> (64 - bits)
            }
            _ => value,
        }
    }

    pub fn c_type(self) -> &'static str {
        match self {
            DType::F64 => "double",
            DType::F32 => "float",
            DType::I32 => "int32_t",
            DType::I64 => "int64_t",
            DType::I16 => "int16_t",
            DType::I8 => "int8_t",
            DType::U16 => "uint16_t",
            DType::U8 => "uint8_t",
            DType::Bool => "bool",
            DType::C128 => "double _Complex",
        }
    }

    pub fn fortran_type(self) -> &'static str {
        match self {
            DType::F64 => "real(c_double)",
            DType::F32 => "real(c_float)",
            DType::I32 => "integer(c_int32_t)",
            DType::I64 => "integer(c_int64_t)",
            DType::I16 | DType::U16 => "integer(c_int16_t)",
            DType::I8 | DType::U8 => "integer(c_int8_t)",
            DType::Bool => "logical(c_bool)",
            DType::C128 => "complex(c_double_complex)",
        }
    }

    pub fn numpy(self) -> &'static str {
        match self {
            DType::F64 => "float64",
            DType::F32 => "float32",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::I16 => "int16",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::U8 => "uint8",
            DType::Bool => "bool",
            DType::C128 => "complex128",
        }
    }
}

/// A manifest's element type: fixed, or `real` (the precision's float type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemType {
    Real,
    Fixed(DType),
}

impl ElemType {
    pub fn resolve(self, precision: Precision) -> DType {
        match (self, precision) {
            (ElemType::Fixed(d), _) => d,
            (ElemType::Real, Precision::Fp32) => DType::F32,
            (ElemType::Real, _) => DType::F64,
        }
    }
}

/// Whether the kernel reads an array, writes it, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    In,
    Out,
    InOut,
}

impl Role {
    pub fn is_output(self) -> bool {
        matches!(self, Role::Out | Role::InOut)
    }

    pub fn is_input(self) -> bool {
        matches!(self, Role::In | Role::InOut)
    }
}

/// How an input array's values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Init {
    /// Uniform in [-1, 1).
    Uniform,
    /// Standard normal.
    Normal,
    /// exp(N(0, 0.5²)): positive, skewed.
    Lognormal,
    /// Uniform in [0.5, 1.5): safe to divide by.
    Positive,
    Zeros,
    /// Integers uniform in [lo, hi).
    Int {
        lo: i64,
        hi: i64,
    },
}

#[derive(Debug, Clone)]
pub struct ArraySpec {
    pub name: String,
    pub shape: Vec<Expr>,
    /// The shape as written in the manifest, for prototypes and docs.
    pub shape_text: Vec<String>,
    pub role: Role,
    pub elem: ElemType,
    pub init: Init,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalarValue {
    Int(i64),
    Real(f64),
}

#[derive(Debug, Clone)]
pub struct ScalarSpec {
    pub name: String,
    pub elem: ElemType,
    pub value: ScalarValue,
}

/// One kernel of the corpus, validated.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Path under `benchmarks/`, e.g. `dense_linear_algebra/gemm`.
    pub id: String,
    /// The kernel's name, e.g. `gemm` or `jacobi-2d`.
    pub name: String,
    pub track: String,
    pub dir: PathBuf,
    pub description: String,
    pub tags: Vec<String>,
    pub precisions: Vec<Precision>,
    pub presets: BTreeMap<Preset, Sizes>,
    /// Sorted by name, bytewise (the ABI's pointer order).
    pub arrays: Vec<ArraySpec>,
    pub scalars: Vec<ScalarSpec>,
    /// Size symbols passed as `int64_t` arguments.
    pub size_symbols: Vec<String>,
    pub workspace: Option<Expr>,
    /// Size symbols held-out cases must not change.
    pub fixed: Vec<String>,
    pub tolerances: BTreeMap<Precision, Tolerance>,
    pub notes: String,
    /// Hash of the manifest, reference and baseline: cached data is keyed by it.
    pub fingerprint: String,
    /// The exported symbol where the corpus fixes it whole (HPCAgent-Bench
    /// names every variant `_fp64`); else `<ident>_<precision>`.
    pub symbol: Option<String>,
    /// Seconds an agent has for the task where the corpus sets them (an
    /// HPCAgent-Bench level's); else the campaign's `TASK_BUDGET`.
    pub budget_seconds: Option<u32>,
    /// The speedup over its baseline above which a submit is confirmed
    /// before it is credited, where the kernel sets one; else the judge's.
    pub plausible_speedup: Option<f64>,
}

impl Kernel {
    /// The C identifier of the kernel's name (`jacobi-2d` → `jacobi_2d`).
    pub fn ident(&self) -> String {
        self.name.replace('-', "_")
    }

    /// The symbol a submission exports, e.g. `gemm_fp64`.
    pub fn symbol(&self, precision: Precision) -> String {
        match &self.symbol {
            Some(symbol) => symbol.clone(),
            None => format!("{}_{}", self.ident(), precision),
        }
    }

    pub fn tolerance(&self, precision: Precision) -> Tolerance {
        self.tolerances
            .get(&precision)
            .copied()
            .unwrap_or_else(|| precision.default_tolerance())
    }

    pub fn sizes(&self, preset: Preset) -> &Sizes {
        &self.presets[&preset]
    }

    /// Elements of each array at these sizes.
    pub fn elements(&self, array: &ArraySpec, sizes: &Sizes) -> Result<usize, SizeError> {
        let mut n: i64 = 1;
        for dim in &array.shape {
            let d = dim.eval(sizes)?;
            if d < 1 {
                return Err(SizeError::Dimension {
                    array: array.name.clone(),
                    dim: d,
                });
            }
            n = n.checked_mul(d).ok_or(SizeError::Overflow)?;
        }
        usize::try_from(n).map_err(|_| SizeError::TooLarge)
    }

    /// Shape of an array at these sizes.
    pub fn shape(&self, array: &ArraySpec, sizes: &Sizes) -> Result<Vec<i64>, SizeError> {
        array
            .shape
            .iter()
            .map(|d| d.eval(sizes).map_err(SizeError::from))
            .collect()
    }

    pub fn workspace_bytes(&self, sizes: &Sizes) -> Result<u64, SizeError> {
        match &self.workspace {
            None => Ok(0),
            Some(e) => u64::try_from(e.eval(sizes)?).map_err(|_| SizeError::NegativeWorkspace),
        }
    }

    /// Bytes of all arrays and the workspace at these sizes and precision.
    pub fn bytes(&self, sizes: &Sizes, precision: Precision) -> Result<u64, SizeError> {
        let mut total = self.workspace_bytes(sizes)?;
        for a in &self.arrays {
            total += (self.elements(a, sizes)? * a.elem.resolve(precision).size()) as u64;
        }
        Ok(total)
    }

    pub fn reference_path(&self) -> PathBuf {
        self.dir.join("reference.py")
    }

    pub fn baseline_path(&self) -> PathBuf {
        self.dir.join("baseline.c")
    }

    pub fn outputs(&self) -> impl Iterator<Item = &ArraySpec> {
        self.arrays.iter().filter(|a| a.role.is_output())
    }

    /// Presets whose memory breaks its ceiling or shrinks from the one before.
    pub fn preset_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for &precision in &self.precisions {
            let mut previous = 0;
            for preset in Preset::ALL {
                let bytes = self
                    .bytes(self.sizes(preset), precision)
                    .unwrap_or(u64::MAX);
                if bytes > preset.byte_ceiling() {
                    problems.push(format!(
                        "{precision} preset {preset} needs {bytes} bytes, over its ceiling of {}",
                        preset.byte_ceiling()
                    ));
                }
                if bytes < previous {
                    problems.push(format!(
                        "{precision} preset {preset} is smaller than the preset before it"
                    ));
                }
                previous = bytes;
            }
        }
        problems
    }
}

/// Why the corpus or one of its kernels cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CorpusError {
    pub path: PathBuf,
    pub message: String,
}

/// All kernels under a `benchmarks/` root.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub root: PathBuf,
    pub kernels: Vec<Kernel>,
}

impl Corpus {
    /// Loads every `kernel.toml` under `root`; any invalid manifest is an error.
    pub fn load(root: &Path) -> Result<Corpus, Vec<CorpusError>> {
        let mut dirs = Vec::new();
        find_kernel_dirs(root, &mut dirs).map_err(|e| {
            vec![CorpusError {
                path: root.to_path_buf(),
                message: format!("cannot read the corpus: {e}"),
            }]
        })?;
        dirs.sort();
        let mut kernels = Vec::new();
        let mut errors = Vec::new();
        for dir in dirs {
            match manifest::load(root, &dir) {
                Ok(kernel) => kernels.push(kernel),
                Err(e) => errors.push(e),
            }
        }
        for (i, k) in kernels.iter().enumerate() {
            if kernels[..i].iter().any(|other| other.name == k.name) {
                errors.push(CorpusError {
                    path: k.dir.clone(),
                    message: format!("a second kernel named {}", k.name),
                });
            }
        }
        if errors.is_empty() {
            Ok(Corpus {
                root: root.to_path_buf(),
                kernels,
            })
        } else {
            Err(errors)
        }
    }

    /// A kernel by name (`gemm`) or path under the root (`dense_linear_algebra/gemm`).
    pub fn find(&self, task_id: &str) -> Option<&Kernel> {
        let id = task_id.trim().trim_matches('/');
        let id = id.strip_prefix("benchmarks/").unwrap_or(id);
        self.kernels
            .iter()
            .find(|k| k.name == id || k.id == id || k.ident() == id)
    }

    /// The default corpus: `HPCAGENT_BENCHMARKS`, else `benchmarks/` next to the
    /// executable's source tree or the current directory.
    pub fn default_root() -> PathBuf {
        if let Ok(dir) = std::env::var("HPCAGENT_BENCHMARKS") {
            return PathBuf::from(dir);
        }
        let candidates = [
            std::env::current_dir().ok().map(|d| d.join("benchmarks")),
            Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benchmarks")),
        ];
        candidates
            .into_iter()
            .flatten()
            .find(|p| p.is_dir())
            .unwrap_or_else(|| PathBuf::from("benchmarks"))
    }
}

fn find_kernel_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.join("kernel.toml").is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            find_kernel_dirs(&path, out)?;
        }
    }
    Ok(())
}

/// The corpus at `root` whichever its format, and the kernels it cannot
/// offer with why (path key → reason): an HPCAgent-Bench checkout's
/// manifests in their graded form ([`hab::Kernel::graded`]), else every
/// `kernel.toml`, where any invalid one is an error.
pub fn load_any(root: &Path) -> Result<(Corpus, BTreeMap<String, String>), Vec<CorpusError>> {
    if !hab::is_checkout(root) {
        return Corpus::load(root).map(|c| (c, BTreeMap::new()));
    }
    let (kernels, refusals) = hab::load(root).map_err(|e| {
        vec![CorpusError {
            path: root.to_path_buf(),
            message: format!("cannot read the corpus: {e}"),
        }]
    })?;
    Ok(hab::graded_corpus(root, &kernels, refusals))
}

/// A stable hash of byte strings (hex).
pub fn fingerprint(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn narrow_integers_read_back_with_their_sign() {
        assert_eq!(DType::I8.int_le(&[0xFF]), -1);
        assert_eq!(DType::U8.int_le(&[0xFF]), 255);
        assert_eq!(DType::I16.int_le(&(-300i16).to_le_bytes()), -300);
        assert_eq!(DType::U16.int_le(&[0xFF, 0xFF]), 65535);
        assert_eq!(DType::I32.int_le(&(-5i32).to_le_bytes()), -5);
        assert_eq!(DType::Bool.int_le(&[1]), 1);
        assert_eq!(DType::from_numpy("int4"), Some(DType::I8));
        assert_eq!(DType::from_numpy("complex128"), Some(DType::C128));
        assert_eq!(DType::from_numpy("float16"), None);
    }
}

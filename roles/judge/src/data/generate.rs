//! Deterministic input generation.
//!
//! Each array gets its own ChaCha8 stream seeded from (seed, kernel, array),
//! so adding an array to a manifest does not change the others' values, and
//! the values do not depend on the order arrays are generated in. Floats are
//! drawn in f64 and rounded to the precision's type, so an fp32 case holds
//! exactly representable values that the float64 reference reads unchanged.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::{Case, DataError, io};
use sha2::{Digest, Sha256};

use crate::corpus::{DType, Init, Kernel};

/// Writes every input array of `case` into `dir` (atomically: a temporary
/// sibling directory renamed into place).
pub fn write_inputs(kernel: &Kernel, case: &Case, dir: &Path) -> Result<(), DataError> {
    let parent = dir.parent().expect("inputs dir has a parent");
    let tmp = super::readable_tempdir(parent)?;
    for spec in kernel.arrays.iter().filter(|a| a.role.is_input()) {
        let n = kernel.elements(spec, &case.sizes)?;
        let dtype = spec.elem.resolve(case.precision);
        let path = tmp.path().join(format!("{}.bin", spec.name));
        let mut file = std::fs::File::create(&path).map_err(io(&path))?;
        let mut values = Draw::new(
            spec.init,
            dtype,
            stream(case.seed, &kernel.name, &spec.name),
        );
        // In pieces: an XL array need not fit in memory twice.
        let mut chunk = vec![0u8; (1 << 20) / dtype.size() * dtype.size()];
        let mut left = n * dtype.size();
        while left > 0 {
            let piece = &mut chunk[..left.min(1 << 20) / dtype.size() * dtype.size()];
            values.fill(piece);
            file.write_all(piece).map_err(io(&path))?;
            left -= piece.len();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .map_err(io(&path))?;
    }
    super::publish(tmp.keep(), dir)
}

/// Values of one distribution as one element type, drawn in order from a
/// stream: filling an array piece by piece gives the same bytes as at once.
pub struct Draw {
    sample: Sampler,
    dtype: DType,
    rng: ChaCha8Rng,
}

impl Draw {
    pub fn new(init: Init, dtype: DType, rng: ChaCha8Rng) -> Draw {
        Draw {
            sample: Sampler::new(init),
            dtype,
            rng,
        }
    }

    /// Fills `out` (a whole number of elements) with the next values, little-endian.
    pub fn fill(&mut self, out: &mut [u8]) {
        for element in out.chunks_exact_mut(self.dtype.size()) {
            let v = self.sample.next(&mut self.rng);
            match self.dtype {
                DType::F64 => element.copy_from_slice(&v.to_le_bytes()),
                DType::F32 => element.copy_from_slice(&(v as f32).to_le_bytes()),
                DType::Bool => element[0] = u8::from(v != 0.0),
                DType::C128 => {
                    element[..8].copy_from_slice(&v.to_le_bytes());
                    element[8..].fill(0);
                }
                // The other integers: the low bytes of the value.
                _ => element.copy_from_slice(&(v as i64).to_le_bytes()[..element.len()]),
            }
        }
    }
}

fn stream(seed: u64, kernel: &str, array: &str) -> ChaCha8Rng {
    seeded_rng(&[&seed.to_le_bytes(), kernel.as_bytes(), array.as_bytes()])
}

/// A random stream keyed by the hash of `parts` (length-prefixed, so the
/// boundaries between parts matter).
pub fn seeded_rng(parts: &[&[u8]]) -> ChaCha8Rng {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    ChaCha8Rng::from_seed(hash.finalize().into())
}

/// Draws values of one distribution; keeps the spare of each Box-Muller pair.
struct Sampler {
    init: Init,
    spare: Option<f64>,
}

impl Sampler {
    fn new(init: Init) -> Sampler {
        Sampler { init, spare: None }
    }

    fn next(&mut self, rng: &mut ChaCha8Rng) -> f64 {
        match self.init {
            Init::Uniform => 2.0 * unit(rng) - 1.0,
            Init::Positive => 0.5 + unit(rng),
            Init::Zeros => 0.0,
            Init::Normal => self.normal(rng),
            Init::Lognormal => (0.5 * self.normal(rng)).exp(),
            Init::Int { lo, hi } => (lo + (rng.next_u64() % (hi - lo) as u64) as i64) as f64,
        }
    }

    fn normal(&mut self, rng: &mut ChaCha8Rng) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let u1 = 1.0 - unit(rng); // (0, 1]: ln is finite
        let u2 = unit(rng);
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

/// Uniform in [0, 1) with 53 random bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

//! Deterministic input generation.
//!
//! Each array gets its own ChaCha8 stream seeded from (seed, kernel, array),
//! so adding an array to a manifest does not change the others' values, and
//! the values do not depend on the order arrays are generated in. The values
//! themselves are [`hpcagent_runner::draw`]'s, as a timed pair draws them.

use std::io::Write;
use std::path::Path;

use rand_chacha::ChaCha8Rng;

use super::{Case, DataError, io};

use hpcagent_corpus::Kernel;
use hpcagent_runner::draw::{Draw, seeded_rng};

/// Writes every input array of `case` into `dir` (atomically: a temporary
/// sibling directory renamed into place).
pub fn write_inputs(kernel: &Kernel, case: &Case, dir: &Path) -> Result<(), DataError> {
    let parent = dir.parent().expect("inputs dir has a parent");
    let tmp = super::private_tempdir(parent)?;
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
    }
    super::publish(tmp.keep(), dir)
}

fn stream(seed: u64, kernel: &str, array: &str) -> ChaCha8Rng {
    seeded_rng(&[&seed.to_le_bytes(), kernel.as_bytes(), array.as_bytes()])
}

//! The cases a grade runs: the public one (the judge's preset and public
//! seed, which agents can reproduce), and for `Submit` held-out ones whose
//! seeds and sizes derive from the judge's secret and are never revealed.
//!
//! A grade's timed pairs run on sizes of their own ([`timed_sizes`]): the
//! public case's for `Score`; for `Submit`, fuzzed like a held-out case's
//! from a secret of that grade alone, as are the inputs drawn for them.
//!
//! Held-out sizes scale every size symbol (except the kernel's `fixed` ones)
//! by a factor in [0.85, 1.15], so a kernel tuned to the exact public sizes, or
//! one that hard-codes them, fails there and is reported as overfit.

use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;

use crate::data::Case;
use hpcagent_corpus::{Kernel, Precision, Preset, Sizes};
use hpcagent_runner::draw::seeded_rng;

/// The public case: what `Score` grades and `Task` describes.
pub fn public(kernel: &Kernel, precision: Precision, preset: Preset, seed: u64) -> Case {
    Case {
        precision,
        sizes: kernel.sizes(preset).clone(),
        seed,
    }
}

/// `count` held-out cases: odd ones at the public preset, even ones at S,
/// all with fuzzed sizes and secret seeds.
pub fn held_out(
    kernel: &Kernel,
    precision: Precision,
    preset: Preset,
    secret: u64,
    count: u32,
) -> Vec<Case> {
    (1..=count)
        .map(|i| {
            let base = if i % 2 == 1 { preset } else { Preset::S };
            let mut rng = stream(secret, &kernel.name, i);
            let seed = rng.next_u64();
            let sizes = fuzz(kernel, kernel.sizes(base), precision, base, &mut rng);
            Case {
                precision,
                sizes,
                seed,
            }
        })
        .collect()
}

/// The sizes of a grade's timed pairs: the public preset's for `Score`, and
/// for `Submit` those sizes fuzzed from `seed`, the grade's own secret.
pub fn timed_sizes(
    kernel: &Kernel,
    precision: Precision,
    preset: Preset,
    submit: bool,
    seed: &[u8; 32],
) -> Sizes {
    let sizes = kernel.sizes(preset);
    if !submit {
        return sizes.clone();
    }
    let mut rng = seeded_rng(&[b"timed sizes", seed, kernel.name.as_bytes()]);
    fuzz(kernel, sizes, precision, preset, &mut rng)
}

/// Scales each non-fixed size by 0.85–1.15, keeping every shape valid and
/// the case within its preset's memory ceiling; falls back to the unscaled
/// sizes after a few tries.
fn fuzz(
    kernel: &Kernel,
    sizes: &Sizes,
    precision: Precision,
    preset: Preset,
    rng: &mut ChaCha8Rng,
) -> Sizes {
    for _ in 0..8 {
        let mut fuzzed = sizes.clone();
        for (name, value) in fuzzed.iter_mut() {
            if kernel.fixed.contains(name) {
                continue;
            }
            let factor = 0.85 + 0.30 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            *value = ((*value as f64 * factor).round() as i64).max(1);
        }
        let fits = kernel.arrays.iter().all(|a| {
            kernel
                .shape(a, &fuzzed)
                .is_ok_and(|s| s.iter().all(|d| *d >= 1))
        }) && kernel
            .bytes(&fuzzed, precision)
            .is_ok_and(|b| b <= preset.byte_ceiling());
        if fits {
            return fuzzed;
        }
    }
    sizes.clone()
}

fn stream(secret: u64, kernel: &str, case: u32) -> ChaCha8Rng {
    seeded_rng(&[
        b"held-out",
        &secret.to_le_bytes(),
        kernel.as_bytes(),
        &case.to_le_bytes(),
    ])
}

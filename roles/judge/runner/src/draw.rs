//! Drawing a distribution's values as an element type, from a stream that
//! a seed and names key: the inputs a case is made of, and the ones a timed
//! pair is drawn on in place (the same draw, piece by piece or at once).
//! Floats are drawn in f64 and rounded to the precision's type, so an fp32
//! input holds exactly representable values that a float64 reference reads
//! unchanged.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use hpcagent_corpus::{DType, Init};

/// Values of one distribution as one element type, drawn in order from a
/// stream: filling an array piece by piece gives the same bytes as at once.
pub struct Draw {
    init: Init,
    dtype: DType,
    rng: ChaCha8Rng,
    /// The second value of the last Box-Muller pair, not yet used.
    spare: Option<f64>,
}

impl Draw {
    pub fn new(init: Init, dtype: DType, rng: ChaCha8Rng) -> Draw {
        Draw {
            init,
            dtype,
            rng,
            spare: None,
        }
    }

    /// The draw that [`Draw::new`]'s would be after `element` elements
    /// (an even number: normal values come in pairs), without drawing
    /// them: each piece of an array can be drawn apart, on its own CPU.
    pub fn from_element(init: Init, dtype: DType, mut rng: ChaCha8Rng, element: u64) -> Draw {
        assert!(
            element.is_multiple_of(2),
            "a draw starts at an even element"
        );
        // A distribution that draws takes one 64-bit word, two of the
        // stream's 32-bit words, per element.
        rng.set_word_pos(rng.get_word_pos() + 2 * element as u128);
        Draw::new(init, dtype, rng)
    }

    /// Fills `out` (a whole number of elements) with the next values, little-endian.
    pub fn fill(&mut self, out: &mut [u8]) {
        // Every distribution but the normal ones is one word of the stream
        // per element: those are drawn a block of words at a time, which
        // costs a fifth of drawing each word alone (timed pairs draw
        // hundreds of megabytes per grade of a large kernel).
        match self.init {
            Init::Zeros => out.fill(0),
            Init::Uniform => self.fill_words(out, |x| 2.0 * unit_of(x) - 1.0),
            Init::Positive => self.fill_words(out, |x| 0.5 + unit_of(x)),
            Init::Int { lo, hi } => {
                self.fill_words(out, move |x| (lo + (x % (hi - lo) as u64) as i64) as f64)
            }
            Init::Normal => self.fill_normal(out, |v| v),
            Init::Lognormal => self.fill_normal(out, |v| (0.5 * v).exp()),
        }
    }

    /// Fills `out` with `value` of each next standard normal value.
    fn fill_normal(&mut self, out: &mut [u8], value: impl Fn(f64) -> f64) {
        for element in out.chunks_exact_mut(self.dtype.size()) {
            let v = self.normal();
            put(self.dtype, element, value(v));
        }
    }

    /// The next standard normal value (Box-Muller: two per two words).
    fn normal(&mut self) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let u1 = 1.0 - unit(&mut self.rng); // (0, 1]: ln is finite
        let u2 = unit(&mut self.rng);
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }

    /// Fills `out` with `value` of each next word of the stream.
    fn fill_words(&mut self, out: &mut [u8], value: impl Fn(u64) -> f64) {
        // The floats without `put`'s match on every element: an 84 MB
        // uniform f64 array took 29 ms so, 55-64 ms through `put`.
        match self.dtype {
            DType::F64 => self.fill_f64(out, value),
            DType::F32 => self.fill_with(out, |e, x| {
                e.copy_from_slice(&(value(x) as f32).to_le_bytes())
            }),
            dtype => self.fill_with(out, |e, x| put(dtype, e, value(x))),
        }
    }

    /// Fills `out` (whole f64s) with `value` of each next word of the
    /// stream, the words drawn into `out` itself and turned into values in
    /// place, without a buffer of words between: the same bytes.
    fn fill_f64(&mut self, out: &mut [u8], value: impl Fn(u64) -> f64) {
        for piece in out.chunks_mut(8 * 512) {
            self.rng.fill_bytes(piece);
            for element in piece.chunks_exact_mut(8) {
                let word = u64::from_le_bytes((&*element).try_into().expect("8 bytes"));
                element.copy_from_slice(&value(word).to_le_bytes());
            }
        }
    }

    /// Calls `write` on each element of `out` with the next word of the
    /// stream. The stream's bytes, read as little-endian words, are the
    /// words `next_u64` would have returned one by one.
    fn fill_with(&mut self, out: &mut [u8], write: impl Fn(&mut [u8], u64)) {
        const WORDS: usize = 512;
        let size = self.dtype.size();
        let mut words = [0u8; 8 * WORDS];
        for piece in out.chunks_mut(WORDS * size) {
            let words = &mut words[..8 * (piece.len() / size)];
            self.rng.fill_bytes(words);
            for (element, word) in piece.chunks_exact_mut(size).zip(words.chunks_exact(8)) {
                write(
                    element,
                    u64::from_le_bytes(word.try_into().expect("8 bytes")),
                );
            }
        }
    }
}

/// Writes `v` into `element` as `dtype`, little-endian.
fn put(dtype: DType, element: &mut [u8], v: f64) {
    match dtype {
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

/// Uniform in [0, 1) with 53 random bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    unit_of(rng.next_u64())
}

/// Uniform in [0, 1) from the top 53 bits of `word`.
fn unit_of(word: u64) -> f64 {
    // Through i64, the same value (below 2^53, exact either way): a
    // u64's conversion is a branch and two of them without AVX-512.
    ((word >> 11) as i64) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each element drawn alone from `next_u64`, as the stream defines it.
    fn one_by_one(init: Init, dtype: DType, rng: &mut ChaCha8Rng, n: usize) -> Vec<u8> {
        let mut spare = None;
        let mut out = vec![0u8; n * dtype.size()];
        for element in out.chunks_exact_mut(dtype.size()) {
            let mut normal = |rng: &mut ChaCha8Rng| {
                spare.take().unwrap_or_else(|| {
                    let (u1, u2) = (1.0 - unit(rng), unit(rng));
                    let (r, theta) = ((-2.0 * u1.ln()).sqrt(), std::f64::consts::TAU * u2);
                    spare = Some(r * theta.sin());
                    r * theta.cos()
                })
            };
            let v = match init {
                Init::Uniform => 2.0 * unit(rng) - 1.0,
                Init::Positive => 0.5 + unit(rng),
                Init::Zeros => 0.0,
                Init::Normal => normal(rng),
                Init::Lognormal => (0.5 * normal(rng)).exp(),
                Init::Int { lo, hi } => (lo + (rng.next_u64() % (hi - lo) as u64) as i64) as f64,
            };
            put(dtype, element, v);
        }
        out
    }

    #[test]
    fn a_block_of_words_draws_what_one_word_at_a_time_draws() {
        let inits = [
            Init::Uniform,
            Init::Positive,
            Init::Zeros,
            Init::Normal,
            Init::Lognormal,
            Init::Int { lo: -3, hi: 9 },
        ];
        let dtypes = [
            DType::F64,
            DType::F32,
            DType::I32,
            DType::I8,
            DType::Bool,
            DType::C128,
        ];
        // More than a block of words, and not a whole number of blocks.
        let n = 1337;
        for init in inits {
            for dtype in dtypes {
                let rng = || seeded_rng(&[b"draw", format!("{init:?}{dtype:?}").as_bytes()]);
                let expected = one_by_one(init, dtype, &mut rng(), n);
                let mut at_once = vec![0u8; n * dtype.size()];
                Draw::new(init, dtype, rng()).fill(&mut at_once);
                assert_eq!(at_once, expected, "{init:?} as {dtype:?}, at once");
                // In uneven pieces, as a case is written to its file.
                let mut pieces = vec![0u8; n * dtype.size()];
                let mut draw = Draw::new(init, dtype, rng());
                let mut at = 0;
                for (i, size) in [1, 7, 512, 3, 600].into_iter().cycle().enumerate() {
                    if at == n {
                        break;
                    }
                    let end = (at + size + i % 2).min(n);
                    draw.fill(&mut pieces[at * dtype.size()..end * dtype.size()]);
                    at = end;
                }
                assert_eq!(pieces, expected, "{init:?} as {dtype:?}, in pieces");
                // From an even element on, apart from what comes before it.
                let mut apart = vec![0u8; n * dtype.size()];
                let (head, tail) = apart.split_at_mut(600 * dtype.size());
                Draw::from_element(init, dtype, rng(), 600).fill(tail);
                Draw::from_element(init, dtype, rng(), 0).fill(head);
                assert_eq!(apart, expected, "{init:?} as {dtype:?}, apart");
            }
        }
    }
}

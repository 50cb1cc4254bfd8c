//! Comparing a submission's outputs with the reference's.
//!
//! Per element: integers compare exactly; floats must have NaN where the
//! reference has NaN, the same infinities with the same signs, and otherwise
//! |expected − actual| ≤ atol·s + rtol·|expected|, where s is the largest
//! finite |expected| of the output when above 1. Scaling atol that way keeps
//! a sum that cancels to near zero (an element of a gemm at fp32) from failing
//! on rounding the size of its terms, while an output of zeros where the
//! reference is of order one still fails. An element still holding the canary
//! was never written. The reference is float64 whatever the precision.

use serde::Serialize;

use crate::finite::finite_or_string;
use hpcagent_corpus::{DType, Tolerance};

pub mod canary;

/// The first element out of tolerance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    pub output: String,
    pub index: Vec<i64>,
    #[serde(serialize_with = "finite_or_string")]
    pub expected: f64,
    #[serde(serialize_with = "finite_or_string")]
    pub actual: f64,
}

/// The result of comparing one or more outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub correct: bool,
    pub max_abs_error: f64,
    pub max_rel_error: f64,
    pub first: Option<Mismatch>,
    /// Why the first mismatch failed, in words.
    pub message: Option<String>,
}

impl Default for Comparison {
    fn default() -> Self {
        Comparison {
            correct: true,
            max_abs_error: 0.0,
            max_rel_error: 0.0,
            first: None,
            message: None,
        }
    }
}

impl Comparison {
    /// Folds another output's comparison into this one.
    pub fn merge(&mut self, other: Comparison) {
        self.max_abs_error = self.max_abs_error.max(other.max_abs_error);
        self.max_rel_error = self.max_rel_error.max(other.max_rel_error);
        if self.correct && !other.correct {
            self.correct = false;
            self.first = other.first;
            self.message = other.message;
        }
    }

    fn fail(&mut self, mismatch: Mismatch, message: String) {
        if self.correct {
            self.correct = false;
            self.first = Some(mismatch);
            self.message = Some(message);
        }
    }
}

/// One output as the submission wrote it and as the reference computed it.
pub struct Output<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: &'a [i64],
    /// Raw little-endian elements of `dtype`.
    pub actual: &'a [u8],
    /// Raw little-endian float64 (floats) or `dtype` (integers).
    pub expected: &'a [u8],
}

/// Compares one output.
pub fn compare(out: &Output<'_>, tolerance: Tolerance) -> Comparison {
    let elements: usize = out.shape.iter().product::<i64>().max(0) as usize;
    let mut result = Comparison::default();
    let expected_size = if out.dtype.is_float() {
        8
    } else {
        out.dtype.size()
    };
    if out.actual.len() != elements * out.dtype.size()
        || out.expected.len() != elements * expected_size
    {
        result.correct = false;
        result.message = Some(format!("output {} has the wrong size", out.name));
        return result;
    }
    if exact(out) {
        return result;
    }
    let tolerance = if out.dtype.is_float() && tolerance.scaled {
        let scale = expected_floats(out)
            .map(f64::abs)
            .filter(|v| v.is_finite())
            .fold(1.0f64, f64::max);
        Tolerance::scaled(tolerance.rtol, tolerance.atol * scale)
    } else {
        tolerance
    };
    // Every timed call of a grade is compared, so the common case (every
    // element right) takes a tight pass over typed values; only an output
    // with something to report goes element by element below.
    if let Some(errors) = all_within(out, tolerance) {
        (result.max_abs_error, result.max_rel_error) = errors;
        return result;
    }
    for i in 0..elements {
        let raw = &out.actual[i * out.dtype.size()..(i + 1) * out.dtype.size()];
        let mismatch = |expected, actual| Mismatch {
            output: out.name.to_string(),
            index: unravel(i, out.shape),
            expected,
            actual,
        };
        if canary::untouched(out.dtype, raw) {
            let e = expected_at(out, i);
            result.fail(
                mismatch(e, f64::NAN),
                format!(
                    "output {}{} was never written",
                    out.name,
                    format_index(&unravel(i, out.shape))
                ),
            );
            continue;
        }
        if out.dtype == DType::C128 {
            compare_complex(out, i, raw, tolerance, &mut result, mismatch);
        } else if out.dtype.is_float() {
            compare_float(out, i, raw, tolerance, &mut result, mismatch);
        } else {
            let a = int_at(out.dtype, raw);
            let e = int_at(
                out.dtype,
                &out.expected[i * expected_size..(i + 1) * expected_size],
            );
            let diff = (a as i128 - e as i128).unsigned_abs() as f64;
            result.max_abs_error = result.max_abs_error.max(diff);
            if a != e {
                result.fail(
                    mismatch(e as f64, a as f64),
                    describe(out, i, e as f64, a as f64),
                );
            }
        }
    }
    result
}

fn compare_float(
    out: &Output<'_>,
    i: usize,
    raw: &[u8],
    tolerance: Tolerance,
    result: &mut Comparison,
    mismatch: impl Fn(f64, f64) -> Mismatch,
) {
    let a = match out.dtype {
        DType::F32 => f32::from_le_bytes(raw.try_into().expect("4 bytes")) as f64,
        _ => f64::from_le_bytes(raw.try_into().expect("8 bytes")),
    };
    let e = expected_at(out, i);
    let (ok, errors) = element(e, a, tolerance);
    if let Some((abs, rel)) = errors {
        result.max_abs_error = result.max_abs_error.max(abs);
        result.max_rel_error = result.max_rel_error.max(rel);
    }
    if !ok {
        if !a.is_finite() && e.is_finite() {
            result.max_abs_error = f64::INFINITY;
            result.max_rel_error = f64::INFINITY;
        }
        result.fail(mismatch(e, a), describe(out, i, e, a));
    }
}

/// A complex element against the reference's: NaN and infinite parts
/// where the reference has them, else |a − e| ≤ atol + rtol·|e| with
/// complex moduli. The mismatch names the real parts; the message both.
fn compare_complex(
    out: &Output<'_>,
    i: usize,
    raw: &[u8],
    tolerance: Tolerance,
    result: &mut Comparison,
    mismatch: impl Fn(f64, f64) -> Mismatch,
) {
    let parts = |b: &[u8]| {
        let part = |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8 bytes"));
        (part(&b[..8]), part(&b[8..16]))
    };
    let (a, e) = (parts(raw), parts(&out.expected[i * 16..i * 16 + 16]));
    let special = |x: f64| !x.is_finite();
    let ok = if special(e.0) || special(e.1) {
        let same = |e: f64, a: f64| if e.is_nan() { a.is_nan() } else { a == e };
        same(e.0, a.0) && same(e.1, a.1)
    } else if special(a.0) || special(a.1) {
        result.max_abs_error = f64::INFINITY;
        result.max_rel_error = f64::INFINITY;
        false
    } else {
        let diff = (e.0 - a.0).hypot(e.1 - a.1);
        let magnitude = e.0.hypot(e.1);
        result.max_abs_error = result.max_abs_error.max(diff);
        let rel = diff / magnitude.max(tolerance.atol).max(f64::MIN_POSITIVE);
        result.max_rel_error = result.max_rel_error.max(rel);
        diff <= tolerance.atol + tolerance.rtol * magnitude
    };
    if !ok {
        let message = format!(
            "output {}{}: expected {}{:+}i, got {}{:+}i",
            out.name,
            format_index(&unravel(i, out.shape)),
            e.0,
            e.1,
            a.0,
            a.1
        );
        result.fail(mismatch(e.0, a.0), message);
    }
}

/// Whether `out` has the reference's very bits (a submission against the
/// baseline whose arithmetic it kept), none of them a canary: right, with
/// no error, before any tolerance is worked out.
fn exact(out: &Output<'_>) -> bool {
    let canary = match out.dtype {
        DType::F64 => canary::F64,
        DType::F32 => return false,
        _ => return out.actual == out.expected,
    };
    out.actual == out.expected
        && !out
            .actual
            .chunks_exact(8)
            .any(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) == canary)
}

/// The largest absolute and relative errors when every element is within
/// `tolerance` and none is a canary; `None` when one is not (the caller
/// then finds which, and why). Agrees with the element-wise pass: the
/// same conditions, the same errors.
fn all_within(out: &Output<'_>, tolerance: Tolerance) -> Option<(f64, f64)> {
    match out.dtype {
        // Integers are exact: `exact` has said they are not; complex
        // numbers go element by element.
        DType::I64
        | DType::I32
        | DType::I16
        | DType::I8
        | DType::U16
        | DType::U8
        | DType::Bool
        | DType::C128 => None,
        DType::F32 => floats_within(
            out.actual.chunks_exact(4).map(|b| {
                let bits = u32::from_le_bytes(b.try_into().expect("4 bytes"));
                (f32::from_bits(bits) as f64, bits == canary::F32)
            }),
            expected_floats(out),
            tolerance,
        ),
        DType::F64 => floats_within(
            out.actual.chunks_exact(8).map(|b| {
                let bits = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                (f64::from_bits(bits), bits == canary::F64)
            }),
            expected_floats(out),
            tolerance,
        ),
    }
}

/// `all_within` over (value, still the canary) and the reference's values.
fn floats_within(
    actual: impl Iterator<Item = (f64, bool)>,
    expected: impl Iterator<Item = f64>,
    tolerance: Tolerance,
) -> Option<(f64, f64)> {
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    for ((a, untouched), e) in actual.zip(expected) {
        if untouched {
            return None;
        }
        let (ok, errors) = element(e, a, tolerance);
        if let Some((abs, rel)) = errors {
            max_abs = max_abs.max(abs);
            max_rel = max_rel.max(rel);
        }
        if !ok {
            return None;
        }
    }
    Some((max_abs, max_rel))
}

/// One float element against the reference's: whether it is right (NaN
/// where it is NaN, the same infinity, else within `tolerance`), and its
/// absolute and relative errors when both are finite. Both passes use it,
/// so they cannot disagree.
fn element(e: f64, a: f64, tolerance: Tolerance) -> (bool, Option<(f64, f64)>) {
    if e.is_nan() {
        (a.is_nan(), None)
    } else if e.is_infinite() {
        (a == e, None)
    } else if !a.is_finite() {
        (false, None)
    } else {
        let diff = (e - a).abs();
        let rel = diff / e.abs().max(tolerance.atol).max(f64::MIN_POSITIVE);
        (
            diff <= tolerance.atol + tolerance.rtol * e.abs(),
            Some((diff, rel)),
        )
    }
}

/// The reference's float64 elements.
fn expected_floats<'a>(out: &Output<'a>) -> impl Iterator<Item = f64> + 'a {
    out.expected
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
}

fn expected_at(out: &Output<'_>, i: usize) -> f64 {
    if out.dtype.is_float() {
        f64::from_le_bytes(out.expected[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    } else {
        let size = out.dtype.size();
        int_at(out.dtype, &out.expected[i * size..(i + 1) * size]) as f64
    }
}

fn int_at(dtype: DType, raw: &[u8]) -> i64 {
    dtype.int_le(raw)
}

fn describe(out: &Output<'_>, i: usize, expected: f64, actual: f64) -> String {
    format!(
        "output {}{}: expected {expected}, got {actual}",
        out.name,
        format_index(&unravel(i, out.shape))
    )
}

/// Row-major flat index → one index per dimension.
pub fn unravel(mut flat: usize, shape: &[i64]) -> Vec<i64> {
    let mut index = vec![0; shape.len()];
    for (d, &extent) in shape.iter().enumerate().rev() {
        let extent = extent.max(1) as usize;
        index[d] = (flat % extent) as i64;
        flat /= extent;
    }
    index
}

fn format_index(index: &[i64]) -> String {
    let parts: Vec<String> = index.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn check(actual: &[f64], expected: &[f64]) -> Comparison {
        check_bytes(&f64s(actual), &f64s(expected))
    }

    /// A 2x2 f64 output `C` held to its expected bytes.
    fn check_bytes(actual: &[u8], expected: &[u8]) -> Comparison {
        compare(
            &Output {
                name: "C",
                dtype: DType::F64,
                shape: &[2, 2],
                actual,
                expected,
            },
            Tolerance::scaled(1e-9, 1e-11),
        )
    }

    #[test]
    fn within_tolerance_passes_and_reports_errors() {
        let c = check(&[1.0, 2.0 + 1e-10, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.0]);
        assert!(c.correct, "{c:?}");
        assert!(c.max_abs_error > 0.0 && c.max_rel_error < 1e-9, "{c:?}");
        assert!(check(&[1.0, 2.0, 3.0, 0.0], &[1.0, 2.0, 3.0, 1e-12]).correct);
    }

    #[test]
    fn identical_bits_are_exact_unless_one_is_the_canary() {
        let c = check(&[1.0, -0.0, f64::NAN, 4.0], &[1.0, -0.0, f64::NAN, 4.0]);
        assert!(c.correct && c.max_abs_error == 0.0, "{c:?}");
        // A baseline that left an element unwritten does not vouch for a
        // submission that leaves the same one.
        let canary = f64::from_bits(canary::F64);
        let c = check(&[1.0, canary, 3.0, 4.0], &[1.0, canary, 3.0, 4.0]);
        assert!(!c.correct, "{c:?}");
        assert_eq!(c.message.unwrap(), "output C[0,1] was never written");
    }

    #[test]
    fn absolute_tolerance_scales_with_the_output() {
        // 1e-9 off on an element of ~0 passes next to elements of 1000 ...
        assert!(check(&[1000.0, 1e-9, 3.0, 4.0], &[1000.0, 0.0, 3.0, 4.0]).correct);
        // ... but not next to elements of order one, and zeros never pass for order-one data.
        assert!(!check(&[1.0, 1e-9, 3.0, 4.0], &[1.0, 0.0, 3.0, 4.0]).correct);
        assert!(!check(&[0.0, 0.0, 0.0, 0.0], &[1.0, 0.5, 3.0, 4.0]).correct);
    }

    #[test]
    fn complex_outputs_compare_by_modulus() {
        let complex = |v: &[(f64, f64)]| -> Vec<u8> {
            v.iter()
                .flat_map(|(re, im)| re.to_le_bytes().into_iter().chain(im.to_le_bytes()))
                .collect()
        };
        let expected = complex(&[(3.0, 4.0), (f64::NAN, 1.0)]);
        let check = |actual: &[(f64, f64)]| {
            let actual = complex(actual);
            compare(
                &Output {
                    name: "z",
                    dtype: DType::C128,
                    shape: &[2],
                    actual: &actual,
                    expected: &expected,
                },
                Tolerance::plain(1e-9, 1e-11),
            )
        };
        // 5e-9 off on |z| = 5 is within 1e-9·5 + 1e-11.
        assert!(check(&[(3.0 + 3e-9, 4.0 + 4e-9), (f64::NAN, 1.0)]).correct);
        let wrong = check(&[(3.0, 4.1), (f64::NAN, 1.0)]);
        assert!(!wrong.correct);
        assert_eq!(
            wrong.message.unwrap(),
            "output z[0]: expected 3+4i, got 3+4.1i"
        );
        // A NaN part must be NaN where the reference's is.
        assert!(!check(&[(3.0, 4.0), (0.0, 1.0)]).correct);
    }

    #[test]
    fn a_plain_tolerance_does_not_scale() {
        // HPCAgent-Bench's rule: next to elements of 1000, 1e-9 off on ~0 is
        // beyond atol 1e-11 as given.
        let (a, e) = (f64s(&[1000.0, 1e-9]), f64s(&[1000.0, 0.0]));
        let out = Output {
            name: "C",
            dtype: DType::F64,
            shape: &[2],
            actual: &a,
            expected: &e,
        };
        assert!(compare(&out, Tolerance::scaled(1e-9, 1e-11)).correct);
        assert!(!compare(&out, Tolerance::plain(1e-9, 1e-11)).correct);
    }

    #[test]
    fn first_mismatch_has_its_index() {
        let c = check(&[1.0, 2.0, 3.5, 9.0], &[1.0, 2.0, 3.0, 4.0]);
        assert!(!c.correct);
        assert_eq!(c.first.as_ref().unwrap().index, [1, 0]);
        assert_eq!(c.message.unwrap(), "output C[1,0]: expected 3, got 3.5");
    }

    #[test]
    fn nan_and_inf_positions_and_signs_must_match() {
        assert!(
            check(
                &[f64::NAN, 1.0, f64::INFINITY, 0.0],
                &[f64::NAN, 1.0, f64::INFINITY, 0.0]
            )
            .correct
        );
        assert!(!check(&[0.0, 1.0, 1.0, 0.0], &[f64::NAN, 1.0, 1.0, 0.0]).correct);
        assert!(!check(&[f64::NAN, 1.0, 1.0, 0.0], &[0.0, 1.0, 1.0, 0.0]).correct);
        assert!(
            !check(
                &[0.0, 1.0, f64::NEG_INFINITY, 0.0],
                &[0.0, 1.0, f64::INFINITY, 0.0]
            )
            .correct
        );
    }

    #[test]
    fn canary_means_never_written_even_against_nan() {
        let mut actual = f64s(&[1.0, 2.0, 3.0, 4.0]);
        actual[8..16].copy_from_slice(&canary::F64.to_le_bytes());
        let c = check_bytes(&actual, &f64s(&[1.0, f64::NAN, 3.0, 4.0]));
        assert_eq!(c.message.unwrap(), "output C[0,1] was never written");
    }

    #[test]
    fn integers_are_exact() {
        let a: Vec<u8> = [3i64, 4].iter().flat_map(|x| x.to_le_bytes()).collect();
        let e: Vec<u8> = [3i64, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let c = compare(
            &Output {
                name: "counts",
                dtype: DType::I64,
                shape: &[2],
                actual: &a,
                expected: &e,
            },
            Tolerance::scaled(0.0, 0.0),
        );
        assert!(!c.correct);
        assert_eq!(c.max_abs_error, 1.0);
    }
}

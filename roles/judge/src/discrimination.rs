//! Whether a task tells a real solution from a trivial one.
//!
//! A task whose outputs a submission can match without computing them is
//! degenerate: its verdicts would reward nothing. `corpus check` refuses a
//! kernel when, at preset S, any of these trivial submissions passes the
//! verifier against the reference of one seed:
//!
//! - writing zeros to every output (and, whatever the tolerances, a task
//!   whose outputs all lie within ±0.01 is refused: zeros come too close);
//! - writing the reference outputs of another seed (outputs nearly constant
//!   across inputs);
//! - leaving every `inout` array as it came in (a kernel whose work does not
//!   show in its outputs).

use std::path::Path;

use crate::cases;
use crate::data::{CaseInputs, DataCache, DataError, Reference};
use hpcagent_corpus::{DType, Kernel, Precision, Preset, Tolerance};
use hpcagent_runner::verify::{self, Output};

/// Seeds of the two cases compared (any two distinct seeds will do).
const SEEDS: [u64; 2] = [1, 2];
/// Outputs all this close to zero make a task degenerate.
const NEAR_ZERO: f64 = 0.01;

/// Why the kernel is degenerate at `precision`, if it is.
pub async fn degenerate(
    data: &DataCache,
    kernel: &Kernel,
    precision: Precision,
) -> Result<Option<String>, DataError> {
    let mut cases = Vec::new();
    for seed in SEEDS {
        let case = cases::public(kernel, precision, Preset::S, seed);
        let inputs = data.inputs(kernel, &case).await?;
        let reference = data.reference(kernel, &inputs).await?;
        cases.push((inputs, reference));
    }
    let (inputs, reference) = &cases[0];
    let (_, other) = &cases[1];
    if largest_output(inputs, reference)? <= NEAR_ZERO {
        return Ok(Some(format!(
            "degenerate at {precision}: every output lies within ±{NEAR_ZERO}, so zeros come \
             too close; choose inputs or scalars whose outputs are larger"
        )));
    }
    let tolerance = kernel.tolerance(precision);
    let mut candidates = vec![
        ("writing zeros to every output", Candidate::Zeros),
        (
            "writing another input's reference outputs",
            Candidate::Reference(other),
        ),
    ];
    if inputs
        .arrays
        .iter()
        .any(|a| a.role.is_output() && a.input.is_some())
    {
        candidates.push((
            "leaving the inout arrays as they came in",
            Candidate::Inputs,
        ));
    }
    for (what, candidate) in candidates {
        if passes(inputs, reference, &candidate, tolerance)? {
            return Ok(Some(format!(
                "degenerate at {precision}: {what} passes the verifier; choose inputs, \
                 scalars or sizes whose outputs depend on the inputs and are not all near zero"
            )));
        }
    }
    Ok(None)
}

/// A submission that computes nothing.
enum Candidate<'a> {
    Zeros,
    Reference(&'a Reference),
    Inputs,
}

/// Whether `candidate`'s outputs all verify against `reference`.
fn passes(
    inputs: &CaseInputs,
    reference: &Reference,
    candidate: &Candidate<'_>,
    tolerance: Tolerance,
) -> Result<bool, DataError> {
    for array in inputs.arrays.iter().filter(|a| a.role.is_output()) {
        let expected_path = &reference.outputs[&array.name];
        let expected = read(expected_path)?;
        let actual = match candidate {
            Candidate::Zeros => vec![0u8; array.elements * array.dtype.size()],
            Candidate::Reference(other) => {
                as_dtype(&read(&other.outputs[&array.name])?, array.dtype)
            }
            Candidate::Inputs => match &array.input {
                Some(path) => read(path)?,
                // A pure output left alone holds the canary: it fails.
                None => return Ok(false),
            },
        };
        let output = Output {
            name: &array.name,
            dtype: array.dtype,
            shape: &array.shape,
            actual: &actual,
            expected: &expected,
        };
        if !verify::compare(&output, tolerance).correct {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The largest |value| among the reference outputs (float64 for floats).
fn largest_output(inputs: &CaseInputs, reference: &Reference) -> Result<f64, DataError> {
    let mut largest = 0.0f64;
    for array in inputs.arrays.iter().filter(|a| a.role.is_output()) {
        let bytes = read(&reference.outputs[&array.name])?;
        let values: Box<dyn Iterator<Item = f64>> = match array.dtype {
            DType::F64 | DType::F32 => Box::new(
                bytes
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))),
            ),
            DType::C128 => Box::new(bytes.chunks_exact(16).map(complex_modulus)),
            int => Box::new(
                bytes
                    .chunks_exact(int.size())
                    .map(move |c| int.int_le(c) as f64),
            ),
        };
        largest = values
            .filter(|v| v.is_finite())
            .fold(largest, |m, v| m.max(v.abs()));
    }
    Ok(largest)
}

/// |z| of a complex128 element.
fn complex_modulus(c: &[u8]) -> f64 {
    let part = |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8 bytes"));
    part(&c[..8]).hypot(part(&c[8..]))
}

fn read(path: &Path) -> Result<Vec<u8>, DataError> {
    std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reference bytes (float64 for floats) as an output of `dtype` holds them.
fn as_dtype(reference: &[u8], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => reference
            .chunks_exact(8)
            .flat_map(|c| (f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32).to_le_bytes())
            .collect(),
        _ => reference.to_vec(),
    }
}

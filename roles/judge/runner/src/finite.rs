//! Floats in the judge's JSON: a number when finite, else a string
//! ("inf", "-inf", "nan"), which JSON has no number for. Verdicts and
//! mismatches both carry such floats (a reference of NaN, an error of inf).

use serde::Serializer;

/// Writes a float as a JSON number when finite, else as "inf", "-inf" or "nan".
pub fn finite_or_string<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        s.serialize_f64(*value)
    } else if value.is_nan() {
        s.serialize_str("nan")
    } else if *value > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

//! The values output arrays hold before each call, so an element the kernel
//! never writes is caught instead of passing on leftover data.
//!
//! Floating-point canaries are quiet NaNs with a payload no arithmetic
//! produces (operations on NaN return the canonical NaN), so "still the
//! canary" means "never written", even where the reference itself is NaN.

use crate::corpus::DType;

pub const F64: u64 = 0x7FFC_A4A1_2E5C_0DE5;
pub const F32: u32 = 0x7FCA_4A12;
pub const I64: i64 = 0x5EAD_C0DE_CA4A_1234;
pub const I32: i32 = 0x5EAD_C0DE;

/// `elements` canaries of `dtype`, as bytes.
pub fn fill(dtype: DType, elements: usize) -> Vec<u8> {
    let one: Vec<u8> = match dtype {
        DType::F64 => F64.to_le_bytes().to_vec(),
        DType::F32 => F32.to_le_bytes().to_vec(),
        DType::I64 => I64.to_le_bytes().to_vec(),
        DType::I32 => I32.to_le_bytes().to_vec(),
        // Narrow integers and bools: any value is one a kernel could write.
        narrow => vec![0x5E; narrow.size()],
    };
    one.repeat(elements)
}

/// True when the element at `bytes` is still the canary (floats only: an
/// integer canary is an ordinary value a kernel could legitimately write).
pub fn untouched(dtype: DType, bytes: &[u8]) -> bool {
    match dtype {
        DType::F64 => bytes.try_into().ok().map(u64::from_le_bytes) == Some(F64),
        DType::F32 => bytes.try_into().ok().map(u32::from_le_bytes) == Some(F32),
        _ => false,
    }
}

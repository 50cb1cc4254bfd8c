//! The submission ABI: which arguments a kernel's symbol takes, in which order,
//! and how that reads in each language.
//!
//! `void <kernel>_<precision>(<pointers sorted by name>, <scalars and size
//! symbols sorted by name>, uint8_t *restrict workspace, const int64_t
//! workspace_size)`: names sort bytewise (uppercase first); inputs are
//! `const T *restrict`, outputs `T *restrict`; scalars are `const`; sizes and
//! integer scalars are `int64_t`. Arrays are row-major (C order).

use super::{DType, Kernel, Precision, Role};
use crate::language::Language;

/// One argument of the canonical signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// An array: `const T *restrict` for inputs, `T *restrict` for outputs.
    Array {
        name: String,
        dtype: DType,
        role: Role,
        shape: Vec<String>,
    },
    /// A scalar or size symbol, passed by value.
    Scalar {
        name: String,
        dtype: DType,
    },
    Workspace,
    WorkspaceSize,
}

/// The arguments of `kernel` at `precision`, in ABI order.
pub fn args(kernel: &Kernel, precision: Precision) -> Vec<Arg> {
    let mut out: Vec<Arg> = kernel
        .arrays
        .iter()
        .map(|a| Arg::Array {
            name: a.name.clone(),
            dtype: a.elem.resolve(precision),
            role: a.role,
            shape: a.shape_text.clone(),
        })
        .collect();
    let mut by_value: Vec<Arg> = kernel
        .scalars
        .iter()
        .map(|s| Arg::Scalar {
            name: s.name.clone(),
            // Integer scalars are passed as int64_t, whatever they hold.
            dtype: match s.elem.resolve(precision) {
                DType::I32 => DType::I64,
                other => other,
            },
        })
        .chain(kernel.size_symbols.iter().map(|s| Arg::Scalar {
            name: s.clone(),
            dtype: DType::I64,
        }))
        .collect();
    by_value.sort_by(|a, b| arg_name(a).as_bytes().cmp(arg_name(b).as_bytes()));
    out.extend(by_value);
    out.push(Arg::Workspace);
    out.push(Arg::WorkspaceSize);
    out
}

pub fn arg_name(arg: &Arg) -> &str {
    match arg {
        Arg::Array { name, .. } | Arg::Scalar { name, .. } => name,
        Arg::Workspace => "workspace",
        Arg::WorkspaceSize => "workspace_size",
    }
}

/// The exact C prototype, e.g. `void gemm_fp64(const double *restrict A, …)`.
pub fn c_prototype(kernel: &Kernel, precision: Precision) -> String {
    prototype(kernel, precision, "", "restrict")
}

/// The signature as the given language must declare it.
pub fn language_prototype(kernel: &Kernel, precision: Precision, language: Language) -> String {
    match language {
        Language::C => c_prototype(kernel, precision),
        Language::Cpp | Language::Cuda | Language::Hip => {
            prototype(kernel, precision, "extern \"C\" ", "__restrict__")
        }
        Language::Fortran => fortran_interface(kernel, precision),
    }
}

fn prototype(kernel: &Kernel, precision: Precision, linkage: &str, restrict: &str) -> String {
    let params: Vec<String> = args(kernel, precision)
        .iter()
        .map(|arg| match arg {
            Arg::Array {
                name, dtype, role, ..
            } => {
                let konst = if *role == Role::In { "const " } else { "" };
                format!("{konst}{} *{restrict} {name}", dtype.c_type())
            }
            Arg::Scalar { name, dtype } => format!("const {} {name}", dtype.c_type()),
            Arg::Workspace => format!("uint8_t *{restrict} workspace"),
            Arg::WorkspaceSize => "const int64_t workspace_size".to_string(),
        })
        .collect();
    format!(
        "{linkage}void {}({})",
        kernel.symbol(precision),
        params.join(", ")
    )
}

/// A Fortran `bind(C)` subroutine header with declarations; array dimensions
/// are reversed because the data is row-major.
fn fortran_interface(kernel: &Kernel, precision: Precision) -> String {
    let args = args(kernel, precision);
    let symbol = kernel.symbol(precision);
    let names: Vec<&str> = args.iter().map(arg_name).collect();
    let mut out = format!(
        "subroutine {symbol}({}) bind(C, name=\"{symbol}\")\n  use iso_c_binding\n  implicit none\n",
        names.join(", ")
    );
    // Sizes must be declared before the array shapes that use them.
    let scalars_first = args.iter().filter(|a| matches!(a, Arg::Scalar { .. }));
    let rest = args.iter().filter(|a| !matches!(a, Arg::Scalar { .. }));
    for arg in scalars_first.chain(rest) {
        let line = match arg {
            Arg::Array {
                name,
                dtype,
                role,
                shape,
            } => {
                let intent = match role {
                    Role::In => "in",
                    Role::Out => "out",
                    Role::InOut => "inout",
                };
                let dims: Vec<&str> = shape.iter().rev().map(String::as_str).collect();
                format!(
                    "{}, intent({intent}) :: {name}({})",
                    dtype.fortran_type(),
                    dims.join(", ")
                )
            }
            Arg::Scalar { name, dtype } => {
                format!("{}, value, intent(in) :: {name}", dtype.fortran_type())
            }
            Arg::Workspace => "integer(c_int8_t), intent(inout) :: workspace(*)".to_string(),
            Arg::WorkspaceSize => {
                "integer(c_int64_t), value, intent(in) :: workspace_size".to_string()
            }
        };
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&format!("  ! ...\nend subroutine {symbol}"));
    out
}

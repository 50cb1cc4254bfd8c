//! A grade's run as the supervisor goes through it: the libraries, the
//! argument lists of its calls, and its steps, in order.
//!
//! `Score`: timed pairs against the baseline on fresh inputs at the public
//! sizes, then the public case, verified against the reference. `Submit`:
//! timed pairs at sizes of the grade's own, the public case, every
//! held-out case, and the public case twice more (its three answers must
//! agree to the bit). Pairs come first, so the baseline's time bounds
//! every later call of the submission (20 times it, at least half a second).

use std::path::PathBuf;

use crate::corpus::{Kernel, Precision, ScalarValue, Sizes, abi};
use crate::data::CaseInputs;
use crate::runner::protocol::{ArraySpec, RunArg, Step};
use crate::timing::StopRule;

/// Builds the steps of a run over `cases` (the public one first).
pub(crate) struct Planner<'a> {
    pub kernel: &'a Kernel,
    pub precision: Precision,
    pub calls: Vec<Vec<RunArg>>,
    pub steps: Vec<Step>,
}

impl<'a> Planner<'a> {
    pub fn new(kernel: &'a Kernel, precision: Precision) -> Planner<'a> {
        Planner {
            kernel,
            precision,
            calls: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// The argument list for `sizes`, added once.
    pub fn call(&mut self, sizes: &Sizes) -> Result<usize, String> {
        let args = call_args(self.kernel, self.precision, sizes)?;
        if let Some(i) = self.calls.iter().position(|c| *c == args) {
            return Ok(i);
        }
        self.calls.push(args);
        Ok(self.calls.len() - 1)
    }

    /// Timed pairs at `sizes` on inputs drawn from `seed`.
    pub fn pairs(&mut self, sizes: &Sizes, seed: [u8; 32], stop: StopRule) -> Result<(), String> {
        let call = self.call(sizes)?;
        self.steps.push(Step::Pairs {
            call,
            seed,
            stop,
            tolerance: self.kernel.tolerance(self.precision),
        });
        Ok(())
    }

    /// A check of the submission on `case`; its step's index.
    pub fn check(
        &mut self,
        label: &str,
        case: &CaseInputs,
        outputs: bool,
        digest: bool,
    ) -> Result<usize, String> {
        let call = self.call(&case.sizes)?;
        self.steps.push(Step::Check {
            label: label.to_string(),
            call,
            inputs: input_files(self.kernel, case),
            calls: 1,
            outputs,
            digest,
        });
        Ok(self.steps.len() - 1)
    }

    /// Profiled calls of the submission on `case`, for `seconds` (between
    /// `fewest` and `most` calls).
    pub fn profile(
        &mut self,
        case: &CaseInputs,
        seconds: f64,
        fewest: u32,
        most: u32,
    ) -> Result<(), String> {
        let call = self.call(&case.sizes)?;
        self.steps.push(Step::Profile {
            call,
            inputs: input_files(self.kernel, case),
            seconds,
            fewest,
            most,
        });
        Ok(())
    }

    /// The ABI's arrays, in argument order.
    pub fn arrays(&self) -> Vec<ArraySpec> {
        self.kernel
            .arrays
            .iter()
            .map(|a| ArraySpec {
                name: a.name.clone(),
                dtype: a.elem.resolve(self.precision),
                role: a.role,
                init: a.init,
            })
            .collect()
    }

    /// Bytes of outputs the checks send back.
    pub fn output_bytes(&self) -> u64 {
        self.steps
            .iter()
            .filter_map(|step| match step {
                Step::Check {
                    call,
                    outputs: true,
                    ..
                } => Some(*call),
                _ => None,
            })
            .flat_map(|call| self.array_bytes(call, true))
            .sum()
    }

    /// Bytes of every array (`outputs`: of the outputs only) of argument list `call`.
    pub fn array_bytes(&self, call: usize, outputs: bool) -> Vec<u64> {
        let arrays = self.arrays();
        self.calls[call]
            .iter()
            .filter_map(|arg| match arg {
                RunArg::Array { index, shape } => Some((&arrays[*index], shape)),
                _ => None,
            })
            .filter(|(spec, _)| !outputs || spec.role.is_output())
            .map(|(spec, shape)| (RunArg::elements(shape) * spec.dtype.size()) as u64)
            .collect()
    }
}

/// The arguments of `kernel` at `sizes`, in ABI order.
pub(crate) fn call_args(
    kernel: &Kernel,
    precision: Precision,
    sizes: &Sizes,
) -> Result<Vec<RunArg>, String> {
    let workspace = kernel.workspace_bytes(sizes)?;
    abi::args(kernel, precision)
        .into_iter()
        .map(|arg| {
            Ok(match arg {
                abi::Arg::Array { name, .. } => {
                    let index = kernel
                        .arrays
                        .iter()
                        .position(|a| a.name == name)
                        .expect("every ABI array is the kernel's");
                    RunArg::Array {
                        index,
                        shape: kernel.shape(&kernel.arrays[index], sizes)?,
                    }
                }
                abi::Arg::Scalar { name, dtype } => {
                    let value = match kernel.scalars.iter().find(|s| s.name == name) {
                        Some(s) => s.value,
                        None => ScalarValue::Int(
                            *sizes.get(&name).ok_or_else(|| format!("no size {name}"))?,
                        ),
                    };
                    match (value, dtype.is_float()) {
                        (ScalarValue::Int(i), false) => RunArg::Int(i),
                        (ScalarValue::Int(i), true) => float_arg(i as f64, dtype),
                        (ScalarValue::Real(f), true) => float_arg(f, dtype),
                        (ScalarValue::Real(f), false) => RunArg::Int(f as i64),
                    }
                }
                abi::Arg::Workspace => RunArg::Workspace(workspace),
                abi::Arg::WorkspaceSize => RunArg::Int(workspace as i64),
            })
        })
        .collect()
}

fn float_arg(value: f64, dtype: crate::corpus::DType) -> RunArg {
    if dtype == crate::corpus::DType::F32 {
        RunArg::F32(value as f32)
    } else {
        RunArg::F64(value)
    }
}

/// A case's input files, one per array of the kernel (`None` for outputs).
fn input_files(kernel: &Kernel, case: &CaseInputs) -> Vec<Option<PathBuf>> {
    kernel
        .arrays
        .iter()
        .map(|spec| {
            case.arrays
                .iter()
                .find(|a| a.name == spec.name)
                .and_then(|a| a.input.clone())
        })
        .collect()
}

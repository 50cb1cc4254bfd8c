//! A grade's run as the supervisor goes through it: the libraries, the
//! argument lists of its calls, and its steps, in order.
//!
//! `Score`: timed pairs against the baseline on fresh inputs at the public
//! sizes, then the public case, verified against the reference. `Submit`:
//! timed pairs at sizes of the grade's own, the public case, every
//! held-out case, and the public case twice more (its three answers must
//! agree to the bit). Pairs come first, so the baseline's time bounds
//! every later call of the submission (20 times it, at least half a second).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::data::{CaseInputs, Reference};
use hpcagent_corpus::{DType, Init, Kernel, Precision, ScalarValue, SizeError, Sizes, abi};
use hpcagent_runner::protocol::{ArraySpec, RunArg, Step};
use hpcagent_runner::timing::StopRule;

use super::{Checked, Read};

/// Why a run's argument lists cannot be made for a case.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error(transparent)]
    Size(#[from] SizeError),
    #[error("no size {0}")]
    NoSize(String),
    #[error("the case has no array {0}")]
    NoArray(String),
    #[error("the case has no value for {0}")]
    NoValue(String),
}

/// Builds the steps of a run over `cases` (the public one first).
pub(crate) struct Planner<'a> {
    pub kernel: &'a Kernel,
    pub precision: Precision,
    pub calls: Vec<Vec<RunArg>>,
    pub steps: Vec<Step>,
    /// Whether each case says its own shapes and scalar values (a corpus
    /// whose generator decides them), rather than the kernel at its sizes.
    pub per_case: bool,
    /// How timed pairs draw an array, by name, where not as the kernel
    /// says (a corpus whose draw depends on the shapes a call passes).
    pub draws: BTreeMap<String, Init>,
    /// Copies of the kernel's arrays in the run's buffers: a batch's
    /// checks each call on a copy of their own ([`Self::batch`]).
    copies: usize,
}

impl<'a> Planner<'a> {
    pub fn new(kernel: &'a Kernel, precision: Precision) -> Planner<'a> {
        Planner {
            kernel,
            precision,
            calls: Vec::new(),
            steps: Vec::new(),
            per_case: false,
            draws: BTreeMap::new(),
            copies: 1,
        }
    }

    /// A planner whose argument lists come from each case's own shapes
    /// and values.
    pub fn per_case(kernel: &'a Kernel, precision: Precision) -> Planner<'a> {
        Planner {
            per_case: true,
            ..Planner::new(kernel, precision)
        }
    }

    /// The argument list for `sizes`, added once.
    pub fn call(&mut self, sizes: &Sizes) -> Result<usize, PlanError> {
        let args = call_args(self.kernel, self.precision, sizes)?;
        Ok(self.add(args))
    }

    /// The argument list of `case`, added once.
    fn call_of(&mut self, case: &CaseInputs) -> Result<usize, PlanError> {
        let args = self.args_of(case)?;
        Ok(self.add(args))
    }

    /// The arguments of `case`: its own shapes and values, or the
    /// kernel's at its sizes.
    fn args_of(&self, case: &CaseInputs) -> Result<Vec<RunArg>, PlanError> {
        match self.per_case {
            true => case_args(self.kernel, self.precision, case),
            false => call_args(self.kernel, self.precision, &case.sizes),
        }
    }

    fn add(&mut self, args: Vec<RunArg>) -> usize {
        if let Some(i) = self.calls.iter().position(|c| *c == args) {
            return i;
        }
        self.calls.push(args);
        self.calls.len() - 1
    }

    /// Timed pairs draw each array named in `draws` so.
    pub fn draw_as(&mut self, draws: BTreeMap<String, Init>) {
        self.draws = draws;
    }

    /// Timed pairs with `case`'s shapes and scalars, on inputs drawn anew
    /// for every pair from `seed` (see [`Self::draw_as`]).
    pub fn pairs_drawn_on(
        &mut self,
        case: &CaseInputs,
        seed: [u8; 32],
        stop: StopRule,
    ) -> Result<(), PlanError> {
        let call = self.call_of(case)?;
        self.push_pairs(call, seed, stop, Vec::new());
        Ok(())
    }

    /// Timed pairs, each on copies of the next of `sets` (of one shape: the
    /// first's call), the warm-up on the first.
    pub fn pairs_on(&mut self, sets: &[&CaseInputs], stop: StopRule) -> Result<(), PlanError> {
        let Some(first) = sets.first() else {
            return Ok(());
        };
        let call = self.call_of(first)?;
        let sets = sets
            .iter()
            .map(|set| input_files(self.kernel, set))
            .collect();
        self.push_pairs(call, [0; 32], stop, sets);
        Ok(())
    }

    /// Timed pairs at `sizes` on inputs drawn from `seed`.
    pub fn pairs(
        &mut self,
        sizes: &Sizes,
        seed: [u8; 32],
        stop: StopRule,
    ) -> Result<(), PlanError> {
        let call = self.call(sizes)?;
        self.push_pairs(call, seed, stop, Vec::new());
        Ok(())
    }

    /// When the plan's pairs step stops, if it has one.
    pub fn pairs_stop(&self) -> Option<StopRule> {
        self.steps.iter().find_map(|step| match step {
            Step::Pairs { stop, .. } => Some(*stop),
            _ => None,
        })
    }

    /// A pairs step on `call` at the task's tolerance.
    fn push_pairs(
        &mut self,
        call: usize,
        seed: [u8; 32],
        stop: StopRule,
        sets: Vec<Vec<Option<PathBuf>>>,
    ) {
        self.steps.push(Step::Pairs {
            call,
            seed,
            stop,
            tolerance: self.kernel.tolerance(self.precision),
            sets,
        });
    }

    /// A check of the submission on `case`; its step's index.
    pub fn check(
        &mut self,
        label: &str,
        case: &CaseInputs,
        outputs: bool,
        digest: bool,
    ) -> Result<usize, PlanError> {
        self.check_calls(label, case, 1, outputs, digest)
    }

    /// As [`Self::check`], `calls` times on fresh copies of the inputs.
    pub fn check_calls(
        &mut self,
        label: &str,
        case: &CaseInputs,
        calls: u32,
        outputs: bool,
        digest: bool,
    ) -> Result<usize, PlanError> {
        let call = self.call_of(case)?;
        self.steps.push(Step::Check {
            label: label.to_string(),
            call,
            inputs: input_files(self.kernel, case),
            calls,
            outputs,
            digest,
        });
        Ok(self.steps.len() - 1)
    }

    /// A batch: a check of one call on each of `cases`, made in one
    /// continue of the runner and timed together (`Step::Batch`), each on
    /// a copy of the arrays of its own; the checks' steps.
    pub fn batch(&mut self, label: &str, cases: &[&CaseInputs]) -> Result<Vec<usize>, PlanError> {
        self.steps.push(Step::Batch {
            checks: cases.len() as u32,
        });
        self.copies = self.copies.max(cases.len());
        let arrays = self.kernel.arrays.len();
        let mut steps = Vec::with_capacity(cases.len());
        for (copy, case) in cases.iter().enumerate() {
            let args = self
                .args_of(case)?
                .into_iter()
                .map(|arg| match arg {
                    RunArg::Array { index, shape } => RunArg::Array {
                        index: index + copy * arrays,
                        shape,
                    },
                    other => other,
                })
                .collect();
            let call = self.add(args);
            let mut inputs = vec![None; copy * arrays];
            inputs.extend(input_files(self.kernel, case));
            self.steps.push(Step::Check {
                label: format!("{label} {copy}"),
                call,
                inputs,
                calls: 1,
                outputs: true,
                digest: false,
            });
            steps.push(self.steps.len() - 1);
        }
        Ok(steps)
    }

    /// `calls` empty calls on the run's baseline (an empty kernel where
    /// nothing is timed in pairs): the runner's per-call floor.
    pub fn floor(&mut self, calls: u32) {
        self.steps.push(Step::Floor { calls });
    }

    /// Profiled calls of the submission on `case`, for `seconds` (between
    /// `fewest` and `most` calls).
    pub fn profile(
        &mut self,
        case: &CaseInputs,
        seconds: f64,
        fewest: u32,
        most: u32,
    ) -> Result<(), PlanError> {
        let call = self.call_of(case)?;
        self.steps.push(Step::Profile {
            call,
            inputs: input_files(self.kernel, case),
            seconds,
            fewest,
            most,
        });
        Ok(())
    }

    /// The ABI's arrays, in argument order, once for each copy the
    /// run's batches use.
    pub fn arrays(&self) -> Vec<ArraySpec> {
        let arrays = self.kernel.arrays.iter().cycle();
        arrays
            .take(self.kernel.arrays.len() * self.copies)
            .map(|a| ArraySpec {
                name: a.name.clone(),
                dtype: a.elem.resolve(self.precision),
                role: a.role,
                init: self.draws.get(&a.name).copied().unwrap_or(a.init),
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
) -> Result<Vec<RunArg>, PlanError> {
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
                            *sizes
                                .get(&name)
                                .ok_or_else(|| PlanError::NoSize(name.clone()))?,
                        ),
                    };
                    scalar_arg(value, dtype)
                }
                abi::Arg::Workspace => RunArg::Workspace(workspace),
                abi::Arg::WorkspaceSize => RunArg::Int(workspace as i64),
            })
        })
        .collect()
}

/// The arguments of `kernel` for `case`, in ABI order: each array's shape
/// and each scalar's value as the case has them.
fn case_args(
    kernel: &Kernel,
    precision: Precision,
    case: &CaseInputs,
) -> Result<Vec<RunArg>, PlanError> {
    abi::args(kernel, precision)
        .into_iter()
        .map(|arg| {
            Ok(match arg {
                abi::Arg::Array { name, .. } => {
                    let index = kernel.arrays.iter().position(|a| a.name == name);
                    let data = case.arrays.iter().find(|a| a.name == name);
                    let (Some(index), Some(data)) = (index, data) else {
                        return Err(PlanError::NoArray(name));
                    };
                    RunArg::Array {
                        index,
                        shape: data.shape.clone(),
                    }
                }
                abi::Arg::Scalar { name, dtype } => {
                    let value = case
                        .scalars
                        .iter()
                        .find(|(n, ..)| *n == name)
                        .map(|(_, value, _)| *value)
                        .ok_or_else(|| PlanError::NoValue(name.clone()))?;
                    scalar_arg(value, dtype)
                }
                abi::Arg::Workspace => RunArg::Workspace(case.workspace_bytes),
                abi::Arg::WorkspaceSize => RunArg::Int(case.workspace_bytes as i64),
            })
        })
        .collect()
}

/// A by-value argument of `dtype` holding `value`.
fn scalar_arg(value: ScalarValue, dtype: DType) -> RunArg {
    match (value, dtype) {
        (ScalarValue::Int(i), DType::Bool) => RunArg::Bool(i != 0),
        (ScalarValue::Int(i), d) if !d.is_float() => RunArg::Int(i),
        (ScalarValue::Int(i), d) => float_arg(i as f64, d),
        (ScalarValue::Real(f), d) if d.is_float() => float_arg(f, d),
        (ScalarValue::Real(f), _) => RunArg::Int(f as i64),
    }
}

fn float_arg(value: f64, dtype: DType) -> RunArg {
    if dtype == DType::F32 {
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

/// The checks after the public one (step `public`): each held-out case,
/// and for `Submit` the public case twice more, whose answers must agree
/// with its first to the bit, unless the public step `repeats` itself
/// (several calls, every one's answer held against the first's).
pub(crate) fn checks_after_public<'a>(
    mut planner: Planner<'a>,
    public: Public,
    data: &[(CaseInputs, Reference)],
    submit: bool,
) -> Result<(Planner<'a>, Marks), PlanError> {
    let mut held_out = Vec::new();
    for (i, (inputs, _)) in data.iter().enumerate().skip(1) {
        held_out.push(planner.check(&format!("held-out {i}"), inputs, true, false)?);
    }
    let mut repeats = Vec::new();
    if submit && !public.repeats {
        for _ in 0..2 {
            repeats.push(planner.check("public again", &data[0].0, false, true)?);
        }
    }
    let stop = planner.pairs_stop();
    Ok((
        planner,
        Marks {
            public: public.step,
            held_out,
            timed: Vec::new(),
            repeats,
            stop,
        },
    ))
}

/// The public case's step, and whether it calls the submission often
/// enough (three times or more, digests kept) to be its own determinism
/// check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Public {
    pub step: usize,
    pub repeats: bool,
}

/// Where the verdict's steps are, before the data they read is at hand.
pub(crate) struct Marks {
    pub public: usize,
    pub held_out: Vec<usize>,
    /// Checks whose calls are the timed ones (timed against NumPy).
    pub timed: Vec<usize>,
    pub repeats: Vec<usize>,
    /// When the plan's timed pairs stop, if it has any.
    pub stop: Option<StopRule>,
}

impl Marks {
    /// The steps with the cases they ran (`data` in case order, public
    /// first; `timed`, the sets of the timed checks, in order).
    pub(crate) fn resolve<'a>(
        &'a self,
        data: &'a [(CaseInputs, Reference)],
        timed: &'a [(CaseInputs, Reference)],
    ) -> Read<'a> {
        Read {
            public: Checked {
                step: self.public,
                data: &data[0],
            },
            held_out: self
                .held_out
                .iter()
                .zip(&data[1..])
                .map(|(&step, data)| Checked { step, data })
                .collect(),
            timed: self
                .timed
                .iter()
                .zip(timed)
                .map(|(&step, data)| Checked { step, data })
                .collect(),
            repeats: &self.repeats,
            stop: self.stop,
        }
    }
}

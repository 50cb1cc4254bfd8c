//! Grading: build, baseline, run, verify, and the verdict.
//!
//! `Score` runs the public case: one warm-up call and N timed calls, each on
//! fresh copies of its inputs; every call but the last sees other values
//! (another seed, same sizes), so the last call, whose outputs are verified,
//! cannot be answered from a result cached by an earlier one. `Submit` also
//! runs the held-out cases in the same process and the same loaded library,
//! and requires the first call and the last two on the same inputs to agree
//! bit for bit. Only the verified call's answer is checked, so its time
//! bounds the kernel's from below (see [`slow_verified_call`]). A grade
//! holds one slot throughout.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::build::{BuildError, Built, Source, flags, passthrough_env};
use crate::cases;
use crate::corpus::{Kernel, Precision, Preset, ScalarValue, Tolerance, abi};
use crate::data::{CaseInputs, Reference, tail};
use crate::judge::{Code, Judge, JudgeError, Submission};
use crate::language::Language;
use crate::runner::protocol::{Event, Request, RunArg, RunCase};
use crate::runner::{End, Launch, RunOutcome, launch};
use crate::sandbox::{self, limits::Limits};
use crate::slots::Slot;
use crate::verdict::{Status, Timing, Verdict};
use crate::verify::{self, Comparison, Output};

/// Score (public case only) or Submit (plus held-out cases and determinism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Score,
    Submit,
}

/// How long one call may take: 20× the baseline (at least half a second), or
/// 30 s while the baseline itself is being measured.
fn call_budget(baseline: Option<&Timing>) -> Duration {
    let ns = baseline.map_or(30e9, |b| (b.median_ns * 20.0).max(0.5e9));
    Duration::from_secs_f64(ns / 1e9)
}

/// Time to start a runner: process start, reading inputs (at ≥ 500 MB/s), loading.
fn startup_budget(input_bytes: u64) -> Duration {
    Duration::from_secs(10) + Duration::from_secs_f64(input_bytes as f64 / 500e6)
}

/// How to run: calls, what to report, under which profiler.
#[derive(Clone)]
pub(crate) struct RunPlan<'a> {
    pub warmup: u32,
    pub reps: u32,
    pub digests: bool,
    pub baseline: Option<&'a Timing>,
    pub wrapper: Vec<String>,
    pub papi_events: Vec<String>,
}

/// A built submission, ready to run: the library and what the build said.
pub(crate) struct Prepared<'a> {
    pub kernel: &'a Kernel,
    pub precision: Precision,
    /// The public case's preset (the request's, else the judge's).
    pub preset: Preset,
    pub language: Language,
    pub built: Built,
}

impl Judge {
    pub async fn score(&self, submission: Submission) -> Result<Verdict, JudgeError> {
        self.grade(submission, Mode::Score).await
    }

    pub async fn submit(&self, submission: Submission) -> Result<Verdict, JudgeError> {
        self.grade(submission, Mode::Submit).await
    }

    async fn grade(&self, submission: Submission, mode: Mode) -> Result<Verdict, JudgeError> {
        let start = Instant::now();
        let held = self.slots.acquire().await;
        let (prepared, mut verdict) = match self.prepare(&submission, &[], &held.slot).await? {
            Ok(prepared) => prepared,
            Err(verdict) => return Ok(finish(verdict, start)),
        };
        verdict.status = Status::Ok;
        let baseline = match self
            .baseline(
                prepared.kernel,
                prepared.precision,
                prepared.preset,
                &held.slot,
            )
            .await
        {
            Ok(t) => t,
            Err(message) => return Ok(finish(fail(verdict, Status::HarnessError, message), start)),
        };
        verdict.baseline = Some(baseline);
        let verdict = self
            .run_and_judge(&prepared, mode, &held.slot, verdict, Some(&baseline))
            .await;
        Ok(finish(verdict, start))
    }

    /// Checks the request and builds it; a build failure is a verdict.
    pub(crate) async fn prepare<'a>(
        &'a self,
        submission: &Submission,
        defines: &[String],
        slot: &Slot,
    ) -> Result<Result<(Prepared<'a>, Verdict), Verdict>, JudgeError> {
        let (kernel, precision) = self.resolve(&submission.task_id, submission.precision)?;
        flags::check(
            &submission.flags,
            self.config.shared.as_deref(),
            &self.shared_libraries(),
        )
        .map_err(JudgeError::InvalidArgument)?;
        let language = submission.language;
        self.check_device(language)?;
        let mut verdict = Verdict::new(Status::HarnessError, "");
        verdict.task_id = kernel.id.clone();
        verdict.language = language.to_string();
        verdict.precision = precision.to_string();
        let preset = submission.preset.unwrap_or(self.config.preset);
        verdict.preset = preset.to_string();
        let built = match &submission.code {
            Code::Library(path) => Built {
                library: self.copy_library(path)?,
                log: String::new(),
                cached: false,
                seconds: 0.0,
            },
            Code::Source(text) => {
                let symbol = kernel.symbol(precision);
                let source = Source {
                    language,
                    text,
                    stem: &symbol,
                    flags: &submission.flags,
                    defines,
                    run_as: self.isolation.run_as(slot.index),
                    cpus: &slot.cpus,
                };
                match self.builder.build(&source).await {
                    Ok(built) => built,
                    Err(BuildError::Missing(what)) => {
                        return Err(JudgeError::FailedPrecondition(what));
                    }
                    Err(BuildError::Failed { log }) => {
                        verdict.build_log_tail = log;
                        return Ok(Err(fail(
                            verdict,
                            Status::BuildError,
                            "compilation failed (see the build log)",
                        )));
                    }
                    Err(e @ BuildError::TimedOut(_)) => {
                        return Ok(Err(fail(verdict, Status::BuildError, e.to_string())));
                    }
                    Err(BuildError::Harness(e)) => {
                        return Ok(Err(fail(verdict, Status::HarnessError, e)));
                    }
                }
            }
        };
        verdict.build_log_tail = tail(&built.log, 2000);
        verdict.cached_build = built.cached;
        Ok(Ok((
            Prepared {
                kernel,
                precision,
                preset,
                language,
                built,
            },
            verdict,
        )))
    }

    /// A GPU language needs its runtime on this node.
    fn check_device(&self, language: Language) -> Result<(), JudgeError> {
        let present = match language {
            Language::Cuda => unsafe { cudarc::driver::sys::is_culib_present() },
            // SAFETY: loading the vendor runtime to see that it exists.
            Language::Hip => unsafe { libloading::Library::new("libamdhip64.so") }.is_ok(),
            _ => true,
        };
        if present {
            Ok(())
        } else {
            let what = if language == Language::Cuda {
                "the CUDA driver (libcuda.so)"
            } else {
                "the HIP runtime (libamdhip64.so)"
            };
            Err(JudgeError::FailedPrecondition(format!(
                "{language} needs {what}, which this node does not have"
            )))
        }
    }

    /// Runs the prepared submission on the public (and, for Submit, held-out)
    /// cases and turns what happened into the verdict.
    async fn run_and_judge(
        &self,
        prepared: &Prepared<'_>,
        mode: Mode,
        slot: &Slot,
        verdict: Verdict,
        baseline: Option<&Timing>,
    ) -> Verdict {
        let (kernel, precision) = (prepared.kernel, prepared.precision);
        let mut cases = vec![cases::public(
            kernel,
            precision,
            prepared.preset,
            self.config.public_seed,
        )];
        if mode == Mode::Submit {
            cases.extend(cases::held_out(
                kernel,
                precision,
                prepared.preset,
                self.config.secret,
                self.config.hidden_cases,
            ));
        }
        let mut data = Vec::new();
        for case in &cases {
            let prepared_case = async {
                let inputs = self.data.inputs(kernel, case).await?;
                let reference = self.data.reference(kernel, &inputs).await?;
                Ok::<_, crate::data::DataError>((inputs, reference))
            };
            match prepared_case.await {
                Ok(pair) => data.push(pair),
                Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
            }
        }
        let inputs: Vec<&CaseInputs> = data.iter().map(|(i, _)| i).collect();
        let plan = RunPlan {
            warmup: 1,
            reps: self.config.reps,
            digests: mode == Mode::Submit,
            baseline,
            wrapper: Vec::new(),
            papi_events: Vec::new(),
        };
        let verified_rep = plan.warmup + plan.reps - 1;
        let outcome = match self.run(prepared, &inputs, slot, plan.clone()).await {
            Ok((o, _sandbox)) => o,
            Err(e) => return fail(verdict, Status::HarnessError, e),
        };
        let judge = |verdict, outcome: &RunOutcome| {
            judge_run(
                verdict,
                prepared,
                &data,
                outcome,
                mode,
                baseline,
                verified_rep,
            )
        };
        let (mut judged, mut slow) = judge(verdict.clone(), &outcome);
        if slow.is_some() {
            // Most often a noisy neighbour during that one call: a second
            // run tells it from a kernel that only works when it is checked.
            tracing::info!(task = %kernel.id, "the verified call was slow; running again");
            let outcome = match self.run(prepared, &inputs, slot, plan).await {
                Ok((o, _sandbox)) => o,
                Err(e) => return fail(verdict, Status::HarnessError, e),
            };
            (judged, slow) = judge(verdict, &outcome);
        }
        if let (Some(verified_ns), Some(b)) = (slow, baseline) {
            bound_by_verified_call(&mut judged, verified_ns, b);
        }
        judged
    }

    /// Launches one runner over `cases`: the first is timed, the rest run once.
    /// Returns the sandbox too, for callers that read what the run left there.
    pub(crate) async fn run(
        &self,
        prepared: &Prepared<'_>,
        cases: &[&CaseInputs],
        slot: &Slot,
        plan: RunPlan<'_>,
    ) -> Result<(RunOutcome, tempfile::TempDir), String> {
        let RunPlan {
            warmup,
            reps,
            digests,
            baseline,
            wrapper,
            papi_events,
        } = plan;
        let dir = sandbox::create("run").map_err(|e| format!("sandbox: {e}"))?;
        let run_as = self.isolation.run_as(slot.index);
        if let Some(uid) = run_as {
            nix::unistd::chown(dir.path(), Some(uid.into()), Some(uid.into()))
                .map_err(|e| format!("chown sandbox: {e}"))?;
        }
        let library = dir.path().join("submission.so");
        std::fs::copy(&prepared.built.library, &library)
            .map_err(|e| format!("copy library: {e}"))?;
        // Readable by the run's user, whatever the cached copy's mode.
        std::fs::set_permissions(
            &library,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .map_err(|e| format!("library permissions: {e}"))?;
        let earlier = self
            .earlier_inputs(prepared, cases[0])
            .await
            .map_err(|e| format!("inputs of the earlier calls: {e}"))?;
        let mut run_cases: Vec<RunCase> = cases
            .iter()
            .enumerate()
            .map(|(i, inputs)| RunCase {
                label: if i == 0 {
                    "public".into()
                } else {
                    format!("held-out {i}")
                },
                args: run_args(prepared.kernel, prepared.precision, inputs),
                warmup: if i == 0 { warmup } else { 0 },
                reps: if i == 0 { reps } else { 1 },
                send_outputs: true,
                digests: i == 0 && digests,
            })
            .collect();
        for arg in &mut run_cases[0].args {
            if let RunArg::Array {
                name, earlier: e, ..
            } = arg
            {
                *e = earlier
                    .arrays
                    .iter()
                    .find(|a| &a.name == name)
                    .and_then(|a| a.input.clone());
            }
        }
        let earlier_bytes: u64 = earlier
            .arrays
            .iter()
            .filter(|a| a.input.is_some())
            .map(|a| (a.elements * a.dtype.size()) as u64)
            .sum();
        let case_bytes: u64 = earlier_bytes
            + cases
                .iter()
                .map(|c| {
                    c.arrays
                        .iter()
                        .map(|a| (a.elements * a.dtype.size()) as u64)
                        .sum::<u64>()
                        + c.workspace_bytes
                })
                .sum::<u64>();
        let output_bytes: u64 = cases
            .iter()
            .flat_map(|c| c.arrays.iter().filter(|a| a.role.is_output()))
            .map(|a| (a.elements * a.dtype.size()) as u64)
            .sum();
        let calls = (warmup + reps) as u64 + cases.len() as u64;
        let timeout = (startup_budget(case_bytes) + call_budget(baseline) * calls as u32)
            .min(Duration::from_secs(1800));
        let cpus = slot.cpus.len().max(1) as u64;
        let limits = Limits {
            // Masters and working copies of every case, plus thread stacks and slack.
            address_space: (!prepared.language.is_gpu())
                .then_some(2 * case_bytes + (4 << 30) + cpus * (96 << 20)),
            cpu_seconds: Some(timeout.as_secs() * cpus + 10),
            file_size: Some(64 << 20),
            processes: Some(
                if run_as.is_some() {
                    0
                } else {
                    crate::sandbox::limits::user_process_count()
                } + 2 * cpus
                    + 64,
            ),
            cpus: slot.cpus.clone(),
            isolate_network: true,
        };
        let request = Request {
            library,
            symbol: prepared.kernel.symbol(prepared.precision),
            language: prepared.language,
            cases: run_cases,
            sandbox: dir.path().to_path_buf(),
            readable: self.config.shared.iter().cloned().collect(),
            run_as,
            papi_events,
        };
        let outcome = launch(Launch {
            exe: &self.config.exe,
            wrapper,
            request,
            limits,
            env: run_env(dir.path(), slot),
            timeout,
            output_bytes,
        })
        .await?;
        Ok((outcome, dir))
    }

    /// The inputs of every call of the first case but the last: the same
    /// kernel and sizes with another seed (derived from the case's, so they
    /// are generated once and cached like any case's).
    async fn earlier_inputs(
        &self,
        prepared: &Prepared<'_>,
        case: &CaseInputs,
    ) -> Result<CaseInputs, crate::data::DataError> {
        let seed = rand_core::RngCore::next_u64(&mut crate::data::seeded_rng(&[
            b"earlier calls",
            case.key.as_bytes(),
        ]));
        let other = crate::data::Case {
            precision: prepared.precision,
            sizes: case.sizes.clone(),
            seed,
        };
        self.data.inputs(prepared.kernel, &other).await
    }

    /// The baseline's median time on the public case, measured in this slot
    /// (reused for `baseline_ttl`, then measured again: a time taken while the
    /// node was busy must not stick; a noisy one is not reused at all, see
    /// [`reusable`]).
    pub(crate) async fn baseline(
        &self,
        kernel: &Kernel,
        precision: Precision,
        preset: Preset,
        slot: &Slot,
    ) -> Result<Timing, String> {
        let key = (kernel.fingerprint.clone(), precision, preset);
        if let Some((t, when)) = self.baselines.lock().expect("baselines").get(&key)
            && when.elapsed() < self.config.baseline_ttl
        {
            return Ok(*t);
        }
        let source = std::fs::read_to_string(kernel.baseline_path())
            .map_err(|e| format!("baseline.c: {e}"))?;
        let submission = Submission {
            task_id: kernel.id.clone(),
            language: Language::C,
            precision: Some(precision),
            preset: Some(preset),
            code: Code::Source(source),
            flags: Vec::new(),
        };
        let prepared = match self
            .prepare(&submission, &baseline_defines(kernel, precision), slot)
            .await
        {
            Ok(Ok((prepared, _))) => prepared,
            Ok(Err(v)) => {
                return Err(format!(
                    "the baseline does not build: {} {}",
                    v.message, v.build_log_tail
                ));
            }
            Err(e) => return Err(format!("the baseline: {e}")),
        };
        let case = cases::public(kernel, precision, preset, self.config.public_seed);
        let inputs = self
            .data
            .inputs(kernel, &case)
            .await
            .map_err(|e| e.to_string())?;
        let plan = RunPlan {
            warmup: 1,
            reps: self.config.reps,
            digests: false,
            baseline: None,
            wrapper: Vec::new(),
            papi_events: Vec::new(),
        };
        let (outcome, _sandbox) = self.run(&prepared, &[&inputs], slot, plan).await?;
        let timing = Timing::from_samples(&timed_samples(&outcome, 0))
            .ok_or_else(|| format!("the baseline run failed: {}", describe_end(&outcome)))?;
        let mut baselines = self.baselines.lock().expect("baselines");
        if reusable(&timing) {
            baselines.insert(key, (timing, Instant::now()));
        } else {
            // An older one, expired or stored by another slot meanwhile, stays.
            tracing::info!(
                task = %kernel.id,
                spread = timing.spread,
                "the baseline's calls were noisy; it is measured again for the next grade"
            );
        }
        Ok(timing)
    }

    /// Grades a kernel's own baseline as a submission (for `corpus check`).
    pub async fn check_baseline(
        &self,
        kernel: &Kernel,
        precision: Precision,
    ) -> Result<Verdict, JudgeError> {
        let start = Instant::now();
        let held = self.slots.acquire().await;
        let source = std::fs::read_to_string(kernel.baseline_path()).map_err(|e| {
            JudgeError::Internal(format!("{}: {e}", kernel.baseline_path().display()))
        })?;
        let submission = Submission {
            task_id: kernel.id.clone(),
            language: Language::C,
            precision: Some(precision),
            preset: None,
            code: Code::Source(source),
            flags: Vec::new(),
        };
        let (prepared, mut verdict) = match self
            .prepare(
                &submission,
                &baseline_defines(kernel, precision),
                &held.slot,
            )
            .await?
        {
            Ok(p) => p,
            Err(v) => return Ok(finish(v, start)),
        };
        verdict.status = Status::Ok;
        let verdict = self
            .run_and_judge(&prepared, Mode::Score, &held.slot, verdict, None)
            .await;
        Ok(finish(verdict, start))
    }
}

/// The widest spread of a baseline's calls (IQR over the median) that is
/// reused for later grades. Every speedup of the next ten minutes divides by
/// the baseline's median, so one timed beside a noisy neighbour would skew
/// them all: one of gemm's at S, timed beside a fork bomb, had a spread of
/// 0.31 and a median 1.4x its quiet one, where quiet runs here spread 0.01 to
/// 0.16. Such a baseline serves its own grade only.
const BASELINE_SPREAD_REUSED: f64 = 0.25;

/// Whether a measured baseline may serve later grades.
fn reusable(baseline: &Timing) -> bool {
    baseline.spread <= BASELINE_SPREAD_REUSED
}

/// `-Dreal=<type> -DSYMBOL=<symbol>`: what makes baseline.c one precision's kernel.
fn baseline_defines(kernel: &Kernel, precision: Precision) -> Vec<String> {
    let real = match precision {
        Precision::Fp32 => "float",
        _ => "double",
    };
    vec![
        format!("-Dreal={real}"),
        format!("-DSYMBOL={}", kernel.symbol(precision)),
    ]
}

/// The arguments of one case, in ABI order.
fn run_args(kernel: &Kernel, precision: Precision, inputs: &CaseInputs) -> Vec<RunArg> {
    abi::args(kernel, precision)
        .into_iter()
        .map(|arg| match arg {
            abi::Arg::Array { name, .. } => {
                let a = inputs
                    .arrays
                    .iter()
                    .find(|a| a.name == name)
                    .expect("every array has data");
                RunArg::Array {
                    name,
                    dtype: a.dtype,
                    role: a.role,
                    elements: a.elements,
                    input: a.input.clone(),
                    earlier: None,
                }
            }
            abi::Arg::Scalar { name, dtype } => {
                let value = inputs
                    .scalars
                    .iter()
                    .find(|(n, _, _)| *n == name)
                    .map(|(_, v, _)| *v)
                    .unwrap_or_else(|| ScalarValue::Int(inputs.sizes[&name]));
                match (value, dtype.is_float()) {
                    (ScalarValue::Int(i), false) => RunArg::Int(i),
                    (ScalarValue::Int(i), true) => float_arg(i as f64, dtype),
                    (ScalarValue::Real(f), true) => float_arg(f, dtype),
                    (ScalarValue::Real(f), false) => RunArg::Int(f as i64),
                }
            }
            abi::Arg::Workspace => RunArg::Workspace(inputs.workspace_bytes),
            abi::Arg::WorkspaceSize => RunArg::Int(inputs.workspace_bytes as i64),
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

/// The runner's environment: nothing of the judge's but what runtimes need.
fn run_env(sandbox: &Path, slot: &Slot) -> Vec<(String, String)> {
    let mut env = passthrough_env();
    let dir = sandbox.display().to_string();
    env.extend([
        ("HOME".to_string(), dir.clone()),
        ("TMPDIR".to_string(), dir.clone()),
        ("LC_ALL".to_string(), "C".to_string()),
        (
            "OMP_NUM_THREADS".to_string(),
            slot.cpus.len().max(1).to_string(),
        ),
        ("OMP_PROC_BIND".to_string(), "close".to_string()),
        ("OMP_PLACES".to_string(), "cores".to_string()),
        // Idle OpenMP threads must not burn the slot's cores between calls.
        ("OMP_WAIT_POLICY".to_string(), "passive".to_string()),
        // glibc reserves 64 MiB of address space per thread arena otherwise.
        ("MALLOC_ARENA_MAX".to_string(), "2".to_string()),
        ("CUDA_CACHE_PATH".to_string(), format!("{dir}/.nv")),
    ]);
    if let Some(gpu) = slot.gpu {
        for var in [
            "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
        ] {
            env.retain(|(k, _)| k != var);
            env.push((var.to_string(), gpu.to_string()));
        }
    }
    env
}

/// How much slower than the median of the timed calls the verified call may
/// be before the time is taken from it; see [`slow_verified_call`].
const VERIFIED_CALL_SLACK: f64 = 1.5;

/// The verdict on one run: correctness, then the speedup from the median
/// time when correct; and the verified call's time when a correct run's is
/// slow (see [`slow_verified_call`]).
fn judge_run(
    mut verdict: Verdict,
    prepared: &Prepared<'_>,
    data: &[(CaseInputs, Reference)],
    outcome: &RunOutcome,
    mode: Mode,
    baseline: Option<&Timing>,
    verified_rep: u32,
) -> (Verdict, Option<f64>) {
    let (kernel, precision) = (prepared.kernel, prepared.precision);
    judge_outcome(&mut verdict, kernel, precision, data, outcome, mode);
    if mode == Mode::Submit {
        // What the program printed could describe the held-out cases.
        verdict.stdout_tail.clear();
        verdict.stderr_tail.clear();
    }
    let (Some(t), Some(b), Status::Ok) = (&verdict.timing, baseline, verdict.status) else {
        return (verdict, None);
    };
    verdict.speedup = Some(b.median_ns / t.median_ns.max(1.0));
    let slow = slow_verified_call(&timed_calls(outcome, 0), verified_rep);
    (verdict, slow)
}

/// Takes a correct verdict's speedup from its verified call's time over
/// [`VERIFIED_CALL_SLACK`], and says so.
fn bound_by_verified_call(verdict: &mut Verdict, verified_ns: f64, baseline: &Timing) {
    let Some(median_ns) = verdict.timing.map(|t| t.median_ns) else {
        return;
    };
    let bound_ns = verified_ns / VERIFIED_CALL_SLACK;
    verdict.speedup = Some(baseline.median_ns / median_ns.max(bound_ns).max(1.0));
    verdict.message = format!(
        "{}; in two runs the verified call, the one whose answer is checked, took {:.1}x the \
         median of the timed calls: the speedup uses its time over {VERIFIED_CALL_SLACK} \
         ({:.3} ms), not the median",
        verdict.message,
        verified_ns / median_ns.max(1.0),
        bound_ns / 1e6
    );
}

/// The verified call's time (the last timed one), when it exceeds
/// [`VERIFIED_CALL_SLACK`] times the median of the timed calls.
///
/// Only the verified call's answer is checked: the others see inputs the
/// judge has no reference for. A kernel that computes only where it must
/// (on inputs unlike the first call's, or on the call it counts to) and
/// replays a saved answer elsewhere is fast on every call but the verified
/// one, so its median says nothing; that call's time, which no replay can
/// shorten, bounds the time from below. On an honest kernel it is one more
/// sample of the same distribution (0.91–1.09× the median in 80% of a
/// campaign's grades here), so a larger gap is noise or such a kernel.
///
/// `timed` are the timed calls' (rep, time); the verified call is rep
/// `verified_rep`. With fewer than three timed calls there is no median
/// apart from it, and no bound.
fn slow_verified_call(timed: &[(u32, u64)], verified_rep: u32) -> Option<f64> {
    let samples: Vec<u64> = timed.iter().map(|&(_, ns)| ns).collect();
    let median = Timing::from_samples(&samples)?.median_ns;
    // The slowest frame of that call: one forged by a thread of the kernel
    // can only add to the median's samples, not shorten this call.
    let verified = timed
        .iter()
        .filter(|&&(rep, _)| rep == verified_rep)
        .map(|&(_, ns)| ns)
        .max()? as f64;
    (samples.len() >= 3 && verified > VERIFIED_CALL_SLACK * median).then_some(verified)
}

/// A case's timed (non-warm-up) calls: (rep, time in ns), in call order.
fn timed_calls(outcome: &RunOutcome, case: usize) -> Vec<(u32, u64)> {
    outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Rep {
                case: c,
                rep,
                ns,
                warmup: false,
            } if *c == case => Some((*rep, *ns)),
            _ => None,
        })
        .collect()
}

/// Call times of a case's timed (non-warm-up) calls, in call order.
pub(crate) fn timed_samples(outcome: &RunOutcome, case: usize) -> Vec<u64> {
    timed_calls(outcome, case)
        .into_iter()
        .map(|(_, ns)| ns)
        .collect()
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

fn describe_end(outcome: &RunOutcome) -> String {
    match &outcome.end {
        End::Exited(code) => format!("exited with code {code}"),
        End::Signaled(sig) => format!("killed by {}", signal_name(*sig)),
        End::TimedOut => format!("still running after {:.1} s", outcome.wall.as_secs_f64()),
    }
}

/// Everything that can be said about a run, worst first.
pub(crate) fn judge_outcome(
    verdict: &mut Verdict,
    kernel: &Kernel,
    precision: Precision,
    data: &[(CaseInputs, Reference)],
    outcome: &RunOutcome,
    mode: Mode,
) {
    verdict.stdout_tail = outcome.stdout_tail.clone();
    verdict.stderr_tail = outcome.stderr_tail.clone();
    verdict.timing = Timing::from_samples(&timed_samples(outcome, 0));
    if let End::Signaled(sig) = outcome.end {
        verdict.signal = Some(signal_name(sig));
    }
    if let Some((status, message)) = run_failure(outcome) {
        return set(verdict, status, message);
    }
    let modified = outcome.events.iter().find_map(|e| match e {
        Event::InputModified { array, .. } => Some(array),
        _ => None,
    });
    if let Some(array) = modified {
        return set(
            verdict,
            Status::Incorrect,
            format!("input {array} was modified; inputs are const"),
        );
    }
    let tolerance = kernel.tolerance(precision);
    let public = compare_case(&data[0], outcome, 0, tolerance);
    verdict.max_abs_error = public.max_abs_error;
    verdict.max_rel_error = public.max_rel_error;
    verdict.first_mismatch = public.first.clone();
    if !public.correct {
        let message = public.message.unwrap_or_else(|| "wrong result".into());
        return set(verdict, Status::Incorrect, message);
    }
    verdict.correct = true;
    verdict.message = "correct on the public case".into();
    if mode == Mode::Submit {
        judge_held_out(verdict, data, outcome, tolerance);
    }
}

/// Held-out cases and determinism (Submit): details of held-out cases stay secret.
fn judge_held_out(
    verdict: &mut Verdict,
    data: &[(CaseInputs, Reference)],
    outcome: &RunOutcome,
    tolerance: Tolerance,
) {
    let hidden: Vec<Comparison> = (1..data.len())
        .map(|i| compare_case(&data[i], outcome, i, tolerance))
        .collect();
    verdict.hidden_total = hidden.len() as u32;
    verdict.hidden_passed = hidden.iter().filter(|c| c.correct).count() as u32;
    let digests: Vec<&String> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::OutputDigest {
                case: 0, digest, ..
            } => Some(digest),
            _ => None,
        })
        .collect();
    // The first call and the last two before the verified one, which sees
    // other inputs (fewer when there are fewer calls).
    let calls = outcome
        .events
        .iter()
        .filter(|e| matches!(e, Event::Rep { case: 0, .. }))
        .count();
    let deterministic =
        digests.len() >= calls.saturating_sub(1).min(3) && digests.windows(2).all(|w| w[0] == w[1]);
    verdict.deterministic = Some(deterministic);
    if verdict.hidden_passed < verdict.hidden_total {
        let message = format!(
            "correct on the public case but wrong on {} of {} held-out cases",
            verdict.hidden_total - verdict.hidden_passed,
            verdict.hidden_total
        );
        return set(verdict, Status::Overfit, message);
    }
    if !deterministic {
        let message = "not deterministic: calls on the same inputs gave different bits (the first and the last two on those inputs compared)";
        return set(verdict, Status::Incorrect, message);
    }
    verdict.message = format!(
        "correct on the public case and {} held-out cases, deterministic",
        verdict.hidden_total
    );
}

/// Why the run did not finish its calls, if it did not.
fn run_failure(outcome: &RunOutcome) -> Option<(Status, String)> {
    let failed = outcome.events.iter().find_map(|e| match e {
        Event::Failed { stage, message } => Some((stage.as_str(), message.as_str())),
        _ => None,
    });
    if let Some((stage, message)) = failed {
        return Some(match stage {
            "symbol" => (
                Status::BuildError,
                format!(
                    "{message}; export it with C linkage (extern \"C\" in C++/CUDA/HIP, bind(C) in Fortran)"
                ),
            ),
            "load" => (
                Status::BuildError,
                format!("the built library cannot be loaded: {message}"),
            ),
            "sync" | "copy" => (
                Status::Crash,
                format!("device error after a call ({stage}): {message}"),
            ),
            // The kernel's threads are the likely cause; an overloaded node
            // would have to preempt the runner in every one of the tries.
            "snapshot" => (Status::Incorrect, message.to_string()),
            _ => (Status::HarnessError, format!("runner {stage}: {message}")),
        });
    }
    let done = outcome.events.contains(&Event::Done);
    match outcome.end {
        End::TimedOut => Some((
            Status::Timeout,
            format!("did not finish within {:.1} s", outcome.wall.as_secs_f64()),
        )),
        End::Signaled(libc::SIGXCPU) => {
            Some((Status::Timeout, "used up its CPU time limit".into()))
        }
        End::Signaled(sig) => {
            let why = match sig {
                libc::SIGXFSZ => " (wrote more output than the 64 MiB allowed)",
                libc::SIGSEGV | libc::SIGBUS => " (invalid memory access)",
                _ => "",
            };
            Some((
                Status::Crash,
                format!("killed by {}{why}", signal_name(sig)),
            ))
        }
        End::Exited(code) if !done => Some((
            Status::Crash,
            format!("the process exited (code {code}) before the calls finished"),
        )),
        _ => outcome.channel_error.as_ref().map(|e| {
            (
                Status::Crash,
                format!("{e} (did the submission write to the judge's channel?)"),
            )
        }),
    }
}

fn set(verdict: &mut Verdict, status: Status, message: impl Into<String>) {
    verdict.status = status;
    verdict.correct = false;
    verdict.message = message.into();
    if status == Status::Overfit {
        // Which held-out case and where stay secret.
        verdict.first_mismatch = None;
    }
}

fn compare_case(
    (inputs, reference): &(CaseInputs, Reference),
    outcome: &RunOutcome,
    case: usize,
    tolerance: Tolerance,
) -> Comparison {
    let mut total = Comparison::default();
    for array in inputs.arrays.iter().filter(|a| a.role.is_output()) {
        let Some(actual) = outcome.outputs.get(&(case, array.name.clone())) else {
            total.merge(Comparison {
                correct: false,
                message: Some(format!("output {} was not returned", array.name)),
                ..Comparison::default()
            });
            continue;
        };
        let expected = match std::fs::read(&reference.outputs[&array.name]) {
            Ok(bytes) => bytes,
            Err(e) => {
                total.merge(Comparison {
                    correct: false,
                    message: Some(format!("reference output {}: {e}", array.name)),
                    ..Comparison::default()
                });
                continue;
            }
        };
        total.merge(verify::compare(
            &Output {
                name: &array.name,
                dtype: array.dtype,
                shape: &array.shape,
                actual,
                expected: &expected,
            },
            tolerance,
        ));
    }
    total
}

pub(crate) fn fail(mut verdict: Verdict, status: Status, message: impl Into<String>) -> Verdict {
    set(&mut verdict, status, message);
    verdict
}

pub(crate) fn finish(mut verdict: Verdict, start: Instant) -> Verdict {
    verdict.elapsed_s = start.elapsed().as_secs_f64();
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noisy_baseline_serves_only_its_own_grade() {
        // Five quiet calls of gemm at S (spread 0.02), then the CI run's
        // baseline timed beside a fork bomb (its min and median, spread 0.31).
        let quiet = Timing::from_samples(&[290_000, 296_000, 289_000, 301_000, 290_500]);
        assert!(reusable(&quiet.unwrap()));
        let noisy = Timing::from_samples(&[365_746, 370_000, 414_247, 499_000, 520_000]);
        let noisy = noisy.unwrap();
        assert!(noisy.spread > 0.25, "{noisy:?}");
        assert!(!reusable(&noisy));
    }

    #[test]
    fn only_a_verified_call_well_above_the_median_is_slow() {
        // Timed calls are reps 1.. (rep 0 is the warm-up); the last is verified.
        let calls = |ns: &[u64]| -> Vec<(u32, u64)> { (1..).zip(ns.iter().copied()).collect() };
        // An honest kernel: the verified call is one more sample.
        assert_eq!(
            slow_verified_call(&calls(&[100, 104, 98, 101, 120]), 5),
            None
        );
        // At the slack, not above it.
        assert_eq!(slow_verified_call(&calls(&[100, 100, 100, 150]), 4), None);
        // Replayed answers, then the one call that is checked.
        let replayed = calls(&[3, 2, 3, 3, 2, 100]);
        assert_eq!(slow_verified_call(&replayed, 6), Some(100.0));
        // Found by its rep, not its place: a forged fast frame for it,
        // before or after the real one, does not shorten it.
        let mut forged = vec![(6, 2)];
        forged.extend(replayed.iter().copied());
        forged.push((6, 2));
        assert_eq!(slow_verified_call(&forged, 6), Some(100.0));
        // A run that ended before the verified call has none.
        assert_eq!(slow_verified_call(&replayed[..5], 6), None);
        // A slow call elsewhere is the median's business.
        assert_eq!(slow_verified_call(&calls(&[100, 900, 100, 100]), 4), None);
        // Too few calls to have a median apart from the verified one.
        assert_eq!(slow_verified_call(&calls(&[1, 100]), 2), None);
        assert_eq!(slow_verified_call(&[], 1), None);
    }
}

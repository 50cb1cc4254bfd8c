//! Grading: build, run beside the baseline, verify, and the verdict.
//!
//! A grade builds the submission and the kernel's baseline (both cached),
//! then one run ([`crate::runner`]) times them in pairs on fresh inputs
//! from outside both processes, compares every pair's outputs, and calls
//! the submission on the public case (and, for `Submit`, the held-out
//! cases and the public case twice more), whose outputs are verified here
//! against the NumPy reference ([`plan`] says what runs in which order,
//! [`outcome`] what it means). A grade holds one slot throughout.

mod hab;
mod outcome;
mod plan;

use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) use outcome::{Checked, Read, judge_outcome};
pub(crate) use plan::Planner;

use crate::build::{BuildError, Built, Source, flags, passthrough_env};
use crate::cases;
use crate::corpus::{Kernel, Precision, Preset};
use crate::data::{CaseInputs, Reference, tail};
use crate::judge::{Code, Judge, JudgeError, Submission};
use crate::language::Language;
use crate::runner::protocol::{CallBudget, Request};
use crate::runner::{Launch, RunOutcome, launch};
use crate::sandbox_dir;
use crate::slots::Slot;
use crate::timing::StopRule;
use crate::verdict::{Status, Verdict};
use hpcagent_sandbox::limits::Limits;

/// Score (public case only) or Submit (plus held-out cases and determinism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Score,
    Submit,
}

/// How long a call may take: the baseline's first calls 30 s; the
/// submission's 20 times the baseline's median so far, at least 0.5 s.
const CALL_BUDGET: CallBudget = CallBudget {
    first_ms: 30_000,
    factor: 20.0,
    floor_ms: 500,
};

/// A built submission, ready to run: the library and what the build said.
pub(crate) struct Prepared<'a> {
    pub kernel: &'a Kernel,
    pub precision: Precision,
    /// The public case's preset (the request's, else the judge's).
    pub preset: Preset,
    pub language: Language,
    pub built: Built,
}

/// What else a run needs besides the plan: a profiler around it.
#[derive(Default)]
pub(crate) struct Extras {
    pub wrapper: Vec<String>,
    pub papi_events: Vec<String>,
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
        if let Some(tasks) = &self.hab {
            let verdict = self
                .grade_hab(tasks, &prepared, mode, &held.slot, verdict)
                .await;
            return Ok(finish(verdict, start));
        }
        let baseline = match self
            .build_baseline(prepared.kernel, prepared.precision, &held.slot)
            .await
        {
            Ok(built) => built,
            Err(message) => return Ok(finish(fail(verdict, Status::HarnessError, message), start)),
        };
        let verdict = self
            .run_and_judge(&prepared, Some(&baseline), mode, &held.slot, verdict)
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
            // SAFETY: loading the CUDA driver to see that it exists.
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

    /// The kernel's baseline, built like a submission (from the cache when
    /// it was built before).
    pub(crate) async fn build_baseline(
        &self,
        kernel: &Kernel,
        precision: Precision,
        slot: &Slot,
    ) -> Result<Built, String> {
        let source = std::fs::read_to_string(kernel.baseline_path())
            .map_err(|e| format!("baseline.c: {e}"))?;
        let submission = Submission::baseline(&kernel.id, precision, source);
        match self
            .prepare(&submission, &baseline_defines(kernel, precision), slot)
            .await
        {
            Ok(Ok((prepared, _))) => Ok(prepared.built),
            Ok(Err(v)) => Err(format!(
                "the baseline does not build: {} {}",
                v.message, v.build_log_tail
            )),
            Err(e) => Err(format!("the baseline: {e}")),
        }
    }

    /// Runs the prepared submission (beside `baseline`, when given, for the
    /// timed pairs) and turns what happened into the verdict.
    async fn run_and_judge(
        &self,
        prepared: &Prepared<'_>,
        baseline: Option<&Built>,
        mode: Mode,
        slot: &Slot,
        verdict: Verdict,
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
            match self.case_data(kernel, case).await {
                Ok(pair) => data.push(pair),
                Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
            }
        }
        let planned = self.plan(prepared, baseline.is_some(), mode, &data);
        let (planner, read) = match planned {
            Ok(p) => p,
            Err(e) => return fail(verdict, Status::HarnessError, e),
        };
        let outcome = match self
            .run(prepared, baseline, planner, slot, Extras::default())
            .await
        {
            Ok((o, _sandbox)) => o,
            Err(e) => return fail(verdict, Status::HarnessError, e),
        };
        let read = read.resolve(&data);
        let mut verdict = verdict;
        judge_outcome(&mut verdict, kernel, precision, &read, &outcome, mode);
        verdict
    }

    /// A case's inputs and reference outputs (cached).
    pub(crate) async fn case_data(
        &self,
        kernel: &Kernel,
        case: &crate::data::Case,
    ) -> Result<(CaseInputs, Reference), crate::data::DataError> {
        let inputs = self.data.inputs(kernel, case).await?;
        let reference = self.data.reference(kernel, &inputs).await?;
        Ok((inputs, reference))
    }

    /// The run's steps: pairs (when timed), the public case, and for
    /// `Submit` the held-out cases and two more public calls.
    fn plan<'a>(
        &self,
        prepared: &Prepared<'a>,
        timed: bool,
        mode: Mode,
        data: &[(CaseInputs, Reference)],
    ) -> Result<(Planner<'a>, Marks), String> {
        let submit = mode == Mode::Submit;
        let mut planner = Planner::new(prepared.kernel, prepared.precision);
        if timed {
            // The grade's own secret: the timed inputs (and for Submit their
            // sizes) cannot be known before the grade draws them.
            let seed: [u8; 32] = rand::random();
            let sizes = cases::timed_sizes(
                prepared.kernel,
                prepared.precision,
                prepared.preset,
                submit,
                &seed,
            );
            planner.pairs(&sizes, seed, self.stop_rule())?;
        }
        let public = planner.check("public", &data[0].0, true, submit)?;
        checks_after_public(planner, public, data, submit)
    }

    /// When a grade's timed pairs stop.
    fn stop_rule(&self) -> StopRule {
        StopRule {
            fewest: self.config.reps.max(1),
            most: 1000,
            precision: self.config.interval,
            cap_ms: self.config.time_cap.as_millis() as u64,
        }
    }

    /// Starts one run of `planner`'s steps: the submission, and the
    /// baseline beside it when given. Returns the run's directory too, for
    /// callers that read what the run left there.
    pub(crate) async fn run(
        &self,
        prepared: &Prepared<'_>,
        baseline: Option<&Built>,
        planner: Planner<'_>,
        slot: &Slot,
        extras: Extras,
    ) -> Result<(RunOutcome, tempfile::TempDir), String> {
        let dir = sandbox_dir::create("run").map_err(|e| format!("sandbox: {e}"))?;
        let run_as = self.isolation.run_as(slot.index);
        // The submission's directory, and the baseline's beside it, out of
        // the submission's reach (it must not rewrite the baseline's library).
        let sandbox = dir.path().join("candidate");
        let library = place(&prepared.built.library, &sandbox, "submission.so", run_as)?;
        let baseline = match baseline {
            Some(built) => Some(place(
                &built.library,
                &dir.path().join("baseline"),
                "baseline.so",
                None,
            )?),
            None => None,
        };
        let timed = baseline.is_some();
        let cpus = slot.cpus.len().max(1) as u64;
        let buffers: u64 = (0..planner.calls.len())
            .flat_map(|call| planner.array_bytes(call, false))
            .sum();
        let timeout = Duration::from_secs(600) + self.config.time_cap * 3;
        let limits = Limits {
            // The buffers, plus thread stacks and slack.
            address_space: (!prepared.language.is_gpu())
                .then_some(2 * buffers + (4 << 30) + cpus * (96 << 20)),
            cpu_seconds: Some(timeout.as_secs() * cpus + 10),
            file_size: Some(64 << 20),
            processes: Some(
                if run_as.is_some() {
                    0
                } else {
                    hpcagent_sandbox::limits::user_process_count()
                } + 2 * cpus
                    + 64,
            ),
            cpus: slot.cpus.clone(),
        };
        let output_bytes = planner.output_bytes();
        let request = Request {
            candidate: library,
            baseline,
            symbol: prepared.kernel.symbol(prepared.precision),
            language: prepared.language,
            arrays: planner.arrays(),
            calls: planner.calls,
            steps: planner.steps,
            sandbox: sandbox.clone(),
            readable: self.config.shared.iter().cloned().collect(),
            run_as,
            limits,
            namespaces: self.isolation.namespaces.is_ok(),
            budget: CALL_BUDGET,
            papi_events: extras.papi_events,
        };
        let outcome = launch(Launch {
            exe: &self.config.exe,
            wrapper: extras.wrapper,
            request,
            env: run_env(&sandbox, slot, prepared.language),
            timeout,
            output_bytes,
            // The supervisor works where the runners call from (see
            // `RunnerSetup::main_cpu`).
            cpus: slot.cpus.iter().take(1).copied().collect(),
            lock: self.timing_lock.as_ref().filter(|_| timed),
        })
        .await?;
        Ok((outcome, dir))
    }

    /// Grades a kernel's own baseline as a submission (for `corpus check`):
    /// correctness only, nothing to time it against.
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
        let submission = Submission::baseline(&kernel.id, precision, source);
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
            .run_and_judge(&prepared, None, Mode::Score, &held.slot, verdict)
            .await;
        Ok(finish(verdict, start))
    }
}

/// The checks after the public one (step `public`): each held-out case,
/// and for `Submit` the public case twice more, whose answers must agree
/// with its first to the bit.
pub(crate) fn checks_after_public<'a>(
    mut planner: Planner<'a>,
    public: usize,
    data: &[(CaseInputs, Reference)],
    submit: bool,
) -> Result<(Planner<'a>, Marks), String> {
    let mut held_out = Vec::new();
    for (i, (inputs, _)) in data.iter().enumerate().skip(1) {
        held_out.push(planner.check(&format!("held-out {i}"), inputs, true, false)?);
    }
    let mut repeats = Vec::new();
    if submit {
        for _ in 0..2 {
            repeats.push(planner.check("public again", &data[0].0, false, true)?);
        }
    }
    Ok((
        planner,
        Marks {
            public,
            held_out,
            repeats,
        },
    ))
}

/// Where the verdict's steps are, before the data they read is at hand.
pub(crate) struct Marks {
    pub public: usize,
    pub held_out: Vec<usize>,
    pub repeats: Vec<usize>,
}

impl Marks {
    /// The steps with the cases they ran (`data` in case order, public first).
    pub(crate) fn resolve<'a>(&'a self, data: &'a [(CaseInputs, Reference)]) -> Read<'a> {
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
            repeats: &self.repeats,
        }
    }
}

/// Copies `library` into `dir` (made now, owned by `owner` when given) as
/// `name`, readable by a runner of any user; its new path.
fn place(
    library: &Path,
    dir: &Path,
    name: &str,
    owner: Option<u32>,
) -> Result<std::path::PathBuf, String> {
    std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if let Some(uid) = owner {
        nix::unistd::chown(dir, Some(uid.into()), Some(uid.into()))
            .map_err(|e| format!("chown sandbox: {e}"))?;
    }
    let to = dir.join(name);
    std::fs::copy(library, &to).map_err(|e| format!("copy library: {e}"))?;
    std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| format!("library permissions: {e}"))?;
    Ok(to)
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

/// The runner's environment: nothing of the judge's but what runtimes need.
fn run_env(sandbox: &Path, slot: &Slot, language: Language) -> Vec<(String, String)> {
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
        env.retain(|(k, _)| !GPU_FILTERS.contains(&k.as_str()));
        env.extend(gpu_env(gpu, language));
    }
    env
}

/// The variables that choose which GPUs a runtime sees.
const GPU_FILTERS: [&str; 3] = [
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
];

/// What makes the node's GPU `gpu` (as the judge numbers them) the only one
/// a run sees. ROCm filters twice, ROCr first (`ROCR_VISIBLE_DEVICES`,
/// the node's numbers), then HIP among what is left (`HIP_VISIBLE_DEVICES`,
/// and `CUDA_VISIBLE_DEVICES`, which HIP on AMD reads the same way): after
/// the first, the slot's GPU is HIP's device 0. CUDA reads only its own.
fn gpu_env(gpu: u32, language: Language) -> Vec<(String, String)> {
    let pair = |k: &str, v: String| (k.to_string(), v);
    match language {
        Language::Hip => vec![
            pair("ROCR_VISIBLE_DEVICES", gpu.to_string()),
            pair("HIP_VISIBLE_DEVICES", "0".into()),
        ],
        // Host code uses no GPU; on either vendor it sees at most its slot's.
        _ => vec![
            pair("CUDA_VISIBLE_DEVICES", gpu.to_string()),
            pair("ROCR_VISIBLE_DEVICES", gpu.to_string()),
        ],
    }
}

pub(crate) fn fail(mut verdict: Verdict, status: Status, message: impl Into<String>) -> Verdict {
    outcome::set(&mut verdict, status, message);
    verdict
}

pub(crate) fn finish(mut verdict: Verdict, start: Instant) -> Verdict {
    verdict.elapsed_s = start.elapsed().as_secs_f64();
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(gpu: u32, language: Language) -> Vec<(String, String)> {
        let slot = Slot {
            index: 0,
            cpus: vec![0],
            gpu: Some(gpu),
        };
        run_env(Path::new("/sandbox"), &slot, language)
            .into_iter()
            .filter(|(k, _)| GPU_FILTERS.contains(&k.as_str()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_hip_slot_sees_its_gpu_as_hip_device_0() {
        // Beverin: slot 3 of 4. ROCr keeps the node's GPU 3 alone; HIP's
        // own filter then counts from what ROCr left.
        assert_eq!(
            env_of(3, Language::Hip),
            pairs(&[("ROCR_VISIBLE_DEVICES", "3"), ("HIP_VISIBLE_DEVICES", "0")])
        );
    }

    #[test]
    fn a_cuda_slot_sees_its_gpu_by_the_node_s_number() {
        assert_eq!(
            env_of(2, Language::Cuda),
            pairs(&[("CUDA_VISIBLE_DEVICES", "2"), ("ROCR_VISIBLE_DEVICES", "2")])
        );
    }
}

//! What a run's report says about the submission: the verdict's status and
//! message, worst first, its outputs against the reference, and its time
//! against the baseline's.

use hpcagent_sandbox::landlock::Enforcement;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::data::{CaseInputs, Reference};
use crate::verdict::{Status, Timing, Verdict};
use hpcagent_corpus::{DType, Tolerance};
use hpcagent_runner::floor::Floor;
use hpcagent_runner::protocol::{Event, Side};
use hpcagent_runner::timing::{Speedup, StopRule};
use hpcagent_runner::verify::{self, Comparison, Output};
use hpcagent_runner::{RunOutcome, Verifier};

use super::Mode;

/// A verified step and the case it ran.
pub(crate) struct Checked<'a> {
    pub step: usize,
    pub data: &'a (CaseInputs, Reference),
}

/// The steps a verdict reads.
pub(crate) struct Read<'a> {
    pub public: Checked<'a>,
    pub held_out: Vec<Checked<'a>>,
    /// Checks whose calls are the timed ones (without pairs: timed against
    /// NumPy), each on a secret input set of the grade.
    pub timed: Vec<Checked<'a>>,
    /// Steps whose digests must equal the public step's.
    pub repeats: &'a [usize],
    /// When the timed pairs stopped: the verdict says how they ended.
    pub stop: Option<StopRule>,
}

/// Everything that can be said about a run, worst first.
pub(crate) fn judge_outcome(
    verdict: &mut Verdict,
    read: &Read<'_>,
    outcome: &RunOutcome,
    mode: Mode,
) {
    // What a Submit's program printed could describe its held-out cases
    // or its timed calls' sizes.
    if mode == Mode::Score {
        verdict.stdout_tail = outcome.stdout_tail.clone();
        verdict.stderr_tail = outcome.stderr_tail.clone();
    }
    verdict.isolation = isolation(outcome);
    verdict.buffers = outcome
        .events
        .iter()
        .find_map(|e| match e {
            Event::Buffers(backing) => Some(backing.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let measured = timings(verdict, outcome, read);
    judge_answers(verdict, read, outcome, mode);
    if let (Status::Ok, Some(s)) = (verdict.status, measured) {
        verdict.speedup = Some(s.median);
        verdict.speedup_low = Some(s.low);
        verdict.speedup_high = Some(s.high);
        verdict.pairs = s.pairs;
        verdict.denominator = "baseline".into();
        if let Some(stop) = read.stop {
            verdict.stopped = stop.stopped(&s, verdict.baseline.as_ref().map(|b| b.spread));
        }
    } else if verdict.status == Status::Ok && read.stop.is_some() {
        // Pairs were planned and ended before a whole round (an input set
        // of the grade's own for each, and too few sets of one shape): an
        // `ok` without a speedup must say why it has none.
        let pairs = outcome
            .events
            .iter()
            .filter(|e| matches!(e, Event::Pair { .. }))
            .count();
        verdict.pairs = pairs as u32;
        verdict.stopped =
            format!("not timed: {pairs} timed pair(s), fewer than a round (a pair in each order)");
    }
}

/// How the submission's runner was isolated, as the verdict says it.
fn isolation(outcome: &RunOutcome) -> String {
    let Some(isolation) = outcome.events.iter().find_map(|e| match e {
        Event::Isolated(i) => Some(i),
        _ => None,
    }) else {
        return String::new();
    };
    let mut missing = Vec::new();
    if !isolation.namespaces {
        missing.push("no namespaces of its own (the node's other processes are visible)");
    }
    match isolation.landlock {
        Enforcement::Full => {}
        Enforcement::Partial => missing.push("Landlock partly enforced"),
        Enforcement::None => missing.push("no Landlock (files outside its directory reachable)"),
    }
    if !isolation.seccomp {
        missing.push("no seccomp filter");
    }
    if !isolation.held {
        missing.push("stopped between calls by signals it can undo (no ptrace)");
    }
    if missing.is_empty() {
        "full".into()
    } else {
        format!("weak: {}", missing.join("; "))
    }
}

/// The verdict's status and message: how the run ended, then the answers.
fn judge_answers(verdict: &mut Verdict, read: &Read<'_>, outcome: &RunOutcome, mode: Mode) {
    if let Some((status, message)) = run_failure(verdict, outcome) {
        return set(verdict, status, message);
    }
    let public = compare_case(&read.public, outcome);
    verdict.max_abs_error = public.max_abs_error;
    verdict.max_rel_error = public.max_rel_error;
    verdict.first_mismatch = public.first.clone();
    if !public.correct {
        let message = public.message.unwrap_or_else(|| "wrong result".into());
        return set(verdict, Status::Incorrect, message);
    }
    let mismatch = outcome
        .events
        .iter()
        .find_map(|e| match e {
            Event::Mismatch { message } => Some(message.clone()),
            _ => None,
        })
        .or_else(|| {
            read.timed.iter().find_map(|checked| {
                let compared = compare_case(checked, outcome);
                (!compared.correct).then(|| {
                    let why = compared.message.unwrap_or_else(|| "a wrong result".into());
                    format!("on a timed call with the grade's own inputs: {why}")
                })
            })
        });
    if let Some(message) = mismatch {
        // Wrong on the timed calls' fresh inputs: for Submit, at this
        // grade's own sizes too, which a kernel tuned to the public sizes
        // gets wrong as it does the held-out cases (overfit); one right on
        // those is wrong on values alone (a replayed or cached answer).
        let overfit = mode == Mode::Submit
            && read
                .held_out
                .iter()
                .any(|checked| !compare_case(checked, outcome).correct);
        if overfit {
            let message = "correct on the public case but wrong on held-out cases and on the \
                           timed calls at this grade's own sizes";
            return set(verdict, Status::Overfit, message);
        }
        return set(verdict, Status::Incorrect, message);
    }
    verdict.correct = true;
    verdict.message = "correct on the public case".into();
    if mode == Mode::Submit {
        judge_held_out(verdict, read, outcome);
    }
}

/// The submission's and the baseline's times, and the speedup with its
/// interval, from the timed pairs; without pairs, the calls of the timed
/// checks, or their batches' calls, each batch one time a call (timed
/// against NumPy: each as it would be timed inside its runner, where the
/// run measured the runner's floor), else of the public
/// step (a profile's). Either way net of the floor the verdict names.
fn timings(verdict: &mut Verdict, outcome: &RunOutcome, read: &Read<'_>) -> Option<Speedup> {
    let floors: Vec<Floor> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Floor(floor) => Some(*floor),
            _ => None,
        })
        .collect();
    // One measure of many calls (pairs), or one call's beside each timed call.
    let floor = match floors.as_slice() {
        [] => None,
        [one] => Some(*one),
        many => Some(Floor::of(
            &mut many.iter().map(|f| f.ns).collect::<Vec<_>>(),
        )),
    };
    verdict.floor_ns = floor.map_or(0, |floor| floor.ns);
    let pairs: Vec<(u64, u64)> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Pair {
                baseline_ns,
                candidate_ns,
            } => Some((*baseline_ns, *candidate_ns)),
            _ => None,
        })
        .collect();
    if pairs.is_empty() {
        let timed: Vec<usize> = match read.timed.as_slice() {
            [] => vec![read.public.step],
            checks => checks.iter().map(|c| c.step).collect(),
        };
        let calls: Vec<u64> = outcome
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Call { step, ns } if timed.contains(step) => {
                    Some(floor.map_or(*ns, |floor| floor.inside(*ns)))
                }
                // A batch's calls are all timed ones, one time a call.
                Event::Batch { calls, ns, .. } => {
                    Some(floor.map_or(*ns / u64::from((*calls).max(1)), |floor| {
                        floor.inside_batch(*ns, *calls)
                    }))
                }
                _ => None,
            })
            .collect();
        verdict.timing = Timing::from_samples(&calls);
        // A batch is one time for several calls: `reps` counts the calls.
        let batched: u32 = outcome
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Batch { calls, .. } => Some(*calls),
                _ => None,
            })
            .sum();
        if let Some(timing) = verdict.timing.as_mut()
            && batched > 0
        {
            timing.reps = batched;
        }
        return None;
    }
    let (baseline, candidate): (Vec<u64>, Vec<u64>) = pairs.iter().copied().unzip();
    verdict.timing = Timing::from_samples(&candidate);
    verdict.baseline = Timing::from_samples(&baseline);
    verdict.device = outcome.events.iter().find_map(|e| match e {
        Event::DeviceTimes { ns } => Timing::from_samples(ns),
        _ => None,
    });
    Speedup::of(&pairs)
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// The judge's own failure in `outcome`, if the run had one (a runner that
/// could not start, the baseline's runner, the supervisor): not the
/// submission's doing.
pub(crate) fn harness_failure(outcome: &RunOutcome) -> Option<String> {
    let mut scratch = Verdict::new(Status::Ok, "");
    run_failure(&mut scratch, outcome)
        .and_then(|(status, message)| (status == Status::HarnessError).then_some(message))
}

/// Why the run did not finish its calls, if it did not.
fn run_failure(verdict: &mut Verdict, outcome: &RunOutcome) -> Option<(Status, String)> {
    for event in &outcome.events {
        match event {
            Event::Failed {
                side: Side::Baseline,
                stage,
                message,
            } => {
                return Some((
                    Status::HarnessError,
                    format!("the baseline could not run ({stage}): {message}"),
                ));
            }
            Event::Ended {
                side: Side::Baseline,
                ..
            } => {
                return Some((
                    Status::HarnessError,
                    "the baseline's runner ended before its calls did".into(),
                ));
            }
            Event::Failed {
                side: Side::Candidate,
                stage,
                message,
            } => return Some(candidate_failed(stage, message)),
            Event::Ended {
                side: Side::Candidate,
                code,
                signal,
                timed_out,
            } => {
                if let Some(sig) = signal {
                    verdict.signal = Some(signal_name(*sig));
                }
                let loaded = outcome.events.contains(&Event::Loaded);
                return Some(candidate_ended(*code, *signal, *timed_out, loaded));
            }
            Event::InputModified { array, .. } => {
                return Some((
                    Status::Incorrect,
                    format!("input {array} was modified; inputs are const"),
                ));
            }
            _ => {}
        }
    }
    outcome
        .supervisor_error
        .as_ref()
        .map(|e| (Status::HarnessError, format!("the run's supervisor: {e}")))
}

/// A failure the submission's runner reported: before the library loaded,
/// the harness's; from loading on, the submission's.
fn candidate_failed(stage: &str, message: &str) -> (Status, String) {
    match stage {
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
        "sync" | "copy" | "alloc" | "call" => (
            Status::Crash,
            format!("a call failed in the runner ({stage}): {message}"),
        ),
        _ => (Status::HarnessError, format!("runner {stage}: {message}")),
    }
}

fn candidate_ended(
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    loaded: bool,
) -> (Status, String) {
    if timed_out && !loaded {
        return (
            Status::Timeout,
            "its library did not finish loading within 30 s (its initializers ran or stalled)"
                .into(),
        );
    }
    if timed_out {
        return (
            Status::Timeout,
            "a call did not finish within its time (20 times the baseline's, at least 0.5 s)"
                .into(),
        );
    }
    match (signal, code) {
        (Some(libc::SIGXCPU), _) => (Status::Timeout, "used up its CPU time limit".into()),
        (Some(sig), _) => {
            let why = match sig {
                libc::SIGXFSZ => " (wrote more output than the 64 MiB allowed)",
                libc::SIGSEGV | libc::SIGBUS => " (invalid memory access)",
                _ => "",
            };
            (
                Status::Crash,
                format!("killed by {}{why}", signal_name(sig)),
            )
        }
        (None, code) => (
            Status::Crash,
            format!(
                "the process exited (code {}) before the calls finished",
                code.unwrap_or(-1)
            ),
        ),
    }
}

/// Held-out cases and determinism (Submit): details of held-out cases stay secret.
fn judge_held_out(verdict: &mut Verdict, read: &Read<'_>, outcome: &RunOutcome) {
    let hidden: Vec<Comparison> = read
        .held_out
        .iter()
        .map(|checked| compare_case(checked, outcome))
        .collect();
    verdict.hidden_total = hidden.len() as u32;
    verdict.hidden_passed = hidden.iter().filter(|c| c.correct).count() as u32;
    // A step sends one digest, and one more for each call that differed.
    let digests_of = |wanted: usize| {
        outcome.events.iter().filter_map(move |e| match e {
            Event::OutputDigest { step, digest } if *step == wanted => Some(digest),
            _ => None,
        })
    };
    let first = digests_of(read.public.step).next();
    let deterministic = first.is_some()
        && std::iter::once(read.public.step)
            .chain(read.repeats.iter().copied())
            .all(|step| {
                let mut digests = digests_of(step).peekable();
                digests.peek().is_some() && digests.all(|d| Some(d) == first)
            });
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
        let message = "not deterministic: calls on the public case gave different bits";
        return set(verdict, Status::Incorrect, message);
    }
    verdict.message = format!(
        "correct on the public case and {} held-out cases, deterministic",
        verdict.hidden_total
    );
}

pub(crate) fn set(verdict: &mut Verdict, status: Status, message: impl Into<String>) {
    verdict.status = status;
    verdict.correct = false;
    verdict.message = message.into();
    if status == Status::Overfit {
        // Which held-out case and where stay secret.
        verdict.first_mismatch = None;
    }
}

fn compare_case(checked: &Checked<'_>, outcome: &RunOutcome) -> Comparison {
    let mut total = Comparison::default();
    for array in checked.data.0.arrays.iter().filter(|a| a.role.is_output()) {
        match outcome.compared.get(&(checked.step, array.name.clone())) {
            Some(comparison) => total.merge(comparison.clone()),
            None => total.merge(failed(format!("output {} was not returned", array.name))),
        }
    }
    total
}

fn failed(message: String) -> Comparison {
    Comparison {
        correct: false,
        message: Some(message),
        ..Comparison::default()
    }
}

/// What a run's checks are held to: each checked step's output arrays and
/// the files of their reference answers, within the kernel's tolerance (a
/// timed check within [`Tolerance::for_timed_calls`], as a timed pair's
/// calls are). It compares
/// an output as the run sends it back ([`Verifier`]), against the
/// reference's file mapped rather than read: at L both are gigabytes.
pub(crate) struct Expected {
    steps: HashMap<usize, (Vec<ExpectedArray>, Tolerance)>,
}

struct ExpectedArray {
    name: String,
    dtype: DType,
    shape: Vec<i64>,
    reference: PathBuf,
}

impl Expected {
    /// The answers of `read`'s steps, within `tolerance`.
    pub(crate) fn of(read: &Read<'_>, tolerance: Tolerance) -> Arc<dyn Verifier> {
        let timed = read
            .timed
            .iter()
            .map(|checked| (checked, tolerance.for_timed_calls()));
        let steps = std::iter::once(&read.public)
            .chain(&read.held_out)
            .map(|checked| (checked, tolerance))
            .chain(timed)
            .map(|(checked, tolerance)| {
                let (inputs, reference) = checked.data;
                let arrays = inputs
                    .arrays
                    .iter()
                    .filter(|a| a.role.is_output())
                    .filter_map(|a| {
                        Some(ExpectedArray {
                            name: a.name.clone(),
                            dtype: a.dtype,
                            shape: a.shape.clone(),
                            reference: reference.outputs.get(&a.name)?.clone(),
                        })
                    })
                    .collect();
                (checked.step, (arrays, tolerance))
            })
            .collect();
        Arc::new(Expected { steps })
    }
}

impl Verifier for Expected {
    fn verify(&self, step: usize, array: &str, actual: &[u8]) -> Option<Comparison> {
        let (arrays, tolerance) = self.steps.get(&step)?;
        let expected = arrays.iter().find(|a| a.name == array)?;
        let reference = match map_file(&expected.reference) {
            Ok(mapped) => mapped,
            Err(e) => return Some(failed(format!("reference output {array}: {e}"))),
        };
        Some(verify::compare(
            &Output {
                name: array,
                dtype: expected.dtype,
                shape: &expected.shape,
                actual,
                expected: reference.as_deref().unwrap_or_default(),
            },
            *tolerance,
        ))
    }
}

/// `path` mapped read-only; `None` for an empty file (which has no mapping).
fn map_file(path: &Path) -> std::io::Result<Option<memmap2::Mmap>> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    // SAFETY: a reference output in the judge's private directory, written
    // once through a rename and never changed in place; a trim of the
    // cache unlinks it, which leaves this mapping whole.
    unsafe { memmap2::Mmap::map(&file) }.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::ArrayData;
    use hpcagent_corpus::Role;

    fn f64s(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn a_checked_output_is_held_to_its_reference_file() {
        let dir = tempfile::tempdir().unwrap();
        let data = one_output(dir.path(), "y", &[1.0, 2.0, 3.0]);
        let expected = Expected::of(&read_of(&data, 2, None), Tolerance::scaled(1e-9, 1e-12));
        let right = expected.verify(2, "y", &f64s(&[1.0, 2.0, 3.0])).unwrap();
        assert!(right.correct, "{right:?}");
        let wrong = expected.verify(2, "y", &f64s(&[1.0, 2.5, 3.0])).unwrap();
        assert!(!wrong.correct);
        assert_eq!(wrong.first.unwrap().index, [1]);
        assert!(expected.verify(1, "y", &[]).is_none(), "step 1 is no check");
        assert!(expected.verify(2, "x", &[]).is_none(), "x is no output");
        std::fs::remove_file(&data.1.outputs["y"]).unwrap();
        let gone = expected.verify(2, "y", &f64s(&[1.0, 2.0, 3.0])).unwrap();
        assert!(!gone.correct);
        assert!(gone.message.unwrap().contains("reference output y"));
    }

    /// A case of one float64 output `name`, its reference answer
    /// `values` written in `dir`.
    fn one_output(dir: &Path, name: &str, values: &[f64]) -> (CaseInputs, Reference) {
        let reference = dir.join(format!("{name}.bin"));
        std::fs::write(&reference, f64s(values)).unwrap();
        let inputs = CaseInputs::for_test(vec![ArrayData {
            name: name.into(),
            dtype: DType::F64,
            role: Role::Out,
            shape: vec![values.len() as i64],
            elements: values.len(),
            input: None,
        }]);
        let outputs = [(name.to_string(), reference)].into();
        (inputs, Reference { outputs })
    }

    /// A run checking `data` as its public case (step 0), a held-out case
    /// (1) and a timed call's set (2).
    fn every_check(data: &(CaseInputs, Reference)) -> Read<'_> {
        let checked = |step| Checked { step, data };
        Read {
            public: checked(0),
            held_out: vec![checked(1)],
            timed: vec![checked(2)],
            repeats: &[],
            stop: None,
        }
    }

    #[test]
    fn a_timed_check_is_held_to_twice_the_tolerance() {
        let dir = tempfile::tempdir().unwrap();
        let data = one_output(dir.path(), "y", &[1.0, 2.0]);
        let expected = Expected::of(&every_check(&data), Tolerance::plain(1e-9, 0.0));
        // Off by 1.5e-9 of itself: beyond the tolerance, within twice it.
        let off = f64s(&[1.0, 2.0 * (1.0 + 1.5e-9)]);
        for (step, within) in [(0, false), (1, false), (2, true)] {
            let compared = expected.verify(step, "y", &off).unwrap();
            assert_eq!(compared.correct, within, "step {step}: {compared:?}");
        }
        let wrong = expected.verify(2, "y", &f64s(&[1.0, 2.1])).unwrap();
        assert!(!wrong.correct);
    }

    /// A timed call is there to catch skipped work or a replayed answer,
    /// and is made up to 20 times a grade on values of its own: under
    /// HPCAgent-Bench's plain `atol`, an element of `product` whose 50
    /// terms of 1e6 cancel to -0.25 failed an honest loop on the rounding
    /// of its terms (the numbers below are that grade's). Such an element
    /// is held to the size of its output; the public and held-out cases
    /// keep HPCAgent-Bench's own rule, and a wrong answer fails every check.
    #[test]
    fn a_timed_check_forgives_the_rounding_of_a_sum_that_cancels_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let expected = [42_509_855.213_975_84, -0.246_595_697_228_940_48];
        let data = one_output(dir.path(), "out", &expected);
        let checks = Expected::of(&every_check(&data), hpcagent_corpus::hab::FP64_TOLERANCE);
        let rounded = f64s(&[expected[0], -0.246_595_693_783_547_18]);
        for (step, within) in [(0, false), (1, false), (2, true)] {
            let compared = checks.verify(step, "out", &rounded).unwrap();
            assert_eq!(compared.correct, within, "step {step}: {compared:?}");
        }
        let skipped = f64s(&[expected[0], 0.0]);
        let in_f32 = f64s(&[f64::from(expected[0] as f32), expected[1]]);
        let replayed = f64s(&[-31_377_120.5, 1_234.5]);
        for wrong in [skipped, in_f32, replayed] {
            let compared = checks.verify(2, "out", &wrong).unwrap();
            assert!(!compared.correct, "{compared:?}");
        }
    }

    /// A case of no arrays.
    fn no_data() -> (CaseInputs, Reference) {
        (
            CaseInputs::for_test(Vec::new()),
            Reference {
                outputs: Default::default(),
            },
        )
    }

    /// A run whose public check is `step`, with pairs planned when `stop`.
    fn read_of(data: &(CaseInputs, Reference), step: usize, stop: Option<StopRule>) -> Read<'_> {
        Read {
            public: Checked { step, data },
            held_out: Vec::new(),
            timed: Vec::new(),
            repeats: &[],
            stop,
        }
    }

    fn outcome(events: Vec<Event>) -> RunOutcome {
        RunOutcome {
            events,
            compared: Default::default(),
            supervisor_error: None,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            wall: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn a_harness_failure_is_the_judge_s_own_and_a_crash_is_not() {
        let baseline_gone = outcome(vec![Event::Ended {
            side: Side::Baseline,
            code: None,
            signal: Some(libc::SIGKILL),
            timed_out: false,
        }]);
        assert!(harness_failure(&baseline_gone).is_some());
        let mut supervisor_gone = outcome(vec![Event::Loaded]);
        supervisor_gone.supervisor_error = Some("killed".into());
        assert!(harness_failure(&supervisor_gone).is_some());
        let crashed = outcome(vec![
            Event::Loaded,
            Event::Ended {
                side: Side::Candidate,
                code: None,
                signal: Some(libc::SIGSEGV),
                timed_out: false,
            },
        ]);
        assert_eq!(harness_failure(&crashed), None);
        assert_eq!(
            harness_failure(&outcome(vec![Event::Loaded, Event::Done])),
            None
        );
    }

    #[test]
    fn a_device_run_reports_the_device_time_of_its_timed_calls() {
        let data = no_data();
        let read = read_of(&data, 0, None);
        let pair = |b, c| Event::Pair {
            baseline_ns: b,
            candidate_ns: c,
        };
        let mut verdict = Verdict::new(Status::Ok, "");
        let events = vec![
            pair(200, 100),
            pair(210, 110),
            pair(190, 90),
            Event::DeviceTimes {
                ns: vec![40, 60, 50],
            },
        ];
        timings(&mut verdict, &outcome(events), &read);
        let device = verdict.device.expect("device times");
        assert_eq!((device.median_ns, device.reps), (50.0, 3));
        assert_eq!(verdict.timing.unwrap().median_ns, 100.0);
        // A host run reports none.
        let mut host = Verdict::new(Status::Ok, "");
        timings(&mut host, &outcome(vec![pair(200, 100)]), &read);
        assert!(host.device.is_none());
    }

    #[test]
    fn pairs_that_end_before_a_round_say_the_grade_was_not_timed() {
        let data = no_data();
        let stop = StopRule {
            fewest: 12,
            most: 1000,
            precision: 0.01,
            cap_ms: 30_000,
        };
        let read = read_of(&data, 1, Some(stop));
        let events = vec![
            Event::Pair {
                baseline_ns: 200,
                candidate_ns: 100,
            },
            Event::Call { step: 1, ns: 100 },
            Event::Done,
        ];
        let mut verdict = Verdict::new(Status::Ok, "");
        judge_outcome(&mut verdict, &read, &outcome(events), Mode::Score);
        assert_eq!(verdict.status, Status::Ok, "{}", verdict.message);
        assert!(verdict.speedup.is_none());
        assert_eq!(verdict.pairs, 1);
        assert!(
            verdict.stopped.starts_with("not timed: 1 timed pair"),
            "{}",
            verdict.stopped
        );
    }
}

//! Verdicts: what a grade concluded, in the judge's terms and on the wire.
//!
//! Status precedence, worst first: harness_error > build_error > timeout >
//! crash > incorrect > overfit > ok. Non-finite numbers (an infinite error, a
//! NaN output) are valid in protobuf; in JSON they are written as the strings
//! "inf", "-inf" and "nan", never as bare `Infinity`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use hpcagent_proto::v1 as pb;
use serde::{Deserialize, Serialize, Serializer};

use hpcagent_runner::finite::finite_or_string;
use hpcagent_runner::verify::Mismatch;

/// How a grade ended, ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Correct on the public case, wrong on a held-out one.
    Overfit,
    Incorrect,
    Crash,
    Timeout,
    BuildError,
    HarnessError,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Ok,
        Status::Overfit,
        Status::Incorrect,
        Status::Crash,
        Status::Timeout,
        Status::BuildError,
        Status::HarnessError,
    ];

    /// The status as every file and message writes it (the wire's word).
    pub fn as_str(self) -> &'static str {
        pb::Status::from(self).word()
    }

    /// The worse of two statuses.
    pub fn worst(self, other: Status) -> Status {
        self.max(other)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Status::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| format!("unknown status {s:?}"))
    }
}

/// Call times of one run, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timing {
    pub median_ns: f64,
    pub min_ns: f64,
    /// Interquartile range over the median: how noisy the reps were.
    pub spread: f64,
    /// The calls timed (a batch's calls, timed together, are one time).
    pub reps: u32,
}

impl Timing {
    /// Summarizes call times; `None` without any.
    pub fn from_samples(samples: &[u64]) -> Option<Timing> {
        if samples.is_empty() {
            return None;
        }
        let mut s: Vec<f64> = samples.iter().map(|&n| n as f64).collect();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let pos = p * (s.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        };
        let median = q(0.5);
        Some(Timing {
            median_ns: median,
            min_ns: s[0],
            spread: if median > 0.0 {
                (q(0.75) - q(0.25)) / median
            } else {
                0.0
            },
            reps: samples.len() as u32,
        })
    }
}

/// The outcome of a Score, Submit or Profile run.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub status: Status,
    pub task_id: String,
    pub language: String,
    pub precision: String,
    pub preset: String,
    pub message: String,
    pub correct: bool,
    #[serde(serialize_with = "finite_or_string")]
    pub max_abs_error: f64,
    #[serde(serialize_with = "finite_or_string")]
    pub max_rel_error: f64,
    pub first_mismatch: Option<Mismatch>,
    pub timing: Option<Timing>,
    pub baseline: Option<Timing>,
    /// cuda/hip: the device's own time of the submission's timed calls
    /// (see the proto's `device`).
    pub device: Option<Timing>,
    /// The median of the timed pairs' ratios (baseline over submission);
    /// `ok` only.
    #[serde(serialize_with = "option_finite_or_string")]
    pub speedup: Option<f64>,
    /// The speedup's 95% confidence interval; one that holds 1 is no change.
    #[serde(serialize_with = "option_finite_or_string")]
    pub speedup_low: Option<f64>,
    #[serde(serialize_with = "option_finite_or_string")]
    pub speedup_high: Option<f64>,
    /// Timed pairs (a baseline call and a submission call each) measured.
    pub pairs: u32,
    /// The sizes the timed pairs ran at: the public case's for a score, a
    /// submit's own (drawn by that grade) for a submit; empty when nothing
    /// was timed, or for an HPCAgent-Bench task (its public case's shapes).
    pub timed_sizes: BTreeMap<String, i64>,
    /// What the speedup divides (see the proto's `denominator`).
    pub denominator: String,
    /// Against NumPy, the NumPy and BLAS it ran on (see the proto's).
    pub reference_runtime: String,
    /// What the run's arrays lay on (see the proto's `buffers`).
    pub buffers: String,
    /// How the timed pairs ended (see the proto's `stopped`).
    pub stopped: String,
    /// The runner's per-call floor the timed calls are net of (see the
    /// proto's `floor_ns`); 0 when the run measured none.
    pub floor_ns: u64,
    /// How the submission's run was isolated: `full`, or what was missing.
    pub isolation: String,
    /// A submit whose speedup was above its task's plausible bound: how it
    /// was confirmed before it was credited (see the proto's).
    pub plausibility: String,
    pub hidden_passed: u32,
    pub hidden_total: u32,
    pub deterministic: Option<bool>,
    pub signal: Option<String>,
    pub cached_build: bool,
    pub elapsed_s: f64,
    pub build_log: String,
    pub stdout_tail: String,
    pub stderr_tail: String,
}

impl Verdict {
    /// A verdict with nothing measured yet.
    pub fn new(status: Status, message: impl Into<String>) -> Verdict {
        Verdict {
            status,
            task_id: String::new(),
            language: String::new(),
            precision: String::new(),
            preset: String::new(),
            message: message.into(),
            correct: false,
            max_abs_error: 0.0,
            max_rel_error: 0.0,
            first_mismatch: None,
            timing: None,
            baseline: None,
            device: None,
            speedup: None,
            speedup_low: None,
            speedup_high: None,
            pairs: 0,
            timed_sizes: BTreeMap::new(),
            denominator: String::new(),
            reference_runtime: String::new(),
            buffers: String::new(),
            stopped: String::new(),
            floor_ns: 0,
            isolation: String::new(),
            plausibility: String::new(),
            hidden_passed: 0,
            hidden_total: 0,
            deterministic: None,
            signal: None,
            cached_build: false,
            elapsed_s: 0.0,
            build_log: String::new(),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        }
    }
}

fn option_finite_or_string<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => finite_or_string(v, s),
        None => s.serialize_none(),
    }
}

impl From<Status> for pb::Status {
    fn from(s: Status) -> pb::Status {
        match s {
            Status::Ok => pb::Status::Ok,
            Status::Overfit => pb::Status::Overfit,
            Status::Incorrect => pb::Status::Incorrect,
            Status::Crash => pb::Status::Crash,
            Status::Timeout => pb::Status::Timeout,
            Status::BuildError => pb::Status::BuildError,
            Status::HarnessError => pb::Status::HarnessError,
        }
    }
}

impl From<pb::Status> for Status {
    fn from(s: pb::Status) -> Status {
        match s {
            pb::Status::Ok => Status::Ok,
            pb::Status::Overfit => Status::Overfit,
            pb::Status::Incorrect => Status::Incorrect,
            pb::Status::Crash => Status::Crash,
            pb::Status::Timeout => Status::Timeout,
            pb::Status::BuildError => Status::BuildError,
            pb::Status::HarnessError | pb::Status::Unspecified => Status::HarnessError,
        }
    }
}

fn timing_to_pb(t: &Timing) -> pb::Timing {
    pb::Timing {
        median_ns: t.median_ns,
        min_ns: t.min_ns,
        spread: t.spread,
        reps: t.reps,
    }
}

fn timing_from_pb(t: pb::Timing) -> Timing {
    Timing {
        median_ns: t.median_ns,
        min_ns: t.min_ns,
        spread: t.spread,
        reps: t.reps,
    }
}

impl From<&Verdict> for pb::Verdict {
    fn from(v: &Verdict) -> pb::Verdict {
        pb::Verdict {
            status: pb::Status::from(v.status) as i32,
            task_id: v.task_id.clone(),
            language: v.language.clone(),
            precision: v.precision.clone(),
            preset: v.preset.clone(),
            message: v.message.clone(),
            build_log: v.build_log.clone(),
            correct: v.correct,
            max_abs_error: v.max_abs_error,
            max_rel_error: v.max_rel_error,
            first_mismatch: v.first_mismatch.as_ref().map(|m| pb::Mismatch {
                output: m.output.clone(),
                index: m.index.clone(),
                expected: m.expected,
                actual: m.actual,
            }),
            timing: v.timing.as_ref().map(timing_to_pb),
            baseline: v.baseline.as_ref().map(timing_to_pb),
            device: v.device.as_ref().map(timing_to_pb),
            speedup: v.speedup.unwrap_or(0.0),
            speedup_low: v.speedup_low.unwrap_or(0.0),
            speedup_high: v.speedup_high.unwrap_or(0.0),
            pairs: v.pairs,
            timed_sizes: v.timed_sizes.clone().into_iter().collect(),
            isolation: v.isolation.clone(),
            plausibility: v.plausibility.clone(),
            denominator: v.denominator.clone(),
            reference_runtime: v.reference_runtime.clone(),
            buffers: v.buffers.clone(),
            stopped: v.stopped.clone(),
            floor_ns: v.floor_ns,
            hidden_passed: v.hidden_passed,
            hidden_total: v.hidden_total,
            deterministic: v.deterministic.unwrap_or(false),
            signal: v.signal.clone().unwrap_or_default(),
            cached_build: v.cached_build,
            elapsed_s: v.elapsed_s,
            stdout_tail: v.stdout_tail.clone(),
            stderr_tail: v.stderr_tail.clone(),
        }
    }
}

impl From<pb::Verdict> for Verdict {
    fn from(v: pb::Verdict) -> Verdict {
        let status = pb::Status::try_from(v.status)
            .map(Status::from)
            .unwrap_or(Status::HarnessError);
        Verdict {
            status,
            task_id: v.task_id,
            language: v.language,
            precision: v.precision,
            preset: v.preset,
            message: v.message,
            correct: v.correct,
            max_abs_error: v.max_abs_error,
            max_rel_error: v.max_rel_error,
            first_mismatch: v.first_mismatch.map(|m| Mismatch {
                output: m.output,
                index: m.index,
                expected: m.expected,
                actual: m.actual,
            }),
            timing: v.timing.map(timing_from_pb),
            baseline: v.baseline.map(timing_from_pb),
            device: v.device.map(timing_from_pb),
            speedup: (v.speedup != 0.0).then_some(v.speedup),
            speedup_low: (v.speedup_low != 0.0).then_some(v.speedup_low),
            speedup_high: (v.speedup_high != 0.0).then_some(v.speedup_high),
            pairs: v.pairs,
            timed_sizes: v.timed_sizes.into_iter().collect(),
            isolation: v.isolation,
            plausibility: v.plausibility,
            denominator: v.denominator,
            reference_runtime: v.reference_runtime,
            buffers: v.buffers,
            stopped: v.stopped,
            floor_ns: v.floor_ns,
            hidden_passed: v.hidden_passed,
            hidden_total: v.hidden_total,
            deterministic: (v.hidden_total > 0 || v.deterministic).then_some(v.deterministic),
            signal: (!v.signal.is_empty()).then_some(v.signal),
            cached_build: v.cached_build,
            elapsed_s: v.elapsed_s,
            build_log: v.build_log,
            stdout_tail: v.stdout_tail,
            stderr_tail: v.stderr_tail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_worst_first() {
        assert_eq!(Status::Ok.worst(Status::Overfit), Status::Overfit);
        assert_eq!(Status::Crash.worst(Status::Incorrect), Status::Crash);
        assert_eq!(Status::Timeout.worst(Status::Crash), Status::Timeout);
        assert_eq!(
            Status::HarnessError.worst(Status::BuildError),
            Status::HarnessError
        );
    }

    #[test]
    fn non_finite_numbers_are_valid_json() {
        let mut v = Verdict::new(Status::Incorrect, "x");
        v.max_abs_error = f64::INFINITY;
        v.max_rel_error = f64::NAN;
        v.speedup = Some(f64::NEG_INFINITY);
        let json = serde_json::to_string(&v).unwrap();
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["max_abs_error"], "inf");
        assert_eq!(back["max_rel_error"], "nan");
        assert_eq!(back["speedup"], "-inf");
        assert_eq!(back["status"], "incorrect");
    }

    #[test]
    fn timing_summary() {
        let t = Timing::from_samples(&[10, 12, 11, 30, 9]).unwrap();
        assert_eq!((t.median_ns, t.min_ns, t.reps), (11.0, 9.0, 5));
        assert!((t.spread - 2.0 / 11.0).abs() < 1e-12);
    }
}

//! A judge's verdict as the control plane takes it: read into the row the
//! store keeps (with the verdict's JSON), and checked against the task of
//! the lease it is recorded under.

use hpcagent_proto::v1 as pb;
use tonic::Status;

use crate::auth::Principal;
use crate::scheduler::{Submitter, TaskSpec};
use crate::store::VerdictRecord;
use hpcagent_common::AttemptOutcome;
use hpcagent_common::speedup::Speedup;

/// A judge's record, read into what the store keeps before the scheduler
/// lock is taken (the verdict's JSON is made here).
pub(super) struct Graded {
    pub kind: pb::GradeKind,
    pub verdict: pb::Verdict,
    pub record: VerdictRecord,
    /// Who submitted: the agent, or its worker for it.
    pub submitter: Submitter,
    /// What the agent said of how it ended, as its worker passed it on.
    pub agent_said: Option<String>,
}

impl Graded {
    pub fn read(judge: &Principal, r: pb::GradeRecord) -> Result<Graded, Status> {
        let verdict = r
            .verdict
            .ok_or_else(|| Status::invalid_argument("no verdict"))?;
        let kind = pb::GradeKind::try_from(r.kind).unwrap_or(pb::GradeKind::Unspecified);
        let agent_said = r
            .on_behalf
            .as_ref()
            .map(|b| b.message.clone())
            .filter(|m| !m.is_empty());
        let submitter = match r.on_behalf {
            None => Submitter::Agent,
            Some(b) => Submitter::Worker {
                ended: AttemptOutcome::from_wire(b.agent_ended)
                    .map_err(|e| Status::invalid_argument(format!("on_behalf: {e}")))?,
                starter: b.starter,
            },
        };
        let status = pb::Status::word_of(verdict.status).to_string();
        let speedup = Speedup::of_verdict(&verdict);
        let interval = speedup.and_then(|s| s.interval);
        let record = VerdictRecord {
            kind: kind.word().to_string(),
            judge: judge.name().to_string(),
            speedup: speedup.map(|s| s.value),
            speedup_low: interval.map(|(low, _)| low),
            speedup_high: interval.map(|(_, high)| high),
            median_ns: verdict.timing.as_ref().map(|t| t.median_ns),
            message: verdict.message.clone(),
            verdict: verdict_json(&verdict, &status),
            lease_id: r.lease_id,
            status,
            ..VerdictRecord::default()
        };
        Ok(Graded {
            kind,
            verdict,
            record,
            submitter,
            agent_said,
        })
    }
}

/// A verdict must be for the task of the lease it is recorded under.
pub(super) fn check_verdict_matches(verdict: &pb::Verdict, spec: &TaskSpec) -> Result<(), Status> {
    // A corpus's task id is its path (`dense_linear_algebra/gemm`) where
    // tasks are named by the kernel (`gemm`), and the path itself where
    // they are named by path (an HPCAgent-Bench checkout's keys).
    let kernel_of_verdict = verdict.task_id.rsplit('/').next().unwrap_or("");
    if (kernel_of_verdict == spec.kernel || verdict.task_id == spec.kernel)
        && verdict.language == spec.language
        && verdict.precision == spec.precision
        && spec.preset.as_ref().is_none_or(|p| *p == verdict.preset)
    {
        return Ok(());
    }
    Err(Status::invalid_argument(format!(
        "the verdict is for {} {} {} at {}, the lease for {} {} {} at {}",
        verdict.task_id,
        verdict.language,
        verdict.precision,
        verdict.preset,
        spec.kernel,
        spec.language,
        spec.precision,
        spec.preset.as_deref().unwrap_or("the judges' preset")
    )))
}

/// The verdict as the store keeps it (JSON). A struct, not a `json!` map:
/// one is made for every grade, and the map's allocations showed in the
/// lease traffic's profile.
#[derive(serde::Serialize)]
struct StoredVerdict<'a> {
    status: &'a str,
    message: &'a str,
    speedup: f64,
    speedup_low: Option<f64>,
    speedup_high: Option<f64>,
    pairs: u32,
    /// How the timed pairs ended: decided, or not (with the node's noise).
    #[serde(skip_serializing_if = "str::is_empty")]
    stopped: &'a str,
    /// The runner's per-call floor each pair's times are net of.
    floor_ns: u64,
    /// The sizes the timed pairs ran at (a submit draws its own).
    timed_sizes: std::collections::BTreeMap<&'a str, i64>,
    isolation: &'a str,
    denominator: &'a str,
    /// Against NumPy, the NumPy and BLAS the denominator was timed on.
    #[serde(skip_serializing_if = "str::is_empty")]
    reference_runtime: &'a str,
    /// What the run's arrays lay on.
    #[serde(skip_serializing_if = "str::is_empty")]
    buffers: &'a str,
    /// How a speedup above its task's plausible bound was confirmed.
    #[serde(skip_serializing_if = "str::is_empty")]
    plausibility: &'a str,
    median_ns: Option<f64>,
    baseline_ns: Option<f64>,
    max_abs_error: f64,
    max_rel_error: f64,
    hidden_passed: u32,
    hidden_total: u32,
    deterministic: bool,
    /// The grade's time at the judge, from the request to the verdict.
    elapsed_s: f64,
}

fn verdict_json(v: &pb::Verdict, status: &str) -> String {
    let interval = Speedup::of_verdict(v).and_then(|s| s.interval);
    let stored = StoredVerdict {
        status,
        message: &v.message,
        speedup: v.speedup,
        speedup_low: interval.map(|(low, _)| low),
        speedup_high: interval.map(|(_, high)| high),
        pairs: v.pairs,
        stopped: &v.stopped,
        floor_ns: v.floor_ns,
        timed_sizes: v
            .timed_sizes
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect(),
        isolation: &v.isolation,
        denominator: &v.denominator,
        reference_runtime: &v.reference_runtime,
        buffers: &v.buffers,
        plausibility: &v.plausibility,
        median_ns: v.timing.as_ref().map(|t| t.median_ns),
        baseline_ns: v.baseline.as_ref().map(|t| t.median_ns),
        max_abs_error: v.max_abs_error,
        max_rel_error: v.max_rel_error,
        hidden_passed: v.hidden_passed,
        hidden_total: v.hidden_total,
        deterministic: v.deterministic,
        elapsed_s: v.elapsed_s,
    };
    serde_json::to_string(&stored).expect("a verdict serializes")
}

//! The `baseline` policy: submit the kernel's own baseline.
//!
//! No LLM: it proves the whole pipeline (lease, judge, settle) and calibrates
//! a cluster, since its speedup should be about 1. The baseline is C written
//! with `real` and `SYMBOL` macros; the policy defines them for the task's
//! precision, and wraps it for C++. Other languages it cannot write: it says
//! so and the attempt ends unsupported. A task with no baseline (an
//! HPCAgent-Bench task its `BASELINES` overlay lacks) is skipped: the task
//! settles `skipped`, not failed.

use hpcagent_client::AttemptOutcome;
use hpcagent_client::speedup::Speedup;
use hpcagent_proto::v1 as pb;

use crate::judge_link::{JudgeLink, LinkError};
use crate::task_view;

use super::Attempt;

pub async fn attempt(judge: &mut JudgeLink, lease: &pb::Lease, instance: &str) -> Attempt {
    match submit(judge, lease, instance).await {
        Ok(attempt) => attempt,
        Err(e) => Attempt::ended(AttemptOutcome::Error, e.to_string()),
    }
}

async fn submit(
    judge: &mut JudgeLink,
    lease: &pb::Lease,
    instance: &str,
) -> Result<Attempt, LinkError> {
    let request = pb::TaskRequest {
        task_id: lease.kernel.clone(),
        language: lease.language.clone(),
        precision: lease.precision.clone(),
        preset: lease.preset.clone(),
    };
    let task = judge
        .call(|mut j| {
            let request = request.clone();
            async move { j.task(request).await }
        })
        .await?;
    if task.baseline_source.is_empty() {
        // An HPCAgent-Bench task whose BASELINES overlay has none: nothing
        // to submit, and nothing wrong with the task.
        return Ok(Attempt::ended(
            AttemptOutcome::Skipped,
            format!("{} has no baseline to submit", lease.kernel),
        ));
    }
    let Some(source) = task_view::baseline(&task, &lease.precision) else {
        return Ok(Attempt::ended(
            AttemptOutcome::Unsupported,
            format!(
                "the baseline policy writes c and cpp, not {}",
                lease.language
            ),
        ));
    };
    let dir = std::path::Path::new(&lease.attempt_dir);
    let _ = std::fs::write(
        dir.join(format!(
            "submission.{}",
            if lease.language == "cpp" { "cpp" } else { "c" }
        )),
        &source,
    );
    let request = pb::GradeRequest {
        task_id: lease.kernel.clone(),
        language: lease.language.clone(),
        precision: lease.precision.clone(),
        code: Some(pb::grade_request::Code::Source(source)),
        flags: Vec::new(),
        client: instance.to_string(),
        lease_id: lease.lease_id.clone(),
        preset: lease.preset.clone(),
        confirming: false,
        on_behalf: None,
    };
    let verdict = match judge
        .call(|mut j| {
            let request = request.clone();
            async move { j.submit(request).await }
        })
        .await
    {
        Ok(verdict) => verdict,
        Err(LinkError::Refused(status)) => {
            return Ok(Attempt::ended(
                AttemptOutcome::Error,
                format!("the judge refused the submission: {}", status.message()),
            ));
        }
        Err(e) => return Err(e),
    };
    let status = pb::Status::try_from(verdict.status).unwrap_or(pb::Status::Unspecified);
    // Calibration reads this: the baseline against itself should be no change.
    let summary = serde_json::json!({
        "status": status.as_str_name(),
        "message": verdict.message,
        "speedup": verdict.speedup,
        "speedup_low": verdict.speedup_low,
        "speedup_high": verdict.speedup_high,
        "no_change": Speedup::of_verdict(&verdict).is_some_and(|s| s.no_change()),
    });
    let _ = std::fs::write(dir.join(crate::tools::VERDICT_FILE), summary.to_string());
    crate::tools::keep_build_log(dir, &verdict);
    Ok(Attempt::ended(
        AttemptOutcome::Submitted,
        format!("{}: {}", status.as_str_name(), verdict.message),
    ))
}

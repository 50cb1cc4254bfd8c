//! The `baseline` policy: submit the kernel's own baseline.
//!
//! No LLM: it proves the whole pipeline (lease, judge, settle) and calibrates
//! a cluster, since its speedup should be about 1. The baseline is C written
//! with `real` and `SYMBOL` macros; the policy defines them for the task's
//! precision, and wraps it for C++. Other languages it cannot write: it says
//! so and the attempt ends unsupported. A task with no baseline (an
//! HPCAgent-Bench task its `BASELINES` overlay lacks) is skipped: the task
//! settles `skipped`, not failed.

use hpcagent_common::AttemptOutcome;
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
    let request = crate::judge_link::grade_request(lease, instance, source, Vec::new(), None);
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
    // Calibration reads it: the baseline against itself should be no change.
    crate::tools::keep_verdict(dir, &verdict);
    Ok(Attempt::ended(
        AttemptOutcome::Submitted,
        format!(
            "{}: {}",
            pb::Status::word_of(verdict.status),
            verdict.message
        ),
    ))
}

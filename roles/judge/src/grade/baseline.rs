//! The kernel's own baseline: built like a submission for the timed pairs
//! (from the build cache after the first time), and graded as one for
//! `corpus check`. It does not own the baseline's source (the corpus does)
//! nor HPCAgent-Bench's overlay baselines ([`super::hab`]).

use std::time::Instant;

use crate::build::Built;
use crate::judge::{Judge, JudgeError, Submission};
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};
use hpcagent_corpus::{Kernel, Precision};

use super::{Mode, finish, prepare};

/// The kernel's baseline, built like a submission (from the cache when
/// it was built before).
pub(crate) async fn build_baseline(
    judge: &Judge,
    kernel: &Kernel,
    precision: Precision,
    slot: &Slot,
) -> Result<Built, String> {
    let source =
        std::fs::read_to_string(kernel.baseline_path()).map_err(|e| format!("baseline.c: {e}"))?;
    let submission = Submission::baseline(&kernel.id, precision, source);
    match prepare(
        judge,
        &submission,
        &baseline_defines(kernel, precision),
        slot,
    )
    .await
    {
        Ok(Ok((prepared, _))) => Ok(prepared.built),
        Ok(Err(v)) => Err(format!(
            "the baseline does not build: {} {}",
            v.message, v.build_log
        )),
        Err(e) => Err(format!("the baseline: {e}")),
    }
}

/// Grades a kernel's own baseline as a submission (for `corpus check`):
/// correctness only, nothing to time it against.
pub async fn check_baseline(
    judge: &Judge,
    kernel: &Kernel,
    precision: Precision,
) -> Result<Verdict, JudgeError> {
    let start = Instant::now();
    let held = judge.slots.acquire().await;
    let source = std::fs::read_to_string(kernel.baseline_path())
        .map_err(|e| JudgeError::Internal(format!("{}: {e}", kernel.baseline_path().display())))?;
    let submission = Submission::baseline(&kernel.id, precision, source);
    let (prepared, mut verdict) = match prepare(
        judge,
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
    let verdict = judge
        .run_and_judge(
            &prepared,
            None,
            Mode::Score,
            judge.config.secret,
            &held.slot,
            verdict,
        )
        .await;
    Ok(finish(verdict, start))
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

//! Timing a grade again: pairs that ended undecided (at their cap or their
//! most pairs) are timed once more, in fresh runners, and both timings'
//! pairs pooled into one speedup.
//!
//! Why fresh runners: beside a CPU-bound process on the runner's CPU, the
//! same code against itself leaned by up to 3% for a whole grade (s212 at
//! S: 0.971x, every fifth of its 1,000 pairs between 0.960x and 0.982x),
//! while the next grade, in other runners, read 1.00x. What leans is the
//! two runners as they are placed (their own pages, their place among the
//! CPU's tasks), not the moment, so more pairs in the same runners
//! narrow the interval around the lean instead of taking it out. Such
//! leans are what leaves a grade undecided near 1, where no-change and a
//! small speedup meet; a second pair of runners halves their weight.
//!
//! Only a grade with a speedup and nothing wrong is timed again: the
//! second run makes pairs alone (the checks were the first run's), on
//! inputs of a new secret at the first run's sizes, and at least as many
//! as the first made, so that the two weigh alike in the pooled median.
//! Whatever it reports against the submission (a mismatch, a crash, a
//! changed input) counts as the first run's would; a failure of the
//! judge's own in it (the baseline's runner, the supervisor) leaves the
//! first timing standing.

use hpcagent_corpus::Sizes;
use hpcagent_runner::RunOutcome;
use hpcagent_runner::protocol::Event;
use hpcagent_runner::timing::{Speedup, StopRule};

use super::outcome::harness_failure;
use super::plan::Planner;
use super::prepare::Prepared;
use super::run::{Extras, run};
use crate::build::Built;
use crate::judge::Judge;
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};

/// The rule the pooled pairs are read by, when `verdict`'s pairs ended
/// undecided under `stop`: twice its most pairs and its cap, the two
/// timings' together.
pub(super) fn undecided(verdict: &Verdict, stop: Option<StopRule>) -> Option<StopRule> {
    let stop = stop?;
    let speedup = Speedup {
        median: verdict.speedup?,
        low: verdict.speedup_low?,
        high: verdict.speedup_high?,
        pairs: verdict.pairs,
    };
    (verdict.status == Status::Ok && stop.decided(&speedup).is_none()).then_some(StopRule {
        most: 2 * stop.most,
        cap_ms: 2 * stop.cap_ms,
        ..stop
    })
}

/// The second timing: pairs alone, in runners of their own; an error when
/// the judge could not make it (the first timing then stands).
pub(super) async fn again(
    judge: &Judge,
    prepared: &Prepared<'_>,
    baseline: &Built,
    sizes: &Sizes,
    stop: StopRule,
    slot: &Slot,
) -> Result<RunOutcome, String> {
    let mut planner = Planner::new(prepared.kernel, prepared.precision);
    planner
        .pairs(sizes, rand::random(), stop)
        .map_err(|e| e.to_string())?;
    let (outcome, _dir) = run(
        judge,
        prepared,
        Some(baseline),
        planner,
        slot,
        Extras::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    match harness_failure(&outcome) {
        Some(why) => Err(why),
        None => Ok(outcome),
    }
}

/// `first` with what `second` timed and said against the submission.
pub(super) fn pooled(mut first: RunOutcome, second: RunOutcome) -> RunOutcome {
    let kept = second.events.into_iter().filter(|e| {
        matches!(
            e,
            Event::Floor(_)
                | Event::Pair { .. }
                | Event::Mismatch { .. }
                | Event::InputModified { .. }
                | Event::Failed { .. }
                | Event::Ended { .. }
        )
    });
    // Before the first run's end: what follows `Done` is not read.
    let end = first
        .events
        .iter()
        .position(Event::ends_run)
        .unwrap_or(first.events.len());
    first.events.splice(end..end, kept);
    first
}

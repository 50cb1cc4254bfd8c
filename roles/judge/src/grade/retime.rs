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
//! Only pairs a second timing can decide are timed again: a lean of a few
//! percent is what it halves, and an interval of that order is what a
//! lean leaves undecided. Where six rounds or more reached wider than
//! [`CLEAR_PRECISION`] (±5%), the node's noise left them undecided, and
//! as many pairs again narrow the interval by about a square root of two,
//! at twice the cost: in a campaign at L (calls of 0.1–2.5 s, a 30 s cap)
//! 2 of the 14 grades that ended so decided when timed again, each at the
//! cost of its 30 s cap again, against 4 of the 12 that ended within ±5%.
//! Fewer rounds than can tell a change are timed again whatever their
//! spread: the two timings' pairs together may be enough.
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
use hpcagent_runner::timing::{CLEAR_PRECISION, FEWEST_TO_TELL, Speedup, StopRule};

use super::outcome::harness_failure;
use super::plan::Planner;
use super::prepare::Prepared;
use super::run::{Extras, run};
use crate::build::Built;
use crate::judge::Judge;
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};

/// The rule the pooled pairs are read by, when `verdict`'s pairs ended
/// undecided under `stop` and a second timing can decide them (see the
/// module's doc): twice its most pairs and its cap, the two timings'
/// together.
pub(super) fn undecided(verdict: &Verdict, stop: Option<StopRule>) -> Option<StopRule> {
    let stop = stop?;
    let speedup = Speedup {
        median: verdict.speedup?,
        low: verdict.speedup_low?,
        high: verdict.speedup_high?,
        pairs: verdict.pairs,
    };
    let halvable = speedup.rounds() < FEWEST_TO_TELL || speedup.within(CLEAR_PRECISION);
    let undecided = stop.decided(&speedup).is_none();
    (verdict.status == Status::Ok && undecided && halvable).then_some(StopRule {
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

#[cfg(test)]
mod tests {
    use super::*;

    const STOP: StopRule = StopRule {
        fewest: 12,
        most: 1000,
        precision: 0.01,
        cap_ms: 30_000,
    };

    fn graded(median: f64, low: f64, high: f64, pairs: u32) -> Verdict {
        let mut v = Verdict::new(Status::Ok, "");
        (v.speedup, v.speedup_low, v.speedup_high, v.pairs) =
            (Some(median), Some(low), Some(high), pairs);
        v
    }

    #[test]
    fn undecided_pairs_a_second_timing_can_decide_are_timed_again() {
        let pooled = StopRule {
            most: 2000,
            cap_ms: 60_000,
            ..STOP
        };
        // s212 at S beside a busy loop: a lean of 3%, ±1.1% at the cap.
        assert_eq!(
            undecided(&graded(0.971, 0.960, 0.982, 1000), Some(STOP)),
            Some(pooled)
        );
        // Within ±5%, straddling the band's edge.
        assert!(undecided(&graded(1.03, 0.985, 1.075, 40), Some(STOP)).is_some());
        // Too few rounds to tell: together they may be enough.
        assert!(undecided(&graded(0.02, 0.019, 1.0, 4), Some(STOP)).is_some());
        // Decided, or not a speedup to time again.
        assert!(undecided(&graded(1.001, 0.99, 1.01, 40), Some(STOP)).is_none());
        let mut crashed = graded(0.971, 0.960, 0.982, 1000);
        crashed.status = Status::Crash;
        assert!(undecided(&crashed, Some(STOP)).is_none());
        assert!(undecided(&graded(0.971, 0.960, 0.982, 1000), None).is_none());
    }

    #[test]
    fn pairs_the_node_s_noise_left_wide_are_not_timed_again() {
        // gemm at L: ±10.3% over 11 rounds, ±5.9% with a second timing.
        assert!(undecided(&graded(1.002, 0.90, 1.105, 22), Some(STOP)).is_none());
        assert!(undecided(&graded(1.0, 0.94, 1.06, 12), Some(STOP)).is_none());
    }
}

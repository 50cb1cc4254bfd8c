//! The runner's per-call floor: what a call that calls nothing costs
//! through the runner, measured in the grade it is subtracted in.
//!
//! Every call is timed from outside its runner: from before the call's
//! index is written to every thread of the runner stopped again. That
//! interval holds the kernel's call and the round trip around it (the
//! write, the runner continued and woken, its byte read, each thread
//! interrupted and waited for): 15–30 µs here, the same for any kernel.
//! A kernel of a few microseconds timed so against one of tens reads
//! (B + F) / (C + F), much nearer 1 than B / C; against a reference timed
//! inside its own process (NumPy), slower than it is.
//!
//! The floor is measured on the baseline's runner, never the submission's:
//! the submission's code shares its runner's address space and could make
//! that runner's empty calls as slow as it likes (a floor it inflated would
//! be subtracted from its own times). Its calls are [`FLOOR_CALLS`] calls of
//! the [`FLOOR`](crate::process::FLOOR) index right after the
//! warm-up pair, made as every timed call is (the same CPUs, the same moves
//! between them), while the submission's runner is held.
//!
//! Its median is taken out of both sides' times of every pair, but a call
//! never counts as less than two thirds of its time ([`Floor::net`]).
//! Against a reference timed inside its own process (NumPy), the
//! submission's calls are counted as they would be timed inside its
//! runner: the fastest empty call off its fastest call ([`Floor::inside`]),
//! or for a batch of calls timed together one median empty call off the
//! batch, shared between its calls ([`Floor::inside_batch`]); each with
//! what a call in-process costs on ([`IN_PROCESS_CALL_NS`]). There is no
//! baseline runner then: the grade starts one for the floor alone, with an
//! empty kernel the judge builds (the request's `Step::Floor`).
//! Timing from outside has noise of its own: the same tiny kernel against
//! itself measured 0.989x to 1.002x from grade to grade here (calls of
//! 21 µs, a floor of about 18 µs), a few tenths of a microsecond between
//! the two runners. Taking the whole floor out of such calls left 3 µs of
//! kernel and the same tenths: 0.87x to 1.10x, identical code told apart.
//! A call counted as two thirds of its time keeps a ratio of two calls
//! near the floor as it was, and no call's noise is magnified more than
//! 1.5 times (a call of three times the floor loses it whole), so identical
//! code that measures within ±2% raw stays within ±3%, inside the
//! [0.95, 1.05] it is held to; a kernel of a few microseconds against one
//! of hundreds gets the floor off the slower side, where it distorted the
//! ratio most.

use serde::{Deserialize, Serialize};

/// Empty calls a grade measures the floor from.
pub const FLOOR_CALLS: usize = 31;

/// What calling C costs inside a process, through a foreign-function
/// interface: HPCAgent-Bench's judge times each call of a submission
/// through cffi, around the call, and its empty call measured 0.9–1.1 µs
/// on this project's machines. A call timed from outside, its round trip
/// taken off, is counted as this much more where it is set beside a
/// reference timed inside its own process, as that judge would have timed
/// it: a kernel of a few nanoseconds is then a microsecond, not infinitely
/// fast, and one of two microseconds three, as there.
pub const IN_PROCESS_CALL_NS: u64 = 1_000;

/// What an empty call costs through the runner, from [`FLOOR_CALLS`] calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Floor {
    /// The median empty call.
    pub ns: u64,
    /// The fastest empty call.
    pub fastest_ns: u64,
}

impl Floor {
    /// The floor of these empty calls' times (at least one).
    pub fn of(times: &mut [u64]) -> Floor {
        assert!(!times.is_empty(), "a floor of no calls");
        times.sort_unstable();
        Floor {
            ns: times[times.len() / 2],
            fastest_ns: times[0],
        }
    }

    /// A call's time less the floor, and at least two thirds of it: a
    /// call of three times the floor or more loses the floor whole, a
    /// shorter one a third of its time (see the module's doc).
    pub fn net(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.ns).max(ns / 3 * 2)
    }

    /// A fastest call as it would be timed inside its own process, to set
    /// beside a reference timed so: the fastest empty call off it, fastest
    /// against fastest (both the least the round trip took, each made
    /// beside the other), and [`IN_PROCESS_CALL_NS`] on.
    pub fn inside(&self, fastest_ns: u64) -> u64 {
        fastest_ns.saturating_sub(self.fastest_ns) + IN_PROCESS_CALL_NS
    }

    /// A call of a batch of `calls` timed together in `total_ns`, as it
    /// would be timed inside its own process: the batch less one round
    /// trip (the median empty call: one interval, not the fastest of
    /// many), shared between its calls, and [`IN_PROCESS_CALL_NS`] on.
    pub fn inside_batch(&self, total_ns: u64, calls: u32) -> u64 {
        total_ns.saturating_sub(self.ns) / u64::from(calls.max(1)) + IN_PROCESS_CALL_NS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_median_empty_call_and_the_fastest() {
        // Jitter of a microsecond, one call held up by the scheduler.
        let mut times = vec![15_000, 14_500, 16_000, 15_200, 90_000, 14_800, 15_500];
        let floor = Floor::of(&mut times);
        assert_eq!(floor.ns, 15_200, "the slow call does not move it");
        assert_eq!(floor.fastest_ns, 14_500);
        assert_eq!(
            Floor::of(&mut [7]),
            Floor {
                ns: 7,
                fastest_ns: 7,
            }
        );
    }

    #[test]
    fn a_call_loses_its_floor_but_never_more_than_a_third_of_its_time() {
        let floor = Floor {
            ns: 15_000,
            fastest_ns: 14_000,
        };
        assert_eq!(floor.net(1_015_000), 1_000_000);
        assert_eq!(floor.net(45_000), 30_000, "three floors: the floor off");
        assert_eq!(floor.net(30_000), 20_000, "under three: two thirds");
        assert_eq!(floor.net(9_000), 6_000);
        assert_eq!(floor.net(0), 0);
    }

    #[test]
    fn calls_near_the_floor_keep_their_ratio_and_a_slow_side_loses_its_floor() {
        let floor = Floor {
            ns: 18_000,
            fastest_ns: 17_000,
        };
        let ratio = |b: u64, c: u64| floor.net(b) as f64 / floor.net(c) as f64;
        // Identical tiny kernels with 0.2 µs between the runners: the
        // ratio stays as measured (whole floors off, 3 µs against 3.2 µs
        // would read 0.94x).
        let (b, c) = (21_000, 21_200);
        assert!((ratio(b, c) - b as f64 / c as f64).abs() < 1e-3);
        // Noise is magnified at most 1.5 times anywhere.
        for b in (1_000..400_000).step_by(997) {
            let c = b + b / 100;
            let drift = 1.0 - ratio(b, c);
            assert!(drift <= 1.5 * 0.01 + 1e-4, "{b}: {drift}");
        }
        // A 100 µs kernel against a 10 µs one, 18 µs of round trip each:
        // 118/28 = 4.2x measured raw, 100/18.7 = 5.4x net.
        assert!((ratio(118_000, 28_000) - 100_000.0 / 18_666.0).abs() < 1e-9);
    }

    #[test]
    fn a_fastest_call_set_beside_numpy_loses_the_fastest_empty_call() {
        let floor = Floor {
            ns: 18_000,
            fastest_ns: 16_000,
        };
        // A 5 us kernel timed through the runner: 21 us; inside, with
        // the in-process call, 6 us.
        assert_eq!(floor.inside(21_000), 6_000);
        assert_eq!(floor.inside(1_016_000), 1_001_000);
        // Within the jitter of the floor: the in-process call, never 0.
        assert_eq!(floor.inside(16_500), 1_500);
        assert_eq!(floor.inside(15_000), 1_000);
    }

    #[test]
    fn a_batch_pays_one_round_trip_shared_between_its_calls() {
        let floor = Floor {
            ns: 18_000,
            fastest_ns: 16_000,
        };
        // Five calls of 4 us, one round trip of 18 us around them: each
        // as a call in-process would read, 5 us.
        assert_eq!(floor.inside_batch(38_000, 5), 5_000);
        // Calls of a few hundred nanoseconds read as the in-process call.
        assert_eq!(floor.inside_batch(19_500, 5), 1_300);
        assert_eq!(floor.inside_batch(10_000, 5), 1_000);
        assert_eq!(floor.inside_batch(118_000, 0), 101_000, "never by 0");
    }
}

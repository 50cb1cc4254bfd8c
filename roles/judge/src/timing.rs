//! What a grade's timed pairs say: the speedup, and how sure it is.
//!
//! A pair is one call of the baseline and one of the submission on the same
//! fresh inputs, back to back, timed from outside both. The speedup is the
//! baseline's median time over the submission's, both taken over the same
//! pairs: a slow drift of the node (a neighbour, the clock) moves both
//! alike, since the calls alternate. The median of each pair's own ratio
//! would do the same, but the jitter of two calls in a row is independent
//! (±4% per call of 0.25 ms on this project's machines), and a ratio adds
//! both: the ratio of medians needs about half as many pairs for the same
//! interval. The 95% confidence interval is a percentile bootstrap over the
//! pairs (resampled whole, so what the pairing keeps, the resampling keeps
//! too), with a fixed seed: the same pairs always give the same interval.
//!
//! Fewer than [`FEWEST_TO_TELL`] pairs cannot tell a change at 95%: a
//! bootstrap over two or three pairs gives an interval as narrow as their
//! spread, and a grade stopped by its time cap that soon (a kernel of
//! gigabytes at L) claimed identical code 0.979x (0.976-0.983). Their
//! interval is widened to hold 1.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A speedup and its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speedup {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    pub pairs: u32,
}

/// Bootstrap resamples: the interval's ends are their 2.5th and 97.5th percentiles.
const RESAMPLES: usize = 1000;

/// The fewest pairs whose interval may exclude 1: the smallest sample for
/// which a distribution-free 95% interval of a median exists (the range of
/// 6 values holds the median with probability 1 - 2/2^6 = 96.9%; of 5,
/// 93.8%).
pub const FEWEST_TO_TELL: usize = 6;

impl Speedup {
    /// The speedup of `pairs` of (baseline ns, submission ns); `None` without pairs.
    pub fn of(pairs: &[(u64, u64)]) -> Option<Speedup> {
        if pairs.is_empty() {
            return None;
        }
        let mut a = Vec::with_capacity(pairs.len());
        let mut b = Vec::with_capacity(pairs.len());
        let median = ratio_of_medians(pairs.iter().copied(), &mut a, &mut b);
        let mut rng = ChaCha8Rng::seed_from_u64(pairs.len() as u64);
        let n = pairs.len() as u64;
        let mut ratios: Vec<f64> = (0..RESAMPLES)
            .map(|_| {
                let resample = (0..n).map(|_| pairs[(rng.next_u64() % n) as usize]);
                ratio_of_medians(resample, &mut a, &mut b)
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let (mut low, mut high) = (
            ratios[RESAMPLES * 25 / 1000],
            ratios[RESAMPLES * 975 / 1000 - 1],
        );
        if pairs.len() < FEWEST_TO_TELL {
            (low, high) = (low.min(1.0), high.max(1.0));
        }
        Some(Speedup {
            median,
            low,
            high,
            pairs: pairs.len() as u32,
        })
    }

    /// Whether both ends of the interval lie within `precision` (relative)
    /// of the speedup.
    pub fn within(&self, precision: f64) -> bool {
        self.high <= self.median * (1.0 + precision) && self.low >= self.median * (1.0 - precision)
    }

    /// The interval holds 1: the measurement cannot tell it from the baseline.
    pub fn no_change(&self) -> bool {
        self.low <= 1.0 && 1.0 <= self.high
    }
}

/// The baseline's median time over the submission's, for `pairs`; `a` and
/// `b` are scratch space.
fn ratio_of_medians(
    pairs: impl Iterator<Item = (u64, u64)>,
    a: &mut Vec<u64>,
    b: &mut Vec<u64>,
) -> f64 {
    a.clear();
    b.clear();
    for (baseline, candidate) in pairs {
        a.push(baseline);
        b.push(candidate);
    }
    median(a) / median(b).max(1.0)
}

/// The median of `values` (reordered).
fn median(values: &mut [u64]) -> f64 {
    let n = values.len();
    let (_, &mut upper, _) = values.select_nth_unstable(n / 2);
    if n % 2 == 1 {
        return upper as f64;
    }
    let lower = *values[..n / 2].iter().max().expect("n ≥ 2");
    (lower as f64 + upper as f64) / 2.0
}

/// When a grade's timed pairs stop: at `fewest` pairs once the interval is
/// within `precision`, at `most` pairs, or once they have taken `cap_ms`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StopRule {
    pub fewest: u32,
    pub most: u32,
    pub precision: f64,
    pub cap_ms: u64,
}

impl StopRule {
    /// Whether `pairs`, which have taken `spent_ms`, are enough. The
    /// interval is computed only at [`check_at`]'s steps.
    ///
    /// [`check_at`]: StopRule::check_at
    pub fn enough(&self, pairs: &[(u64, u64)], spent_ms: u64) -> bool {
        let n = pairs.len() as u32;
        if n >= self.most || (n >= 1 && spent_ms >= self.cap_ms) {
            return true;
        }
        self.check_at(n) && Speedup::of(pairs).is_some_and(|s| s.within(self.precision))
    }

    /// Whether to compute the interval after `n` pairs: at the fewest, then
    /// each time the pairs have grown by a tenth (an interval costs a
    /// thousand resamples).
    fn check_at(&self, n: u32) -> bool {
        let fewest = self.fewest.max(1);
        if n < fewest {
            return false;
        }
        let mut at = fewest;
        while at < n {
            at = (at + at.div_ceil(10)).max(at + 1);
        }
        at == n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_calls_are_one_with_a_tight_interval() {
        let pairs: Vec<(u64, u64)> = (0..20).map(|i| (1000 + i, 1000 + i)).collect();
        let s = Speedup::of(&pairs).unwrap();
        assert_eq!((s.median, s.pairs), (1.0, 20));
        assert!(s.low <= 1.0 && s.high >= 1.0, "{s:?}");
        assert!(s.no_change() && s.within(0.02), "{s:?}");
    }

    #[test]
    fn a_drifting_node_moves_both_sides_and_not_the_speedup() {
        // The node slows down 3x halfway; the submission is 2x throughout.
        let pairs: Vec<(u64, u64)> = (0..40)
            .map(|i| if i < 20 { (2000, 1000) } else { (6000, 3000) })
            .collect();
        let s = Speedup::of(&pairs).unwrap();
        assert!((s.median - 2.0).abs() < 1e-9, "{s:?}");
        assert!(!s.no_change());
    }

    #[test]
    fn fewer_than_six_pairs_cannot_tell_a_change() {
        // Twice as fast on every pair, and as steady as can be.
        let pairs = vec![(2000, 1000); 6];
        for n in 1..FEWEST_TO_TELL {
            let s = Speedup::of(&pairs[..n]).unwrap();
            assert_eq!(s.median, 2.0);
            assert!(s.no_change() && s.low <= 1.0 && s.high >= 2.0, "{n}: {s:?}");
        }
        let s = Speedup::of(&pairs).unwrap();
        assert!(!s.no_change() && s.low == 2.0, "{s:?}");
        // Nor can a little slower than itself, as the bootstrap of two
        // pairs alone said.
        let s = Speedup::of(&[(976, 1000), (983, 1000)]).unwrap();
        assert!(s.no_change(), "{s:?}");
    }

    #[test]
    fn the_interval_brackets_the_speedup_and_narrows_with_pairs() {
        // ±5% of jitter on each call, independent.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut jitter = || 95_000 + rng.next_u64() % 10_000;
        let pairs: Vec<(u64, u64)> = (0..400).map(|_| (jitter(), jitter())).collect();
        let few = Speedup::of(&pairs[..20]).unwrap();
        let many = Speedup::of(&pairs).unwrap();
        for s in [few, many] {
            assert!(s.low <= s.median && s.median <= s.high, "{s:?}");
            assert!((s.median - 1.0).abs() < 0.03, "{s:?}");
        }
        assert!(
            many.high - many.low < (few.high - few.low) / 2.0,
            "{few:?} {many:?}"
        );
        assert!(many.within(0.01) && !few.within(0.01), "{few:?} {many:?}");
        assert_eq!(
            Speedup::of(&pairs),
            Speedup::of(&pairs),
            "the same pairs, the same interval"
        );
    }

    #[test]
    fn pairs_stop_when_precise_at_the_most_or_at_the_cap() {
        let rule = StopRule {
            fewest: 6,
            most: 50,
            precision: 0.01,
            cap_ms: 1000,
        };
        let steady: Vec<(u64, u64)> = vec![(100, 100); 7];
        assert!(!rule.enough(&steady[..5], 10), "fewer than the fewest");
        assert!(rule.enough(&steady[..6], 10));
        assert!(rule.enough(&steady[..7], 10), "7 = 6 + 6/10, rounded up");
        let noisy: Vec<(u64, u64)> = (0..10).map(|i| (100 + 10 * (i % 3), 100)).collect();
        assert!(!rule.enough(&noisy, 10));
        assert!(rule.enough(&noisy, 1000), "the cap");
        assert!(rule.enough(&vec![(130, 100); 50][..], 10), "the most");
        assert!(!rule.enough(&[], 5000), "never before one pair");
    }

    #[test]
    fn the_interval_is_checked_at_growing_steps() {
        let rule = StopRule {
            fewest: 10,
            most: 40,
            precision: 0.01,
            cap_ms: 1000,
        };
        let checked: Vec<u32> = (1..=45).filter(|&n| rule.check_at(n)).collect();
        assert_eq!(
            checked,
            [10, 11, 13, 15, 17, 19, 21, 24, 27, 30, 33, 37, 41]
        );
    }
}

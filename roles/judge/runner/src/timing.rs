//! What a grade's timed pairs say: the speedup, and how sure it is.
//!
//! A pair is one call of the baseline and one of the submission on the same
//! fresh inputs, back to back, timed from outside both. A round is two
//! pairs in turn, one in each order, and its ratio the geometric mean of
//! theirs (the baseline's time over the submission's). The speedup is the
//! median of the rounds' ratios.
//!
//! Why rounds: the first call of a pair warms what the second finds (the
//! caches, the page tables, a gather table read at random), so a pair's
//! ratio leans towards whoever went second, by as much as the kernel
//! gains from warm state. spmv-csr at S (an 8 MiB vector gathered at
//! random, 2 ms calls): the first call took 2.6 ms, the second 2.0 ms, so
//! identical code's pairs read 1.27x or 0.78x by their order, and their
//! median fell between the two by chance (a CI run: 1.088x, 0.864-1.268,
//! undecided after 1,000 pairs). In a round that lean multiplies one
//! pair's ratio and divides the other's, and the geometric mean takes it
//! out: the same 1,000 pairs gave 1.005x (0.999-1.009).
//!
//! What moves the node moves both calls of a pair alike, a slow drift (a
//! neighbour, the clock) as much as the state of the moment (a busy
//! sibling, a virtual CPU woken from idle), and the ratio takes it out.
//! The median of each side's times instead (the ratio of medians) kept
//! that state in: when a third to a half of the calls meet it, each side's
//! median lands on either side of it by chance. Measured on 30 grades of
//! identical code on this project's machines (7 kernels at S, quiet and
//! beside a build and a busy loop), the pairs' ratio gave the narrower
//! interval in 28, and s1112 (57 µs calls) read 0.989x to 1.008x over 8
//! grades where the ratio of medians read 0.972x to 1.029x.
//!
//! Which of a round's pairs goes first is drawn ([`Order`]). In a fixed
//! order (baseline first, then submission first, round after round) the
//! same side stood at the same place in every round, and a disturbance
//! that recurs at the rounds' pace meets that side again and again for as
//! long as the two keep in step: a CPU-bound process on the runner's CPU,
//! whose slices the calls wait out in a pattern that drifts slowly against
//! the rounds. s212 at S against itself beside such a process: a fifth of
//! a grade alone read 0.928x to 1.075x, and whole grades 0.972x to 1.033x
//! (26 grades, standard deviation 1.4%); with the order drawn, 0.971x to
//! 1.018x (14 grades, 1.1%). What is left leans a whole grade (see the
//! judge's `grade::retime`).
//!
//! The 95% confidence interval is the median's own, free of any
//! distribution: the rounds' ratios sorted, and as many left out at each
//! end as keep the median inside with 95% (a ratio falls either side of
//! the median with even odds, so the count below it is binomial; the sign
//! test's interval). It needs no resampling (the judge once drew 1,000
//! bootstrap resamples at every look, 7-11 ms a grade of gemm at S), and
//! the same pairs always give the same interval.
//!
//! Fewer than [`FEWEST_TO_TELL`] rounds cannot tell a change at 95%: even
//! their whole range holds the median with less, and a grade stopped by
//! its time cap that soon (a kernel of gigabytes at L) once claimed
//! identical code 0.979x (0.976-0.983). Their interval is widened to hold
//! 1.

use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;

/// Which side goes first in each pair of a grade: the baseline in the
/// warm-up pair (pair 0), then in each round one pair of each order, the
/// round's first drawn from a stream of the grade's secret, so nothing in
/// the runners, nor a rhythm on the node, can keep to it.
pub struct Order {
    draws: ChaCha8Rng,
    round_opened_by_baseline: bool,
}

impl Order {
    pub fn new(draws: ChaCha8Rng) -> Order {
        Order {
            draws,
            round_opened_by_baseline: true,
        }
    }

    /// Whether the baseline goes first in pair `n`; asked of each pair in
    /// turn, from 0.
    pub fn baseline_first(&mut self, n: u32) -> bool {
        match n {
            0 => true,
            // The first pair of a round (pairs 1 and 2 are the first).
            _ if n % 2 == 1 => {
                self.round_opened_by_baseline = self.draws.next_u32() & 1 == 1;
                self.round_opened_by_baseline
            }
            _ => !self.round_opened_by_baseline,
        }
    }
}

/// A speedup and its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speedup {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The pairs it rests on: whole rounds, twice their number.
    pub pairs: u32,
}

/// The fewest rounds whose interval may exclude 1: the smallest sample
/// for which a distribution-free 95% interval of a median exists (the
/// range of 6 values holds the median with probability 1 - 2/2^6 = 96.9%;
/// of 5, 93.8%).
pub const FEWEST_TO_TELL: usize = 6;

/// The pairs in a round: one with each side first.
pub const ROUND: usize = 2;

impl Speedup {
    /// The speedup of `pairs` of (baseline ns, submission ns), made in
    /// turn with each side first; a last pair without its round is left
    /// out. `None` without a round.
    pub fn of(pairs: &[(u64, u64)]) -> Option<Speedup> {
        let ratio = |&(baseline, candidate): &(u64, u64)| baseline as f64 / candidate.max(1) as f64;
        let mut ratios: Vec<f64> = pairs
            .chunks_exact(ROUND)
            .map(|round| round.iter().map(ratio).product::<f64>().sqrt())
            .collect();
        if ratios.is_empty() {
            return None;
        }
        ratios.sort_by(f64::total_cmp);
        let n = ratios.len();
        let median = (ratios[(n - 1) / 2] + ratios[n / 2]) / 2.0;
        let out = left_out(n);
        let (mut low, mut high) = (ratios[out], ratios[n - 1 - out]);
        if n < FEWEST_TO_TELL {
            (low, high) = (low.min(1.0), high.max(1.0));
        }
        Some(Speedup {
            median,
            low,
            high,
            pairs: (n * ROUND) as u32,
        })
    }

    /// The rounds it rests on.
    fn rounds(&self) -> usize {
        self.pairs as usize / ROUND
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

/// How many of `n` sorted values the median's 95% interval leaves out at
/// each end: the most, `k`, for which the median falls below the
/// (k+1)-th smallest or above the (k+1)-th largest with at most 5%, twice
/// the chance that a binomial of `n` draws at even odds is `k` or fewer.
/// 0 where even the whole range holds it with less (fewer than 6 values).
fn left_out(n: usize) -> usize {
    // P(B = j), in logs: 2^-n of n values underflows past a thousand.
    let mut log_p = -(n as f64) * std::f64::consts::LN_2;
    let mut at_most = 0.0;
    for k in 0..n.div_ceil(2) {
        at_most += log_p.exp();
        if 2.0 * at_most > 0.05 {
            return k.saturating_sub(1);
        }
        log_p += ((n - k) as f64 / (k + 1) as f64).ln();
    }
    0
}

/// How far from 1 an interval may reach and still be "no change" decided:
/// the noise identical code measures within (1.00x ± 2.5%), half the
/// [0.95, 1.05] it is guaranteed.
pub const NO_CHANGE_BAND: f64 = 0.025;

/// The coarsest precision a speedup clear of the band is measured to.
pub const CLEAR_PRECISION: f64 = 0.05;

/// When a grade's timed pairs stop: from `fewest` pairs, once the verdict
/// is [`Decided`]; at `most` pairs; or once they have taken `cap_ms`.
/// Always after a whole round: a round cut in half is a pair whose order
/// leans its ratio.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StopRule {
    pub fewest: u32,
    pub most: u32,
    pub precision: f64,
    pub cap_ms: u64,
}

/// Why a speedup's interval is enough to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decided {
    /// Within the rule's precision of the speedup.
    Precise,
    /// Inside 1 ± [`NO_CHANGE_BAND`]: no change worth telling, however
    /// much closer more pairs would bring it.
    NoChange,
    /// Clear of the band, and as precise as its distance from 1 needs:
    /// the speedup's log over ten, between the rule's precision and
    /// [`CLEAR_PRECISION`] (2x to ±5%, 1.2x to ±1.8%).
    Clear { precision: f64 },
}

impl StopRule {
    /// Whether `pairs`, which have taken `spent_ms`, are enough. The
    /// interval is looked at only at [`check_at`]'s steps.
    ///
    /// [`check_at`]: StopRule::check_at
    pub fn enough(&self, pairs: &[(u64, u64)], spent_ms: u64) -> bool {
        let n = pairs.len() as u32;
        if n == 0 || !n.is_multiple_of(ROUND as u32) {
            return false;
        }
        if n >= self.most || spent_ms >= self.cap_ms {
            return true;
        }
        self.check_at(n) && Speedup::of(pairs).is_some_and(|s| self.decided(&s).is_some())
    }

    /// Whether `s` decides the verdict, and how.
    pub fn decided(&self, s: &Speedup) -> Option<Decided> {
        if s.within(self.precision) {
            return Some(Decided::Precise);
        }
        // The band and the distance from 1 are read off the interval,
        // which fewer pairs than this cannot give.
        if s.rounds() < FEWEST_TO_TELL {
            return None;
        }
        if s.low >= 1.0 - NO_CHANGE_BAND && s.high <= 1.0 + NO_CHANGE_BAND {
            return Some(Decided::NoChange);
        }
        let clear = s.low > 1.0 + NO_CHANGE_BAND || s.high < 1.0 - NO_CHANGE_BAND;
        let precision =
            (s.median.ln().abs() / 10.0).clamp(self.precision, CLEAR_PRECISION.max(self.precision));
        (clear && s.within(precision)).then_some(Decided::Clear { precision })
    }

    /// What a verdict says of how its pairs ended; `spread` is the
    /// baseline's calls' (interquartile range over median), the node's
    /// noise as the same code met it again and again.
    pub fn stopped(&self, s: &Speedup, spread: Option<f64>) -> String {
        let percent = |x: f64| format!("{:.1}%", 100.0 * x);
        match self.decided(s) {
            Some(Decided::Precise) => format!("within ±{}", percent(self.precision)),
            Some(Decided::NoChange) => {
                format!("inside the no-change band ±{}", percent(NO_CHANGE_BAND))
            }
            Some(Decided::Clear { precision }) => {
                format!("clear of 1, to ±{}", percent(precision))
            }
            None => {
                let reached = (s.high / s.median - 1.0).max(1.0 - s.low / s.median);
                let noise = spread.map_or(String::new(), |spread| {
                    format!(
                        "; the baseline's calls spread {} (the node's noise)",
                        percent(spread)
                    )
                });
                let limit = if s.pairs >= self.most {
                    format!("at its {} pairs", self.most)
                } else {
                    format!("in its {} s", self.cap_ms as f64 / 1000.0)
                };
                format!("not decided {limit}: ±{} reached{noise}", percent(reached))
            }
        }
    }

    /// Whether to look at the interval after `n` pairs, whole rounds: at
    /// the fewest, then each time the rounds have grown by a tenth. Every
    /// look is a chance to stop on an interval that came out narrow by
    /// chance; looks spaced so are 42 in a thousand pairs, not 500.
    fn check_at(&self, n: u32) -> bool {
        let round = ROUND as u32;
        if !n.is_multiple_of(round) {
            return false;
        }
        let (rounds, fewest) = (n / round, self.fewest.div_ceil(round).max(1));
        if rounds < fewest {
            return false;
        }
        let mut at = fewest;
        while at < rounds {
            at = (at + at.div_ceil(10)).max(at + 1);
        }
        at == rounds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    #[test]
    fn each_round_has_a_pair_in_each_order_and_which_opens_it_is_drawn() {
        let firsts = |seed: u64| -> Vec<bool> {
            let mut order = Order::new(ChaCha8Rng::seed_from_u64(seed));
            (0..201).map(|n| order.baseline_first(n)).collect()
        };
        let (one, other) = (firsts(1), firsts(2));
        for firsts in [&one, &other] {
            assert!(firsts[0], "the warm-up pair: the baseline first");
            let rounds: Vec<&[bool]> = firsts[1..].chunks(ROUND).collect();
            assert!(rounds.iter().all(|r| r[0] != r[1]), "{rounds:?}");
            let opened_by_baseline = rounds.iter().filter(|r| r[0]).count();
            assert!(
                (30..=70).contains(&opened_by_baseline),
                "{opened_by_baseline}"
            );
        }
        assert_ne!(one, other, "another secret, another order");
    }

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
    fn calls_that_meet_a_slow_state_half_the_time_measure_one() {
        // Each call, on its own, meets a state that makes it 10% slower
        // half the time (a busy sibling, a virtual CPU woken from idle),
        // and has ±0.5% of jitter. The median of each side's times lands
        // on either mode by chance (identical code read 0.917x, its
        // interval 0.916-1.091); the pairs' ratios are 1 whenever both
        // calls met the same state, half of them.
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut call = || {
            let slow = rng.next_u64() % 2 == 0;
            (if slow { 110_000 } else { 100_000 }) - 500 + rng.next_u64() % 1_000
        };
        let pairs: Vec<(u64, u64)> = (0..200).map(|_| (call(), call())).collect();
        let s = Speedup::of(&pairs).unwrap();
        assert!((s.median - 1.0).abs() < 0.002, "{s:?}");
        assert!(s.within(0.005), "{s:?}");
    }

    #[test]
    fn the_interval_leaves_out_what_a_binomial_allows() {
        // The sign test's 95% interval of a median: its tables give the
        // rank of the lower end, k + 1.
        let ranks: Vec<(usize, usize)> = [6, 7, 8, 9, 10, 17, 20, 30, 100]
            .into_iter()
            .map(|n| (n, left_out(n) + 1))
            .collect();
        assert_eq!(
            ranks,
            [
                (6, 1),
                (7, 1),
                (8, 1),
                (9, 2),
                (10, 2),
                (17, 5),
                (20, 6),
                (30, 10),
                (100, 40)
            ]
        );
        // A thousand pairs: rank 469, where the normal's n/2 - 1.96 sqrt(n)/2
        // puts it.
        assert_eq!(left_out(1000), 468);
        assert_eq!(left_out(5), 0);
    }

    #[test]
    fn fewer_than_six_rounds_cannot_tell_a_change() {
        // Twice as fast on every pair, and as steady as can be.
        let pairs = vec![(2000, 1000); 2 * FEWEST_TO_TELL];
        assert_eq!(Speedup::of(&pairs[..1]), None, "half a round");
        for rounds in 1..FEWEST_TO_TELL {
            let s = Speedup::of(&pairs[..2 * rounds]).unwrap();
            assert_eq!((s.median, s.pairs), (2.0, 2 * rounds as u32));
            assert!(
                s.no_change() && s.low <= 1.0 && s.high >= 2.0,
                "{rounds}: {s:?}"
            );
        }
        let s = Speedup::of(&pairs).unwrap();
        assert!(!s.no_change() && s.low == 2.0, "{s:?}");
        // A last pair without its round is left out.
        let s = Speedup::of(&pairs[..2 * FEWEST_TO_TELL - 1]).unwrap();
        assert!(
            s.no_change() && s.pairs == 2 * FEWEST_TO_TELL as u32 - 2,
            "{s:?}"
        );
        // Nor can a little slower than itself, as a bootstrap of two pairs
        // alone once said.
        let s = Speedup::of(&[(976, 1000), (983, 1000)]).unwrap();
        assert!(s.no_change(), "{s:?}");
    }

    #[test]
    fn the_first_call_warming_the_second_cancels_in_rounds() {
        // Whoever goes second finds what the first warmed and takes 20%
        // less (spmv-csr at S: 2.6 ms first, 2.0 ms second), with ±1% of
        // jitter. Each round has a pair in each order.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut pairs_of = |candidate_ns: u64| -> Vec<(u64, u64)> {
            let mut jitter = |ns: u64| ns - ns / 100 + rng.next_u64() % (ns / 50);
            (0..400)
                .map(|i| {
                    let (baseline, candidate) = (jitter(100_000), jitter(candidate_ns));
                    if i % 2 == 0 {
                        (baseline * 8 / 10, candidate)
                    } else {
                        (baseline, candidate * 8 / 10)
                    }
                })
                .collect()
        };
        let rule = judges_rule();
        let same = Speedup::of(&pairs_of(100_000)).unwrap();
        assert!((same.median - 1.0).abs() < 0.005, "{same:?}");
        assert!(same.within(0.005) && same.no_change(), "{same:?}");
        let faster = Speedup::of(&pairs_of(50_000)).unwrap();
        assert!((faster.median - 2.0).abs() < 0.01, "{faster:?}");
        assert!(
            rule.decided(&faster).is_some() && faster.within(0.01),
            "{faster:?}"
        );
        // Each pair on its own leans by its order: identical code's
        // ratios are 0.8 or 1.25, and no interval of them is narrow.
        let lone: Vec<(u64, u64)> = pairs_of(100_000)
            .iter()
            .flat_map(|&pair| [pair, pair])
            .collect();
        let lone = Speedup::of(&lone).unwrap();
        assert!(lone.high / lone.low > 1.5, "{lone:?}");
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

    /// A judge's rule as it serves by default: ±1%, 1,000 pairs, 30 s.
    fn judges_rule() -> StopRule {
        StopRule {
            fewest: 10,
            most: 1000,
            precision: 0.01,
            cap_ms: 30_000,
        }
    }

    fn speedup(median: f64, low: f64, high: f64) -> Speedup {
        Speedup {
            median,
            low,
            high,
            pairs: 20,
        }
    }

    #[test]
    fn a_verdict_is_decided_by_its_distance_from_one() {
        let rule = judges_rule();
        // Identical code: ±2% is not ±1%, but it is inside the band.
        assert_eq!(
            rule.decided(&speedup(1.0, 0.98, 1.02)),
            Some(Decided::NoChange)
        );
        assert_eq!(rule.decided(&speedup(1.0, 0.97, 1.02)), None);
        // 2x needs ±5%, not ±1%; 1.2x needs ±1.8%.
        assert_eq!(
            rule.decided(&speedup(2.0, 1.91, 2.09)),
            Some(Decided::Clear { precision: 0.05 })
        );
        assert_eq!(rule.decided(&speedup(2.0, 1.85, 2.1)), None);
        let Some(Decided::Clear { precision }) = rule.decided(&speedup(1.2, 1.18, 1.215)) else {
            panic!("1.2x at ±1.7% is decided")
        };
        assert!((precision - 1.2f64.ln() / 10.0).abs() < 1e-12);
        // Slower, clear of the band, as much as faster.
        assert!(matches!(
            rule.decided(&speedup(0.5, 0.48, 0.52)),
            Some(Decided::Clear { .. })
        ));
        // Near 1 and not inside the band: only the rule's ±1% decides.
        assert_eq!(rule.decided(&speedup(1.03, 1.01, 1.05)), None);
        assert_eq!(
            rule.decided(&speedup(1.03, 1.025, 1.035)),
            Some(Decided::Precise)
        );
        // Too few pairs decide nothing but the rule's own precision.
        let few = |median, low, high| Speedup {
            pairs: 5,
            ..speedup(median, low, high)
        };
        assert_eq!(rule.decided(&few(2.0, 1.9, 2.1)), None);
        assert_eq!(rule.decided(&few(1.0, 0.98, 1.02)), None);
        assert_eq!(rule.decided(&few(2.0, 1.99, 2.01)), Some(Decided::Precise));
    }

    #[test]
    fn a_verdict_says_how_its_pairs_ended() {
        let rule = judges_rule();
        assert_eq!(
            rule.stopped(&speedup(1.0, 0.98, 1.02), None),
            "inside the no-change band ±2.5%"
        );
        assert_eq!(
            rule.stopped(&speedup(2.0, 1.91, 2.09), None),
            "clear of 1, to ±5.0%"
        );
        assert_eq!(
            rule.stopped(&speedup(1.1, 1.095, 1.105), None),
            "within ±1.0%"
        );
        assert_eq!(
            rule.stopped(&speedup(1.0, 0.9, 1.07), Some(0.12)),
            "not decided in its 30 s: ±10.0% reached; the baseline's calls spread 12.0% (the node's noise)"
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
        let steady: Vec<(u64, u64)> = vec![(100, 100); 8];
        assert!(!rule.enough(&steady[..4], 10), "fewer than the fewest");
        assert!(rule.enough(&steady[..6], 10), "3 rounds");
        assert!(
            !rule.enough(&steady[..7], 1000),
            "half a round, even at the cap"
        );
        assert!(
            rule.enough(&steady[..8], 10),
            "4 rounds = 3 + 3/10, rounded up"
        );
        let noisy: Vec<(u64, u64)> = (0..10).map(|i| (100 + 10 * (i % 3), 100)).collect();
        assert!(!rule.enough(&noisy, 10));
        assert!(rule.enough(&noisy, 1000), "the cap");
        assert!(rule.enough(&vec![(130, 100); 50][..], 10), "the most");
        assert!(!rule.enough(&[], 5000), "never before a round");
    }

    #[test]
    fn the_interval_is_checked_at_growing_steps() {
        let rule = StopRule {
            fewest: 10,
            most: 40,
            precision: 0.01,
            cap_ms: 1000,
        };
        // In rounds: 5 to 11 one at a time, then by a tenth, rounded up.
        let checked: Vec<u32> = (1..=45).filter(|&n| rule.check_at(n)).collect();
        assert_eq!(checked, [10, 12, 14, 16, 18, 20, 22, 26, 30, 34, 38, 42]);
    }
}

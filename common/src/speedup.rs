//! A speedup as people read it: the judge's value with its 95% confidence
//! interval, and "no change" when the interval holds 1. One rendering for
//! every place a speedup is shown (`hpcagent results`, the report, `hpcagent
//! judge`), so they cannot disagree on what counts as a change. The store
//! keeps the numbers as they are; only their display says "no change".

use std::fmt;

use hpcagent_proto::v1 as pb;

/// A measured speedup: the baseline's time over the submission's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speedup {
    pub value: f64,
    /// The 95% confidence interval (low, high); `None` for verdicts judged
    /// before the judge measured one.
    pub interval: Option<(f64, f64)>,
}

impl Speedup {
    /// A speedup with its interval when both of its ends are known.
    pub fn new(value: f64, low: Option<f64>, high: Option<f64>) -> Speedup {
        Speedup {
            value,
            interval: low.zip(high),
        }
    }

    /// A verdict's speedup as the wire carries it, where 0 means none.
    pub fn of_verdict(v: &pb::Verdict) -> Option<Speedup> {
        let known = |x: f64| (x > 0.0).then_some(x);
        known(v.speedup)
            .map(|value| Speedup::new(value, known(v.speedup_low), known(v.speedup_high)))
    }

    /// The interval holds 1: the submission was not told apart from the
    /// baseline, whatever the median says.
    pub fn no_change(&self) -> bool {
        self.interval
            .is_some_and(|(low, high)| low <= 1.0 && 1.0 <= high)
    }
}

/// "1.23x (1.20-1.26)", "no change (1.00x, 0.99-1.02)", or "1.23x" without
/// an interval.
impl fmt::Display for Speedup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value;
        match self.interval {
            Some((low, high)) if self.no_change() => {
                write!(f, "no change ({value:.2}x, {low:.2}-{high:.2})")
            }
            Some((low, high)) => write!(f, "{value:.2}x ({low:.2}-{high:.2})"),
            None => write!(f, "{value:.2}x"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(value: f64, low: f64, high: f64) -> String {
        Speedup::new(value, Some(low), Some(high)).to_string()
    }

    #[test]
    fn an_interval_clear_of_one_is_a_speedup_or_a_slowdown() {
        assert_eq!(shown(1.234, 1.2, 1.26), "1.23x (1.20-1.26)");
        assert_eq!(shown(0.5, 0.48, 0.52), "0.50x (0.48-0.52)");
    }

    #[test]
    fn an_interval_that_holds_one_is_no_change() {
        assert_eq!(shown(1.001, 0.99, 1.02), "no change (1.00x, 0.99-1.02)");
        assert_eq!(
            shown(1.03, 1.0, 1.06),
            "no change (1.03x, 1.00-1.06)",
            "low == 1"
        );
        assert_eq!(
            shown(0.97, 0.94, 1.0),
            "no change (0.97x, 0.94-1.00)",
            "high == 1"
        );
        assert!(!Speedup::new(1.01, Some(1.000001), Some(1.02)).no_change());
    }

    #[test]
    fn without_an_interval_only_the_value_is_shown() {
        let old = Speedup::new(1.0, None, None);
        assert_eq!(old.to_string(), "1.00x");
        assert!(!old.no_change(), "no interval, no claim either way");
        assert_eq!(Speedup::new(2.0, Some(1.9), None).interval, None);
    }

    #[test]
    fn zero_on_the_wire_is_absent() {
        let mut v = pb::Verdict {
            speedup: 1.5,
            ..Default::default()
        };
        assert_eq!(Speedup::of_verdict(&v), Some(Speedup::new(1.5, None, None)));
        v.speedup_low = 1.4;
        v.speedup_high = 1.6;
        assert_eq!(Speedup::of_verdict(&v).unwrap().interval, Some((1.4, 1.6)));
        v.speedup = 0.0;
        assert_eq!(Speedup::of_verdict(&v), None, "not ok: no speedup");
    }
}

//! Summaries of measured samples, and the one way ratios are printed.

use std::time::Duration;

/// Percentiles of latency samples.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn of(samples: &mut [Duration]) -> Latency {
        samples.sort_unstable();
        let at = |q: f64| -> f64 {
            if samples.is_empty() {
                return 0.0;
            }
            let i = ((samples.len() - 1) as f64 * q).round() as usize;
            samples[i].as_secs_f64() * 1e6
        };
        Latency {
            p50_us: at(0.50),
            p99_us: at(0.99),
            max_us: at(1.0),
        }
    }
}

/// The median of `samples` (0 for none): durations, or ratios.
pub fn median<T: Copy + Default + PartialOrd>(samples: &mut [T]) -> T {
    samples.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// "name: ours vs peer = ratio× (target …)": the line every bench ends with.
pub fn ratio_line(what: &str, ratio: f64, better: &str, target: &str) -> String {
    format!("{what}: {ratio:.2}× {better} (target {target})")
}

/// A peer that could not be measured, said plainly.
pub fn skipped(peer: &str, why: &str) -> String {
    format!("peer {peer}: skipped ({why})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_right_samples() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let l = Latency::of(&mut samples);
        assert_eq!(l.p50_us, 51.0);
        assert_eq!(l.p99_us, 99.0);
        assert_eq!(l.max_us, 100.0);
        assert_eq!(median(&mut samples), Duration::from_micros(51));
    }
}

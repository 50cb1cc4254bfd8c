//! HPCAgent-Bench's numbers for a campaign: its Score and fast_p, computed
//! as its metric defines them (`hpcagent_bench/harness/metric.py`), so a
//! campaign's number can stand beside one HPCAgent-Bench published.
//!
//! The metric, in its terms: a task is *solved* when its submission is
//! correct and verified on every case; its score `S_i` is its speedup
//! clamped to `[1, c_max]` (`c_max` = 100) when solved, else 1, and floored
//! to 1 when the win is inside the timing noise (its dispersion gate); the
//! Score is the geometric mean of `S_i` over all tasks; solve rate is the
//! solved fraction; overall speedup the harmonic mean of `S_i` over the
//! solved; fast_p the fraction of tasks solved with an unclamped speedup
//! of at least p (p = 1, 1.5, 2).
//!
//! In a campaign: solved is a task settled by its agent's own Submit with
//! `ok` (public and held-out cases right; a worker's submit for an agent
//! that did not submit is not the agent's); the speedup is the settling
//! verdict's; the noise gate is its 95% interval holding 1 ("no change").
//! HPCAgent-Bench's speedup is the geometric mean over several timed
//! shapes, a campaign's one grade's: the same formula over a different
//! measurement, which the report says where it prints the Score.
//!
//! Its plausibility gate too: a speedup above [`SUSPECT_ABOVE`] (its
//! `record.speedup_suspect_above`, 1000×) or not finite is *suspect*, a
//! baseline mis-measured or a kernel optimized away more likely than a
//! real win. Suspect is flagged, not failed: the task still counts in the
//! Score and fast_p as computed (its `S_i` clamped to `c_max` like any
//! other), and the count of suspect tasks is reported beside them for a
//! person to review. HPCAgent-Bench flags every timed speedup; here only a
//! solved task's is counted, since an unsolved task's speedup enters no
//! number.

use hpcagent_orchestrator::store::{TaskResult, TaskRow};
use serde::Serialize;

/// HPCAgent-Bench's ceiling on one task's score.
pub const C_MAX: f64 = 100.0;
/// fast_p's thresholds.
pub const FAST_P: [f64; 3] = [1.0, 1.5, 2.0];
/// HPCAgent-Bench's plausibility gate: a speedup above it (or not
/// finite) is suspect, held for review.
pub const SUSPECT_ABOVE: f64 = 1000.0;

/// One task as the metric reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Graded {
    pub solved: bool,
    pub speedup: Option<f64>,
    /// The speedup's interval's lower end: at or below 1, no change.
    pub low: Option<f64>,
}

/// Whether a task is solved: its agent's own Submit settled it `ok`.
fn solved(by_agent: bool, status: Option<&str>) -> bool {
    by_agent && status == Some("ok")
}

impl Graded {
    pub fn of(result: &TaskResult) -> Graded {
        Graded {
            solved: solved(result.by_agent(), result.status.as_deref()),
            speedup: result.speedup,
            low: result.speedup_low,
        }
    }

    /// A task as the store's row has it.
    pub fn of_row(task: &TaskRow) -> Graded {
        Graded {
            solved: solved(task.by_agent(), task.status.as_deref()),
            speedup: task.speedup,
            low: task.speedup_low,
        }
    }

    /// `S_i`: the clamped speedup of a solved task outside the noise, else 1.
    pub fn score(&self) -> f64 {
        match (self.solved, self.speedup) {
            (true, Some(s)) if s > 0.0 && !self.within_noise() => s.clamp(1.0, C_MAX),
            _ => 1.0,
        }
    }

    fn within_noise(&self) -> bool {
        self.low.is_some_and(|low| low <= 1.0)
    }

    /// Whether it is solved at a speedup above [`SUSPECT_ABOVE`] or not
    /// finite: flagged for review, still counted as computed.
    pub fn suspect(&self) -> bool {
        self.solved
            && self
                .speedup
                .is_some_and(|s| !s.is_finite() || s > SUSPECT_ABOVE)
    }
}

/// The suite's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchScore {
    /// The HPCAgent-Bench Score: the geometric mean of `S_i` over all tasks.
    pub score: f64,
    pub n_tasks: usize,
    pub n_solved: usize,
    pub solve_rate: f64,
    /// The harmonic mean of `S_i` over the solved tasks; `None` without one.
    pub overall_speedup: Option<f64>,
    /// (p, fraction of tasks solved with a speedup of at least p).
    pub fast_p: Vec<(f64, f64)>,
    /// Solved tasks whose speedup is above [`SUSPECT_ABOVE`] or not
    /// finite ([`Graded::suspect`]): counted above as computed, held for
    /// review.
    pub suspect: usize,
}

/// The numbers of `tasks`.
pub fn bench_score(tasks: &[Graded]) -> BenchScore {
    let n = tasks.len();
    let scores: Vec<f64> = tasks.iter().map(Graded::score).collect();
    let solved: Vec<f64> = tasks
        .iter()
        .filter(|t| t.solved)
        .map(Graded::score)
        .collect();
    let fraction = |count: usize| if n == 0 { 0.0 } else { count as f64 / n as f64 };
    let fast_p = FAST_P
        .iter()
        .map(|&p| {
            let fast = tasks
                .iter()
                .filter(|t| t.solved && t.speedup.is_some_and(|s| s >= p))
                .count();
            (p, fraction(fast))
        })
        .collect();
    BenchScore {
        score: crate::geometric_mean(scores.iter().copied()).unwrap_or(1.0),
        n_tasks: n,
        n_solved: solved.len(),
        solve_rate: fraction(solved.len()),
        overall_speedup: (!solved.is_empty())
            .then(|| solved.len() as f64 / solved.iter().map(|s| 1.0 / s).sum::<f64>()),
        fast_p,
        suspect: tasks.iter().filter(|t| t.suspect()).count(),
    }
}

/// The numbers of a run's results.
pub fn score_results(results: &[TaskResult]) -> BenchScore {
    let graded: Vec<Graded> = results.iter().map(Graded::of).collect();
    bench_score(&graded)
}

impl BenchScore {
    /// "1.234 (3 of 5 solved; fast_1 60%, fast_1.5 40%, fast_2 20%)", and
    /// "; 1 suspect (above 1000×, held for review)" when a task is.
    pub fn brief(&self) -> String {
        let fast: Vec<String> = self
            .fast_p
            .iter()
            .map(|(p, x)| format!("fast_{p} {:.0}%", 100.0 * x))
            .collect();
        let suspect = match self.suspect {
            0 => String::new(),
            n => format!("; {n} {}", suspect_words()),
        };
        format!(
            "{:.3} ({} of {} solved; {}{suspect})",
            self.score,
            self.n_solved,
            self.n_tasks,
            fast.join(", ")
        )
    }
}

/// What a suspect speedup is, after the word: "suspect (above 1000×, held
/// for review)".
pub fn suspect_words() -> String {
    format!("suspect (above {SUSPECT_ABOVE}×, held for review)")
}

impl std::fmt::Display for BenchScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HPCAgent-Bench Score {}", self.brief())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(solved: bool, speedup: Option<f64>, low: Option<f64>) -> Graded {
        Graded {
            solved,
            speedup,
            low,
        }
    }

    /// Eight tasks whose numbers are worked out by hand from the metric.
    #[test]
    fn the_score_is_the_metrics_on_a_hand_worked_fixture() {
        let tasks = [
            task(true, Some(4.0), Some(3.5)),        // S = 4
            task(true, Some(250.0), Some(200.0)),    // clamped: S = 100
            task(true, Some(1.6), Some(0.98)),       // no change (interval holds 1): S = 1
            task(true, Some(0.5), Some(0.45)),       // slower: clamped up, S = 1
            task(false, Some(9.0), Some(8.0)),       // wrong on a held-out case: S = 1
            task(false, None, None),                 // failed: S = 1
            task(true, Some(5000.0), Some(4000.0)),  // suspect, counted: S = 100
            task(false, Some(3000.0), Some(2900.0)), // not solved: S = 1, not suspect
        ];
        let s = bench_score(&tasks);
        // geomean(4, 100, 1, 1, 1, 1, 100, 1) = (40000)^(1/8)
        assert!((s.score - 40000f64.powf(1.0 / 8.0)).abs() < 1e-12, "{s:?}");
        assert!((s.score - 3.760_603_093_086_393).abs() < 1e-9);
        assert_eq!((s.n_tasks, s.n_solved), (8, 5));
        assert!((s.solve_rate - 5.0 / 8.0).abs() < 1e-12);
        // Harmonic mean of (4, 100, 1, 1, 100): 5 / (0.25 + 0.01 + 1 + 1 + 0.01)
        let hmean = s.overall_speedup.unwrap();
        assert!((hmean - 5.0 / 2.27).abs() < 1e-12, "{hmean}");
        // fast_p reads the unclamped speedup of the solved: 4, 250, 1.6,
        // 0.5, 5000.
        assert_eq!(
            s.fast_p,
            vec![(1.0, 4.0 / 8.0), (1.5, 4.0 / 8.0), (2.0, 3.0 / 8.0)]
        );
        // The gate: the solved 5000× only (250× is below it, the unsolved
        // 3000× enters nothing).
        let suspect: Vec<bool> = tasks.iter().map(Graded::suspect).collect();
        assert_eq!(
            suspect,
            [false, false, false, false, false, false, true, false]
        );
        assert_eq!(s.suspect, 1);
        assert!(
            s.brief()
                .ends_with("%; 1 suspect (above 1000×, held for review))"),
            "{}",
            s.brief()
        );
        // Not finite is suspect too; at the bound is not.
        assert!(task(true, Some(f64::INFINITY), None).suspect());
        assert!(task(true, Some(f64::NAN), None).suspect());
        assert!(!task(true, Some(SUSPECT_ABOVE), None).suspect());
    }

    #[test]
    fn no_tasks_score_one_with_nothing_solved() {
        let s = bench_score(&[]);
        assert_eq!((s.score, s.n_solved, s.solve_rate), (1.0, 0, 0.0));
        assert_eq!(s.overall_speedup, None);
        assert_eq!(s.suspect, 0);
        assert!(!s.brief().contains("suspect"), "{}", s.brief());
    }
}

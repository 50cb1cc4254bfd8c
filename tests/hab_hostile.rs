//! Hostile submissions to HPCAgent-Bench tasks (the project's fixtures in
//! that format, `tests/hab-corpus`), each graded by a root judge and by an
//! unprivileged one:
//!
//! - a kernel that replays its first answer, submitted to a task whose
//!   initializer takes no seed (`formula`, its values index formulas of the
//!   sizes, as PolyBench's are), is never `ok`: no case it is checked or
//!   timed on is the public case again;
//! - a kernel that keeps a table of answers keyed by a hash of its inputs
//!   gets no speedup it did not earn, timed against the NumPy reference and
//!   in pairs against an overlay baseline (`BASELINES`), on inputs the judge
//!   draws and on sets only the task's initializer makes: at most 1.25× an
//!   honest kernel's (the medians of grades of each, taken in turn), as
//!   `tests/hostile_suite.rs` holds the timing tricks on the judge's own
//!   corpus;
//! - a kernel that ends a batch of timed calls after its first (it
//!   writes the runner's "returned" byte itself) and skips the rest is
//!   `incorrect`, though its clock read a fraction of the batch's work.
//!
//! Each case is a row of the suite's table (`tests/common/suite.rs`).

mod common;

use std::sync::{Mutex, OnceLock};

use common::{JudgeOptions, JudgeServer, Unprivileged, repo, suite};
use serde_json::Value;

/// The most a trick's speedup may be over the honest kernel's.
const BELOW_HONEST: f64 = 1.25;

/// Grades of each kernel whose median speedups are compared: the judge
/// draws the timed sizes afresh for every grade, and against NumPy the
/// reference's time per element moves with them by a third or more, so one
/// grade of each compares two different problems. With 3, the medians
/// of either kernel against NumPy (formula at M, the unprivileged judge)
/// read 0.39–0.80× over 9 runs, and one table's median came out 1.28×
/// the honest one's on that noise alone: 5 each.
const SAMPLES: usize = 5;

/// Grades timing on the node: one test's grades must not share the CPUs
/// with another's while they are compared.
static TIMING: Mutex<()> = Mutex::new(());

fn user() -> &'static Unprivileged {
    static USER: OnceLock<Unprivileged> = OnceLock::new();
    USER.get_or_init(Unprivileged::new)
}

/// A root judge and an unprivileged one over the fixtures, with the
/// overlay of C baselines when `overlay`, each named as the table says it.
fn judges(overlay: bool) -> Vec<(&'static str, JudgeServer)> {
    let corpus = repo().join("tests/hab-corpus").display().to_string();
    let baselines = repo().join("tests/hab-baselines").display().to_string();
    let mut args = vec!["--corpus", corpus.as_str()];
    if overlay {
        args.extend(["--baselines", baselines.as_str()]);
    }
    [("root judge", None), ("unprivileged judge", Some(user()))]
        .into_iter()
        .map(|(who, user)| {
            let options = JudgeOptions {
                user,
                ..JudgeOptions::default()
            };
            (who, JudgeServer::start_with(&args, &[], options))
        })
        .collect()
}

fn summary(v: &Value) -> String {
    format!("{} ({}): {}", v["status"], v["denominator"], v["message"])
}

#[test]
fn a_replayed_first_answer_never_passes_a_task_whose_initializer_takes_no_seed() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = Vec::new();
    for (who, judge) in judges(false) {
        let v = judge.grade("submit", "formula", "c", "hab/formula_replay.c", &[]);
        let status = v["status"].as_str().unwrap_or_default();
        let pass = matches!(status, "overfit" | "incorrect");
        let got = format!("{status}: {}", v["message"]);
        let case = format!("HAB: replays its first answer, seed-less inputs ({who})");
        suite::record("hostile", &case, "overfit or incorrect", &got, pass);
        if !pass {
            failures.push(format!("{who}: {}", summary(&v)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_batch_of_timed_calls_cut_short_is_wrong_not_fast() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = Vec::new();
    for (who, judge) in judges(false) {
        // At M a call takes milliseconds: a clock stopped after one call
        // of a batch reads far less than the batch's work.
        let at = ["--preset", "M"];
        let honest = judge.grade("score", "formula", "c", "hab/formula_ok.c", &at);
        let cut = judge.grade("score", "formula", "c", "hab/formula_cut_short.c", &at);
        let per_call = |v: &Value| v["timing"]["min_ns"].as_f64().unwrap_or(f64::NAN);
        let message = cut["message"].as_str().unwrap_or_default();
        // The attack reaches the clock (its fastest batch reads under half
        // the honest kernel's call); the outputs of the calls it skipped
        // make it wrong.
        let clock_cut = per_call(&cut) < per_call(&honest) / 2.0;
        let pass = honest["status"] == "ok"
            && cut["status"] == "incorrect"
            && message.contains("timed call")
            && clock_cut;
        let case = format!("HAB: a batch of timed calls cut short after its first ({who})");
        let got = format!(
            "{}: {message}; its fastest call {:.0} ns against the honest kernel's {:.0} ns",
            cut["status"],
            per_call(&cut),
            per_call(&honest)
        );
        suite::record("hostile", &case, "incorrect, its clock cut", &got, pass);
        if !pass {
            failures.push(format!("{who}: {got}; honest {}", summary(&honest)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A task, the preset it is timed at, and the honest kernel and the
/// table-keeping one for it.
struct Timed {
    task: &'static str,
    preset: &'static str,
    honest: &'static str,
    table: &'static str,
}

#[test]
fn an_answer_table_keyed_by_the_inputs_earns_no_speedup() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    // Against NumPy: `formula` at M, where a call takes milliseconds (at S
    // a speedup over NumPy is mostly the calls' overheads) and the sums of
    // its positive values have no cancellation for HPCAgent-Bench's tight
    // tolerance to catch in an honest kernel. In pairs against the
    // overlay's baseline: `product`, whose declarative inputs the judge
    // draws afresh for every pair, at S.
    let against_numpy = Timed {
        task: "formula",
        preset: "M",
        honest: "hab/formula_ok.c",
        table: "hab/formula_table.c",
    };
    let in_pairs = Timed {
        task: "product",
        preset: "S",
        honest: "hab/product_ok.c",
        table: "hab/product_table.c",
    };
    // In pairs on input sets only the task's initializer can make: each
    // pair on a set of its own, the warm-up on another.
    let in_pairs_on_sets = Timed {
        task: "formula",
        preset: "M",
        honest: "hab/formula_ok.c",
        table: "hab/formula_table.c",
    };
    let mut failures = Vec::new();
    for (overlay, timed) in [
        (false, against_numpy),
        (true, in_pairs),
        (true, in_pairs_on_sets),
    ] {
        for (who, judge) in judges(overlay) {
            for verb in ["score", "submit"] {
                let at = ["--preset", timed.preset];
                let grade = |file| judge.grade(verb, timed.task, "c", file, &at);
                let (honest, table) =
                    alternate(SAMPLES, || grade(timed.honest), || grade(timed.table));
                let ratio = median_speedup(&table) / median_speedup(&honest);
                let all_ok = |vs: &[Value]| vs.iter().all(|v| v["status"] == "ok");
                let pass = all_ok(&honest) && all_ok(&table) && ratio < BELOW_HONEST;
                let case = format!(
                    "HAB: answer table keyed by its inputs, {verb} {} at {} ({who})",
                    timed.task, timed.preset
                );
                let got = format!(
                    "{}, {ratio:.2}× honest (medians {:.3}× / {:.3}× of {SAMPLES})",
                    table[0]["status"],
                    median_speedup(&table),
                    median_speedup(&honest)
                );
                let expected = format!("ok, below {BELOW_HONEST}× honest");
                suite::record("hostile", &case, &expected, &got, pass);
                if !pass {
                    failures.push(format!(
                        "{case}: {got}; honest {}, table {}",
                        summary(&honest[0]),
                        summary(&table[0])
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `n` grades each of two kernels, taken in turn so that drift on the node
/// falls on both alike.
fn alternate(
    n: usize,
    mut first: impl FnMut() -> Value,
    mut second: impl FnMut() -> Value,
) -> (Vec<Value>, Vec<Value>) {
    (0..n).map(|_| (first(), second())).unzip()
}

/// The median speedup of `verdicts` (NaN where one has none).
fn median_speedup(verdicts: &[Value]) -> f64 {
    let mut speedups: Vec<f64> = verdicts
        .iter()
        .map(|v| v["speedup"].as_f64().unwrap_or(f64::NAN))
        .collect();
    if speedups.iter().any(|s| s.is_nan()) {
        return f64::NAN;
    }
    speedups.sort_by(f64::total_cmp);
    speedups[speedups.len() / 2]
}

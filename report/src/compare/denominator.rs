//! What each run's speedups divide, and the common tasks where the runs'
//! differ: there a speedup of one run does not compare with another's,
//! whatever the agents did. The same C reads 0.14-0.21x against one
//! judge's NumPy and 0.39-0.80x against another's on the same node (their
//! BLAS chose different CPU kernels), and a `BASELINES` overlay's C is not
//! the translator's. It reads the settled verdicts as the store keeps
//! them; it does not judge which denominator is right.

use std::collections::BTreeMap;

use hpcagent_orchestrator::store::VerdictRow;
use serde::Serialize;

/// A common task whose runs' settled verdicts divide by different things.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unlike {
    pub task: String,
    /// Each run's, in the runs' order.
    pub denominators: Vec<String>,
}

/// Each settled task's denominator in one run's verdicts: the verdict's
/// `denominator`, with the NumPy and BLAS it ran on where it names them
/// ("numpy (NumPy 2.4.6; OpenBLAS 0.3.31 … SkylakeX …)"). A verdict from
/// before denominators were stored names none.
pub(super) fn settled(verdicts: &[VerdictRow]) -> BTreeMap<String, String> {
    let mut by_task = BTreeMap::new();
    for v in verdicts.iter().filter(|v| v.settled) {
        let Ok(detail) = serde_json::from_str::<serde_json::Value>(&v.detail) else {
            continue;
        };
        let word = |key: &str| detail[key].as_str().unwrap_or_default().to_string();
        let (denominator, runtime) = (word("denominator"), word("reference_runtime"));
        if denominator.is_empty() {
            continue;
        }
        let named = match runtime.is_empty() {
            true => denominator,
            false => format!("{denominator} ({runtime})"),
        };
        by_task.insert(v.task.clone(), named);
    }
    by_task
}

/// The `tasks` whose denominators in `runs` (each run's [`settled`]) are
/// not all the same. A task some run settled without naming one is left
/// out: nothing says they differ.
pub(super) fn unlike(tasks: &[String], runs: &[&BTreeMap<String, String>]) -> Vec<Unlike> {
    tasks
        .iter()
        .filter_map(|task| {
            let denominators: Vec<String> = runs
                .iter()
                .map(|run| run.get(task).cloned())
                .collect::<Option<_>>()?;
            let differ = denominators.iter().any(|d| d != &denominators[0]);
            differ.then(|| Unlike {
                task: task.clone(),
                denominators,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::verdict_row as verdict;

    #[test]
    fn a_settled_verdict_names_its_denominator_and_the_numpy_it_ran_on() {
        let wheel = "NumPy 2.4.6; OpenBLAS 0.3.31 DYNAMIC_ARCH SkylakeX";
        let numpy = |runtime: &str| {
            serde_json::json!({"denominator": "numpy", "reference_runtime": runtime}).to_string()
        };
        let verdicts = [
            // Not the one that settled the task.
            verdict("gelu", false, &numpy("another")),
            verdict("gelu", true, &numpy(wheel)),
            verdict("shift", true, r#"{"denominator": "translator C"}"#),
            // From before denominators were stored, and not JSON.
            verdict("old", true, r#"{"speedup": 1.0}"#),
            verdict("garbled", true, "{"),
        ];
        let found = settled(&verdicts);
        assert_eq!(found["gelu"], format!("numpy ({wheel})"));
        assert_eq!(found["shift"], "translator C");
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn only_tasks_every_run_names_and_that_differ_are_unlike() {
        let run = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(t, d)| (t.to_string(), d.to_string()))
                .collect()
        };
        let a = run(&[
            ("gelu", "numpy (NumPy 2.4.6)"),
            ("gemm", "baseline"),
            ("shift", "baselines overlay"),
        ]);
        let b = run(&[
            ("gelu", "numpy (NumPy 1.24.2)"),
            ("gemm", "baseline"),
            ("shift", "translator C"),
        ]);
        let c = run(&[("gelu", "numpy (NumPy 2.4.6)"), ("gemm", "baseline")]);
        let tasks: Vec<String> = ["gelu", "gemm", "shift"].map(String::from).into();
        let found = unlike(&tasks, &[&a, &b]);
        assert_eq!(
            found,
            [
                Unlike {
                    task: "gelu".into(),
                    denominators: vec!["numpy (NumPy 2.4.6)".into(), "numpy (NumPy 1.24.2)".into()],
                },
                Unlike {
                    task: "shift".into(),
                    denominators: vec!["baselines overlay".into(), "translator C".into()],
                },
            ]
        );
        // `shift` is not named in C: left out; the same everywhere: none.
        assert_eq!(unlike(&tasks, &[&a, &c]), []);
        assert_eq!(unlike(&tasks, &[&a, &c, &b]).len(), 1);
    }
}

//! What each run's speedups divide, and the common tasks where the runs'
//! differ: there a speedup of one run does not compare with another's,
//! whatever the agents did. The same C reads 0.14-0.21x against one
//! judge's NumPy and 0.39-0.80x against another's on the same node (their
//! BLAS chose different CPU kernels), and a `BASELINES` overlay's C is not
//! the translator's. What the runs' arrays lay on counts too: a kernel
//! that walks a large array across pages reads up to 3.5x slower on 4 KiB
//! pages than on the 2 MiB ones NumPy's arrays get. It reads the settled
//! verdicts as the store keeps them; it does not judge which is right.

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

/// What one run's speedup of a task divides, and what its arrays lay on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Measured {
    /// The verdict's `denominator`, with the NumPy and BLAS it ran on where
    /// it names them ("numpy (NumPy 2.4.6; OpenBLAS 0.3.31 … SkylakeX …)").
    divides: String,
    /// The kind of file the verdict's `buffers` names (what precedes its
    /// `: `); empty in a verdict from before they were stored.
    buffers: String,
}

impl Measured {
    /// Whether a speedup of this and one of `other` may not compare: they
    /// divide by different things, or both name what their arrays lay on
    /// and those differ.
    fn differs(&self, other: &Measured) -> bool {
        let named = !self.buffers.is_empty() && !other.buffers.is_empty();
        self.divides != other.divides || (named && self.buffers != other.buffers)
    }

    fn words(&self) -> String {
        match self.buffers.is_empty() {
            true => self.divides.clone(),
            false => format!("{}; arrays on {}", self.divides, self.buffers),
        }
    }
}

/// Each settled task's [`Measured`] in one run's verdicts. A verdict from
/// before denominators were stored names none, and is left out.
pub(super) fn settled(verdicts: &[VerdictRow]) -> BTreeMap<String, Measured> {
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
        let divides = match runtime.is_empty() {
            true => denominator,
            false => format!("{denominator} ({runtime})"),
        };
        let buffers = word("buffers");
        let buffers = buffers.split(": ").next().unwrap_or_default().to_string();
        by_task.insert(v.task.clone(), Measured { divides, buffers });
    }
    by_task
}

/// The `tasks` whose [`Measured`] in `runs` (each run's [`settled`])
/// differ. A task some run settled without naming a denominator is left
/// out: nothing says they differ.
pub(super) fn unlike(tasks: &[String], runs: &[&BTreeMap<String, Measured>]) -> Vec<Unlike> {
    tasks
        .iter()
        .filter_map(|task| {
            let measured: Vec<&Measured> = runs
                .iter()
                .map(|run| run.get(task))
                .collect::<Option<_>>()?;
            let differ = measured.iter().any(|m| m.differs(measured[0]));
            differ.then(|| Unlike {
                task: task.clone(),
                denominators: measured.iter().map(|m| m.words()).collect(),
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
            verdict(
                "shift",
                true,
                r#"{"denominator": "translator C", "buffers": "a memory file, shmem_enabled never: no tmpfs of its own (EPERM)"}"#,
            ),
            // Its run's account of its pages is left out: the kind compares.
            verdict(
                "bicg",
                true,
                r#"{"denominator": "numpy", "buffers": "a tmpfs of huge pages: 150 of 152 MiB on 2 MiB pages"}"#,
            ),
            // From before denominators were stored, and not JSON.
            verdict("old", true, r#"{"speedup": 1.0}"#),
            verdict("garbled", true, "{"),
        ];
        let found = settled(&verdicts);
        assert_eq!(found["gelu"].words(), format!("numpy ({wheel})"));
        assert_eq!(
            found["shift"].words(),
            "translator C; arrays on a memory file, shmem_enabled never"
        );
        assert_eq!(
            found["bicg"].words(),
            "numpy; arrays on a tmpfs of huge pages"
        );
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn only_tasks_every_run_names_and_that_differ_are_unlike() {
        let run = |pairs: &[(&str, &str)]| -> BTreeMap<String, Measured> {
            pairs
                .iter()
                .map(|(t, d)| {
                    let (divides, buffers) = d.split_once("; arrays on ").unwrap_or((d, ""));
                    let measured = Measured {
                        divides: divides.into(),
                        buffers: buffers.into(),
                    };
                    (t.to_string(), measured)
                })
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

        // Arrays on other pages: unlike where both runs name theirs.
        let huge = run(&[(
            "bicg",
            "numpy (NumPy 2.4.6); arrays on a tmpfs of huge pages",
        )]);
        let small = run(&[("bicg", "numpy (NumPy 2.4.6); arrays on a memory file")]);
        let before = run(&[("bicg", "numpy (NumPy 2.4.6)")]);
        let bicg = vec!["bicg".to_string()];
        let found = unlike(&bicg, &[&huge, &small]);
        assert_eq!(
            found[0].denominators,
            [
                "numpy (NumPy 2.4.6); arrays on a tmpfs of huge pages",
                "numpy (NumPy 2.4.6); arrays on a memory file"
            ]
        );
        assert_eq!(unlike(&bicg, &[&huge, &before]), []);
        assert_eq!(unlike(&bicg, &[&huge, &huge]), []);
    }
}

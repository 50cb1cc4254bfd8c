//! The load run of the fault suite: 2,000 tasks, 200 simulated agents and 4
//! simulated judges against the real control plane and store
//! (`hpcagent bench dispatch`, the same code the benchmark measures), then
//! the store is read back: no task lost, none settled twice.

mod common;

use common::{assert_fault_survived, hpcagent, stderr};

#[test]
fn two_thousand_tasks_through_two_hundred_agents_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = hpcagent()
        .args(["bench", "dispatch", "--agents", "200", "--judges", "4"])
        .args(["--tasks", "2000", "--json", "--run-dir"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["leases"], 2000, "{outcome}");
    assert_eq!(outcome["lost"], 0, "{outcome}");
    assert_eq!(outcome["duplicates"], 0, "{outcome}");
    assert_fault_survived("load: 2,000 tasks, 200 agents, 4 judges", &run_dir);
}

use super::*;
use crate::scheduler::{Settings, Task, TaskSpec, TaskState};

/// A judge warms each unsettled kernel, precision and preset once, in the
/// task list's order (repeats and languages of a kernel share its cases).
#[test]
fn judges_warm_the_unsettled_kernels_once_each_in_order() {
    let task = |id: &str, kernel: &str, precision: &str, preset: Option<&str>| {
        Task::pending(TaskSpec {
            id: id.into(),
            kernel: kernel.into(),
            track: String::new(),
            language: "c".into(),
            precision: precision.into(),
            preset: preset.map(str::to_string),
            budget: None,
        })
    };
    let mut tasks = vec![
        task("gemm.c.fp64", "gemm", "fp64", None),
        task("gemm.c.fp64#2", "gemm", "fp64", None),
        task("gemm.cpp.fp64", "gemm", "fp64", None),
        task("gemm.c.fp32", "gemm", "fp32", None),
        task("gemm.c.fp64@L", "gemm", "fp64", Some("L")),
        task("atax.c.fp64", "atax", "fp64", None),
        task("bicg.c.fp64", "bicg", "fp64", None),
    ];
    tasks[5].state = TaskState::Settled("ok".into(), Some(1.0));
    let settings = Settings {
        max_attempts: 3,
        task_budget: Duration::from_secs(600),
        lease_ttl: Duration::from_secs(30),
        needs_inference: false,
    };
    let warm: Vec<String> = tasks_to_warm(&Scheduler::new(settings, tasks))
        .into_iter()
        .map(|t| format!("{} {} {}", t.kernel, t.precision, t.preset))
        .collect();
    assert_eq!(
        warm,
        ["gemm fp64 ", "gemm fp32 ", "gemm fp64 L", "bicg fp64 "]
    );
}

#[test]
fn a_verdict_matches_its_lease_s_kernel_by_name_or_by_path() {
    let verdict = |task_id: &str| pb::Verdict {
        task_id: task_id.into(),
        language: "c".into(),
        precision: "fp64".into(),
        preset: "S".into(),
        ..pb::Verdict::default()
    };
    let spec = |kernel: &str| TaskSpec {
        id: format!("{kernel}.c.fp64"),
        kernel: kernel.into(),
        track: String::new(),
        language: "c".into(),
        precision: "fp64".into(),
        preset: None,
        budget: None,
    };
    let key = "loop_level_reasoning/shift/shift";
    assert!(check_verdict_matches(&verdict("dense_linear_algebra/gemm"), &spec("gemm")).is_ok());
    assert!(check_verdict_matches(&verdict(key), &spec(key)).is_ok());
    // Another manifest with the same stem is another task.
    let other = check_verdict_matches(&verdict("machine_learning/shift/shift"), &spec(key));
    assert!(other.is_err());
}

fn graded(verdict: pb::Verdict) -> Graded {
    let judge = Principal::Instance {
        role: Role::Judge,
        name: "judge-0".into(),
    };
    let record = pb::GradeRecord {
        lease_id: "l1".into(),
        kind: pb::GradeKind::Submit as i32,
        verdict: Some(verdict),
        ..Default::default()
    };
    Graded::read(&judge, record).unwrap()
}

#[test]
fn a_verdict_keeps_its_interval_pairs_how_they_stopped_isolation_and_denominator() {
    let runtime = "NumPy 1.24.2; OpenBLAS 0.3.21 DYNAMIC_ARCH Prescott";
    let g = graded(pb::Verdict {
        status: pb::Status::Ok as i32,
        speedup: 1.01,
        speedup_low: 0.99,
        speedup_high: 1.03,
        pairs: 300,
        isolation: "no network namespace".into(),
        denominator: "numpy".into(),
        reference_runtime: runtime.into(),
        buffers: "a tmpfs of huge pages: 10 of 10 MiB on 2 MiB pages".into(),
        stopped: "inside the no-change band ±2.5%".into(),
        floor_ns: 31_000,
        ..Default::default()
    });
    assert_eq!(g.record.status, "ok");
    assert_eq!(g.record.speedup, Some(1.01));
    assert_eq!(
        (g.record.speedup_low, g.record.speedup_high),
        (Some(0.99), Some(1.03))
    );
    let stored: serde_json::Value = serde_json::from_str(&g.record.verdict).unwrap();
    assert_eq!(stored["speedup_low"], 0.99);
    assert_eq!(stored["speedup_high"], 1.03);
    assert_eq!(stored["pairs"], 300);
    assert_eq!(stored["isolation"], "no network namespace");
    assert_eq!(stored["denominator"], "numpy");
    assert_eq!(stored["reference_runtime"], runtime);
    assert_eq!(
        stored["buffers"],
        "a tmpfs of huge pages: 10 of 10 MiB on 2 MiB pages"
    );
    assert_eq!(stored["stopped"], "inside the no-change band ±2.5%");
    assert_eq!(stored["floor_ns"], 31_000);
}

#[test]
fn a_verdict_without_a_speedup_has_no_interval() {
    let g = graded(pb::Verdict {
        status: pb::Status::Incorrect as i32,
        ..Default::default()
    });
    assert_eq!(g.record.speedup, None);
    assert_eq!((g.record.speedup_low, g.record.speedup_high), (None, None));
    let stored: serde_json::Value = serde_json::from_str(&g.record.verdict).unwrap();
    assert!(stored["speedup_low"].is_null(), "{stored}");
}

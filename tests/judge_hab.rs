//! HPCAgent-Bench tasks graded by `hpcagent judge serve --corpus` over the
//! project's own fixtures in that format (`tests/hab-corpus`): inputs made
//! by its generator's rules in the judge's Python, its NumPy reference as
//! the oracle, its tolerance rule, five held-out variants, and each
//! denominator (the NumPy reference, or a C baseline from a `BASELINES`
//! overlay, `tests/hab-baselines`, written as its translator emits C); and
//! over HPCAgent-Bench's own checkout where one is at hand
//! (`HPCAGENT_BENCH_SOURCE`, else `../shared/hpcagent-bench`), the
//! loop-level track timed against the C its translator emits there, with
//! no overlay. Hostile submissions to these tasks are
//! `tests/hab_hostile.rs`'s.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::{JudgeServer, repo};
use serde_json::Value;

/// A judge over the fixtures with no overlay: every task is timed against
/// its NumPy reference.
fn numpy_judge() -> &'static JudgeServer {
    static JUDGE: OnceLock<JudgeServer> = OnceLock::new();
    JUDGE.get_or_init(|| JudgeServer::start(&corpus_args(false), &[], None))
}

/// The same with the overlay of C baselines.
fn overlay_judge() -> &'static JudgeServer {
    static JUDGE: OnceLock<JudgeServer> = OnceLock::new();
    JUDGE.get_or_init(|| JudgeServer::start(&corpus_args(true), &[], None))
}

fn corpus_args(overlay: bool) -> Vec<&'static str> {
    static CORPUS: OnceLock<String> = OnceLock::new();
    static BASELINES: OnceLock<String> = OnceLock::new();
    let corpus = CORPUS.get_or_init(|| repo().join("tests/hab-corpus").display().to_string());
    let baselines =
        BASELINES.get_or_init(|| repo().join("tests/hab-baselines").display().to_string());
    let mut args = vec!["--corpus", corpus.as_str()];
    if overlay {
        args.extend(["--baselines", baselines.as_str()]);
    }
    args
}

/// The version of NumPy the judges' Python imports (theirs is
/// `HPCAGENT_PYTHON`, else `python3`).
fn judge_s_numpy() -> String {
    let python = std::env::var("HPCAGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(&python)
        .args(["-c", "import numpy; print(numpy.__version__)"])
        .output()
        .expect("the judges' Python");
    assert!(out.status.success(), "{python} cannot import NumPy");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn summary(v: &Value) -> String {
    format!("{} ({}): {}", v["status"], v["denominator"], v["message"])
}

#[test]
fn honest_kernels_of_every_kind_are_ok_against_the_numpy_reference() {
    // Declarative inputs with int64 and double scalars; bool, int32 and
    // uint8 arguments; float32,
    // int4, int8 and uint16 arrays; knobs of every kind with a complex128
    // array; a sparse configuration's buffers made by initialize(), and a
    // SciPy matrix it makes taken apart into them; an initializer that
    // takes no seed, whose timed inputs the judge transforms.
    let mut below_floor = false;
    let numpy = judge_s_numpy();
    for (task, file) in [
        ("product", "hab/product_ok.c"),
        ("formula", "hab/formula_ok.c"),
        ("masked", "hab/masked_ok.c"),
        ("narrow", "hab/narrow_ok.c"),
        ("knobs", "hab/knobs_ok.c"),
        ("spprod", "hab/spprod_ok.c"),
        ("spcsr", "hab/spcsr_ok.c"),
    ] {
        let v = numpy_judge().grade("score", task, "c", file, &[]);
        assert_eq!(v["status"], "ok", "{task}: {}", summary(&v));
        assert_eq!(v["denominator"], "numpy", "{task}");
        // The NumPy and BLAS the reference ran on, and its malloc, are
        // named: speedups against another's do not compare.
        let runtime = v["reference_runtime"].as_str().unwrap_or_default();
        assert!(
            runtime.starts_with(&format!("NumPy {numpy}; OpenBLAS "))
                && runtime.ends_with("; malloc's mmap threshold 32 MiB"),
            "{task}: {runtime:?}"
        );
        below_floor |=
            v["timing"]["min_ns"].as_f64().unwrap() < v["floor_ns"].as_f64().unwrap() / 2.0;
        // One call of the submission on each of the grade's input sets
        // (the public case's call before them warms it up), and the
        // reference's on each: 20 sets, as these cases are small, their
        // calls timed in batches.
        assert_eq!(v["timing"]["reps"], 20, "{task}: {v}");
        assert_eq!(v["baseline"]["reps"], 20, "{task}: {v}");
        let speedup = v["speedup"].as_f64().unwrap();
        let expected =
            v["baseline"]["min_ns"].as_f64().unwrap() / v["timing"]["min_ns"].as_f64().unwrap();
        assert!((speedup / expected - 1.0).abs() < 1e-9, "{task}: {v}");
        assert_eq!(v["pairs"], 0);
        // The submission's calls are counted as timed inside its runner,
        // as NumPy's are inside its process: the runner's floor, measured
        // on the judge's empty kernel, is off them. These kernels' calls
        // are a few microseconds (timed from outside, never under the
        // fastest empty call): some are left with under half the floor.
        assert!(v["floor_ns"].as_u64().unwrap() > 1_000, "{task}: {v}");
    }
    assert!(below_floor, "no call was counted net of the runner's floor");
}

#[test]
fn tasks_are_named_by_path_key_or_by_an_unambiguous_stem() {
    let by_key = numpy_judge().grade(
        "score",
        "scientific_computing/dense_linear_algebra/product/product",
        "c",
        "hab/product_ok.c",
        &[],
    );
    assert_eq!(by_key["status"], "ok", "{}", summary(&by_key));
    assert_eq!(
        by_key["task_id"],
        "scientific_computing/dense_linear_algebra/product/product"
    );
}

#[test]
fn hpcagent_bench_s_tolerance_is_plain_allclose() {
    // Off by 1e-9·|e| + 1e-7: within 1e-9·|e| + 1e-11·max|e| (this
    // corpus's own rule; max|e| is about 1.6e4), not 1e-9·|e| + 1e-11.
    // (A loop-track task: timed against the overlay's C, which it does
    // not match either.)
    let v = overlay_judge().grade("score", "shift", "c", "hab/shift_offset.c", &[]);
    assert_eq!(v["status"], "incorrect", "{}", summary(&v));
    assert_eq!(v["first_mismatch"]["index"], serde_json::json!([1]), "{v}");
}

#[test]
fn a_bool_argument_reaches_the_kernel() {
    // `bias` is true in every preset: a kernel that ignores it is wrong.
    let v = numpy_judge().grade("score", "masked", "c", "hab/masked_nobias.c", &[]);
    assert_eq!(v["status"], "incorrect", "{}", summary(&v));
    assert!(
        v["message"].as_str().unwrap().contains("expected 1, got 0"),
        "{}",
        summary(&v)
    );
}

#[test]
fn submit_adds_five_held_out_variants_of_the_draw() {
    let v = numpy_judge().grade("submit", "product", "c", "hab/product_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    assert_eq!(
        (v["hidden_passed"].as_u64(), v["hidden_total"].as_u64()),
        (Some(5), Some(5))
    );
    assert_eq!(v["deterministic"], true);
}

#[test]
fn a_grade_times_at_the_sizes_hpcagent_bench_times_at() {
    // A score and a submit at the public sizes, the preset's own, as
    // HPCAgent-Bench's judge times them (on inputs of the grade's own).
    let public = serde_json::json!({"NI": 40, "NJ": 60, "NK": 50});
    for verb in ["score", "submit"] {
        let v = numpy_judge().grade(verb, "product", "c", "hab/product_ok.c", &[]);
        assert_eq!(v["status"], "ok", "{verb}: {}", summary(&v));
        assert_eq!(v["timed_sizes"], public, "{verb}: {v}");
        assert_eq!(v["preset"], "S", "{verb}: {v}");
    }
    // Where the initializer takes no seed, sizes are drawn instead: at
    // the public sizes its values would be the public case's.
    let v = numpy_judge().grade("score", "formula", "c", "hab/formula_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    assert_ne!(
        v["timed_sizes"],
        serde_json::json!({"NI": 40, "NJ": 48, "NK": 56}),
        "{v}"
    );
}

#[test]
fn the_public_case_called_again_after_the_timed_calls_is_held_to_the_first_s_bits() {
    // Against NumPy too, a submit calls the public case twice more after
    // its timed and held-out calls: a change after the first few calls is
    // caught.
    let v = numpy_judge().grade("submit", "product", "c", "hab/product_drifts_late.c", &[]);
    assert_eq!(v["status"], "incorrect", "{}", summary(&v));
    assert_eq!(v["deterministic"], false, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("not deterministic"),
        "{}",
        summary(&v)
    );
    // A score checks no determinism: the same source is ok there.
    let v = numpy_judge().grade("score", "product", "c", "hab/product_drifts_late.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
}

#[test]
fn an_answer_remembered_from_the_public_case_fails_the_held_out_ones() {
    let v = numpy_judge().grade("submit", "product", "c", "hab/product_replay.c", &[]);
    assert_eq!(v["status"], "overfit", "{}", summary(&v));
    assert_eq!(v["hidden_passed"], 0, "{v}");
}

#[test]
fn an_overlay_baseline_is_timed_in_pairs_and_named_as_the_denominator() {
    // `masked`'s overlay baseline exports its translator's symbol
    // (masked_fp64), not the task's (mgather_fp64), and takes no workspace
    // pair: the judge builds it under the task's name.
    for (task, file) in [
        ("product", "hab/product_ok.c"),
        ("masked", "hab/masked_ok.c"),
        // The loop track, its reference in Python loops.
        ("shift", "hab/shift_ok.c"),
    ] {
        let v = overlay_judge().grade("submit", task, "c", file, &[]);
        assert_eq!(v["status"], "ok", "{task}: {}", summary(&v));
        assert_eq!(v["denominator"], "baselines overlay", "{task}");
        assert!(v["pairs"].as_u64().unwrap() >= 12, "{task}: {v}");
        assert_eq!(v["hidden_passed"], 5, "{task}: {v}");
    }
    // A task the overlay lacks falls back to the NumPy reference.
    let v = overlay_judge().grade("score", "spprod", "c", "hab/spprod_ok.c", &[]);
    assert_eq!(
        (v["status"].as_str(), v["denominator"].as_str()),
        (Some("ok"), Some("numpy")),
        "{v}"
    );
}

#[test]
fn a_loop_task_without_its_translator_or_an_overlay_says_why_it_is_not_graded() {
    // The fixtures are no checkout of HPCAgent-Bench: there is no
    // translator to emit the C the loop track is timed against, and no
    // NumPy stands in for it.
    let v = numpy_judge().grade("score", "shift", "c", "hab/shift_ok.c", &[]);
    assert_eq!(v["status"], "harness_error", "{}", summary(&v));
    assert_eq!(v["denominator"], "translator C", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("loop_level_reasoning/shift/shift: HPCAgent-Bench times this task against its translator's C")
            && message.contains("has no HPCAgent-Bench translator")
            && message.contains("BASELINES"),
        "{message}"
    );
}

#[test]
fn a_task_the_judge_cannot_grade_is_refused_with_why() {
    // Its outputs are what its reference returns: no argument holds them.
    let source = repo().join("tests/submissions/hab/shift_ok.c");
    let source = source.display().to_string();
    let out = numpy_judge().ask("score", &["--task", "energy", "--language", "c", &source]);
    assert!(!out.status.success());
    let stderr = common::stderr(&out);
    assert!(
        stderr.contains("loop_level_reasoning/energy/energy cannot be graded")
            && stderr.contains("its outputs total, peak are what the reference returns"),
        "{stderr}"
    );
}

#[test]
fn the_task_shows_the_manifest_s_name_hints_and_level_budget() {
    let out = numpy_judge().ask("task", &["spprod", "--language", "c", "--json"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let task: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        task["c_prototype"]
            .as_str()
            .unwrap()
            .starts_with("void spprod_coo_fp64(const int64_t *restrict S_cols"),
        "{task}"
    );
    let notes = task["notes"].as_str().unwrap();
    assert!(
        notes.contains("Sparse product (level 3, microapp)"),
        "{notes}"
    );
    assert!(notes.contains("600 s"), "{notes}");
    // Hints from the root down, the subtrack's among them.
    let sparse_hint =
        std::fs::read_to_string(repo().join("tests/hab-corpus/subtracks/sparse/hints.j2")).unwrap();
    assert!(notes.contains(sparse_hint.trim()), "{notes}");
    assert!(
        task["reference_source"]
            .as_str()
            .unwrap()
            .contains("np.add.at"),
        "{task}"
    );
}

/// `--warm` makes a task's cases before any grade asks: the public case
/// and the five a submit checks are in the cache while the judge is idle,
/// and a task it cannot find is passed over without stopping it. (Timed
/// in pairs against the overlay's baseline: no input sets are made ahead.)
#[test]
fn a_warmed_judge_has_the_cases_of_a_submit_before_it_is_asked() {
    let cache = tempfile::tempdir().unwrap();
    let mut args = corpus_args(true);
    args.extend(["--warm", "product,no_such_task"]);
    let judge = JudgeServer::start(&args, &[], Some(cache.path()));
    let cases = || product_cases(cache.path());
    common::wait_until(
        std::time::Duration::from_secs(120),
        "the public case and five held-out cases warmed",
        || (cases().len() >= 6).then_some(()),
    );
    assert_eq!(cases().len(), 6, "{:?}", cases());
    let v = judge.grade("submit", "product", "c", "hab/product_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    assert_eq!(cases().len(), 6, "the submit made cases of its own");
}

/// Warming stops at its disk budget: with none, no case is made ahead,
/// and a Score makes only the one it needs (timed in pairs: no input sets
/// are made ahead).
#[test]
fn warming_stops_at_its_disk_budget() {
    let cache = tempfile::tempdir().unwrap();
    let mut args = corpus_args(true);
    args.extend(["--warm", "product", "--warm-budget", "0"]);
    let judge = JudgeServer::start(&args, &[], Some(cache.path()));
    let v = judge.grade("score", "product", "c", "hab/product_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    // What must not happen cannot be waited for: warming, were it to make
    // the held-out cases, makes them within a second here; three pass.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(product_cases(cache.path()).len(), 1);
}

/// The cached cases of the `product` fixture under a judge's cache.
fn product_cases(cache: &std::path::Path) -> Vec<String> {
    common::reference_dirs(cache, "product_fp64-")
}

/// HPCAgent-Bench's checkout (`HPCAGENT_BENCH_SOURCE`, else the one beside
/// the repository), where there is one.
fn hab_checkout() -> Option<std::path::PathBuf> {
    let checkout = std::env::var_os("HPCAGENT_BENCH_SOURCE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/hpcagent-bench"));
    let found = checkout.join("hpcagent_bench/benchmarks").is_dir();
    if !found {
        eprintln!(
            "no HPCAgent-Bench checkout at {} (HPCAGENT_BENCH_SOURCE): not run",
            checkout.display()
        );
    }
    found.then_some(checkout)
}

/// On HPCAgent-Bench's own checkout, with no `BASELINES`: a loop-level
/// task is timed against the C its translator emits from the checkout
/// (made once by the judge), so a straight translation of its reference
/// measures about 1× (against NumPy it measured 10× to 1,500×); the
/// verdict names the denominator and the sizes it timed at, HPCAgent-Bench's
/// S; and the task shows that C, which graded as a submission measures 1×
/// too. A machine-learning task is still timed against NumPy.
#[test]
fn a_loop_task_of_hpcagent_bench_is_timed_against_its_translator_s_c() {
    let Some(checkout) = hab_checkout() else {
        return;
    };
    let corpus = checkout.join("hpcagent_bench/benchmarks");
    let corpus = corpus.display().to_string();
    let judge = JudgeServer::start(&["--corpus", &corpus], &[], None);
    let task = "loop_level_reasoning/tsvc_2_vtv/tsvc_2_vtv";
    let near_one = |v: &Value| {
        let s = v["speedup"].as_f64().unwrap_or(0.0);
        (0.8..1.25).contains(&s)
    };
    for verb in ["score", "submit"] {
        let v = judge.grade(verb, task, "c", "hab/vtv_straight.c", &[]);
        assert_eq!(v["status"], "ok", "{verb}: {}", summary(&v));
        assert_eq!(v["denominator"], "translator C", "{verb}: {v}");
        assert_eq!(
            v["timed_sizes"],
            serde_json::json!({"LEN_1D": 512}),
            "{verb}: {v}"
        );
        assert!(v["pairs"].as_u64().unwrap() >= 12, "{verb}: {v}");
        assert!(near_one(&v), "{verb}: {}: {v}", v["speedup"]);
    }
    // The translated C, cached with the judge's builds.
    let translated: Vec<_> = std::fs::read_dir(judge.cache.join("translated"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(translated.len(), 1, "{translated:?}");
    let out = judge.ask("task", &[task, "--language", "c", "--json"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    let baseline = info["baseline_source"].as_str().unwrap();
    assert!(baseline.contains("void tsvc_2_vtv_fp64("), "{baseline}");
    assert!(
        info["notes"]
            .as_str()
            .unwrap()
            .contains("HPCAgent-Bench's translator emits"),
        "{info}"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), baseline).unwrap();
    let v = judge.grade_file_as("score", task, "c", file.path());
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    assert!(near_one(&v), "{}: {v}", v["speedup"]);
    // Machine learning: NumPy, as HPCAgent-Bench times it.
    let relu = checkout.join("hpcagent_bench/benchmarks/machine_learning/relu");
    if relu.is_dir() {
        let out = judge.ask(
            "task",
            &["machine_learning/relu/relu", "--language", "c", "--json"],
        );
        let info: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(info["baseline_source"], "", "{info}");
        assert!(
            info["notes"]
                .as_str()
                .unwrap()
                .contains("the NumPy reference's fastest call"),
            "{info}"
        );
    }
}

/// The judge's processes whose parent is `pid`, by command line.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // The parent is the second field after the command's parentheses.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(pid) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            found.push((child, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// The judge's Python workers.
fn python_workers(judge: &JudgeServer) -> Vec<u32> {
    children(judge.pid())
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("hab_inputs.py --serve"))
        .map(|(pid, _)| pid)
        .collect()
}

/// A judge makes HPCAgent-Bench's cases, grade after grade and task after
/// task, in one Python of its own, started before the first grade: not a
/// process per grade or per case.
#[test]
fn one_python_worker_makes_every_grade_s_cases() {
    let judge = JudgeServer::start(&corpus_args(false), &[], None);
    let workers = || python_workers(&judge);
    let first = common::wait_until(
        std::time::Duration::from_secs(30),
        "the judge's Python worker started",
        || Some(workers()).filter(|w| !w.is_empty()),
    );
    assert_eq!(first.len(), 1, "{:?}", children(judge.pid()));
    for (verb, task, file) in [
        ("submit", "product", "hab/product_ok.c"),
        ("score", "formula", "hab/formula_ok.c"),
        ("submit", "spprod", "hab/spprod_ok.c"),
    ] {
        let v = judge.grade(verb, task, "c", file, &[]);
        assert_eq!(v["status"], "ok", "{task}: {}", summary(&v));
        assert_eq!(workers(), first, "{:?}", children(judge.pid()));
    }
}

/// A grade draws its timed sets while the submission builds, and calls
/// the reference on them only once the build is done: a build that fails
/// meanwhile is the grade's verdict, leaves none of the sets behind (only
/// the public case stays), and the same worker makes the next grade's.
#[test]
fn a_build_that_fails_while_the_sets_are_drawn_is_a_build_error_and_leaves_nothing() {
    let judge = JudgeServer::start(&corpus_args(false), &[], None);
    let workers = || python_workers(&judge);
    let mut first = None;
    for _ in 0..3 {
        let v = judge.grade("score", "formula", "c", "gemm_build_error.c", &[]);
        assert_eq!(v["status"], "build_error", "{}", summary(&v));
        assert!(
            v["build_log"].as_str().unwrap_or("").contains("error"),
            "{v}"
        );
        let cases = common::reference_dirs(&judge.cache, "");
        assert_eq!(
            cases.len(),
            1,
            "the failed grade left cases behind: {cases:?}"
        );
        let now = workers();
        assert_eq!(now.len(), 1, "{:?}", children(judge.pid()));
        assert_eq!(*first.get_or_insert(now.clone()), now);
    }
    let v = judge.grade("score", "formula", "c", "hab/formula_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    assert!(v["speedup"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
}

/// After a grade against NumPy the judge makes the next grade's timed sets
/// of the task while it is idle. A grade whose build fails leaves them;
/// the next that builds times on them, and on them alone (the judge then
/// makes the following grade's); and a submission that reads the judge's
/// cache while it is timed on them reads nothing.
#[test]
fn the_next_grade_s_sets_are_made_while_the_judge_is_idle_and_timed_on_once() {
    let judge = JudgeServer::start(&corpus_args(false), &[], None);
    let v = judge.grade("score", "formula", "c", "hab/formula_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    // The public case, and the batch.
    let made = made_ahead(&judge, 1);
    for _ in 0..2 {
        let v = judge.grade("score", "formula", "c", "gemm_build_error.c", &[]);
        assert_eq!(v["status"], "build_error", "{}", summary(&v));
        let mut now = common::reference_dirs(&judge.cache, "");
        now.sort();
        assert_eq!(now, made, "a grade that failed its build took the sets");
    }
    let dir = tempfile::tempdir().unwrap();
    let reader = dir.path().join("formula_reads_the_cache.c");
    let source =
        std::fs::read_to_string(repo().join("tests/submissions/hab/formula_reads_the_cache.c"))
            .unwrap();
    std::fs::write(
        &reader,
        format!(
            "#define TARGET {:?}\n{source}",
            judge.cache.display().to_string()
        ),
    )
    .unwrap();
    let v = judge.grade_file_as("score", "formula", "c", &reader);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    assert!(v["speedup"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
    let next = made_ahead(&judge, 1);
    let kept: Vec<&String> = made.iter().filter(|dir| next.contains(dir)).collect();
    assert_eq!(
        kept.len(),
        1,
        "the grade did not time on the sets made ahead, or left them: {made:?} then {next:?}"
    );
}

/// A judge started with `--warm` on a task timed against NumPy makes, after
/// the cases of a submit, the input sets its first grade times on; the
/// grade times on them.
#[test]
fn a_warmed_judge_makes_its_first_grade_s_sets() {
    let mut args = corpus_args(false);
    args.extend(["--warm", "formula"]);
    let judge = JudgeServer::start(&args, &[], None);
    let cases = 6;
    let made = made_ahead(&judge, cases);
    let v = judge.grade("submit", "formula", "c", "hab/formula_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    let next = made_ahead(&judge, cases);
    let kept = made.iter().filter(|dir| next.contains(dir)).count();
    assert_eq!(kept, cases, "{made:?} then {next:?}");
}

/// The cases in `judge`'s cache once a batch of sets made ahead is in it
/// beside `beside` others (at least the fewest sets a grade times on, none
/// half made), sorted.
fn made_ahead(judge: &JudgeServer, beside: usize) -> Vec<String> {
    let fewest = 3;
    common::wait_until(Duration::from_secs(120), "the sets made ahead", || {
        let mut cases = common::reference_dirs(&judge.cache, "");
        cases.sort();
        let whole = !cases.iter().any(|c| c.starts_with('.'));
        (whole && cases.len() >= beside + fewest).then_some(cases)
    })
}

/// A grade whose NumPy reference is timed while other work takes its CPUs
/// says so: its threads waited for a CPU, its calls were made again and
/// waited too, and the speedup over them reads high. Other work is made
/// to win every CPU the reference could run on: the judge's Python
/// worker is put at the idle scheduling policy (every other thread
/// preempts it), and a thread on each CPU spins 2 ms, then sleeps 1 ms.
/// A call of the reference (formula at L, 2 ms) no longer fits between
/// two spins, so no try of it runs without waiting. (Beside a plain
/// spinner, one call in two ran without waiting, and was the one kept.)
#[test]
fn a_reference_timed_beside_other_work_says_how_long_it_waited() {
    let judge = JudgeServer::start(&corpus_args(false), &[], None);
    let worker = common::wait_until(Duration::from_secs(60), "the judge's worker", || {
        python_workers(&judge).first().copied()
    });
    for thread in std::fs::read_dir(format!("/proc/{worker}/task")).unwrap() {
        let tid: i32 = thread
            .unwrap()
            .file_name()
            .to_string_lossy()
            .parse()
            .unwrap();
        let idle = libc::sched_param { sched_priority: 0 };
        // SAFETY: a scheduling policy for a thread of the judge's worker.
        let set = unsafe { libc::sched_setscheduler(tid, libc::SCHED_IDLE, &idle) };
        assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
    }
    let spinning = Spinners::on_every_cpu();
    let v = judge.grade(
        "score",
        "formula",
        "c",
        "hab/formula_ok.c",
        &["--preset", "L"],
    );
    drop(spinning);
    assert_eq!(v["status"], "ok", "{}", summary(&v));
    let stopped = v["stopped"].as_str().unwrap_or("");
    assert!(
        stopped.contains("for a CPU") && stopped.contains("reads high"),
        "{stopped:?}: {v}"
    );
}

/// A thread on each CPU spinning 2 ms then sleeping 1 ms, until dropped:
/// another job's work on the node, with room for the judge's own.
struct Spinners {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Spinners {
    fn on_every_cpu() -> Spinners {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..cpus)
            .map(|cpu| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    // SAFETY: a CPU set of this thread's own, zeroed then set.
                    unsafe {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu, &mut set);
                        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
                    }
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let spun = std::time::Instant::now();
                        while spun.elapsed() < Duration::from_millis(2) {
                            std::hint::spin_loop();
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        Spinners { stop, threads }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.threads.drain(..).for_each(|t| t.join().unwrap());
    }
}

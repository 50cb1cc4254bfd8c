//! The judge as agents and operators use it: `hpcagent judge serve` and the
//! `hpcagent judge task|score|submit|profile` clients, with real gcc, g++,
//! gfortran, NumPy and perf.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use common::{JudgeServer, hpcagent, repo, stderr, stdout};
use serde_json::Value;

/// One judge shared by the tests that need nothing special (two slots, so
/// a hanging submission does not hold up the others).
fn judge() -> &'static JudgeServer {
    static JUDGE: OnceLock<JudgeServer> = OnceLock::new();
    JUDGE.get_or_init(|| {
        JudgeServer::start(
            &["--slots", "2"],
            &[("HPCAGENT_JUDGE_SECRET", SECRET)],
            None,
        )
    })
}

/// The held-out secret of the shared judge: no verdict may ever show it.
const SECRET: &str = "held-out-secret-7f3a";

fn status(v: &Value) -> &str {
    v["status"].as_str().unwrap()
}

fn message(v: &Value) -> &str {
    v["message"].as_str().unwrap()
}

#[test]
fn correct_gemm_in_c_cpp_and_fortran_is_ok_against_the_baseline() {
    for (language, file) in [
        ("c", "gemm_ok.c"),
        ("cpp", "gemm_ok.cpp"),
        ("fortran", "gemm_ok.f90"),
    ] {
        let v = judge().grade("score", "gemm", language, file, &[]);
        assert_eq!(status(&v), "ok", "{language}: {v}");
        assert_eq!(v["correct"], true);
        // At least the judge's 12 timed pairs, each a call of the baseline
        // and one of the submission, in rounds of one in each order.
        let pairs = v["pairs"].as_u64().unwrap();
        assert!(pairs >= 12 && pairs.is_multiple_of(2), "{language}: {v}");
        assert_eq!(v["timing"]["reps"], pairs);
        assert_eq!(v["baseline"]["reps"], pairs);
        // The same loops as the baseline: a ratio of comparable runs, not a
        // claim about speed (this machine is shared and noisy).
        let speedup = v["speedup"].as_f64().unwrap();
        let (low, high) = (
            v["speedup_low"].as_f64().unwrap(),
            v["speedup_high"].as_f64().unwrap(),
        );
        assert!(
            speedup > 0.1 && speedup < 10.0 && low <= speedup && speedup <= high,
            "{language}: speedup {speedup} in [{low}, {high}]"
        );
        // The verdict says how its pairs ended, and what it says is what
        // its interval shows.
        let stopped = v["stopped"].as_str().unwrap();
        let decided = if stopped.starts_with("inside the no-change band") {
            0.975 <= low && high <= 1.025
        } else if stopped.starts_with("within ±1.0%") {
            high <= speedup * 1.01 + 1e-12 && low >= speedup * 0.99 - 1e-12
        } else if stopped.starts_with("clear of 1") {
            low > 1.025 || high < 0.975
        } else {
            // At its 30 s or its 1,000 pairs (short calls on a busy node).
            stopped.starts_with("not decided in its 30 s")
                || stopped.starts_with("not decided at its 1000 pairs")
        };
        assert!(decided, "{language}: {stopped}: {v}");
        assert!(v["max_rel_error"].as_f64().unwrap() < 1e-9);
    }
}

#[test]
fn a_wrong_answer_is_incorrect_with_the_first_mismatch() {
    let v = judge().grade("score", "gemm", "c", "gemm_wrong.c", &[]);
    assert_eq!(status(&v), "incorrect");
    assert_eq!(v["first_mismatch"]["output"], "C");
    assert_eq!(v["first_mismatch"]["index"], serde_json::json!([0, 0]));
    assert!(message(&v).starts_with("output C[0,0]: expected "), "{v}");
}

#[test]
fn a_compile_error_is_a_build_error_with_the_log() {
    let v = judge().grade("score", "gemm", "c", "gemm_build_error.c", &[]);
    assert_eq!(status(&v), "build_error");
    assert!(
        v["build_log"]
            .as_str()
            .unwrap()
            .contains("'oopsalpha' undeclared"),
        "{v}"
    );
}

#[test]
fn a_cascade_of_errors_keeps_its_first_and_its_last() {
    // The first error, then thousands more (megabytes of diagnostics): far
    // over what a verdict carries.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("gemm_cascade.c");
    let mut text =
        std::fs::read_to_string(repo().join("tests/submissions/gemm_build_error.c")).unwrap();
    for i in 0..4000 {
        text.push_str(&format!(
            "int cascade_{i}(void) {{ return undeclared_{i}; }}\n"
        ));
    }
    std::fs::write(&source, text).unwrap();
    let v = judge().grade_file_as("score", "gemm", "c", &source);
    assert_eq!(status(&v), "build_error", "{v}");
    let log = v["build_log"].as_str().unwrap();
    assert!(
        log.contains("'oopsalpha' undeclared"),
        "the first error: {log}"
    );
    // gcc says the errors as it parses and the warnings after: its last
    // words are about the last function.
    assert!(
        log.trim_end().ends_with("^") && log.contains("int cascade_3999(void)"),
        "the compiler's last words: {log}"
    );
    assert!(log.contains(" bytes cut …]"), "the cut is said: {log}");
    assert!(log.len() <= 66 << 10, "{} bytes", log.len());
}

/// Each hostile submission gets its own verdict, and the judge keeps serving.
macro_rules! hostile {
    ($name:ident, $task:literal, $file:literal, $status:literal, $says:literal) => {
        #[test]
        fn $name() {
            let v = judge().grade("score", $task, "c", $file, &[]);
            assert_eq!(status(&v), $status, "{v}");
            assert!(message(&v).contains($says), "{v}");
            assert!(judge().alive(), "the judge stopped serving after {}", $file);
        }
    };
}

hostile!(
    a_kernel_that_leaves_outputs_unwritten,
    "atax",
    "atax_skips_last.c",
    "incorrect",
    "was never written"
);
hostile!(
    a_kernel_that_mutates_its_inputs,
    "gemm",
    "gemm_mutates_input.c",
    "incorrect",
    "input A was modified"
);
// The input's pages are mapped from a descriptor open for reading alone:
// mapped from the writable one and protected, mprotect would undo it, the
// write would land without a fault, and nothing after the call compares
// the input any more.
hostile!(
    a_kernel_that_makes_its_input_writable_again,
    "gemm",
    "gemm_unprotects_its_input.c",
    "incorrect",
    "input A was modified"
);
hostile!(
    a_kernel_that_segfaults,
    "gemm",
    "gemm_segfault.c",
    "crash",
    "SIGSEGV"
);
hostile!(
    a_kernel_that_loops_forever,
    "gemm",
    "gemm_hang.c",
    "timeout",
    "did not finish"
);
hostile!(
    a_kernel_that_forks_without_end,
    "gemm",
    "gemm_fork_bomb.c",
    "timeout",
    "did not finish"
);
hostile!(
    a_kernel_that_allocates_100_gb,
    "gemm",
    "gemm_100gb.c",
    "crash",
    "SIGSEGV"
);
hostile!(
    a_kernel_that_writes_10_gb_to_stdout,
    "gemm",
    "gemm_10gb_stdout.c",
    "crash",
    "SIGXFSZ"
);
hostile!(
    a_library_without_the_symbol,
    "gemm",
    "gemm_wrong_symbol.c",
    "build_error",
    "does not export gemm_fp64"
);

#[test]
fn the_judge_reads_output_it_captured_not_what_the_submission_links_there() {
    let v = judge().grade("score", "gemm", "c", "gemm_symlinks_its_output.c", &[]);
    let text = v.to_string();
    assert!(
        !text.contains(SECRET) && !text.contains("HPCAGENT"),
        "the environment leaked: {v}"
    );
    assert!(!text.contains("root:x:0:0"), "/etc/passwd leaked: {v}");
}

#[test]
fn a_compiler_cannot_embed_files_the_submission_may_not_read() {
    let v = judge().grade("score", "gemm", "c", "gemm_embeds_a_secret_file.c", &[]);
    assert_eq!(status(&v), "build_error", "{v}");
    assert!(!v["stdout_tail"].as_str().unwrap().contains("root:"), "{v}");
}

#[test]
fn a_flood_of_compiler_errors_is_a_build_error_not_a_hang() {
    let mut source = std::fs::read_to_string(repo().join("tests/submissions/gemm_ok.c")).unwrap();
    source.push_str("void flood(void) {\n");
    for i in 0..20_000 {
        source.push_str(&format!("  undeclared_{i} = {i};\n"));
    }
    source.push_str("}\n");
    let path = std::env::temp_dir().join(format!("gemm-flood-{}.c", std::process::id()));
    std::fs::write(&path, source).unwrap();
    let v = judge().grade_file("score", &path);
    assert_eq!(status(&v), "build_error", "{v}");
    assert_eq!(message(&v), "compilation failed (see the build log)");
}

#[test]
fn submit_verdicts_do_not_show_what_the_program_printed() {
    let v = judge().grade("submit", "gemm", "c", "gemm_prints.c", &[]);
    assert_eq!(v["stdout_tail"], "", "held-out sizes would show: {v}");
}

#[test]
fn nothing_a_submission_starts_outlives_its_run() {
    let v = judge().grade("score", "gemm", "c", "gemm_leaves_a_process.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    let out = v["stdout_tail"].as_str().unwrap();
    // A run may not start processes at all.
    assert!(out.contains("fork refused"), "{v}");
    // Had one started, it would be gone with the run.
    if let Some(pid) = out.lines().find_map(|l| l.strip_prefix("daemon ")) {
        let state =
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        let running = state
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .is_some_and(|s| s != "Z");
        assert!(
            !running,
            "process {pid} is still alive after the verdict: {state}"
        );
    }
}

#[test]
fn submit_adds_held_out_cases_and_checks_determinism() {
    let v = judge().grade("submit", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(
        (v["hidden_passed"].as_u64(), v["hidden_total"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(v["deterministic"], true);

    let v = judge().grade("submit", "gemm", "c", "gemm_overfit.c", &[]);
    assert_eq!(status(&v), "overfit", "{v}");
    assert_eq!(v["hidden_passed"], 0);
    assert!(
        v["first_mismatch"].is_null(),
        "held-out details stay hidden: {v}"
    );

    let v = judge().grade("submit", "gemm", "c", "gemm_nondeterministic.c", &[]);
    assert_eq!(status(&v), "incorrect", "{v}");
    assert!(message(&v).contains("not deterministic"));
    // Score is the public case only: the same submission is correct there.
    assert_eq!(
        status(&judge().grade("score", "gemm", "c", "gemm_nondeterministic.c", &[])),
        "ok"
    );
}

#[test]
fn a_verdict_says_the_sizes_its_pairs_ran_at_and_a_submit_draws_its_own() {
    let sizes = |v: &Value| -> Vec<(String, i64)> {
        let map = v["timed_sizes"].as_object().expect("timed sizes");
        map.iter()
            .map(|(k, n)| (k.clone(), n.as_i64().unwrap()))
            .collect()
    };
    // gemm at S, the shared judge's preset: a score times the public case's sizes.
    let public = [("NI", 100), ("NJ", 110), ("NK", 120)].map(|(k, n)| (k.to_string(), n));
    let score = judge().grade("score", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(sizes(&score), public, "{score}");
    // A submit's are its own, within 15% of the public ones, and drawn anew
    // by each grade.
    let drawn: Vec<_> = (0..2)
        .map(|_| sizes(&judge().grade("submit", "gemm", "c", "gemm_ok.c", &[])))
        .collect();
    for (submit, (name, n)) in drawn.iter().flatten().zip(public.iter().cycle()) {
        assert_eq!(&submit.0, name);
        let factor = submit.1 as f64 / *n as f64;
        assert!((0.85..=1.15).contains(&factor), "{drawn:?}");
    }
    assert_ne!(drawn[0], drawn[1], "two submits timed at the same sizes");
}

/// The corpus's `kernel` baseline as the baseline policy submits it for
/// its fp64 task in C, written in `dir`.
fn baseline_submission(dir: &Path, kernel: &str) -> std::path::PathBuf {
    let corpus = hpcagent_corpus::Corpus::load(&repo().join("benchmarks")).unwrap();
    let kernel = corpus.find(kernel).unwrap();
    let task = hpcagent_proto::v1::TaskInfo {
        baseline_source: std::fs::read_to_string(kernel.baseline_path()).unwrap(),
        language: "c".into(),
        symbol: kernel.symbol(hpcagent_corpus::Precision::Fp64),
        ..Default::default()
    };
    let source = hpcagent_agent::task_view::baseline(&task, "fp64").unwrap();
    let path = dir.join(format!("{}.c", kernel.name));
    std::fs::write(&path, source).unwrap();
    path
}

#[test]
fn identical_code_measures_one_where_the_first_call_warms_the_second() {
    // spmv-csr at S gathers from an 8 MiB vector at random: a pair's second
    // call finds it warm and took 2.0 ms where the first took 2.6, so each
    // pair's ratio leans by its order. Rounds of one pair in each order
    // take that out; pairs alone measured the baseline against itself
    // 1.088x (0.864-1.268) in CI, undecided after 1,000 pairs.
    let dir = tempfile::tempdir().unwrap();
    let path = baseline_submission(dir.path(), "spmv-csr");
    for _ in 0..2 {
        let v = judge().grade_file_as("score", "spmv-csr", "c", &path);
        assert_eq!(status(&v), "ok", "{v}");
        let (speedup, low, high) = (
            v["speedup"].as_f64().unwrap(),
            v["speedup_low"].as_f64().unwrap(),
            v["speedup_high"].as_f64().unwrap(),
        );
        // Identical code's guarantee, and an interval narrower than the
        // pairs' lean made it: by pairs alone, five quiet grades'
        // intervals spanned 1.19x to 1.93x from end to end (median 1.36x);
        // by rounds 1.04x quiet, 1.13x (0.942-1.065, not decided in 30 s)
        // beside this suite's other tests, with room for a busier CI.
        assert!((0.95..=1.05).contains(&speedup), "{v}");
        assert!(
            low <= speedup && speedup <= high && high / low < 1.35,
            "{v}"
        );
    }
}

/// `judge`'s profile of the gemm at `path` in `language` under `tool`, as JSON.
fn profile(judge: &JudgeServer, language: &str, tool: &str, path: &Path) -> std::process::Output {
    judge.ask(
        "profile",
        &[
            "--task",
            "gemm",
            "--language",
            language,
            "--tool",
            tool,
            "--json",
            path.to_str().unwrap(),
        ],
    )
}

#[test]
fn profile_none_returns_the_programs_output() {
    let path = repo().join("tests/submissions/gemm_prints.c");
    let out = profile(judge(), "c", "none", &path);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["stdout_tail"]
            .as_str()
            .unwrap()
            .contains("instrumented: NI=100 NJ=110 NK=120"),
        "{report}"
    );
    assert_eq!(report["run"]["status"], "incorrect");
}

#[test]
fn profile_linuxperf_reports_counters_and_the_submissions_hot_symbol() {
    // Sandboxes on another filesystem than the binaries, as under CI: perf
    // must not copy what it sampled into the sandbox (it once died doing so).
    let shm = std::path::Path::new("/dev/shm");
    let device = |p: &std::path::Path| std::os::unix::fs::MetadataExt::dev(&p.metadata().unwrap());
    assert_ne!(
        device(shm),
        device(std::path::Path::new(env!("CARGO_BIN_EXE_hpcagent"))),
        "/dev/shm shares the binary's filesystem"
    );
    let judge = JudgeServer::start(
        &["--slots", "1"],
        &[("HPCAGENT_SANDBOX_DIR", "/dev/shm")],
        None,
    );
    let path = repo().join("tests/submissions/gemm_ok.c");
    let out = profile(&judge, "c", "linuxperf", &path);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = report["summary"].as_str().unwrap();
    assert!(summary.contains("task-clock"), "{summary}");
    assert!(
        summary.contains("submission.so") && summary.contains("gemm_fp64"),
        "{summary}"
    );
    assert!(report["counters"]["task-clock"].as_f64().unwrap() > 0.0);
}

/// A profiled run's sandbox: loopback in a network of its own (which its
/// profiler shares), nothing outside it, no Unix socket; under a root judge
/// and an unprivileged one (whose network needs a user namespace first).
#[test]
fn a_profiled_run_has_loopback_of_its_own_and_nothing_outside() {
    // Outside the run's network, where the judge is: a connection here is
    // the run reaching the node.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let source =
        std::fs::read_to_string(repo().join("tests/submissions/gemm_probes_its_profile_network.c"))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("probe.c");
    std::fs::write(&path, format!("#define PORT {port}\n{source}")).unwrap();
    let user = common::Unprivileged::new();
    for who in [None, Some(&user)] {
        let judge = JudgeServer::start_with(
            &["--slots", "1"],
            &[],
            common::JudgeOptions {
                user: who,
                ..Default::default()
            },
        );
        let out = profile(&judge, "c", "linuxperf", &path);
        assert!(out.status.success(), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let said = report["stdout_tail"].as_str().unwrap();
        assert!(said.contains("loopback: ok"), "{report}");
        assert!(said.contains("outside: unreachable"), "{report}");
        assert!(said.contains("unix: Operation not permitted"), "{report}");
        assert!(
            listener.accept().is_err(),
            "the profiled run reached the node"
        );
        assert_eq!(report["run"]["status"], "ok", "{report}");
    }
}

#[test]
fn profile_papi_counts_or_says_what_is_missing() {
    let path = repo().join("tests/submissions/gemm_ok.c");
    let out = profile(judge(), "c", "papi", &path);
    if out.status.success() {
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            report["counters"]["PAPI_TOT_INS"].as_f64().unwrap() > 0.0,
            "{report}"
        );
    } else {
        // Virtual machines often expose no hardware counters to PAPI: the
        // report says so, and the command fails with its reason.
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let why = report["unavailable"].as_str().unwrap();
        assert!(why.contains("papi") || why.contains("PAPI"), "{report}");
        assert!(report["run"].is_null(), "{report}");
        let err = stderr(&out);
        assert!(err.contains("papi is unavailable here"), "{err}");
    }
}

#[test]
fn a_profiler_this_node_lacks_is_reported_unavailable() {
    let path = repo().join("tests/submissions/gemm_ok.cu");
    for tool in ["nsys", "ncu"] {
        let out = profile(judge(), "cuda", tool, &path);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            report["unavailable"],
            format!("{tool} cannot run on this node: {tool} is not on PATH"),
            "{report}"
        );
        assert!(report["run"].is_null(), "{report}");
        assert!(
            stderr(&out).contains(&format!("{tool} is unavailable here")),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_tool_for_another_language_is_refused_naming_the_right_one() {
    let path = repo().join("tests/submissions/gemm_ok.c");
    let out = profile(judge(), "c", "nsys", &path);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nsys cannot profile c code; use linuxperf or papi"),
        "{}",
        stderr(&out)
    );
}

/// A GPU language is built before its device is asked for: on a node
/// without one (this machine, CI) a CUDA and a HIP submission are compiled
/// with the real nvcc (NVIDIA's PyPI wheels) and hipcc (Debian's, whose
/// LLVM builds for gfx90a but not yet MI300A's gfx942), which
/// scripts/test.sh installs and names with their architectures; their
/// errors are a build_error with the compiler's log, and code that
/// compiles fails cleanly for want of the CUDA driver, or of a device the
/// HIP runtime can see (not as the judge's own error, grade after grade).
#[test]
fn gpu_languages_build_then_fail_cleanly_without_a_gpu() {
    for var in ["HPCAGENT_NVCC", "HPCAGENT_CUDA_ARCH", "HPCAGENT_HIP_ARCH"] {
        assert!(
            std::env::var_os(var).is_some(),
            "{var} is not set: scripts/test.sh installs the GPU compilers and sets it"
        );
    }
    for (language, file, missing) in [
        (
            "cuda",
            "gemm_ok.cu",
            "cuda cannot run here: the CUDA driver (libcuda.so) is not installed",
        ),
        (
            "hip",
            "gemm_ok.hip",
            "hip needs a GPU, and this node's runtime sees none",
        ),
    ] {
        let ok = repo().join("tests/submissions").join(file);
        let out = judge().ask(
            "score",
            &[
                "--task",
                "gemm",
                "--language",
                language,
                ok.to_str().unwrap(),
            ],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{language}: {err}");
        assert!(
            err.contains(&format!("failed precondition: {missing}")),
            "{language}: {err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let broken = dir.path().join(format!("broken_{file}"));
        let text = std::fs::read_to_string(&ok).unwrap();
        std::fs::write(
            &broken,
            text.replace("double sum = 0.0;", "double sum = 0.0 +;"),
        )
        .unwrap();
        let v = judge().grade_file_as("score", "gemm", language, &broken);
        assert_eq!(status(&v), "build_error", "{language}: {v}");
        let log = v["build_log"].as_str().unwrap_or_default();
        assert!(
            log.contains("expected expression") || log.contains("expected an expression"),
            "{language}, the compiler's own words: {v}"
        );
    }
}

#[test]
fn refused_flags_say_why() {
    let path = repo().join("tests/submissions/gemm_ok.c");
    let out = judge().ask(
        "score",
        &[
            "--task",
            "gemm",
            "--language",
            "c",
            "--flag",
            "-ffast-math",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("-ffast-math changes floating-point results"),
        "{}",
        stderr(&out)
    );
    let v = judge().grade(
        "score",
        "gemm",
        "c",
        "gemm_ok.c",
        &["--flag", "-funroll-loops", "--flag", "-DUNUSED=1"],
    );
    assert_eq!(status(&v), "ok", "allowed flags build: {v}");
}

const GEMM_PROTOTYPE: &str = "void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C, const int64_t NI, const int64_t NJ, const int64_t NK, const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size)";

#[test]
fn task_prints_the_exact_prototype_first_locally_and_from_a_judge() {
    let local = hpcagent()
        .args(["judge", "task", "gemm"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(local.status.success(), "{}", stderr(&local));
    assert_eq!(stdout(&local).lines().next(), Some(GEMM_PROTOTYPE));
    let remote = judge().ask("task", &["gemm", "--language", "fortran"]);
    assert!(remote.status.success(), "{}", stderr(&remote));
    let text = stdout(&remote);
    assert_eq!(text.lines().next(), Some(GEMM_PROTOTYPE));
    assert!(
        text.contains("bind(C, name=\"gemm_fp64\")")
            && text.contains("public preset S: NI=100 NJ=110 NK=120"),
        "{text}"
    );
    let by_path = judge().ask("task", &["dense_linear_algebra/gemm", "--json"]);
    let info: Value = serde_json::from_slice(&by_path.stdout).unwrap();
    assert_eq!(info["symbol"], "gemm_fp64");
    assert_eq!(info["rtol"], 1e-9);
}

fn gcc_shared(source: &Path, output: &Path) {
    let ok = Command::new("gcc")
        .args(["-O2", "-fPIC", "-shared", "-o"])
        .arg(output)
        .arg(source)
        .status()
        .unwrap()
        .success();
    assert!(ok, "gcc {}", source.display());
}

#[test]
fn prebuilt_libraries_come_only_from_the_shared_mount() {
    let shared = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(shared.path().join("lib")).unwrap();
    let subs = repo().join("tests/submissions");
    gcc_shared(
        &subs.join("scale_rows.c"),
        &shared.path().join("lib/libscale_rows.so"),
    );
    gcc_shared(
        &subs.join("gemm_ok.c"),
        &shared.path().join("lib/gemm_prebuilt.so"),
    );
    let judge = JudgeServer::start(&["--shared", shared.path().to_str().unwrap()], &[], None);

    let task: Value =
        serde_json::from_slice(&judge.ask("task", &["gemm", "--json"]).stdout).unwrap();
    assert!(
        task["libraries"]
            .as_array()
            .unwrap()
            .contains(&Value::from("scale_rows")),
        "{task}"
    );
    let v = judge.grade(
        "score",
        "gemm",
        "c",
        "gemm_links_lib.c",
        &["--flag", "-lscale_rows"],
    );
    assert_eq!(status(&v), "ok", "{v}");

    let out = judge.ask(
        "score",
        &[
            "--task",
            "gemm",
            "--language",
            "c",
            "--flag",
            "-lnothere",
            subs.join("gemm_ok.c").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "library \"nothere\" is not installed in the shared mount (installed: scale_rows)"
        ),
        "{}",
        stderr(&out)
    );

    let inside = shared.path().join("lib/gemm_prebuilt.so");
    let out = judge.ask(
        "score",
        &[
            "--task",
            "gemm",
            "--language",
            "c",
            "--json",
            "--library",
            inside.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"],
        "ok"
    );

    let outside = tempfile::tempdir().unwrap();
    let stray = outside.path().join("gemm.so");
    gcc_shared(&subs.join("gemm_ok.c"), &stray);
    let link = shared.path().join("lib/escape.so");
    std::os::unix::fs::symlink(&stray, &link).unwrap();
    for path in [&stray, &link] {
        let out = judge.ask(
            "score",
            &[
                "--task",
                "gemm",
                "--language",
                "c",
                "--library",
                path.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        assert!(
            stderr(&out).contains("outside the shared mount"),
            "{}",
            stderr(&out)
        );
    }
}

/// A source no earlier test built, so the first grade compiles it.
fn unique_gemm(tag: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo().join("tests/submissions/gemm_ok.c")).unwrap();
    let path = std::env::temp_dir().join(format!("gemm-{tag}-{}.c", std::process::id()));
    std::fs::write(&path, format!("/* {tag} */\n{text}")).unwrap();
    path
}

#[test]
fn two_ranks_on_one_node_grade_concurrently_with_their_own_caches() {
    let base = tempfile::tempdir().unwrap();
    let a = JudgeServer::start(&[], &[("OMPI_COMM_WORLD_RANK", "0")], Some(base.path()));
    let b = JudgeServer::start(&[], &[("PMI_RANK", "1")], Some(base.path()));
    let sources = [unique_gemm("rank0"), unique_gemm("rank1")];
    let verdicts: Vec<Value> = std::thread::scope(|s| {
        let jobs: Vec<_> = [&a, &b]
            .into_iter()
            .zip(&sources)
            .map(|(judge, source)| {
                s.spawn(move || {
                    let out = judge.ask(
                        "score",
                        &[
                            "--task",
                            "gemm",
                            "--language",
                            "c",
                            "--json",
                            source.to_str().unwrap(),
                        ],
                    );
                    assert!(out.status.success(), "{}", stderr(&out));
                    serde_json::from_slice::<Value>(&out.stdout).unwrap()
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for v in &verdicts {
        assert_eq!(status(v), "ok", "{v}");
        assert_eq!(v["cached_build"], false);
    }
    let caps: Value = serde_json::from_slice(&a.ask("capabilities", &["--json"]).stdout).unwrap();
    assert_eq!(caps["rank"], "0 (from OMPI_COMM_WORLD_RANK)");
    let builds = |rank: &str| -> usize {
        std::fs::read_dir(base.path().join(rank).join("builds"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    .count()
            })
            .unwrap_or(0)
    };
    // Each rank holds its submission and the baseline, and nothing is shared.
    assert_eq!((builds("rank-0"), builds("rank-1")), (2, 2));
    assert!(
        !base.path().join("builds").exists(),
        "no build outside a rank directory"
    );

    let again = a.grade_file("score", &sources[0]);
    assert_eq!(
        again["cached_build"], true,
        "the second identical submission comes from the cache"
    );
}

#[test]
fn corpus_check_passes_for_every_kernel() {
    let cache = tempfile::tempdir().unwrap();
    let out = hpcagent()
        .args(["corpus", "check", "--cache", cache.path().to_str().unwrap()])
        .current_dir(repo())
        .output()
        .unwrap();
    let text = stdout(&out);
    // The status too: once in CI it ended with no output at all.
    assert!(
        out.status.success(),
        "{}\n{text}{}",
        out.status,
        stderr(&out)
    );
    assert!(text.contains("every kernel checked"), "{text}");
    assert!(
        text.lines().filter(|l| l.starts_with("ok ")).count() >= 40 * 2,
        "{text}"
    );
    assert!(text.contains("no trivial submission passes"), "{text}");
}

/// Writes a one-array kernel `name` whose output is `expression` of `x`.
fn write_kernel(root: &std::path::Path, name: &str, python: &str, c: &str) {
    let dir = root.join("test").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kernel.toml"),
        format!(
            "description = \"{name}\"\n[sizes]\nS = {{ N = 1000 }}\nM = {{ N = 2000 }}\n\
             L = {{ N = 3000 }}\nXL = {{ N = 4000 }}\n[arrays.x]\nshape = [\"N\"]\nrole = \"in\"\n\
             [arrays.y]\nshape = [\"N\"]\nrole = \"out\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("reference.py"),
        format!(
            "def {}(x, y, **_):\n    y[:] = {python}\n",
            name.replace('-', "_")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("baseline.c"),
        format!(
            "#include <stdint.h>\nvoid SYMBOL(const real *restrict x, real *restrict y, \
             const int64_t N, uint8_t *restrict workspace, const int64_t workspace_size)\n\
             {{ for (int64_t i = 0; i < N; i++) y[i] = {c}; }}\n"
        ),
    )
    .unwrap();
}

#[test]
fn corpus_check_refuses_degenerate_tasks() {
    let corpus = tempfile::tempdir().unwrap();
    // Outputs all near zero: writing zeros would pass.
    write_kernel(corpus.path(), "tiny", "1e-6 * x", "1e-6 * x[i]");
    // Outputs that do not depend on the inputs: another seed's answer would pass.
    write_kernel(corpus.path(), "constant", "3.0 + 0 * x", "3.0");
    // A kernel whose outputs depend on its inputs passes.
    write_kernel(corpus.path(), "doubled", "2.0 * x", "2.0 * x[i]");
    // The cache named as an operator often does, relative to where the
    // command starts: the runs, which start elsewhere, still find it.
    let cwd = tempfile::tempdir().unwrap();
    let out = hpcagent()
        .current_dir(cwd.path())
        .args(["corpus", "check", "--reps", "1", "--corpus"])
        .arg(corpus.path())
        .args(["--cache", "cache"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(!out.status.success(), "{text}");
    let line = |kernel: &str| {
        text.lines()
            .filter(|l| l.starts_with("FAIL") && l.contains(&format!(" {kernel} ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        line("tiny").contains("every output lies within ±0.01"),
        "{text}"
    );
    assert!(
        line("constant").contains("another input's reference outputs passes"),
        "{text}"
    );
    assert!(line("doubled").is_empty(), "{text}");
}

/// A native task's cases are made ahead too: a judge told to warm gemm
/// has the reference outputs of its public case and of the held-out cases
/// of a submit before any grade, and the submit makes none of its own.
#[test]
fn a_warmed_judge_has_a_native_task_s_references_before_it_is_asked() {
    let cache = tempfile::tempdir().unwrap();
    let judge = JudgeServer::start(&["--warm", "gemm"], &[], Some(cache.path()));
    let made = || {
        let mut dirs = common::reference_dirs(cache.path(), "gemm-");
        dirs.sort();
        dirs
    };
    let before = common::wait_until(
        std::time::Duration::from_secs(60),
        "three cases warmed",
        || Some(made()).filter(|dirs| dirs.len() >= 3),
    );
    assert_eq!(
        before.len(),
        3,
        "the public case and 2 held-out: {before:?}"
    );
    let v = judge.grade("submit", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["hidden_total"], 2, "{v}");
    assert_eq!(made(), before, "the submit made cases of its own");
}

/// Sets the modification time of every case directory in `cache` `ago` back.
fn age_cases(cache: &Path, ago: std::time::Duration) {
    for side in ["inputs", "reference"] {
        for entry in std::fs::read_dir(cache.join(side)).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                std::fs::File::open(entry.path())
                    .unwrap()
                    .set_modified(std::time::SystemTime::now() - ago)
                    .unwrap();
            }
        }
    }
}

/// A judge keeps its cases within `--case-cache-gib`: a new case makes the
/// least recently used go, inputs and reference outputs both, and a case
/// trimmed and asked for again is made again, its grade unharmed. Both
/// sides are private to the judge.
#[test]
fn the_case_cache_keeps_its_bound_and_remakes_what_it_trimmed() {
    let cache = tempfile::tempdir().unwrap();
    let judge = JudgeServer::start(&["--case-cache-gib", "0"], &[], Some(cache.path()));
    let cases = |side: &str| {
        let mut dirs: Vec<String> = std::fs::read_dir(cache.path().join(side))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("gemm-"))
            .collect();
        dirs.sort();
        dirs
    };
    let v = judge.grade("score", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    let at_s = cases("reference");
    assert_eq!(at_s.len(), 1, "the public case at S: {at_s:?}");
    assert_eq!(cases("inputs"), at_s);

    // Two hours later, a grade at M makes a case: the one at S goes whole.
    age_cases(cache.path(), std::time::Duration::from_secs(7200));
    let v = judge.grade("score", "gemm", "c", "gemm_ok.c", &["--preset", "M"]);
    assert_eq!(status(&v), "ok", "{v}");
    let at_m = cases("reference");
    assert_eq!(at_m.len(), 1, "only the case at M is left: {at_m:?}");
    assert_ne!(at_m, at_s);
    assert_eq!(cases("inputs"), at_m, "its inputs went with its reference");

    // Asked for again, the case at S is made again; the one at M, used
    // within the minute, stays.
    let v = judge.grade("score", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    let mut both = [at_s, at_m].concat();
    both.sort();
    assert_eq!(cases("reference"), both);
    assert_eq!(cases("inputs"), both);

    // Only the judge's user can open either side: a runner of a slot's
    // user listing the inputs would learn the held-out cases' sizes.
    for side in ["inputs", "reference"] {
        let dir = cache.path().join(side);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", dir.display());
    }
}

/// A submit whose speedup is above its task's plausible bound (here set
/// below any speedup) is graded again on fresh inputs and by a peer judge
/// before it is credited, and its verdict says so; a peer that cannot be
/// reached is said, and a score is never confirmed.
#[test]
fn an_implausible_speedup_is_confirmed_here_and_by_a_peer_before_it_is_credited() {
    let peer = JudgeServer::start(&["--reps", "5"], &[], None);
    let low = ["--reps", "5", "--plausible-per-cpu", "0.01"];
    let with_peer = [&low[..], &["--peer", &peer.url]].concat();
    let judge = JudgeServer::start(&with_peer, &[], None);
    let v = judge.grade("submit", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    let said = v["plausibility"].as_str().unwrap_or("");
    assert!(said.contains("is above the 0.01× plausible"), "{said}");
    assert!(
        said.contains("a grade again on fresh inputs gave"),
        "{said}"
    );
    assert!(said.contains(&format!("judge {} gave", peer.url)), "{said}");
    let scored = judge.grade("score", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(scored["plausibility"], "", "{scored}");

    let gone = [&low[..], &["--peer", "http://127.0.0.1:1"]].concat();
    let alone = JudgeServer::start(&gone, &[], None);
    let v = alone.grade("submit", "gemm", "c", "gemm_ok.c", &[]);
    let said = v["plausibility"].as_str().unwrap_or("");
    assert_eq!(status(&v), "ok", "{v}");
    assert!(
        said.contains("judge http://127.0.0.1:1 could not grade it"),
        "{said}"
    );
}

/// Pairs that end undecided are timed once more, in fresh runners, and
/// the verdict reads both timings' pairs together and says so.
#[test]
fn pairs_that_end_undecided_are_timed_again_in_fresh_runners() {
    let judge = JudgeServer::start(&["--time-cap", "1"], &[], None);
    let v = judge.grade("score", "gemm", "c", "gemm_slow.c", &[]);
    assert_eq!(status(&v), "ok", "{v}");
    // Calls of about 100 ms: fewer than six rounds fit in a second, too
    // few to decide anything.
    let stopped = v["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("not decided in its 1 s"), "{stopped}");
    // What the pooled pairs decide depends on how many the second timing
    // fits in its second: on a quiet node they can come out clear of 1
    // (seen in CI), on a busy one not decided in the two seconds.
    let (_, pooled) = stopped
        .split_once("; timed again in fresh runners, both timings' pairs: ")
        .unwrap_or_else(|| panic!("not timed again: {stopped}"));
    assert!(
        pooled.starts_with("not decided in its 2 s") || pooled.starts_with("clear of 1"),
        "{stopped}"
    );
    // The second timing makes as many pairs as the first at least.
    let pairs = v["pairs"].as_u64().unwrap();
    assert!(pairs >= 4 && pairs.is_multiple_of(2), "{v}");
    assert!(v["speedup"].as_f64().unwrap() < 0.1, "{v}");
}

/// A pair's inputs are compared once, after both of its calls: a change
/// made by either side is still told as whose it was, in either order of
/// the pair (drawn anew for each grade). A submission that writes its
/// input is `incorrect`; a baseline that does is the task's fault, said as
/// the judge's.
#[test]
fn an_input_changed_in_a_pair_is_told_whose_in_either_order() {
    let corpus = tempfile::tempdir().unwrap();
    write_kernel(corpus.path(), "doubled", "2.0 * x", "2.0 * x[i]");
    write_kernel(
        corpus.path(),
        "spoiled",
        "2.0 * x",
        "2.0 * x[i], ((real *)x)[i] = 0",
    );
    let corpus_arg = corpus.path().display().to_string();
    let judge = JudgeServer::start(&["--corpus", &corpus_arg], &[], None);
    let sources = tempfile::tempdir().unwrap();
    let kernel = |name: &str, body: &str| {
        let path = sources.path().join(format!("{name}.c"));
        std::fs::write(
            &path,
            format!(
                "#include <stdint.h>\nvoid {name}_fp64(const double *restrict x, double *restrict y, \
                 const int64_t N, uint8_t *restrict workspace, const int64_t workspace_size)\n\
                 {{ for (int64_t i = 0; i < N; i++) {{ {body}; }} }}\n"
            ),
        )
        .unwrap();
        path
    };
    let writes = kernel("doubled", "y[i] = 2.0 * x[i]; ((double *)x)[i] = 1");
    let honest = kernel("spoiled", "y[i] = 2.0 * x[i]");
    for _ in 0..4 {
        let v = judge.grade_file_as("score", "doubled", "c", &writes);
        assert_eq!(status(&v), "incorrect", "{v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("input x was modified"),
            "{v}"
        );
        let v = judge.grade_file_as("score", "spoiled", "c", &honest);
        assert_eq!(status(&v), "harness_error", "{v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("the baseline changed its input x"),
            "{v}"
        );
    }
}

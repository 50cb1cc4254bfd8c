//! A judge whose runs cannot have namespaces of their own refuses to grade,
//! unless the operator allows weaker isolation; then it grades, Landlock
//! and seccomp still hold, and every verdict says what its run lacked. The
//! test takes the namespaces away from an unprivileged judge the way a
//! kernel without unprivileged user namespaces would: it starts the judge
//! under a seccomp filter that refuses `unshare` and `setns` (and ptrace, so
//! its runs are stopped by signals, as where Yama forbids ptrace).

mod common;

use common::{JudgeOptions, JudgeServer, Unprivileged, repo, stderr, without_namespaces};

#[test]
fn without_namespaces_a_judge_refuses_unless_allowed_and_then_says_so() {
    let user = Unprivileged::new();
    let mut refused = user.hpcagent();
    refused
        .args(["judge", "serve", "--listen", "127.0.0.1:0", "--cache"])
        .arg(user.home().join("cache"))
        .current_dir(repo());
    without_namespaces(&mut refused);
    let out = refused.output().unwrap();
    let said = stderr(&out);
    assert!(!out.status.success(), "it started: {said}");
    assert!(
        said.contains("refuses to grade")
            && said.contains("namespaces")
            && said.contains("--weak-isolation"),
        "{said}"
    );

    let judge = JudgeServer::start_with(
        &["--weak-isolation", "--reps", "5"],
        &[],
        JudgeOptions {
            user: Some(&user),
            no_namespaces: true,
            ..JudgeOptions::default()
        },
    );
    let v = judge.grade("score", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(v["status"], "ok", "{v}");
    let isolation = v["isolation"].as_str().unwrap_or_default();
    assert!(isolation.starts_with("weak: no namespaces"), "{v}");
    // No mount namespace for a tmpfs of huge pages either: its arrays lie
    // in a memory file, and the verdict says on what pages and why.
    let buffers = v["buffers"].as_str().unwrap_or_default();
    assert!(
        buffers.starts_with("a memory file, shmem_enabled ")
            && buffers.contains(": no tmpfs of its own ("),
        "{v}"
    );
    // Its filter refuses ptrace too: its runs are stopped by signals, and
    // the verdict says that as well.
    assert!(
        isolation.contains("stopped between calls by signals it can undo (no ptrace)"),
        "{v}"
    );
    common::suite::record(
        "hostile",
        "weak judge (no namespaces): its verdicts say so",
        "weak: no namespaces",
        isolation,
        true,
    );

    // What Landlock and seccomp hold without namespaces still holds.
    let references = judge.cache.join("reference");
    for (case, file, define) in [
        (
            "read the cached references",
            "gemm_reads_a_file.c",
            Some(("TARGET", format!("{:?}", references.display().to_string()))),
        ),
        (
            "IPC: SysV, POSIX queue and memory",
            "gemm_shares_ipc.c",
            None,
        ),
        ("fork, execve, system()", "gemm_forks_and_execs.c", None),
    ] {
        let source = std::fs::read_to_string(repo().join("tests/submissions").join(file)).unwrap();
        let text = match &define {
            Some((name, value)) => format!("#define {name} {value}\n{source}"),
            None => source,
        };
        let path = user.home().join(file);
        std::fs::write(&path, text).unwrap();
        let v = judge.grade_file("score", &path);
        let pass = v["status"] == "ok";
        common::suite::record(
            "hostile",
            &format!("weak judge (no namespaces): {case}"),
            "ok",
            v["status"].as_str().unwrap_or("?"),
            pass,
        );
        assert!(pass, "{case}: {v}");
    }
}

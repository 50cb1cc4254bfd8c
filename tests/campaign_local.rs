//! `hpcagent up` on this machine: the local executor, baseline agents and
//! real judges, from examples/local.env.

mod common;

use common::{
    assert_settled_exactly_once, attempt_log, command_campaign, example, hpcagent, only_run_dir,
    read_plan, repo, stderr, stdout,
};
use serde_json::Value;

#[test]
fn a_local_campaign_settles_every_task_and_reports_them() {
    let root = tempfile::tempdir().unwrap();
    let env = example("local.env");
    let up = hpcagent()
        .args(["up", "--env", env.to_str().unwrap(), "--set"])
        .arg(format!("RUN_ROOT={}", root.path().display()))
        .current_dir(common::repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // While it runs, `status` attaches to the orchestrator.
    let start = std::time::Instant::now();
    let live: Value = loop {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "never saw the campaign running"
        );
        if let Ok(dir) = std::fs::read_dir(root.path())
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).next())
            && let Some(dir) = dir
            && dir.join("orchestrator.json").is_file()
        {
            let out = hpcagent()
                .args(["status", dir.to_str().unwrap(), "--json"])
                .output()
                .unwrap();
            if let Ok(v) = serde_json::from_slice::<Value>(&out.stdout)
                && v["running"] == true
            {
                break v;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(live["roles"].as_array().unwrap().len(), 4, "{live}");
    // How the agents' attempts ended so far, each counted once.
    let ends: u64 = live["attempts"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    let unknown = live["attempts"]
        .as_object()
        .unwrap()
        .keys()
        .find(|end| !["running", "submitted"].contains(&end.as_str()));
    assert_eq!(unknown, None, "{live}");
    assert!(
        ends <= live["tasks"]["total"].as_u64().unwrap() * 3,
        "{live}"
    );
    assert!(live["tasks"]["total"].as_u64().unwrap() >= 10, "{live}");

    let out = up.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("geometric mean speedup"),
        "{}",
        stdout(&out)
    );
    let run_dir = only_run_dir(root.path());
    assert!(
        run_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("local-")
    );

    let results = hpcagent()
        .args(["results", run_dir.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(results.status.success(), "{}", stderr(&results));
    let results: Value = serde_json::from_slice(&results.stdout).unwrap();
    let tasks = results["tasks"].as_array().unwrap().clone();
    // The run says what it was above its rows.
    let run = &results["run"];
    assert_eq!(
        (&run["policy"], &run["preset"], &run["state"]),
        (
            &Value::from("baseline"),
            &Value::from("S"),
            &Value::from("finished")
        ),
        "{run}"
    );
    assert_eq!(run["nodes"]["judge"], 2, "{run}");
    assert!(
        run["config"].as_str().unwrap().contains("AGENT_NODES=2"),
        "{run}"
    );
    assert!(tasks.len() >= 10, "{} tasks", tasks.len());
    // A task that is not ok says why: its verdicts as the store keeps them.
    let verdicts = hpcagent_orchestrator::store::Reader::open(&run_dir)
        .unwrap()
        .verdicts()
        .unwrap();
    for t in &tasks {
        let why: Vec<&str> = verdicts
            .iter()
            .filter(|v| t["task"] == v.task.as_str())
            .map(|v| v.detail.as_str())
            .collect();
        assert_eq!(t["state"], "settled", "{t}: {why:?}");
        assert_eq!(t["status"], "ok", "{t}: {why:?}");
    }
    // The baseline policy submits each kernel's baseline: every speedup is
    // the same code against itself, measured in pairs beside it, and must
    // read 1 within 5% (with its interval around it).
    let off: Vec<String> = tasks
        .iter()
        .filter(|t| {
            let (s, low, high) = (
                t["speedup"].as_f64().unwrap_or(0.0),
                t["speedup_low"].as_f64().unwrap_or(0.0),
                t["speedup_high"].as_f64().unwrap_or(0.0),
            );
            !((0.95..=1.05).contains(&s) && low <= s && s <= high)
        })
        .map(|t| {
            // How its pairs ended, from the verdict that settled it: what a
            // CI log must show to tell the node's noise from a lean.
            let settled = verdicts
                .iter()
                .find(|v| v.settled && t["task"] == v.task.as_str())
                .and_then(|v| serde_json::from_str::<Value>(&v.detail).ok())
                .map(|d| {
                    format!(
                        "{} pairs, floor {} ns, stopped: {}",
                        d["pairs"], d["floor_ns"], d["stopped"]
                    )
                })
                .unwrap_or_default();
            format!(
                "{} {} [{}, {}] {settled}",
                t["task"], t["speedup"], t["speedup_low"], t["speedup_high"]
            )
        })
        .collect();
    let speedups: Vec<f64> = tasks.iter().filter_map(|t| t["speedup"].as_f64()).collect();
    let (least, most) = speedups
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, m), &s| (l.min(s), m.max(s)));
    common::suite::record(
        "precision",
        "baseline against itself: speedups in [0.95, 1.05]",
        &format!("{} of {}", tasks.len(), tasks.len()),
        &format!(
            "{} of {} ({least:.3}–{most:.3})",
            tasks.len() - off.len(),
            tasks.len()
        ),
        off.is_empty(),
    );
    assert!(off.is_empty(), "identical code measured off 1.00: {off:?}");
    assert_settled_exactly_once(&run_dir);
    // Each attempt left its evidence: what the agent submitted, and how it
    // ended, one line of the attempts' log for each task.
    let attempt = run_dir.join("tasks/gemm.c.fp64/attempt-1");
    assert!(
        attempt.join("submission.c").is_file(),
        "{}",
        attempt.display()
    );
    let log = attempt_log(&run_dir);
    for t in &tasks {
        let settles = log
            .iter()
            .filter(|l| l["task"] == t["task"] && l["task_state"] == "settled")
            .count();
        assert_eq!(settles, 1, "{t}: {log:?}");
    }
    let gemm = log
        .iter()
        .find(|l| l["task"] == "gemm.c.fp64" && l["attempt"] == 1)
        .unwrap_or_else(|| panic!("{log:?}"));
    assert_eq!(gemm["task_state"], "settled", "{gemm}");
    assert_eq!(gemm["outcome"], "submitted", "{gemm}");

    // Every role ran as its own process with its own logs: 2 judges, 2 agents of 2 workers.
    for role in ["judge-0", "judge-1", "agent-0", "agent-1"] {
        let log = run_dir.join("roles").join(role).join("stderr");
        assert!(log.is_file(), "{}", log.display());
    }
    let plan = read_plan(&run_dir);
    let workers: u64 = plan["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["workers"].as_u64())
        .sum();
    assert!(workers >= 4);

    let status = hpcagent()
        .args(["status", run_dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["running"], false);
    assert_eq!(status["state"], "finished");
    assert_eq!(status["tasks"]["settled"], status["tasks"]["total"]);

    let csv = hpcagent()
        .args(["results", run_dir.to_str().unwrap(), "--format", "csv"])
        .output()
        .unwrap();
    assert_eq!(stdout(&csv).lines().count(), tasks.len() + 1);

    // The run directory holds its campaign: a new one there is refused.
    let again = hpcagent()
        .args(["up", "--env", env.to_str().unwrap(), "--run-dir"])
        .arg(&run_dir)
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("holds a campaign already"),
        "{}",
        stderr(&again)
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(run_dir.join("plan.json"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o644);
}

#[test]
fn a_bad_kernel_selection_is_refused_before_anything_starts() {
    let root = tempfile::tempdir().unwrap();
    let env = example("local.env");
    let out = hpcagent()
        .args([
            "up",
            "--env",
            env.to_str().unwrap(),
            "--set",
            "KERNELS=gemm,gemmm",
            "--set",
        ])
        .arg(format!("RUN_ROOT={}", root.path().display()))
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("KERNELS: \"gemmm\" is neither a kernel, a track nor a tag"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("did you mean gemm?"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_dir(root.path()).unwrap().count(),
        0,
        "no run directory for a refused campaign"
    );
}

/// `CORPUS` names the corpus a campaign runs, wherever `up` runs from.
#[test]
fn a_campaign_runs_the_corpus_its_env_file_names() {
    let corpus = tempfile::tempdir().unwrap();
    for kernel in ["dot", "norm2"] {
        let from = common::repo().join("benchmarks/reductions").join(kernel);
        let to = corpus.path().join("reductions").join(kernel);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let up = |corpus: &std::path::Path| {
        hpcagent()
            .args([
                "up",
                "--env",
                example("local.env").to_str().unwrap(),
                "--set",
            ])
            .arg(format!("RUN_ROOT={}", root.path().display()))
            .arg("--set")
            .arg(format!("CORPUS={}", corpus.display()))
            .current_dir(elsewhere.path())
            .output()
            .unwrap()
    };
    let out = up(corpus.path());
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(root.path());
    assert_settled_exactly_once(&run_dir);
    let reader = hpcagent_orchestrator::store::Reader::open(&run_dir).unwrap();
    let mut tasks: Vec<String> = reader.tasks().unwrap().into_iter().map(|t| t.id).collect();
    tasks.sort();
    assert_eq!(tasks, ["dot.c.fp64", "norm2.c.fp64"]);
    assert_eq!(
        read_plan(&run_dir)["corpus"],
        corpus.path().display().to_string()
    );
}

/// An HPCAgent-Bench checkout as `CORPUS`, with a `BASELINES` overlay: the
/// baseline policy submits each overlay baseline (task ids are path keys;
/// stems select them), every one settles ok against itself, and the task
/// the overlay lacks settles skipped, not failed. A task the judge cannot
/// grade is refused before anything starts, with why.
#[test]
fn an_hpcagent_bench_campaign_settles_against_its_baselines_overlay() {
    let root = tempfile::tempdir().unwrap();
    let up = |kernels: &str| {
        hpcagent()
            .args(["up", "--env", example("local.env").to_str().unwrap()])
            .arg("--set")
            .arg(format!("RUN_ROOT={}", root.path().display()))
            .arg("--set")
            .arg(format!(
                "CORPUS={}",
                repo().join("tests/hab-corpus").display()
            ))
            .arg("--set")
            .arg(format!(
                "BASELINES={}",
                repo().join("tests/hab-baselines").display()
            ))
            .arg("--set")
            .arg(format!("KERNELS={kernels}"))
            .output()
            .unwrap()
    };
    let refused = up("product,energy");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("KERNELS")
            && stderr(&refused).contains("loop_level_reasoning/energy/energy cannot be graded")
            && stderr(&refused).contains("what the reference returns"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        std::fs::read_dir(root.path()).unwrap().count(),
        0,
        "nothing written"
    );

    let out = up("product,shift,masked,spprod");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let run_dir = only_run_dir(root.path());
    // Each ok task by exactly one Submit verdict; the skipped one by none.
    let verdicts: Vec<u32> = hpcagent_orchestrator::store::Reader::open(&run_dir)
        .unwrap()
        .settlements()
        .unwrap()
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(verdicts, [1, 1, 1, 0]);
    let reader = hpcagent_orchestrator::store::Reader::open(&run_dir).unwrap();
    let mut settled: Vec<(String, Option<String>)> = reader
        .tasks()
        .unwrap()
        .into_iter()
        .map(|t| {
            assert_eq!(t.state, "settled", "{}", t.id);
            (t.id, t.status)
        })
        .collect();
    settled.sort();
    let status = |s: &str| Some(s.to_string());
    assert_eq!(
        settled,
        [
            (
                "loop_level_reasoning/shift/shift.c.fp64".to_string(),
                status("ok")
            ),
            (
                "machine_learning/masked/masked.c.fp64".to_string(),
                status("ok")
            ),
            (
                "scientific_computing/dense_linear_algebra/product/product.c.fp64".to_string(),
                status("ok")
            ),
            (
                "scientific_computing/sparse_linear_algebra/spprod/spprod.c.fp64".to_string(),
                status("skipped")
            ),
        ]
    );
}

/// A run directory on a memory filesystem is refused before anything of
/// the run is written: no run directory, no lock, no plan.
#[test]
fn a_run_on_a_memory_filesystem_is_refused_before_anything_is_written() {
    let shm = tempfile::tempdir_in("/dev/shm").expect("/dev/shm, a tmpfs on Linux");
    let out = hpcagent()
        .args(["up", "--env", example("local.env").to_str().unwrap()])
        .args(["--set", "KERNELS=gemm", "--set"])
        .arg(format!("RUN_ROOT={}", shm.path().display()))
        .current_dir(common::repo())
        .output()
        .unwrap();
    let left: Vec<_> = std::fs::read_dir(shm.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let pass =
        !out.status.success() && stderr(&out).contains("memory filesystem") && left.is_empty();
    common::suite::record(
        "hostile",
        "up: RUN_ROOT on a memory filesystem",
        "refused, nothing written",
        &format!(
            "{:?}, left {left:?}",
            stderr(&out).lines().last().unwrap_or("")
        ),
        pass,
    );
    assert!(pass, "{}\nleft: {left:?}", stderr(&out));
}

/// The results store deleted while a campaign runs (SQLite goes on writing
/// to the deleted file without an error): `up` notices, stops within a
/// minute naming the store, and offers no `--resume` that cannot work.
#[test]
fn a_store_deleted_mid_campaign_stops_up_naming_the_store() {
    let root = tempfile::tempdir().unwrap();
    // An agent that thinks for a long time: the campaign is mid-way.
    let mut up = command_campaign(hpcagent(), "gemm", "sleep 600", root.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let run_dir = loop {
        let leased = std::fs::read_dir(root.path())
            .ok()
            .and_then(|mut dirs| dirs.next())
            .map(|d| d.unwrap().path())
            .filter(|dir| {
                hpcagent_orchestrator::store::Reader::open(dir)
                    .map(|r| r.attempts().unwrap_or_default())
                    .is_ok_and(|a| !a.is_empty())
            });
        if let Some(dir) = leased {
            break dir;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "no attempt started"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    for file in ["results.sqlite", "results.sqlite-wal", "results.sqlite-shm"] {
        let _ = std::fs::remove_file(run_dir.join(file));
    }
    let deleted = std::time::Instant::now();
    let status = loop {
        if let Some(status) = up.try_wait().unwrap() {
            break Some(status);
        }
        if deleted.elapsed() > std::time::Duration::from_secs(60) {
            up.kill().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let took = deleted.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut up.stderr.take().unwrap(), &mut err).unwrap();
    let store = run_dir.join("results.sqlite");
    let named = format!("{} was deleted while the campaign ran", store.display());
    let pass = status.is_some_and(|s| s.code() == Some(1))
        && err.contains(&named)
        && err.contains("cannot be resumed")
        && !err.contains("--resume");
    common::suite::record(
        "hostile",
        "up: the results store deleted mid-campaign",
        "exit 1 within 60 s, naming the store",
        &format!("{status:?} after {took:.1?}"),
        pass,
    );
    assert!(pass, "{status:?} after {took:?}:\n{err}");
}

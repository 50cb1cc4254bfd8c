//! `hpcagent submit` against the real local Slurm (scripts/local-slurm): the job
//! runs, and the plan it writes names the nodes Slurm gave it.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    example, hpcagent, job_field, read_plan, require_slurm, stderr, stdout, wait_for_job,
};
use serde_json::Value;

/// Submits `examples/local.env` with extra `--set` overrides into a fresh
/// RUN_ROOT; returns the job id, the run directory and the temp dir holding it.
/// The campaign is one kernel: these tests are about the job, not the grading.
fn submit(sets: &[&str], sbatch_args: &[&str]) -> (String, std::path::PathBuf, tempfile::TempDir) {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    let env = example("local.env");
    let mut cmd = hpcagent();
    cmd.args([
        "submit",
        "--env",
        env.to_str().unwrap(),
        "--set",
        "KERNELS=gemm",
    ])
    .arg("--set")
    .arg(format!("RUN_ROOT={}", root.path().display()))
    .current_dir(common::repo());
    for set in sets {
        cmd.args(["--set", set]);
    }
    if !sbatch_args.is_empty() {
        cmd.arg("--").args(sbatch_args);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "submit failed: {}", stderr(&out));
    let text = stdout(&out);
    let job = text
        .lines()
        .find_map(|l| l.strip_prefix("submitted job "))
        .unwrap_or_else(|| panic!("no job id in: {text}"))
        .to_string();
    let run_dir = root.path().join(&job);
    assert!(
        text.contains(&format!("run directory {}", run_dir.display())),
        "{text}"
    );
    (job, run_dir, root)
}

fn hostnames(expr: &str) -> Vec<String> {
    let out = Command::new("scontrol")
        .args(["show", "hostnames", expr])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn submitted_job_writes_a_plan_of_its_own_nodes() {
    let (job, run_dir, _root) = submit(&[], &[]);
    assert_eq!(wait_for_job(&job, Duration::from_secs(120)), "COMPLETED");
    assert_eq!(job_field(&job, "NumNodes").as_deref(), Some("4"));
    let nodelist = job_field(&job, "NodeList").unwrap();
    let plan = read_plan(&run_dir);
    assert_eq!(plan["job_id"], job.as_str());
    assert_eq!(strings(&plan["nodes"]), hostnames(&nodelist));
    let placed: Vec<String> = plan["instances"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| strings(&i["nodes"]))
        .collect();
    assert_eq!(
        placed,
        hostnames(&nodelist),
        "2 agent + 2 judge nodes, one role each"
    );
    // Whole nodes: the job holds all 4 CPUs of each, and the plan uses them.
    assert_eq!(plan["cpus_per_node"], 4);
    // The job's output went into the run directory, next to what submit wrote.
    let log = std::fs::read_to_string(run_dir.join("sbatch.out")).unwrap();
    assert!(
        log.contains(&format!("hpcagent: job {job} on {nodelist}")),
        "{log}"
    );
    assert!(run_dir.join("env.resolved").is_file() && run_dir.join("job.sbatch").is_file());
}

#[test]
fn gpus_requested_are_gpus_planned() {
    // --mem, as sites that share nodes by memory ask of every job: srun
    // inherits it (SLURM_MEM_PER_NODE) unless the executor drops it.
    let (job, run_dir, _root) = submit(&["GPUS_PER_NODE=4", "JUDGES_PER_NODE=2"], &["--mem=3000"]);
    assert_eq!(wait_for_job(&job, Duration::from_secs(120)), "COMPLETED");
    let plan = read_plan(&run_dir);
    assert_eq!(plan["gpus_per_node"], 4);
    let judges: Vec<&Value> = plan["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "judge")
        .collect();
    assert_eq!(judges.len(), 4, "2 judge nodes × 2 judges");
    // Two steps share each judge node, and memory is consumable on the local
    // cluster: a step that held the job's memory would keep the other queued
    // until the campaign ended, and srun says so in the step's log.
    for judge in judges {
        assert_eq!(judge["gpus_per_node"], 2);
        assert!(strings(&judge["srun"]).contains(&"--gres=gpu:2".to_string()));
        let name = judge["name"].as_str().unwrap();
        let srun_log = run_dir.join("roles").join(name).join("srun.log");
        let said = std::fs::read_to_string(&srun_log)
            .unwrap_or_else(|e| panic!("{}: {e}", srun_log.display()));
        assert!(
            !said.contains("step creation temporarily disabled"),
            "{name} waited for another step's resources: {said}"
        );
    }
}

#[test]
fn a_refusal_from_slurm_is_reported_and_leaves_no_job() {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    let env = example("local.env");
    let out = hpcagent()
        .args(["submit", "--env", env.to_str().unwrap(), "--set"])
        .arg(format!("RUN_ROOT={}", root.path().display()))
        .args(["--", "--partition=no-such-partition"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("sbatch") && err.contains("invalid partition"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert!(left.is_empty(), "no run directory without a job: {left:?}");
}

/// A job whose `up` refuses its configuration ends before the campaign
/// has a store: `status` says so, with the refusal from the batch log.
#[test]
fn status_of_a_job_that_never_began_its_campaign_says_why() {
    let (job, run_dir, _root) = submit(&[], &["--export=ALL,HPCAGENT_AGENT_NODES=many"]);
    wait_for_job(&job, Duration::from_secs(120));
    let out = hpcagent()
        .args(["status", run_dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["state"], "never started", "{status:#}");
    assert!(
        status["log_tail"]
            .as_str()
            .is_some_and(|t| t.contains("AGENT_NODES") && t.contains("many")),
        "{status:#}"
    );
}

/// Never two jobs on one run directory: while the job a chain queued to
/// continue the campaign waits, a resume by hand is refused, naming it.
#[test]
fn a_resume_is_refused_while_the_chains_next_job_is_queued() {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("7");
    std::fs::create_dir(&run_dir).unwrap();
    std::fs::copy(example("local.env"), run_dir.join("env.resolved")).unwrap();
    // A held job stands for the successor the drained job submitted.
    let out = Command::new("sbatch")
        .args([
            "--parsable",
            "--hold",
            "--job-name=successor",
            "--wrap",
            "sleep 60",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let queued = stdout(&out).trim().to_string();
    let record = format!(
        "{{\"event\":\"started\",\"job\":\"7\",\"link\":1,\"at\":1.0}}\n\
         {{\"event\":\"ended\",\"job\":\"7\",\"outcome\":\"drained\",\"successor\":\"{queued}\",\"at\":2.0}}\n"
    );
    std::fs::write(run_dir.join("jobs.jsonl"), record).unwrap();
    let refused = hpcagent()
        .args(["submit", "--resume"])
        .arg(&run_dir)
        .current_dir(common::repo())
        .output()
        .unwrap();
    let _ = Command::new("scancel").arg(&queued).status();
    assert!(!refused.status.success(), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains(&format!("job {queued} of this campaign is pending"))
            && stderr(&refused).contains(&format!("scancel {queued} first")),
        "{}",
        stderr(&refused)
    );
}

//! Campaigns on the real local Slurm cluster (scripts/local-slurm): roles as
//! srun steps on distinct nodes, and the faults a campaign must survive —
//! a judge step killed, an agent step killed, the orchestrator killed and
//! resumed, a drain at the time limit and its resume. Each ends with every
//! task settled exactly once, checked in the store. And a role whose step
//! Slurm holds back is cancelled when the campaign ends, and one whose srun
//! Slurm refuses fails the campaign with srun's words.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    assert_fault_survived, assert_settled_exactly_once, attempt_log, example, hpcagent, job_field,
    read_plan, require_slurm, settled, stderr, stdout, suite, wait_for_job, wait_for_settled,
};
use serde_json::Value;

/// Kernels of the fault campaigns: one per track, enough tasks to be
/// interrupted mid-way, few enough for CI (the whole corpus runs locally in
/// campaign_local.rs).
const FAULT_KERNELS: &str = "KERNELS=gemm,atax,jacobi-2d,dot,softmax,s212,histogram";

/// Submits examples/local.env over [`FAULT_KERNELS`] with `sets`; returns the
/// job, its run directory and the directory holding it.
fn submit(sets: &[&str]) -> (String, PathBuf, tempfile::TempDir) {
    let mut all = vec![FAULT_KERNELS];
    all.extend_from_slice(sets);
    submit_example("local.env", &all)
}

fn submit_example(example_name: &str, sets: &[&str]) -> (String, PathBuf, tempfile::TempDir) {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    let env = example(example_name);
    let mut cmd = hpcagent();
    cmd.args(["submit", "--env", env.to_str().unwrap(), "--set"])
        .arg(format!("RUN_ROOT={}", root.path().display()))
        .current_dir(common::repo());
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "submit: {}", stderr(&out));
    let job = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("submitted job "))
        .expect("a job id")
        .to_string();
    let run_dir = root.path().join(&job);
    (job, run_dir, root)
}

fn sbatch_log(run_dir: &Path) -> String {
    std::fs::read_to_string(run_dir.join("sbatch.out")).unwrap_or_default()
}

/// `<job>.<step>` of the step named `name`, if Slurm lists one.
fn find_step(job: &str, name: &str) -> Option<String> {
    let out = Command::new("squeue")
        .args(["-s", "-j", job, "-h", "-o", "%i %j"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(_, n)| n.trim() == name)
        .map(|(id, _)| id.to_string())
}

/// SIGKILL to the step named `name`. The controller has been seen to answer
/// "not found" for a step squeue had just listed, and to refuse a kill it
/// carried out: while squeue still lists the step, retry; once it does not
/// (or lists the role's next step), the kill took.
fn kill_step(job: &str, name: &str) {
    let step = find_step(job, name).unwrap_or_else(|| panic!("no step {name} in job {job}"));
    let mut refusals = Vec::new();
    for _ in 0..5 {
        let out = Command::new("scancel")
            .args(["--ctld", "--signal=KILL", &step])
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        refusals.push(format!("{step}: {}", stderr(&out)));
        std::thread::sleep(Duration::from_secs(1));
        if find_step(job, name).as_deref() != Some(step.as_str()) {
            return;
        }
    }
    panic!("scancel refused every time: {refusals:#?}");
}

/// `hpcagent up --resume` on this machine (the local executor).
fn resume(run_dir: &Path) {
    let out = hpcagent()
        .args(["up", "--resume", run_dir.to_str().unwrap()])
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "resume: {}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains("resuming"), "{}", stderr(&out));
}

/// `hpcagent up` on examples/local.env in a 4-node allocation of its own,
/// into `run_dir`; the caller adds its `--set`s. The bound counts salloc's
/// wait behind the other tests' jobs.
fn up_in_salloc(run_dir: &Path) -> Command {
    let mut up = Command::new("timeout");
    up.args(["900", "salloc", "--nodes=4", "--exclusive", "--quiet"])
        .arg(env!("CARGO_BIN_EXE_hpcagent"))
        .args(["up", "--env"])
        .arg(example("local.env"))
        .arg("--run-dir")
        .arg(run_dir)
        .current_dir(common::repo());
    up
}

/// The text of every attempt's `transcript.jsonl` under `tasks/`.
fn walk_transcripts(dir: &Path) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .flat_map(|task| std::fs::read_dir(task.path()).into_iter().flatten())
        .filter_map(Result::ok)
        .filter_map(|attempt| std::fs::read_to_string(attempt.path().join("transcript.jsonl")).ok())
        .collect()
}

#[test]
fn a_submitted_campaign_runs_its_roles_as_steps_on_distinct_nodes() {
    let (job, run_dir, _root) = submit(&[]);
    assert_eq!(
        wait_for_job(&job, Duration::from_secs(300)),
        "COMPLETED",
        "{}",
        sbatch_log(&run_dir)
    );
    assert_eq!(job_field(&job, "ExitCode").as_deref(), Some("0:0"));
    assert_settled_exactly_once(&run_dir);
    let plan = read_plan(&run_dir);
    let mut nodes = Vec::new();
    for instance in plan["instances"].as_array().unwrap() {
        let name = instance["name"].as_str().unwrap();
        let dir = run_dir.join("roles").join(name);
        assert!(
            dir.join("stdout").is_file() && dir.join("stderr").is_file(),
            "{}",
            dir.display()
        );
        // The role logged from its own node.
        let log = std::fs::read_to_string(dir.join("stderr")).unwrap();
        let node = instance["nodes"][0].as_str().unwrap();
        assert!(log.contains("ready"), "{name}: {log}");
        nodes.push(node.to_string());
    }
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 4, "one role per node: {nodes:?}");
    let log = sbatch_log(&run_dir);
    assert!(log.contains("geometric mean speedup"), "{log}");
    let judge_log = std::fs::read_to_string(run_dir.join("roles/judge-0/stderr")).unwrap();
    assert!(
        judge_log.contains("endpoint=n"),
        "judges registered their node's address: {judge_log}"
    );
}

#[test]
fn a_killed_judge_step_is_restarted_and_every_task_settles_once() {
    let (job, run_dir, _root) = submit(&["REPEATS=2"]);
    wait_for_settled(&run_dir, 3, Duration::from_secs(240));
    kill_step(&job, "judge-0");
    assert_eq!(
        wait_for_job(&job, Duration::from_secs(400)),
        "COMPLETED",
        "{}",
        sbatch_log(&run_dir)
    );
    assert_fault_survived("kill -9 of a judge step (Slurm)", &run_dir);
    let status: Value = serde_json::from_slice(
        &hpcagent()
            .args(["status", run_dir.to_str().unwrap(), "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(status["state"], "finished");
    let log = std::fs::read_to_string(run_dir.join("roles/judge-0/stderr")).unwrap();
    assert!(
        log.matches("judge ready").count() >= 2,
        "judge-0 was restarted: {log}"
    );
}

#[test]
fn a_killed_agent_step_loses_its_leases_to_others_and_every_task_settles_once() {
    let (job, run_dir, _root) = submit(&["REPEATS=2", "LEASE_SECONDS=10"]);
    wait_for_settled(&run_dir, 3, Duration::from_secs(240));
    kill_step(&job, "agent-0");
    assert_eq!(
        wait_for_job(&job, Duration::from_secs(400)),
        "COMPLETED",
        "{}",
        sbatch_log(&run_dir)
    );
    assert_fault_survived("kill -9 of an agent step (Slurm)", &run_dir);
    let log = std::fs::read_to_string(run_dir.join("roles/agent-0/stderr")).unwrap();
    assert!(
        log.matches("agent ready").count() >= 2,
        "agent-0 was restarted: {log}"
    );
    let outcomes = attempt_log(&run_dir);
    assert!(
        outcomes.iter().any(|o| o["outcome"] == "expired"),
        "the killed agent's leases expired, and the attempts' log says so: {outcomes:?}"
    );
}

#[test]
fn a_killed_orchestrator_is_resumed_and_every_task_settles_once() {
    let (job, run_dir, _root) = submit(&["REPEATS=2"]);
    wait_for_settled(&run_dir, 3, Duration::from_secs(240));
    let endpoint: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("orchestrator.json")).unwrap())
            .unwrap();
    let pid = endpoint["pid"].as_u64().unwrap();
    assert!(
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let state = wait_for_job(&job, Duration::from_secs(120));
    assert_ne!(state, "COMPLETED", "the job ends with its orchestrator");
    let (done, total) = settled(&run_dir);
    assert!(done < total, "killed before the end ({done}/{total})");
    resume(&run_dir);
    assert_fault_survived("kill -9 of the orchestrator, then --resume", &run_dir);
}

#[test]
fn usr1_drains_the_job_and_a_resume_finishes_the_rest() {
    let (job, run_dir, _root) = submit(&["REPEATS=2"]);
    wait_for_settled(&run_dir, 3, Duration::from_secs(240));
    let ok = Command::new("scancel")
        .args(["--signal=USR1", "--batch", &job])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    // Exit code 4: drained with work left (0 is kept for every task settled).
    assert_eq!(
        wait_for_job(&job, Duration::from_secs(200)),
        "FAILED",
        "{}",
        sbatch_log(&run_dir)
    );
    assert_eq!(job_field(&job, "ExitCode").as_deref(), Some("4:0"));
    let log = sbatch_log(&run_dir);
    assert!(
        log.contains("drained; continue with: hpcagent submit --resume"),
        "{log}"
    );
    let status: Value = serde_json::from_slice(
        &hpcagent()
            .args(["status", run_dir.to_str().unwrap(), "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(status["state"], "drained");
    let (done, total) = settled(&run_dir);
    assert!(done < total, "drained before the end ({done}/{total})");
    // The rest in a new job, in the same run directory.
    let out = hpcagent()
        .args(["submit", "--resume", run_dir.to_str().unwrap()])
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "submit --resume: {}", stderr(&out));
    let again = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("submitted job "))
        .expect("a job id")
        .to_string();
    assert_ne!(again, job);
    let log = || std::fs::read_to_string(run_dir.join(format!("sbatch-{again}.out")));
    assert_eq!(
        wait_for_job(&again, Duration::from_secs(300)),
        "COMPLETED",
        "{:?}",
        log()
    );
    assert!(log().unwrap().contains("resuming"), "{:?}", log());
    assert_fault_survived("USR1 drain, then submit --resume", &run_dir);
}

#[test]
fn llm_agents_on_slurm_talk_to_an_inference_step_that_survives_a_kill() {
    let (job, run_dir, _root) = submit_example("local-vllm.env", &["REPEATS=2"]);
    // Once an agent has talked to the model, the inference step is killed.
    let talked = Instant::now();
    while !walk_transcripts(&run_dir.join("tasks"))
        .iter()
        .any(|t| t.contains("\"reply\""))
    {
        assert!(
            talked.elapsed() < Duration::from_secs(400),
            "no agent talked to the model: {}",
            sbatch_log(&run_dir)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    kill_step(&job, "inference-0");
    let state = wait_for_job(&job, Duration::from_secs(600));
    // A random model's agents rarely submit: the job exits 5 (FAILED) when
    // none of them did, and completes when one did.
    let results = hpcagent_orchestrator::store::Reader::open(&run_dir)
        .unwrap()
        .results()
        .unwrap();
    let expected = match results.iter().all(|r| r.agent_failed()) {
        true => ("FAILED", "5:0"),
        false => ("COMPLETED", "0:0"),
    };
    assert_eq!(
        (
            state.as_str(),
            job_field(&job, "ExitCode").unwrap_or_default().as_str()
        ),
        expected,
        "{}",
        sbatch_log(&run_dir)
    );
    assert_fault_survived("kill -9 of the inference step (Slurm)", &run_dir);
    let plan = read_plan(&run_dir);
    let node_of = |role: &str| -> Vec<String> {
        plan["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["role"] == role)
            .map(|i| i["nodes"][0].as_str().unwrap().to_string())
            .collect()
    };
    let inference = node_of("inference");
    assert_eq!(inference.len(), 1);
    assert!(
        !node_of("agent").contains(&inference[0]) && !node_of("judge").contains(&inference[0]),
        "vLLM has its node to itself: {plan}"
    );
    let log = std::fs::read_to_string(run_dir.join("roles/inference-0/stderr")).unwrap();
    let restarted = log.matches("inference ready").count() >= 2;
    suite::record(
        "fault",
        "kill -9 of the inference step (Slurm)",
        "restarted; every task settled once",
        &format!("restarted: {restarted}"),
        restarted,
    );
    assert!(restarted, "the killed inference step was restarted: {log}");
    let attempts = hpcagent_orchestrator::store::Reader::open(&run_dir)
        .unwrap()
        .attempts()
        .unwrap();
    for a in &attempts {
        assert!(a.tokens > 0 && Path::new(&a.transcript).is_file(), "{a:?}");
        assert!(
            std::fs::read_to_string(&a.transcript)
                .unwrap()
                .contains(&format!("http://{}:", inference[0])),
            "the agent on another node talked to {}: {}",
            inference[0],
            a.transcript
        );
    }
}

/// A campaign in `salloc` whose two judge nodes' CPUs steps of the test
/// hold, so that both judges stay pending sruns. While they wait, `status`
/// must say that Slurm has not started their steps. Then the test frees one
/// node: its judge starts and the campaign finishes with it. The other stays
/// pending to the end, and stopping must cancel its srun, not wait out the
/// grace period for a step that cannot begin until the campaign has ended.
#[test]
fn a_role_slurm_holds_back_says_so_and_is_cancelled_when_the_campaign_ends() {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("run");
    let status = root.path().join("status.json");
    let script = r#"hold() {
    srun --nodes=1 --ntasks=1 --nodelist="$1" --exact --cpus-per-task="$(sinfo -h -n "$1" -o %c)" \
        --job-name=holder sleep 600 &
}
freed=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | tail -2 | head -1)
held=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | tail -1)
echo "freed $freed"
echo "held $held"
hold "$freed"; first=$!
hold "$held"; second=$!
until [ "$(squeue -s -j "$SLURM_JOB_ID" -h -o %j | grep -cx holder)" = 2 ]; do
    kill -0 $first $second || exit 9
    sleep 0.2
done
"$0" up --env "$1" --run-dir "$2" --set KERNELS=gemm &
up=$!
# Both judges wait; once status says so for both (or after 300 tries), free one.
for _ in $(seq 300); do
    if "$0" status --json "$2" > "$3" 2>/dev/null &&
        [ "$(grep -o 'Slurm has not started its step' "$3" | wc -l)" = 2 ]; then
        break
    fi
    sleep 0.2
done
kill $first
wait $up
status=$?
kill $second
exit $status"#;
    // The bound counts salloc's wait behind the other tests' 4-node jobs
    // (the vLLM one may take up to 600 s), as `wait_for_job`'s do.
    let out = Command::new("timeout")
        .args(["900", "salloc", "--nodes=4", "--exclusive", "--quiet"])
        .args(["bash", "-c", script, env!("CARGO_BIN_EXE_hpcagent")])
        .arg(example("local.env"))
        .arg(&run_dir)
        .arg(&status)
        .current_dir(common::repo())
        .output()
        .unwrap();
    let said = stdout(&out);
    assert!(out.status.success(), "{said}\n{}", stderr(&out));
    assert_settled_exactly_once(&run_dir);
    let node = |what: &str| {
        said.lines()
            .find_map(|l| l.strip_prefix(&format!("{what} ")))
            .unwrap_or_else(|| panic!("the script names no {what} node: {said}"))
            .to_string()
    };
    let plan = read_plan(&run_dir);
    let judge_on = |node: &str| -> String {
        let on: Vec<&Value> = plan["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["nodes"][0] == node)
            .collect();
        assert!(
            on.len() == 1 && on[0]["role"] == "judge",
            "the test needs a lone judge on each of the last two nodes: {plan}"
        );
        on[0]["name"].as_str().unwrap().to_string()
    };
    let (freed, held) = (judge_on(&node("freed")), judge_on(&node("held")));

    // While they waited, `status` said why, for each.
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap_or_default())
        .unwrap_or(Value::Null);
    for name in [&freed, &held] {
        let role = seen["roles"]
            .as_array()
            .and_then(|roles| roles.iter().find(|r| r["instance"] == name.as_str()));
        assert!(
            role.is_some_and(|r| r["state"] == "launching"
                && r["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("Slurm has not started its step"))),
            "status did not say why {name} waited: {seen}"
        );
    }
    // The freed node's judge started once its CPUs were free.
    let events = hpcagent_orchestrator::store::Reader::open(&run_dir)
        .unwrap()
        .events()
        .unwrap();
    let ready = |name: &str| {
        events
            .iter()
            .any(|e| e.instance == name && e.kind == "ready")
    };
    assert!(
        ready(&freed),
        "{freed} never started once its node was free"
    );
    assert!(!ready(&held), "{held} ran on a node the test held");

    let srun_log = std::fs::read_to_string(run_dir.join("roles").join(&held).join("srun.log"))
        .unwrap_or_default();
    // srun says "Cancelled pending job step with signal 15" before it has
    // retried, "Cancelled pending step for job J" after; or it ignores the
    // TERM while it retries, and `up` kills it. Before the executor sent
    // TERM, neither happened: srun waited out two grace periods.
    let said_up = stderr(&out);
    assert!(
        srun_log.contains("Cancelled pending")
            || said_up.contains(&format!(
                "{held}: srun ignored TERM while it waited; killing it"
            )),
        "{held}'s srun was not cancelled while pending: {srun_log}\n{said_up}"
    );
    assert!(
        said_up.contains(&format!("{held}: Slurm never started its step")),
        "the campaign did not say why {held} never ran: {said_up}"
    );
}

#[test]
fn a_role_whose_srun_is_refused_fails_the_campaign_with_srun_s_words() {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    // A valid EDF, on a Slurm without the Container Engine: srun refuses
    // `--environment` before any step exists, so the roles' own logs stay
    // empty and only srun.log says why. It mounts what the roles read (the
    // run directory, the checkout's corpus and skills), as `up` checks.
    let edf = root.path().join("roles.toml");
    let (runs, checkout) = (root.path().display(), common::repo().display());
    std::fs::write(
        &edf,
        format!(
            "image = \"docker://debian:12\"\nmounts = [\"${{HOME}}:${{HOME}}\", \
             \"{runs}:{runs}\", \"{checkout}:{checkout}\"]\n"
        ),
    )
    .unwrap();
    let out = up_in_salloc(&root.path().join("run"))
        .args(["--set", "KERNELS=gemm", "--set"])
        .arg(format!("ROLE_CE_ENV={}", edf.display()))
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !out.status.success(),
        "the campaign ran without its roles: {said}"
    );
    let report = said
        .split_once("failed for good")
        .map(|(_, report)| report)
        .unwrap_or_else(|| panic!("no role failed for good: {said}"));
    assert!(
        report.contains("srun.log:") && report.contains("unrecognized option '--environment"),
        "the failure does not quote srun: {said}"
    );
    // The steps were given the EDF rendered into the run directory, its
    // variables expanded: the engine expands them only as a preview.
    let rendered = root.path().join("run/edf/roles.toml");
    let text = std::fs::read_to_string(&rendered).unwrap();
    let home = std::env::var("HOME").unwrap();
    assert!(
        text.contains(&format!("{home}:{home}")) && !text.contains("${"),
        "{text}"
    );
    let plan = read_plan(&root.path().join("run"));
    let edfs: Vec<&str> = plan["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["edf"].as_str())
        .collect();
    assert!(!edfs.is_empty(), "{plan}");
    assert!(
        edfs.iter().all(|e| Path::new(e) == rendered),
        "the steps name {edfs:?}"
    );
}

#[test]
fn a_judge_whose_oracle_cannot_run_ends_the_campaign_at_once() {
    require_slurm();
    let root = tempfile::tempdir().unwrap();
    // Inside a job `up` does not look for the oracle itself (the judges'
    // nodes and images may differ from its own): the judges refuse, and
    // are not launched again.
    let out = up_in_salloc(&root.path().join("run"))
        .args(["--set", "KERNELS=gemm,atax"])
        .env("HPCAGENT_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{said}");
    let report = said
        .split_once("failed for good")
        .map(|(_, report)| report)
        .unwrap_or_else(|| panic!("no judge failed for good: {said}"));
    assert!(
        report.contains("refuses to run on this node")
            && report.contains("HPCAGENT_PYTHON=/nonexistent/python3")
            && report.contains("NumPy"),
        "the campaign does not say why: {said}"
    );
    assert!(!report.contains("restarted"), "launched again: {said}");
    let store = hpcagent_orchestrator::store::Reader::open(&root.path().join("run")).unwrap();
    let tasks = store.tasks().unwrap();
    assert_eq!(tasks.len(), 2);
    assert!(
        tasks.iter().all(|t| t.attempts == 0),
        "a task was leased without a judge: {tasks:?}"
    );
}

#[test]
fn a_campaign_longer_than_its_time_limit_continues_in_a_chain_of_jobs() {
    // 12 tasks of 20 s each for one agent: about four minutes of work for
    // jobs of three (less the drain window), so at least two jobs.
    let (first, run_dir, _root) = submit_example(
        "local.env",
        &[
            "KERNELS=dot,norm2,argmax,prefix-sum,gelu,softmax,s000,s111,s1112,s212,s242,histogram",
            "AGENT_NODES=1",
            "AGENTS_PER_NODE=1",
            "JUDGE_NODES=1",
            "AGENT_POLICY=command",
            "AGENT_COMMAND=sleep 20",
            "TIME_LIMIT=00:03:00",
            "DRAIN_SECONDS=45",
            "MAX_JOBS=6",
        ],
    );
    let status = || -> Value {
        let out = hpcagent()
            .args(["status", run_dir.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    };
    // Nobody resubmits: the chain's last job ends the campaign.
    let start = Instant::now();
    let jobs = loop {
        let s = status();
        assert_ne!(s["state"], "never started", "{s:#}");
        let jobs = s["jobs"].as_array().cloned().unwrap_or_default();
        if jobs.last().is_some_and(|j| j["state"] != "drained")
            && s["running"] == false
            && s["state"] == "finished"
        {
            break jobs;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1500),
            "the chain did not finish: {s:#}"
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let ids: Vec<&str> = jobs.iter().map(|j| j["job"].as_str().unwrap()).collect();
    assert!(
        (2..=6).contains(&jobs.len()),
        "{} jobs: {jobs:?}",
        jobs.len()
    );
    assert_eq!(ids[0], first);
    for (i, job) in jobs.iter().enumerate() {
        assert_eq!(job["link"], i + 1, "{jobs:?}");
        let want = if i + 1 == jobs.len() {
            "finished"
        } else {
            "drained"
        };
        assert_eq!(job["state"], want, "{jobs:?}");
    }
    // One job at a time: each started after its predecessor's campaign ended.
    let record = std::fs::read_to_string(run_dir.join("jobs.jsonl")).unwrap();
    let events: Vec<Value> = record
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |event: &str, job: &str| {
        events
            .iter()
            .find(|e| e["event"] == event && e["job"] == job)
            .and_then(|e| e["at"].as_f64())
            .unwrap_or_else(|| panic!("no {event} of {job}: {record}"))
    };
    for pair in ids.windows(2) {
        let ended = events
            .iter()
            .find(|e| e["event"] == "ended" && e["job"] == pair[0])
            .unwrap();
        assert_eq!(ended["successor"], pair[1], "{record}");
        assert!(at("started", pair[1]) > at("ended", pair[0]), "{record}");
    }
    // `sleep 20` never submits: every task's agent failed, which ends the
    // chain's last job with exit 5 (FAILED), not as a campaign that worked.
    let last = ids[ids.len() - 1];
    let state = wait_for_job(last, Duration::from_secs(120));
    assert_eq!(
        (
            state.as_str(),
            job_field(last, "ExitCode").unwrap_or_default().as_str()
        ),
        ("FAILED", "5:0"),
        "{}",
        sbatch_log(&run_dir)
    );
    assert_settled_exactly_once(&run_dir);
    assert_fault_survived("time limit, continued by a chain of jobs", &run_dir);
}

#[test]
fn judges_on_a_partition_of_their_own_run_in_a_heterogeneous_job() {
    let (job, run_dir, _root) = submit(&["AGENT_NODES=1", "JUDGE_NODES=1", "JUDGE_PARTITION=cpu"]);
    assert_eq!(
        wait_for_job(&job, Duration::from_secs(400)),
        "COMPLETED",
        "{}",
        sbatch_log(&run_dir)
    );
    assert_eq!(job_field(&job, "HetJobId").as_deref(), Some(job.as_str()));
    let plan = read_plan(&run_dir);
    let components = plan["components"].as_array().expect("components");
    assert_eq!(components.len(), 2, "{plan:#}");
    assert_eq!(components[1]["partition"], "cpu");
    for instance in plan["instances"].as_array().unwrap() {
        let nodes: Vec<&str> = instance["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        let srun = instance["srun"].as_array().unwrap();
        if instance["role"] == "judge" {
            // The cpu partition is the local cluster's upper half.
            assert!(nodes.iter().all(|n| ["n3", "n4"].contains(n)), "{nodes:?}");
            assert!(srun.iter().any(|a| a == "--het-group=1"), "{srun:?}");
        } else {
            assert!(srun.iter().any(|a| a == "--het-group=0"), "{srun:?}");
        }
    }
    assert_settled_exactly_once(&run_dir);
}

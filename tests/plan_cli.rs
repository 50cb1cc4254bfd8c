//! `hpcagent config`, `plan` and `submit --dry-run` as a user runs them, and
//! how the commands that print end when their reader goes away.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{example, hpcagent, stderr, stdout, suite};
use serde_json::Value;

fn plan_json(args: &[&str]) -> Value {
    let out = hpcagent()
        .arg("plan")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn beverin_plan_covers_the_four_nodes_as_configured() {
    let env = example("beverin.env");
    let plan = plan_json(&[
        "--env",
        env.to_str().unwrap(),
        "--nodelist",
        "nid[001-004]",
        "--gpus-per-node",
        "4",
    ]);
    let instances = plan["instances"].as_array().unwrap();
    let used: BTreeSet<&str> = instances
        .iter()
        .flat_map(|i| {
            i["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap())
        })
        .collect();
    assert_eq!(
        used,
        BTreeSet::from(["nid001", "nid002", "nid003", "nid004"])
    );
    let roles: Vec<(&str, &str, u64)> = instances
        .iter()
        .map(|i| {
            (
                i["role"].as_str().unwrap(),
                i["nodelist"].as_str().unwrap(),
                i["gpus_per_node"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("inference", "nid[001-002]", 4),
            ("agent", "nid003", 0),
            ("judge", "nid004", 4)
        ]
    );
    assert_eq!(instances[1]["workers"], 4);
    assert_eq!(instances[0]["parallelism"]["tensor_parallel"], 4);
    assert_eq!(instances[0]["parallelism"]["pipeline_parallel"], 2);
    assert_eq!(plan["site"], "beverin");
    let srun: Vec<&str> = instances[0]["srun"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        srun.contains(&"--job-name=inference-0")
            && srun.contains(&"--environment=hpcagent-vllm-mi300a")
            && srun.contains(&"--ntasks=2")
    );
}

#[test]
fn a_multi_node_replica_shows_its_vllm_lines_as_they_will_run() {
    let env = example("beverin.env");
    let out = hpcagent()
        .args([
            "plan",
            "--env",
            env.to_str().unwrap(),
            "--nodelist",
            "nid[001-004]",
        ])
        .args(["--gpus-per-node", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in\n{text}"))
            .to_string()
    };
    let rank0 = line("inference-0 rank 0 on nid001: vllm serve ");
    let rank1 = line("inference-0 rank 1 on nid002: vllm serve ");
    for rank in [&rank0, &rank1] {
        assert!(
            rank.contains("--tensor-parallel-size 4 --pipeline-parallel-size 2 --distributed-executor-backend mp --nnodes 2")
                && rank.contains("--master-addr nid001 --master-port 8100"),
            "{rank}"
        );
    }
    assert!(
        rank0.contains("--node-rank 0") && !rank0.contains("--headless"),
        "{rank0}"
    );
    assert!(
        rank1.contains("--node-rank 1") && rank1.contains("--headless"),
        "{rank1}"
    );
    assert!(
        rank0.ends_with("--tool-call-parser qwen3_coder"),
        "VLLM_EXTRA_ARGS last: {rank0}"
    );
}

/// Writes `text` as an env file and runs `hpcagent <command> --env <file>` with a
/// stand-in sbatch on PATH that records any call: nothing may be launched.
/// The line of `env` that sets `key` (1-based), as an error names it.
fn line_of(env: &Path, key: &str) -> usize {
    let text = std::fs::read_to_string(env).unwrap();
    1 + text
        .lines()
        .position(|l| l.starts_with(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{} sets no {key}", env.display()))
}

fn refused(command: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("bad.env");
    std::fs::write(&env, text).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let marker = dir.path().join("sbatch-was-called");
    let fake = bin.join("sbatch");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\ntouch {}\necho 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = hpcagent()
        .args([command, "--env", env.to_str().unwrap()])
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("NOT_SET_ANYWHERE")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{command} should exit 2: {}",
        stderr(&out)
    );
    assert!(
        !marker.exists(),
        "{command} called sbatch despite the errors"
    );
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["bad.env", "bin"], "{command} wrote before refusing");
    stderr(&out).replace(&format!("{}:", env.display()), "bad.env:")
}

#[test]
fn malformed_env_files_fail_with_file_line_and_key() {
    let cases = [
        (
            "AGENT_NODE=2\n",
            "bad.env:1: AGENT_NODE: unknown key; did you mean AGENT_NODES?",
        ),
        (
            "# nodes\nAGENT_NODES=-1\n",
            "bad.env:2: AGENT_NODES: -1 is negative; a count must be 0 or more",
        ),
        (
            "AGENT_NODES=1\nJUDGE_NODES 2\n",
            "bad.env:2: JUDGE_NODES: expected KEY=value (this line has no '=')",
        ),
        (
            "RUN_ROOT=${NOT_SET_ANYWHERE}/runs\n",
            "bad.env:1: RUN_ROOT: ${NOT_SET_ANYWHERE} is not set (give a default with ${NOT_SET_ANYWHERE:-value})",
        ),
        (
            "AGENT_NODES=two\n",
            "bad.env:1: AGENT_NODES: \"two\" is not a whole number",
        ),
        // Written to env.resolved as is, the rest would be a setting of its own.
        (
            "# a name\nJOB_NAME=\"x\\nAGENT_POLICY=command\"\n",
            "bad.env:2: JOB_NAME: the value holds a line break ('\\n'); a value is one line of text",
        ),
    ];
    let mut wrong = Vec::new();
    for command in ["plan", "submit", "config", "up"] {
        for (text, expected) in cases {
            let err = refused(command, text);
            let pass =
                err.contains(&format!("error: {expected}")) && err.contains("nothing was launched");
            let case = format!("{command} {}", text.trim().replace('\n', "; "));
            let got = err
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            suite::record("env", &case, "file:line: KEY, exit 2", got, pass);
            if !pass {
                wrong.push(format!("{command} with {text:?}: {err}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn impossible_plans_fail_at_the_key_with_the_numbers() {
    let err = refused(
        "submit",
        "SITE=alps\nINFERENCE_NODES=1\nTENSOR_PARALLEL_SIZE=3\nVLLM_MODEL=m\n",
    );
    let pass =
        err.contains("bad.env:3: TENSOR_PARALLEL_SIZE: 3 does not divide the 4 GPUs of a node");
    suite::record(
        "env",
        "submit: TENSOR_PARALLEL_SIZE=3 on 4-GPU nodes",
        "file:line: KEY, exit 2",
        err.lines().next().unwrap_or(""),
        pass,
    );
    assert!(pass, "{err}");

    let env = example("beverin.env");
    let out = hpcagent()
        .args([
            "plan",
            "--env",
            env.to_str().unwrap(),
            "--nodelist",
            "nid[001-003]",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let pass = err.contains(&format!(
        "beverin.env:{}: JUDGE_NODES: the plan needs 4 nodes (inference 2 + agents 1 + judges 1) but the allocation has 3 (nid[001-003])",
        line_of(&env, "JUDGE_NODES")
    ));
    suite::record(
        "env",
        "plan: 4 nodes needed, 3 given",
        "file:line: KEY, exit 2",
        err.lines().next().unwrap_or(""),
        pass,
    );
    assert!(pass, "{err}");
}

#[test]
fn config_shows_each_value_and_its_origin() {
    let env = example("beverin.env");
    let out = hpcagent()
        .args([
            "config",
            "--env",
            env.to_str().unwrap(),
            "--set",
            "JUDGE_NODES=2",
        ])
        .env("HPCAGENT_AGENTS_PER_NODE", "8")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap()
            .to_string()
    };
    assert!(
        line("GPUS_PER_NODE").ends_with("site profile beverin"),
        "{text}"
    );
    let at = format!("beverin.env:{}", line_of(&env, "AGENT_NODES"));
    assert!(line("AGENT_NODES").contains(&at), "{text}");
    assert!(
        line("AGENTS_PER_NODE").ends_with("environment HPCAGENT_AGENTS_PER_NODE"),
        "{text}"
    );
    assert!(
        line("JUDGE_NODES").ends_with("command line --set JUDGE_NODES=2"),
        "{text}"
    );
    assert!(line("JUDGES_PER_NODE").ends_with("default"), "{text}");
}

#[test]
fn a_printing_command_whose_reader_went_away_ends_quietly() {
    // `hpcagent config | head -1`, with the reader gone before the first line.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let env = example("beverin.env");
    let out = hpcagent()
        .args(["config", "--env", env.to_str().unwrap()])
        .stdout(writer)
        .output()
        .unwrap();
    assert!(
        !stderr(&out).contains("panicked"),
        "{:?}: {}",
        out.status,
        stderr(&out)
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGPIPE),
        "{:?}",
        out.status
    );
}

#[test]
fn a_bench_whose_reader_went_away_ends_quietly_after_measuring() {
    // `hpcagent bench dispatch | head -1`: the bench serves gRPC while it
    // measures, so SIGPIPE's default comes back only for the printing.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let run_dir = tempfile::tempdir().unwrap();
    let out = hpcagent()
        .args([
            "bench",
            "dispatch",
            "--agents",
            "20",
            "--tasks",
            "200",
            "--no-peers",
        ])
        .arg("--run-dir")
        .arg(run_dir.path().join("run"))
        .stdout(writer)
        .output()
        .unwrap();
    assert!(
        !stderr(&out).contains("panicked"),
        "{:?}: {}",
        out.status,
        stderr(&out)
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGPIPE),
        "{:?}: {}",
        out.status,
        stderr(&out)
    );
}

/// A site as an operator sets it up once the images are built: a
/// `$SCRATCH` holding the container images the site profiles name, and
/// the EDFs installed with this checkout mounted (CSCS advises against
/// mounting `$HOME`, where checkouts often are: the shipped EDFs mount
/// `$SCRATCH` only, and a checkout elsewhere is mounted by its operator).
struct Site {
    scratch: tempfile::TempDir,
    edf: tempfile::TempDir,
}

fn site_with_images() -> Site {
    let scratch = tempfile::tempdir().unwrap();
    let images = scratch.path().join("hpcagent/images");
    std::fs::create_dir_all(&images).unwrap();
    for site in ["gh200", "mi300a"] {
        for role in ["vllm", "roles"] {
            std::fs::write(images.join(format!("hpcagent-{role}-{site}.sqsh")), "").unwrap();
        }
    }
    let edf = tempfile::tempdir().unwrap();
    let checkout = common::repo().display().to_string();
    for entry in std::fs::read_dir(common::repo().join("containers/edf")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap().replacen(
            "mounts = [\n",
            &format!("mounts = [\n    \"{checkout}:{checkout}\",\n"),
            1,
        );
        std::fs::write(edf.path().join(path.file_name().unwrap()), text).unwrap();
    }
    Site { scratch, edf }
}

impl Site {
    fn command(&self) -> Command {
        let mut command = hpcagent();
        command
            .env("SCRATCH", self.scratch.path())
            .env("EDF_PATH", self.edf.path());
        command
    }
}

/// The shipped EDFs mount `$SCRATCH` only: a checkout outside it (here,
/// as in `$HOME`) holds the corpus and skills pages no role step could
/// read, and `submit` refuses before the job waits in the queue.
#[test]
fn a_checkout_no_edf_mounts_is_refused_before_the_queue() {
    let env = example("alps.env");
    let site = site_with_images();
    let out = hpcagent()
        .args(["submit", "--env", env.to_str().unwrap(), "--dry-run"])
        .env("SCRATCH", site.scratch.path())
        .env("EDF_PATH", common::repo().join("containers/edf"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for what in ["the corpus", "the skills pages"] {
        assert!(
            err.contains(&format!("mounts no directory holding {what}")),
            "{err}"
        );
    }
    assert!(!err.contains("the run directory"), "{err}");
    // Mounted by the operator, the same job would be submitted.
    let out = site
        .command()
        .args(["submit", "--env", env.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn submit_dry_run_renders_flags_from_the_env_file() {
    let env = example("beverin.env");
    let site = site_with_images();
    let out = site
        .command()
        .args([
            "submit",
            "--env",
            env.to_str().unwrap(),
            "--dry-run",
            "--",
            "--reservation=r1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let command = text.lines().find(|l| l.starts_with("sbatch ")).unwrap();
    let output = format!(
        "--output={}/hpcagent-runs/%j/sbatch.out",
        site.scratch.path().display()
    );
    for flag in [
        "--nodes=4",
        "--exclusive",
        "--gpus-per-node=4",
        "--time=04:00:00",
        "--partition=mi300",
        "--job-name=hpcagent",
        &output,
        "--signal=B:USR1@600",
        "--reservation=r1",
    ] {
        assert!(
            command.split(' ').any(|w| w == flag),
            "{flag} missing from: {command}"
        );
    }
    assert!(
        text.contains("#!/bin/bash") && text.contains("up --env \"$RUN_DIR/env.resolved\""),
        "{text}"
    );
}

#[test]
fn submit_resume_continues_the_run_directory_in_a_new_job() {
    let run = tempfile::tempdir().unwrap();
    std::fs::write(
        run.path().join("env.resolved"),
        "AGENT_NODES=3\nJUDGE_NODES=1\n",
    )
    .unwrap();
    let out = hpcagent()
        .args([
            "submit",
            "--resume",
            run.path().to_str().unwrap(),
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let command = text.lines().find(|l| l.starts_with("sbatch ")).unwrap();
    let output = format!("--output={}/sbatch-%j.out", run.path().display());
    for flag in ["--nodes=4", output.as_str()] {
        assert!(
            command.split(' ').any(|w| w == flag),
            "{flag} missing from: {command}"
        );
    }
    assert!(
        text.contains(&format!("RUN_DIR={}\n", run.path().display()))
            && text.contains("up --resume \"$RUN_DIR\""),
        "{text}"
    );

    let empty = tempfile::tempdir().unwrap();
    let out = hpcagent()
        .args(["submit", "--resume", empty.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not a run directory"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_missing_container_environment_is_refused_before_sbatch() {
    let err = refused(
        "submit",
        "SITE=alps\nINFERENCE_NODES=1\nVLLM_MODEL=m\nRUN_ROOT=/tmp/hpcagent-plan-cli\n",
    );
    assert!(
        err.contains("INFERENCE_CE_ENV: no EDF named hpcagent-vllm-gh200 in EDF_PATH or ~/.edf"),
        "{err}"
    );
    assert!(
        err.contains("ROLE_CE_ENV: no EDF named hpcagent-roles-gh200"),
        "{err}"
    );
}

#[test]
fn status_reads_the_store_when_the_orchestrator_port_hangs_up() {
    // A port that accepts and closes at once: an orchestrator on its way
    // out, or another process on its old port. gRPC's next write then meets
    // a closed socket, which must be an error `status` reports, not a
    // SIGPIPE that ends it without a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for connection in listener.incoming() {
            drop(connection);
        }
    });
    let run_dir = tempfile::tempdir().unwrap();
    let endpoint =
        serde_json::json!({"address": format!("http://{address}"), "observer_token": "t"});
    std::fs::write(
        run_dir.path().join("orchestrator.json"),
        endpoint.to_string(),
    )
    .unwrap();
    for _ in 0..5 {
        let out = hpcagent()
            .args(["status", run_dir.path().to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            None,
            "{:?}: {}",
            out.status,
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("the orchestrator does not answer"),
            "{}",
            stderr(&out)
        );
    }
}

/// Under the Container Engine a step's environment is the image's: a role
/// must grade and prompt with the corpus and skills the campaign was
/// planned with (plan.json), and refuse when those are not visible, rather
/// than take whatever `HPCAGENT_BENCHMARKS`/`HPCAGENT_SKILLS` the image sets.
#[test]
fn roles_take_corpus_and_skills_from_the_plan_and_refuse_when_not_visible() {
    let run = tempfile::tempdir().unwrap();
    let planned = run.path().join("not-mounted");
    std::fs::copy(example("local.env"), run.path().join("env.resolved")).unwrap();
    let out = hpcagent()
        .env("HPCAGENT_BENCHMARKS", planned.join("benchmarks"))
        .env("HPCAGENT_SKILLS", planned.join("skills"))
        .args(["plan", "--env"])
        .arg(example("local.env"))
        .args(["--nodelist", "n[1-4]", "--run-dir"])
        .arg(run.path())
        .arg("--write")
        .arg(run.path().join("plan.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("corpus {}", planned.join("benchmarks").display())),
        "{}",
        stdout(&out)
    );
    // The orchestrator's address answers TCP; the roles refuse before any call.
    let orchestrator = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", orchestrator.local_addr().unwrap());
    for (role, instance, missing) in [
        ("judge", "judge-0", planned.join("benchmarks")),
        ("agent", "agent-0", planned.join("skills")),
    ] {
        let out = hpcagent()
            // What an image's environment would say: the repository's copies.
            .env("HPCAGENT_BENCHMARKS", common::repo().join("benchmarks"))
            .env("HPCAGENT_SKILLS", common::repo().join("skills"))
            .env("HPCAGENT_ORCHESTRATOR", &address)
            .env("HPCAGENT_TOKEN", "t")
            .env("HPCAGENT_JUDGE_TOKEN", "j")
            .args(["role", role, "--run-dir"])
            .arg(run.path())
            .args(["--instance", instance])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(78), "{role}: {err}");
        assert!(
            err.contains(&missing.display().to_string()) && err.contains("not visible"),
            "{role}: {err}"
        );
    }
}

/// Judges on a partition of their own: `submit` asks for one heterogeneous
/// job, a component per partition with its own nodes and GPUs, and `plan`
/// runs each role's steps in its component.
#[test]
fn roles_on_other_partitions_make_a_heterogeneous_job() {
    let env = example("beverin.env");
    let sets = [
        "--set",
        "JUDGE_PARTITION=cpu",
        "--set",
        "AGENT_PARTITION=cpu",
    ];
    let site = site_with_images();
    let out = site
        .command()
        .args(["submit", "--env", env.to_str().unwrap(), "--dry-run"])
        .args(sets)
        .args(["--", "--reservation=r1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let command = text.lines().find(|l| l.starts_with("sbatch ")).unwrap();
    let components: Vec<&str> = command.split(" : ").collect();
    assert_eq!(components.len(), 2, "{command}");
    // Beverin: a two-node replica on mi300; an agent and a judge node on cpu.
    let (first, second) = (components[0], components[1]);
    for flag in [
        "--nodes=2",
        "--gpus-per-node=4",
        "--partition=mi300",
        "--signal=B:USR1@600",
        "--reservation=r1",
    ] {
        assert!(first.split(' ').any(|w| w == flag), "{flag}: {first}");
    }
    for flag in [
        "--nodes=2",
        "--exclusive",
        "--gpus-per-node=4",
        "--partition=cpu",
        "--time=04:00:00",
    ] {
        assert!(second.split(' ').any(|w| w == flag), "{flag}: {second}");
    }
    let out = site
        .command()
        .args(["plan", "--env", env.to_str().unwrap()])
        .args(sets)
        .args(["--nodelist", "nid[001-004]", "--gpus-per-node", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("component 0: partition mi300, 2 node(s): inference")
            && text.contains("component 1: partition cpu, 2 node(s): agent, judge"),
        "{text}"
    );
    let steps: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("srun ") || l.starts_with("env "))
        .collect();
    assert_eq!(steps.len(), 3, "{text}");
    for step in &steps {
        let group = if step.contains("--job-name=inference") {
            0
        } else {
            1
        };
        assert!(step.contains(&format!("--het-group={group}")), "{step}");
    }
    assert!(
        steps
            .iter()
            .any(|s| s.contains("--job-name=judge-0 --het-group=1"))
    );
}

/// What the Container Engine reads holds no variable: `edf install`
/// renders the shipped templates with this shell's paths.
#[test]
fn edf_install_registers_the_templates_with_absolute_paths() {
    let to = tempfile::tempdir().unwrap();
    let out = hpcagent()
        .args(["edf", "install", "--to"])
        .arg(to.path())
        .env("SCRATCH", "/capstor/scratch/cscs/me")
        .env("HOME", "/users/me")
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut names: Vec<String> = std::fs::read_dir(to.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "hpcagent-roles-gh200.toml",
            "hpcagent-roles-mi300a.toml",
            "hpcagent-vllm-gh200.toml",
            "hpcagent-vllm-mi300a.toml"
        ]
    );
    for name in names {
        let text = std::fs::read_to_string(to.path().join(&name)).unwrap();
        assert!(!text.contains('$'), "{name}: {text}");
        assert!(
            text.contains("image = \"/capstor/scratch/cscs/me/hpcagent/images/"),
            "{name}: {text}"
        );
    }
    let unset = hpcagent()
        .args(["edf", "install", "--to"])
        .arg(to.path())
        .env_remove("SCRATCH")
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(!unset.status.success());
    assert!(
        stderr(&unset).contains("${SCRATCH} is not set"),
        "{}",
        stderr(&unset)
    );
}

/// An HPCAgent-Bench checkout is a corpus as it stands: listed with its
/// tracks, levels and ABIs, checked manifest by manifest, and each task
/// described with the prototype a submission must export.
#[test]
fn hpcagent_bench_manifests_are_listed_checked_and_described() {
    let fixtures = common::repo().join("tests/hab-corpus");
    let out = hpcagent()
        .args(["corpus", "list", "--json", "--corpus"])
        .arg(&fixtures)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "loop_level_reasoning/energy/energy",
            "loop_level_reasoning/shift/shift",
            "machine_learning/knobs/knobs",
            "machine_learning/masked/masked",
            "machine_learning/narrow/narrow",
            "scientific_computing/dense_linear_algebra/formula/formula",
            "scientific_computing/dense_linear_algebra/product/product",
            "scientific_computing/sparse_linear_algebra/spcsr/spcsr",
            "scientific_computing/sparse_linear_algebra/spprod/spprod"
        ]
    );
    let spprod = &listed[8];
    assert_eq!(
        (&spprod["track"], &spprod["level"], &spprod["kind"]),
        (
            &Value::from("scientific_computing"),
            &Value::from(3),
            &Value::from("microapp")
        )
    );
    assert_eq!(spprod["presets"], serde_json::json!(["S", "M", "L", "XL"]));

    let task = hpcagent()
        .args(["judge", "task", "spprod", "--language", "c", "--corpus"])
        .arg(&fixtures)
        .output()
        .unwrap();
    assert!(task.status.success(), "{}", stderr(&task));
    assert!(
        stdout(&task).starts_with(
            "void spprod_coo_fp64(const int64_t *restrict S_cols, const int64_t *restrict S_rows, \
             const double *restrict S_vals, double *restrict r, const double *restrict v, \
             int64_t M, int64_t N, int64_t nnz, uint8_t *restrict workspace, int64_t workspace_size);"
        ),
        "{}",
        stdout(&task)
    );
    let text = stdout(&task);
    assert!(
        text.contains("agent time budget: 600 s (level 3)")
            && text.contains("Sparse kernels: the index arrays decide the access pattern.")
            && text.find("Level 3 tasks are whole").unwrap() < text.find("COO products").unwrap(),
        "{text}"
    );

    // A copy with one manifest HPCAgent-Bench's loader would refuse too.
    let copy = tempfile::tempdir().unwrap();
    let shift = copy.path().join("loop_level_reasoning/shift");
    std::fs::create_dir_all(&shift).unwrap();
    for file in ["shift.yaml", "shift_numpy.py"] {
        std::fs::copy(
            fixtures.join("loop_level_reasoning/shift").join(file),
            shift.join(file),
        )
        .unwrap();
    }
    let manifest = std::fs::read_to_string(shift.join("shift.yaml")).unwrap();
    std::fs::write(
        shift.join("tolerant.yaml"),
        format!("{manifest}rtol: 1e-3\n"),
    )
    .unwrap();
    std::fs::copy(
        shift.join("shift_numpy.py"),
        shift.join("tolerant_numpy.py"),
    )
    .unwrap();
    // And one whose reference needs a module no judge's Python has.
    std::fs::write(shift.join("needy.yaml"), &manifest).unwrap();
    let reference = std::fs::read_to_string(shift.join("shift_numpy.py")).unwrap();
    std::fs::write(
        shift.join("needy_numpy.py"),
        format!(
            "import hpcagent_no_such_module.part\n{}",
            reference.replace("def shift", "def needy")
        ),
    )
    .unwrap();
    let check = hpcagent()
        .args(["corpus", "check", "--corpus"])
        .arg(copy.path())
        .output()
        .unwrap();
    assert!(!check.status.success());
    let text = stdout(&check);
    assert!(
        text.contains("REFUSED loop_level_reasoning/shift/tolerant: unknown field `rtol`")
            && text.contains(
                "REFUSED loop_level_reasoning/shift/needy: needs hpcagent_no_such_module.part, which"
            )
            && text.contains("1 of 3 manifests"),
        "{text}"
    );
    let out = tempfile::tempdir().unwrap();
    let needy = hpcagent()
        .args(["judge", "inputs", "needy", "--corpus"])
        .arg(copy.path())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(!needy.status.success());
    assert!(
        stderr(&needy).contains("needs hpcagent_no_such_module.part, which")
            && stderr(&needy).contains("(HPCAGENT_PYTHON)"),
        "{}",
        stderr(&needy)
    );
}

/// An HPCAgent-Bench task's inputs are HPCAgent-Bench's for the same seed:
/// one stream per array, spawned from the seed and round-robined over
/// PCG64, PCG64DXSM and SFC64 (checked here against NumPy directly), index
/// fills for integer arrays, and custom initializers called as it calls them;
/// and its reference is called positionally on copies, its outputs what it
/// returns when it returns them all, else the buffers it changed.
#[test]
fn hpcagent_bench_inputs_are_made_as_hpcagent_bench_makes_them() {
    let fixtures = common::repo().join("tests/hab-corpus");
    let make = |id: &str, seed: &str| {
        let out = tempfile::tempdir().unwrap();
        let made = hpcagent()
            .args([
                "judge",
                "inputs",
                id,
                "--reference",
                "--seed",
                seed,
                "--corpus",
            ])
            .arg(&fixtures)
            .arg("--out")
            .arg(out.path())
            .output()
            .unwrap();
        assert!(made.status.success(), "{id}: {}", stderr(&made));
        out
    };
    let product = make("product", "42");
    let again = make("product", "42");
    let other = make("product", "7");
    let bytes = |dir: &tempfile::TempDir, name: &str| {
        std::fs::read(dir.path().join(format!("{name}.npy"))).unwrap()
    };
    assert_eq!(bytes(&product, "left"), bytes(&again, "left"));
    assert_ne!(bytes(&product, "left"), bytes(&other, "left"));
    // The arrays in declaration order (out, left, right) drew from the
    // seed's children 0, 1, 2 with PCG64, PCG64DXSM, SFC64.
    let check = r#"
import sys, numpy as np
d = sys.argv[1]
kids = np.random.SeedSequence(42).spawn(3)
gens = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64)
for i, (name, shape) in enumerate((("out", (40, 60)), ("left", (40, 50)), ("right", (50, 60)))):
    want = np.random.Generator(gens[i](kids[i])).uniform(-1000.0, 1000.0, size=shape)
    got = np.load(f"{d}/{name}.npy")
    assert got.dtype == np.float64 and np.array_equal(got, want), name
assert np.load(f"{d}/gain.npy").dtype == np.float64 and float(np.load(f"{d}/gain.npy")) == 1.5
assert np.load(f"{d}/steps.npy").dtype == np.int64 and int(np.load(f"{d}/steps.npy")) == 3
# The reference ran on copies: out accumulated, positionally, into expected/.
out, left, right = (np.load(f"{d}/{n}.npy") for n in ("out", "left", "right"))
assert np.allclose(np.load(f"{d}/expected/out.npy"), out + 3 * 1.5 * (left @ right), rtol=1e-12)
"#;
    let python = |script: &str, dir: &Path| {
        let ran = Command::new("python3")
            .args(["-c", script])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            ran.status.success(),
            "{}",
            String::from_utf8_lossy(&ran.stderr)
        );
    };
    python(check, product.path());

    let knobs = make("knobs", "42");
    python(
        r#"
import sys, numpy as np
d = sys.argv[1]
idx = np.load(f"{d}/idx.npy")
assert idx.dtype == np.int32 and sorted(idx) == list(range(8)), idx
q = np.load(f"{d}/q.npy")
assert q.dtype == np.int8 and q.shape == (8, 2) and q.min() >= 0 and q.max() < 2, q
"#,
        knobs.path(),
    );
    // A preset larger than the node is refused before anything is made.
    let out = tempfile::tempdir().unwrap();
    let huge = hpcagent()
        .args(["judge", "inputs", "knobs", "--preset", "XL", "--corpus"])
        .arg(&fixtures)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(!huge.status.success());
    let why = stderr(&huge);
    assert!(
        why.contains("machine_learning/knobs/knobs at XL needs")
            && why.contains("GiB for its inputs and outputs; this node has"),
        "{why}"
    );
    assert!(
        std::fs::read_dir(out.path()).unwrap().next().is_none(),
        "nothing made"
    );
    let spprod = make("spprod", "42");
    python(
        r#"
import sys, numpy as np
d = sys.argv[1]
rows = np.load(f"{d}/S_rows.npy")
assert rows.dtype == np.int64 and rows.shape == (256,) and rows.max() < 64
want = np.random.default_rng(42).integers(0, 64, size=256, dtype=np.int64)
assert np.array_equal(rows, want), "the initializer got default_rng(seed)"
r = np.zeros(64)
np.add.at(r, rows, np.load(f"{d}/S_vals.npy") * np.load(f"{d}/v.npy")[np.load(f"{d}/S_cols.npy")])
assert np.allclose(np.load(f"{d}/expected/r.npy"), r), "the buffer it changed is the output"
"#,
        spprod.path(),
    );
    let energy = make("energy", "42");
    python(
        r#"
import sys, numpy as np
d = sys.argv[1]
x = np.load(f"{d}/x.npy")
total = np.load(f"{d}/expected/total.npy")
assert total.dtype == np.float64 and float(total) == float(np.sum(x * x))
assert float(np.load(f"{d}/expected/peak.npy")) == float(np.max(np.abs(x)))
"#,
        energy.path(),
    );
}

/// A misspelt kernel is refused by `plan` and `submit --dry-run`, before
/// anything reaches Slurm, as `up` would refuse it inside the queued job.
#[test]
fn an_unknown_kernel_is_refused_before_the_job_is_queued() {
    let env = example("local.env");
    for verb in [&["plan"][..], &["submit", "--dry-run"][..]] {
        let out = hpcagent()
            .args(&verb[..1])
            .args(["--env", env.to_str().unwrap()])
            .args(&verb[1..])
            .args(["--set", "KERNELS=gemm,dott"])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {err}");
        assert!(
            err.contains("dott") && err.contains("did you mean dot?"),
            "{verb:?}: {err}"
        );
    }
}

/// A dry run of a job that would be refused (its container images are not
/// there) shows the script and exits as the submit would: non-zero.
#[test]
fn a_dry_run_of_a_job_that_would_be_refused_says_so_and_fails() {
    let env = example("beverin.env");
    let empty = tempfile::tempdir().unwrap();
    let out = hpcagent()
        .args(["submit", "--env", env.to_str().unwrap(), "--dry-run"])
        .env("SCRATCH", empty.path())
        .env("EDF_PATH", common::repo().join("containers/edf"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the job would be refused") && err.contains(".sqsh"),
        "{err}"
    );
    assert!(
        stdout(&out).contains("<<'SCRIPT'"),
        "the script is still shown"
    );
}

/// On Alps a job asks for the node's memory as CSCS advises, which its
/// steps share (they inherit none of the job's memory requests).
#[test]
fn an_alps_job_asks_for_the_memory_cscs_advises() {
    let env = example("alps.env");
    let site = site_with_images();
    let out = site
        .command()
        .args(["submit", "--env", env.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let command = text.lines().find(|l| l.starts_with("sbatch ")).unwrap();
    for flag in ["--exclusive", "--mem=450G", "--gpus-per-node=4"] {
        assert!(command.split(' ').any(|w| w == flag), "{flag}: {command}");
    }
}

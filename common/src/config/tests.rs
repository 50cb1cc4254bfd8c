use std::io::Write;

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn env_file(text: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.env");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    Fixture { _dir: dir, path }
}

fn sources(file: &Fixture, process: &[(&str, &str)], cli: &[(&str, &str)]) -> Sources {
    Sources {
        env_file: Some(file.path.clone()),
        process_env: process
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        overrides: cli
            .iter()
            .map(|(k, v)| Override {
                flag: format!("--set {k}={v}"),
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
    }
}

fn errors(text: &str) -> Vec<String> {
    let file = env_file(text);
    let err = resolve(&sources(&file, &[], &[])).expect_err("should be refused");
    let prefix = format!("{}:", file.path.display());
    err.0
        .iter()
        .map(|d| d.to_string().replace(&prefix, "run.env:"))
        .collect()
}

#[test]
fn layers_override_in_order_and_remember_their_origin() {
    let file = env_file("SITE=alps\nAGENT_NODES=3\nJUDGE_NODES=2\nVLLM_PORT=8001\n");
    let config = resolve(&sources(
        &file,
        &[
            ("HPCAGENT_JUDGE_NODES", "4"),
            ("HPCAGENT_SANDBOX_DIR", "/x"),
        ],
        &[("VLLM_PORT", "8002")],
    ))
    .unwrap();
    let s = &config.settings;
    assert_eq!(s.site, Site::Alps);
    assert_eq!(s.gpus_per_node, 4, "site profile beats the default");
    assert_eq!(s.agent_nodes, 3, "env file beats the default");
    assert_eq!(s.judge_nodes, 4, "process variable beats the env file");
    assert_eq!(s.vllm_port.0, 8002, "command line beats everything");
    assert_eq!(config.origin("GPUS_PER_NODE"), Origin::Site("alps"));
    assert_eq!(config.origin("AGENT_NODES"), Origin::file(&file.path, 2));
    assert_eq!(
        config.origin("JUDGE_NODES"),
        Origin::Process("HPCAGENT_JUDGE_NODES".into())
    );
    assert_eq!(
        config.origin("VLLM_PORT"),
        Origin::Cli("--set VLLM_PORT=8002".into())
    );
    assert_eq!(config.origin("AGENTS_PER_NODE"), Origin::Default);
}

#[test]
fn site_can_come_from_the_process_environment() {
    let file = env_file("AGENT_NODES=1\n");
    let config = resolve(&sources(&file, &[("HPCAGENT_SITE", "beverin")], &[])).unwrap();
    assert_eq!(config.settings.partition.as_deref(), Some("mi300"));
}

#[test]
fn malformed_files_name_file_line_and_key() {
    let got = errors(
        "AGENT_NODE=2\nAGENT_NODES=-1\nJUDGE_NODES\nVLLM_MODEL=${NOT_SET_ANYWHERE}\nVLLM_PORT=99999\n",
    );
    assert_eq!(
        got,
        [
            "run.env:3: JUDGE_NODES: expected KEY=value (this line has no '=')",
            "run.env:4: VLLM_MODEL: ${NOT_SET_ANYWHERE} is not set (give a default with ${NOT_SET_ANYWHERE:-value})",
            "run.env:1: AGENT_NODE: unknown key; did you mean AGENT_NODES?",
            "run.env:2: AGENT_NODES: -1 is negative; a count must be 0 or more",
            "run.env:5: VLLM_PORT: \"99999\" is not a TCP port (1-65535)",
        ]
    );
}

#[test]
fn cross_key_rules_point_at_the_key_to_fix() {
    assert_eq!(
        errors("INFERENCE_NODES=3\nNODES_PER_REPLICA=2\nVLLM_MODEL=m\n"),
        [
            "run.env:1: INFERENCE_NODES: 3 nodes cannot be split into replicas of NODES_PER_REPLICA=2"
        ]
    );
    assert_eq!(
        errors("INFERENCE_NODES=4\nINFERENCE_REPLICAS=3\nNODES_PER_REPLICA=2\nVLLM_MODEL=m\n"),
        ["run.env:1: INFERENCE_NODES: is 4 but INFERENCE_REPLICAS × NODES_PER_REPLICA = 3 × 2 = 6"]
    );
    assert_eq!(
        errors("INFERENCE_REPLICAS=1\n"),
        [
            "default: VLLM_MODEL: is empty but 1 inference node(s) are planned; name the model to serve"
        ]
    );
    assert_eq!(
        errors("COLOCATE_JUDGES=true\n"),
        [
            "default: JUDGE_NODES: is 1 but COLOCATE_JUDGES=true puts the judges on the agent nodes; set JUDGE_NODES=0"
        ]
    );
    assert_eq!(
        errors("TIME_LIMIT=00:30:00\nTASK_BUDGET=1800\n"),
        [
            "run.env:2: TASK_BUDGET: 1800 is 1-06:00:00 (Slurm's rule: a bare number is minutes), \
             longer than the job's TIME_LIMIT=00:30:00; a task cannot use more than one job's time"
        ]
    );
    assert_eq!(
        errors("TIME_LIMIT=5\nDRAIN_SECONDS=300\n"),
        ["run.env:2: DRAIN_SECONDS: 300 s is not shorter than TIME_LIMIT=5 (300 s)"]
    );
    assert_eq!(
        errors("AGENT_NODES=1\nREGISTER_SECONDS=5\n"),
        [
            "run.env:2: REGISTER_SECONDS: 5 s is too short for a step to start and register; use 10 or more"
        ]
    );
}

#[test]
fn the_default_budget_of_a_short_job_is_the_job_and_resolves_again() {
    let file = env_file("TIME_LIMIT=00:03:00\nDRAIN_SECONDS=45\n");
    let first = resolve(&sources(&file, &[], &[])).unwrap();
    assert_eq!(first.settings.task_budget.seconds, 180);
    // The job reads the resolved file, where every key reads as set.
    let again = env_file(&first.to_env_file());
    let second = resolve(&sources(&again, &[], &[])).unwrap();
    assert_eq!(second.settings.task_budget.text, "00:03:00");
}

#[test]
fn an_agent_command_with_an_unknown_placeholder_is_refused() {
    let policy = "AGENT_POLICY=command\nINFERENCE_URL=http://h:1/v1\nLLM_MODEL=m\n";
    assert_eq!(
        errors(&format!(
            "{policy}AGENT_COMMAND=cli --cd {{workdir}} {{prompt}} '{{\"a\": 1}}'\n"
        )),
        [format!(
            "run.env:4: AGENT_COMMAND: {{workdir}} is no placeholder (they are {})",
            AGENT_COMMAND_PLACEHOLDERS
                .map(|p| format!("{{{p}}}"))
                .join(", ")
        )]
    );
}

#[test]
fn a_sites_variables_are_added_to_not_replaced() {
    let resolved = |text: &str| {
        let file = env_file(text);
        let config = resolve(&sources(&file, &[], &[])).unwrap();
        let env = config.settings.inference_env.0.clone();
        let text = config
            .resolved()
            .iter()
            .find(|r| r.key == "INFERENCE_ENV")
            .unwrap()
            .text
            .clone();
        (env, text)
    };
    let (env, text) = resolved("SITE=alps\nINFERENCE_ENV=NCCL_DEBUG=INFO FI_PROVIDER=tcp\n");
    let get = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(get("NCCL_DEBUG"), Some("INFO"));
    assert_eq!(get("FI_PROVIDER"), Some("tcp"), "a name set here wins");
    assert_eq!(
        get("NCCL_NET"),
        Some("AWS Libfabric"),
        "the site's others stay"
    );
    assert_eq!(env.iter().filter(|(n, _)| n == "FI_PROVIDER").count(), 1);
    assert!(
        text.contains("'NCCL_NET=AWS Libfabric'"),
        "config shows the merged value: {text}"
    );
    let (env, _) = resolved("SITE=alps\nINFERENCE_ENV=--replace NCCL_DEBUG=INFO\n");
    assert_eq!(env, [("NCCL_DEBUG".to_string(), "INFO".to_string())]);
}

#[test]
fn a_site_node_cannot_have_more_gpus_than_it_has() {
    assert_eq!(
        errors("SITE=alps\nGPUS_PER_NODE=8\n"),
        ["run.env:2: GPUS_PER_NODE: is 8 but a node of SITE=alps has 4"]
    );
}

#[test]
fn an_unknown_site_is_said_once() {
    let said = errors("SITE=nowhere\n");
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("run.env:1: SITE:"), "{said:?}");
}

#[test]
fn inference_split() {
    let shape = |text: &str| {
        let file = env_file(&format!("VLLM_MODEL=m\n{text}"));
        resolve(&sources(&file, &[], &[])).unwrap().inference()
    };
    let s = |replicas, nodes_per_replica| InferenceShape {
        replicas,
        nodes_per_replica,
    };
    assert_eq!(shape("INFERENCE_NODES=2\n"), s(2, 1));
    assert_eq!(shape("INFERENCE_NODES=4\nNODES_PER_REPLICA=2\n"), s(2, 2));
    assert_eq!(
        shape("INFERENCE_REPLICAS=3\nNODES_PER_REPLICA=2\n"),
        s(3, 2)
    );
    assert_eq!(
        shape("INFERENCE_NODES=6\nINFERENCE_REPLICAS=3\nNODES_PER_REPLICA=2\n"),
        s(3, 2)
    );
    assert_eq!(shape(""), s(0, 1));
}

#[test]
fn resolved_env_file_round_trips() {
    let file = env_file(
        "SITE=alps\nVLLM_MODEL=Qwen/Qwen3-8B\nINFERENCE_NODES=2\nVLLM_EXTRA_ARGS=--max-model-len 8192 --chat-template \"a b\"\nACCOUNT=a-'b\n",
    );
    let first = resolve(&sources(&file, &[], &[])).unwrap();
    let again = env_file(&first.to_env_file());
    let second = resolve(&sources(&again, &[], &[])).unwrap();
    assert_eq!(
        serde_json::to_value(&first.settings).unwrap(),
        serde_json::to_value(&second.settings).unwrap()
    );
    assert_eq!(second.settings.vllm_extra_args.0[3], "a b");
    assert_eq!(second.settings.account.as_deref(), Some("a-'b"));
}

#[test]
fn committed_docs_match_the_key_table() {
    let committed = include_str!("../../../docs/env-file.md");
    assert!(
        committed == docs::markdown(),
        "docs/env-file.md is stale: run `cargo run -- config --docs > docs/env-file.md`"
    );
}

/// A line break in a value would become a line of its own in env.resolved:
/// refused wherever the value came from, at that origin.
#[test]
fn a_value_with_a_line_break_is_refused_at_its_origin() {
    assert_eq!(
        errors("JOB_NAME=x\rAGENT_POLICY=command\n"),
        ["run.env:1: JOB_NAME: the value holds a line break ('\\r'); a value is one line of text"]
    );
    let file = env_file("");
    let err = resolve(&sources(
        &file,
        &[("HPCAGENT_ACCOUNT", "a\u{7}b")],
        &[("JOB_NAME", "x\nAGENT_POLICY=command")],
    ))
    .unwrap_err();
    let said: Vec<String> = err.0.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said.iter()
            .any(|d| d.contains("--set JOB_NAME=") && d.contains("a line break"))
    );
    assert!(said.iter().any(|d| d.contains("HPCAGENT_ACCOUNT") && d.contains("a control character ('\\u{7}')")));
    // A tab is text.
    let file = env_file("JOB_NAME='a\tb'\n");
    assert_eq!(
        resolve(&sources(&file, &[], &[]))
            .unwrap()
            .settings
            .job_name,
        "a\tb"
    );
}

#[test]
fn colocated_judges_take_no_nodes_of_their_own() {
    use crate::plan::Role;
    let count = |text: &str| {
        let file = env_file(text);
        let config = resolve(&sources(&file, &[], &[])).unwrap();
        (
            [Role::Inference, Role::Agent, Role::Judge].map(|r| config.nodes_of(r)),
            config.node_total(),
        )
    };
    assert_eq!(
        count("INFERENCE_NODES=2\nVLLM_MODEL=m\nAGENT_NODES=3\nJUDGE_NODES=2\n"),
        ([2, 3, 2], 7)
    );
    assert_eq!(
        count("AGENT_NODES=3\nJUDGE_NODES=0\nCOLOCATE_JUDGES=true\n"),
        ([0, 3, 0], 3)
    );
}

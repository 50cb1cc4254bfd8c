use super::*;
use crate::allocation::Sourced;
use hpcagent_common::config::{Sources, resolve};

fn config(text: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.env");
    std::fs::write(&path, text).unwrap();
    resolve(&Sources {
        env_file: Some(path),
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn allocation(nodelist: &str, gpus: Option<u32>) -> Allocation {
    let gpus = gpus.map(|value| Sourced {
        value,
        source: "--gpus-per-node".into(),
    });
    Allocation::from_nodelist(nodelist, gpus, None).unwrap()
}

fn layout() -> Layout {
    Layout {
        run_dir: "/runs/7".into(),
        exe: "/bin/hpcagent".into(),
        corpus: "/src/benchmarks".into(),
        skills: "/src/skills".into(),
    }
}

fn plan(text: &str, nodelist: &str, gpus: Option<u32>) -> Plan {
    place(&config(text), &allocation(nodelist, gpus), &layout()).unwrap_or_else(|e| panic!("{e}"))
}

fn refusal(text: &str, nodelist: &str, gpus: Option<u32>) -> String {
    let err = place(&config(text), &allocation(nodelist, gpus), &layout())
        .expect_err("should be refused");
    err.0
        .iter()
        .map(|d| d.to_string().split_once(": ").unwrap().1.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

const BEVERIN: &str = "SITE=beverin\nINFERENCE_NODES=2\nTENSOR_PARALLEL_SIZE=4\nVLLM_MODEL=m\nAGENT_NODES=1\nAGENTS_PER_NODE=4\nJUDGE_NODES=1\n";

#[test]
fn one_node_replicas_agents_and_judges_cover_the_allocation() {
    let p = plan(BEVERIN, "nid[001-004]", Some(4));
    let names: Vec<(&str, &str)> = p
        .instances
        .iter()
        .map(|i| (i.name.as_str(), i.nodelist.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("inference-0", "nid001"),
            ("inference-1", "nid002"),
            ("agent-0", "nid003"),
            ("judge-0", "nid004")
        ]
    );
    assert!(p.unused_nodes.is_empty());
    assert_eq!(p.orchestrator.node, "nid001");
    let inference = &p.instances[0];
    assert_eq!(
        inference.srun,
        [
            "srun",
            "--job-name=inference-0",
            "--nodes=1",
            "--ntasks=1",
            "--ntasks-per-node=1",
            "--nodelist=nid001",
            "--exact",
            "--cpus-per-task=96",
            "--gres=gpu:4",
            "--environment=hpcagent-vllm-mi300a",
            "--kill-on-bad-exit=1",
            "--open-mode=append",
            "--output=/runs/7/roles/inference-0/stdout",
            "--error=/runs/7/roles/inference-0/stderr",
            // In the container, the image's binary.
            "/opt/hpcagent/bin/hpcagent",
            "role",
            "inference",
            "--run-dir",
            "/runs/7",
            "--instance",
            "inference-0",
        ]
    );
    assert_eq!(inference.env["NCCL_SOCKET_IFNAME"], "hsn0");
    assert_eq!(inference.env["FI_PROVIDER"], "cxi");
    assert!(
        p.instances[2].srun.contains(&"--gres=gpu:0".to_string()),
        "agents take no GPU"
    );
    assert_eq!(p.instances[2].workers, Some(4));
    assert!(
        p.instances[3].srun.contains(&"--gres=gpu:4".to_string()),
        "a judge node's GPUs go to its judge"
    );
}

#[test]
fn multi_node_replicas_take_consecutive_nodes_and_a_master_port() {
    let p = plan(
        "SITE=alps\nINFERENCE_NODES=4\nNODES_PER_REPLICA=2\nVLLM_MODEL=m\n",
        "nid[001-006]",
        Some(4),
    );
    let replicas: Vec<_> = p.instances_of(Role::Inference).collect();
    assert_eq!(replicas.len(), 2);
    assert_eq!(replicas[0].nodes, ["nid001", "nid002"]);
    assert_eq!(replicas[1].nodelist, "nid[003-004]");
    assert_eq!(replicas[1].ports["master"], 8100);
    assert_eq!(
        replicas[0].parallelism,
        Some(Parallelism {
            tensor_parallel: 4,
            pipeline_parallel: 2
        })
    );
    assert!(replicas[0].srun.contains(&"--ntasks=2".to_string()));
    let vllm = replicas[1].vllm.as_ref().unwrap();
    let line = |rank: usize| vllm.ranks[rank].join(" ");
    assert_eq!(
        line(0),
        "vllm serve m --host 0.0.0.0 --port 8000 --served-model-name m --tensor-parallel-size 4 \
         --pipeline-parallel-size 2 --distributed-executor-backend mp --nnodes 2 --node-rank 0 \
         --master-addr nid003 --master-port 8100 --distributed-timeout-seconds 3600"
    );
    assert_eq!(
        line(1),
        "vllm serve m --host 0.0.0.0 --port 8000 --served-model-name m --tensor-parallel-size 4 \
         --pipeline-parallel-size 2 --distributed-executor-backend mp --nnodes 2 --node-rank 1 \
         --master-addr nid003 --master-port 8100 --distributed-timeout-seconds 3600 --headless"
    );
    // The ranks meet on Slingshot: rank 0's hsn0 address replaces the node
    // name when the step starts, and each rank announces its own.
    assert_eq!(vllm.rendezvous_ifname.as_deref(), Some("hsn0"));
    let shown = p.render();
    assert!(
        shown.contains("(--master-addr: nid003's hsn0 address, and VLLM_HOST_IP"),
        "{shown}"
    );
}

#[test]
fn each_site_s_inference_settings_reach_the_steps() {
    let env = |site: &str| {
        let p = plan(
            &format!("SITE={site}\nINFERENCE_NODES=2\nNODES_PER_REPLICA=2\nVLLM_MODEL=m\n"),
            "nid[001-004]",
            Some(4),
        );
        let inference = p.instances_of(Role::Inference).next().unwrap().clone();
        (inference.env, inference.vllm.unwrap().ranks[0].join(" "))
    };
    let (beverin, line) = env("beverin");
    for (key, value) in [
        ("NCCL_NET_PLUGIN", "ofi"),
        ("FI_PROVIDER", "cxi"),
        ("NCCL_DMABUF_ENABLE", "0"),
        ("HSA_ENABLE_IPC_MODE_LEGACY", "1"),
        ("NCCL_SOCKET_IFNAME", "hsn0"),
        ("GLOO_SOCKET_IFNAME", "hsn0"),
    ] {
        assert_eq!(
            beverin.get(key).map(String::as_str),
            Some(value),
            "beverin {key}"
        );
    }
    assert!(
        line.contains("--distributed-timeout-seconds 3600"),
        "{line}"
    );
    let (alps, _) = env("alps");
    for (key, value) in [
        ("NCCL_NET", "AWS Libfabric"),
        ("FI_PROVIDER", "cxi"),
        ("NCCL_SOCKET_IFNAME", "hsn0"),
    ] {
        assert_eq!(alps.get(key).map(String::as_str), Some(value), "alps {key}");
    }
}

#[test]
fn vllm_lines_keep_the_extra_arguments_quoting() {
    let p = plan(
        "VLLM_MODEL=/models/tiny\nVLLM_SERVED_MODEL=tiny\nINFERENCE_NODES=1\n\
         VLLM_COMMAND=/venv/bin/vllm\n\
         VLLM_EXTRA_ARGS=--dtype float32 --structured-outputs-config '{\"backend\": \"xgrammar\"}'\n",
        "n[1-3]",
        None,
    );
    let vllm = p.instances[0].vllm.as_ref().unwrap();
    assert_eq!(vllm.served_model, "tiny");
    assert_eq!(vllm.ranks.len(), 1);
    assert_eq!(
        vllm.ranks[0][..3],
        ["/venv/bin/vllm", "serve", "/models/tiny"]
    );
    assert_eq!(
        vllm.ranks[0].last().unwrap(),
        "{\"backend\": \"xgrammar\"}",
        "one argument, spaces and all"
    );
    assert!(!vllm.ranks[0].contains(&"--headless".to_string()));
    assert!(
        p.render()
            .contains("inference-0 rank 0 on n1: /venv/bin/vllm serve /models/tiny")
    );
}

#[test]
fn smaller_tensor_parallel_runs_several_servers_per_node() {
    let p = plan(
        "SITE=alps\nINFERENCE_NODES=1\nTENSOR_PARALLEL_SIZE=2\nVLLM_MODEL=m\n",
        "nid[001-003]",
        Some(4),
    );
    let servers: Vec<_> = p.instances_of(Role::Inference).collect();
    assert_eq!(servers.len(), 2);
    assert_eq!(
        (servers[0].ports["http"], servers[1].ports["http"]),
        (8000, 8001)
    );
    assert!(
        servers
            .iter()
            .all(|s| s.nodes == ["nid001"] && s.srun.contains(&"--gres=gpu:2".to_string()))
    );
    assert_eq!(servers[0].cpus_per_node, 144);
}

#[test]
fn colocated_judges_split_the_agent_nodes() {
    let p = plan(
        "AGENT_NODES=2\nJUDGE_NODES=0\nCOLOCATE_JUDGES=true\nCPUS_PER_NODE=8\n",
        "n[1-2]",
        None,
    );
    let on_n1: Vec<(&str, u32)> = p
        .instances
        .iter()
        .filter(|i| i.nodes == ["n1"])
        .map(|i| (i.name.as_str(), i.cpus_per_node))
        .collect();
    assert_eq!(on_n1, [("agent-0", 4), ("judge-0", 4)]);
    assert!(
        p.instances
            .iter()
            .all(|i| !i.srun.iter().any(|a| a.starts_with("--gres"))),
        "no GPUs, no --gres"
    );
}

#[test]
fn extra_nodes_are_reported_unused() {
    let p = plan("AGENT_NODES=1\nJUDGE_NODES=1\n", "n[1-4]", None);
    assert_eq!(p.unused_nodes, ["n3", "n4"]);
    assert_eq!(
        p.warnings,
        ["2 node(s) of the allocation get no role: n[3-4]"]
    );
}

#[test]
fn cpu_only_campaigns_run_on_gpu_nodes_without_taking_gpus() {
    let p = plan("AGENT_NODES=1\nJUDGE_NODES=1\n", "n[1-2]", Some(4));
    assert!(
        p.instances
            .iter()
            .all(|i| i.gpus_per_node == 0 && i.srun.contains(&"--gres=gpu:0".to_string()))
    );
    assert_eq!(
        p.warnings,
        ["GPUS_PER_NODE=0: the allocation's 4 GPUs per node stay unused"]
    );
}

#[test]
fn impossible_plans_are_refused_with_numbers() {
    assert_eq!(
        refusal(BEVERIN, "nid[001-003]", Some(4)),
        "JUDGE_NODES: the plan needs 4 nodes (inference 2 + agents 1 + judges 1) but the allocation has 3 (nid[001-003])"
    );
    assert_eq!(
        refusal(BEVERIN, "nid[001-004]", Some(2)),
        "GPUS_PER_NODE: is 4 but the allocation has 2 GPUs per node (--gpus-per-node)"
    );
    assert_eq!(
        refusal(
            "SITE=alps\nINFERENCE_NODES=1\nTENSOR_PARALLEL_SIZE=3\nVLLM_MODEL=m\n",
            "n[1-3]",
            None
        ),
        "TENSOR_PARALLEL_SIZE: 3 does not divide the 4 GPUs of a node"
    );
    assert_eq!(
        refusal(
            "SITE=alps\nINFERENCE_NODES=2\nNODES_PER_REPLICA=2\nTENSOR_PARALLEL_SIZE=2\nVLLM_MODEL=m\n",
            "n[1-4]",
            None
        ),
        "TENSOR_PARALLEL_SIZE: is 2 but a replica of NODES_PER_REPLICA=2 nodes runs one pipeline stage per node over all 4 GPUs of each; use 4"
    );
    assert_eq!(
        refusal(
            "JUDGE_NODES=0\nCOLOCATE_JUDGES=true\nJUDGE_CPUS=2\n",
            "n1",
            None
        ),
        "JUDGE_CPUS: 1 judge(s) × 2 CPUs leave no CPU of the 2 for the agents on the node"
    );
}

#[test]
fn plans_serialize_and_read_back() {
    let p = plan(BEVERIN, "nid[001-004]", Some(4));
    let json = serde_json::to_string(&p).unwrap();
    let back: Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(back.instances, p.instances);
}

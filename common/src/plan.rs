//! The plan: which role instance runs where, with what, launched how.
//!
//! A plan is a value (written as `plan.json` in the run directory) that the
//! executors carry out and the roles read their assignment from. It is made by
//! the orchestrator's placement; this module only describes and prints it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::words;

/// The kinds of work nodes are assigned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Inference,
    Agent,
    Judge,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Inference => "inference",
            Role::Agent => "agent",
            Role::Judge => "judge",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the orchestrator's gRPC server listens: the node running the batch script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrchestratorEndpoint {
    pub node: String,
    pub port: u16,
}

/// How one vLLM server is laid out over its nodes and GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parallelism {
    pub tensor_parallel: u32,
    /// Pipeline stages, one per node: rank 0 serves HTTP, the others are `--headless`.
    pub pipeline_parallel: u32,
}

/// How an inference instance runs vLLM: one command line per rank, rank `r`
/// on the instance's `r`-th node. Rank 0 serves HTTP; in a replica of several
/// nodes the other ranks run `--headless` and join rank 0's rendezvous.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmLaunch {
    /// The name clients ask for (`--served-model-name`).
    pub served_model: String,
    pub ranks: Vec<Vec<String>>,
    /// In a replica of several nodes, the interface (`NET_IFNAME`) whose
    /// address each rank finds when its step starts: rank 0's replaces the
    /// node name given as `--master-addr`, and each rank's own is its
    /// `VLLM_HOST_IP`, so the ranks meet over the high-speed network rather
    /// than the management one the node names resolve to.
    #[serde(default)]
    pub rendezvous_ifname: Option<String>,
}

/// One role instance: one Slurm step (or one local process group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleInstance {
    pub role: Role,
    pub index: u32,
    /// `<role>-<index>`: the step's `--job-name` and its log directory name.
    pub name: String,
    /// Nodes in rank order (one task per node).
    pub nodes: Vec<String>,
    /// The same nodes as a Slurm hostlist.
    pub nodelist: String,
    pub cpus_per_node: u32,
    pub gpus_per_node: u32,
    /// Named ports this instance listens on (`http`, `master`, `grpc`).
    pub ports: BTreeMap<String, u16>,
    /// Container Engine environment, when the role runs in an image.
    pub edf: Option<String>,
    /// Agents run by this instance (agent role only).
    pub workers: Option<u32>,
    pub parallelism: Option<Parallelism>,
    /// The vLLM command lines (inference role only).
    pub vllm: Option<VllmLaunch>,
    /// Environment the step gets on top of the orchestrator's (no secrets).
    pub env: BTreeMap<String, String>,
    /// Directory of the step's stdout and stderr, under the run directory.
    pub log_dir: PathBuf,
    /// The exact `srun` argument vector that launches the step.
    pub srun: Vec<String>,
    /// The role command inside the step.
    pub command: Vec<String>,
}

/// A whole campaign's placement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub job_id: Option<String>,
    pub run_dir: PathBuf,
    /// The corpus and skills pages the campaign was planned with. Roles take
    /// them from here, never from their environment: under the Container
    /// Engine the image's environment overrides the host's, and a role would
    /// silently grade against the image's copy.
    #[serde(default)]
    pub corpus: PathBuf,
    #[serde(default)]
    pub skills: PathBuf,
    pub site: String,
    /// The allocation's nodes, in Slurm's order.
    pub nodes: Vec<String>,
    pub nodelist: String,
    pub gpus_per_node: u32,
    pub cpus_per_node: u32,
    pub orchestrator: OrchestratorEndpoint,
    /// A heterogeneous job's components, in Slurm's order; empty for an
    /// ordinary job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Component>,
    pub instances: Vec<RoleInstance>,
    /// Nodes of the allocation no role was given.
    pub unused_nodes: Vec<String>,
    /// Things that work but are probably not what was meant.
    pub warnings: Vec<String>,
}

impl Plan {
    pub fn instances_of(&self, role: Role) -> impl Iterator<Item = &RoleInstance> {
        self.instances.iter().filter(move |i| i.role == role)
    }

    /// The human-readable form: a table, then the exact srun lines.
    pub fn render(&self) -> String {
        let mut rows = vec![[
            "ROLE".to_string(),
            "INSTANCE".into(),
            "NODES".into(),
            "CPUS".into(),
            "GPUS".into(),
            "PORTS".into(),
            "EDF".into(),
        ]];
        for i in &self.instances {
            let ports: Vec<String> = i
                .ports
                .iter()
                .map(|(name, port)| format!("{name}={port}"))
                .collect();
            rows.push([
                i.role.to_string(),
                i.name.clone(),
                i.nodelist.clone(),
                i.cpus_per_node.to_string(),
                i.gpus_per_node.to_string(),
                if ports.is_empty() {
                    "-".into()
                } else {
                    ports.join(",")
                },
                i.edf.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        let mut out = format!(
            "job {}  site {}  nodes {} ({} × {} CPUs, {} GPUs)  run {}\norchestrator on {}:{}\n\
             corpus {}  skills {}\n\n",
            self.job_id.as_deref().unwrap_or("(dry run)"),
            self.site,
            self.nodelist,
            self.nodes.len(),
            self.cpus_per_node,
            self.gpus_per_node,
            self.run_dir.display(),
            self.orchestrator.node,
            self.orchestrator.port,
            self.corpus.display(),
            self.skills.display(),
        );
        if !self.components.is_empty() {
            out.push_str(&self.render_components());
        }
        out.push_str(&table(&rows));
        for warning in &self.warnings {
            out.push_str(&format!("\nwarning: {warning}"));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        out.push_str("\nsteps:\n");
        for i in &self.instances {
            let env: Vec<String> = i
                .env
                .iter()
                .map(|(k, v)| format!("{k}={}", words::quote(v)))
                .collect();
            let argv = words::join(&i.srun);
            if env.is_empty() {
                out.push_str(&format!("{argv}\n"));
            } else {
                out.push_str(&format!("env {} {argv}\n", env.join(" ")));
            }
        }
        let servers: Vec<&RoleInstance> =
            self.instances.iter().filter(|i| i.vllm.is_some()).collect();
        if !servers.is_empty() {
            out.push_str("\nvLLM (each inference step runs its rank's line on its node):\n");
        }
        for i in servers {
            let launch = i.vllm.as_ref().expect("filtered");
            for (rank, argv) in launch.ranks.iter().enumerate() {
                let node = i.nodes.get(rank).map_or("?", String::as_str);
                out.push_str(&format!(
                    "{} rank {rank} on {node}: {}\n",
                    i.name,
                    words::join(argv)
                ));
            }
            if let (Some(ifname), Some(first)) = (&launch.rendezvous_ifname, i.nodes.first()) {
                out.push_str(&format!(
                    "  (--master-addr: {first}'s {ifname} address, and VLLM_HOST_IP: each \
                     rank's own, found when the step starts)\n"
                ));
            }
        }
        out
    }
}

impl Plan {
    /// One line per component of a heterogeneous job.
    fn render_components(&self) -> String {
        let mut out = String::from("heterogeneous job:\n");
        for (group, c) in self.components.iter().enumerate() {
            let roles: Vec<&str> = c.roles.iter().map(|r| r.as_str()).collect();
            out.push_str(&format!(
                "  component {group}: partition {}, {} node(s): {} (srun --het-group={group})\n",
                c.partition.as_deref().unwrap_or("(default)"),
                c.nodes,
                roles.join(", "),
            ));
        }
        out.push('\n');
        out
    }
}

fn table(rows: &[[String; 7]]) -> String {
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:w$}"))
                .collect();
            format!("{}\n", cells.join("  ").trim_end())
        })
        .collect()
}

/// One component of the job (a heterogeneous job has several: see the
/// orchestrator's `slurm::hetjob`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    pub partition: Option<String>,
    /// The roles whose nodes it holds, in placement order.
    pub roles: Vec<Role>,
    pub nodes: u32,
}

impl Component {
    /// GPUs are asked for where something uses them: inference, and judges
    /// (GPU kernels time on the judge's node). A component of agents alone
    /// asks for none, so a CPU partition can hold it.
    pub fn wants_gpus(&self) -> bool {
        self.roles.iter().any(|r| *r != Role::Agent)
    }
}

//! Placement: assigning an allocation's nodes, CPUs and GPUs to role instances.
//!
//! Nodes are taken in Slurm's order: inference replicas first (K consecutive
//! nodes each), then agent nodes, then judge nodes; judges share the agent
//! nodes only when `COLOCATE_JUDGES=true`. A plan that cannot work (too few
//! nodes, GPUs per node disagreeing with the allocation, a tensor-parallel size
//! that does not divide the GPUs, more steps than CPUs) is refused with the
//! numbers, located at the key to change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::allocation::Allocation;
use crate::hostlist;
use crate::slurm::{StepSpec, hetjob, srun_argv};
use hpcagent_common::config::{Config, ConfigError, Diagnostic};
use hpcagent_common::plan::{
    OrchestratorEndpoint, Parallelism, Plan, Role, RoleInstance, VllmLaunch,
};

/// Where the run lives and which binary the steps run.
#[derive(Debug, Clone)]
pub struct Layout {
    pub run_dir: PathBuf,
    /// The hpcagent executable every role step starts.
    pub exe: PathBuf,
    /// The task corpus and the agents' skills pages, as absolute paths.
    pub corpus: PathBuf,
    pub skills: PathBuf,
}

/// Resources of one node as the plan sees them.
#[derive(Debug, Clone, Copy)]
struct Node {
    cpus: u32,
    /// GPUs the campaign uses (GPUS_PER_NODE).
    gpus: u32,
    /// GPUs the allocation holds: when there are any, every step must say how
    /// many it takes, or it takes them all and blocks the node's other steps.
    held_gpus: u32,
}

/// Computes the plan, or every reason it cannot work.
pub fn place(
    config: &Config,
    allocation: &Allocation,
    layout: &Layout,
) -> Result<Plan, ConfigError> {
    let node = node_resources(config, allocation).map_err(|d| ConfigError(vec![d]))?;
    let errors = check(config, allocation, node);
    if !errors.is_empty() {
        return Err(ConfigError(errors));
    }
    let components = hetjob::components(config);
    let mut builder = Builder {
        config,
        layout,
        node,
        het: (components.len() > 1).then(|| components.clone()),
        instances: Vec::new(),
    };
    let mut pools = node_pools(&allocation.nodes, &components);
    let pool = |role| hetjob::component_of(&components, role);
    builder.inference(&mut pools[pool(Role::Inference)]);
    let agent_nodes: Vec<String> = pools[pool(Role::Agent)]
        .by_ref()
        .take(config.settings.agent_nodes as usize)
        .collect();
    builder.agents(&agent_nodes);
    if config.settings.colocate_judges {
        builder.judges(&agent_nodes);
    } else {
        let judge_nodes: Vec<String> = pools[pool(Role::Judge)]
            .by_ref()
            .take(config.settings.judge_nodes as usize)
            .collect();
        builder.judges(&judge_nodes);
    }
    let unused_nodes: Vec<String> = pools.into_iter().flatten().collect();
    let mut warnings = Vec::new();
    if !unused_nodes.is_empty() {
        warnings.push(format!(
            "{} node(s) of the allocation get no role: {}",
            unused_nodes.len(),
            hostlist::compress(&unused_nodes)
        ));
    }
    if node.gpus == 0 && node.held_gpus > 0 {
        warnings.push(format!(
            "GPUS_PER_NODE=0: the allocation's {} GPUs per node stay unused",
            node.held_gpus
        ));
    }
    Ok(Plan {
        job_id: allocation.job_id.clone(),
        run_dir: layout.run_dir.clone(),
        corpus: layout.corpus.clone(),
        skills: layout.skills.clone(),
        site: config.settings.site.to_string(),
        nodes: allocation.nodes.clone(),
        nodelist: hostlist::compress(&allocation.nodes),
        gpus_per_node: node.gpus,
        cpus_per_node: node.cpus,
        orchestrator: OrchestratorEndpoint {
            node: allocation.nodes[0].clone(),
            port: config.settings.orchestrator_port.0,
        },
        components: builder.het.take().unwrap_or_default(),
        instances: builder.instances,
        unused_nodes,
        warnings,
    })
}

/// The nodes each component's roles are placed on: Slurm lists a
/// heterogeneous job's nodes component by component; one component takes
/// them all.
fn node_pools(
    nodes: &[String],
    components: &[hpcagent_common::plan::Component],
) -> Vec<std::vec::IntoIter<String>> {
    let pools: Vec<Vec<String>> = if components.len() <= 1 {
        vec![nodes.to_vec()]
    } else {
        let mut rest = nodes.iter().cloned();
        components
            .iter()
            .map(|c| rest.by_ref().take(c.nodes as usize).collect())
            .collect()
    };
    pools.into_iter().map(Vec::into_iter).collect()
}

/// GPUs and CPUs per node. A campaign that uses GPUs must be given exactly
/// that many per node; a CPU-only campaign (GPUS_PER_NODE=0) may run on GPU
/// nodes (whole-node jobs hold every GPU even when they ask for none).
fn node_resources(config: &Config, allocation: &Allocation) -> Result<Node, Diagnostic> {
    let s = &config.settings;
    if let Some(gpus) = &allocation.gpus_per_node
        && s.gpus_per_node > 0
        && gpus.value != s.gpus_per_node
    {
        return Err(config.diagnostic(
            "GPUS_PER_NODE",
            format!(
                "is {} but the allocation has {} GPUs per node ({})",
                s.gpus_per_node, gpus.value, gpus.source
            ),
        ));
    }
    let cpus = allocation
        .cpus_per_node
        .as_ref()
        .map_or(s.cpus_per_node, |c| c.value);
    let held_gpus = allocation
        .gpus_per_node
        .as_ref()
        .map_or(s.gpus_per_node, |g| g.value);
    Ok(Node {
        cpus,
        gpus: s.gpus_per_node,
        held_gpus,
    })
}

/// Everything about the plan that cannot work, each at its key.
fn check(config: &Config, allocation: &Allocation, node: Node) -> Vec<Diagnostic> {
    let s = &config.settings;
    let shape = config.inference();
    let mut errors = Vec::new();
    let mut refuse = |key: &str, message: String| errors.push(config.diagnostic(key, message));

    // Nodes, in placement order: the first role that does not fit is the one named.
    let judges_nodes = config.nodes_of(Role::Judge);
    let need = config.node_total();
    let have = allocation.nodes.len() as u32;
    if need > have {
        let key = if shape.nodes() > have {
            "INFERENCE_NODES"
        } else if shape.nodes() + s.agent_nodes > have {
            "AGENT_NODES"
        } else {
            "JUDGE_NODES"
        };
        refuse(
            key,
            format!(
                "the plan needs {need} nodes (inference {} + agents {} + judges {judges_nodes}) \
                 but the allocation has {have} ({})",
                shape.nodes(),
                s.agent_nodes,
                allocation.nodelist
            ),
        );
    }

    // A heterogeneous job's components must be the ones the roles ask for.
    let components = hetjob::components(config);
    let groups: Vec<u32> = allocation
        .het_groups
        .iter()
        .map(|g| g.nodes as u32)
        .collect();
    let wanted: Vec<u32> = components.iter().map(|c| c.nodes).collect();
    if !groups.is_empty() && groups != wanted {
        refuse(
            "PARTITION",
            format!(
                "the job's components have {groups:?} nodes but the roles' partitions ask for \
                 {wanted:?} (AGENT_PARTITION, JUDGE_PARTITION, INFERENCE_PARTITION)"
            ),
        );
    }

    // Inference GPUs: TP must divide the node's GPUs; multi-node replicas use whole nodes.
    if shape.replicas > 0 {
        let tp = tensor_parallel(config, node);
        if node.gpus == 0 && tp != 1 {
            refuse(
                "TENSOR_PARALLEL_SIZE",
                format!("is {tp} but the nodes have no GPUs (GPUS_PER_NODE=0)"),
            );
        } else if node.gpus > 0 && (tp == 0 || !node.gpus.is_multiple_of(tp)) {
            refuse(
                "TENSOR_PARALLEL_SIZE",
                format!("{tp} does not divide the {} GPUs of a node", node.gpus),
            );
        } else if shape.nodes_per_replica > 1 && node.gpus > 0 && tp != node.gpus {
            refuse(
                "TENSOR_PARALLEL_SIZE",
                format!(
                    "is {tp} but a replica of NODES_PER_REPLICA={} nodes runs one pipeline stage \
                     per node over all {} GPUs of each; use {}",
                    shape.nodes_per_replica, node.gpus, node.gpus
                ),
            );
        } else if servers_per_node(config, node) > node.cpus {
            refuse(
                "TENSOR_PARALLEL_SIZE",
                format!(
                    "{} vLLM servers per node need at least as many CPUs, the nodes have {}",
                    servers_per_node(config, node),
                    node.cpus
                ),
            );
        }
    }

    // Judges and agents: CPUs and GPUs must split evenly among the steps of a node.
    let jpn = s.judges_per_node;
    if node.gpus > 0 && !node.gpus.is_multiple_of(jpn) {
        refuse(
            "JUDGES_PER_NODE",
            format!(
                "{jpn} judges cannot share the {} GPUs of a node evenly",
                node.gpus
            ),
        );
    }
    if s.colocate_judges {
        let judge_cpus = colocated_judge_cpus(config, node);
        if judge_cpus == 0 || judge_cpus * jpn >= node.cpus {
            refuse(
                "JUDGE_CPUS",
                format!(
                    "{jpn} judge(s) × {judge_cpus} CPUs leave no CPU of the {} for the agents on the node",
                    node.cpus
                ),
            );
        }
    } else if jpn > node.cpus {
        refuse(
            "JUDGES_PER_NODE",
            format!(
                "{jpn} judges per node need at least as many CPUs, the nodes have {}",
                node.cpus
            ),
        );
    }
    errors
}

fn tensor_parallel(config: &Config, node: Node) -> u32 {
    config
        .settings
        .tensor_parallel_size
        .unwrap_or(node.gpus.max(1))
}

/// vLLM servers on each node of a one-node replica (GPUs ÷ TP); 1 otherwise.
fn servers_per_node(config: &Config, node: Node) -> u32 {
    if config.inference().nodes_per_replica > 1 || node.gpus == 0 {
        1
    } else {
        node.gpus / tensor_parallel(config, node).max(1)
    }
}

fn colocated_judge_cpus(config: &Config, node: Node) -> u32 {
    let jpn = config.settings.judges_per_node.max(1);
    config
        .settings
        .judge_cpus
        .unwrap_or((node.cpus / 2 / jpn).max(1))
}

/// The `vllm serve` command line of each rank of one server on `nodes`.
fn vllm_launch(
    config: &Config,
    nodes: &[String],
    ports: &BTreeMap<String, u16>,
    tp: u32,
) -> VllmLaunch {
    let s = &config.settings;
    let served = config.served_model().to_string();
    let ranks = nodes.len();
    let argv = |rank: usize| {
        let mut argv = s.vllm_command.0.clone();
        argv.extend(["serve".into(), s.vllm_model.clone()]);
        let mut flag = |name: &str, value: String| argv.extend([name.to_string(), value]);
        flag("--host", "0.0.0.0".into());
        flag("--port", ports["http"].to_string());
        flag("--served-model-name", served.clone());
        flag("--tensor-parallel-size", tp.to_string());
        if ranks > 1 {
            flag("--pipeline-parallel-size", ranks.to_string());
            flag("--distributed-executor-backend", "mp".into());
            flag("--nnodes", ranks.to_string());
            flag("--node-rank", rank.to_string());
            flag("--master-addr", nodes[0].clone());
            flag("--master-port", ports["master"].to_string());
            flag(
                "--distributed-timeout-seconds",
                s.inference_distributed_timeout.seconds.to_string(),
            );
            if rank > 0 {
                argv.push("--headless".into());
            }
        }
        argv.extend(s.vllm_extra_args.0.iter().cloned());
        argv
    };
    VllmLaunch {
        served_model: served.clone(),
        ranks: (0..ranks).map(argv).collect(),
        rendezvous_ifname: s.net_ifname.clone().filter(|_| ranks > 1),
    }
}

struct Builder<'a> {
    config: &'a Config,
    layout: &'a Layout,
    node: Node,
    /// The components of a heterogeneous job; `None` for an ordinary one.
    het: Option<Vec<hpcagent_common::plan::Component>>,
    instances: Vec<RoleInstance>,
}

/// What differs between role instances; the builder fills in the rest.
struct Assignment {
    role: Role,
    nodes: Vec<String>,
    cpus: u32,
    gpus: u32,
    ports: BTreeMap<String, u16>,
    workers: Option<u32>,
    parallelism: Option<Parallelism>,
    vllm: Option<VllmLaunch>,
    env: BTreeMap<String, String>,
}

impl Builder<'_> {
    fn inference(&mut self, nodes: &mut impl Iterator<Item = String>) {
        let s = &self.config.settings;
        let shape = self.config.inference();
        let tp = tensor_parallel(self.config, self.node);
        let per_node = servers_per_node(self.config, self.node);
        let env = self.inference_env();
        for _ in 0..shape.replicas {
            let replica: Vec<String> = nodes
                .by_ref()
                .take(shape.nodes_per_replica as usize)
                .collect();
            for server in 0..per_node {
                let mut ports =
                    BTreeMap::from([("http".to_string(), s.vllm_port.0 + server as u16)]);
                if shape.nodes_per_replica > 1 {
                    ports.insert("master".into(), s.vllm_master_port.0);
                }
                let vllm = vllm_launch(self.config, &replica, &ports, tp);
                self.push(Assignment {
                    role: Role::Inference,
                    nodes: replica.clone(),
                    cpus: self.node.cpus / per_node,
                    gpus: if self.node.gpus == 0 { 0 } else { tp },
                    ports,
                    workers: None,
                    parallelism: Some(Parallelism {
                        tensor_parallel: tp,
                        pipeline_parallel: shape.nodes_per_replica,
                    }),
                    vllm: Some(vllm),
                    env: env.clone(),
                });
            }
        }
    }

    fn inference_env(&self) -> BTreeMap<String, String> {
        let s = &self.config.settings;
        let mut env: BTreeMap<String, String> = s.inference_env.0.iter().cloned().collect();
        if let Some(ifname) = &s.net_ifname {
            env.insert("NCCL_SOCKET_IFNAME".into(), ifname.clone());
            env.insert("GLOO_SOCKET_IFNAME".into(), ifname.clone());
        }
        env
    }

    fn agents(&mut self, nodes: &[String]) {
        let s = &self.config.settings;
        let judge_share = if s.colocate_judges {
            colocated_judge_cpus(self.config, self.node) * s.judges_per_node
        } else {
            0
        };
        for node in nodes {
            self.push(Assignment {
                role: Role::Agent,
                nodes: vec![node.clone()],
                cpus: self.node.cpus - judge_share,
                gpus: 0,
                ports: BTreeMap::new(),
                workers: Some(s.agents_per_node),
                parallelism: None,
                vllm: None,
                env: BTreeMap::new(),
            });
        }
    }

    fn judges(&mut self, nodes: &[String]) {
        let s = &self.config.settings;
        let jpn = s.judges_per_node;
        let cpus = if s.colocate_judges {
            colocated_judge_cpus(self.config, self.node)
        } else {
            self.node.cpus / jpn
        };
        for node in nodes {
            for local in 0..jpn {
                self.push(Assignment {
                    role: Role::Judge,
                    nodes: vec![node.clone()],
                    cpus,
                    gpus: self.node.gpus / jpn,
                    ports: BTreeMap::from([("grpc".to_string(), s.judge_port.0 + local as u16)]),
                    workers: None,
                    parallelism: None,
                    vllm: None,
                    env: BTreeMap::new(),
                });
            }
        }
    }

    fn push(&mut self, a: Assignment) {
        let s = &self.config.settings;
        let index = self.instances.iter().filter(|i| i.role == a.role).count() as u32;
        let name = format!("{}-{index}", a.role);
        let log_dir = Path::new("roles").join(&name);
        let edf = match a.role {
            Role::Inference => s.inference_ce_env.clone(),
            Role::Agent | Role::Judge => s.role_ce_env.clone(),
        };
        // In a container the binary is the image's; on the node, this one.
        let exe = match &edf {
            Some(_) => s.container_exe.clone(),
            None => self.layout.exe.display().to_string(),
        };
        let command = vec![
            exe,
            "role".into(),
            a.role.to_string(),
            "--run-dir".into(),
            self.layout.run_dir.display().to_string(),
            "--instance".into(),
            name.clone(),
        ];
        let srun = srun_argv(&StepSpec {
            name: &name,
            nodes: &a.nodes,
            cpus_per_task: a.cpus,
            // Without --gres a step takes every GPU of its nodes; with no GPUs, say nothing.
            gpus: (self.node.held_gpus > 0).then_some(a.gpus),
            het_group: self.het.as_deref().map(|c| hetjob::component_of(c, a.role)),
            edf: edf.as_deref(),
            log_dir: &self.layout.run_dir.join(&log_dir),
            command: &command,
        });
        self.instances.push(RoleInstance {
            role: a.role,
            index,
            name,
            nodelist: hostlist::compress(&a.nodes),
            nodes: a.nodes,
            cpus_per_node: a.cpus,
            gpus_per_node: a.gpus,
            ports: a.ports,
            edf,
            workers: a.workers,
            parallelism: a.parallelism,
            vllm: a.vllm,
            env: a.env,
            log_dir,
            srun,
            command,
        });
    }
}

#[cfg(test)]
mod tests;

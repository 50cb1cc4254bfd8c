//! The one table of configuration keys.
//!
//! Each entry gives a key's name, type, default, section and documentation. The
//! parser (which keys exist, how each is typed), the typed [`Settings`] struct
//! and `docs/env-file.md` are all generated from this table, so they cannot
//! drift apart.

use hpcagent_corpus::Preset;
use serde::Serialize;

use super::values::{
    AbsPath, Args, Assignments, ConfigValue, Isolation, Languages, List, Percent, Policy, Port,
    Precision, Ratio, SearchProvider, Share, Site, TimeLimit, ToolChoice,
};

/// One configuration key as the docs and the parser see it.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub name: &'static str,
    pub section: &'static str,
    /// Text the built-in default layer supplies; empty means unset.
    pub default: &'static str,
    pub syntax: &'static str,
    pub doc: &'static [&'static str],
}

macro_rules! config_keys {
    ($(
        $(#[doc = $doc:literal])+
        [$section:literal] $field:ident / $key:ident : $ty:ty = $default:literal;
    )+) => {
        /// Every configuration value, typed. Built by [`super::resolve`].
        #[derive(Debug, Clone, Serialize)]
        pub struct Settings {
            $( $(#[doc = $doc])+ pub $field: $ty, )+
        }

        /// Every key, in documentation order.
        pub const KEYS: &[KeySpec] = &[$(
            KeySpec {
                name: stringify!($key),
                section: $section,
                default: $default,
                syntax: <$ty as ConfigValue>::SYNTAX,
                doc: &[$($doc),+],
            },
        )+];

        impl Settings {
            /// Parses each key's resolved text into settings and each key's
            /// canonical text; or every refusal as (key, reason).
            pub(super) fn parse(
                text: &dyn Fn(&'static str) -> String,
            ) -> Result<(Settings, Vec<(&'static str, String)>), Vec<(&'static str, String)>> {
                let mut errors = Vec::new();
                $(
                    let $field = match <$ty as ConfigValue>::parse(&text(stringify!($key))) {
                        Ok(value) => Some(value),
                        Err(reason) => {
                            errors.push((stringify!($key), reason));
                            None
                        }
                    };
                )+
                if !errors.is_empty() {
                    return Err(errors);
                }
                let settings = Settings { $( $field: $field.expect("parsed above"), )+ };
                let canonical = vec![$(
                    (
                        stringify!($key),
                        ConfigValue::canonical(&settings.$field, &text(stringify!($key))),
                    ),
                )+];
                Ok((settings, canonical))
            }
        }
    };
}

config_keys! {
    /// Site profile: sets partition, GPUs and CPUs per node, container images
    /// and network settings for the machine (see "Site profiles" below).
    ["Site"] site / SITE: Site = "local";

    /// Nodes for inference in total. Give it alone (one node per replica), or with
    /// `NODES_PER_REPLICA`, or give `INFERENCE_REPLICAS` instead; where both
    /// totals are given they must agree. 0 means no vLLM in the allocation.
    ["Nodes"] inference_nodes / INFERENCE_NODES: Option<u32> = "";
    /// Number of vLLM replicas (separate endpoints).
    ["Nodes"] inference_replicas / INFERENCE_REPLICAS: Option<u32> = "";
    /// Nodes per vLLM replica. More than 1 runs pipeline parallelism across the
    /// replica's nodes: rank 0 serves HTTP, the others run `--headless`.
    ["Nodes"] nodes_per_replica / NODES_PER_REPLICA: u32 = "1";
    /// Nodes that run agents.
    ["Nodes"] agent_nodes / AGENT_NODES: u32 = "1";
    /// Agents (workers) per agent node.
    ["Nodes"] agents_per_node / AGENTS_PER_NODE: u32 = "1";
    /// Nodes that run judges. 0 is allowed only with `COLOCATE_JUDGES=true`.
    ["Nodes"] judge_nodes / JUDGE_NODES: u32 = "1";
    /// Judge instances per judge node (each its own step with a share of the
    /// node's CPUs and GPUs).
    ["Nodes"] judges_per_node / JUDGES_PER_NODE: u32 = "1";
    /// Run the judges on the agent nodes instead of nodes of their own (small
    /// campaigns). Needs `JUDGE_NODES=0`; the node's CPUs are split by `JUDGE_CPUS`.
    ["Nodes"] colocate_judges / COLOCATE_JUDGES: bool = "false";
    /// CPUs for each co-located judge; default: half the node, split among the judges.
    ["Nodes"] judge_cpus / JUDGE_CPUS: Option<u32> = "";
    /// GPUs per node. Checked against the allocation (`SLURM_GPUS_ON_NODE`,
    /// `SLURM_JOB_GPUS`); 0 for CPU-only nodes.
    ["Nodes"] gpus_per_node / GPUS_PER_NODE: u32 = "0";
    /// CPUs per node, for plans made outside an allocation; inside one,
    /// `SLURM_JOB_CPUS_PER_NODE` wins.
    ["Nodes"] cpus_per_node / CPUS_PER_NODE: u32 = "2";

    /// Model vLLM serves (a Hugging Face name or a path). Needed when inference
    /// nodes are planned.
    ["Inference"] vllm_model / VLLM_MODEL: String = "";
    /// Name clients ask for (`--served-model-name`); default: `VLLM_MODEL`.
    ["Inference"] vllm_served_model / VLLM_SERVED_MODEL: Option<String> = "";
    /// HTTP port of each vLLM server; keep it below 9000 (some GH200/GB200
    /// nodes use 9000+ as their ephemeral port range).
    ["Inference"] vllm_port / VLLM_PORT: Port = "8000";
    /// Rendezvous port of rank 0 for multi-node replicas (`--master-port`).
    ["Inference"] vllm_master_port / VLLM_MASTER_PORT: Port = "8100";
    /// Tensor-parallel size of each vLLM server; default: all GPUs of a node.
    /// Must divide `GPUS_PER_NODE`; a smaller size runs several servers per node.
    ["Inference"] tensor_parallel_size / TENSOR_PARALLEL_SIZE: Option<u32> = "";
    /// Extra `vllm serve` arguments, appended as given (shell quoting kept).
    ["Inference"] vllm_extra_args / VLLM_EXTRA_ARGS: Args = "";
    /// Container Engine environment (EDF name or path) for inference steps.
    ["Inference"] inference_ce_env / INFERENCE_CE_ENV: Option<String> = "";
    /// High-speed network interface; sets `NCCL_SOCKET_IFNAME` and
    /// `GLOO_SOCKET_IFNAME` for inference steps so workers never fall back to
    /// 127.0.0.1, and the ranks of a multi-node replica meet at rank 0's
    /// address on it (`--master-addr`, `VLLM_HOST_IP`).
    ["Inference"] net_ifname / NET_IFNAME: Option<String> = "";
    /// More `NAME=value` environment for inference steps (NCCL, libfabric),
    /// added to the site profile's: a name set here replaces the site's of
    /// that name, and a value starting `--replace` replaces the whole set.
    ["Inference"] inference_env / INFERENCE_ENV: Assignments = "";
    /// The program that runs vLLM, with any leading arguments (a venv's
    /// `bin/vllm`, or `python -m vllm.entrypoints.cli.main`); `serve …` follows.
    ["Inference"] vllm_command / VLLM_COMMAND: Args = "vllm";
    /// How long a vLLM server may take to load its model and answer `/health`
    /// (large models take many minutes).
    ["Inference"] inference_ready_timeout / INFERENCE_READY_TIMEOUT: TimeLimit = "00:30:00";
    /// How long the ranks of a multi-node replica wait for each other in
    /// distributed operations (`--distributed-timeout-seconds`; PyTorch's
    /// default is 10 minutes, short for a large model loading from a
    /// parallel file system).
    ["Inference"] inference_distributed_timeout / INFERENCE_DISTRIBUTED_TIMEOUT: TimeLimit = "00:30:00";
    /// An OpenAI-compatible endpoint outside the allocation (`http://host:port/v1`),
    /// used instead of planned vLLM servers; needs `INFERENCE_NODES=0`. A key,
    /// if the endpoint wants one, is read from `OPENAI_API_KEY` in the
    /// environment, never from this file.
    ["Inference"] inference_url / INFERENCE_URL: Option<String> = "";

    /// Container Engine environment (EDF name or path) for agent and judge steps.
    ["Roles"] role_ce_env / ROLE_CE_ENV: Option<String> = "";
    /// The hpcagent binary inside the role images: what a step run in a
    /// container (`INFERENCE_CE_ENV`, `ROLE_CE_ENV`) executes.
    ["Roles"] container_exe / CONTAINER_EXE: String = "/opt/hpcagent/bin/hpcagent";
    /// gRPC port of each judge (the n-th judge on a node adds n).
    ["Roles"] judge_port / JUDGE_PORT: Port = "8800";
    /// Grading slots per judge; default: one per GPU, else 1.
    ["Roles"] judge_slots / JUDGE_SLOTS: Option<u32> = "";
    /// Timed pairs a grade makes at least: a call of the baseline and one of
    /// the submission on the same fresh inputs, after a pair to warm up;
    /// 12, six rounds of one pair in each order, are the fewest that can
    /// tell a change. More follow until the verdict is decided
    /// (docs/judge-contract.md, Pairs): the interval `JUDGE_INTERVAL`
    /// narrow, inside 1 ± 2.5%, or clear of that as precisely as its
    /// distance from 1 needs.
    ["Roles"] judge_reps / JUDGE_REPS: u32 = "12";
    /// How narrow a grade measures the speedup's 95% interval at the
    /// finest: its half width, in percent of the speedup. A speedup inside
    /// 1 ± 2.5%, or far from 1, stops before it.
    ["Roles"] judge_interval / JUDGE_INTERVAL: Percent = "1";
    /// Seconds a grade's timed pairs may take, however wide their interval
    /// still is (the verdict shows the interval it got).
    ["Roles"] judge_time_cap / JUDGE_TIME_CAP: u32 = "30";
    /// GiB of cases (inputs and reference outputs) each judge's cache keeps
    /// in the run directory. Beyond it the least recently used go; those of
    /// grades in flight stay. At L one kernel's cases can take 10 GiB or more.
    ["Roles"] judge_case_cache_gib / JUDGE_CASE_CACHE_GIB: u32 = "32";
    /// `strict`: a judge refuses to grade where runs cannot have namespaces
    /// of their own (and, not as root, Landlock), and agents refuse to run
    /// CLIs without Landlock. `weak`: they go on with what the node gives,
    /// and every verdict says what its run lacked.
    ["Roles"] isolation / ISOLATION: Isolation = "strict";
    /// Seconds a launched role has to register with the orchestrator: for
    /// Slurm to start its step, its container image to be imported, its
    /// binary to start. One that has not is stopped and launched again, up to
    /// three times. Raise it for images pulled on first use. At least 10.
    ["Roles"] register_seconds / REGISTER_SECONDS: u32 = "180";
    /// gRPC port of the orchestrator, on the node running the batch script.
    ["Roles"] orchestrator_port / ORCHESTRATOR_PORT: Port = "8700";

    /// The task corpus: a directory of `kernel.toml` kernels (empty:
    /// `HPCAGENT_BENCHMARKS`, else `benchmarks/` here), or an HPCAgent-Bench
    /// checkout's `hpcagent_bench/benchmarks`, whose task ids are the
    /// manifests' path keys.
    ["Campaign"] corpus / CORPUS: Option<AbsPath> = "";
    /// For an HPCAgent-Bench corpus: C baselines, `<path key>/baseline.c`,
    /// that a task with one is timed against instead of what
    /// HPCAgent-Bench times it against (its translator's C on the
    /// loop-level track, which the judges make from the checkout; its NumPy
    /// reference elsewhere). Not needed for HPCAgent-Bench's own numbers.
    /// The baseline policy submits a task's C baseline and skips a task
    /// without one.
    ["Campaign"] baselines / BASELINES: Option<AbsPath> = "";
    /// Kernels to run (names from the corpus). Empty with no
    /// `PROBLEMS_FILE`: the whole corpus.
    ["Campaign"] kernels / KERNELS: List = "";
    /// A file listing the problems instead of `KERNELS`.
    ["Campaign"] problems_file / PROBLEMS_FILE: Option<AbsPath> = "";
    /// Languages each kernel is attempted in.
    ["Campaign"] languages / LANGUAGES: Languages = "c";
    /// Problem-size preset of the public (`Score`) inputs.
    ["Campaign"] preset / PRESET: Preset = "M";
    /// Precision of each task, where the kernel has it (integer kernels keep theirs).
    ["Campaign"] precision / PRECISION: Precision = "fp64";
    /// Independent tasks per kernel and language (samples of the same problem).
    ["Campaign"] repeats / REPEATS: u32 = "1";
    /// Attempts a task gets before it is settled as failed (expired leases,
    /// agents that give up or crash).
    ["Campaign"] max_attempts / MAX_ATTEMPTS: u32 = "3";
    /// Wall-clock budget of one task, shared by all its attempts; no longer
    /// than TIME_LIMIT (the default becomes TIME_LIMIT in a shorter job).
    ["Campaign"] task_budget / TASK_BUDGET: TimeLimit = "00:30:00";
    /// Seconds a lease lives without a heartbeat from its agent.
    ["Campaign"] lease_seconds / LEASE_SECONDS: u32 = "30";
    /// What agents do with a task. `builtin`: the built-in LLM agent (a
    /// tool-calling loop against the inference endpoint). `command`: an
    /// external agent CLI per task (`AGENT_COMMAND`), with `hpcagent mcp` as its
    /// tools. `baseline`: submit the kernel's own baseline: no LLM, proves the
    /// pipeline, calibrates a cluster (speedup ≈ 1).
    ["Agents"] agent_policy / AGENT_POLICY: Policy = "baseline";
    /// The model agents ask for; default: the served name of the planned vLLM
    /// (`VLLM_SERVED_MODEL`, else `VLLM_MODEL`). Needed with `INFERENCE_URL`.
    ["Agents"] llm_model / LLM_MODEL: Option<String> = "";
    /// Model turns (requests) an attempt may take.
    ["Agents"] max_turns / MAX_TURNS: u32 = "40";
    /// Tokens (prompt and completion, summed over turns) an attempt may use.
    ["Agents"] max_tokens / MAX_TOKENS: u32 = "1000000";
    /// Completion tokens one turn may produce.
    ["Agents"] turn_tokens / TURN_TOKENS: u32 = "4096";
    /// `auto`: the model decides whether to call a tool; `required`: every turn
    /// must call one (for models that drift into prose).
    ["Agents"] tool_choice / TOOL_CHOICE: ToolChoice = "auto";
    /// Sampling temperature of the built-in agent.
    ["Agents"] temperature / TEMPERATURE: Ratio = "0.2";
    /// Show agents the profiling pages of `skills/` (instruments, counters).
    ["Agents"] profiling_guidance / PROFILING_GUIDANCE: bool = "false";
    /// The agent CLI the `command` policy runs per task, as a command line.
    /// Placeholders: `{workspace}`, `{prompt_file}`, `{prompt}`, `{model}`,
    /// `{endpoint}` (the OpenAI-compatible base URL), `{anthropic_endpoint}`
    /// (the same server's Anthropic Messages API), `{mcp_config}` (a JSON
    /// file naming `hpcagent mcp` as an MCP server), `{codex_home}` (a Codex
    /// home whose `config.toml` names the model and the tools).
    ["Agents"] agent_command / AGENT_COMMAND: Args = "";
    /// `up` exits 5 when the agents of more than this share of the tasks
    /// failed (could not start, crashed, timed out, ended without
    /// submitting), and whenever all of them did.
    ["Agents"] agent_failure_limit / AGENT_FAILURE_LIMIT: Share = "100";
    /// Web search for agents: `searxng` (a SearXNG-compatible JSON endpoint at
    /// `WEB_SEARCH_URL`), `brave` (the Brave Search API, its key from
    /// `BRAVE_API_KEY` in the environment), or `off`.
    ["Agents"] web_search / WEB_SEARCH: SearchProvider = "off";
    /// Base URL of the SearXNG-compatible endpoint (`…/search?format=json`).
    ["Agents"] web_search_url / WEB_SEARCH_URL: Option<String> = "";

    /// Slurm partition.
    ["Slurm"] partition / PARTITION: Option<String> = "";
    /// The agents' partition (default: `PARTITION`). Where the roles'
    /// partitions differ, `submit` makes one heterogeneous job: a component
    /// per partition, each with its own node count, GPUs and flags.
    ["Slurm"] agent_partition / AGENT_PARTITION: Option<String> = "";
    /// The judges' partition (default: `PARTITION`); see `AGENT_PARTITION`.
    ["Slurm"] judge_partition / JUDGE_PARTITION: Option<String> = "";
    /// The inference servers' partition (default: `PARTITION`); see
    /// `AGENT_PARTITION`.
    ["Slurm"] inference_partition / INFERENCE_PARTITION: Option<String> = "";
    /// Slurm account to charge.
    ["Slurm"] account / ACCOUNT: Option<String> = "";
    /// Wall-clock limit of the job.
    ["Slurm"] time_limit / TIME_LIMIT: TimeLimit = "01:00:00";
    /// Slurm job name.
    ["Slurm"] job_name / JOB_NAME: String = "hpcagent";
    /// Seconds before the time limit at which Slurm sends USR1 to start the
    /// drain (`--signal=B:USR1@N`; Slurm delivers it up to 30 s earlier).
    ["Slurm"] drain_seconds / DRAIN_SECONDS: u32 = "300";
    /// Jobs one `submit` may run as a chain: when the time limit drains a
    /// campaign with work left, the job submits its successor itself
    /// (`--dependency=afterany:<job>`, the same configuration, resuming the
    /// same run directory), until the campaign finishes or this many jobs
    /// have run. `1`: no chain; the drained job names `submit --resume`.
    ["Slurm"] max_jobs / MAX_JOBS: u32 = "1";

    /// Directory under which each run gets its own directory.
    ["Paths"] run_root / RUN_ROOT: AbsPath = "runs";
    /// Allow the results database on a memory filesystem (tmpfs, ramfs), where
    /// it vanishes with the node and takes RAM from the measured runs.
    ["Paths"] allow_memory_db / ALLOW_MEMORY_DB: bool = "false";
}

/// The key of this name, if there is one.
pub fn find(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.name == name)
}

/// The valid key most like `name`, for "did you mean" hints.
pub fn nearest(name: &str) -> Option<&'static str> {
    crate::words::nearest(&name.to_ascii_uppercase(), KEYS.iter().map(|k| k.name))
}

/// The reason an unknown key is refused, with a suggestion where one is close.
pub fn unknown_key_message(name: &str) -> String {
    match nearest(name) {
        Some(key) => format!("unknown key; did you mean {key}?"),
        None => "unknown key (see docs/env-file.md for the list)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses() {
        let settings = Settings::parse(&|key| find(key).unwrap().default.to_string());
        assert!(settings.is_ok(), "{:?}", settings.err());
    }

    #[test]
    fn suggestions() {
        assert_eq!(nearest("AGENT_NODE"), Some("AGENT_NODES"));
        assert_eq!(nearest("agents_per_nodes"), Some("AGENTS_PER_NODE"));
        assert_eq!(nearest("VLLM_MODLE"), Some("VLLM_MODEL"));
        assert_eq!(nearest("COMPLETELY_DIFFERENT_THING"), None);
    }
}

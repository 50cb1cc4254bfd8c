//! Campaign configuration: layered, typed, validated, with provenance.
//!
//! Layers, lowest first, merged with figment: built-in defaults < site profile
//! (`SITE`) < env file < `HPCAGENT_<KEY>` process variables < command-line
//! flags. Every layer supplies text; the key table ([`keys`]) types it. Every
//! value remembers where it came from, so `hpcagent config` can show it and
//! every error can point at the file, line and key to fix.
//!
//! This module owns what the configuration *says*. Whether it fits an
//! allocation is the placement module's question.

mod diagnostic;
pub mod docs;
mod envfile;
pub mod keys;
pub mod site;
pub mod values;

use std::path::{Path, PathBuf};

use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};

pub use diagnostic::{ConfigError, Diagnostic, Origin};
pub use envfile::EnvFile;
pub use keys::{KEYS, KeySpec, Settings};
pub use values::{Isolation, Policy, SearchProvider, Site, ToolChoice};

/// Prefix of process variables that override keys: `HPCAGENT_AGENT_NODES=3`.
pub const ENV_PREFIX: &str = "HPCAGENT_";

/// One value set on the command line, e.g. `--set AGENT_NODES=2` or `--gpus-per-node 4`.
#[derive(Debug, Clone)]
pub struct Override {
    /// The flag as the user wrote it, for messages.
    pub flag: String,
    pub key: String,
    pub value: String,
}

/// Everything configuration is read from.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub env_file: Option<PathBuf>,
    /// The process environment: `${VAR}` expansion and the `HPCAGENT_*` layer.
    pub process_env: Vec<(String, String)>,
    pub overrides: Vec<Override>,
}

impl Sources {
    /// Sources with the real process environment.
    pub fn from_process(env_file: Option<PathBuf>, overrides: Vec<Override>) -> Sources {
        Sources {
            env_file,
            process_env: std::env::vars().collect(),
            overrides,
        }
    }

    fn var(&self, name: &str) -> Option<String> {
        self.process_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

/// A key's resolved text and where it came from.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub key: &'static str,
    pub text: String,
    pub origin: Origin,
}

/// The resolved configuration: typed settings plus provenance of every key.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    pub env_file: Option<PathBuf>,
    resolved: Vec<Resolved>,
}

impl Config {
    /// Every key in table order, with its text and origin.
    pub fn resolved(&self) -> &[Resolved] {
        &self.resolved
    }

    /// Where `key`'s value came from.
    pub fn origin(&self, key: &str) -> Origin {
        self.resolved
            .iter()
            .find(|r| r.key == key)
            .map(|r| r.origin.clone())
            .unwrap_or(Origin::Default)
    }

    /// A problem with `key`, located where its value was set.
    pub fn diagnostic(&self, key: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(self.origin(key), Some(key.to_string()), message)
    }

    /// The configuration as an env file that resolves to the same settings.
    pub fn to_env_file(&self) -> String {
        let mut out =
            String::from("# Resolved by hpcagent; each value notes where it came from.\n");
        for r in &self.resolved {
            out.push_str(&format!("{}={}  # {}\n", r.key, quote(&r.text), r.origin));
        }
        out
    }

    /// The name vLLM serves the model under.
    pub fn served_model(&self) -> &str {
        let s = &self.settings;
        s.vllm_served_model.as_deref().unwrap_or(&s.vllm_model)
    }

    /// Whether leases name an inference replica: built-in agents always
    /// use one; external agent CLIs when the campaign has one (otherwise
    /// they bring their own model).
    pub fn agents_use_inference(&self) -> bool {
        let s = &self.settings;
        let planned = self.inference().replicas > 0 || s.inference_url.is_some();
        match s.agent_policy {
            Policy::Builtin => true,
            Policy::Command => planned,
            Policy::Baseline => false,
        }
    }

    /// The model agents ask for.
    pub fn llm_model(&self) -> &str {
        self.settings
            .llm_model
            .as_deref()
            .unwrap_or_else(|| self.served_model())
    }

    /// Inference nodes in total, replicas and nodes per replica, as validated.
    pub fn inference(&self) -> InferenceShape {
        inference_shape(&self.settings).expect("validated when the config was resolved")
    }

    /// The nodes of their own a role is given: colocated judges have none
    /// (they share the agents'). The one count the plan, the batch job
    /// and a heterogeneous job's components are made from.
    pub fn nodes_of(&self, role: crate::plan::Role) -> u32 {
        use crate::plan::Role;
        let s = &self.settings;
        match role {
            Role::Inference => self.inference().nodes(),
            Role::Agent => s.agent_nodes,
            Role::Judge if s.colocate_judges => 0,
            Role::Judge => s.judge_nodes,
        }
    }

    /// The nodes the configuration asks for, all roles together.
    pub fn node_total(&self) -> u32 {
        use crate::plan::Role;
        [Role::Inference, Role::Agent, Role::Judge]
            .into_iter()
            .map(|role| self.nodes_of(role))
            .sum()
    }
}

/// How the inference nodes are grouped into vLLM replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferenceShape {
    pub replicas: u32,
    pub nodes_per_replica: u32,
}

impl InferenceShape {
    pub fn nodes(&self) -> u32 {
        self.replicas * self.nodes_per_replica
    }
}

/// Resolves every layer into a validated configuration, or every problem found.
pub fn resolve(sources: &Sources) -> Result<Config, ConfigError> {
    let mut errors = Vec::new();
    let lookup = |name: &str| sources.var(name);
    let file = match &sources.env_file {
        Some(path) => match EnvFile::load(path, &lookup) {
            Ok((file, diagnostics)) => {
                errors.extend(diagnostics);
                Some(file)
            }
            Err(diagnostic) => {
                errors.push(diagnostic);
                None
            }
        },
        None => None,
    };

    let file_layer = file.as_ref().map(|f| file_layer(f, &mut errors));
    let process_layer = process_layer(sources);
    let cli_layer = cli_layer(&sources.overrides, &mut errors);

    let site_choice = [&cli_layer, &process_layer]
        .into_iter()
        .chain(file_layer.as_ref())
        .find_map(|layer| layer.get("SITE"));
    let site = match site_choice {
        Some((text, origin)) => values::ConfigValue::parse(text).unwrap_or_else(|reason| {
            errors.push(Diagnostic::new(origin.clone(), Some("SITE".into()), reason));
            Site::Local
        }),
        None => Site::Local,
    };

    let mut figment = Figment::new()
        .merge(defaults_layer())
        .merge(site_layer(site));
    if let Some(layer) = &file_layer {
        figment = figment.merge(layer);
    }
    let figment = figment.merge(&process_layer).merge(&cli_layer);
    let layers: Vec<&Layer> = [&process_layer, &cli_layer]
        .into_iter()
        .chain(file_layer.as_ref())
        .collect();
    let mut resolved: Vec<Resolved> = KEYS
        .iter()
        .map(|spec| resolve_key(&figment, spec, site, &layers))
        .collect();

    errors.extend(resolved.iter().filter_map(control_character));
    merge_site_variables(&mut resolved, site);

    let text = |key: &'static str| {
        resolved
            .iter()
            .find(|r| r.key == key)
            .map(|r| r.text.clone())
            .unwrap_or_default()
    };
    let origin_of = |key: &str| {
        resolved
            .iter()
            .find(|r| r.key == key)
            .map(|r| r.origin.clone())
            .unwrap_or(Origin::Default)
    };
    let settings = match Settings::parse(&text) {
        Ok((settings, canonical)) => {
            for (r, (_, text)) in resolved.iter_mut().zip(canonical) {
                r.text = text;
            }
            Some(settings)
        }
        Err(refusals) => {
            for (key, reason) in refusals {
                // SITE was parsed (and refused) already, to choose the profile.
                if errors.iter().any(|e| e.key.as_deref() == Some(key)) {
                    continue;
                }
                errors.push(Diagnostic::new(origin_of(key), Some(key.into()), reason));
            }
            None
        }
    };
    if let Some(mut settings) = settings
        && errors.is_empty()
    {
        cap_default_budget(&mut settings, &mut resolved);
        let config = Config {
            settings,
            env_file: sources.env_file.clone(),
            resolved,
        };
        errors.extend(validate(&config));
        if errors.is_empty() {
            return Ok(config);
        }
    }
    Err(ConfigError(errors))
}

/// The built-in TASK_BUDGET outlasts a short job: it becomes the job's
/// TIME_LIMIT, so that the resolved value (which `env.resolved` carries
/// into the job, where it reads as set) passes the budget's own check.
fn cap_default_budget(settings: &mut Settings, resolved: &mut [Resolved]) {
    if settings.task_budget.seconds <= settings.time_limit.seconds {
        return;
    }
    let Some(budget) = resolved.iter_mut().find(|r| r.key == "TASK_BUDGET") else {
        return;
    };
    if budget.origin == Origin::Default {
        settings.task_budget = settings.time_limit.clone();
        budget.text = settings.time_limit.text.clone();
    }
}

/// What the `command` policy fills in `AGENT_COMMAND`.
pub const AGENT_COMMAND_PLACEHOLDERS: [&str; 8] = [
    "workspace",
    "prompt_file",
    "prompt",
    "model",
    "endpoint",
    "anthropic_endpoint",
    "mcp_config",
    "codex_home",
];

/// The `{name}`s of a command line that are no placeholder: left as they
/// are, they would reach the CLI literally. Braces around anything but a
/// lowercase name (JSON, say) are not placeholders.
fn unknown_placeholders(command: &[String]) -> Vec<String> {
    let mut unknown = Vec::new();
    for arg in command {
        let mut rest = arg.as_str();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else { break };
            let name = &after[..close];
            let looks_like_one =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_');
            if looks_like_one && !AGENT_COMMAND_PLACEHOLDERS.contains(&name) {
                unknown.push(name.to_string());
            }
            rest = &after[close + 1..];
        }
    }
    unknown
}

/// Rules that involve more than one key.
fn validate(config: &Config) -> Vec<Diagnostic> {
    let s = &config.settings;
    let mut errors = Vec::new();
    let mut require = |ok: bool, key: &str, message: String| {
        if !ok {
            errors.push(config.diagnostic(key, message));
        }
    };
    if let Err((key, message)) = inference_shape(s) {
        require(false, key, message);
    }
    let inference_nodes = inference_shape(s).map(|i| i.nodes()).unwrap_or(0);
    require(
        s.agent_nodes > 0,
        "AGENT_NODES",
        "a campaign needs at least 1 agent node".into(),
    );
    require(
        s.agents_per_node > 0,
        "AGENTS_PER_NODE",
        "must be at least 1".into(),
    );
    require(s.repeats > 0, "REPEATS", "must be at least 1".into());
    require(
        s.max_attempts > 0,
        "MAX_ATTEMPTS",
        "must be at least 1".into(),
    );
    require(
        s.lease_seconds >= 5,
        "LEASE_SECONDS",
        format!(
            "{} s is too short for a heartbeat to renew it; use 5 or more",
            s.lease_seconds
        ),
    );
    require(
        s.register_seconds >= 10,
        "REGISTER_SECONDS",
        format!(
            "{} s is too short for a step to start and register; use 10 or more",
            s.register_seconds
        ),
    );
    require(
        s.judges_per_node > 0,
        "JUDGES_PER_NODE",
        "must be at least 1".into(),
    );
    require(
        !(s.colocate_judges && s.judge_nodes > 0),
        "JUDGE_NODES",
        format!(
            "is {} but COLOCATE_JUDGES=true puts the judges on the agent nodes; set JUDGE_NODES=0",
            s.judge_nodes
        ),
    );
    require(
        s.colocate_judges || s.judge_nodes > 0,
        "JUDGE_NODES",
        "a campaign needs judges: set JUDGE_NODES to 1 or more, or COLOCATE_JUDGES=true".into(),
    );
    require(
        s.judge_cpus.is_none() || s.colocate_judges,
        "JUDGE_CPUS",
        "only applies with COLOCATE_JUDGES=true (judges on nodes of their own get the whole node)"
            .into(),
    );
    require(
        inference_nodes == 0 || !s.vllm_model.trim().is_empty(),
        "VLLM_MODEL",
        format!(
            "is empty but {inference_nodes} inference node(s) are planned; name the model to serve"
        ),
    );
    require(
        s.inference_url.is_none() || inference_nodes == 0,
        "INFERENCE_URL",
        format!(
            "names an outside endpoint but {inference_nodes} inference node(s) are planned; \
             set INFERENCE_NODES=0, or leave INFERENCE_URL empty"
        ),
    );
    require(
        s.inference_url
            .as_deref()
            .is_none_or(|u| u.starts_with("http://") || u.starts_with("https://")),
        "INFERENCE_URL",
        "must start with http:// or https:// (e.g. http://host:8000/v1)".into(),
    );
    require(
        s.agent_policy != Policy::Builtin || inference_nodes > 0 || s.inference_url.is_some(),
        "AGENT_POLICY",
        "builtin agents need an LLM: plan inference nodes (INFERENCE_NODES) or name an \
         endpoint (INFERENCE_URL)"
            .into(),
    );
    require(
        s.inference_url.is_none() || s.llm_model.is_some(),
        "LLM_MODEL",
        "is empty; with INFERENCE_URL, name the model agents ask the endpoint for".into(),
    );
    require(
        s.agent_policy != Policy::Command || !s.agent_command.0.is_empty(),
        "AGENT_COMMAND",
        "is empty; AGENT_POLICY=command runs it for every task".into(),
    );
    if s.agent_policy == Policy::Command {
        for unknown in unknown_placeholders(&s.agent_command.0) {
            require(
                false,
                "AGENT_COMMAND",
                format!(
                    "{{{unknown}}} is no placeholder (they are {})",
                    AGENT_COMMAND_PLACEHOLDERS
                        .map(|p| format!("{{{p}}}"))
                        .join(", ")
                ),
            );
        }
        let path = std::env::var("PATH").unwrap_or_default();
        let hidden = crate::hidden::node_temporaries();
        if let Some((file, dir)) = crate::hidden::needs_hidden(&s.agent_command.0, &path, &hidden) {
            require(
                false,
                "AGENT_COMMAND",
                format!(
                    "needs {file}, in {}, which the agent sandbox hides from CLIs (with /tmp, \
                     /var/tmp, /dev/shm and /run); install the CLI and its files where \
                     the roles' containers mount them and the sandbox does not hide them \
                     (on Alps and Beverin, under $SCRATCH: docs/operator-guide.md)",
                    dir.display()
                ),
            );
        }
    }
    require(
        s.web_search != SearchProvider::Searxng || s.web_search_url.is_some(),
        "WEB_SEARCH_URL",
        "is empty; WEB_SEARCH=searxng needs the endpoint's base URL".into(),
    );
    require(s.max_turns > 0, "MAX_TURNS", "must be at least 1".into());
    require(
        s.turn_tokens >= 16,
        "TURN_TOKENS",
        format!(
            "{} tokens cannot hold a tool call; use 16 or more",
            s.turn_tokens
        ),
    );
    require(
        s.kernels.0.is_empty() || s.problems_file.is_none(),
        "PROBLEMS_FILE",
        "give KERNELS or PROBLEMS_FILE, not both".into(),
    );
    if let Some(path) = &s.corpus {
        require(
            path.0.is_dir(),
            "CORPUS",
            format!("{} is not a directory", path.0.display()),
        );
    }
    if let Some(path) = &s.baselines {
        require(
            path.0.is_dir(),
            "BASELINES",
            format!("{} is not a directory", path.0.display()),
        );
    }
    if let Some(path) = &s.problems_file {
        require(
            path.0.is_file(),
            "PROBLEMS_FILE",
            format!("{} does not exist", path.0.display()),
        );
    }
    require(
        s.max_jobs >= 1,
        "MAX_JOBS",
        "a campaign runs in at least one job".into(),
    );
    if let Some(max) = site::gpus_per_node_max(s.site) {
        require(
            s.gpus_per_node <= max,
            "GPUS_PER_NODE",
            format!(
                "is {} but a node of SITE={} has {max}",
                s.gpus_per_node,
                s.site.as_str()
            ),
        );
    }
    // A budget the operator set longer than the job is a mistake (often
    // seconds written as Slurm reads minutes); the default is capped.
    let bare = !s.task_budget.text.contains([':', '-']);
    require(
        s.task_budget.seconds <= s.time_limit.seconds,
        "TASK_BUDGET",
        format!(
            "{} is {}{}, longer than the job's TIME_LIMIT={}; a task cannot use more than \
             one job's time",
            s.task_budget.text,
            clock(s.task_budget.seconds),
            if bare {
                " (Slurm's rule: a bare number is minutes)"
            } else {
                ""
            },
            s.time_limit.text
        ),
    );
    require(
        u64::from(s.drain_seconds) < s.time_limit.seconds,
        "DRAIN_SECONDS",
        format!(
            "{} s is not shorter than TIME_LIMIT={} ({} s)",
            s.drain_seconds, s.time_limit.text, s.time_limit.seconds
        ),
    );
    errors
}

/// `seconds` as Slurm writes a time: `[D-]HH:MM:SS`.
fn clock(seconds: u64) -> String {
    let (days, rest) = (seconds / 86400, seconds % 86400);
    let hms = format!(
        "{:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    );
    if days > 0 {
        format!("{days}-{hms}")
    } else {
        hms
    }
}

/// Reconciles INFERENCE_NODES, INFERENCE_REPLICAS and NODES_PER_REPLICA.
fn inference_shape(s: &Settings) -> Result<InferenceShape, (&'static str, String)> {
    let per = s.nodes_per_replica;
    if per == 0 {
        return Err(("NODES_PER_REPLICA", "must be at least 1".into()));
    }
    let replicas = match (s.inference_nodes, s.inference_replicas) {
        (None, None) => 0,
        (None, Some(r)) => r,
        (Some(n), None) if n % per == 0 => n / per,
        (Some(n), None) => {
            return Err((
                "INFERENCE_NODES",
                format!("{n} nodes cannot be split into replicas of NODES_PER_REPLICA={per}"),
            ));
        }
        (Some(n), Some(r)) if n == r * per => r,
        (Some(n), Some(r)) => {
            return Err((
                "INFERENCE_NODES",
                format!(
                    "is {n} but INFERENCE_REPLICAS × NODES_PER_REPLICA = {r} × {per} = {}",
                    r * per
                ),
            ));
        }
    };
    Ok(InferenceShape {
        replicas,
        nodes_per_replica: per,
    })
}

fn resolve_key(figment: &Figment, spec: &KeySpec, site: Site, layers: &[&Layer]) -> Resolved {
    let text = figment
        .find_value(spec.name)
        .ok()
        .and_then(|v| v.into_string())
        .unwrap_or_default();
    let origin = match figment.find_metadata(spec.name).map(|m| m.name.as_ref()) {
        Some(SITE_LAYER) => Origin::Site(site.as_str()),
        Some(name) => layers
            .iter()
            .find(|l| l.name == name)
            .and_then(|l| l.get(spec.name))
            .map(|(_, origin)| origin.clone())
            .unwrap_or(Origin::Default),
        None => Origin::Default,
    };
    Resolved {
        key: spec.name,
        text,
        origin,
    }
}

const DEFAULT_LAYER: &str = "defaults";
const SITE_LAYER: &str = "site";
const FILE_LAYER: &str = "env file";
const PROCESS_LAYER: &str = "process environment";
const CLI_LAYER: &str = "command line";

/// One configuration layer as figment sees it: key → text, each with an origin.
struct Layer {
    name: &'static str,
    values: Vec<(String, String, Origin)>,
}

impl Layer {
    fn get(&self, key: &str) -> Option<(&str, &Origin)> {
        self.values
            .iter()
            .rev()
            .find(|(k, _, _)| k == key)
            .map(|(_, text, origin)| (text.as_str(), origin))
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name)
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let dict: Dict = self
            .values
            .iter()
            .map(|(key, text, _)| (key.clone(), Value::from(text.clone())))
            .collect();
        Ok(Profile::Default.collect(dict))
    }
}

fn defaults_layer() -> Layer {
    Layer {
        name: DEFAULT_LAYER,
        values: KEYS
            .iter()
            .map(|k| (k.name.to_string(), k.default.to_string(), Origin::Default))
            .collect(),
    }
}

fn site_layer(site: Site) -> Layer {
    Layer {
        name: SITE_LAYER,
        values: site::profile(site)
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string(), Origin::Site(site.as_str())))
            .collect(),
    }
}

fn file_layer(file: &EnvFile, errors: &mut Vec<Diagnostic>) -> Layer {
    let mut values = Vec::new();
    for entry in &file.entries {
        let origin = Origin::file(&file.path, entry.line);
        if keys::find(&entry.key).is_none() {
            errors.push(Diagnostic::new(
                origin,
                Some(entry.key.clone()),
                keys::unknown_key_message(&entry.key),
            ));
            continue;
        }
        values.push((entry.key.clone(), entry.value.clone(), origin));
    }
    Layer {
        name: FILE_LAYER,
        values,
    }
}

/// `HPCAGENT_<KEY>` variables. Other `HPCAGENT_*` variables (role tokens, the
/// sandbox directory) are not configuration keys and are left alone.
fn process_layer(sources: &Sources) -> Layer {
    let values = sources
        .process_env
        .iter()
        .filter_map(|(var, text)| {
            let key = var.strip_prefix(ENV_PREFIX)?;
            keys::find(key).map(|spec| {
                (
                    spec.name.to_string(),
                    text.clone(),
                    Origin::Process(var.clone()),
                )
            })
        })
        .collect();
    Layer {
        name: PROCESS_LAYER,
        values,
    }
}

fn cli_layer(overrides: &[Override], errors: &mut Vec<Diagnostic>) -> Layer {
    let mut values = Vec::new();
    for o in overrides {
        let origin = Origin::Cli(o.flag.clone());
        if keys::find(&o.key).is_none() {
            errors.push(Diagnostic::new(
                origin,
                Some(o.key.clone()),
                keys::unknown_key_message(&o.key),
            ));
            continue;
        }
        values.push((o.key.clone(), o.value.clone(), origin));
    }
    Layer {
        name: CLI_LAYER,
        values,
    }
}

/// A value must be one line of text: `env.resolved` carries each value to
/// the roles on a line of its own, and a line break inside one would make
/// the rest a setting of its own there, past every check made here.
fn control_character(r: &Resolved) -> Option<Diagnostic> {
    let c = r.text.chars().find(|c| c.is_control() && *c != '\t')?;
    let what = if matches!(c, '\n' | '\r') {
        "a line break"
    } else {
        "a control character"
    };
    Some(Diagnostic::new(
        r.origin.clone(),
        Some(r.key.into()),
        format!("the value holds {what} ({c:?}); a value is one line of text"),
    ))
}

/// Keys whose site value is a set of variables (the interconnect's): an
/// env file that sets one adds to the site's set, each variable it names
/// replacing the site's of that name, unless its value starts with
/// [`REPLACE`]. Replacing by default dropped `FI_PROVIDER=cxi` and the other
/// Slingshot settings from a line that only meant to add `NCCL_DEBUG=INFO`.
const MERGED_WITH_SITE: [&str; 1] = ["INFERENCE_ENV"];
/// The first word of a value that replaces the site's set instead.
const REPLACE: &str = "--replace";

fn merge_site_variables(resolved: &mut [Resolved], site: Site) {
    for r in resolved.iter_mut() {
        if !MERGED_WITH_SITE.contains(&r.key)
            || matches!(r.origin, Origin::Site(_) | Origin::Default)
        {
            continue;
        }
        let Some((_, site_text)) = site::profile(site).iter().find(|(k, _)| *k == r.key) else {
            continue;
        };
        // A value that does not split is refused by its parser later.
        let (Ok(site_words), Ok(words)) =
            (shell_words::split(site_text), shell_words::split(&r.text))
        else {
            continue;
        };
        if words.first().map(String::as_str) == Some(REPLACE) {
            r.text = shell_words::join(&words[1..]);
            continue;
        }
        let name = |word: &str| word.split_once('=').map(|(n, _)| n.to_string());
        let set_here: Vec<Option<String>> = words.iter().map(|w| name(w)).collect();
        let kept = site_words
            .into_iter()
            .filter(|w| !set_here.contains(&name(w)));
        r.text = shell_words::join(kept.chain(words));
    }
}

/// Quotes a value for an env file: single quotes unless it needs none.
fn quote(text: &str) -> String {
    if crate::words::is_plain(text) {
        text.to_string()
    } else if !text.contains('\'') {
        format!("'{text}'")
    } else {
        let escaped = text
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('$', "\\$");
        format!("\"{escaped}\"")
    }
}

/// Resolves a configuration from an env file path (if any), the process
/// environment and command-line overrides: the usual entry point of commands.
pub fn load(env_file: Option<&Path>, overrides: Vec<Override>) -> Result<Config, ConfigError> {
    resolve(&Sources::from_process(
        env_file.map(Path::to_path_buf),
        overrides,
    ))
}

#[cfg(test)]
mod tests;

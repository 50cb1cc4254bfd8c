//! What a run was: the identity `results --format json`, the report's
//! page and `compare` put above its tasks, so that two runs can be told
//! apart and compared: its agents (policy, model, command), its tasks
//! (preset, languages, corpus and its version), its nodes per role and the
//! jobs of its chain, its isolation, the hpcagent that ran it, and the
//! resolved configuration it ran with.
//!
//! Read from what the run directory keeps (the store's campaign row, its
//! `plan.json`, the chain's record); secrets are redacted from the command
//! and the configuration before they are shown.

use std::collections::BTreeMap;
use std::path::Path;

use hpcagent_orchestrator::slurm::chain;
use hpcagent_orchestrator::store::CampaignRow;
use serde::Serialize;

/// A run's identity.
#[derive(Debug, Clone, Serialize)]
pub struct RunIdentity {
    pub campaign: Option<String>,
    /// running | finished | drained | interrupted | failed
    pub state: Option<String>,
    pub started_at: Option<f64>,
    pub ended_at: Option<f64>,
    pub site: Option<String>,
    pub policy: Option<String>,
    /// The model agents asked for: `LLM_MODEL`, else the served name.
    pub model: Option<String>,
    /// `AGENT_COMMAND`, its secrets redacted.
    pub agent_command: Option<String>,
    pub preset: Option<String>,
    pub languages: Option<String>,
    /// `CORPUS`, else the planned corpus.
    pub corpus: Option<String>,
    /// The commit of the checkout holding the corpus when the run began
    /// (`-dirty` when changed); empty where unknown.
    pub corpus_version: String,
    pub isolation: Option<String>,
    /// The hpcagent version that ran it (empty for stores from before).
    pub hpcagent: String,
    /// Nodes each role ran on (inference, agent, judge).
    pub nodes: BTreeMap<String, usize>,
    /// The jobs of the run's chain, in order.
    pub jobs: Vec<String>,
    /// The resolved configuration, as `hpcagent config` prints it, secrets
    /// redacted.
    pub config: String,
}

impl RunIdentity {
    /// The identity of the run in `run_dir` whose campaign row is at hand.
    pub fn of(run_dir: &Path, campaign: Option<&CampaignRow>) -> RunIdentity {
        let config = campaign
            .as_ref()
            .map(|c| c.config.clone())
            .unwrap_or_default();
        let values = values(&config);
        let get = |key: &str| values.get(key).filter(|v| !v.is_empty()).cloned();
        let plan = read_plan(run_dir);
        RunIdentity {
            campaign: campaign.map(|c| c.id.clone()),
            state: campaign.map(|c| c.state.clone()),
            started_at: campaign.map(|c| c.started_at),
            ended_at: campaign.and_then(|c| c.ended_at),
            site: get("SITE"),
            policy: get("AGENT_POLICY"),
            model: get("LLM_MODEL")
                .or_else(|| get("VLLM_SERVED_MODEL"))
                .or_else(|| get("VLLM_MODEL")),
            agent_command: get("AGENT_COMMAND").map(|c| redact_words(&c)),
            preset: get("PRESET"),
            languages: get("LANGUAGES"),
            corpus: get("CORPUS").or_else(|| {
                plan.as_ref()
                    .map(|p| p.corpus.display().to_string())
                    .filter(|c| !c.is_empty())
            }),
            isolation: get("ISOLATION"),
            corpus_version: campaign
                .map(|c| c.corpus_version.clone())
                .unwrap_or_default(),
            hpcagent: campaign
                .map(|c| c.hpcagent_version.clone())
                .unwrap_or_default(),
            nodes: plan.as_ref().map(nodes_per_role).unwrap_or_default(),
            jobs: chain::read(run_dir).into_iter().map(|l| l.job).collect(),
            config: redact_config(&config),
        }
    }
}

pub(crate) fn read_plan(run_dir: &Path) -> Option<hpcagent_common::plan::Plan> {
    let text = std::fs::read_to_string(run_dir.join("plan.json")).ok()?;
    serde_json::from_str(&text).ok()
}

fn nodes_per_role(plan: &hpcagent_common::plan::Plan) -> BTreeMap<String, usize> {
    let mut nodes: BTreeMap<String, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for instance in &plan.instances {
        let role = format!("{:?}", instance.role).to_lowercase();
        let set = nodes.entry(role).or_default();
        set.extend(instance.nodes.iter().map(String::as_str));
    }
    nodes
        .into_iter()
        .map(|(role, set)| (role, set.len()))
        .collect()
}

/// `KEY=value` of an env file's lines (`KEY=value  # origin`), unquoted.
pub(crate) fn values(config: &str) -> BTreeMap<String, String> {
    config
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(key, rest)| {
            let value = rest.split("  #").next().unwrap_or_default().trim();
            let value = shell_words::split(value)
                .map(|words| words.join(" "))
                .unwrap_or_else(|_| value.to_string());
            (key.trim().to_string(), value)
        })
        .collect()
}

/// Whether a name says it holds a secret.
fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["key", "token", "secret", "password"]
        .iter()
        .any(|s| name.contains(s))
}

/// A command line with the value of every secret-named option or
/// assignment replaced: `--api-key X`, `--token=X`, `OPENAI_API_KEY=X`.
fn redact_words(command: &str) -> String {
    let words: Vec<&str> = command.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    let mut hide_next = false;
    for word in words {
        if std::mem::take(&mut hide_next) {
            out.push("***".to_string());
            continue;
        }
        match word.split_once('=') {
            Some((name, _)) if secret_name(name) => out.push(format!("{name}=***")),
            None if word.starts_with('-') && secret_name(word) => {
                out.push(word.to_string());
                hide_next = true;
            }
            _ => out.push(word.to_string()),
        }
    }
    out.join(" ")
}

/// The configuration with the values of secret-named keys redacted, and
/// secrets inside a command's words.
fn redact_config(config: &str) -> String {
    config
        .lines()
        .map(|line| match line.split_once('=') {
            Some((key, _)) if secret_name(key) => format!("{key}=***"),
            Some((key, rest)) if key == "AGENT_COMMAND" => format!("{key}={}", redact_words(rest)),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_the_command_and_the_configuration() {
        assert_eq!(
            redact_words("cli --api-key sk-1 --token=t2 OPENAI_API_KEY=k3 -p {prompt}"),
            "cli --api-key *** --token=*** OPENAI_API_KEY=*** -p {prompt}"
        );
        let config = "AGENT_POLICY=command  # run.env:1\nBRAVE_API_KEY=b\nAGENT_COMMAND='cli --api-key sk-1'";
        let redacted = redact_config(config);
        assert!(
            !redacted.contains("sk-1") && !redacted.contains("=b"),
            "{redacted}"
        );
        assert!(redacted.contains("AGENT_POLICY=command"), "{redacted}");
    }

    #[test]
    fn values_are_read_unquoted_without_their_origin() {
        let values = values(
            "LANGUAGES=c,cpp  # run.env:3\nAGENT_COMMAND='claude -p {prompt}'  # run.env:4\n",
        );
        assert_eq!(values["LANGUAGES"], "c,cpp");
        assert_eq!(values["AGENT_COMMAND"], "claude -p {prompt}");
    }
}

//! What an external agent CLI is configured with: the MCP configuration
//! that names this attempt's tool server (`mcp.json`, the `mcpServers`
//! form Claude Code and most MCP clients read), and a Codex home whose
//! `config.toml` names the same server under `mcp_servers` and the
//! campaign's model as its provider (Codex reads TOML, not the JSON file).
//!
//! Both carry the attempt's secret, so both are written for the CLI alone.
//! Beside them, [`cli_variables`] is what the CLIs are told through their
//! environment.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::json;

use crate::tool_server::SECRET_VAR;

/// The MCP configuration that starts `hpcagent mcp` on this attempt's tool
/// server, with the attempt's secret.
pub fn mcp_json(exe: &Path, tools: SocketAddr, secret: &str) -> String {
    let config = json!({"mcpServers": {"hpcagent": server(exe, tools, secret)}});
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// Codex's `config.toml`: the same server, and the lease's replica as the
/// model provider (its Responses API, which vLLM serves).
pub fn codex_toml(
    exe: &Path,
    tools: SocketAddr,
    secret: &str,
    model: &str,
    endpoint: &str,
) -> String {
    // Without `required`, a Codex whose tools fail to start works on
    // without them and exits 0, as if it had found nothing to submit.
    let mut codex_server = server(exe, tools, secret);
    codex_server["required"] = json!(true);
    let config = json!({
        "model": model,
        "model_provider": "hpcagent",
        "model_providers": {"hpcagent": {
            "name": "the campaign's inference",
            "base_url": endpoint,
            "env_key": "OPENAI_API_KEY",
            "wire_api": "responses",
        }},
        "mcp_servers": {"hpcagent": codex_server},
        // Nothing but the model and the tools: the sandbox refuses any
        // other host, and an attempt has nothing to tell one.
        "check_for_update_on_startup": false,
        "analytics": {"enabled": false},
        "feedback": {"enabled": false},
        // OpenAI's hosted search means nothing to the campaign's vLLM;
        // `WEB_SEARCH` decides whether the agent searches, through its tools.
        "web_search": "disabled",
    });
    toml::to_string(&config).unwrap_or_default()
}

/// The CLIs' variables beside the endpoints: their configuration homes in
/// the attempt's scratch (the sandbox leaves the user's home read-only, and
/// a CLI that cannot write its settings or sessions fails), the campaign's
/// tools offered to the model directly, and no traffic but the model's.
pub fn cli_variables(scratch: &Path, codex_home: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("CODEX_HOME", codex_home.display().to_string()),
        (
            "CLAUDE_CONFIG_DIR",
            scratch.join("claude").display().to_string(),
        ),
        // Claude Code otherwise defers MCP tools behind its ToolSearch tool:
        // a model that never searches never sees `task` or `submit`.
        ("ENABLE_TOOL_SEARCH", "false".into()),
        // No update checks, telemetry or error reports.
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ]
}

fn server(exe: &Path, tools: SocketAddr, secret: &str) -> serde_json::Value {
    json!({
        "command": exe.display().to_string(),
        "args": ["mcp", "--tools", tools.to_string()],
        "env": {SECRET_VAR: secret},
    })
}

/// The Anthropic Messages API of the same server: vLLM serves
/// `/v1/messages` beside its OpenAI routes, and Anthropic clients add the
/// `/v1/messages` themselves.
pub fn anthropic_base(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> SocketAddr {
        "127.0.0.1:4000".parse().unwrap()
    }

    #[test]
    fn the_mcp_configuration_names_the_server_and_its_secret_only() {
        let config: serde_json::Value =
            serde_json::from_str(&mcp_json(Path::new("/bin/hpcagent"), tools(), "s3cret")).unwrap();
        let server = &config["mcpServers"]["hpcagent"];
        assert_eq!(server["command"], "/bin/hpcagent");
        assert_eq!(server["args"], json!(["mcp", "--tools", "127.0.0.1:4000"]));
        assert_eq!(server["env"], json!({SECRET_VAR: "s3cret"}));
    }

    #[test]
    fn codex_gets_the_server_and_the_model_in_toml() {
        let text = codex_toml(
            Path::new("/bin/hpcagent"),
            tools(),
            "s3cret",
            "coder",
            "http://nid001:8000/v1",
        );
        let config: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config["model"].as_str(), Some("coder"));
        assert_eq!(config["model_provider"].as_str(), Some("hpcagent"));
        let provider = &config["model_providers"]["hpcagent"];
        assert_eq!(provider["base_url"].as_str(), Some("http://nid001:8000/v1"));
        let server = &config["mcp_servers"]["hpcagent"];
        assert_eq!(server["command"].as_str(), Some("/bin/hpcagent"));
        assert_eq!(server["env"][SECRET_VAR].as_str(), Some("s3cret"));
        assert_eq!(server["required"].as_bool(), Some(true));
        assert_eq!(config["check_for_update_on_startup"].as_bool(), Some(false));
        assert_eq!(config["analytics"]["enabled"].as_bool(), Some(false));
        assert_eq!(config["feedback"]["enabled"].as_bool(), Some(false));
        assert_eq!(config["web_search"].as_str(), Some("disabled"));
    }

    #[test]
    fn the_clis_homes_are_in_the_scratch_and_their_side_traffic_off() {
        let vars = cli_variables(Path::new("/a/scratch"), Path::new("/a/scratch/codex"));
        let get = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CODEX_HOME"), Some("/a/scratch/codex"));
        assert_eq!(get("CLAUDE_CONFIG_DIR"), Some("/a/scratch/claude"));
        assert_eq!(get("ENABLE_TOOL_SEARCH"), Some("false"));
        assert_eq!(get("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), Some("1"));
    }

    #[test]
    fn the_anthropic_base_drops_the_openai_prefix() {
        assert_eq!(anthropic_base("http://n1:8000/v1"), "http://n1:8000");
        assert_eq!(anthropic_base("http://n1:8000/v1/"), "http://n1:8000");
        assert_eq!(anthropic_base(""), "");
    }
}

//! What each model request offered the model: its tools, by name, kept in
//! the attempt's `model.jsonl`, so that an operator (and the suite) sees
//! whether the campaign's tools reached the model at all. A CLI may hide
//! MCP tools behind its own (Claude Code's `ToolSearch`) or send them in a
//! shape the model server does not take (Codex's `namespace` tools): the
//! CLI's own word that it connected to the tool server says neither.

use serde_json::Value;

/// The names of the tools a request's body offers, in the three shapes the
/// CLIs send: Anthropic Messages (`{name}`), Chat Completions
/// (`{type: function, function: {name}}`) and Responses (`{type: function,
/// name}`, and a `namespace` tool whose own `tools` are named
/// `<namespace>.<name>`). Empty for a body that is not JSON or offers none.
pub fn tools(body: &[u8]) -> Vec<String> {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    collect(&request["tools"], "", &mut names);
    names
}

fn collect(tools: &Value, prefix: &str, names: &mut Vec<String>) {
    for tool in tools.as_array().into_iter().flatten() {
        let name = tool["name"]
            .as_str()
            .or_else(|| tool["function"]["name"].as_str())
            .unwrap_or("");
        if tool["tools"].is_array() {
            collect(&tool["tools"], &format!("{prefix}{name}."), names);
        } else if !name.is_empty() {
            names.push(format!("{prefix}{name}"));
        } else if let Some(kind) = tool["type"].as_str() {
            // A built-in tool of the API (web search, say): named by its type.
            names.push(format!("{prefix}{kind}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tools;

    #[test]
    fn tools_are_named_in_each_api_s_shape() {
        let messages =
            br#"{"tools":[{"name":"mcp__hpcagent__submit","input_schema":{}},{"name":"Bash"}]}"#;
        assert_eq!(tools(messages), ["mcp__hpcagent__submit", "Bash"]);
        let chat = br#"{"tools":[{"type":"function","function":{"name":"submit"}}]}"#;
        assert_eq!(tools(chat), ["submit"]);
        let responses = br#"{"tools":[{"type":"function","name":"shell"},
            {"type":"namespace","name":"mcp__hpcagent","tools":[
                {"type":"function","name":"task"},{"type":"function","name":"submit"}]},
            {"type":"web_search"}]}"#;
        assert_eq!(
            tools(responses),
            [
                "shell",
                "mcp__hpcagent.task",
                "mcp__hpcagent.submit",
                "web_search"
            ]
        );
        assert!(tools(b"{}").is_empty());
        assert!(tools(b"not json").is_empty());
    }
}

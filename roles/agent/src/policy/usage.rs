//! Tokens an agent CLI reports of itself on its stdout (JSON lines), for
//! the record of an attempt that had no model of the campaign's, and so no
//! [`crate::meter`] to count them: Claude Code's `result` event (`claude -p
//! --output-format stream-json`: its totals, input with the cache's reads
//! and writes, and output), and Codex's `turn.completed` events (`codex
//! exec --json`: each turn's input, cached input included, and output).
//! A CLI that reports neither counts 0.

use serde_json::Value;

/// The tokens reported in `stdout`, summed over its events.
pub fn reported_tokens(stdout: &str) -> u64 {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|event| match event["type"].as_str() {
            Some("result") => sum(
                &event["usage"],
                &[
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                    "output_tokens",
                ],
            ),
            Some("turn.completed") => sum(&event["usage"], &["input_tokens", "output_tokens"]),
            _ => 0,
        })
        .sum()
}

fn sum(usage: &Value, keys: &[&str]) -> u64 {
    keys.iter().filter_map(|k| usage[*k].as_u64()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_totals_and_codexs_turns_are_counted() {
        let claude = r#"{"type":"system","subtype":"init"}
{"type":"assistant","message":{"usage":{"input_tokens":10,"output_tokens":10}}}
{"type":"result","subtype":"success","num_turns":6,"usage":{"input_tokens":60,"cache_creation_input_tokens":5,"cache_read_input_tokens":7,"output_tokens":60}}"#;
        // The assistant message's usage is inside the total: not counted twice.
        assert_eq!(reported_tokens(claude), 132);
        let codex = r#"{"type":"thread.started","thread_id":"t"}
{"type":"turn.completed","usage":{"input_tokens":60,"cached_input_tokens":20,"output_tokens":60}}
{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":0,"output_tokens":5}}"#;
        assert_eq!(reported_tokens(codex), 155);
        assert_eq!(reported_tokens("plain text\nnot json {"), 0);
    }
}

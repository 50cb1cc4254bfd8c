//! An agent's line to the model: OpenAI chat completions on the lease's
//! inference replica.
//!
//! A replica that cannot be reached, times out, or says it is unavailable
//! (502, 503, 504, 429) is retried with backoff, then reported to the
//! orchestrator, which sets it aside and moves the lease to another (or the
//! link waits for one, within the lease's budget). A 500 or an unreadable
//! reply is retried on the same replica and then ends the request: it is
//! more likely this conversation than the replica, and moving it would set
//! healthy replicas aside for everyone. A request refused for being too long
//! is a context overflow; other refusals are the caller's to report.

use std::time::{Duration, Instant};

use hpcagent_common::Client;
use hpcagent_proto::v1 as pb;
use serde_json::Value;

use crate::lease::{self, Endpoint, MoveError};

/// Tries on one replica before it is reported as failing.
const TRIES: u32 = 3;
/// Replicas a request moves through before it gives up.
const MAX_MOVES: u32 = 5;
/// The longest one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text, maybe malformed).
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
}

/// One model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: String,
    pub usage: Usage,
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the conversation no longer fits the model's context: {0}")]
    ContextOverflow(String),
    #[error("the model server refused the request: {0}")]
    Refused(String),
    #[error("the model server failed on this request: {0}")]
    ServerError(String),
    #[error("no inference replica answered: {0}")]
    Unavailable(String),
    #[error("the lease's budget ran out waiting for the model")]
    OutOfBudget,
    /// Moving to another replica ended the lease.
    #[error(transparent)]
    Moved(#[from] MoveError),
}

/// How one request went.
enum Failure {
    /// The replica is away: worth another try, then another replica.
    Unreachable(String),
    /// The replica answered badly: worth another try on it, no more.
    Erred(String),
    Final(LlmError),
}

pub struct InferenceLink {
    orchestrator: Client,
    lease_id: String,
    url: String,
    http: reqwest::Client,
    api_key: Option<String>,
    budget_end: Instant,
}

impl InferenceLink {
    pub fn new(orchestrator: Client, lease: &pb::Lease) -> InferenceLink {
        InferenceLink {
            orchestrator,
            lease_id: lease.lease_id.clone(),
            url: lease.inference_url.trim_end_matches('/').to_string(),
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client with rustls builds"),
            // For an outside endpoint that wants a key; vLLM in the allocation needs none.
            api_key: std::env::var("OPENAI_API_KEY")
                .ok()
                .filter(|k| !k.is_empty()),
            budget_end: Instant::now() + Duration::from_secs_f64(lease.budget_s.max(0.0)),
        }
    }

    /// The replica the link talks to now (`…/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn budget_left(&self) -> Duration {
        self.budget_end.saturating_duration_since(Instant::now())
    }

    /// One chat completion of `body` (an OpenAI request object).
    pub async fn chat(&mut self, body: &Value) -> Result<Reply, LlmError> {
        let mut moves = 0;
        loop {
            let mut backoff = Duration::from_secs(1);
            let mut last = Failure::Unreachable(String::new());
            for _ in 0..TRIES {
                if self.budget_left().is_zero() {
                    return Err(LlmError::OutOfBudget);
                }
                match self.post(body).await {
                    Ok(reply) => return Ok(reply),
                    Err(Failure::Final(e)) => return Err(e),
                    Err(failure) => {
                        let (Failure::Unreachable(why) | Failure::Erred(why)) = &failure else {
                            unreachable!("final failures returned above")
                        };
                        tracing::warn!(replica = %self.url, "model request failed: {why}");
                        last = failure;
                        tokio::time::sleep(backoff.min(self.budget_left())).await;
                        backoff *= 2;
                    }
                }
            }
            let why = match last {
                Failure::Erred(why) => return Err(LlmError::ServerError(why)),
                Failure::Unreachable(why) => why,
                Failure::Final(e) => return Err(e),
            };
            moves += 1;
            if moves > MAX_MOVES {
                return Err(LlmError::Unavailable(why));
            }
            self.url = lease::move_endpoint(
                &mut self.orchestrator,
                &self.lease_id,
                Endpoint::Inference,
                &self.url,
                self.budget_end,
            )
            .await?;
            tracing::info!(replica = %self.url, "moved to another inference replica");
        }
    }

    async fn post(&self, body: &Value) -> Result<Reply, Failure> {
        let mut request = self
            .http
            .post(format!("{}/chat/completions", self.url))
            .timeout(REQUEST_TIMEOUT.min(self.budget_left()))
            .json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failure::Unreachable(e.without_url().to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| Failure::Unreachable(e.without_url().to_string()))?;
        let why = || format!("{status}: {}", excerpt(&text));
        match status.as_u16() {
            200..=299 => {
                parse_reply(&text).map_err(|e| Failure::Erred(format!("unreadable reply: {e}")))
            }
            408 | 429 | 502 | 503 | 504 => Err(Failure::Unreachable(why())),
            500..=599 => Err(Failure::Erred(why())),
            _ if is_overflow(&text) => Err(Failure::Final(LlmError::ContextOverflow(why()))),
            _ => Err(Failure::Final(LlmError::Refused(why()))),
        }
    }
}

/// Whether a refusal says the request is longer than the model's context.
fn is_overflow(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "maximum context",
        "too many tokens",
        "prompt is too long",
    ]
    .iter()
    .any(|m| body.contains(m))
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A chat completion's first choice.
pub fn parse_reply(text: &str) -> Result<Reply, String> {
    let body: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let choice = body["choices"]
        .get(0)
        .ok_or_else(|| format!("no choices in {}", excerpt(text)))?;
    let message = &choice["message"];
    let tool_calls = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, call)| {
            let arguments = match &call["function"]["arguments"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            ToolCall {
                id: call["id"]
                    .as_str()
                    .map_or_else(|| format!("call_{i}"), str::to_string),
                name: call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                arguments,
            }
        })
        .collect();
    Ok(Reply {
        content: message["content"].as_str().unwrap_or_default().to_string(),
        tool_calls,
        finish_reason: choice["finish_reason"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        usage: Usage {
            prompt: body["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            completion: body["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_with_tool_calls_prose_or_nothing_parse() {
        let calls = parse_reply(
            r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},
                {"type":"function","function":{"name":"finish","arguments":{}}}]},
                "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#,
        )
        .unwrap();
        assert_eq!(calls.tool_calls.len(), 2);
        assert_eq!(calls.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(calls.tool_calls[1].id, "call_1");
        assert_eq!(calls.tool_calls[1].arguments, "{}");
        assert_eq!(
            calls.usage,
            Usage {
                prompt: 10,
                completion: 5
            }
        );
        let prose = parse_reply(
            r#"{"choices":[{"message":{"content":"I think..."},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        assert!(prose.tool_calls.is_empty());
        assert_eq!(prose.finish_reason, "length");
        assert!(parse_reply(r#"{"error":"x"}"#).is_err());
        assert!(parse_reply("<html>").is_err());
    }

    #[test]
    fn overflows_are_told_from_other_refusals() {
        assert!(is_overflow(
            r#"{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"}"#
        ));
        assert!(is_overflow(
            r#"{"error":{"code":"context_length_exceeded"}}"#
        ));
        assert!(!is_overflow(r#"{"message":"tool_choice must be auto"}"#));
    }
}

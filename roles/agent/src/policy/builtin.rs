//! The `builtin` policy: a tool-calling loop against the lease's model.
//!
//! The model gets the system prompt (job, tools, skills) and the task, and
//! answers turn by turn with tool calls, which the [`Toolbox`] runs. What real
//! models do is part of the design: prose instead of a call gets a nudge, a
//! reply cut at the turn's token limit gets told so, malformed arguments and
//! unknown tools get an error reply, and a conversation that outgrows the
//! context ends the attempt with that reason. Budgets: turns, tokens, and the
//! lease's wall-clock budget (less a reserve for the final submit). However
//! the loop ends, a solution that was not submitted is submitted for the
//! agent, so the task settles on what the workspace holds.

use std::time::Duration;

use hpcagent_common::AttemptOutcome;
use hpcagent_proto::v1 as pb;
use serde_json::{Value, json};

use crate::lease::{LeaseWatch, MoveError};
use crate::llm::{InferenceLink, LlmError, Reply};
use crate::prompt::Skill;
use crate::starter;
use crate::tools::Toolbox;
use crate::transcript::Transcript;

use super::Attempt;

/// What the built-in agent may spend, and how it samples.
#[derive(Debug, Clone)]
pub struct Limits {
    pub model: String,
    pub max_turns: u32,
    pub max_tokens: u64,
    pub turn_tokens: u32,
    pub temperature: f32,
    /// `required`: every turn must call a tool.
    pub tool_choice: String,
    pub profiling: bool,
}

/// Wall-clock kept back for the final submit, at least (more once grades
/// are seen to take long: a submit grades several cases).
const SUBMIT_RESERVE: Duration = Duration::from_secs(60);
/// The most of one tool result the conversation keeps (the transcript keeps all).
const TOOL_RESULT_LIMIT: usize = 16_000;
/// Below this, a turn's completion budget is not halved further to fit the context.
const MIN_TURN_TOKENS: u32 = 64;

/// Works one lease.
pub async fn attempt(
    lease: &pb::Lease,
    mut tools: Toolbox,
    mut llm: InferenceLink,
    limits: &Limits,
    skills: &[Skill],
    lost: LeaseWatch,
) -> Attempt {
    let mut transcript = Transcript::open(std::path::Path::new(&lease.attempt_dir));
    let mut session = Session {
        limits,
        tokens: 0,
        turns: 0,
        reserve: SUBMIT_RESERVE.min(Duration::from_secs_f64(lease.budget_s / 4.0)),
        turn_tokens: limits.turn_tokens,
        lost,
    };
    let (outcome, message) = match session.prepare(&mut tools, skills).await {
        Ok(messages) => {
            session
                .run(messages, &mut tools, &mut llm, &mut transcript)
                .await
        }
        Err(why) => (AttemptOutcome::Error, why),
    };
    let (outcome, message) = finish(&mut tools, outcome, message).await;
    transcript.record(
        "end",
        json!({"outcome": outcome.as_str(), "message": message, "tokens": session.tokens, "turns": session.turns}),
    );
    Attempt {
        outcome,
        message,
        tokens: session.tokens,
        transcript: transcript.path().display().to_string(),
    }
}

/// Submits what the workspace holds when the model had its chance and did
/// not submit: it finished, or spent a budget, or outgrew its context. When
/// the attempt failed for the infrastructure's reasons (no model, no judge,
/// no lease, a refused request), nothing is submitted: the attempt fails and
/// the task is tried again, rather than settle on work nobody did.
async fn finish(
    tools: &mut Toolbox,
    outcome: AttemptOutcome,
    message: String,
) -> (AttemptOutcome, String) {
    use AttemptOutcome::*;
    let model_had_its_chance = matches!(
        outcome,
        Finished | TurnBudget | TokenBudget | TimeBudget | ContextOverflow
    );
    if !model_had_its_chance {
        return (outcome, message);
    }
    (outcome, tools.submit_what_is_left(message, outcome).await)
}

struct Session<'a> {
    limits: &'a Limits,
    tokens: u64,
    turns: u32,
    /// Wall-clock kept back for the final submit.
    reserve: Duration,
    /// Completion tokens a turn may use now (halved when the context is full).
    turn_tokens: u32,
    lost: LeaseWatch,
}

impl Session<'_> {
    /// The workspace with its starting point and skills; the first messages.
    async fn prepare(&self, tools: &mut Toolbox, skills: &[Skill]) -> Result<Vec<Value>, String> {
        let briefing = starter::prepare(tools, skills, self.limits.profiling).await?;
        Ok(vec![
            json!({"role": "system", "content": briefing.system}),
            json!({"role": "user", "content": briefing.task}),
        ])
    }

    /// Turns until the agent ends the attempt or a budget does: (outcome, message).
    async fn run(
        &mut self,
        mut messages: Vec<Value>,
        tools: &mut Toolbox,
        llm: &mut InferenceLink,
        transcript: &mut Transcript,
    ) -> (AttemptOutcome, String) {
        for m in &messages {
            transcript.record("message", m.clone());
        }
        let specs: Vec<Value> = tools.specs().iter().map(|s| s.openai()).collect();
        loop {
            if let Some(end) = self.over_budget(tools) {
                return end;
            }
            let reply = match llm.chat(&self.request(&messages, &specs)).await {
                Ok(reply) => reply,
                Err(LlmError::ContextOverflow(why)) if self.turn_tokens > MIN_TURN_TOKENS => {
                    // Prompt and completion budget together overflow: ask for less.
                    self.turn_tokens /= 2;
                    transcript.record(
                        "overflow",
                        json!({"why": why, "turn_tokens": self.turn_tokens}),
                    );
                    continue;
                }
                Err(e) => return llm_ended(e),
            };
            self.turns += 1;
            self.tokens += reply.usage.prompt + reply.usage.completion;
            transcript.record("reply", reply_record(&reply, llm.url()));
            messages.push(assistant_message(&reply));
            if reply.tool_calls.is_empty() {
                let nudge = self.nudge(&reply);
                transcript.record("message", nudge.clone());
                messages.push(nudge);
                continue;
            }
            for call in &reply.tool_calls {
                let result = tools.call(&call.name, &call.arguments).await;
                let content = if result.is_error {
                    format!("error: {}", result.text)
                } else {
                    result.text.clone()
                };
                transcript.record(
                    "tool",
                    json!({"name": call.name, "arguments": call.arguments, "error": result.is_error, "result": content}),
                );
                messages.push(
                    json!({"role": "tool", "tool_call_id": call.id, "content": cut(&content)}),
                );
                if let Some(why) = result.ends {
                    return ended_by_tool(&why, &result.text);
                }
            }
        }
    }

    fn over_budget(&self, tools: &Toolbox) -> Option<(AttemptOutcome, String)> {
        let l = self.limits;
        if (self.lost)() {
            return Some((
                AttemptOutcome::LeaseLost,
                "the orchestrator took the lease back (it expired)".into(),
            ));
        }
        if self.turns >= l.max_turns {
            return Some((
                AttemptOutcome::TurnBudget,
                format!("{} turns (MAX_TURNS)", l.max_turns),
            ));
        }
        if self.tokens >= l.max_tokens {
            return Some((
                AttemptOutcome::TokenBudget,
                format!("{} tokens used (MAX_TOKENS={})", self.tokens, l.max_tokens),
            ));
        }
        // A submit grades several cases: keep room for about three slowest grades.
        let reserve = self.reserve.max(tools.slowest_grade() * 3);
        if tools.budget_left() <= reserve {
            return Some((
                AttemptOutcome::TimeBudget,
                "the task's wall-clock budget is spent, but for the final submit".into(),
            ));
        }
        None
    }

    fn request(&self, messages: &[Value], specs: &[Value]) -> Value {
        let l = self.limits;
        json!({
            "model": l.model,
            "messages": messages,
            "tools": specs,
            "tool_choice": l.tool_choice,
            "parallel_tool_calls": false,
            "max_tokens": self.turn_tokens,
            "temperature": l.temperature,
        })
    }

    /// What the model is told when it answered without a tool call.
    fn nudge(&self, reply: &Reply) -> Value {
        let text = if reply.finish_reason == "length" {
            format!(
                "Your reply was cut off at {} tokens before it made a tool call. Make one \
                 tool call, with shorter arguments (write a big file in parts).",
                self.turn_tokens
            )
        } else {
            "Answer with a tool call. Use score to grade your code, submit when it is \
             done, or finish to stop."
                .to_string()
        };
        json!({"role": "user", "content": text})
    }
}

/// The assistant turn as the conversation keeps it. Arguments that are not
/// a JSON object are kept as `{}`: servers parse the history's arguments to
/// render it, and the tool reply already told the model what was wrong.
fn assistant_message(reply: &Reply) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.content});
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .map(|c| {
                let arguments = match serde_json::from_str::<Value>(&c.arguments) {
                    Ok(Value::Object(_)) => c.arguments.clone(),
                    _ => "{}".to_string(),
                };
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    message
}

fn reply_record(reply: &Reply, replica: &str) -> Value {
    let calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
        .collect();
    json!({
        "content": reply.content, "tool_calls": calls, "finish_reason": reply.finish_reason,
        "prompt_tokens": reply.usage.prompt, "completion_tokens": reply.usage.completion,
        "replica": replica,
    })
}

/// A tool result as the conversation keeps it: its start, then a note.
fn cut(content: &str) -> String {
    match content.char_indices().nth(TOOL_RESULT_LIMIT) {
        Some((i, _)) => format!(
            "{}\n[cut at {TOOL_RESULT_LIMIT} characters of {}; read less at a time]",
            &content[..i],
            content.chars().count()
        ),
        None => content.to_string(),
    }
}

fn llm_ended(e: LlmError) -> (AttemptOutcome, String) {
    let outcome = match &e {
        LlmError::ContextOverflow(_) => AttemptOutcome::ContextOverflow,
        LlmError::Refused(_) => AttemptOutcome::InferenceRefused,
        LlmError::ServerError(_) => AttemptOutcome::InferenceError,
        LlmError::Unavailable(_) => AttemptOutcome::InferenceUnavailable,
        LlmError::OutOfBudget | LlmError::Moved(MoveError::OutOfBudget) => {
            AttemptOutcome::TimeBudget
        }
        LlmError::Moved(MoveError::LeaseGone(_)) => AttemptOutcome::LeaseLost,
    };
    (outcome, e.to_string())
}

fn ended_by_tool(why: &str, text: &str) -> (AttemptOutcome, String) {
    match why {
        "submitted" => (AttemptOutcome::Submitted, text.to_string()),
        "finished" => (AttemptOutcome::Finished, text.to_string()),
        other if other.starts_with("the lease is gone") => {
            (AttemptOutcome::LeaseLost, other.to_string())
        }
        other => (AttemptOutcome::JudgeUnavailable, other.to_string()),
    }
}

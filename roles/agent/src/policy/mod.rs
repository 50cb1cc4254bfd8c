//! The policies: how a worker works one lease, and how the attempt ended
//! ([`Attempt`]). [`builtin`] is an LLM tool-calling loop, [`command`] an
//! external agent CLI, [`baseline`] submits the kernel's own baseline (no
//! LLM). They do not pull leases nor report attempts (the worker pool does,
//! [`crate::pool`]), and never grade: verdicts come from the judge.

use hpcagent_common::AttemptOutcome;

pub mod baseline;
pub mod builtin;
pub mod command;
mod usage;

/// How one attempt ended, as the agent reports it.
pub struct Attempt {
    pub outcome: AttemptOutcome,
    pub message: String,
    /// Model tokens the attempt used (prompt and completion).
    pub tokens: u64,
    /// Where its transcript is, "" when it has none.
    pub transcript: String,
}

impl Attempt {
    pub fn ended(outcome: AttemptOutcome, message: impl Into<String>) -> Attempt {
        Attempt {
            outcome,
            message: message.into(),
            tokens: 0,
            transcript: String::new(),
        }
    }
}

//! How an attempt ended ([`AttemptOutcome`]): the one list of outcomes, the
//! word each has in the store, the attempts' log and `hpcagent results`,
//! and its wire form. It does not decide what an outcome does to its task
//! (the scheduler does) nor which outcome a policy reports (the agent does).

use std::fmt;

use hpcagent_proto::v1 as pb;

/// How an attempt ended. Its detail, in words, travels beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    Submitted,
    Finished,
    Crashed,
    TimeBudget,
    TurnBudget,
    TokenBudget,
    ContextOverflow,
    LeaseLost,
    InferenceRefused,
    InferenceError,
    InferenceUnavailable,
    JudgeUnavailable,
    Error,
    Unsupported,
    Skipped,
    /// The orchestrator's: the lease was not renewed before its deadline.
    Expired,
    /// The orchestrator's: the lease outlived its task's budget.
    OverBudget,
    /// The agent CLI never ran: its program could not be executed.
    CouldNotStart,
}

/// Each outcome with its word and its wire value: one table, so the three
/// cannot drift apart.
const TABLE: [(AttemptOutcome, &str, pb::AttemptOutcome); 18] = {
    use AttemptOutcome as A;
    use pb::AttemptOutcome as W;
    [
        (A::Submitted, "submitted", W::Submitted),
        (A::Finished, "no submission", W::Finished),
        (A::Crashed, "crashed", W::Crashed),
        (A::TimeBudget, "time budget", W::TimeBudget),
        (A::TurnBudget, "turn budget", W::TurnBudget),
        (A::TokenBudget, "token budget", W::TokenBudget),
        (A::ContextOverflow, "context overflow", W::ContextOverflow),
        (A::LeaseLost, "lease lost", W::LeaseLost),
        (
            A::InferenceRefused,
            "inference refused",
            W::InferenceRefused,
        ),
        (A::InferenceError, "inference error", W::InferenceError),
        (
            A::InferenceUnavailable,
            "inference unavailable",
            W::InferenceUnavailable,
        ),
        (
            A::JudgeUnavailable,
            "judge unavailable",
            W::JudgeUnavailable,
        ),
        (A::Error, "error", W::Error),
        (A::Unsupported, "unsupported", W::Unsupported),
        (A::Skipped, "skipped", W::Skipped),
        (A::Expired, "expired", W::Expired),
        (A::OverBudget, "over budget", W::OverBudget),
        (A::CouldNotStart, "could not start", W::CouldNotStart),
    ]
};

/// A completion whose outcome is unspecified or unknown to this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no attempt outcome (the completion's outcome is {0}: unspecified or unknown)")]
pub struct NoOutcome(pub i32);

impl AttemptOutcome {
    /// Its word, as the store and the attempts' log keep it.
    pub fn as_str(self) -> &'static str {
        Self::row(self).1
    }

    /// The outcome a completion carries on the wire.
    pub fn from_wire(value: i32) -> Result<AttemptOutcome, NoOutcome> {
        TABLE
            .iter()
            .find(|(_, _, wire)| *wire as i32 == value)
            .map(|(outcome, _, _)| *outcome)
            .ok_or(NoOutcome(value))
    }

    /// Its wire value, for a completion.
    pub fn to_wire(self) -> i32 {
        Self::row(self).2 as i32
    }

    fn row(self) -> &'static (AttemptOutcome, &'static str, pb::AttemptOutcome) {
        TABLE
            .iter()
            .find(|(outcome, _, _)| *outcome == self)
            .expect("every outcome is in the table")
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_round_trips_and_has_its_own_word() {
        let mut words = std::collections::HashSet::new();
        for (outcome, word, _) in TABLE {
            assert_eq!(AttemptOutcome::from_wire(outcome.to_wire()), Ok(outcome));
            assert_eq!(outcome.to_string(), word);
            assert!(words.insert(word), "{word} twice");
        }
    }

    #[test]
    fn unspecified_and_unknown_values_are_no_outcome() {
        let unspecified = pb::AttemptOutcome::Unspecified as i32;
        assert_eq!(AttemptOutcome::from_wire(unspecified), Err(NoOutcome(0)));
        assert_eq!(AttemptOutcome::from_wire(99), Err(NoOutcome(99)));
    }
}

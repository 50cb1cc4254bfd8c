//! The agent role: a pool of workers that pull task leases from the
//! orchestrator and work them with a policy, grading through the lease's judge.
//!
//! Owns the worker pool ([`pool`]) and the policies ([`baseline`]; the LLM
//! policies arrive with issue #5). It never grades anything itself: every
//! verdict comes from a judge, which reports it to the orchestrator.

pub mod baseline;
pub mod judge_link;
pub mod pool;

//! What every role needs to be part of a campaign, and nothing more: the
//! campaign's configuration ([`config`]) and plan ([`plan`]) it was started
//! with, the link to the orchestrator (registration, heartbeats, batched
//! lease traffic: [`Client`], [`RoleContext`], [`Leases`], [`Records`]),
//! the names of the variables and tokens it is given, the exit it refuses
//! with ([`Refused`]), how an attempt ended ([`AttemptOutcome`]) and how a
//! verdict's speedup reads ([`speedup`]); and two helpers every crate
//! above it uses: a file written whole ([`files`]) and words for people
//! ([`words`]).
//!
//! The roles (judge, agent, inference) and the orchestrator depend on it;
//! it depends on neither. It does not own the control plane's server, the
//! scheduler, the store or driving Slurm: those are the orchestrator's.

pub mod config;
pub mod files;
pub mod hidden;
mod link;
mod outcome;
pub mod plan;
pub mod speedup;
pub mod words;

pub use link::*;
pub use outcome::{AttemptOutcome, NoOutcome};

/// The exit code of a role that refuses to run where it was started.
pub const REFUSED_EXIT: u8 = 78;

/// Why a role refuses to run here (its process exits [`REFUSED_EXIT`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

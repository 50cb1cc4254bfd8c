//! The orchestrator: from an env file and an allocation to a running campaign.
//!
//! Owns the campaign's configuration ([`config`]), Slurm hostlists
//! ([`hostlist`]), what the allocation holds ([`allocation`]), the assignment
//! of nodes to role instances ([`placement`], producing a [`plan::Plan`]), and
//! driving Slurm's commands ([`slurm`]). It does not own what the roles do
//! inside their steps: that is the judge, agent and inference crates.

pub mod allocation;
pub mod config;
pub mod hostlist;
pub mod placement;
pub mod plan;
pub mod slurm;
pub mod words;

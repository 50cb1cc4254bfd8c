//! The orchestrator: from an env file and an allocation to a running campaign.
//!
//! Owns the campaign's configuration ([`config`]), Slurm hostlists
//! ([`hostlist`]), what the allocation holds ([`allocation`]), the assignment
//! of nodes to role instances ([`placement`], producing a [`plan::Plan`]),
//! driving Slurm's commands ([`slurm`]), and running a campaign
//! ([`campaign`]): the control plane roles talk to ([`control`], and its
//! role-side [`client`]), the task scheduler ([`scheduler`]), the results
//! store ([`store`]), and launching and supervising role instances
//! ([`executor`], [`supervisor`]). It does not own what the roles do inside
//! their steps: that is the judge, agent and inference crates.

pub mod allocation;
pub mod campaign;
pub mod client;
pub mod config;
pub mod control;
pub mod executor;
pub mod hostlist;
pub mod placement;
pub mod plan;
pub mod scheduler;
pub mod slurm;
pub mod store;
pub mod supervisor;
pub mod words;

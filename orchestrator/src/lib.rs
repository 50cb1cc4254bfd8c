//! The orchestrator: from an env file and an allocation to a running campaign.
//!
//! Reads the campaign's configuration (`hpcagent_common::config`, which
//! roles share), and owns Slurm hostlists
//! ([`hostlist`]), what the allocation holds ([`allocation`]), the assignment
//! of nodes to role instances ([`placement`], producing a `hpcagent_common::plan::Plan`),
//! driving Slurm's commands ([`slurm`]), and running a campaign
//! ([`campaign`]): the control plane roles talk to ([`control`]; the
//! roles' side is `hpcagent-common`) and its tokens ([`auth`]), the task
//! scheduler ([`scheduler`]), the results store ([`store`]), launching and
//! supervising role instances ([`executor`], [`supervisor`]), and what the
//! running campaign shares between them ([`live`]). It does not own what the roles do inside
//! their steps: that is the judge, agent and inference crates.

pub mod allocation;
pub mod auth;
pub mod campaign;
pub mod control;
pub mod executor;
pub mod hostlist;
pub mod live;
pub mod placement;
pub mod scheduler;
pub mod slurm;
pub mod store;
pub mod supervisor;

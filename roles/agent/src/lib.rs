//! The agent role: a pool of workers that pull task leases from the
//! orchestrator and work them with a policy, grading through the lease's judge.
//!
//! Owns the worker pool ([`pool`]), the policies ([`policy`]: `builtin`, an
//! LLM tool-calling loop; `command`, an external agent CLI with [`mcp`] as
//! its tools, served through [`tool_server`], the CLI configured by
//! [`cli_config`] and run in a [`sandbox`]; `baseline`, no LLM), what an
//! agent is told ([`prompt`], [`task_view`], [`starter`]), the tools they
//! share ([`tools`], confined to a [`workspace`], with [`search`]), and
//! the lines to the lease's judge ([`judge_link`]) and model ([`llm`]), which
//! move a [`lease`] off failing endpoints. It never grades anything itself:
//! every verdict comes from a judge, which reports it to the orchestrator.

pub mod cli_config;
pub mod judge_link;
pub mod lease;
pub mod llm;
pub mod mcp;
pub mod meter;
pub mod policy;
pub mod pool;
pub mod prompt;
pub mod sandbox;
pub mod search;
pub mod starter;
pub mod task_view;
pub mod tool_server;
pub mod tools;
pub mod transcript;
pub mod workspace;

//! `hpcagent mcp --socket PATH`: one attempt's tools as a stdio MCP server.
//!
//! Started by an external agent CLI from the MCP configuration the `command`
//! policy writes; stdout carries the protocol, so logs go to stderr only.

use std::path::PathBuf;

use clap::Args;

use super::judge::runtime;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The attempt's tool socket (from the MCP configuration the worker wrote).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
}

pub fn run(args: McpArgs) -> anyhow::Result<()> {
    super::init_logging_quiet();
    runtime()?.block_on(hpcagent_agent::mcp::serve(&args.socket))
}

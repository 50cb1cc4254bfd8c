//! `hpcagent mcp --tools ADDR`: one attempt's tools as a stdio MCP server.
//!
//! Started by an external agent CLI from the MCP configuration the `command`
//! policy writes; stdout carries the protocol, so logs go to stderr only.

use std::net::SocketAddr;

use clap::Args;

use super::judge::runtime;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The attempt's tool server (from the MCP configuration the worker wrote).
    #[arg(long, value_name = "ADDR")]
    tools: SocketAddr,
}

pub fn run(args: McpArgs) -> anyhow::Result<()> {
    super::init_logging_quiet();
    runtime()?.block_on(hpcagent_agent::mcp::serve(args.tools))
}

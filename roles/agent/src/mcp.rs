//! `hpcagent mcp`: an attempt's tools as a stdio MCP server, for external
//! agent CLIs (Claude Code, Codex, mini-swe-agent …) run by the `command`
//! policy.
//!
//! The server holds nothing of its own: it forwards every MCP tool call to
//! the agent worker that runs the CLI, through the attempt's tool server
//! ([`crate::tool_server`]), whose address the MCP configuration gives on
//! the command line and whose secret it gives in the server's environment.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::Mutex;

use crate::tool_server::{SECRET_VAR, ToolClient};

mod gate;

/// Serves the tools at `tools` on stdin/stdout until the client goes away.
pub async fn serve(tools: SocketAddr) -> anyhow::Result<()> {
    let secret = std::env::var(SECRET_VAR).with_context(|| {
        format!("{SECRET_VAR} is not set: `hpcagent mcp` runs from the MCP configuration an agent worker writes")
    })?;
    let client = ToolClient::connect(tools, secret)
        .await
        .with_context(|| format!("cannot reach the agent worker at {tools}"))?;
    let server = Server {
        tools: Arc::new(Mutex::new(client)),
    };
    // stdin → the gate → rmcp; rmcp and the gate's replies → stdout.
    let (rmcp_in, gate_in) = tokio::io::duplex(1 << 16);
    let (gate_out, rmcp_out) = tokio::io::duplex(1 << 16);
    let (replies, replies_rx) = tokio::sync::mpsc::channel(16);
    let inbound = tokio::spawn(gate::inbound(tokio::io::stdin(), gate_in, replies));
    let outbound = tokio::spawn(gate::outbound(gate_out, replies_rx, tokio::io::stdout()));
    let running = server
        .serve((rmcp_in, rmcp_out))
        .await
        .context("the MCP session did not start")?;
    running.waiting().await.context("the MCP session failed")?;
    inbound.abort();
    // The last replies reach the client before the server exits.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), outbound).await;
    Ok(())
}

#[derive(Clone)]
struct Server {
    tools: Arc<Mutex<ToolClient>>,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hpcagent", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of one hpcagent task: read it with `task`, grade code with `score`, \
                 submit once with `submit`.",
            )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .tools
            .lock()
            .await
            .list()
            .await
            .map_err(|why| ErrorData::internal_error(why, None))?;
        let tools = tools
            .into_iter()
            .map(|t| {
                let schema = t.parameters.as_object().cloned().unwrap_or_default();
                Tool::new(t.name, t.description, schema)
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request
            .arguments
            .map(|a| serde_json::Value::Object(a).to_string())
            .unwrap_or_default();
        let reply = self
            .tools
            .lock()
            .await
            .call(&request.name, &arguments)
            .await
            .map_err(|why| ErrorData::internal_error(why, None))?;
        let content = vec![ContentBlock::text(reply.text)];
        Ok(if reply.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

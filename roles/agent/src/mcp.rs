//! `hpcagent mcp`: the agent's tools as a stdio MCP server, for external
//! agent CLIs (Claude Code, Codex, mini-swe-agent …) run by the `command`
//! policy.
//!
//! The server serves one lease: the worker that runs the CLI writes the lease
//! (`lease.json` in the attempt directory) and names it in the MCP
//! configuration it hands the CLI, with the orchestrator's address and the
//! tokens in the server's environment. The tools are the built-in agent's
//! ([`Toolbox`]) against the lease's judge, with the same failover.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use hpcagent_orchestrator::client;
use hpcagent_orchestrator::control::auth::JUDGE_TOKEN_VAR;
use hpcagent_proto::v1 as pb;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::judge_link::JudgeLink;
use crate::search::Search;
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// The lease file an MCP server serves.
pub const LEASE_FILE: &str = "lease.json";

/// What `hpcagent mcp` needs to know of its lease (no secrets: those come in
/// its environment).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseFile {
    pub run_dir: PathBuf,
    pub instance: String,
    pub lease_id: String,
    pub task_id: String,
    pub kernel: String,
    pub language: String,
    pub precision: String,
    pub attempt: u32,
    pub judge_url: String,
    pub attempt_dir: String,
    /// When the lease's budget ends (Unix milliseconds).
    pub budget_end_unix_ms: i64,
}

impl LeaseFile {
    pub fn new(lease: &pb::Lease, run_dir: &Path, instance: &str, budget_s: f64) -> LeaseFile {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64;
        LeaseFile {
            run_dir: run_dir.to_path_buf(),
            instance: instance.to_string(),
            lease_id: lease.lease_id.clone(),
            task_id: lease.task_id.clone(),
            kernel: lease.kernel.clone(),
            language: lease.language.clone(),
            precision: lease.precision.clone(),
            attempt: lease.attempt,
            judge_url: lease.judge_url.clone(),
            attempt_dir: lease.attempt_dir.clone(),
            budget_end_unix_ms: now + (budget_s * 1000.0) as i64,
        }
    }

    /// The lease as the toolbox takes it, with what is left of its budget.
    fn lease(&self) -> pb::Lease {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64;
        pb::Lease {
            lease_id: self.lease_id.clone(),
            task_id: self.task_id.clone(),
            kernel: self.kernel.clone(),
            language: self.language.clone(),
            precision: self.precision.clone(),
            attempt: self.attempt,
            judge_url: self.judge_url.clone(),
            attempt_dir: self.attempt_dir.clone(),
            budget_s: ((self.budget_end_unix_ms - now).max(0) as f64) / 1000.0,
            ..Default::default()
        }
    }
}

/// Serves the tools of the lease in `lease_file` on stdin/stdout until the
/// client goes away.
pub async fn serve(lease_file: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(lease_file)
        .with_context(|| format!("cannot read {}", lease_file.display()))?;
    let file: LeaseFile =
        serde_json::from_str(&text).with_context(|| format!("{}", lease_file.display()))?;
    let tools = toolbox(&file).await?;
    let server = Server {
        tools: Arc::new(Mutex::new(tools)),
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP session did not start")?;
    running.waiting().await.context("the MCP session failed")?;
    Ok(())
}

async fn toolbox(file: &LeaseFile) -> anyhow::Result<Toolbox> {
    let var = |name: &str| {
        std::env::var(name).with_context(|| {
            format!("{name} is not set: `hpcagent mcp` runs from the MCP configuration an agent worker writes")
        })
    };
    // Only a failing judge needs the orchestrator (to move the lease).
    let orchestrator =
        client::connect_lazy(&var(client::ORCHESTRATOR_VAR)?, &var(client::TOKEN_VAR)?)?;
    let lease = file.lease();
    let judge = JudgeLink::new(orchestrator, &lease, &var(JUDGE_TOKEN_VAR)?);
    let workspace = Workspace::create(Path::new(&file.attempt_dir))?;
    let config =
        hpcagent_orchestrator::config::load(Some(&file.run_dir.join("env.resolved")), Vec::new())?;
    let search = Search::from_settings(&config.settings).map_err(anyhow::Error::msg)?;
    let mut tools = Toolbox::new(lease, judge, workspace, &file.instance, search);
    tools.adopt_earlier_submit();
    Ok(tools)
}

#[derive(Clone)]
struct Server {
    tools: Arc<Mutex<Toolbox>>,
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
        let specs = self.tools.lock().await.specs();
        let tools = specs
            .iter()
            .map(|s| {
                let schema = s.parameters.as_object().cloned().unwrap_or_default();
                Tool::new(s.name, s.description, schema)
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
            .await;
        let content = vec![ContentBlock::text(reply.text)];
        Ok(if reply.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

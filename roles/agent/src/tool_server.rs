//! An attempt's tools, served to the external agent CLI the worker runs.
//!
//! The worker keeps the [`Toolbox`], and with it everything that carries
//! authority: the orchestrator and judge tokens, the links, the record of
//! whether the attempt submitted. The CLI's MCP server (`hpcagent mcp`)
//! reaches the tools through a TCP port on loopback with a secret made for
//! this attempt alone, so a CLI with a shell holds no token that works
//! beyond its own task. TCP, not a Unix socket: the CLI's sandbox allows no
//! Unix sockets at all, and TCP only to this port and its model's meter
//! ([`crate::sandbox`]). The protocol is one JSON object per line each way.

use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

use crate::tools::{ToolReply, Toolbox};

/// The environment variable that hands `hpcagent mcp` its attempt's secret.
pub const SECRET_VAR: &str = "HPCAGENT_TOOLS_SECRET";

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    List {
        secret: String,
    },
    Call {
        secret: String,
        name: String,
        arguments: String,
    },
}

/// A tool as a client lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "response", rename_all = "snake_case")]
pub enum Response {
    Tools {
        tools: Vec<ToolInfo>,
    },
    Reply {
        text: String,
        is_error: bool,
        ends: Option<String>,
    },
    Refused {
        why: String,
    },
}

/// A running tool server; stopped when dropped, and with it every
/// connection it accepted: an MCP server the CLI left running (or started
/// again) cannot write into a finished attempt's workspace or grade under
/// its lease.
pub struct ToolServer {
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl ToolServer {
    /// Serves `tools` on a new loopback port, for clients that know `secret`.
    pub async fn start(tools: Arc<Mutex<Toolbox>>, secret: String) -> std::io::Result<ToolServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let secret = Arc::new(secret);
        let accept = tokio::spawn(async move {
            // Dropped with this task, the set aborts every connection.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => {
                            connections.spawn(serve(stream, tools.clone(), secret.clone()));
                        }
                        // Out of descriptors, say: the open connections go on.
                        Err(e) => {
                            tracing::warn!("the tool server cannot accept: {e}");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Ok(ToolServer { addr, accept })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ToolServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(stream: TcpStream, tools: Arc<Mutex<Toolbox>>, secret: Arc<String>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let response = match serde_json::from_str::<Request>(&line) {
            Err(e) => Response::Refused {
                why: format!("not a request: {e}"),
            },
            Ok(request) => answer(request, &tools, &secret).await,
        };
        let mut text = serde_json::to_string(&response).unwrap_or_default();
        text.push('\n');
        if write.write_all(text.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn answer(request: Request, tools: &Mutex<Toolbox>, secret: &str) -> Response {
    let presented = match &request {
        Request::List { secret } | Request::Call { secret, .. } => secret,
    };
    if !hpcagent_common::constant_time_eq(presented.as_bytes(), secret.as_bytes()) {
        return Response::Refused {
            why: "wrong secret: these are another attempt's tools".into(),
        };
    }
    match request {
        Request::List { .. } => Response::Tools {
            tools: tools
                .lock()
                .await
                .specs()
                .into_iter()
                .map(|s| ToolInfo {
                    name: s.name.to_string(),
                    description: s.description.to_string(),
                    parameters: s.parameters,
                })
                .collect(),
        },
        Request::Call {
            name, arguments, ..
        } => {
            let reply = tools.lock().await.call(&name, &arguments).await;
            Response::Reply {
                text: reply.text,
                is_error: reply.is_error,
                ends: reply.ends,
            }
        }
    }
}

/// The client side, for `hpcagent mcp`.
pub struct ToolClient {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
    secret: String,
}

impl ToolClient {
    pub async fn connect(addr: SocketAddr, secret: String) -> std::io::Result<ToolClient> {
        let (read, write) = TcpStream::connect(addr).await?.into_split();
        Ok(ToolClient {
            lines: BufReader::new(read).lines(),
            write,
            secret,
        })
    }

    async fn ask(&mut self, request: &Request) -> Result<Response, String> {
        let mut text = serde_json::to_string(request).map_err(|e| e.to_string())?;
        text.push('\n');
        self.write
            .write_all(text.as_bytes())
            .await
            .map_err(|e| format!("the agent worker is gone: {e}"))?;
        let line = self
            .lines
            .next_line()
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the agent worker closed the tool connection")?;
        match serde_json::from_str(&line).map_err(|e| e.to_string())? {
            Response::Refused { why } => Err(why),
            response => Ok(response),
        }
    }

    pub async fn list(&mut self) -> Result<Vec<ToolInfo>, String> {
        let request = Request::List {
            secret: self.secret.clone(),
        };
        match self.ask(&request).await? {
            Response::Tools { tools } => Ok(tools),
            _ => Err("the worker answered a listing with something else".into()),
        }
    }

    pub async fn call(&mut self, name: &str, arguments: &str) -> Result<ToolReply, String> {
        let request = Request::Call {
            secret: self.secret.clone(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        };
        match self.ask(&request).await? {
            Response::Reply {
                text,
                is_error,
                ends,
            } => Ok(ToolReply {
                text,
                is_error,
                ends,
            }),
            _ => Err("the worker answered a call with something else".into()),
        }
    }
}

//! A judge served on its own (`hpcagent judge serve`), outside a campaign:
//! the Judge service on an address, the tasks it was asked to warm made
//! ahead, until it is interrupted. A campaign's judge is [`crate::role`].

use std::net::SocketAddr;
use std::sync::Arc;

use crate::judge::Judge;
use crate::service::Service;
use crate::warm::{self, ToWarm};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the judge server failed: {0}")]
    Server(#[from] tonic::transport::Error),
}

/// Serves `judge` on `listen` (its bound address printed on stdout, for
/// scripts and tests, as the port may be 0), warming `to_warm` within
/// `warm_budget` bytes, until SIGINT or SIGTERM.
pub async fn serve(
    judge: Judge,
    listen: SocketAddr,
    to_warm: Vec<ToWarm>,
    warm_budget: u64,
) -> Result<(), ServeError> {
    log_capabilities(&judge);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: listen,
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: listen,
        source,
    })?;
    println!("listening on {bound}");
    let judge = Arc::new(judge);
    warm::spawn(judge.clone(), to_warm, warm_budget);
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(Service::new(judge, None))
        .serve_with_incoming_shutdown(incoming, crate::role::stop_signal())
        .await?;
    Ok(())
}

fn log_capabilities(judge: &Judge) {
    let caps = judge.capabilities();
    for c in &caps.compilers {
        tracing::info!(language = %c.language, command = %c.command, version = %c.version, "compiler");
    }
    for m in &caps.missing {
        tracing::warn!("missing: {m}");
    }
    tracing::info!(
        kernels = caps.kernels.len(),
        slots = caps.slots,
        profilers = %caps.profilers.join(","),
        cache = %caps.cache_dir,
        rank = %caps.rank,
        isolation = %caps.isolation,
        "judge ready"
    );
}

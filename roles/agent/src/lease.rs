//! What a worker needs to know about the lease it works: whether it still
//! holds it, and how to move it off an endpoint that failed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hpcagent_common::Client;
use hpcagent_proto::v1 as pb;
use tonic::Code;

/// Says whether the lease was lost (expired, or taken back by the orchestrator).
pub type LeaseWatch = Arc<dyn Fn() -> bool + Send + Sync>;

/// A watch for tests and tools that run without heartbeats.
pub fn never_lost() -> LeaseWatch {
    Arc::new(|| false)
}

/// The endpoints a lease names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Judge,
    Inference,
}

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("the lease is gone: {0}")]
    LeaseGone(String),
    #[error("the lease's budget ran out waiting for a usable endpoint")]
    OutOfBudget,
}

const WAIT_STEP: Duration = Duration::from_secs(2);

/// Reports `failed_url` as failing and returns the endpoint the lease gets
/// next, waiting (until `budget_end`) while none is usable. An orchestrator
/// that does not answer is asked again: only its saying so ends the lease.
pub async fn move_endpoint(
    orchestrator: &mut Client,
    lease_id: &str,
    endpoint: Endpoint,
    failed_url: &str,
    budget_end: Instant,
) -> Result<String, MoveError> {
    let mut report = true;
    loop {
        let request = pb::RenewLeaseRequest {
            lease_id: lease_id.to_string(),
            judge_failed: report && endpoint == Endpoint::Judge,
            inference_failed: report && endpoint == Endpoint::Inference,
            failed_url: failed_url.to_string(),
        };
        match orchestrator.renew_lease(request).await {
            Ok(reply) => {
                let reply = reply.into_inner();
                let url = match endpoint {
                    Endpoint::Judge => reply.judge_url,
                    Endpoint::Inference => reply.inference_url,
                };
                if !url.is_empty() {
                    return Ok(url.trim_end_matches('/').to_string());
                }
                report = false;
            }
            Err(status) if matches!(status.code(), Code::NotFound | Code::PermissionDenied) => {
                return Err(MoveError::LeaseGone(status.message().to_string()));
            }
            Err(status) => tracing::warn!("renewing the lease: {}", status.message()),
        }
        if budget_end.saturating_duration_since(Instant::now()) <= WAIT_STEP {
            return Err(MoveError::OutOfBudget);
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
}

//! An agent's line to the judge of its lease.
//!
//! Every call carries the campaign's judge token and may take no longer than
//! what is left of the lease's budget. When the judge cannot be reached (or
//! cannot grade), the link tells the orchestrator, which sets that judge
//! aside and moves the lease to another; with no other judge usable, the link
//! waits for one, within the budget. A judge that answers with a refusal
//! (a bad request, a submission it will not take) is not a failing judge:
//! that answer goes back to the caller.

use std::future::Future;
use std::time::{Duration, Instant};

use hpcagent_common::{Bearer, Client, channel};
use hpcagent_proto::v1 as pb;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::lease::{self, Endpoint, MoveError};

/// The grade request of `source` for `lease`'s task, from `client` (the
/// worker's instance): the one place a lease's request is made, whoever
/// submits (an agent's tool, the baseline policy, a worker for its agent).
pub fn grade_request(
    lease: &pb::Lease,
    client: &str,
    source: String,
    flags: Vec<String>,
    on_behalf: Option<pb::OnBehalf>,
) -> pb::GradeRequest {
    pb::GradeRequest {
        task_id: lease.kernel.clone(),
        language: lease.language.clone(),
        precision: lease.precision.clone(),
        code: Some(pb::grade_request::Code::Source(source)),
        flags,
        client: client.to_string(),
        lease_id: lease.lease_id.clone(),
        preset: lease.preset.clone(),
        confirming: false,
        on_behalf,
    }
}

/// A judge client with the judge token on every call.
pub type JudgeClient = pb::judge_client::JudgeClient<InterceptedService<Channel, Bearer>>;

/// How many times a link moves to another judge before it gives up.
const MAX_MOVES: u32 = 5;

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The judge answered, and the answer is no.
    #[error("the judge refused: {}", .0.message())]
    Refused(Status),
    #[error("the lease's budget ran out before the judge answered")]
    OutOfBudget,
    /// Moving to another judge ended the lease.
    #[error(transparent)]
    Moved(#[from] MoveError),
    #[error("no judge answered after {MAX_MOVES} moves; the last said: {0}")]
    NoJudge(String),
}

pub struct JudgeLink {
    orchestrator: Client,
    lease_id: String,
    url: String,
    token: String,
    budget_end: Instant,
    client: Option<JudgeClient>,
}

impl JudgeLink {
    /// The link of `lease`, authenticated with the campaign's judge `token`.
    pub fn new(orchestrator: Client, lease: &pb::Lease, token: &str) -> JudgeLink {
        JudgeLink {
            orchestrator,
            lease_id: lease.lease_id.clone(),
            url: lease.judge_url.clone(),
            token: token.to_string(),
            budget_end: Instant::now() + Duration::from_secs_f64(lease.budget_s.max(0.0)),
            client: None,
        }
    }

    /// The judge the link talks to now.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What is left of the lease's budget.
    pub fn budget_left(&self) -> Duration {
        self.budget_end.saturating_duration_since(Instant::now())
    }

    /// Calls the judge with `call`, moving to another judge when this one fails.
    pub async fn call<T, F, Fut>(&mut self, call: F) -> Result<T, LinkError>
    where
        F: Fn(JudgeClient) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut moves = 0;
        loop {
            let left = self.budget_left();
            if left.is_zero() {
                return Err(LinkError::OutOfBudget);
            }
            let failure = match self.client().await {
                Err(why) => why,
                Ok(client) => match tokio::time::timeout(left, call(client)).await {
                    Err(_) => return Err(LinkError::OutOfBudget),
                    Ok(Ok(reply)) => return Ok(reply.into_inner()),
                    Ok(Err(status)) if judge_failed(&status) => status.message().to_string(),
                    Ok(Err(status)) => return Err(LinkError::Refused(status)),
                },
            };
            moves += 1;
            if moves > MAX_MOVES {
                return Err(LinkError::NoJudge(failure));
            }
            tracing::warn!(judge = %self.url, lease = %self.lease_id, "judge failed: {failure}");
            self.move_judge().await?;
        }
    }

    async fn client(&mut self) -> Result<JudgeClient, String> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let channel = channel(&self.url)
            .await
            .map_err(|e| format!("cannot reach {}: {e}", self.url))?;
        let bearer = Bearer::new(&self.token).map_err(|e| e.to_string())?;
        let client = pb::judge_client::JudgeClient::with_interceptor(channel, bearer)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Reports the judge as failing and takes the judge the lease gets next.
    async fn move_judge(&mut self) -> Result<(), LinkError> {
        self.client = None;
        self.url = lease::move_endpoint(
            &mut self.orchestrator,
            &self.lease_id,
            Endpoint::Judge,
            &self.url,
            self.budget_end,
        )
        .await?;
        Ok(())
    }
}

/// Whether a status means the judge failed (rather than answered no).
fn judge_failed(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Unauthenticated
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_answers_and_outages_are_failures() {
        assert!(judge_failed(&Status::unavailable("connection refused")));
        assert!(judge_failed(&Status::internal("the grade stopped")));
        assert!(!judge_failed(&Status::invalid_argument("unknown task")));
        assert!(!judge_failed(&Status::resource_exhausted(
            "source too large"
        )));
    }
}

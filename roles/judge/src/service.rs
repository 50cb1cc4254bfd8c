//! The gRPC Judge service: the wire face of [`Judge`].
//!
//! In a campaign the service also reports every verdict given under a lease
//! to the orchestrator through a [`Recorder`]; a Submit verdict is reported
//! (and its task settled) before the agent hears it, so an agent cannot
//! complete a task the orchestrator has not seen settled.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::judge_server::JudgeServer;
use tonic::{Request, Response, Status};

use crate::judge::{Judge, JudgeError, Submission};

impl From<JudgeError> for Status {
    fn from(e: JudgeError) -> Status {
        match e {
            JudgeError::InvalidArgument(m) => Status::invalid_argument(m),
            JudgeError::FailedPrecondition(m) => Status::failed_precondition(m),
            JudgeError::Internal(m) => Status::internal(m),
        }
    }
}

/// A recording in flight: whether it settled a task, or why it failed.
pub type Recording = Pin<Box<dyn Future<Output = Result<bool, String>> + Send>>;

/// Where verdicts given under a lease are reported.
pub trait Recorder: Send + Sync + 'static {
    /// `on_behalf`: the request's, for a Submit a worker made for its agent.
    fn record(
        &self,
        lease_id: String,
        kind: pb::GradeKind,
        verdict: pb::Verdict,
        on_behalf: Option<pb::OnBehalf>,
    ) -> Recording;
}

/// The service over a shared judge.
#[derive(Clone)]
pub struct Service {
    judge: Arc<Judge>,
    recorder: Option<Arc<dyn Recorder>>,
}

impl Service {
    pub fn new(judge: Arc<Judge>, recorder: Option<Arc<dyn Recorder>>) -> JudgeServer<Service> {
        // Verdicts carry logs and profiles: allow more than the 4 MiB default.
        JudgeServer::new(Service { judge, recorder })
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    /// Grades in a task of its own, so that a caller who goes away does not
    /// cancel a run half-way, then reports the verdict.
    async fn grade(
        &self,
        request: pb::GradeRequest,
        kind: pb::GradeKind,
    ) -> Result<pb::Verdict, Status> {
        let lease = request.lease_id.clone();
        let on_behalf = request.on_behalf.clone();
        let submission = Submission::try_from(request)?;
        let judge = self.judge.clone();
        let verdict = tokio::spawn(async move {
            match kind {
                pb::GradeKind::Submit => judge.submit(submission).await,
                _ => judge.score(submission).await,
            }
        })
        .await
        .map_err(|e| Status::internal(format!("the grade stopped: {e}")))??;
        let verdict = pb::Verdict::from(&verdict);
        self.record(&lease, kind, &verdict, on_behalf).await?;
        Ok(verdict)
    }

    /// Reports a verdict given under a lease. A Submit verdict that cannot be
    /// recorded is not returned to the agent as if it had counted.
    async fn record(
        &self,
        lease_id: &str,
        kind: pb::GradeKind,
        verdict: &pb::Verdict,
        on_behalf: Option<pb::OnBehalf>,
    ) -> Result<(), Status> {
        let Some(recorder) = &self.recorder else {
            return Ok(());
        };
        if lease_id.is_empty() {
            return Ok(());
        }
        match recorder
            .record(lease_id.to_string(), kind, verdict.clone(), on_behalf)
            .await
        {
            Ok(_) => Ok(()),
            Err(why) if kind == pb::GradeKind::Submit => Err(Status::unavailable(format!(
                "the verdict could not be recorded: {why}"
            ))),
            Err(why) => {
                tracing::warn!("recording a {kind:?} verdict for lease {lease_id}: {why}");
                Ok(())
            }
        }
    }
}

#[tonic::async_trait]
impl pb::judge_server::Judge for Service {
    async fn task(
        &self,
        request: Request<pb::TaskRequest>,
    ) -> Result<Response<pb::TaskInfo>, Status> {
        let r = request.into_inner();
        let language = r.language.parse().map_err(Status::invalid_argument)?;
        let precision = if r.precision.is_empty() {
            None
        } else {
            Some(r.precision.parse().map_err(Status::invalid_argument)?)
        };
        let preset = crate::judge::parse_preset(&r.preset)?;
        Ok(Response::new(
            self.judge
                .task(&r.task_id, language, precision, preset)
                .await?,
        ))
    }

    async fn score(
        &self,
        request: Request<pb::GradeRequest>,
    ) -> Result<Response<pb::Verdict>, Status> {
        self.grade(request.into_inner(), pb::GradeKind::Score)
            .await
            .map(Response::new)
    }

    async fn submit(
        &self,
        request: Request<pb::GradeRequest>,
    ) -> Result<Response<pb::Verdict>, Status> {
        self.grade(request.into_inner(), pb::GradeKind::Submit)
            .await
            .map(Response::new)
    }

    async fn profile(
        &self,
        request: Request<pb::ProfileRequest>,
    ) -> Result<Response<pb::ProfileReport>, Status> {
        let r = request.into_inner();
        let tool = r.tool.parse().map_err(Status::invalid_argument)?;
        let submission = r
            .submission
            .ok_or_else(|| Status::invalid_argument("profile needs a submission"))?;
        let lease = submission.lease_id.clone();
        let submission = Submission::try_from(submission)?;
        let judge = self.judge.clone();
        // A grade runs to its end (and cleans up) even if the caller goes away.
        let report = tokio::spawn(async move { judge.profile(submission, tool, r.events).await })
            .await
            .map_err(|e| Status::internal(format!("the grade stopped: {e}")))??;
        if let Some(run) = &report.run {
            self.record(&lease, pb::GradeKind::Profile, run, None)
                .await?;
        }
        Ok(Response::new(report))
    }

    async fn capabilities(
        &self,
        _: Request<pb::CapabilitiesRequest>,
    ) -> Result<Response<pb::JudgeCapabilities>, Status> {
        Ok(Response::new(self.judge.capabilities()))
    }
}

//! The gRPC Judge service: the wire face of [`Judge`].

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

/// The service over a shared judge.
#[derive(Clone)]
pub struct Service {
    judge: Arc<Judge>,
}

impl Service {
    pub fn new(judge: Arc<Judge>) -> JudgeServer<Service> {
        // Verdicts carry logs and profiles: allow more than the 4 MiB default.
        JudgeServer::new(Service { judge })
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
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
        Ok(Response::new(
            self.judge.task(&r.task_id, language, precision)?,
        ))
    }

    async fn score(
        &self,
        request: Request<pb::GradeRequest>,
    ) -> Result<Response<pb::Verdict>, Status> {
        let submission = Submission::try_from(request.into_inner())?;
        let verdict = self.judge.score(submission).await?;
        Ok(Response::new((&verdict).into()))
    }

    async fn submit(
        &self,
        request: Request<pb::GradeRequest>,
    ) -> Result<Response<pb::Verdict>, Status> {
        let submission = Submission::try_from(request.into_inner())?;
        let verdict = self.judge.submit(submission).await?;
        Ok(Response::new((&verdict).into()))
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
        let report = self
            .judge
            .profile(Submission::try_from(submission)?, tool, r.events)
            .await?;
        Ok(Response::new(report))
    }

    async fn capabilities(
        &self,
        _: Request<pb::CapabilitiesRequest>,
    ) -> Result<Response<pb::JudgeCapabilities>, Status> {
        Ok(Response::new(self.judge.capabilities()))
    }
}

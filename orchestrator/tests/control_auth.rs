//! The control plane's authentication, over real gRPC on loopback: a call
//! without a token, with an unknown token, with another role's token for
//! what only judges may do, or with another instance's token, is refused.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hpcagent_orchestrator::campaign::state::{Campaign, RoleEntry};
use hpcagent_orchestrator::client;
use hpcagent_orchestrator::control::{Control, auth::Tokens};
use hpcagent_orchestrator::plan::Role;
use hpcagent_orchestrator::scheduler::{Scheduler, Settings, Task, TaskSpec};
use hpcagent_orchestrator::store::Store;
use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::orchestrator_client::OrchestratorClient;

struct Running {
    url: String,
    tokens: Tokens,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), false).unwrap();
    let instances = [
        ("agent-0", Role::Agent),
        ("agent-1", Role::Agent),
        ("judge-0", Role::Judge),
        ("judge-1", Role::Judge),
    ];
    let tokens = Tokens::generate(instances);
    let task = Task::pending(TaskSpec {
        id: "gemm.c.fp64".into(),
        kernel: "gemm".into(),
        language: "c".into(),
        precision: "fp64".into(),
        preset: None,
    });
    let scheduler = Scheduler::new(
        Settings {
            max_attempts: 3,
            task_budget: Duration::from_secs(600),
            lease_ttl: Duration::from_secs(30),
            needs_inference: false,
        },
        vec![task],
    );
    let roles: BTreeMap<String, RoleEntry> = instances
        .into_iter()
        .map(|(name, role)| (name.to_string(), RoleEntry::launching(role, "n1")))
        .collect();
    let campaign = Arc::new(Campaign::new(
        "auth".into(),
        dir.path().to_path_buf(),
        store,
        tokens.clone(),
        Duration::from_secs(2),
        1,
        scheduler,
        roles,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Control::server(campaign))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Running {
        url,
        tokens,
        _dir: dir,
    }
}

fn verdict() -> pb::Verdict {
    pb::Verdict {
        status: pb::Status::Ok as i32,
        task_id: "dense_linear_algebra/gemm".into(),
        language: "c".into(),
        precision: "fp64".into(),
        speedup: 1.0,
        ..Default::default()
    }
}

fn record(lease: &str) -> pb::RecordResultRequest {
    pb::RecordResultRequest {
        lease_id: lease.into(),
        kind: pb::GradeKind::Submit as i32,
        verdict: Some(verdict()),
        judge: "judge-0".into(),
    }
}

#[tokio::test]
async fn only_judges_record_results_and_every_call_needs_a_token() {
    let running = start().await;

    // No token at all.
    let mut anonymous = OrchestratorClient::connect(running.url.clone())
        .await
        .unwrap();
    let err = anonymous.record_result(record("x")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    let err = anonymous
        .pull_task(pb::PullTaskRequest {
            instance: "agent-0".into(),
            worker: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);

    // A made-up token.
    let mut stranger = client::connect(&running.url, "0123456789abcdef")
        .await
        .unwrap();
    let err = stranger.record_result(record("x")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);

    // The judge registers and is ready; the agent takes the lease.
    let mut judge = client::connect(&running.url, running.tokens.of("judge-0").unwrap())
        .await
        .unwrap();
    judge
        .register(pb::RegisterRequest {
            role: pb::Role::Judge as i32,
            instance: "judge-0".into(),
            node: "n1".into(),
            endpoint: "n1:8800".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    judge
        .heartbeat(pb::HeartbeatRequest {
            instance: "judge-0".into(),
            state: pb::RoleState::Ready as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut agent = client::connect(&running.url, running.tokens.of("agent-0").unwrap())
        .await
        .unwrap();
    let lease = agent
        .pull_task(pb::PullTaskRequest {
            instance: "agent-0".into(),
            worker: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .lease
        .expect("a lease once a judge is ready");

    // An agent cannot forge the verdict that settles its own task ...
    let err = agent
        .record_result(record(&lease.lease_id))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    // ... nor register as a judge.
    let err = agent
        .register(pb::RegisterRequest {
            role: pb::Role::Judge as i32,
            instance: "judge-0".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);

    // The judge can, once; the agent then sees the task settled.
    let settled = judge
        .record_result(record(&lease.lease_id))
        .await
        .unwrap()
        .into_inner();
    assert!(settled.settled);
    let err = judge
        .record_result(record(&lease.lease_id))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::FailedPrecondition,
        "no task settles twice"
    );
    let done = agent
        .complete_task(pb::CompleteTaskRequest {
            lease_id: lease.lease_id.clone(),
            outcome: "submitted".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(done.settled);
    let next = agent
        .pull_task(pb::PullTaskRequest {
            instance: "agent-0".into(),
            worker: 0,
        })
        .await
        .unwrap();
    assert!(next.into_inner().done);
}

#[tokio::test]
async fn a_verdict_for_another_task_is_refused() {
    let running = start().await;
    let mut judge = client::connect(&running.url, running.tokens.of("judge-0").unwrap())
        .await
        .unwrap();
    judge
        .register(pb::RegisterRequest {
            role: pb::Role::Judge as i32,
            instance: "judge-0".into(),
            endpoint: "n1:8800".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    judge
        .heartbeat(pb::HeartbeatRequest {
            instance: "judge-0".into(),
            state: pb::RoleState::Ready as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut agent = client::connect(&running.url, running.tokens.of("agent-0").unwrap())
        .await
        .unwrap();
    let lease = agent
        .pull_task(pb::PullTaskRequest {
            instance: "agent-0".into(),
            worker: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    let mut wrong = record(&lease.lease_id);
    wrong.verdict.as_mut().unwrap().task_id = "dense_linear_algebra/atax".into();
    let err = judge.record_result(wrong).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn an_instance_acts_only_as_itself() {
    let running = start().await;
    let connect = |name: &str| client::connect(&running.url, running.tokens.of(name).unwrap());
    let mut judge = connect("judge-0").await.unwrap();
    judge
        .register(pb::RegisterRequest {
            role: pb::Role::Judge as i32,
            instance: "judge-0".into(),
            endpoint: "n1:8800".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    judge
        .heartbeat(pb::HeartbeatRequest {
            instance: "judge-0".into(),
            state: pb::RoleState::Ready as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut other_judge = connect("judge-1").await.unwrap();
    let err = other_judge
        .heartbeat(pb::HeartbeatRequest {
            instance: "judge-0".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::PermissionDenied,
        "judge-1 heartbeats for judge-0"
    );

    let mut agent = connect("agent-0").await.unwrap();
    let mut other_agent = connect("agent-1").await.unwrap();
    let pull_as_0 = pb::PullTaskRequest {
        instance: "agent-0".into(),
        worker: 0,
    };
    let err = other_agent.pull_task(pull_as_0.clone()).await.unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::PermissionDenied,
        "agent-1 pulls as agent-0"
    );
    let lease = agent
        .pull_task(pull_as_0)
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    let err = other_agent
        .complete_task(pb::CompleteTaskRequest {
            lease_id: lease.lease_id.clone(),
            outcome: "gave_up".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::PermissionDenied,
        "agent-1 ends agent-0's lease"
    );
    let err = other_agent
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: lease.lease_id.clone(),
            judge_failed: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::PermissionDenied,
        "agent-1 moves agent-0's lease"
    );
    let err = other_judge
        .record_result(record(&lease.lease_id))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::PermissionDenied,
        "judge-1 records a verdict for a lease judge-0 judges"
    );
    assert!(
        judge
            .record_result(record(&lease.lease_id))
            .await
            .unwrap()
            .into_inner()
            .settled
    );
}

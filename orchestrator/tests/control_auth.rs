//! The control plane's authentication, over real gRPC on loopback: a call
//! without a token, with an unknown token, with another role's token for
//! what only judges may do, or with another instance's token, is refused.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hpcagent_common::plan::Role;
use hpcagent_common::{AttemptOutcome, Leases, Pulled, Records};
use hpcagent_orchestrator::auth::Tokens;
use hpcagent_orchestrator::control::Control;
use hpcagent_orchestrator::live::{Campaign, RoleEntry};
use hpcagent_orchestrator::scheduler::{Scheduler, Settings, Task, TaskSpec};
use hpcagent_orchestrator::store::Store;
use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::orchestrator_client::OrchestratorClient;

/// Sends one request on a `Leases` stream and takes its one reply.
macro_rules! exchange {
    ($client:expr, $request:expr) => {
        async {
            let mut replies = $client
                .leases(tokio_stream::iter([$request]))
                .await?
                .into_inner();
            let reply = replies.message().await?;
            Ok::<_, tonic::Status>(reply.expect("one reply to one request"))
        }
        .await
    };
}

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
        track: "dense_linear_algebra".into(),
        language: "c".into(),
        precision: "fp64".into(),
        preset: None,
        budget: None,
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

fn record(lease: &str) -> pb::GradeRecord {
    pb::GradeRecord {
        lease_id: lease.into(),
        kind: pb::GradeKind::Submit as i32,
        verdict: Some(verdict()),
        judge: "judge-0".into(),
        on_behalf: None,
    }
}

/// The lease `leases` pulls for worker 0.
async fn lease_of(leases: &Leases) -> pb::Lease {
    match leases.pull(0).await.unwrap() {
        Pulled::Lease(lease) => *lease,
        other => panic!("no lease: {other:?}"),
    }
}

fn completion(lease: &str, outcome: AttemptOutcome) -> pb::Completion {
    pb::Completion {
        lease_id: lease.into(),
        outcome: outcome.to_wire(),
        ..Default::default()
    }
}

/// A judge registered and ready, and its verdict line.
async fn ready_judge(running: &Running, name: &str) -> Records {
    let mut judge = hpcagent_common::connect(&running.url, running.tokens.of(name).unwrap())
        .await
        .unwrap();
    judge
        .register(pb::RegisterRequest {
            role: pb::Role::Judge as i32,
            instance: name.into(),
            node: "n1".into(),
            endpoint: "n1:8800".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    judge
        .heartbeat(pb::HeartbeatRequest {
            instance: name.into(),
            state: pb::RoleState::Ready as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    Records::new(judge)
}

#[tokio::test]
async fn only_judges_record_results_and_every_call_needs_a_token() {
    let running = start().await;

    // No token at all.
    let mut anonymous = OrchestratorClient::connect(running.url.clone())
        .await
        .unwrap();
    let err = anonymous
        .record_results(pb::RecordResultsRequest {
            records: vec![record("x")],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    let err = exchange!(
        anonymous,
        pb::LeasesRequest {
            instance: "agent-0".into(),
            pulls: vec![0],
            ..Default::default()
        }
    )
    .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);

    // A made-up token.
    let stranger = hpcagent_common::connect(&running.url, "0123456789abcdef")
        .await
        .unwrap();
    let err = Records::new(stranger)
        .record(record("x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);

    // The judge registers and is ready; the agent takes the lease.
    let judge = ready_judge(&running, "judge-0").await;
    let mut agent = hpcagent_common::connect(&running.url, running.tokens.of("agent-0").unwrap())
        .await
        .unwrap();
    let leases = Leases::new(agent.clone(), "agent-0");
    let lease = lease_of(&leases).await;

    // An agent cannot forge the verdict that settles its own task ...
    let err = Records::new(agent.clone())
        .record(record(&lease.lease_id))
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
    assert!(judge.record(record(&lease.lease_id)).await.unwrap());
    let err = judge.record(record(&lease.lease_id)).await.unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::FailedPrecondition,
        "no task settles twice"
    );
    let unspecified = pb::Completion {
        lease_id: lease.lease_id.clone(),
        ..Default::default()
    };
    let err = leases.complete(unspecified).await.unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::InvalidArgument,
        "a completion says how the attempt ended"
    );
    let settled = leases
        .complete(completion(&lease.lease_id, AttemptOutcome::Submitted))
        .await
        .unwrap();
    assert!(settled);
    assert_eq!(leases.pull(0).await.unwrap(), Pulled::Done);
}

#[tokio::test]
async fn a_verdict_for_another_task_is_refused() {
    let running = start().await;
    let judge = ready_judge(&running, "judge-0").await;
    let agent = hpcagent_common::connect(&running.url, running.tokens.of("agent-0").unwrap())
        .await
        .unwrap();
    let lease = lease_of(&Leases::new(agent, "agent-0")).await;
    let mut wrong = record(&lease.lease_id);
    wrong.verdict.as_mut().unwrap().task_id = "dense_linear_algebra/atax".into();
    let err = judge.record(wrong).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn an_instance_acts_only_as_itself() {
    let running = start().await;
    let connect =
        |name: &str| hpcagent_common::connect(&running.url, running.tokens.of(name).unwrap());
    let judge = ready_judge(&running, "judge-0").await;
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

    let agent = Leases::new(connect("agent-0").await.unwrap(), "agent-0");
    let mut other_agent = connect("agent-1").await.unwrap();
    let impostor = Leases::new(other_agent.clone(), "agent-0");
    for ask in ["first", "second"] {
        // The refusal ends the stream; the second ask opens a new one and
        // is refused for the same reason, not for a dead stream.
        let err = impostor.pull(0).await.unwrap_err();
        assert_eq!(
            err.code(),
            tonic::Code::PermissionDenied,
            "agent-1 pulls as agent-0 ({ask} ask): {err}"
        );
    }
    let lease = lease_of(&agent).await;
    let err = Leases::new(other_agent.clone(), "agent-1")
        .complete(completion(&lease.lease_id, AttemptOutcome::Finished))
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
    let err = Records::new(other_judge)
        .record(record(&lease.lease_id))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::PermissionDenied,
        "judge-1 records a verdict for a lease judge-0 judges"
    );
    assert!(judge.record(record(&lease.lease_id)).await.unwrap());
}

/// A batch is answered item by item: a refused item (another agent's lease,
/// a lease that never was) refuses only itself, and a batch of verdicts
/// settles the tasks its good records name.
#[tokio::test]
async fn a_refused_item_refuses_only_itself() {
    let running = start().await;
    let connect =
        |name: &str| hpcagent_common::connect(&running.url, running.tokens.of(name).unwrap());
    ready_judge(&running, "judge-0").await;
    let mut judge = connect("judge-0").await.unwrap();
    let mut agent = connect("agent-0").await.unwrap();
    let pulled = exchange!(
        agent,
        pb::LeasesRequest {
            instance: "agent-0".into(),
            pulls: vec![4, 7],
            ..Default::default()
        }
    )
    .unwrap();
    assert_eq!(pulled.leases.len(), 1, "one task, one lease");
    assert_eq!(
        pulled.leases[0].worker, 4,
        "the first asking worker gets it"
    );
    assert!(!pulled.done && pulled.retry_after_ms > 0, "the other waits");
    let lease = &pulled.leases[0].lease_id;

    let recorded = judge
        .record_results(pb::RecordResultsRequest {
            records: vec![record("no-such-lease"), record(lease), record(lease)],
        })
        .await
        .unwrap()
        .into_inner()
        .recorded;
    let codes: Vec<Option<i32>> = recorded
        .iter()
        .map(|r| r.refused.as_ref().map(|f| f.code))
        .collect();
    assert_eq!(
        codes,
        [
            Some(tonic::Code::FailedPrecondition as i32),
            None,
            Some(tonic::Code::FailedPrecondition as i32)
        ],
        "{recorded:?}"
    );
    assert!(recorded[1].settled);

    let completed = exchange!(
        agent,
        pb::LeasesRequest {
            instance: "agent-0".into(),
            completions: vec![
                completion("no-such-lease", AttemptOutcome::Finished),
                completion(lease, AttemptOutcome::Submitted),
            ],
            pulls: vec![4],
        }
    )
    .unwrap();
    assert_eq!(
        completed.completed[0].refused.as_ref().map(|r| r.code),
        Some(tonic::Code::NotFound as i32)
    );
    assert!(completed.completed[1].refused.is_none() && completed.completed[1].settled);
    assert!(completed.done, "the completion is applied before the pull");
}

/// A stream's requests are answered in order; one refused whole (it names
/// another instance) ends the stream with its status, and the stream's
/// earlier requests keep their answers.
#[tokio::test]
async fn a_request_refused_whole_ends_its_stream() {
    let running = start().await;
    ready_judge(&running, "judge-0").await;
    let mut agent = hpcagent_common::connect(&running.url, running.tokens.of("agent-0").unwrap())
        .await
        .unwrap();
    let asks = [
        pb::LeasesRequest {
            instance: "agent-0".into(),
            pulls: vec![0],
            ..Default::default()
        },
        pb::LeasesRequest {
            instance: "agent-1".into(),
            pulls: vec![0],
            ..Default::default()
        },
        pb::LeasesRequest {
            instance: "agent-0".into(),
            pulls: vec![1],
            ..Default::default()
        },
    ];
    let mut replies = agent
        .leases(tokio_stream::iter(asks))
        .await
        .unwrap()
        .into_inner();
    let first = replies
        .message()
        .await
        .unwrap()
        .expect("the first is answered");
    assert_eq!(first.leases.len(), 1);
    let err = replies.message().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err}");
    assert!(
        matches!(replies.message().await, Ok(None) | Err(_)),
        "nothing is answered after the refusal"
    );
}

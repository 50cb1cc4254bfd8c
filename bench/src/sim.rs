//! A campaign without role processes: the real control plane, scheduler and
//! store run in this process, and the plan's instances are only tokens that
//! simulated agents and judges use over loopback gRPC. What is measured is
//! exactly the code `hpcagent up` serves roles with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hpcagent_common::plan::Role;
use hpcagent_common::{Client, Records};
use hpcagent_orchestrator::auth::Tokens;
use hpcagent_orchestrator::control::Control;
use hpcagent_orchestrator::live::{Campaign, RoleEntry};
use hpcagent_orchestrator::scheduler::{Scheduler, Settings, Task, TaskSpec};
use hpcagent_orchestrator::store::{Store, TaskRow};
use hpcagent_proto::v1 as pb;

/// How big the simulated campaign is.
#[derive(Debug, Clone)]
pub struct Shape {
    pub agents: usize,
    pub judges: usize,
    pub tasks: usize,
    /// Workers per agent instance (leases one agent holds at once).
    pub workers: u32,
    pub heartbeat: Duration,
}

/// A running simulated campaign.
pub struct Simulated {
    pub url: String,
    pub tokens: Tokens,
    pub campaign: Arc<Campaign>,
    pub run_dir: PathBuf,
    pub agents: Vec<String>,
    pub judges: Vec<String>,
    /// Dropped with the simulation: its server shuts down, and the campaign
    /// with it (the store's writer, its files, the scheduler's tasks), so
    /// that one bench's runs do not pile up in its process.
    _serving: tokio::sync::oneshot::Sender<()>,
}

/// The instance names of a shape: `agent-<i>`, `judge-<i>`.
fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The fake address a simulated judge registers (nothing listens there:
/// simulated agents map it back to the judge's client).
pub fn judge_endpoint(index: usize) -> String {
    format!("127.0.0.1:{}", 20_000 + index)
}

fn task(i: usize) -> Task {
    Task::pending(TaskSpec {
        id: format!("sim-{i:06}.c.fp64"),
        kernel: "gemm".into(),
        track: "dense_linear_algebra".into(),
        language: "c".into(),
        precision: "fp64".into(),
        preset: None,
        budget: None,
    })
}

/// Starts the control plane over a fresh store in `run_dir`.
pub async fn start(run_dir: &Path, shape: &Shape) -> anyhow::Result<Simulated> {
    std::fs::create_dir_all(run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let store = Store::open(run_dir, true)?;
    let tasks: Vec<Task> = (0..shape.tasks).map(task).collect();
    store.campaign_started("bench", run_dir, None, "");
    store.add_tasks(tasks.iter().map(|t| TaskRow::pending(&t.spec)).collect());
    store.flush().await?;
    let scheduler = Scheduler::new(
        Settings {
            max_attempts: 3,
            task_budget: Duration::from_secs(3600),
            lease_ttl: Duration::from_secs(600),
            needs_inference: false,
        },
        tasks,
    );
    let agents = names("agent", shape.agents);
    let judges = names("judge", shape.judges);
    let instances: Vec<(&str, Role)> = agents
        .iter()
        .map(|a| (a.as_str(), Role::Agent))
        .chain(judges.iter().map(|j| (j.as_str(), Role::Judge)))
        .collect();
    let tokens = Tokens::generate(instances.iter().copied());
    let roles: BTreeMap<String, RoleEntry> = instances
        .iter()
        .map(|(name, role)| (name.to_string(), RoleEntry::launching(*role, "sim")))
        .collect();
    let campaign = Arc::new(Campaign::new(
        "bench".into(),
        run_dir.to_path_buf(),
        store,
        tokens.clone(),
        shape.heartbeat,
        shape.workers,
        scheduler,
        roles,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (serving, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Control::server(campaign.clone()))
            .serve_with_incoming_shutdown(
                hpcagent_orchestrator::control::incoming(listener),
                async {
                    let _ = stopped.await;
                },
            ),
    );
    Ok(Simulated {
        url,
        tokens,
        campaign,
        run_dir: run_dir.to_path_buf(),
        agents,
        judges,
        _serving: serving,
    })
}

impl Simulated {
    /// A client with `instance`'s token, on its own connection.
    pub async fn client(&self, instance: &str) -> anyhow::Result<Client> {
        let token = self
            .tokens
            .of(instance)
            .with_context(|| format!("no instance {instance}"))?;
        hpcagent_common::connect(&self.url, token).await
    }

    /// Registers every judge and reports it ready; returns their verdict
    /// lines, keyed by the URL leases name them by.
    pub async fn judges_ready(&self) -> anyhow::Result<BTreeMap<String, Records>> {
        let mut judges = BTreeMap::new();
        for (i, name) in self.judges.iter().enumerate() {
            let mut judge = self.client(name).await?;
            register(&mut judge, name, pb::Role::Judge, &judge_endpoint(i)).await?;
            heartbeat(&mut judge, name, true, Vec::new()).await?;
            judges.insert(format!("http://{}", judge_endpoint(i)), Records::new(judge));
        }
        Ok(judges)
    }
}

/// Registers `instance` as `role`.
pub async fn register(
    client: &mut Client,
    instance: &str,
    role: pb::Role,
    endpoint: &str,
) -> anyhow::Result<()> {
    client
        .register(pb::RegisterRequest {
            role: role as i32,
            instance: instance.into(),
            node: "sim".into(),
            endpoint: endpoint.into(),
            ..Default::default()
        })
        .await
        .with_context(|| format!("{instance} could not register"))?;
    Ok(())
}

/// One heartbeat of `instance`, holding `leases`.
pub async fn heartbeat(
    client: &mut Client,
    instance: &str,
    ready: bool,
    leases: Vec<String>,
) -> anyhow::Result<pb::HeartbeatReply> {
    let state = if ready {
        pb::RoleState::Ready
    } else {
        pb::RoleState::Starting
    };
    Ok(client
        .heartbeat(pb::HeartbeatRequest {
            instance: instance.into(),
            state: state as i32,
            leases,
            ..Default::default()
        })
        .await
        .with_context(|| format!("{instance}'s heartbeat"))?
        .into_inner())
}

/// The verdict a simulated judge records for a lease: an `ok` Submit.
pub fn verdict_for(lease: &pb::Lease) -> pb::GradeRecord {
    pb::GradeRecord {
        lease_id: lease.lease_id.clone(),
        kind: pb::GradeKind::Submit as i32,
        verdict: Some(pb::Verdict {
            status: pb::Status::Ok as i32,
            task_id: format!("dense_linear_algebra/{}", lease.kernel),
            language: lease.language.clone(),
            precision: lease.precision.clone(),
            preset: lease.preset.clone(),
            speedup: 1.0,
            ..Default::default()
        }),
        judge: String::new(),
        on_behalf: None,
    }
}

//! The link to the orchestrator: what every role process does to be part
//! of a campaign.
//!
//! A role finds its campaign in its environment (`HPCAGENT_ORCHESTRATOR`,
//! `HPCAGENT_TOKEN`, set by the executor) and its assignment in the run
//! directory (`plan.json`, `env.resolved`). It registers, then heartbeats in
//! the background; a role whose orchestrator stays unreachable exits on its
//! own, so a killed orchestrator leaves no roles behind. Lease traffic (an
//! agent's pulls and completions, a judge's verdicts) goes out in batches
//! ([`Leases`], [`Records`]).

mod batch;

pub use batch::{Leases, Pulled, Records};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::orchestrator_client::OrchestratorClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::config::{self, Config};
use crate::plan::{Plan, RoleInstance};

/// Environment variable with the orchestrator's address.
pub const ORCHESTRATOR_VAR: &str = "HPCAGENT_ORCHESTRATOR";
/// Environment variable with the role's token.
pub const TOKEN_VAR: &str = "HPCAGENT_TOKEN";
/// Environment variable with the token the campaign's judges accept.
pub const JUDGE_TOKEN_VAR: &str = "HPCAGENT_JUDGE_TOKEN";

/// Whether two tokens are equal, in a time that does not depend on where
/// they first differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

/// The bearer token of a request's metadata.
pub fn bearer<T>(request: &tonic::Request<T>) -> Option<&str> {
    request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Accepts only requests bearing `token` (a judge's service in a campaign).
pub fn require_token(
    token: String,
) -> impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |request: tonic::Request<()>| match bearer(&request) {
        Some(presented) if constant_time_eq(presented.as_bytes(), token.as_bytes()) => Ok(request),
        _ => Err(tonic::Status::unauthenticated(
            "this judge serves its campaign's agents only (authorization: Bearer <judge token>)",
        )),
    }
}
/// How long a role keeps going without reaching its orchestrator.
const ORPHAN_AFTER: Duration = Duration::from_secs(30);
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);

/// Adds the role token to every call.
#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

pub type Client = OrchestratorClient<InterceptedService<Channel, Bearer>>;

impl Bearer {
    pub fn new(token: &str) -> anyhow::Result<Bearer> {
        Ok(Bearer(format!("Bearer {token}").parse()?))
    }
}

/// A channel to a campaign peer (the orchestrator, a judge): HTTP/2
/// keepalive notices a peer whose node died, where TCP alone would wait
/// for minutes.
pub async fn channel(url: &str) -> anyhow::Result<Channel> {
    Ok(Channel::from_shared(url.to_string())?
        .connect_timeout(Duration::from_secs(10))
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true)
        .connect()
        .await?)
}

/// A client of `url` with `token` that connects on first use (for callers
/// that may never need the orchestrator).
pub fn connect_lazy(url: &str, token: &str) -> anyhow::Result<Client> {
    let channel = Channel::from_shared(url.to_string())?
        .connect_timeout(Duration::from_secs(10))
        .connect_lazy();
    Ok(
        OrchestratorClient::with_interceptor(channel, Bearer::new(token)?)
            .max_decoding_message_size(16 << 20),
    )
}

/// Connects to `url` with `token`.
pub async fn connect(url: &str, token: &str) -> anyhow::Result<Client> {
    let channel = channel(url)
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the orchestrator at {url}: {e}"))?;
    Ok(
        OrchestratorClient::with_interceptor(channel, Bearer::new(token)?)
            .max_decoding_message_size(16 << 20),
    )
}

/// What a role process knows about itself.
pub struct RoleContext {
    pub run_dir: PathBuf,
    pub instance: RoleInstance,
    pub plan: Plan,
    pub config: Config,
    /// The node it runs on, as other nodes reach it.
    pub node: String,
    pub client: Client,
}

impl RoleContext {
    /// Reads the plan and configuration of `run_dir` and connects to the orchestrator.
    pub async fn load(run_dir: &Path, instance: &str) -> anyhow::Result<RoleContext> {
        let plan_path = run_dir.join("plan.json");
        let plan: Plan = serde_json::from_str(
            &std::fs::read_to_string(&plan_path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", plan_path.display()))?,
        )?;
        let instance = plan
            .instances
            .iter()
            .find(|i| i.name == instance)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("{instance} is not in {}", plan_path.display()))?;
        let config = config::load(Some(&run_dir.join("env.resolved")), Vec::new())?;
        let url = std::env::var(ORCHESTRATOR_VAR)
            .map_err(|_| anyhow::anyhow!("{ORCHESTRATOR_VAR} is not set"))?;
        let token =
            std::env::var(TOKEN_VAR).map_err(|_| anyhow::anyhow!("{TOKEN_VAR} is not set"))?;
        let client = connect(&url, &token).await?;
        let node = std::env::var("HPCAGENT_NODE")
            .or_else(|_| std::env::var("SLURMD_NODENAME"))
            .unwrap_or_else(|_| hostname());
        Ok(RoleContext {
            run_dir: run_dir.to_path_buf(),
            instance,
            plan,
            config,
            node,
            client,
        })
    }

    /// Registers this instance; returns its assignment.
    pub async fn register(
        &mut self,
        role: pb::Role,
        endpoint: &str,
        capabilities: std::collections::HashMap<String, String>,
    ) -> anyhow::Result<pb::Assignment> {
        let reply = self
            .client
            .register(pb::RegisterRequest {
                role: role as i32,
                instance: self.instance.name.clone(),
                node: self.node.clone(),
                endpoint: endpoint.to_string(),
                capabilities,
                pid: std::process::id(),
                slurm_step: slurm_step().unwrap_or_default(),
            })
            .await
            .map_err(|s| anyhow::anyhow!("register: {}", s.message()))?;
        Ok(reply.into_inner())
    }
}

/// `<job>.<step>` when this process runs in a Slurm step.
fn slurm_step() -> Option<String> {
    let job = std::env::var("SLURM_JOB_ID").ok()?;
    let step = std::env::var("SLURM_STEP_ID").ok()?;
    Some(format!("{job}.{step}"))
}

/// The machine's host name.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// Makes a lease's attempt directory (`<run>/tasks/<task>/attempt-<k>`).
/// A first attempt's task directory does not exist yet, so it is made
/// first: `create_dir_all` would try the whole path, fail, and only then
/// make it, one metadata operation per task that a shared filesystem's
/// server answers for nothing.
pub fn make_attempt_dir(lease: &pb::Lease) -> std::io::Result<()> {
    let dir = Path::new(&lease.attempt_dir);
    if lease.attempt <= 1
        && let Some(task) = dir.parent()
        && std::fs::create_dir(task).is_ok()
    {
        return std::fs::create_dir(dir);
    }
    std::fs::create_dir_all(dir)
}

/// What the heartbeat reports, updated by the role as it works.
#[derive(Debug, Default)]
pub struct Pulse {
    pub ready: bool,
    pub leases: BTreeSet<String>,
    pub load: u32,
    /// What the role is doing, for `hpcagent status`.
    pub detail: String,
    /// Judges: the campaign's other usable judges, as the orchestrator last
    /// said (they confirm an implausible speedup before it is credited).
    pub peer_judges: Vec<String>,
}

/// A running heartbeat: the shared pulse, and whether to drain.
#[derive(Clone)]
pub struct Heartbeat {
    pub pulse: Arc<Mutex<Pulse>>,
    drain: tokio::sync::watch::Receiver<bool>,
    /// Sends the next heartbeat now rather than at its interval.
    wake: Arc<tokio::sync::Notify>,
}

impl Heartbeat {
    /// A change of readiness is told at once: the campaign waits on it (a
    /// ready agent may be given work, a role no longer ready may not).
    pub fn set_ready(&self, ready: bool) {
        let changed = {
            let mut pulse = self.pulse.lock().expect("pulse");
            std::mem::replace(&mut pulse.ready, ready) != ready
        };
        if changed {
            self.wake.notify_one();
        }
    }

    pub fn hold(&self, lease: &str) {
        self.pulse
            .lock()
            .expect("pulse")
            .leases
            .insert(lease.to_string());
    }

    /// Whether the role still holds `lease` (the orchestrator has not said it lost it).
    pub fn holds(&self, lease: &str) -> bool {
        self.pulse.lock().expect("pulse").leases.contains(lease)
    }

    pub fn release(&self, lease: &str) {
        self.pulse.lock().expect("pulse").leases.remove(lease);
    }

    pub fn set_detail(&self, detail: impl Into<String>) {
        self.pulse.lock().expect("pulse").detail = detail.into();
    }

    pub fn set_load(&self, load: u32) {
        self.pulse.lock().expect("pulse").load = load;
    }

    /// The campaign's other usable judges (for a judge).
    pub fn peer_judges(&self) -> Vec<String> {
        self.pulse.lock().expect("pulse").peer_judges.clone()
    }

    /// The orchestrator asked to drain (or the campaign is over).
    pub fn draining(&self) -> bool {
        *self.drain.borrow()
    }
}

/// Starts heartbeating every `interval`. If the orchestrator cannot be reached
/// for 30 s, the process exits: its campaign is gone.
pub fn start_heartbeats(client: Client, instance: String, interval: Duration) -> Heartbeat {
    start_heartbeats_then(client, instance, interval, || {})
}

/// As [`start_heartbeats`], running `on_orphan` before the process exits
/// (to stop what the role started that would outlive it).
pub fn start_heartbeats_then(
    mut client: Client,
    instance: String,
    interval: Duration,
    on_orphan: impl FnOnce() + Send + 'static,
) -> Heartbeat {
    let pulse = Arc::new(Mutex::new(Pulse::default()));
    let (drain_tx, drain) = tokio::sync::watch::channel(false);
    let wake = Arc::new(tokio::sync::Notify::new());
    let shared = pulse.clone();
    let woken = wake.clone();
    tokio::spawn(async move {
        let mut last_contact = Instant::now();
        loop {
            let request = {
                let p = shared.lock().expect("pulse");
                pb::HeartbeatRequest {
                    instance: instance.clone(),
                    state: if p.ready {
                        pb::RoleState::Ready
                    } else {
                        pb::RoleState::Starting
                    } as i32,
                    leases: p.leases.iter().cloned().collect(),
                    load: p.load,
                    detail: p.detail.clone(),
                }
            };
            // A hung orchestrator must not hang the orphan check.
            let call = tokio::time::timeout(HEARTBEAT_TIMEOUT, client.heartbeat(request));
            let answer = call.await.unwrap_or_else(|_| {
                Err(tonic::Status::deadline_exceeded(
                    "no answer to the heartbeat",
                ))
            });
            match answer {
                Ok(reply) => {
                    last_contact = Instant::now();
                    let reply = reply.into_inner();
                    let _ = drain_tx.send(reply.drain);
                    let mut p = shared.lock().expect("pulse");
                    for lost in reply.lost_leases {
                        p.leases.remove(&lost);
                    }
                    p.peer_judges = reply.peer_judges;
                }
                Err(status) if last_contact.elapsed() > ORPHAN_AFTER => {
                    tracing::error!(
                        "the orchestrator has not answered for {:?} ({}); exiting",
                        ORPHAN_AFTER,
                        status.message()
                    );
                    on_orphan();
                    std::process::exit(3);
                }
                Err(status) => tracing::warn!("heartbeat: {}", status.message()),
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = woken.notified() => {}
            }
        }
    });
    Heartbeat { pulse, drain, wake }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(dir: &Path, attempt: u32) -> pb::Lease {
        pb::Lease {
            attempt,
            attempt_dir: dir.display().to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn attempt_directories_are_made_whatever_already_exists() {
        let run = tempfile::tempdir().unwrap();
        let task = run.path().join("tasks").join("gemm.c.fp64");
        // No tasks/ yet, then a first attempt, then a later one, then the
        // first again (a resumed campaign).
        for attempt in [1, 2, 1] {
            let dir = task.join(format!("attempt-{attempt}"));
            make_attempt_dir(&lease(&dir, attempt)).unwrap();
            assert!(dir.is_dir(), "{}", dir.display());
        }
        let fresh = run
            .path()
            .join("tasks")
            .join("other.c.fp64")
            .join("attempt-1");
        make_attempt_dir(&lease(&fresh, 1)).unwrap();
        assert!(fresh.is_dir());
    }
}

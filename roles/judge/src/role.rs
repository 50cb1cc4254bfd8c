//! The judge as a role of a campaign (`hpcagent role judge`): it finds its
//! assignment in the run directory, starts a [`Judge`] as the campaign's
//! settings say, serves only the campaign's agents (the judge token), and
//! reports the verdicts of leased grades to the orchestrator. The judge
//! alone, with no campaign, is `hpcagent judge serve`.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use hpcagent_common::config::Isolation;
use hpcagent_common::{
    Heartbeat, JUDGE_TOKEN_VAR, Records, Refused, RoleContext, require_token, start_heartbeats,
};
use hpcagent_proto::v1 as pb;

use crate::oracle;
use crate::peers::Peers;
use crate::service::{Recorder, Recording, Service};
use crate::{Judge, JudgeConfig};

/// Reports verdicts given under a lease to the orchestrator.
struct ToOrchestrator {
    records: Records,
    judge: String,
}

impl Recorder for ToOrchestrator {
    fn record(
        &self,
        lease_id: String,
        kind: pb::GradeKind,
        verdict: pb::Verdict,
        on_behalf: Option<pb::OnBehalf>,
    ) -> Recording {
        let records = self.records.clone();
        let judge = self.judge.clone();
        Box::pin(async move {
            records
                .record(pb::GradeRecord {
                    lease_id,
                    kind: kind as i32,
                    verdict: Some(verdict),
                    judge,
                    on_behalf,
                })
                .await
                .map_err(|s| s.message().to_string())
        })
    }
}

/// Serves grades for the campaign in `run_dir` as instance `instance` of
/// its plan: registers, heartbeats, and records the verdicts of leased
/// grades with the orchestrator, until TERM or INT.
pub async fn run(run_dir: &Path, instance: &str) -> anyhow::Result<()> {
    let judge_token = std::env::var(JUDGE_TOKEN_VAR).map_err(|_| {
        anyhow::anyhow!(
            "{} is not set: campaign judges run inside `hpcagent up` (use `hpcagent judge serve` alone)",
            JUDGE_TOKEN_VAR
        )
    })?;
    let mut ctx = RoleContext::load(run_dir, instance).await?;
    let settings = &ctx.config.settings;
    let corpus = ctx.plan.corpus.clone();
    if !corpus.is_dir() {
        return Err(Refused(format!(
            "the corpus the campaign was planned with, {}, is not visible here \
             (a container image without it mounted? add it to the EDF's mounts)",
            corpus.display()
        ))
        .into());
    }
    let mut config = JudgeConfig::new(corpus, std::env::current_exe()?);
    // Judges sharing a node (and a launcher rank) must not share a cache.
    config.cache_base = run_dir.join("cache").join(instance);
    config.case_cache_bytes = u64::from(settings.judge_case_cache_gib) << 30;
    config.baselines = settings.baselines.as_ref().map(|dir| dir.0.clone());
    config.preset = settings.preset;
    config.reps = settings.judge_reps.max(1);
    config.interval = settings.judge_interval.0 / 100.0;
    config.time_cap = Duration::from_secs(settings.judge_time_cap.max(1).into());
    config.weak_isolation = settings.isolation == Isolation::Weak;
    config.slots = settings.judge_slots.map(|n| n as usize);
    // What this node lacks (NumPy, isolation) another launch lacks too: the
    // judge refuses, and the campaign hears so at once.
    let cache = crate::build::default_cache_base();
    let oracle = tokio::task::spawn_blocking(move || {
        oracle::find(&cache, |progress| tracing::info!("{progress}"))
    })
    .await?
    .map_err(|e| Refused(e.to_string()))?;
    config.python = oracle.python;
    let mut judge = Judge::new(config).map_err(|e| Refused(e.to_string()))?;
    // The campaign's other judges confirm an implausible speedup: as the
    // orchestrator's heartbeat replies list them, once heartbeats run.
    let beating: Arc<OnceLock<Heartbeat>> = Arc::new(OnceLock::new());
    let listed = beating.clone();
    judge.peers = Peers::from_source(
        Arc::new(move || listed.get().map(Heartbeat::peer_judges).unwrap_or_default()),
        Some(judge_token.clone()),
    );
    let judge = Arc::new(judge);

    let port: u16 = match std::env::var("HPCAGENT_PORT") {
        Ok(p) => p.parse().context("HPCAGENT_PORT")?,
        Err(_) => ctx.instance.ports.get("grpc").copied().unwrap_or(0),
    };
    let listener = match tokio::net::TcpListener::bind(("0.0.0.0", port)).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("port {port}: {e}; taking any free port");
            tokio::net::TcpListener::bind(("0.0.0.0", 0)).await?
        }
    };
    let host = std::env::var("HPCAGENT_HOST").unwrap_or_else(|_| ctx.node.clone());
    let endpoint = format!("{host}:{}", listener.local_addr()?.port());
    let caps = judge.capabilities();
    let capabilities = [
        (
            "compilers",
            caps.compilers
                .iter()
                .map(|c| c.language.clone())
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("profilers", caps.profilers.join(",")),
        ("slots", caps.slots.to_string()),
        ("isolation", caps.isolation.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let assignment = ctx
        .register(pb::Role::Judge, &endpoint, capabilities)
        .await?;
    let warm = assignment
        .warm
        .iter()
        .map(|t| crate::warm::ToWarm {
            kernel: t.kernel.clone(),
            precision: t.precision.parse().ok(),
            preset: t.preset.parse().unwrap_or(judge.config.preset),
        })
        .collect();
    crate::warm::spawn(judge.clone(), warm, crate::warm::WARM_BUDGET);
    let heartbeat = start_heartbeats(
        ctx.client.clone(),
        instance.to_string(),
        Duration::from_millis(assignment.heartbeat_interval_ms as u64),
    );
    let _ = beating.set(heartbeat.clone());
    let recorder = Arc::new(ToOrchestrator {
        records: Records::new(ctx.client.clone()),
        judge: instance.to_string(),
    });
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    // Only the campaign's agents may have grades (and its held-out cases' answers).
    let service = tonic::service::interceptor::InterceptedService::new(
        Service::new(judge, Some(recorder)),
        require_token(judge_token),
    );
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stop_signal());
    heartbeat.set_ready(true);
    tracing::info!(%instance, %endpoint, "judge ready");
    server.await.context("the judge server failed")
}

/// TERM or INT: stop serving.
/// SIGTERM (Slurm's, at a step's end) or SIGINT.
pub(crate) async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("TERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("INT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

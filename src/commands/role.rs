//! `hpcagent role <role>`: what runs inside a role step (started by `up`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hpcagent_judge::service::{Recorder, Recording, Service};
use hpcagent_judge::{Judge, JudgeConfig, oracle};
use hpcagent_orchestrator::client::{Records, RoleContext, start_heartbeats};
use hpcagent_orchestrator::config::Isolation;
use hpcagent_orchestrator::control::auth;
use hpcagent_orchestrator::supervisor::Refused;
use hpcagent_proto::v1 as pb;

use super::judge::runtime;

#[derive(Debug, Args)]
pub struct RoleArgs {
    #[command(subcommand)]
    role: RoleCommand,
}

#[derive(Debug, Subcommand)]
enum RoleCommand {
    /// Serve grades for the campaign.
    Judge(Instance),
    /// Work the campaign's tasks.
    Agent(Instance),
    /// Run this rank of a vLLM server of the plan.
    Inference(Instance),
}

#[derive(Debug, Args)]
struct Instance {
    /// The campaign's run directory (holds plan.json and env.resolved).
    #[arg(long)]
    run_dir: PathBuf,
    /// This instance's name in the plan, e.g. judge-0.
    #[arg(long)]
    instance: String,
}

pub fn run(args: RoleArgs) -> anyhow::Result<()> {
    super::init_logging();
    // The role's environment holds its tokens (and a judge's held-out secret):
    // processes of the same user (an agent CLI, a submission run without a
    // user of its own) must not read them from /proc.
    // SAFETY: prctl on this process only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
    match args.role {
        RoleCommand::Judge(i) => runtime()?.block_on(judge(i)),
        RoleCommand::Agent(i) => {
            runtime()?.block_on(hpcagent_agent::pool::run(&i.run_dir, &i.instance))
        }
        RoleCommand::Inference(i) => {
            runtime()?.block_on(hpcagent_inference::run(&i.run_dir, &i.instance))
        }
    }
}

/// Reports verdicts given under a lease to the orchestrator.
struct ToOrchestrator {
    records: Records,
    judge: String,
}

impl Recorder for ToOrchestrator {
    fn record(&self, lease_id: String, kind: pb::GradeKind, verdict: pb::Verdict) -> Recording {
        let records = self.records.clone();
        let judge = self.judge.clone();
        Box::pin(async move {
            records
                .record(pb::GradeRecord {
                    lease_id,
                    kind: kind as i32,
                    verdict: Some(verdict),
                    judge,
                })
                .await
                .map_err(|s| s.message().to_string())
        })
    }
}

async fn judge(args: Instance) -> anyhow::Result<()> {
    let judge_token = std::env::var(auth::JUDGE_TOKEN_VAR).map_err(|_| {
        anyhow::anyhow!(
            "{} is not set: campaign judges run inside `hpcagent up` (use `hpcagent judge serve` alone)",
            auth::JUDGE_TOKEN_VAR
        )
    })?;
    let mut ctx = RoleContext::load(&args.run_dir, &args.instance).await?;
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
    config.cache_base = args.run_dir.join("cache").join(&args.instance);
    config.baselines = settings.baselines.as_ref().map(|dir| dir.0.clone());
    config.preset = settings.preset;
    config.reps = settings.judge_reps.max(1);
    config.interval = settings.judge_interval.0 / 100.0;
    config.time_cap = Duration::from_secs(settings.judge_time_cap.max(1).into());
    config.weak_isolation = settings.isolation == Isolation::Weak;
    config.slots = settings.judge_slots.map(|n| n as usize);
    // What this node lacks (NumPy, isolation) another launch lacks too: the
    // judge refuses, and the campaign hears so at once.
    let cache = hpcagent_judge::build::default_cache_base();
    let oracle = tokio::task::spawn_blocking(move || {
        oracle::find(&cache, |progress| tracing::info!("{progress}"))
    })
    .await?
    .map_err(|e| Refused(e.to_string()))?;
    config.python = oracle.python;
    let judge = Arc::new(Judge::new(config).map_err(Refused)?);

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
    let heartbeat = start_heartbeats(
        ctx.client.clone(),
        args.instance.clone(),
        Duration::from_millis(assignment.heartbeat_interval_ms as u64),
    );
    let recorder = Arc::new(ToOrchestrator {
        records: Records::new(ctx.client.clone()),
        judge: args.instance.clone(),
    });
    let incoming = hpcagent_orchestrator::control::incoming(listener);
    // Only the campaign's agents may have grades (and its held-out cases' answers).
    let service = tonic::service::interceptor::InterceptedService::new(
        Service::new(judge, Some(recorder)),
        auth::require_token(judge_token),
    );
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stop_signal());
    heartbeat.set_ready(true);
    tracing::info!(instance = %args.instance, %endpoint, "judge ready");
    server.await.context("the judge server failed")
}

/// TERM or INT: stop serving.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("TERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("INT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

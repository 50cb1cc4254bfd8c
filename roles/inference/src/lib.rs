//! The inference role: one vLLM server of the plan, from start to stop.
//!
//! The plan holds each rank's exact `vllm serve` line ([`hpcagent_common::plan::VllmLaunch`]);
//! rank `SLURM_PROCID` of the step runs its line. Rank 0 checks its ports,
//! registers with the orchestrator (with what [`gpus`] found on the node),
//! fits its line to the image's vLLM ([`version`]: a flag newer than it is
//! dropped or the line refused), starts vLLM, reports progress while the model loads, and reports ready once
//! [`readiness`] says the server can serve. After that it watches `/health`: a
//! server that exits or stops answering is stopped and the role exits non-zero,
//! so the orchestrator restarts the instance while agents move to other
//! replicas. Ranks 1.. of a multi-node replica run their `--headless` line and
//! live as long as it does.
//!
//! It does not decide placement (the plan says which nodes and GPUs a replica
//! gets) and does not route requests (agents get a replica with their lease).

pub mod gpus;
pub mod readiness;
pub mod rendezvous;
pub mod server;
pub mod version;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use hpcagent_common::Refused;
use hpcagent_common::plan::{Plan, VllmLaunch};
use hpcagent_common::{Heartbeat, RoleContext, start_heartbeats_then};
use hpcagent_proto::v1 as pb;

use readiness::{Probe, Prober};
use server::Server;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// How often a loading server is probed.
const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How often a ready server's `/health` is checked.
const HEALTH_EVERY: Duration = Duration::from_secs(5);
/// `/health` failures in a row that end a server.
const HEALTH_FAILURES: u32 = 3;

/// Runs this process's rank of inference instance `instance`.
pub async fn run(run_dir: &Path, instance: &str) -> anyhow::Result<()> {
    let mut stop = StopSignals::install()?;
    let rank = slurm_rank();
    if rank > 0 {
        return headless(run_dir, instance, rank, &mut stop).await;
    }
    let mut ctx = RoleContext::load(run_dir, instance).await?;
    let launch = launch_of(&ctx.instance.vllm, instance)?.clone();
    let inventory = gpus::discover();
    inventory
        .check(ctx.instance.gpus_per_node)
        .map_err(anyhow::Error::msg)?;
    let argv = with_free_port(&launch.ranks[0])?;
    let (argv, env) = match &launch.rendezvous_ifname {
        Some(ifname) => {
            let own = rendezvous::interface_address(ifname).map_err(|e| Refused(e.to_string()))?;
            let file = rendezvous::master_file(run_dir, instance, &rendezvous::step_name());
            rendezvous::publish(&file, own).map_err(anyhow::Error::msg)?;
            (rendezvous::with_master(&argv, own), host_ip(own))
        }
        None => (argv, Vec::new()),
    };
    let port = server::flag_value(&argv, "--port")
        .unwrap_or_default()
        .to_string();
    let host = std::env::var("HPCAGENT_HOST").unwrap_or_else(|_| ctx.node.clone());
    let mut capabilities: std::collections::HashMap<String, String> =
        inventory.capabilities().into_iter().collect();
    capabilities.insert("model".into(), launch.served_model.clone());
    let assignment = ctx
        .register(pb::Role::Inference, &format!("{host}:{port}"), capabilities)
        .await?;
    // A role that loses its orchestrator exits; its server must not outlive it.
    let pgid = Arc::new(AtomicI32::new(0));
    let orphan_pgid = pgid.clone();
    let heartbeat = start_heartbeats_then(
        ctx.client.clone(),
        instance.to_string(),
        Duration::from_millis(assignment.heartbeat_interval_ms as u64),
        move || kill_group(orphan_pgid.load(Ordering::SeqCst)),
    );
    // Asked once registered: the question takes as long as vLLM's imports.
    let argv = version::fitted(argv, &run_dir.join(&ctx.instance.log_dir)).await?;
    tracing::info!(instance, argv = %argv.join(" "), "starting vLLM");
    let mut server = Server::start(&argv, &env).map_err(anyhow::Error::msg)?;
    pgid.store(server.pgid(), Ordering::SeqCst);
    let prober = Prober::new(&format!("http://127.0.0.1:{port}"), &launch.served_model);
    let timeout = Duration::from_secs(ctx.config.settings.inference_ready_timeout.seconds);
    let outcome = serve(&mut server, &prober, &heartbeat, timeout, &mut stop).await;
    heartbeat.set_ready(false);
    server.stop().await;
    outcome
}

/// Rank 1.. of a multi-node replica: its `--headless` line, for as long as it runs.
async fn headless(
    run_dir: &Path,
    instance: &str,
    rank: usize,
    stop: &mut StopSignals,
) -> anyhow::Result<()> {
    let path = run_dir.join("plan.json");
    let plan: Plan = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| path.display().to_string())?,
    )?;
    let spec = plan
        .instances
        .iter()
        .find(|i| i.name == instance)
        .with_context(|| format!("{instance} is not in {}", path.display()))?;
    let launch = launch_of(&spec.vllm, instance)?;
    let argv = launch.ranks.get(rank).with_context(|| {
        format!(
            "{instance} has {} ranks, this is rank {rank}",
            launch.ranks.len()
        )
    })?;
    gpus::discover()
        .check(spec.gpus_per_node)
        .map_err(anyhow::Error::msg)?;
    // Rank 0 publishes once it has started; it meets the others within the
    // distributed timeout, so they wait as long: the planned one, whether
    // or not this vLLM takes the flag.
    let limit = server::flag_value(argv, "--distributed-timeout-seconds")
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(600), Duration::from_secs);
    let argv = &version::fitted(argv.clone(), &run_dir.join(&spec.log_dir)).await?;
    let (argv, env) = match &launch.rendezvous_ifname {
        Some(ifname) => {
            let own = rendezvous::interface_address(ifname).map_err(|e| Refused(e.to_string()))?;
            let file = rendezvous::master_file(run_dir, instance, &rendezvous::step_name());
            let master = rendezvous::await_master(&file, limit)
                .await
                .map_err(anyhow::Error::msg)?;
            (rendezvous::with_master(argv, master), host_ip(own))
        }
        None => (argv.clone(), Vec::new()),
    };
    tracing::info!(instance, rank, argv = %argv.join(" "), "starting headless vLLM");
    let mut server = Server::start(&argv, &env).map_err(anyhow::Error::msg)?;
    let why = tokio::select! {
        why = server.exited() => Some(why),
        _ = stop.received() => None,
    };
    server.stop().await;
    match why {
        Some(why) => anyhow::bail!("rank {rank}: {why}"),
        None => Ok(()),
    }
}

fn launch_of<'a>(launch: &'a Option<VllmLaunch>, instance: &str) -> anyhow::Result<&'a VllmLaunch> {
    launch
        .as_ref()
        .with_context(|| format!("the plan has no vLLM command line for {instance}"))
}

/// Waits for the server to be ready, then watches it; returns when asked to
/// stop, fails when the server dies or goes silent.
async fn serve(
    server: &mut Server,
    prober: &Prober,
    heartbeat: &Heartbeat,
    timeout: Duration,
    stop: &mut StopSignals,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::from("not probed yet");
    loop {
        heartbeat.set_detail(format!(
            "loading, {:.0} s ({last})",
            started.elapsed().as_secs_f64()
        ));
        tokio::select! {
            why = server.exited() => anyhow::bail!("{why} before it was ready; see this role's stderr"),
            _ = stop.received() => return Ok(()),
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
        match prober.probe().await {
            Probe::Ready => break,
            Probe::NotYet(why) => last = why,
        }
        if started.elapsed() > timeout {
            anyhow::bail!(
                "vLLM was not ready after {timeout:?} (INFERENCE_READY_TIMEOUT); last probe: {last}"
            );
        }
    }
    let ready_after = started.elapsed().as_secs_f64();
    heartbeat.set_ready(true);
    heartbeat.set_detail(format!("serving (ready after {ready_after:.0} s)"));
    tracing::info!("inference ready after {ready_after:.0} s");
    let mut failures = 0;
    loop {
        tokio::select! {
            why = server.exited() => anyhow::bail!("{why} while serving; see this role's stderr"),
            _ = stop.received() => return Ok(()),
            _ = tokio::time::sleep(HEALTH_EVERY) => {}
        }
        match prober.health().await {
            Ok(()) => failures = 0,
            Err(why) => {
                failures += 1;
                tracing::warn!("health check {failures} of {HEALTH_FAILURES} failed: {why}");
                if failures >= HEALTH_FAILURES {
                    anyhow::bail!("vLLM stopped answering /health: {why}");
                }
            }
        }
    }
}

/// The plan's line with a usable port: the planned one when it is free; when
/// it is not (or the executor said any port will do, `HPCAGENT_PORT=0`), one
/// the system picks. A multi-node replica's rendezvous port cannot move (its
/// other ranks were told it), so a taken one is refused.
fn with_free_port(argv: &[String]) -> anyhow::Result<Vec<String>> {
    if let Some(master) = server::flag_value(argv, "--master-port") {
        let master: u16 = master.parse().context("--master-port")?;
        anyhow::ensure!(
            server::port_free(master),
            "the rendezvous port {master} (VLLM_MASTER_PORT) is taken on this node; \
             the replica's other ranks expect it, so choose another one"
        );
    }
    let planned: u16 = server::flag_value(argv, "--port")
        .context("the vLLM line has no --port")?
        .parse()
        .context("--port")?;
    let any_port = std::env::var("HPCAGENT_PORT").is_ok_and(|p| p == "0");
    if !any_port && server::port_free(planned) {
        return Ok(argv.to_vec());
    }
    let port = server::any_free_port().context("no free port")?;
    if !any_port {
        tracing::warn!("port {planned} (VLLM_PORT) is taken; serving on {port}");
    }
    Ok(server::with_port(argv, port))
}

/// This process's rank in its step (0 outside Slurm).
/// The environment that makes vLLM announce `addr` as this node's.
fn host_ip(addr: std::net::Ipv4Addr) -> Vec<(String, String)> {
    vec![("VLLM_HOST_IP".to_string(), addr.to_string())]
}

fn slurm_rank() -> usize {
    std::env::var("SLURM_PROCID")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) on the server's own process group.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// TERM or INT: stop serving. Installed first thing, so a stop that arrives
/// while vLLM starts still stops vLLM instead of orphaning it.
struct StopSignals {
    term: Signal,
    int: Signal,
}

impl StopSignals {
    fn install() -> anyhow::Result<StopSignals> {
        Ok(StopSignals {
            term: signal(SignalKind::terminate()).context("TERM handler")?,
            int: signal(SignalKind::interrupt()).context("INT handler")?,
        })
    }

    async fn received(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

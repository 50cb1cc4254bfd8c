//! `hpcagent bench scale`: the orchestrator of a 1,000-node allocation.
//!
//! This process is the orchestrator: the allocation's hostlist is expanded
//! and placed by the real code, and the plan's instances get a real control
//! plane and store ([`sim`]). A child process (`hpcagent bench scale-agents`)
//! plays every instance: each registers, heartbeats every 5 s, and agents'
//! workers hold leases for a while and have them settled. The child says
//! when each phase starts and ends; this process measures its own CPU time
//! and memory across them, so the numbers are the orchestrator's alone.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hpcagent_common::config::{self, Override};
use hpcagent_common::plan::Role;
use hpcagent_common::{AttemptOutcome, Client, Leases, Pulled, Records};
use hpcagent_orchestrator::allocation::Allocation;
use hpcagent_orchestrator::placement::{self, Layout};
use hpcagent_proto::v1 as pb;
use tokio::task::JoinSet;

use crate::sim::{self, Shape};

#[derive(Debug, Clone)]
pub struct Options {
    pub nodes: usize,
    pub agents: usize,
    /// Seconds of each measured phase.
    pub seconds: u64,
    pub run_dir: PathBuf,
    /// The hpcagent binary (for the child).
    pub exe: PathBuf,
}

pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// What the orchestrator process used.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub nodes: usize,
    pub instances: usize,
    pub agents: usize,
    pub placement_ms: f64,
    pub registration_s: f64,
    /// Heartbeats only: CPU share of one core, and CPU per heartbeat.
    pub heartbeat_cpu_share: f64,
    pub heartbeat_cpu_us: f64,
    pub heartbeats: u64,
    /// Heartbeats and lease traffic together.
    pub busy_cpu_share: f64,
    pub leases: u64,
    pub rss_mb: f64,
    pub peak_rss_mb: f64,
}

/// The plan of a `nodes`-node allocation: half agent nodes (with
/// `agents` workers in all), half judge nodes.
fn plan_of(options: &Options) -> anyhow::Result<hpcagent_common::plan::Plan> {
    let agent_nodes = options.nodes / 2;
    anyhow::ensure!(
        agent_nodes > 0 && options.agents.is_multiple_of(agent_nodes),
        "{} agents do not spread evenly over {agent_nodes} agent nodes",
        options.agents
    );
    let set = |key: &str, value: String| Override {
        flag: format!("bench scale {key}"),
        key: key.into(),
        value,
    };
    let config = config::load(
        None,
        vec![
            set("SITE", "local".into()),
            set("INFERENCE_NODES", "0".into()),
            set("AGENT_NODES", agent_nodes.to_string()),
            set(
                "AGENTS_PER_NODE",
                (options.agents / agent_nodes).to_string(),
            ),
            set("JUDGE_NODES", (options.nodes - agent_nodes).to_string()),
            set("AGENT_POLICY", "baseline".into()),
        ],
    )?;
    let nodelist = format!("nid[{:05}-{:05}]", 1, options.nodes);
    let allocation = Allocation::from_nodelist(&nodelist, None, None)?;
    let layout = Layout {
        run_dir: options.run_dir.clone(),
        exe: options.exe.clone(),
        corpus: PathBuf::from("benchmarks"),
        skills: PathBuf::from("skills"),
    };
    Ok(placement::place(&config, &allocation, &layout)?)
}

pub async fn run(options: &Options) -> anyhow::Result<Outcome> {
    raise_file_limit();
    let placing = Instant::now();
    let plan = plan_of(options)?;
    let placement_ms = placing.elapsed().as_secs_f64() * 1e3;
    let count = |role: Role| plan.instances.iter().filter(|i| i.role == role).count();
    let shape = Shape {
        agents: count(Role::Agent),
        judges: count(Role::Judge),
        // Enough tasks that leases flow for the whole busy phase.
        tasks: options.agents * 4,
        workers: (options.agents / count(Role::Agent)) as u32,
        heartbeat: HEARTBEAT,
    };
    let sim = sim::start(&options.run_dir, &shape).await?;
    let tokens_file = options.run_dir.join("tokens.json");
    write_tokens(&sim, &tokens_file)?;

    let mut child = Command::new(&options.exe)
        .args(["bench", "scale-agents", "--url", &sim.url, "--tokens"])
        .arg(&tokens_file)
        .args(["--workers", &shape.workers.to_string()])
        .args(["--seconds", &options.seconds.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start the simulated agents")?;
    let lines = BufReader::new(child.stdout.take().expect("piped"));
    let mut marks: Vec<(String, Instant, f64, serde_json::Value)> = Vec::new();
    for line in lines.lines() {
        let line = line?;
        let Ok(mark) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let phase = mark["phase"].as_str().unwrap_or("").to_string();
        marks.push((phase, Instant::now(), cpu_seconds(), mark));
    }
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "the simulated agents failed ({status})");
    let at = |phase: &str| {
        marks
            .iter()
            .find(|m| m.0 == phase)
            .cloned()
            .with_context(|| format!("the simulated agents never reported {phase}"))
    };
    let (_, registering, _, _) = at("registering")?;
    let (_, quiet, quiet_cpu, _) = at("heartbeats")?;
    let (_, busy, busy_cpu, quiet_end) = at("leases")?;
    let (_, end, end_cpu, busy_end) = at("end")?;
    let heartbeats = quiet_end["heartbeats"].as_u64().unwrap_or(0);
    let share = |cpu: f64, from: Instant, to: Instant| cpu / (to - from).as_secs_f64();
    let (rss_mb, peak_rss_mb) = memory_mb();
    Ok(Outcome {
        nodes: options.nodes,
        instances: plan.instances.len(),
        agents: options.agents,
        placement_ms,
        registration_s: (quiet - registering).as_secs_f64(),
        heartbeat_cpu_share: share(busy_cpu - quiet_cpu, quiet, busy),
        heartbeat_cpu_us: (busy_cpu - quiet_cpu) * 1e6 / heartbeats.max(1) as f64,
        heartbeats,
        busy_cpu_share: share(end_cpu - busy_cpu, busy, end),
        leases: busy_end["leases"].as_u64().unwrap_or(0),
        rss_mb,
        peak_rss_mb,
    })
}

fn write_tokens(sim: &sim::Simulated, path: &Path) -> anyhow::Result<()> {
    let tokens: serde_json::Map<String, serde_json::Value> = sim
        .agents
        .iter()
        .chain(&sim.judges)
        .map(|name| (name.clone(), sim.tokens.of(name).unwrap_or("").into()))
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(serde_json::Value::Object(tokens).to_string().as_bytes())?;
    Ok(())
}

/// This process's user and system CPU time so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Resident and peak resident memory of this process, MB.
fn memory_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |field: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0)
}

/// A thousand connections need more descriptors than the usual soft limit.
fn raise_file_limit() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut limit = std::mem::zeroed::<libc::rlimit>();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

pub fn render(o: &Outcome) -> String {
    format!(
        "hpcagent scale: {} nodes, {} role instances, {} agents; placement {:.0} ms, \
         registration {:.1} s\n\
         heartbeats every {}s: {} handled at {:.1}% of one core ({:.0} µs CPU each) \
         [target ≤ 10%]\n\
         with lease traffic ({} leases): {:.1}% of one core\n\
         orchestrator memory: {:.0} MB resident, {:.0} MB peak [target ≤ 200 MB]",
        o.nodes,
        o.instances,
        o.agents,
        o.placement_ms,
        o.registration_s,
        HEARTBEAT.as_secs(),
        o.heartbeats,
        o.heartbeat_cpu_share * 100.0,
        o.heartbeat_cpu_us,
        o.leases,
        o.busy_cpu_share * 100.0,
        o.rss_mb,
        o.peak_rss_mb
    )
}

/// The child: every instance of the tokens file, for two phases of
/// `seconds` each: heartbeats only, then heartbeats and leases. It prints
/// one JSON line per phase boundary.
pub async fn agents(url: &str, tokens: &Path, workers: u32, seconds: u64) -> anyhow::Result<()> {
    raise_file_limit();
    let text = std::fs::read_to_string(tokens)?;
    let tokens: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)?;
    mark(serde_json::json!({"phase": "registering"}));
    let mut clients: Vec<Instance> = Vec::new();
    for (name, token) in &tokens {
        let mut client = hpcagent_common::connect(url, token.as_str().unwrap_or("")).await?;
        let (role, endpoint) = if name.starts_with("judge-") {
            let index: usize = name.trim_start_matches("judge-").parse()?;
            (pb::Role::Judge, sim::judge_endpoint(index))
        } else {
            (pb::Role::Agent, String::new())
        };
        sim::register(&mut client, name, role, &endpoint).await?;
        sim::heartbeat(&mut client, name, true, Vec::new()).await?;
        clients.push(Instance {
            name: name.clone(),
            role,
            client,
            held: Arc::default(),
        });
    }
    let judges: Arc<BTreeMap<String, Records>> = Arc::new(
        clients
            .iter()
            .filter(|i| i.role == pb::Role::Judge)
            .map(|i| {
                let index: usize = i.name.trim_start_matches("judge-").parse().unwrap_or(0);
                (
                    format!("http://{}", sim::judge_endpoint(index)),
                    Records::new(i.client.clone()),
                )
            })
            .collect(),
    );
    let counters = Arc::new(Counters::default());
    let mut beating = JoinSet::new();
    for instance in &clients {
        beating.spawn(heartbeats(instance.clone(), counters.clone()));
    }
    mark(serde_json::json!({"phase": "heartbeats"}));
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    mark(serde_json::json!({"phase": "leases", "heartbeats": counters.heartbeats()}));
    let mut working = JoinSet::new();
    for instance in clients.iter().filter(|i| i.role == pb::Role::Agent) {
        let leases = Leases::new(instance.client.clone(), &instance.name);
        for worker in 0..workers {
            working.spawn(worker_loop(
                instance.clone(),
                leases.clone(),
                worker,
                judges.clone(),
                counters.clone(),
            ));
        }
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    mark(serde_json::json!({"phase": "end", "leases": counters.leases()}));
    working.abort_all();
    beating.abort_all();
    Ok(())
}

fn mark(value: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// One simulated role instance, shared by its heartbeat and its workers.
#[derive(Clone)]
struct Instance {
    name: String,
    role: pb::Role,
    client: Client,
    /// The leases its workers hold, which its heartbeats renew.
    held: Arc<Mutex<BTreeSet<String>>>,
}

#[derive(Default)]
struct Counters {
    heartbeats: std::sync::atomic::AtomicU64,
    leases: std::sync::atomic::AtomicU64,
}

impl Counters {
    fn heartbeats(&self) -> u64 {
        self.heartbeats.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn leases(&self) -> u64 {
        self.leases.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Heartbeats every [`HEARTBEAT`], starting at a random point of the first
/// interval so the instances do not beat in step.
async fn heartbeats(instance: Instance, counters: Arc<Counters>) -> anyhow::Result<()> {
    let Instance {
        name,
        mut client,
        held,
        ..
    } = instance;
    let offset = Duration::from_millis(u64::from(fxhash(&name)) % HEARTBEAT.as_millis() as u64);
    tokio::time::sleep(offset).await;
    let mut tick = tokio::time::interval(HEARTBEAT);
    loop {
        tick.tick().await;
        let leases: Vec<String> = held.lock().expect("held leases").iter().cloned().collect();
        sim::heartbeat(&mut client, &name, true, leases).await?;
        counters
            .heartbeats
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A stable spread of names over the interval.
fn fxhash(name: &str) -> u32 {
    name.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

/// One agent worker: leases a task, "works" on it for a few seconds, has
/// its judge settle it, completes it.
async fn worker_loop(
    instance: Instance,
    leases: Leases,
    worker: u32,
    judges: Arc<BTreeMap<String, Records>>,
    counters: Arc<Counters>,
) -> anyhow::Result<()> {
    let Instance { name, held, .. } = instance;
    let work =
        Duration::from_millis(2_000 + u64::from(fxhash(&format!("{name}/{worker}")) % 6_000));
    let mut pulled = leases.pull(worker).await?;
    loop {
        let lease = match pulled {
            Pulled::Lease(lease) => lease,
            Pulled::Wait(wait) => {
                tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
                pulled = leases.pull(worker).await?;
                continue;
            }
            Pulled::Done => return Ok(()),
        };
        held.lock()
            .expect("held leases")
            .insert(lease.lease_id.clone());
        tokio::time::sleep(work).await;
        if let Some(judge) = judges.get(&lease.judge_url) {
            judge.record(sim::verdict_for(&lease)).await?;
        }
        let completion = pb::Completion {
            lease_id: lease.lease_id.clone(),
            outcome: AttemptOutcome::Submitted.to_wire(),
            ..Default::default()
        };
        let (completed, next) = tokio::join!(leases.complete(completion), leases.pull(worker));
        completed?;
        pulled = next?;
        held.lock().expect("held leases").remove(&lease.lease_id);
        counters
            .leases
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

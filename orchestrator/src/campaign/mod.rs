//! `hpcagent up`: one campaign from plan to results.
//!
//! Plans the allocation (or this machine's virtual nodes), opens the store,
//! builds the task set (a resumed campaign keeps what it settled), starts the
//! control plane, has the supervisor launch every role instance, and runs the
//! main loop: lease expiry, heartbeat loss, progress, signals, completion.
//! USR1 drains (no new leases; running ones get until the drain deadline),
//! TERM and INT stop promptly. On the way out every step is stopped and the
//! store flushed.

mod progress;
pub mod tasks;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use crate::allocation::{Allocation, Sourced};
use crate::auth::Tokens;
use crate::control::{self, Control};
use crate::executor::{Executor, local::LocalExecutor, slurm::SlurmExecutor};
use crate::live::{Campaign, RoleEntry, RoleState};
use crate::placement::{self, Layout};
use crate::scheduler::{Scheduler, Service, Settings, Task, TaskState};
use crate::slurm::chain;
use crate::store::{AgentReport, Reader, Store, TaskRow};
use crate::supervisor::{self, Critical};
use hpcagent_common::JUDGE_TOKEN_VAR;
use hpcagent_common::config::Config;
use hpcagent_common::plan::{Plan, Role};
use hpcagent_common::{ORCHESTRATOR_VAR, TOKEN_VAR};

/// File in the run directory telling clients where the orchestrator listens.
pub const ENDPOINT_FILE: &str = "orchestrator.json";
const HEARTBEAT: Duration = Duration::from_secs(2);
/// The inference pool's name for `INFERENCE_URL`.
const EXTERNAL_INFERENCE: &str = "external";
/// A live role silent for this many heartbeats is dead.
const MISSED_HEARTBEATS: u32 = 4;
/// How long a finished campaign waits for agents to report settled attempts.
const REPORT_GRACE: Duration = Duration::from_secs(30);

/// Where the roles run.
#[derive(Debug, Clone)]
pub enum ExecutorKind {
    /// Child processes of this machine, one virtual node each.
    Local,
    /// Steps of this Slurm job.
    Slurm { job_id: String },
}

/// One `hpcagent up`.
pub struct Up {
    pub config: Config,
    pub run_dir: PathBuf,
    pub executor: ExecutorKind,
    /// The hpcagent binary every role runs.
    pub exe: PathBuf,
    pub corpus_root: PathBuf,
    /// The agents' skills pages.
    pub skills_root: PathBuf,
    /// Continue the campaign the run directory holds (otherwise it must hold none).
    pub resume: bool,
    /// This job's place in its chain (1: submitted by a person).
    pub link: u32,
    /// The Python with NumPy the judges' oracle runs in, when `up` found it
    /// (roles on this machine): judges take it rather than look again.
    pub oracle_python: Option<String>,
}

/// How a campaign ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every task settled or failed.
    Finished,
    /// Drained on USR1: resumable.
    Drained,
    /// Stopped by TERM or INT.
    Interrupted(&'static str),
    /// A role it cannot do without failed for good.
    Failed(String),
}

impl Outcome {
    /// The campaign's state once it ended this way, as the store keeps it.
    pub fn state(&self) -> &'static str {
        match self {
            Outcome::Finished => "finished",
            Outcome::Drained => "drained",
            Outcome::Interrupted(_) => "interrupted",
            Outcome::Failed(_) => "failed",
        }
    }
}

pub async fn up(up: Up) -> anyhow::Result<Outcome> {
    // Everything that can be refused is checked before anything is written or started.
    let mut plan = make_plan(&up)?;
    if let ExecutorKind::Slurm { .. } = up.executor {
        crate::slurm::edf::check_plan(&up.config, &plan)?;
    }
    let specs = tasks::from_corpus(&up.config, &up.corpus_root)?;
    crate::store::check_filesystem(&up.run_dir, up.config.settings.allow_memory_db)?;
    std::fs::create_dir_all(&up.run_dir)
        .with_context(|| format!("cannot create {}", up.run_dir.display()))?;
    let _lock = lock_run_dir(&up.run_dir)?;
    if !up.resume && up.run_dir.join(crate::store::FILE_NAME).exists() {
        anyhow::bail!(
            "{} holds a campaign already; continue it with `hpcagent up --resume {0}`, \
             or choose another run directory",
            up.run_dir.display()
        );
    }
    if let ExecutorKind::Slurm { job_id } = &up.executor {
        crate::slurm::edf::render_plan(&up.config, &mut plan, &up.run_dir.join("edf"))?;
        let started = chain::Event::Started {
            job: job_id.clone(),
            link: up.link,
            at: chain::now(),
        };
        chain::record(&up.run_dir, &started).with_context(|| {
            format!(
                "cannot write {}",
                up.run_dir.join(chain::FILE_NAME).display()
            )
        })?;
    }
    write_file(
        &up.run_dir.join("plan.json"),
        &(serde_json::to_string_pretty(&plan)? + "\n"),
        0o644,
    )?;
    write_file(
        &up.run_dir.join("env.resolved"),
        &up.config.to_env_file(),
        0o644,
    )?;
    let store = Store::open(&up.run_dir, up.config.settings.allow_memory_db)?;
    let id = up
        .run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let job = match &up.executor {
        ExecutorKind::Slurm { job_id } => Some(job_id.as_str()),
        ExecutorKind::Local => None,
    };
    store.campaign_started(&id, &up.run_dir, job, &up.config.to_env_file());
    store.campaign_corpus(&tasks::corpus_version(&plan.corpus));
    store.add_tasks(specs.iter().map(TaskRow::pending).collect());
    store.flush().await?;
    let scheduler = resume_scheduler(&up, &specs)?;
    let resumed = scheduler.counts();
    if resumed.settled + resumed.failed > 0 {
        eprintln!(
            "resuming {}: {} of {} tasks already settled, {} failed",
            up.run_dir.display(),
            resumed.settled,
            resumed.total,
            resumed.failed
        );
    }

    let tokens = Tokens::generate(plan.instances.iter().map(|i| (i.name.as_str(), i.role)));
    let roles: BTreeMap<String, RoleEntry> = plan
        .instances
        .iter()
        .map(|i| {
            let node = i.nodes.first().map_or("", String::as_str);
            (i.name.clone(), RoleEntry::launching(i.role, node))
        })
        .collect();
    let campaign = Arc::new(Campaign::new(
        id,
        up.run_dir.clone(),
        store.clone(),
        tokens.clone(),
        HEARTBEAT,
        up.config.settings.agents_per_node,
        scheduler,
        roles,
    ));

    let (address, server_stop) = serve(&up, &plan, campaign.clone()).await?;
    let endpoint = serde_json::json!({
        "address": address,
        "observer_token": tokens.observer,
        "pid": std::process::id(),
        "campaign": campaign.id,
    });
    write_file(
        &up.run_dir.join(ENDPOINT_FILE),
        &endpoint.to_string(),
        0o600,
    )?;
    eprintln!(
        "orchestrator listening on {address}; run directory {}",
        up.run_dir.display()
    );

    let instances = role_environments(&up, &plan, &tokens, &address);
    let outcome = match &up.executor {
        ExecutorKind::Local => {
            let executor = Arc::new(LocalExecutor {
                run_dir: up.run_dir.clone(),
            });
            run(executor, campaign.clone(), instances, &up).await
        }
        ExecutorKind::Slurm { job_id } => {
            // A heterogeneous job's steps are listed under its components' ids.
            let jobs = Allocation::from_env(&|v| std::env::var(v).ok())
                .ok()
                .flatten()
                .and_then(|a| a.step_jobs())
                .unwrap_or_else(|| job_id.clone());
            let executor = Arc::new(SlurmExecutor {
                run_dir: up.run_dir.clone(),
                jobs,
            });
            run(executor, campaign.clone(), instances, &up).await
        }
    };
    let _ = server_stop.send(true);
    store.campaign_state(outcome.state());
    // A campaign that failed may have failed for its store: the outcome
    // says why already, and the operator reads that rather than the echo.
    if let Err(e) = store.flush().await
        && !matches!(outcome, Outcome::Failed(_))
    {
        return Err(e.into());
    }
    let _ = std::fs::remove_file(up.run_dir.join(ENDPOINT_FILE));
    Ok(outcome)
}

/// Places the roles: on the job's nodes, or on virtual nodes of this machine.
fn make_plan(up: &Up) -> anyhow::Result<Plan> {
    let allocation = match &up.executor {
        ExecutorKind::Slurm { .. } => Allocation::from_env(&|v| std::env::var(v).ok())?
            .context("SLURM_JOB_NODELIST is not set: not inside a Slurm job")?,
        ExecutorKind::Local => {
            let total = up.config.node_total();
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
            Allocation::from_nodelist(
                &format!("local[1-{total}]"),
                None,
                Some(Sourced {
                    value: cpus,
                    source: "this machine".into(),
                }),
            )?
        }
    };
    let layout = Layout {
        run_dir: up.run_dir.clone(),
        exe: up.exe.clone(),
        corpus: up.corpus_root.clone(),
        skills: up.skills_root.clone(),
    };
    Ok(placement::place(&up.config, &allocation, &layout)?)
}

/// The scheduler over the task set, with what the store already knows of each task.
fn resume_scheduler(up: &Up, specs: &[crate::scheduler::TaskSpec]) -> anyhow::Result<Scheduler> {
    let rows: BTreeMap<String, TaskRow> = Reader::open(&up.run_dir)?
        .tasks()?
        .into_iter()
        .map(|r| (r.id.clone(), r))
        .collect();
    let tasks = specs
        .iter()
        .map(|spec| {
            let row = rows.get(&spec.id);
            let state = match row.map(|r| (r.state.as_str(), r.status.clone())) {
                Some(("settled", status)) => {
                    TaskState::Settled(status.unwrap_or_default(), row.and_then(|r| r.speedup))
                }
                Some(("failed", status)) => TaskState::Failed(status.unwrap_or_default()),
                _ => TaskState::Pending,
            };
            Task {
                spec: spec.clone(),
                state,
                attempts: row.map_or(0, |r| r.attempts),
                budget_used: Duration::from_secs_f64(row.map_or(0.0, |r| r.budget_used_s)),
            }
        })
        .collect();
    let s = &up.config.settings;
    let mut scheduler = Scheduler::new(
        Settings {
            max_attempts: s.max_attempts,
            task_budget: Duration::from_secs(s.task_budget.seconds),
            lease_ttl: Duration::from_secs(s.lease_seconds as u64),
            needs_inference: up.config.agents_use_inference(),
        },
        tasks,
    );
    if let Some(url) = &s.inference_url {
        // An endpoint outside the allocation: usable from the start, set aside like any other.
        let pool = scheduler.pool_mut(Service::Inference);
        pool.registered(EXTERNAL_INFERENCE, url.trim_end_matches('/'));
        pool.ready(EXTERNAL_INFERENCE, true);
    }
    Ok(scheduler)
}

/// Starts the control plane; returns its address and a switch to stop it.
async fn serve(
    up: &Up,
    plan: &Plan,
    campaign: Arc<Campaign>,
) -> anyhow::Result<(String, watch::Sender<bool>)> {
    let (bind, host) = match &up.executor {
        ExecutorKind::Local => ("127.0.0.1:0".to_string(), "127.0.0.1".to_string()),
        ExecutorKind::Slurm { .. } => (
            format!("0.0.0.0:{}", plan.orchestrator.port),
            hpcagent_common::hostname(),
        ),
    };
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        // The planned port is taken: any port will do, roles learn it from us.
        Err(_) => tokio::net::TcpListener::bind("0.0.0.0:0")
            .await
            .context("cannot listen")?,
    };
    let address = format!("http://{host}:{}", listener.local_addr()?.port());
    let (stop, mut stopped) = watch::channel(false);
    let incoming = crate::control::incoming(listener);
    tokio::spawn(async move {
        let result = tonic::transport::Server::builder()
            .add_service(Control::server(campaign))
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = stopped.changed().await;
            })
            .await;
        if let Err(e) = result {
            tracing::error!("control plane: {e}");
        }
    });
    Ok((address, stop))
}

/// Each instance with the environment it is launched with: the campaign's
/// address and its role's token. (Where the corpus and skills are, roles
/// read from the plan.)
fn role_environments(
    up: &Up,
    plan: &Plan,
    tokens: &Tokens,
    address: &str,
) -> Vec<(hpcagent_common::plan::RoleInstance, Vec<(String, String)>)> {
    let secret = format!("{}", rand::random::<u64>());
    plan.instances
        .iter()
        .map(|instance| {
            let token = tokens.of(&instance.name).expect("a token per instance");
            let mut env = vec![
                (ORCHESTRATOR_VAR.to_string(), address.to_string()),
                (TOKEN_VAR.to_string(), token.to_string()),
            ];
            if instance.role == Role::Judge {
                // Every judge of the campaign draws the same held-out cases.
                env.push(("HPCAGENT_JUDGE_SECRET".to_string(), secret.clone()));
                if let Some(python) = &up.oracle_python {
                    env.push(("HPCAGENT_PYTHON".to_string(), python.clone()));
                }
            }
            if matches!(instance.role, Role::Judge | Role::Agent) {
                env.push((JUDGE_TOKEN_VAR.to_string(), tokens.judge_access.clone()));
            }
            (instance.clone(), env)
        })
        .collect()
}

/// The main loop, on one executor.
async fn run<E: Executor>(
    executor: Arc<E>,
    campaign: Arc<Campaign>,
    instances: Vec<(hpcagent_common::plan::RoleInstance, Vec<(String, String)>)>,
    up: &Up,
) -> Outcome {
    let (shutdown_tx, shutdown) = watch::channel(false);
    let (critical_tx, mut critical) = mpsc::channel::<Critical>(8);
    let mut supervisors =
        supervisor::supervise(executor, campaign.clone(), instances, shutdown, critical_tx);
    let mut usr1 = signal(SignalKind::user_defined1()).expect("USR1 handler");
    let mut term = signal(SignalKind::terminate()).expect("TERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("INT handler");
    let mut progress = progress::Progress::new();
    let mut drain_deadline: Option<Instant> = None;
    let mut finished_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let outcome = loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = usr1.recv() => {
                let window = drain_window(up.config.settings.drain_seconds);
                eprintln!("\nUSR1: draining; running tasks get {window:?} to finish");
                campaign.scheduler().drain();
                campaign.store.event("", "drain", "USR1");
                drain_deadline = Some(Instant::now() + window);
            }
            _ = term.recv() => break Outcome::Interrupted("TERM"),
            _ = int.recv() => break Outcome::Interrupted("INT"),
            Some(c) = critical.recv() => {
                eprintln!("\n{} failed for good: {}\n--- last lines of its logs ---\n{}\n---", c.instance, c.reason, c.last_words);
                break Outcome::Failed(format!("{}: {}", c.instance, c.reason));
            }
        }
        campaign.store.check_file();
        if let Some(why) = campaign.store.failure() {
            break Outcome::Failed(format!("the results store failed: {why}"));
        }
        expire_leases(&campaign);
        detect_silent_roles(&campaign, up.config.settings.register_seconds);
        progress.update(&control::snapshot(&campaign));
        let (finished, active, unreported) = {
            let s = campaign.scheduler();
            (s.finished(), s.active_leases(), s.unreported())
        };
        if finished {
            // The last agents report their attempts (transcripts, tokens) before the end.
            let since = *finished_at.get_or_insert_with(Instant::now);
            if unreported == 0 || since.elapsed() >= REPORT_GRACE {
                break Outcome::Finished;
            }
        }
        if let Some(deadline) = drain_deadline
            && (active == 0 || Instant::now() >= deadline)
        {
            break Outcome::Drained;
        }
    };
    progress.finish(&control::snapshot(&campaign));
    campaign.scheduler().drain();
    let _ = shutdown_tx.send(true);
    let stopping = async { while supervisors.join_next().await.is_some() {} };
    if tokio::time::timeout(supervisor::STOP_GRACE * 3, stopping)
        .await
        .is_err()
    {
        tracing::warn!("some role steps did not stop in time");
        supervisors.abort_all();
    }
    outcome
}

/// Ends leases past their deadline and records what became of their tasks.
fn expire_leases(campaign: &Campaign) {
    let ended = {
        let mut sched = campaign.scheduler();
        let ended = sched.expire(Instant::now());
        for end in &ended {
            let report = AgentReport {
                outcome: end.outcome.to_string(),
                message: "the lease ran out: no heartbeat from its agent, or its budget is spent"
                    .into(),
                ..AgentReport::default()
            };
            campaign.record_end(end, Some(report), None, None);
        }
        ended
    };
    for end in &ended {
        tracing::warn!(task = %end.task, attempt = end.attempt, "lease ended: {}", end.outcome);
    }
}

/// Marks dead the roles that stopped heartbeating or never registered
/// within `register_seconds` of their launch.
fn detect_silent_roles(campaign: &Campaign, register_seconds: u32) {
    let silent_after = campaign.heartbeat_interval * MISSED_HEARTBEATS;
    let register_within = Duration::from_secs(register_seconds.into());
    let silent: Vec<(String, String)> = campaign
        .roles()
        .iter()
        .filter_map(|(name, e)| {
            let quiet = e.last_seen.elapsed();
            if e.state.is_live() && quiet > silent_after {
                Some((
                    name.clone(),
                    format!("no heartbeat for {:.0} s", quiet.as_secs_f64()),
                ))
            } else if e.state == RoleState::Launching && quiet > register_within {
                Some((
                    name.clone(),
                    format!("did not register within {register_seconds} s (REGISTER_SECONDS)"),
                ))
            } else {
                None
            }
        })
        .collect();
    for (name, why) in silent {
        campaign.endpoint_down(&name);
        campaign.set_role_state(&name, RoleState::Dead(why));
    }
}

/// How long running tasks get after USR1: what is left before the time
/// limit, less what stopping the roles and flushing the store take.
fn drain_window(drain_seconds: u32) -> Duration {
    let reserve = supervisor::STOP_GRACE * 2 + Duration::from_secs(15);
    Duration::from_secs(drain_seconds as u64)
        .saturating_sub(reserve)
        .max(Duration::from_secs(5))
}

/// Holds the run directory for this campaign: a second `up` on it (a resume
/// started while the first still runs) is refused instead of sharing the store.
fn lock_run_dir(run_dir: &Path) -> anyhow::Result<std::fs::File> {
    let path = run_dir.join(".lock");
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another hpcagent up is running on {} (it holds {})",
            run_dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// Writes `path` whole, created with `mode` so a secret is never readable
/// by others, not even for a moment.
fn write_file(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    hpcagent_common::files::write_atomic(path, text.as_bytes(), mode)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_drain_window_leaves_time_to_stop() {
        assert_eq!(drain_window(300), Duration::from_secs(265));
        assert_eq!(
            drain_window(20),
            Duration::from_secs(5),
            "never less than 5 s"
        );
    }

    #[test]
    fn a_run_directory_has_one_campaign_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_run_dir(dir.path()).unwrap();
        let err = lock_run_dir(dir.path()).unwrap_err();
        assert!(err.to_string().contains("another hpcagent up"), "{err}");
        drop(held);
        assert!(lock_run_dir(dir.path()).is_ok());
    }

    /// A campaign of no tasks whose judges were launched `ago` seconds ago.
    fn launched_judges(dir: &Path, ago: &[(&str, u64)]) -> Campaign {
        let launched = |ago: u64| {
            let mut entry = RoleEntry::launching(Role::Judge, "n1");
            entry.last_seen = Instant::now() - Duration::from_secs(ago);
            entry
        };
        let settings = Settings {
            max_attempts: 1,
            task_budget: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(30),
            needs_inference: false,
        };
        Campaign::new(
            "c".into(),
            dir.to_path_buf(),
            Store::open(dir, true).unwrap(),
            Tokens::generate(ago.iter().map(|&(name, _)| (name, Role::Judge))),
            HEARTBEAT,
            1,
            Scheduler::new(settings, Vec::new()),
            ago.iter()
                .map(|&(name, ago)| (name.to_string(), launched(ago)))
                .collect(),
        )
    }

    #[test]
    fn a_role_that_does_not_register_in_time_is_marked_dead() {
        let dir = tempfile::tempdir().unwrap();
        let campaign = launched_judges(dir.path(), &[("judge-0", 60), ("judge-1", 1)]);
        detect_silent_roles(&campaign, 10);
        let roles = campaign.roles();
        assert_eq!(
            roles["judge-0"].state,
            RoleState::Dead("did not register within 10 s (REGISTER_SECONDS)".into())
        );
        assert_eq!(roles["judge-1"].state, RoleState::Launching);
    }

    #[test]
    fn a_held_back_launch_is_news_once_and_cleared_when_its_step_starts() {
        let dir = tempfile::tempdir().unwrap();
        let campaign = launched_judges(dir.path(), &[("judge-0", 60)]);
        let detail = || campaign.roles()["judge-0"].detail.clone();
        assert!(campaign.held_back("judge-0", Some("not started")));
        assert!(
            !campaign.held_back("judge-0", Some("not started")),
            "said once"
        );
        assert_eq!(detail(), "not started");
        assert!(!campaign.held_back("judge-0", None));
        assert_eq!(detail(), "", "its step started");
        assert!(campaign.held_back("judge-0", Some("not started")));
        campaign.set_role_state("judge-0", RoleState::Starting);
        assert!(!campaign.held_back("judge-0", None), "it registered");
        assert!(!campaign.held_back("judge-0", Some("not started")));
        campaign.set_role_state("judge-0", RoleState::Launching);
        assert_eq!(detail(), "", "a new launch says nothing of the last");
    }

    #[test]
    fn secrets_are_written_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orchestrator.json");
        write_file(&path, "{}", 0o600).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
    }
}

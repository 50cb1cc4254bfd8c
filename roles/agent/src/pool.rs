//! The worker pool of one agent instance.
//!
//! `workers` loops each pull a lease, make its attempt directory, work it
//! with the policy, and complete it; the instance's pulls and completions go
//! out in batches ([`Leases`]); heartbeats renew the leases in hand. An
//! orchestrator that does not answer a pull is asked again with backoff (the
//! heartbeat ends the process if it stays away). A worker stops when the
//! orchestrator says there is nothing left (or the campaign drains); the
//! instance exits when its last worker stops.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hpcagent_common::JUDGE_TOKEN_VAR;
use hpcagent_common::config::{Config, Isolation, Policy};
use hpcagent_common::{AttemptOutcome, Refused};
use hpcagent_common::{Client, Leases, Pulled, RoleContext, start_heartbeats};
use hpcagent_proto::v1 as pb;

use crate::judge_link::JudgeLink;
use crate::lease::LeaseWatch;
use crate::llm::InferenceLink;
use crate::policy::builtin::{self, Limits};
use crate::policy::command::{self, CommandPolicy};
use crate::policy::{Attempt, baseline};
use crate::prompt::{self, Skill};
use crate::search::Search;
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// The longest wait between pulls the orchestrator did not answer.
const MAX_PULL_BACKOFF: Duration = Duration::from_secs(5);

/// What the instance's workers do with a lease, and what they need for it.
enum Work {
    Baseline,
    Builtin {
        limits: Limits,
        skills: Vec<Skill>,
        search: Option<Search>,
    },
    Command {
        policy: CommandPolicy,
        skills: Vec<Skill>,
        search: Option<Search>,
    },
}

impl Work {
    /// The configured policy, refused at start when it cannot work (no
    /// skills, a search provider without its key).
    fn from_config(config: &Config, run_dir: &Path, skills_root: &Path) -> anyhow::Result<Work> {
        let s = &config.settings;
        if s.agent_policy == Policy::Baseline {
            return Ok(Work::Baseline);
        }
        let skills = prompt::load(skills_root)
            .map_err(anyhow::Error::msg)
            .context("the agents' skills pages")?;
        let search = Search::from_settings(s).map_err(anyhow::Error::msg)?;
        Ok(match s.agent_policy {
            Policy::Command => {
                crate::sandbox::check(s.isolation == Isolation::Weak)?;
                Work::Command {
                    policy: CommandPolicy {
                        template: s.agent_command.0.clone(),
                        model: config.llm_model().to_string(),
                        exe: std::env::current_exe()?,
                        profiling: s.profiling_guidance,
                        run_dir: run_dir.to_path_buf(),
                    },
                    skills,
                    search,
                }
            }
            _ => Work::Builtin {
                limits: Limits {
                    model: config.llm_model().to_string(),
                    max_turns: s.max_turns,
                    max_tokens: s.max_tokens as u64,
                    turn_tokens: s.turn_tokens,
                    temperature: s.temperature.0,
                    tool_choice: s.tool_choice.to_string(),
                    profiling: s.profiling_guidance,
                },
                skills,
                search,
            },
        })
    }
}

/// Runs the agent instance `instance` of the campaign in `run_dir`.
pub async fn run(run_dir: &Path, instance: &str) -> anyhow::Result<()> {
    let judge_token = std::env::var(JUDGE_TOKEN_VAR).map_err(|_| {
        anyhow::anyhow!("{JUDGE_TOKEN_VAR} is not set: agents run inside `hpcagent up`")
    })?;
    let mut ctx = RoleContext::load(run_dir, instance).await?;
    let policy = ctx.config.settings.agent_policy;
    // The skills the campaign was planned with, not whatever the step's
    // environment (a container image's, say) points at.
    if !ctx.plan.skills.is_dir() {
        return Err(Refused(format!(
            "the skills pages the campaign was planned with, {}, are not visible here \
             (a container image without them mounted? add them to the EDF's mounts)",
            ctx.plan.skills.display()
        ))
        .into());
    }
    let work = Arc::new(Work::from_config(&ctx.config, run_dir, &ctx.plan.skills)?);
    let capabilities = [("policy".to_string(), policy.to_string())]
        .into_iter()
        .collect();
    let assignment = ctx.register(pb::Role::Agent, "", capabilities).await?;
    let heartbeat = start_heartbeats(
        ctx.client.clone(),
        instance.to_string(),
        Duration::from_millis(assignment.heartbeat_interval_ms as u64),
    );
    heartbeat.set_ready(true);
    tracing::info!(instance, workers = assignment.workers, %policy, "agent ready");
    let leases = Leases::new(ctx.client.clone(), instance);
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..assignment.workers {
        let worker = Worker {
            client: ctx.client.clone(),
            leases: leases.clone(),
            heartbeat: heartbeat.clone(),
            instance: instance.to_string(),
            judge_token: judge_token.clone(),
            index: worker,
            work: work.clone(),
        };
        workers.spawn(worker.work());
    }
    while let Some(done) = workers.join_next().await {
        if let Ok(Err(e)) = done {
            tracing::error!("worker: {e:#}");
        }
    }
    tracing::info!(instance, "no work left; exiting");
    Ok(())
}

/// One worker of the pool.
struct Worker {
    client: Client,
    leases: Leases,
    heartbeat: hpcagent_common::Heartbeat,
    instance: String,
    judge_token: String,
    index: u32,
    work: Arc<Work>,
}

impl Worker {
    async fn work(self) -> anyhow::Result<()> {
        let mut next = self.pull().await?;
        while let Some(lease) = next {
            self.heartbeat.hold(&lease.lease_id);
            tracing::info!(task = %lease.task_id, attempt = lease.attempt, judge = %lease.judge_url, "working");
            let attempt = match hpcagent_common::make_attempt_dir(&lease) {
                Ok(()) => self.attempt(&lease).await,
                Err(e) => {
                    Attempt::ended(AttemptOutcome::Error, format!("{}: {e}", lease.attempt_dir))
                }
            };
            tracing::info!(task = %lease.task_id, attempt = lease.attempt, outcome = %attempt.outcome, "{}", attempt.message);
            let report = pb::Completion {
                lease_id: lease.lease_id.clone(),
                outcome: attempt.outcome.to_wire(),
                tokens: attempt.tokens,
                transcript_path: attempt.transcript,
                message: attempt.message,
            };
            // Asked together, they usually go out in one request.
            let (completed, pulled) = tokio::join!(self.complete(report), self.pull());
            if let Err(why) = completed {
                tracing::warn!(task = %lease.task_id, "complete: {why}");
            }
            self.heartbeat.release(&lease.lease_id);
            next = pulled?;
        }
        Ok(())
    }

    /// Reports an attempt, asking again while the orchestrator does not answer:
    /// the report carries its transcript and tokens.
    async fn complete(&self, report: pb::Completion) -> Result<(), String> {
        let mut backoff = Duration::from_millis(500);
        for _ in 0..6 {
            match self.leases.complete(report.clone()).await {
                Ok(_) => return Ok(()),
                Err(status) if transient(&status) => {
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                Err(status) => return Err(status.message().to_string()),
            }
        }
        Err("the orchestrator did not answer".into())
    }

    /// Works one lease with the instance's policy.
    async fn attempt(&self, lease: &pb::Lease) -> Attempt {
        let mut judge = JudgeLink::new(self.client.clone(), lease, &self.judge_token);
        let toolbox = |judge: JudgeLink, search: &Option<Search>| {
            Workspace::create(Path::new(&lease.attempt_dir))
                .map(|ws| Toolbox::new(lease.clone(), judge, ws, &self.instance, search.clone()))
                .map_err(|e| {
                    Attempt::ended(AttemptOutcome::Error, format!("{}: {e}", lease.attempt_dir))
                })
        };
        let heartbeat = self.heartbeat.clone();
        let lease_id = lease.lease_id.clone();
        let lost: LeaseWatch = Arc::new(move || !heartbeat.holds(&lease_id));
        match &*self.work {
            Work::Baseline => baseline::attempt(&mut judge, lease, &self.instance).await,
            Work::Builtin {
                limits,
                skills,
                search,
            } => match toolbox(judge, search) {
                Ok(tools) => {
                    let llm = InferenceLink::new(self.client.clone(), lease);
                    builtin::attempt(lease, tools, llm, limits, skills, lost).await
                }
                Err(failed) => failed,
            },
            Work::Command {
                policy,
                skills,
                search,
            } => match toolbox(judge, search) {
                Ok(tools) => command::attempt(policy, lease, tools, skills, lost).await,
                Err(failed) => failed,
            },
        }
    }

    /// The next lease; `None` once there is no more work.
    async fn pull(&self) -> anyhow::Result<Option<pb::Lease>> {
        let mut backoff = Duration::from_millis(250);
        loop {
            if self.heartbeat.draining() {
                return Ok(None);
            }
            let wait = match self.leases.pull(self.index).await {
                Ok(Pulled::Lease(lease)) => return Ok(Some(*lease)),
                Ok(Pulled::Done) => return Ok(None),
                Ok(Pulled::Wait(wait)) => wait,
                Err(status) if transient(&status) => {
                    tracing::warn!("pull: {}; again in {backoff:?}", status.message());
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_PULL_BACKOFF);
                    continue;
                }
                Err(status) => anyhow::bail!("pull: {}", status.message()),
            };
            tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
        }
    }
}

/// A failure worth asking again after: the orchestrator is busy or away.
fn transient(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Internal
            | tonic::Code::ResourceExhausted
    )
}

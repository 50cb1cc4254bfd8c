//! The running campaign: what its main loop ([`crate::campaign`]), its
//! control plane ([`crate::control`]) and its supervisor
//! ([`crate::supervisor`]) share. The role table and each instance's
//! state, the scheduler, the store and the tokens live here, in a module of
//! their own, so that the three use it and none of them names another for it.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::auth::Tokens;
use crate::scheduler::{AttemptEnd, Scheduler, Service, TaskState};
use crate::store::{AgentReport, AttemptRecord, Store, VerdictRecord};
use hpcagent_common::plan::Role;

/// Where a role instance is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleState {
    /// Its step was started; it has not registered yet.
    Launching,
    /// Registered, not ready yet.
    Starting,
    Ready,
    /// Ended after its work was done.
    Finished,
    /// Died or went silent; the supervisor restarts it.
    Dead(String),
    /// Restarts used up.
    Failed(String),
}

impl RoleState {
    pub fn name(&self) -> &'static str {
        match self {
            RoleState::Launching => "launching",
            RoleState::Starting => "starting",
            RoleState::Ready => "ready",
            RoleState::Finished => "finished",
            RoleState::Dead(_) => "dead",
            RoleState::Failed(_) => "failed",
        }
    }

    /// Registered and expected to heartbeat.
    pub fn is_live(&self) -> bool {
        matches!(self, RoleState::Starting | RoleState::Ready)
    }
}

/// The endpoint pool a role's instances belong to, if it serves one.
pub fn service_of(role: Role) -> Option<Service> {
    match role {
        Role::Judge => Some(Service::Judge),
        Role::Inference => Some(Service::Inference),
        Role::Agent => None,
    }
}

/// One role instance as the orchestrator sees it.
#[derive(Debug, Clone)]
pub struct RoleEntry {
    pub role: Role,
    pub node: String,
    pub endpoint: String,
    pub state: RoleState,
    pub restarts: u32,
    pub last_seen: Instant,
    /// The Slurm step it said it runs in, when it registered from one.
    pub slurm_step: Option<String>,
    /// What it last said it is doing (loading a model, …).
    pub detail: String,
}

impl RoleEntry {
    /// An instance of the plan on `node`, launched and not heard from yet.
    pub fn launching(role: Role, node: &str) -> RoleEntry {
        RoleEntry {
            role,
            node: node.to_string(),
            endpoint: String::new(),
            state: RoleState::Launching,
            restarts: 0,
            last_seen: Instant::now(),
            slurm_step: None,
            detail: String::new(),
        }
    }
}

/// A running campaign.
pub struct Campaign {
    pub id: String,
    pub run_dir: PathBuf,
    pub started: Instant,
    pub store: Store,
    pub tokens: Tokens,
    pub heartbeat_interval: Duration,
    pub workers_per_agent: u32,
    pub scheduler: Mutex<Scheduler>,
    pub roles: Mutex<BTreeMap<String, RoleEntry>>,
    /// When recent grades were recorded, for grades per minute.
    grades: Mutex<VecDeque<Instant>>,
}

impl Campaign {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        run_dir: PathBuf,
        store: Store,
        tokens: Tokens,
        heartbeat_interval: Duration,
        workers_per_agent: u32,
        scheduler: Scheduler,
        roles: BTreeMap<String, RoleEntry>,
    ) -> Campaign {
        Campaign {
            id,
            run_dir,
            started: Instant::now(),
            store,
            tokens,
            heartbeat_interval,
            workers_per_agent,
            scheduler: Mutex::new(scheduler),
            roles: Mutex::new(roles),
            grades: Mutex::default(),
        }
    }

    pub fn scheduler(&self) -> std::sync::MutexGuard<'_, Scheduler> {
        self.scheduler.lock().expect("scheduler lock")
    }

    pub fn roles(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, RoleEntry>> {
        self.roles.lock().expect("roles lock")
    }

    /// Notes why an instance still launching has not started (`Some`), or
    /// that it has started after all (`None`, clearing what was said): its
    /// detail, and an event when it is held back anew. Returns whether it
    /// is held back anew.
    pub fn held_back(&self, instance: &str, why: Option<&str>) -> bool {
        let mut roles = self.roles();
        let Some(entry) = roles.get_mut(instance) else {
            return false;
        };
        let why = why.unwrap_or_default();
        // It may have registered since the lookup; while it launches,
        // nothing else writes its detail.
        if entry.state != RoleState::Launching || entry.detail == why {
            return false;
        }
        entry.detail = why.to_string();
        if why.is_empty() {
            return false;
        }
        self.store.event(instance, "held-back", why);
        true
    }

    /// Changes an instance's state, and tells the store.
    pub fn set_role_state(&self, instance: &str, state: RoleState) {
        let mut roles = self.roles();
        if let Some(entry) = roles.get_mut(instance) {
            if state == RoleState::Launching {
                // A new incarnation: nothing of the last one's registration holds.
                entry.last_seen = Instant::now();
                entry.slurm_step = None;
                entry.detail.clear();
            }
            // Heartbeats repeat the state: only a change is worth a write
            // (at a thousand instances, one per heartbeat was most of the
            // orchestrator's CPU).
            if entry.state == state {
                return;
            }
            let detail = match &state {
                RoleState::Dead(why) | RoleState::Failed(why) => why.clone(),
                _ => String::new(),
            };
            self.store.event(instance, state.name(), &detail);
            entry.state = state;
            self.store.role(
                instance,
                entry.role.as_str(),
                &entry.node,
                &entry.endpoint,
                entry.state.name(),
                entry.restarts,
            );
        }
    }

    /// Records in the store how an attempt ended and what became of its
    /// task (`said`: the agent's words on it, where its report comes after).
    /// Called under the scheduler lock, so the store sees ends in the order
    /// the scheduler decided them.
    pub fn record_end(
        &self,
        end: &AttemptEnd,
        agent: Option<AgentReport>,
        verdict: Option<VerdictRecord>,
        said: Option<String>,
    ) {
        let (status, speedup) = match &end.state {
            TaskState::Settled(status, speedup) => (Some(status.clone()), *speedup),
            TaskState::Failed(why) => {
                tracing::warn!(task = %end.task, "task failed: {why}");
                (Some(why.clone()), None)
            }
            _ => (None, None),
        };
        self.store.attempt_ended(AttemptRecord {
            task: end.task.clone(),
            attempt: end.attempt,
            outcome: end.outcome.to_string(),
            state: end.state.name().to_string(),
            attempts: end.attempts,
            budget_used_s: end.budget_used.as_secs_f64(),
            submitted_by: end.submitter.map(|s| s.as_str()),
            status,
            speedup,
            agent,
            verdict,
            said,
        });
    }

    /// The endpoint an instance serves (if it is a judge or an inference
    /// replica) is no longer usable: its step died or went silent.
    pub fn endpoint_down(&self, instance: &str) {
        let Some(service) = self.roles().get(instance).and_then(|e| service_of(e.role)) else {
            return;
        };
        self.scheduler().pool_mut(service).down(instance);
    }

    /// `<run>/tasks/<task>/attempt-<k>/`: an attempt's evidence.
    pub fn attempt_dir(&self, task: &str, attempt: u32) -> PathBuf {
        self.run_dir
            .join("tasks")
            .join(task)
            .join(format!("attempt-{attempt}"))
    }

    pub fn grade_recorded(&self, at: Instant) {
        let mut grades = self.grades.lock().expect("grades lock");
        grades.push_back(at);
        while grades
            .front()
            .is_some_and(|t| at.duration_since(*t) > Duration::from_secs(60))
        {
            grades.pop_front();
        }
    }

    pub fn grades_per_minute(&self) -> f64 {
        let grades = self.grades.lock().expect("grades lock");
        let now = Instant::now();
        let window = now
            .duration_since(self.started)
            .min(Duration::from_secs(60))
            .as_secs_f64()
            .max(1.0);
        let recent = grades
            .iter()
            .filter(|t| now.duration_since(**t) <= Duration::from_secs(60))
            .count();
        recent as f64 * 60.0 / window
    }
}

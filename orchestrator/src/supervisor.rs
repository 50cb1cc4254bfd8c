//! Supervision: keeping every role instance of the plan running until the
//! campaign ends.
//!
//! One task per instance launches it through the executor and watches it. An
//! instance that exits, or that the main loop marked dead for missing its
//! heartbeats, is stopped and launched again after a backoff (1, 2, 4 … s),
//! up to [`MAX_RESTARTS`] times. An agent that exits cleanly once the
//! campaign has nothing left for it is finished, not dead. An instance out of
//! restarts is failed, and so at once is one that exits [`REFUSED_EXIT`]:
//! it said this node cannot run it (no NumPy for the oracle, isolation the
//! kernel refuses), which another launch would only repeat. When no other instance of its role is alive, the
//! campaign cannot go on, and the supervisor says so with the last lines of
//! the instance's logs (its own, and its srun's).
//!
//! One more task watches slow launches: an instance that has not registered
//! within [`SLOW_LAUNCH`] is looked up (one query for all of them), and one
//! the machine has not started says so in its detail (`hpcagent status`), in
//! the log and in the store's events, while it waits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::executor::{Executor, Step, last_words};
use crate::live::{Campaign, RoleState};
use hpcagent_common::REFUSED_EXIT;
use hpcagent_common::plan::{Role, RoleInstance};

pub const MAX_RESTARTS: u32 = 3;
/// An instance that ran this long before it died starts its restarts afresh:
/// one crash a day does not add up to failing the campaign.
const STABLE_AFTER: Duration = Duration::from_secs(300);
/// Time a stopping role gets between TERM and KILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// An instance launched this long ago and not registered is looked up: roles
/// register within a second or two of their step's start.
const SLOW_LAUNCH: Duration = Duration::from_secs(10);
/// How often slow launches are looked up: one `squeue` for all of them.
const SLOW_LAUNCH_EVERY: Duration = Duration::from_secs(5);

/// A role the campaign cannot do without has failed for good.
#[derive(Debug, Clone)]
pub struct Critical {
    pub instance: String,
    pub reason: String,
    pub last_words: String,
}

/// Starts one supervising task per instance (each with the environment it is
/// launched with). They stop their instances and end when `shutdown` turns true.
pub fn supervise<E: Executor>(
    executor: Arc<E>,
    campaign: Arc<Campaign>,
    instances: Vec<(RoleInstance, Vec<(String, String)>)>,
    shutdown: watch::Receiver<bool>,
    critical: mpsc::Sender<Critical>,
) -> tokio::task::JoinSet<()> {
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(watch_slow_launches(
        executor.clone(),
        campaign.clone(),
        shutdown.clone(),
    ));
    for (instance, env) in instances {
        tasks.spawn(keep_running(
            executor.clone(),
            campaign.clone(),
            instance,
            env,
            shutdown.clone(),
            critical.clone(),
        ));
    }
    tasks
}

async fn keep_running<E: Executor>(
    executor: Arc<E>,
    campaign: Arc<Campaign>,
    instance: RoleInstance,
    env: Vec<(String, String)>,
    mut shutdown: watch::Receiver<bool>,
    critical: mpsc::Sender<Critical>,
) {
    let name = instance.name.clone();
    loop {
        if *shutdown.borrow() {
            return;
        }
        campaign.set_role_state(&name, RoleState::Launching);
        let mut step = match executor.launch(&instance, &env).await {
            Ok(step) => step,
            Err(why) => {
                let why = why.to_string();
                if !restart_or_fail(&campaign, &instance, &why, &critical).await {
                    return;
                }
                continue;
            }
        };
        campaign.store.event(
            &name,
            "launched",
            &format!("pid {} step {:?}", step.pid, step.step_id),
        );
        let started = Instant::now();
        let mut refused = false;
        let why = tokio::select! {
            status = step.child.wait() => {
                refused = matches!(&status, Ok(s) if s.code() == Some(REFUSED_EXIT.into()));
                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                let done = campaign.scheduler().finished() || campaign.scheduler().draining();
                if instance.role == Role::Agent && done && status.contains("exit status: 0") {
                    campaign.set_role_state(&name, RoleState::Finished);
                    return;
                }
                format!("exited ({status}) after {:.0} s", started.elapsed().as_secs_f64())
            }
            why = marked_dead(&campaign, &name) => why,
            _ = shutdown.changed() => {
                stop(&*executor, &campaign, &mut step).await;
                campaign.set_role_state(&name, RoleState::Finished);
                return;
            }
        };
        // No new leases go to it while it stops; whatever is left of it goes
        // before another one starts.
        campaign.endpoint_down(&name);
        stop(&*executor, &campaign, &mut step).await;
        if *shutdown.borrow() {
            return;
        }
        if started.elapsed() >= STABLE_AFTER
            && let Some(entry) = campaign.roles().get_mut(&name)
        {
            entry.restarts = 0;
        }
        tracing::warn!(instance = %name, "{why}");
        if refused {
            let why = format!("{why}: it refuses to run on this node");
            fail(&campaign, &instance, why, &critical).await;
            return;
        }
        if !restart_or_fail(&campaign, &instance, &why, &critical).await {
            return;
        }
    }
}

/// Says why instances slow to register have not started, when the executor
/// can tell, until `shutdown`.
async fn watch_slow_launches<E: Executor>(
    executor: Arc<E>,
    campaign: Arc<Campaign>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(SLOW_LAUNCH_EVERY);
    // After a lookup that hung, the next one waits its turn, not at once.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let slow = slow_launches(&campaign);
        if slow.is_empty() {
            continue;
        }
        let held = tokio::select! {
            held = executor.not_started(&slow) => held,
            _ = shutdown.changed() => return,
        };
        let Some(held) = held else {
            continue;
        };
        for name in &slow {
            let why = held.get(name).map(String::as_str);
            if campaign.held_back(name, why) {
                tracing::warn!("{name}: {}", why.unwrap_or_default());
            }
        }
    }
}

/// Instances launched at least [`SLOW_LAUNCH`] ago that have not registered.
fn slow_launches(campaign: &Campaign) -> Vec<String> {
    campaign
        .roles()
        .iter()
        .filter(|(_, e)| e.state == RoleState::Launching && e.last_seen.elapsed() >= SLOW_LAUNCH)
        .map(|(name, _)| name.clone())
        .collect()
}

/// Stops a launched instance, by the Slurm step it registered from when it did.
async fn stop<E: Executor>(executor: &E, campaign: &Campaign, step: &mut Step) {
    if step.step_id.is_none() {
        step.step_id = campaign
            .roles()
            .get(&step.name)
            .and_then(|e| e.slurm_step.clone());
    }
    executor.stop(step, STOP_GRACE).await;
}

/// Resolves when the main loop marks the instance dead (missed heartbeats).
async fn marked_dead(campaign: &Campaign, name: &str) -> String {
    loop {
        if let Some(RoleState::Dead(why)) = campaign.roles().get(name).map(|e| e.state.clone()) {
            return why;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Fails the instance for good, and reports it when its role has no live
/// instance left.
async fn fail(
    campaign: &Campaign,
    instance: &RoleInstance,
    why: String,
    critical: &mpsc::Sender<Critical>,
) {
    let name = &instance.name;
    campaign.set_role_state(name, RoleState::Failed(why.clone()));
    let others_alive = campaign.roles().iter().any(|(n, e)| {
        n != name && e.role == instance.role && !matches!(e.state, RoleState::Failed(_))
    });
    if !others_alive {
        let _ = critical
            .send(Critical {
                instance: name.clone(),
                reason: why,
                last_words: last_words(&campaign.run_dir.join(&instance.log_dir)),
            })
            .await;
    }
}

/// Counts a restart and waits its backoff; or, out of restarts, fails the
/// instance (and reports it when its role has no live instance left).
/// Returns whether to launch again.
async fn restart_or_fail(
    campaign: &Campaign,
    instance: &RoleInstance,
    why: &str,
    critical: &mpsc::Sender<Critical>,
) -> bool {
    let name = &instance.name;
    let restarts = {
        let mut roles = campaign.roles();
        let entry = roles.get_mut(name).expect("every instance has an entry");
        entry.restarts += 1;
        entry.restarts
    };
    if restarts > MAX_RESTARTS {
        let why = format!("{why}; restarted {MAX_RESTARTS} times");
        fail(campaign, instance, why, critical).await;
        return false;
    }
    campaign.set_role_state(name, RoleState::Dead(why.to_string()));
    let backoff = Duration::from_secs(1 << (restarts - 1).min(5));
    tracing::info!(instance = %name, "restart {restarts} of {MAX_RESTARTS} in {backoff:?}");
    tokio::time::sleep(backoff).await;
    true
}

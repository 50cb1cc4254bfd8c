use super::*;

fn tasks(n: usize) -> Vec<Task> {
    (0..n)
        .map(|i| {
            Task::pending(TaskSpec {
                id: format!("k{i}.c.fp64"),
                kernel: format!("k{i}"),
                track: "t".into(),
                language: "c".into(),
                precision: "fp64".into(),
                preset: None,
                budget: None,
            })
        })
        .collect()
}

fn scheduler(n: usize, max_attempts: u32) -> Scheduler {
    Scheduler::new(
        Settings {
            max_attempts,
            task_budget: Duration::from_secs(600),
            lease_ttl: Duration::from_secs(30),
            needs_inference: false,
        },
        tasks(n),
    )
}

fn ready(s: &mut Scheduler, name: &str, url: &str) {
    s.pool_mut(Service::Judge).registered(name, url);
    s.pool_mut(Service::Judge).ready(name, true);
}

fn grant(p: Pull) -> Grant {
    match p {
        Pull::Lease(g) => *g,
        other => panic!("expected a lease, got {other:?}"),
    }
}

#[test]
fn no_lease_before_a_judge_is_ready() {
    let mut s = scheduler(2, 3);
    let t = Instant::now();
    assert_eq!(s.pull("agent-0", 0, t), Pull::Wait);
    s.pool_mut(Service::Judge)
        .registered("judge-0", "http://j0");
    assert_eq!(s.pull("agent-0", 0, t), Pull::Wait);
    s.pool_mut(Service::Judge).ready("judge-0", true);
    assert_eq!(grant(s.pull("agent-0", 0, t)).judge_url, "http://j0");
}

#[test]
fn judges_are_assigned_by_least_load() {
    let mut s = scheduler(4, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    ready(&mut s, "judge-1", "j1");
    let judges: Vec<String> = (0..4).map(|w| grant(s.pull("a", w, t)).judge).collect();
    assert_eq!(judges, ["judge-0", "judge-1", "judge-0", "judge-1"]);
}

/// A worker's submit for an agent that crashed settles the task with the
/// agent's own end, marked as the worker's, never as `submitted`.
#[test]
fn a_submit_made_for_an_agent_settles_with_the_agents_own_end() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    let worker = Submitter::Worker {
        ended: AttemptOutcome::Crashed,
        starter: true,
    };
    let end = s
        .record(&g.lease_id, ("ok", Some(1.0)), worker, t)
        .unwrap()
        .unwrap();
    assert_eq!(end.outcome, AttemptOutcome::Crashed);
    assert_eq!(end.submitter.map(Submitter::as_str), Some("starter"));
    assert_eq!(end.state, TaskState::Settled("ok".into(), Some(1.0)));
}

#[test]
fn a_task_settles_once() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    let end = s
        .record(&g.lease_id, ("ok", Some(1.1)), Submitter::Agent, t)
        .unwrap()
        .unwrap();
    assert_eq!(end.state, TaskState::Settled("ok".into(), Some(1.1)));
    assert_eq!(s.unreported(), 1, "the agent has yet to report the attempt");
    assert!(
        s.record(&g.lease_id, ("ok", Some(1.1)), Submitter::Agent, t)
            .is_err(),
        "a second verdict is refused"
    );
    assert_eq!(
        s.complete(&g.lease_id, AttemptOutcome::Submitted, t),
        Some(Completion::Settled {
            task: "k0.c.fp64".into(),
            attempt: 1
        }),
        "completing after the settle is bookkeeping"
    );
    assert_eq!(s.unreported(), 0);
    assert!(s.finished());
    assert_eq!(s.pull("a", 0, t), Pull::Done);
}

#[test]
fn expired_leases_requeue_until_attempts_run_out() {
    let mut s = scheduler(1, 2);
    let t0 = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let first = grant(s.pull("a", 0, t0));
    let late = t0 + Duration::from_secs(31);
    let ended = s.expire(late);
    assert_eq!(ended[0].state, TaskState::Pending);
    let second = grant(s.pull("b", 0, late));
    assert_eq!(second.attempt, 2);
    assert!(
        s.record(&first.lease_id, ("ok", None), Submitter::Agent, late)
            .is_err(),
        "a verdict for the expired lease is stale"
    );
    let ended = s.expire(late + Duration::from_secs(31));
    assert!(
        matches!(ended[0].state, TaskState::Failed(ref why) if why.contains("expired on attempt 2 of 2"))
    );
    assert!(s.finished());
}

#[test]
fn heartbeats_renew_leases_and_report_lost_ones() {
    let mut s = scheduler(1, 3);
    let t0 = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t0));
    let lost = s.renew_agent(
        "a",
        &[g.lease_id.clone(), "nope".into()],
        t0 + Duration::from_secs(20),
    );
    assert_eq!(lost, ["nope"]);
    assert!(
        s.expire(t0 + Duration::from_secs(40)).is_empty(),
        "renewed at 20 s, alive until 50 s"
    );
    let lost = s.renew_agent("someone-else", std::slice::from_ref(&g.lease_id), t0);
    assert_eq!(lost, std::slice::from_ref(&g.lease_id));
}

#[test]
fn a_failing_judge_is_set_aside_and_the_lease_moves() {
    let mut s = scheduler(2, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    ready(&mut s, "judge-1", "j1");
    let g = grant(s.pull("a", 0, t));
    assert_eq!(g.judge, "judge-0");
    assert_eq!(
        s.endpoint_failed(Service::Judge, &g.lease_id, "", t),
        Some(Some("j1".to_string()))
    );
    assert_eq!(s.lease(&g.lease_id).unwrap().judge, "judge-1");
    assert_eq!(
        grant(s.pull("a", 1, t)).judge,
        "judge-1",
        "judge-0 gets nothing while set aside"
    );
}

#[test]
fn a_lone_failing_judge_is_waited_for_and_taken_back_once_restarted() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "old");
    let g = grant(s.pull("a", 0, t));
    assert_eq!(
        s.endpoint_failed(Service::Judge, &g.lease_id, "", t),
        Some(None),
        "no other judge"
    );
    let later = t + Duration::from_secs(5);
    assert_eq!(
        s.endpoint_failed(Service::Judge, &g.lease_id, "", later),
        Some(None),
        "a repeated report changes nothing"
    );
    s.pool_mut(Service::Judge).registered("judge-0", "new");
    assert_eq!(
        s.endpoint_for(Service::Judge, &g.lease_id, later),
        Some(None),
        "not ready yet"
    );
    s.pool_mut(Service::Judge).ready("judge-0", true);
    assert_eq!(
        s.endpoint_for(Service::Judge, &g.lease_id, later),
        Some(Some("new".to_string())),
        "registering again clears the set-aside"
    );
}

#[test]
fn a_set_aside_judge_is_usable_again_after_a_while() {
    let mut s = scheduler(2, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    s.endpoint_failed(Service::Judge, &g.lease_id, "", t);
    assert_eq!(s.pull("a", 1, t + Duration::from_secs(1)), Pull::Wait);
    assert_eq!(grant(s.pull("a", 1, t + SET_ASIDE)).judge, "judge-0");
}

#[test]
fn renewals_never_pass_the_task_budget() {
    let mut s = Scheduler::new(
        Settings {
            max_attempts: 3,
            task_budget: Duration::from_secs(40),
            lease_ttl: Duration::from_secs(30),
            needs_inference: false,
        },
        tasks(1),
    );
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    let deadline = s.renew(&g.lease_id, t + Duration::from_secs(25)).unwrap();
    assert_eq!(deadline, t + Duration::from_secs(40));
    let ended = s.expire(t + Duration::from_secs(40));
    assert_eq!(ended[0].outcome, AttemptOutcome::OverBudget);
    assert_eq!(ended[0].outcome.as_str(), "over budget");
    assert!(matches!(ended[0].state, TaskState::Failed(ref why) if why.contains("budget")));
}

#[test]
fn harness_errors_do_not_settle_and_a_finish_without_submit_requeues() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    assert_eq!(
        s.record(&g.lease_id, ("harness_error", None), Submitter::Agent, t),
        Ok(None)
    );
    let Some(Completion::Ended(end)) = s.complete(&g.lease_id, AttemptOutcome::Finished, t) else {
        panic!("the attempt ends")
    };
    assert_eq!(end.state, TaskState::Pending);
    assert_eq!(grant(s.pull("a", 0, t)).attempt, 2);
}

#[test]
fn the_budget_is_shared_across_attempts() {
    let mut s = Scheduler::new(
        Settings {
            max_attempts: 10,
            task_budget: Duration::from_secs(50),
            lease_ttl: Duration::from_secs(30),
            needs_inference: false,
        },
        tasks(1),
    );
    let t0 = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t0));
    s.complete(
        &g.lease_id,
        AttemptOutcome::Error,
        t0 + Duration::from_secs(30),
    );
    let g = grant(s.pull("a", 0, t0 + Duration::from_secs(30)));
    assert_eq!(g.budget_left, Duration::from_secs(20));
    let Some(Completion::Ended(end)) = s.complete(
        &g.lease_id,
        AttemptOutcome::Error,
        t0 + Duration::from_secs(51),
    ) else {
        panic!("the attempt ends")
    };
    assert!(matches!(end.state, TaskState::Failed(ref why) if why.contains("budget")));
}

#[test]
fn resumed_tasks_keep_their_outcome_and_lose_their_leases() {
    let mut all = tasks(4);
    all[0].state = TaskState::Settled("ok".into(), Some(1.0));
    all[1].state = TaskState::Leased("old".into());
    all[1].attempts = 1;
    all[3].state = TaskState::Leased("old".into());
    all[3].attempts = 3;
    let mut s = Scheduler::new(
        Settings {
            max_attempts: 3,
            task_budget: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(30),
            needs_inference: false,
        },
        all,
    );
    assert_eq!(
        s.counts(),
        Counts {
            total: 4,
            pending: 2,
            running: 0,
            settled: 1,
            failed: 1
        },
        "a task interrupted on its last attempt is failed"
    );
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, Instant::now()));
    assert_eq!((g.task.id.as_str(), g.attempt), ("k1.c.fp64", 2));
}

fn llm_scheduler(n: usize) -> Scheduler {
    Scheduler::new(
        Settings {
            max_attempts: 3,
            task_budget: Duration::from_secs(600),
            lease_ttl: Duration::from_secs(30),
            needs_inference: true,
        },
        tasks(n),
    )
}

#[test]
fn llm_agents_wait_for_an_inference_replica_and_spread_over_them() {
    let mut s = llm_scheduler(4);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    assert_eq!(s.pull("a", 0, t), Pull::Wait, "no replica is ready");
    let pool = s.pool_mut(Service::Inference);
    pool.registered("inference-0", "http://i0/v1");
    pool.registered("inference-1", "http://i1/v1");
    pool.ready("inference-0", true);
    pool.ready("inference-1", true);
    let urls: Vec<String> = (0..4)
        .map(|w| grant(s.pull("a", w, t)).inference_url.unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            "http://i0/v1",
            "http://i1/v1",
            "http://i0/v1",
            "http://i1/v1"
        ]
    );
}

#[test]
fn a_dead_replica_loses_its_leases_to_a_live_one() {
    let mut s = llm_scheduler(1);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let pool = s.pool_mut(Service::Inference);
    pool.registered("inference-0", "http://i0/v1");
    pool.registered("inference-1", "http://i1/v1");
    pool.ready("inference-0", true);
    let g = grant(s.pull("a", 0, t));
    assert_eq!(g.inference_url.as_deref(), Some("http://i0/v1"));
    s.pool_mut(Service::Inference).down("inference-0");
    assert_eq!(
        s.endpoint_for(Service::Inference, &g.lease_id, t),
        Some(None),
        "nothing usable yet"
    );
    s.pool_mut(Service::Inference).ready("inference-1", true);
    assert_eq!(
        s.endpoint_for(Service::Inference, &g.lease_id, t),
        Some(Some("http://i1/v1".to_string()))
    );
    assert_eq!(
        s.lease(&g.lease_id).unwrap().inference.as_deref(),
        Some("inference-1")
    );
    assert_eq!(
        s.endpoint_for(Service::Judge, &g.lease_id, t),
        Some(Some("j0".to_string())),
        "the judge stays"
    );
}

#[test]
fn baseline_leases_need_no_replica() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    assert_eq!(g.inference_url, None);
    assert_eq!(
        s.endpoint_for(Service::Inference, &g.lease_id, t),
        Some(None)
    );
}

#[test]
fn a_stale_report_sets_nothing_aside() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "j0");
    let g = grant(s.pull("a", 0, t));
    s.pool_mut(Service::Judge)
        .registered("judge-0", "j0-restarted");
    s.pool_mut(Service::Judge).ready("judge-0", true);
    assert_eq!(
        s.endpoint_failed(Service::Judge, &g.lease_id, "j0", t),
        Some(Some("j0-restarted".to_string())),
        "the report is about the old process: the new one stays usable"
    );
    assert!(s.pool(Service::Judge).usable("judge-0", t));
}

#[test]
fn a_judges_peers_are_the_other_usable_judges() {
    let mut s = scheduler(1, 3);
    let t = Instant::now();
    ready(&mut s, "judge-0", "http://j0");
    ready(&mut s, "judge-1", "http://j1");
    s.pool_mut(Service::Judge)
        .registered("judge-2", "http://j2");
    let pool = s.pool_mut(Service::Judge);
    assert_eq!(
        pool.others("judge-0", t),
        ["http://j1"],
        "judge-2 is not ready yet"
    );
    assert_eq!(pool.others("judge-1", t), ["http://j0"]);
    pool.down("judge-1");
    assert!(pool.others("judge-0", t).is_empty());
}

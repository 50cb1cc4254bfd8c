//! What a run cost: the time its jobs held their allocations, node-hours
//! and GPU-hours of those allocations, and the tokens its agents spent;
//! per task, its attempts' time and tokens, and its share of the run's
//! node-hours and GPU-hours.
//!
//! A task's share ([`SHARE_RULE`]): the run's node-hours (and GPU-hours)
//! apportioned by its attempts' seconds over all attempts' seconds, so
//! the tasks' shares add up to the run's. An attempt counts from its start
//! to its end (one still running counts nothing yet); the time no attempt
//! ran (start-up, the queue's end) is spread over the tasks with the rest.
//!
//! A chain's jobs count from the moment each one's `up` took the run
//! directory to its campaign's end (the queue between them is free); a run
//! without a chain (on this machine) counts its campaign's span. Tokens
//! are what the model's answers stated (an external CLI's counted by its
//! attempt's meter); an external CLI with no model of the campaign's counts
//! what it reported of itself, 0 if nothing, which the report says.

use std::collections::BTreeMap;
use std::path::Path;

use hpcagent_orchestrator::slurm::chain;
use hpcagent_orchestrator::store::{AttemptRow, CampaignRow};
use serde::Serialize;

/// A run's cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Seconds its jobs (or, without a chain, its campaign) ran.
    pub wall_s: f64,
    /// Nodes of its allocation (the plan's), and GPUs per node.
    pub nodes: usize,
    pub gpus_per_node: u32,
    pub node_hours: f64,
    pub gpu_hours: f64,
    pub tokens: u64,
}

/// A task's cost over its attempts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskCost {
    pub attempts_s: f64,
    pub tokens: u64,
    /// Its share of the run's node-hours and GPU-hours ([`SHARE_RULE`]).
    pub node_hours: f64,
    pub gpu_hours: f64,
}

/// How a task's node-hours and GPU-hours are its share of the run's, in
/// the words the report prints.
pub const SHARE_RULE: &str = "A task's node-hours and GPU-hours are its share of the run's: \
     the run's apportioned by the task's attempts' seconds over all attempts' seconds";

impl Cost {
    /// The cost of the run in `run_dir` whose campaign and attempts are given.
    pub fn of(run_dir: &Path, campaign: Option<&CampaignRow>, attempts: &[AttemptRow]) -> Cost {
        let (nodes, gpus_per_node) = crate::identity::read_plan(run_dir)
            .map_or((0, 0), |p| (p.nodes.len(), p.gpus_per_node));
        let spans: Vec<(f64, Option<f64>)> = chain::read(run_dir)
            .into_iter()
            .filter_map(|l| Some((l.started_at?, l.ended_at)))
            .collect();
        let wall_s = wall(&spans, campaign);
        let node_hours = wall_s * nodes as f64 / 3600.0;
        Cost {
            wall_s,
            nodes,
            gpus_per_node,
            node_hours,
            gpu_hours: node_hours * f64::from(gpus_per_node),
            tokens: attempts.iter().map(|a| a.tokens).sum(),
        }
    }
}

/// Seconds the jobs ran: each from its start to its end (one still
/// running, or that died unrecorded, to the campaign's last moment); with
/// no job, the campaign's own span.
fn wall(spans: &[(f64, Option<f64>)], campaign: Option<&CampaignRow>) -> f64 {
    let last = campaign.and_then(|c| c.ended_at);
    if spans.is_empty() {
        return campaign
            .map(|c| last.unwrap_or_else(chain::now) - c.started_at)
            .unwrap_or(0.0)
            .max(0.0);
    }
    spans
        .iter()
        .map(|&(start, end)| {
            let end = end.or(last).unwrap_or_else(chain::now);
            (end - start).max(0.0)
        })
        .sum()
}

/// Each task's attempts' time and tokens, and its share of `run`'s
/// node-hours and GPU-hours ([`SHARE_RULE`]).
pub fn per_task<'a>(attempts: &'a [AttemptRow], run: &Cost) -> BTreeMap<&'a str, TaskCost> {
    let mut costs: BTreeMap<&str, TaskCost> = BTreeMap::new();
    for a in attempts {
        let cost = costs.entry(a.task.as_str()).or_default();
        cost.tokens += a.tokens;
        if let (Some(start), Some(end)) = (a.started_at, a.ended_at) {
            cost.attempts_s += (end - start).max(0.0);
        }
    }
    let all_s: f64 = costs.values().map(|c| c.attempts_s).sum();
    if all_s > 0.0 {
        for cost in costs.values_mut() {
            let share = cost.attempts_s / all_s;
            cost.node_hours = run.node_hours * share;
            cost.gpu_hours = run.gpu_hours * share;
        }
    }
    costs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(started: f64, ended: Option<f64>) -> CampaignRow {
        CampaignRow {
            id: "c".into(),
            state: "finished".into(),
            started_at: started,
            ended_at: ended,
            config: String::new(),
            hpcagent_version: String::new(),
            corpus_version: String::new(),
        }
    }

    #[test]
    fn a_chain_counts_its_jobs_and_not_the_queue_between() {
        let c = campaign(100.0, Some(1000.0));
        // Two jobs of 200 s with 500 s in the queue between them.
        assert_eq!(
            wall(&[(100.0, Some(300.0)), (800.0, Some(1000.0))], Some(&c)),
            400.0
        );
        // A job that died unrecorded counts to the campaign's end.
        assert_eq!(wall(&[(900.0, None)], Some(&c)), 100.0);
        // No chain: the campaign's span.
        assert_eq!(wall(&[], Some(&c)), 900.0);
    }

    #[test]
    fn a_task_costs_its_attempts() {
        let attempt = |task: &str, tokens, span: Option<(f64, f64)>| AttemptRow {
            task: task.into(),
            attempt: 1,
            agent: "agent-0".into(),
            judge: String::new(),
            outcome: "submitted".into(),
            tokens,
            transcript: String::new(),
            message: String::new(),
            started_at: span.map(|s| s.0),
            ended_at: span.map(|s| s.1),
        };
        let attempts = [
            attempt("gemm", 100, Some((0.0, 30.0))),
            attempt("gemm", 50, Some((40.0, 50.0))),
            attempt("atax", 7, None),
            attempt("bicg", 0, Some((10.0, 70.0))),
        ];
        // Two nodes of 4 GPUs for 1.5 h: 3 node-hours, 12 GPU-hours.
        let run = Cost {
            wall_s: 5400.0,
            nodes: 2,
            gpus_per_node: 4,
            node_hours: 3.0,
            gpu_hours: 12.0,
            tokens: 157,
        };
        let costs = per_task(&attempts, &run);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // gemm's attempts ran 30 + 10 = 40 s of the 100 s all ran: 40%,
        // 1.2 node-hours and 4.8 GPU-hours.
        let gemm = &costs["gemm"];
        assert_eq!((gemm.attempts_s, gemm.tokens), (40.0, 150));
        assert!(
            near(gemm.node_hours, 1.2) && near(gemm.gpu_hours, 4.8),
            "{gemm:?}"
        );
        // bicg's 60 s: 60%, 1.8 and 7.2; atax's attempt never ended: nothing.
        let bicg = &costs["bicg"];
        assert!(
            near(bicg.node_hours, 1.8) && near(bicg.gpu_hours, 7.2),
            "{bicg:?}"
        );
        assert_eq!(
            (costs["atax"].attempts_s, costs["atax"].node_hours),
            (0.0, 0.0)
        );
        // The shares add up to the run's.
        let total: f64 = costs.values().map(|c| c.node_hours).sum();
        assert!(near(total, run.node_hours), "{total}");
        // No attempt has ended: no task has a share.
        let costs = per_task(&attempts[2..3], &run);
        assert_eq!(costs["atax"].node_hours, 0.0);
    }
}

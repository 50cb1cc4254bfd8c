//! Where the supervisor works: on its own CPUs while a runner runs (no
//! thread of the runner's ever shares them), on the runner's first CPU
//! while every runner is held. A call's inputs are then written, and its
//! outputs read, in the caches of the core the call runs on: written from
//! the supervisor's own core instead, gemm at S (290 KB of arrays) took
//! 70 µs more a call, all of it fetching them across cores, which a
//! faster kernel pays as much of as a slower one.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

pub(super) struct Cpus {
    own: CpuSet,
    /// The runner's first CPU, where it is not one of the supervisor's.
    runner: Option<CpuSet>,
}

impl Cpus {
    /// The supervisor's CPUs as the judge set them, and the runners'.
    pub(super) fn new(runner_cpus: &[usize]) -> Cpus {
        let own = sched_getaffinity(Pid::from_raw(0)).unwrap_or_else(|_| CpuSet::new());
        let runner = runner_cpus
            .first()
            .filter(|&&cpu| !own.is_set(cpu).unwrap_or(true))
            .and_then(|&cpu| {
                let mut set = CpuSet::new();
                set.set(cpu).ok()?;
                Some(set)
            });
        Cpus { own, runner }
    }

    /// On the runner's CPU: every runner is held.
    pub(super) fn beside_held(&self) {
        if let Some(runner) = &self.runner {
            let _ = sched_setaffinity(Pid::from_raw(0), runner);
        }
    }

    /// Back on its own CPUs: a runner is about to run.
    pub(super) fn apart(&self) {
        if self.runner.is_some() {
            let _ = sched_setaffinity(Pid::from_raw(0), &self.own);
        }
    }
}

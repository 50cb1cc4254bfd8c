//! Where the supervisor works: on its own CPUs while a runner runs (no
//! thread of the runner's ever shares them), on the runner's first CPU
//! while every runner is held. A call's inputs are then written, and its
//! outputs read, in the caches of the core the call runs on: written from
//! the supervisor's own core instead, gemm at S (290 KB of arrays) took
//! 70 µs more a call, all of it fetching them across cores, which a
//! faster kernel pays as much of as a slower one.
//!
//! Each move is a migration of the supervisor's thread (60–140 µs on this
//! project's virtual machines, four a pair: half a pair's time for gemm at
//! S). Staying on the runner's CPU for the whole run, asleep while the
//! runner ran, halved a pair's time on a quiet machine and took the floor
//! from 35–45 µs to 13–17 µs, but in `examples/local.env` (two judges
//! timing on the same CPU, one after the other, beside the other's checks)
//! identical code read 1.057x and 0.925x: a supervisor asleep on a shared
//! CPU is woken after whatever else runs there, and that wait is timed.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

pub(super) struct Cpus {
    own: CpuSet,
    /// The runner's first CPU, where it is not one of the supervisor's.
    runner: Option<CpuSet>,
    /// The runners' CPUs, then the supervisor's own.
    every: Vec<usize>,
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
        let own_only = (0..CpuSet::count())
            .filter(|&cpu| own.is_set(cpu).unwrap_or(false) && !runner_cpus.contains(&cpu));
        let every = runner_cpus.iter().copied().chain(own_only).collect();
        Cpus { own, runner, every }
    }

    /// The runners' CPUs, then the supervisor's own: all the CPUs a run
    /// may work on while its runners are held.
    pub(super) fn every(&self) -> &[usize] {
        &self.every
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

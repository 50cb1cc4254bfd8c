//! Grading slots: how many grades run at once, and on which cores and GPUs.
//!
//! The judge's CPUs (its affinity mask, i.e. what Slurm gave the step) are
//! split evenly among the slots and each run is pinned to its slot's share, so
//! concurrent grades do not time each other. A run's supervisor works on a
//! CPU its runners never use: the slot's first when the slot has two or
//! more, else another of the judge's (only a judge of one CPU shares it).
//! On GPU nodes there is one slot per GPU. A grade's build, baseline and
//! timed runs all hold one slot; requests beyond the slots queue.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One slot's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub index: usize,
    /// Its share of the judge's CPUs (a build uses them all).
    pub cpus: Vec<usize>,
    /// Where a run's supervisor works.
    pub supervisor: usize,
    pub gpu: Option<u32>,
}

impl Slot {
    /// The CPUs a run's runners use: the slot's, but the supervisor's.
    pub fn runner_cpus(&self) -> Vec<usize> {
        let rest: Vec<usize> = self
            .cpus
            .iter()
            .copied()
            .filter(|&c| c != self.supervisor)
            .collect();
        if rest.is_empty() {
            self.cpus.clone()
        } else {
            rest
        }
    }
}

/// The pool of slots.
#[derive(Debug, Clone)]
pub struct Slots {
    free: Arc<Mutex<Vec<Slot>>>,
    permits: Arc<Semaphore>,
    count: usize,
    /// CPUs a run's runners have in each slot (the slots are alike).
    runner_cpus: usize,
}

/// A slot held by a grade; returned to the pool when dropped.
pub struct Held {
    pub slot: Slot,
    pool: Arc<Mutex<Vec<Slot>>>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.pool.lock().expect("slot pool").push(self.slot.clone());
    }
}

impl Slots {
    /// `count` slots over `cpus`, one GPU each when `gpus` has any.
    pub fn new(count: usize, cpus: &[usize], gpus: &[u32]) -> Slots {
        let count = count.max(1);
        let share = (cpus.len() / count).max(1);
        let slots: Vec<Slot> = (0..count)
            .map(|i| {
                // More slots than CPUs (many GPUs, few cores): slots share cores.
                let mine: Vec<usize> = (0..share)
                    .filter_map(|k| cpus.get((i * share + k) % cpus.len().max(1)).copied())
                    .collect();
                Slot {
                    index: i,
                    supervisor: supervisor_cpu(&mine, cpus),
                    cpus: mine,
                    gpu: gpus.get(i).copied(),
                }
            })
            .collect();
        Slots {
            runner_cpus: slots.first().map_or(1, |s| s.runner_cpus().len()),
            free: Arc::new(Mutex::new(slots.into_iter().rev().collect())),
            permits: Arc::new(Semaphore::new(count)),
            count,
        }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// CPUs a run's runners have in a slot.
    pub fn runner_cpus(&self) -> usize {
        self.runner_cpus
    }

    /// Whether no grade holds a slot (none waits for one either, since a
    /// waiting grade takes a freed slot at once).
    pub fn all_free(&self) -> bool {
        self.permits.available_permits() == self.count
    }

    /// Waits for a free slot.
    pub async fn acquire(&self) -> Held {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closes");
        let slot = self
            .free
            .lock()
            .expect("slot pool")
            .pop()
            .expect("a permit means a free slot");
        Held {
            slot,
            pool: self.free.clone(),
            _permit: permit,
        }
    }
}

/// Where the supervisor of a slot on `mine` works: the slot's first CPU
/// when it has others for its runners, else the judge's next CPU after it.
fn supervisor_cpu(mine: &[usize], all: &[usize]) -> usize {
    let first = mine.first().copied().unwrap_or(0);
    if mine.len() > 1 {
        return first;
    }
    let at = all.iter().position(|&c| c == first).unwrap_or(0);
    all.get((at + 1) % all.len().max(1))
        .copied()
        .unwrap_or(first)
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map(|set| {
            (0..nix::sched::CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .collect()
        })
        .unwrap_or_else(|_| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_split_evenly() {
        let slots = Slots::new(2, &[0, 1, 2, 3, 4], &[]);
        let a = slots.free.lock().unwrap().clone();
        assert_eq!(
            a.iter().map(|s| s.cpus.clone()).collect::<Vec<_>>(),
            [vec![2, 3], vec![0, 1]]
        );
    }

    #[test]
    fn a_supervisor_never_works_on_its_own_runners_cpus() {
        let one = |count, cpus: &[usize]| {
            let slots = Slots::new(count, cpus, &[]);
            let all = slots.free.lock().unwrap().clone();
            all.into_iter()
                .map(|s| (s.supervisor, s.runner_cpus()))
                .collect::<Vec<_>>()
        };
        assert_eq!(one(1, &[0, 1]), [(0, vec![1])]);
        assert_eq!(one(2, &[0, 1, 2, 3]), [(2, vec![3]), (0, vec![1])]);
        // A slot of one CPU borrows the next for its supervisor.
        assert_eq!(one(2, &[4, 7]), [(4, vec![7]), (7, vec![4])]);
        // A judge of one CPU cannot keep them apart.
        assert_eq!(one(1, &[3]), [(3, vec![3])]);
    }

    #[test]
    fn more_slots_than_cpus_share_cores() {
        let slots = Slots::new(4, &[0, 1], &[0, 1, 2, 3]);
        let all = slots.free.lock().unwrap().clone();
        assert!(
            all.iter().all(|s| s.cpus.len() == 1 && s.gpu.is_some()),
            "{all:?}"
        );
    }

    #[tokio::test]
    async fn requests_queue_for_a_slot() {
        let slots = Slots::new(1, &[0], &[]);
        let held = slots.acquire().await;
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(50), slots.acquire()).await;
        assert!(
            waiting.is_err(),
            "a second grade waits while the only slot is held"
        );
        drop(held);
        let again =
            tokio::time::timeout(std::time::Duration::from_millis(50), slots.acquire()).await;
        assert_eq!(again.unwrap().slot.index, 0);
    }

    #[tokio::test]
    async fn all_free_until_a_grade_holds_any_slot() {
        let slots = Slots::new(2, &[0, 1], &[]);
        assert!(slots.all_free());
        let held = slots.acquire().await;
        assert!(!slots.all_free());
        drop(held);
        assert!(slots.all_free());
    }
}

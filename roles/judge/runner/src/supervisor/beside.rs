//! Where the supervisor's work between calls runs: on a thread of its own
//! pinned to the runner's first CPU, while the supervisor's main thread
//! stays on its own CPUs (no thread of the runner's ever shares them) and
//! times the calls from there.
//!
//! A call's inputs are written, and its outputs read, in the caches of the
//! core the call runs on: written from the supervisor's own core instead,
//! gemm at S (290 KB of arrays) took 70 µs more a call, all of it fetching
//! them across cores, which a faster kernel pays as much of as a slower one.
//!
//! The supervisor used to move itself there between calls and back before
//! each (`sched_setaffinity`). Each move is a migration of its thread:
//! 25–140 µs on this project's virtual machines, four a pair, a quarter of
//! a pair's time for gemm at S. Handing the work to a thread already there
//! costs a wakeup (a few µs). That thread sleeps in a futex whenever it has
//! no work, so it never runs beside a call on the runner's CPU; the main
//! thread waits for it spinning on its own CPU, as it waits for a call.
//! Staying on the runner's CPU instead, asleep while the runner ran, was
//! tried: a supervisor asleep on a shared CPU is woken after whatever else
//! runs there, and that wait was timed (identical code 1.057x and 0.925x in
//! `examples/local.env`). Here nothing timed waits for a wakeup.
//!
//! A general pool (rayon) would not do: its idle workers spin and yield
//! before they sleep, and on the runner's CPU that is time taken from the
//! call that starts right after.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The supervisor's hands on the runner's CPU.
pub(super) struct Beside {
    helper: Option<Helper>,
}

struct Helper {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    slot: Mutex<Slot>,
    posted: Condvar,
    done: AtomicBool,
}

enum Slot {
    Empty,
    Job(Erased),
    Quit,
}

/// A job borrowed from [`Beside::run`]'s caller, its lifetime erased.
struct Erased(*mut (dyn FnMut() + 'static));

// SAFETY: the job is called on the helper while its owner, the thread in
// `Beside::post`, waits and touches nothing: the job runs as if on it.
unsafe impl Send for Erased {}

impl Beside {
    /// A helper on the runners' first CPU, where that CPU is not one of
    /// this thread's; otherwise none, and jobs run where they are asked.
    pub(super) fn new(runner_cpus: &[usize]) -> Beside {
        let own = sched_getaffinity(Pid::from_raw(0)).unwrap_or_else(|_| CpuSet::new());
        let runner = runner_cpus
            .first()
            .filter(|&&cpu| !own.is_set(cpu).unwrap_or(true))
            .and_then(|&cpu| {
                let mut set = CpuSet::new();
                set.set(cpu).ok()?;
                Some(set)
            });
        Beside {
            helper: runner.and_then(Helper::start),
        }
    }

    /// Runs `job` on the runner's CPU and returns what it returned; the
    /// caller waits for it. A panic in it is the caller's.
    pub(super) fn run<R>(&self, job: impl FnOnce() -> R) -> R {
        let Some(helper) = &self.helper else {
            return job();
        };
        let mut out = None;
        {
            let mut job = Some(job);
            let mut once = || {
                if let Some(job) = job.take() {
                    out = Some(catch_unwind(AssertUnwindSafe(job)));
                }
            };
            helper.post(&mut once);
        }
        match out.expect("the helper ran the job") {
            Ok(value) => value,
            Err(panic) => resume_unwind(panic),
        }
    }
}

impl Helper {
    fn start(cpu: CpuSet) -> Option<Helper> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot::Empty),
            posted: Condvar::new(),
            done: AtomicBool::new(false),
        });
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("beside".into())
            .spawn(move || {
                let _ = sched_setaffinity(Pid::from_raw(0), &cpu);
                serve(&serving);
            })
            .ok()?;
        Some(Helper {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands `job` to the helper and waits, spinning, until it has run.
    fn post(&self, job: &mut dyn FnMut()) {
        // SAFETY: only the borrow's lifetime changes. The helper calls the
        // job before it sets `done`, and this function returns (ending the
        // borrow) only after `done`.
        let erased = unsafe {
            std::mem::transmute::<*mut (dyn FnMut() + '_), *mut (dyn FnMut() + 'static)>(job)
        };
        self.shared.done.store(false, Ordering::Relaxed);
        *self.shared.slot.lock().expect("the helper's slot") = Slot::Job(Erased(erased));
        self.shared.posted.notify_one();
        while !self.shared.done.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        *self.shared.slot.lock().expect("the helper's slot") = Slot::Quit;
        self.shared.posted.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The helper's life: asleep until a job is posted, the job, then asleep.
fn serve(shared: &Shared) {
    let mut slot = shared.slot.lock().expect("the helper's slot");
    loop {
        match std::mem::replace(&mut *slot, Slot::Empty) {
            Slot::Empty => slot = shared.posted.wait(slot).expect("the helper's slot"),
            Slot::Quit => return,
            Slot::Job(Erased(job)) => {
                drop(slot);
                // SAFETY: the poster waits in `post` until `done`, so what
                // the job borrows is alive and nobody else touches it; the
                // job catches its own panics.
                unsafe { (*job)() };
                shared.done.store(true, Ordering::Release);
                slot = shared.slot.lock().expect("the helper's slot");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu_of_this_thread() -> i32 {
        // SAFETY: no arguments.
        unsafe { libc::sched_getcpu() }
    }

    /// `test` on a thread of CPU 0, given a `Beside` of CPU 1; nothing on
    /// a machine of one CPU, where there is no other to be beside.
    fn on_cpu_0(test: impl FnOnce(Beside) + Send + 'static) {
        if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
            return;
        }
        std::thread::spawn(|| {
            let mut own = CpuSet::new();
            own.set(0).unwrap();
            sched_setaffinity(Pid::from_raw(0), &own).unwrap();
            let beside = Beside::new(&[1]);
            assert!(beside.helper.is_some(), "CPU 1 is not the caller's");
            test(beside);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_job_borrows_the_callers_data_and_returns_its_value() {
        on_cpu_0(|beside| {
            let mut seen = vec![1, 2, 3];
            let total = beside.run(|| {
                seen.push(4);
                seen.iter().sum::<i32>()
            });
            assert_eq!(total, 10);
            assert_eq!(seen, [1, 2, 3, 4]);
        });
    }

    #[test]
    fn jobs_run_on_the_runners_cpu_while_the_caller_keeps_its_own() {
        on_cpu_0(|beside| {
            for _ in 0..50 {
                assert_eq!(beside.run(cpu_of_this_thread), 1);
                assert_eq!(cpu_of_this_thread(), 0);
            }
        });
    }

    #[test]
    fn a_panic_in_a_job_is_the_callers_and_the_helper_serves_on() {
        on_cpu_0(|beside| {
            let caught = catch_unwind(AssertUnwindSafe(|| beside.run(|| panic!("in the job"))));
            assert!(caught.is_err());
            assert_eq!(beside.run(|| 5), 5);
        });
    }

    #[test]
    fn a_runner_cpu_that_is_the_callers_own_gets_no_helper() {
        let own = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let mine = (0..CpuSet::count())
            .find(|&c| own.is_set(c).unwrap())
            .unwrap();
        let beside = Beside::new(&[mine]);
        assert!(beside.helper.is_none());
        assert_eq!(beside.run(|| 7), 7);
    }
}

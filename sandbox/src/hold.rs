//! Holding a process stopped from outside, in a way it cannot undo.
//!
//! A process stopped by `SIGSTOP` runs again on any `SIGCONT`, and the
//! kernel sends one on the process's own behalf when it asks for it: a
//! POSIX timer whose signal is `SIGCONT`, a descriptor with `O_ASYNC` and
//! `F_SETSIG(SIGCONT)` that whoever writes to it wakes. A stopped runner
//! could so continue itself and compute while its supervisor prepares the
//! next call with no clock running.
//!
//! A thread in a ptrace-stop runs again only when its tracer continues it:
//! `SIGCONT` does not end that stop (the kernel only notes it for the
//! tracer). So a [`Hold`] seizes a process (`PTRACE_SEIZE`, with every
//! thread it starts seized too, and the process killed should the tracer
//! die), stops it by interrupting each thread (`PTRACE_INTERRUPT`) and
//! continues it by continuing each. While its threads run, the holder
//! services what they report ([`Hold::service`]): a new thread, a signal on
//! its way (delivered, except the stop signals, which would make the
//! kernel's group stop the process instead), an exit.
//!
//! Where ptrace is refused (Yama's `ptrace_scope` 3, a security module),
//! [`Hold::signals`] stops and continues with `SIGSTOP` and `SIGCONT`,
//! which the process can undo; whoever chooses it says so.
//!
//! Events reach the holder as `SIGCHLD` on a [`ChildSignals`] descriptor:
//! the holder waits on it with a deadline, never in a `waitpid` that a
//! process could keep from returning.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Why a hold ended or could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("ptrace refused: {0}")]
    Seize(std::io::Error),
    #[error("signalfd: {0}")]
    SignalFd(std::io::Error),
}

/// How a held process stopped being held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// It ended: its wait status (as `waitpid` gives it).
    Ended(i32),
    /// It did not stop (or end) within the deadline.
    TimedOut,
}

/// How long a waiter for something a held process does looks for it
/// without sleeping, before it waits.
pub const SPIN: Duration = Duration::from_millis(1);

/// How long a wait for a child's event goes before the waiter looks again.
pub const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// A wait's deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passed;

/// `SIGCHLD` as a descriptor: the events of this process's children and
/// tracees. Blocks `SIGCHLD` in the calling thread; make it before this
/// process starts threads, which then inherit the mask (a process-directed
/// `SIGCHLD` must find every thread blocking it to stay for the descriptor).
pub struct ChildSignals(OwnedFd);

impl ChildSignals {
    pub fn new() -> Result<ChildSignals, HoldError> {
        // SAFETY: sigset operations on a stack value, then sigprocmask and
        // signalfd with it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(HoldError::SignalFd(std::io::Error::last_os_error()));
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(HoldError::SignalFd(std::io::Error::last_os_error()));
            }
            Ok(ChildSignals(OwnedFd::from_raw_fd(fd)))
        }
    }

    /// Waits until `fd` is readable (`Ok(true)`), a child event may have
    /// arrived (`Ok(false)`: the pending signals consumed first, so that an
    /// event after the caller's look wakes the next wait), or `deadline`
    /// passes (`Err(Passed)`). It also says `Ok(false)` every [`LOOK_AGAIN`],
    /// so that a `SIGCHLD` taken by a thread that did not block it (one
    /// started before this descriptor was made) costs that much, not the
    /// deadline.
    pub fn wait(&self, fd: Option<RawFd>, deadline: Instant) -> Result<bool, Passed> {
        loop {
            let mut polls = [
                libc::pollfd {
                    fd: self.0.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: fd.unwrap_or(-1),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let left = deadline
                .saturating_duration_since(Instant::now())
                .min(LOOK_AGAIN);
            // Rounded up: a timeout that fell short of its millisecond
            // would only come back here.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: two pollfds on the stack; a negative fd is skipped.
            let r = unsafe { libc::poll(polls.as_mut_ptr(), 2, ms) };
            if r < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Passed);
            }
            if polls[1].revents != 0 {
                return Ok(true);
            }
            if polls[0].revents != 0 {
                self.drain();
                return Ok(false);
            }
            if Instant::now() >= deadline {
                return Err(Passed);
            }
            return Ok(false);
        }
    }

    /// Whether a child event came since the last look (consumed), without
    /// waiting.
    pub fn pending(&self) -> bool {
        let mut info = std::mem::MaybeUninit::<libc::signalfd_siginfo>::uninit();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reads one siginfo record into a buffer of that size.
        let got = unsafe { libc::read(self.0.as_raw_fd(), info.as_mut_ptr().cast(), size) };
        if got == size as isize {
            self.drain();
            return true;
        }
        false
    }

    fn drain(&self) {
        let mut info = std::mem::MaybeUninit::<libc::signalfd_siginfo>::uninit();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reads whole siginfo records into a buffer of that size.
        while unsafe { libc::read(self.0.as_raw_fd(), info.as_mut_ptr().cast(), size) }
            == size as isize
        {}
    }
}

/// What one thread is doing, as its holder knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Thread {
    /// Running (or on its way to a stop the holder has not seen yet).
    Running,
    /// In a ptrace-stop; `signal` is delivered when it is continued.
    Stopped { signal: i32 },
}

/// A process held by this one: its tracer, or where ptrace is refused,
/// its stopper by signals.
pub struct Hold {
    leader: libc::pid_t,
    /// Its threads (ptrace), or none (signals).
    threads: BTreeMap<libc::pid_t, Thread>,
    traced: bool,
    /// How it ended, once reaped.
    ended: Option<i32>,
    /// The last memory fault on its way to a thread of it (ptrace).
    fault: Option<Fault>,
}

/// A memory fault (`SIGSEGV`, `SIGBUS`) a thread of a traced process met:
/// the signal, and the address it faulted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub signal: i32,
    pub address: u64,
}

/// Stop signals: delivered to a seized thread they would start a group
/// stop, whose continuation is the process's business again.
const STOP_SIGNALS: [i32; 4] = [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

impl Hold {
    /// Seizes `pid`, a child of this process with one thread (just
    /// started) that leads a process group of its own (as the leader of its
    /// own session does). It keeps running; every thread it starts is
    /// seized at birth, and it is killed should this process die.
    pub fn seize(pid: libc::pid_t) -> Result<Hold, HoldError> {
        let options = libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_EXITKILL;
        // SAFETY: ptrace on a child of ours; no pointers.
        let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options as libc::c_long) };
        if r != 0 {
            return Err(HoldError::Seize(std::io::Error::last_os_error()));
        }
        Ok(Hold {
            leader: pid,
            threads: BTreeMap::from([(pid, Thread::Running)]),
            traced: true,
            ended: None,
            fault: None,
        })
    }

    /// Holds `pid` with `SIGSTOP` and `SIGCONT` only, which it can undo.
    pub fn signals(pid: libc::pid_t) -> Hold {
        Hold {
            leader: pid,
            threads: BTreeMap::new(),
            traced: false,
            ended: None,
            fault: None,
        }
    }

    /// Whether its stops are ptrace-stops (it cannot end them).
    pub fn traced(&self) -> bool {
        self.traced
    }

    /// How it ended, once it has.
    pub fn ended(&self) -> Option<i32> {
        self.ended
    }

    /// The last memory fault delivered to it, where it is traced: a
    /// process killed by `SIGSEGV` died of this one (it may have handled
    /// earlier ones).
    pub fn fault(&self) -> Option<Fault> {
        self.fault
    }

    /// Its threads known now (one for a hold by signals).
    pub fn thread_count(&self) -> usize {
        self.threads.len().max(1)
    }

    /// Stops every thread and waits until each is stopped, within
    /// `within`; a thread it starts meanwhile is stopped at birth.
    pub fn stop(&mut self, events: &ChildSignals, within: Duration) -> Result<(), Lost> {
        let deadline = Instant::now() + within;
        if !self.traced {
            return self.stop_by_signal(events, deadline);
        }
        for (&tid, thread) in &self.threads {
            if *thread == Thread::Running {
                // SAFETY: ptrace on a tracee of ours; ESRCH (gone) shows as its exit.
                unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
            }
        }
        // Looked for without sleeping at first: a stop takes microseconds,
        // and a sleeping waiter's CPU goes idle, which in a virtual machine
        // costs tens of microseconds to wake from (the stop is timed).
        let spin_until = Instant::now() + SPIN;
        loop {
            self.collect(false);
            if let Some(status) = self.ended {
                return Err(Lost::Ended(status));
            }
            if self.threads.values().all(|t| *t != Thread::Running) {
                return Ok(());
            }
            if Instant::now() < spin_until.min(deadline) {
                std::hint::spin_loop();
            } else if events.wait(None, deadline).is_err() {
                return Err(Lost::TimedOut);
            }
        }
    }

    /// Continues every thread, the first (which makes the calls) last, each
    /// with the signal it was stopped for.
    pub fn resume(&mut self) {
        if !self.traced {
            signal(self.leader, libc::SIGCONT);
            return;
        }
        let order = self
            .threads
            .keys()
            .copied()
            .filter(|&tid| tid != self.leader)
            .chain(std::iter::once(self.leader))
            .collect::<Vec<_>>();
        for tid in order {
            if let Some(Thread::Stopped { signal }) = self.threads.get(&tid).copied() {
                cont(tid, signal);
                self.threads.insert(tid, Thread::Running);
            }
        }
    }

    /// Handles what its running threads reported (new threads, signals,
    /// exits) without waiting; how it ended, once it has.
    pub fn service(&mut self) -> Option<i32> {
        if self.traced {
            self.collect(true);
        } else if self.ended.is_none() {
            let mut status = 0;
            // SAFETY: waits for our own child without blocking.
            if unsafe { libc::waitpid(self.leader, &mut status, libc::WNOHANG) } == self.leader {
                self.ended = Some(status);
            }
        }
        self.ended
    }

    /// Kills the process and reaps every thread of it; how it ended.
    pub fn kill(&mut self) -> i32 {
        if let Some(status) = self.ended {
            return status;
        }
        signal(self.leader, libc::SIGKILL);
        // A traced thread is its tracer's to reap (a thread it had not
        // heard of yet too), and the first thread is reaped last.
        while let Some((tid, status)) = self.next_event(0) {
            if tid == self.leader {
                self.ended = Some(status);
            }
        }
        self.threads.clear();
        // Reaped earlier, or by another wait: still it ended by our kill.
        *self.ended.get_or_insert(libc::SIGKILL)
    }

    /// Reads every event its threads have reported; with `running`, a
    /// thread that stopped for anything but its exit is continued (it is
    /// meant to run), else left stopped.
    fn collect(&mut self, running: bool) {
        while let Some((tid, status)) = self.next_event(libc::WNOHANG) {
            self.event(tid, status, running);
        }
    }

    /// The next event of any of its threads, those not known yet included.
    /// They are all of the process group the process leads (it started in
    /// a session of its own, which it cannot leave), and no other child of
    /// this process's is. Until the process has made its session (just
    /// started), its known threads are asked one by one.
    fn next_event(&self, flags: i32) -> Option<(libc::pid_t, i32)> {
        let mut status = 0;
        // SAFETY: waits for a tracee or child of ours in the process's group.
        let r = unsafe { libc::waitpid(-self.leader, &mut status, flags | libc::__WALL) };
        if r > 0 {
            return Some((r, status));
        }
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD) {
            return None;
        }
        self.threads.keys().find_map(|&tid| {
            // SAFETY: waits for a tracee of ours.
            let r =
                unsafe { libc::waitpid(tid, &mut status, flags | libc::WNOHANG | libc::__WALL) };
            (r == tid).then_some((tid, status))
        })
    }

    fn event(&mut self, tid: libc::pid_t, status: i32, running: bool) {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            self.threads.remove(&tid);
            if tid == self.leader {
                self.ended = Some(status);
            }
            return;
        }
        if !libc::WIFSTOPPED(status) {
            return;
        }
        let event = status >> 16;
        let mut signal = 0;
        if event == libc::PTRACE_EVENT_CLONE {
            let mut new: libc::c_ulong = 0;
            // SAFETY: reads the new thread's id into a stack value.
            let r = unsafe {
                libc::ptrace(
                    libc::PTRACE_GETEVENTMSG,
                    tid,
                    0,
                    &mut new as *mut libc::c_ulong,
                )
            };
            if r == 0 {
                // It starts in a stop of its own, which it reports.
                self.threads
                    .entry(new as libc::pid_t)
                    .or_insert(Thread::Running);
            }
        } else if event == 0 {
            // A signal on its way to the thread: delivered when continued.
            let sig = libc::WSTOPSIG(status);
            if !STOP_SIGNALS.contains(&sig) {
                signal = sig;
            }
            if sig == libc::SIGSEGV || sig == libc::SIGBUS {
                self.fault = fault_of(tid, sig).or(self.fault);
            }
        }
        // Anything else (PTRACE_EVENT_STOP: an interrupt, a new thread's
        // first stop) is a stop with nothing to deliver.
        if running {
            cont(tid, signal);
            self.threads.insert(tid, Thread::Running);
        } else {
            self.threads.insert(tid, Thread::Stopped { signal });
        }
    }

    fn stop_by_signal(&mut self, events: &ChildSignals, deadline: Instant) -> Result<(), Lost> {
        signal(self.leader, libc::SIGSTOP);
        loop {
            let mut status = 0;
            // SAFETY: waits for our own child without blocking.
            let r =
                unsafe { libc::waitpid(self.leader, &mut status, libc::WUNTRACED | libc::WNOHANG) };
            if r == self.leader {
                if libc::WIFSTOPPED(status) {
                    return Ok(());
                }
                self.ended = Some(status);
                return Err(Lost::Ended(status));
            }
            if events.wait(None, deadline).is_err() {
                return Err(Lost::TimedOut);
            }
        }
    }
}

/// The fault `signal` on its way to the stopped tracee `tid`, from its
/// signal information.
fn fault_of(tid: libc::pid_t, signal: i32) -> Option<Fault> {
    // SAFETY: a zeroed siginfo_t is a valid value to be overwritten.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: ptrace writes the tracee's siginfo into a stack value of its size.
    let r = unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, tid, 0, &mut info) };
    // Only the kernel's own (a positive code): a signal a process sends
    // itself carries no address.
    if r != 0 || info.si_code <= 0 {
        return None;
    }
    // SAFETY: for a fault's SIGSEGV and SIGBUS the union holds its address.
    let address = unsafe { info.si_addr() } as u64;
    Some(Fault { signal, address })
}

fn cont(tid: libc::pid_t, signal: i32) {
    // SAFETY: ptrace on a tracee of ours; ESRCH (gone) shows as its exit.
    unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, signal as libc::c_long) };
}

fn signal(pid: libc::pid_t, signal: i32) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, signal) };
}

/// Whether this process may hold its children here: it starts one that
/// waits, seizes it, stops it and kills it. Blocks `SIGCHLD` for the
/// calling thread; call it in a process of its own (`hpcagent judge exec
/// --probe`).
pub fn probe() -> Result<(), HoldError> {
    let events = ChildSignals::new()?;
    // SAFETY: the child makes its session and waits to be killed (raw
    // calls only).
    let pid = match unsafe { libc::fork() } {
        -1 => return Err(HoldError::Seize(std::io::Error::last_os_error())),
        0 => {
            // SAFETY: setsid and pause in the forked child.
            unsafe { libc::setsid() };
            loop {
                // SAFETY: as above.
                unsafe { libc::pause() };
            }
        }
        pid => pid,
    };
    // Held once it leads its own group, as a runner does.
    // SAFETY: getpgid on our child.
    while unsafe { libc::getpgid(pid) } != pid {
        std::thread::yield_now();
    }
    let held = Hold::seize(pid).and_then(|mut hold| {
        let stopped = hold.stop(&events, Duration::from_secs(5));
        hold.kill();
        stopped.map_err(|lost| {
            HoldError::Seize(std::io::Error::other(format!(
                "a seized child did not stop: {lost:?}"
            )))
        })
    });
    if held.is_err() {
        signal(pid, libc::SIGKILL);
        // SAFETY: reaps the child forked above.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The child's timer, which its SIGCONT handler arms again.
    static TIMER: AtomicU64 = AtomicU64::new(0);

    /// Arms the child's timer to fire (SIGCONT) in 2 ms.
    extern "C" fn arm(_: libc::c_int) {
        let soon = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: 0,
                tv_nsec: 2_000_000,
            },
        };
        let timer = TIMER.load(Ordering::Relaxed) as libc::timer_t;
        // SAFETY: timer_settime is async-signal-safe.
        unsafe { libc::timer_settime(timer, 0, &soon, std::ptr::null_mut()) };
    }

    /// Whether this process has a tracer.
    fn traced() -> bool {
        std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
        })
    }

    /// Kills the child when the test ends, however it ends.
    struct Killed(libc::pid_t);

    impl Drop for Killed {
        fn drop(&mut self) {
            signal(self.0, libc::SIGKILL);
        }
    }

    /// A child that counts in shared memory on `threads` threads, and has
    /// the kernel continue it 2 ms after every time it was continued (a
    /// POSIX timer whose signal is SIGCONT, armed again by its handler:
    /// a stop cannot flush a timer that has not fired): what a runner may
    /// try without its filter. With `seized`, it starts its threads once
    /// it has a tracer.
    fn counting_child(threads: usize, seized: bool) -> (libc::pid_t, &'static AtomicU64) {
        // SAFETY: an anonymous shared mapping of one page, never unmapped.
        let counter = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            &*(p as *const AtomicU64)
        };
        // SAFETY: the forked child sets itself up with raw calls, starts
        // threads (fresh in its own process) and counts until killed.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: setsid, sigprocmask, signal and timer_create on
                // stack values.
                unsafe {
                    libc::setsid();
                    let mut none: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut none);
                    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                    let mut event: libc::sigevent = std::mem::zeroed();
                    event.sigev_notify = libc::SIGEV_SIGNAL;
                    event.sigev_signo = libc::SIGCONT;
                    let mut timer: libc::timer_t = std::mem::zeroed();
                    libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer);
                    TIMER.store(timer as u64, Ordering::Relaxed);
                    libc::signal(libc::SIGCONT, arm as *const () as libc::sighandler_t);
                    arm(0);
                }
                // Its threads come once it is seized, as a runner's do.
                while seized && !traced() {
                    std::thread::yield_now();
                }
                for _ in 1..threads {
                    std::thread::spawn(move || {
                        loop {
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
                loop {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
            pid => {
                // SAFETY: getpgid on our child.
                while unsafe { libc::getpgid(pid) } != pid {
                    std::thread::yield_now();
                }
                (pid, counter)
            }
        }
    }

    #[test]
    fn a_held_process_does_not_run_until_resumed_whatever_continues_it() {
        let events = ChildSignals::new().unwrap();
        let (pid, counter) = counting_child(3, true);
        let _killed = Killed(pid);
        let mut hold = Hold::seize(pid).unwrap();
        // Its threads start while it is serviced.
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(1));
            assert!(hold.service().is_none());
        }
        for round in 0..3 {
            hold.stop(&events, Duration::from_secs(5)).unwrap();
            assert_eq!(hold.thread_count(), 3, "its threads, seized at birth");
            let before = counter.load(Ordering::Relaxed);
            // Its own timer continues it every millisecond, and so do we.
            signal(pid, libc::SIGCONT);
            std::thread::sleep(Duration::from_millis(30));
            let after = counter.load(Ordering::Relaxed);
            assert_eq!(before, after, "round {round}: it ran while held");
            hold.resume();
            // Serviced as it runs: the SIGCONTs reach it, and its handler.
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(1));
                assert!(hold.service().is_none());
            }
            assert!(
                counter.load(Ordering::Relaxed) > after,
                "round {round}: resumed"
            );
        }
        let status = hold.kill();
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
    }

    #[test]
    fn a_process_stopped_by_signals_is_continued_by_its_own_timer() {
        // What the hold is for: the stop by signals does not hold.
        let events = ChildSignals::new().unwrap();
        let (pid, counter) = counting_child(1, false);
        let _killed = Killed(pid);
        let mut hold = Hold::signals(pid);
        // It counts once its timer is armed; stopped before that (a loaded
        // machine can keep it from a CPU for longer than any fixed wait),
        // nothing would continue it and the test would tell nothing.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while counter.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The stop may be undone before it is even seen: that is the point.
        let _ = hold.stop(&events, Duration::from_millis(200));
        let before = counter.load(Ordering::Relaxed);
        // On a loaded machine the child may wait for a CPU: give it time to
        // run, rather than a fixed moment.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while counter.load(Ordering::Relaxed) == before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            counter.load(Ordering::Relaxed) > before,
            "it continued itself"
        );
        hold.kill();
    }

    #[test]
    fn the_probe_holds_a_child_here() {
        probe().unwrap();
    }
}

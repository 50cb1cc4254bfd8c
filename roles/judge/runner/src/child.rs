//! A runner as the supervisor holds it: started in namespaces of its own,
//! held stopped whenever it is not making a call, and timed from outside.
//!
//! A call: the supervisor reads the clock, writes which argument list to
//! use on the runner's call channel and continues every thread of it. The
//! runner calls the kernel and writes a byte on its report channel. The
//! supervisor then stops every thread and reads the clock once all are
//! stopped. Work a thread of the submission does before the stop is inside
//! the time; after it, nothing runs until the next call: the stop is a
//! ptrace-stop ([`Hold`]), which no signal the runner arranges for itself
//! ends. Nothing in the runner's address space decides a time: a byte
//! written early only stops the call early, with whatever outputs it has
//! by then, and a runner that stops itself only waits for its deadline.
//!
//! Every read and write here has a deadline, and the supervisor's ends of
//! the channels never block: a runner that stops reading its calls, or
//! writes half a report and stalls, is timed out, never waited for. Its
//! channels are pipes no one may open by path (mode 0): the runner cannot
//! reopen its end through `/proc/self/fd` to get the other end and fill it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use hpcagent_sandbox::hold::{ChildSignals, Fault, Hold, Lost};
use hpcagent_sandbox::limits::Limits;
use hpcagent_sandbox::namespaces::{NamespaceError, Spawn, describe_start_failure};

use super::process::{BATCH, FAILED, MAX_BATCH};
use super::protocol::{Report, RunnerSetup, read_frame};

/// How a runner stopped being usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gone {
    /// It exited or was killed by a signal it did not get from us.
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// A call outlived its budget; the runner was killed.
    TimedOut,
    /// It reported a failure of its own (setup, load, device).
    Failed { stage: String, message: String },
}

/// A started runner.
pub struct Child {
    pid: libc::pid_t,
    /// Its PID namespace's first process: killing it ends the namespace.
    init: Option<libc::pid_t>,
    /// Whether it runs in a PID namespace of its own.
    namespaced: bool,
    /// Whether its process tree was already killed (no namespace).
    walked: bool,
    /// Its call channel: which call to make next (closed to end its calls).
    calls: Option<File>,
    report: File,
    hold: Hold,
    /// This process's children's events.
    events: Rc<ChildSignals>,
    phase: Phase,
}

/// Whose code a runner is running: what it reports means only as much.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Its own, before the library is loaded: a failure it reports is the
    /// harness's, and an exit before it reports anything is its start
    /// failing (the exit code says where).
    Starting,
    /// The library's initializers may run: a failure it reports can be the
    /// submission's own words, and is charged to it.
    Loading,
    /// Between and during calls.
    Calling,
}

/// Stages a runner may report once the library is loading, all charged to
/// the submission ([`Phase::Loading`]); during a call, [`CALL_STAGES`].
const LOADING_STAGES: &[&str] = &["load", "symbol", "alloc"];
const CALL_STAGES: &[&str] = &["sync", "copy", "call"];

/// A failure as reported in `phase`: a stage the runner's own code would not
/// report there is the submission's, and becomes `fallback`.
fn charged(stage: String, message: String, allowed: &[&str], fallback: &str) -> Gone {
    if allowed.contains(&stage.as_str()) {
        return Gone::Failed { stage, message };
    }
    Gone::Failed {
        stage: fallback.into(),
        message: format!("the library reported {stage:?}: {message}"),
    }
}

/// What starting a runner needs besides its setup.
pub struct Start<'a> {
    pub exe: &'a std::path::Path,
    pub env: &'a [(String, String)],
    /// `/dev/null`, its stdin.
    pub null: i32,
    /// The run's shared buffers, and a descriptor of them open for
    /// reading alone (its inputs are mapped from it).
    pub buffers: i32,
    pub buffers_read_only: i32,
    /// Its stdout and stderr.
    pub output: (i32, i32),
    pub limits: &'a Limits,
    pub namespaces: bool,
    /// A network namespace of its own; `false` for a profiled run, which
    /// shares its profiler's.
    pub own_network: bool,
    /// Held by ptrace; `false` only where the operator allowed weaker
    /// isolation and ptrace is refused (then by signals, which it can undo).
    pub trace: bool,
    pub events: &'a Rc<ChildSignals>,
}

/// Why a runner could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("pipe: {0}")]
    Pipe(std::io::Error),
    #[error("NUL in {0:?}")]
    Nul(String),
    #[error(transparent)]
    Spawn(#[from] NamespaceError),
    #[error(transparent)]
    Setup(#[from] serde_json::Error),
    #[error("cannot hold the runner: {0}")]
    Hold(#[from] hpcagent_sandbox::hold::HoldError),
    #[error("the runner did not take its setup: {0}")]
    Send(std::io::Error),
}

impl Child {
    /// Starts a runner, holds it, and sends it its setup; it is running
    /// until [`ready`].
    ///
    /// [`ready`]: Child::ready
    pub fn start(setup: &RunnerSetup, start: &Start) -> Result<Child, StartError> {
        let (calls_r, calls_w) = pipe(1)?;
        let (report_r, report_w) = pipe(0)?;
        let c = |s: &str| std::ffi::CString::new(s).map_err(|_| StartError::Nul(s.to_string()));
        let spawn = Spawn {
            program: c(&start.exe.display().to_string())?,
            argv: super::RUNNER_PROCESS_ARGS
                .iter()
                .copied()
                .map(c)
                .collect::<Result<_, _>>()?,
            envp: start
                .env
                .iter()
                .map(|(k, v)| c(&format!("{k}={v}")))
                .collect::<Result<_, _>>()?,
            fds: vec![
                start.null,
                start.output.0,
                start.output.1,
                report_w.as_raw_fd(),
                calls_r.as_raw_fd(),
                start.buffers,
                start.buffers_read_only,
            ],
            limits: start.limits.clone(),
            namespaces: start.namespaces,
            own_network: start.own_network,
            same_layout: true,
        };
        let started = spawn.start()?;
        // The runner holds its ends now; ours would keep its channel open.
        drop((calls_r, report_w));
        // Seized before the setup goes out: until the runner has it, only
        // its own code runs, on one thread.
        let (hold, refused) = match start.trace {
            true => match Hold::seize(started.pid) {
                Ok(hold) => (hold, None),
                Err(e) => (Hold::signals(started.pid), Some(e)),
            },
            false => (Hold::signals(started.pid), None),
        };
        let mut child = Child {
            pid: started.pid,
            init: started.init,
            namespaced: started.init.is_some(),
            walked: false,
            calls: Some(File::from(calls_w)),
            report: File::from(report_r),
            hold,
            events: start.events.clone(),
            phase: Phase::Starting,
        };
        if let Some(e) = refused {
            child.kill(Gone::TimedOut);
            return Err(e.into());
        }
        let mut text = serde_json::to_vec(setup)?;
        text.push(b'\n');
        let deadline = Instant::now() + Duration::from_secs(30);
        if let Some(calls) = &child.calls
            && let Err(e) = write_within(calls, &text, deadline)
        {
            // A runner that died at once closed its end: `ready` says why.
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                child.kill(Gone::TimedOut);
                return Err(StartError::Send(e));
            }
        }
        Ok(child)
    }

    /// The last memory fault the runner met, where it is held by ptrace.
    pub fn fault(&self) -> Option<Fault> {
        self.hold.fault()
    }

    /// Whether the runner is held by ptrace (it cannot end its stops).
    pub fn traced(&self) -> bool {
        self.hold.traced()
    }

    /// Waits for the runner's reports until it is ready (then stops it) or
    /// gone; `confined` receives its confinement report.
    pub fn ready(
        &mut self,
        within: Duration,
        mut confined: impl FnMut(Report),
    ) -> Result<(), Gone> {
        let deadline = Instant::now() + within;
        // A stop it made while another runner was waited for: that wait
        // took its SIGCHLD, and nothing would wake this one for it.
        self.hold.service();
        loop {
            let report = read_frame::<Report>(&mut self.reading(deadline), 0);
            match report {
                Ok(Some((Report::Ready, _))) if self.phase == Phase::Loading => {
                    self.phase = Phase::Calling;
                    return self.stop(deadline);
                }
                Ok(Some((report @ Report::Confined { .. }, _)))
                    if self.phase == Phase::Starting =>
                {
                    self.phase = Phase::Loading;
                    confined(report);
                }
                Ok(Some((Report::Failed { stage, message }, _))) => {
                    let gone = match self.phase {
                        Phase::Loading => charged(stage, message, LOADING_STAGES, "load"),
                        _ => Gone::Failed { stage, message },
                    };
                    return Err(self.kill(gone));
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    return Err(self.kill(Gone::TimedOut));
                }
                // Out of order, closed, or garbage: broken or tampered with.
                _ => return Err(self.ended()),
            }
        }
    }

    /// Makes call `index` within `budget`; its time, from before anything
    /// can wake the runner to every thread of it stopped.
    pub fn call(&mut self, index: u32, budget: Duration) -> Result<Duration, Gone> {
        self.make(&index.to_le_bytes(), budget)
    }

    /// Makes the calls `indices` in order, in one continue of the runner
    /// ([`BATCH`]), within `budget` for them all; their time together, as
    /// [`Child::call`] times one.
    pub fn batch(&mut self, indices: &[u32], budget: Duration) -> Result<Duration, Gone> {
        let count = u32::try_from(indices.len()).expect("a batch's size fits its word");
        assert!(count <= MAX_BATCH, "a batch of {count} calls");
        let message: Vec<u8> = std::iter::once(BATCH | count)
            .chain(indices.iter().copied())
            .flat_map(u32::to_le_bytes)
            .collect();
        self.make(&message, budget)
    }

    /// Writes `message` (a call, or a batch) to the stopped runner, lets it
    /// run, and times it until it says it is done and is stopped again.
    fn make(&mut self, message: &[u8], budget: Duration) -> Result<Duration, Gone> {
        let start = Instant::now();
        let deadline = start + budget;
        // The runner is stopped: a channel it cannot take the message on
        // (a pipe's write of up to a page is whole or nothing) is one it
        // filled itself, and never drains.
        match self.calls.as_ref().map(|c| (&*c).write(message)) {
            Some(Ok(n)) if n == message.len() => {}
            Some(Ok(_)) => return Err(self.kill(Gone::TimedOut)),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(self.kill(Gone::TimedOut));
            }
            _ => return Err(self.ended()),
        }
        self.hold.resume();
        let mut byte = [0u8; 1];
        let mut reading = self.reading(deadline);
        // Looked for without sleeping at first (see `hold::SPIN`): the
        // supervisor's own CPU has nothing else to do meanwhile.
        reading.spin_until = Some(Instant::now() + hpcagent_sandbox::hold::SPIN);
        match reading.read(&mut byte) {
            Ok(1) if byte[0] == FAILED => {
                let failure = match read_frame::<Report>(&mut self.reading(deadline), 0) {
                    Ok(Some((Report::Failed { stage, message }, _))) => {
                        charged(stage, message, CALL_STAGES, "call")
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Gone::TimedOut,
                    _ => return Err(self.ended()),
                };
                Err(self.kill(failure))
            }
            // DONE, or any byte the submission wrote: either way the call
            // is over as far as the clock is concerned.
            Ok(1) => {
                self.stop(deadline.max(Instant::now() + STOP))?;
                Ok(start.elapsed())
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(self.kill(Gone::TimedOut)),
            _ => Err(self.ended()),
        }
    }

    /// Ends the runner's calls (EOF on its call channel), collects its last
    /// reports (a profile's counters) and lets it exit on its own (its
    /// buffered output flushed), all within `within`; then kills what is left.
    pub fn finish(mut self, within: Duration) -> Vec<Report> {
        // Closing our end of its call channel is the EOF it waits for.
        self.calls = None;
        self.hold.resume();
        let deadline = Instant::now() + within;
        let mut reports = Vec::new();
        while let Ok(Some((report, _))) = read_frame::<Report>(&mut self.reading(deadline), 0) {
            reports.push(report);
        }
        // Its channel closes before its exit has flushed what it printed.
        self.exit_within(deadline);
        self.kill(Gone::TimedOut);
        reports
    }

    /// A reader of the runner's report channel that waits for it until
    /// `deadline` (then fails with `TimedOut`), servicing the runner's
    /// threads meanwhile.
    fn reading(&mut self, deadline: Instant) -> Reading<'_> {
        Reading {
            report: &self.report,
            hold: &mut self.hold,
            events: &self.events,
            deadline,
            spin_until: None,
        }
    }

    /// Stops every thread of the runner by `deadline`.
    fn stop(&mut self, deadline: Instant) -> Result<(), Gone> {
        let within = deadline.saturating_duration_since(Instant::now());
        match self.hold.stop(&self.events, within) {
            Ok(()) => Ok(()),
            Err(Lost::Ended(status)) => Err(self.kill(gone(status, self.phase))),
            Err(Lost::TimedOut) => Err(self.kill(Gone::TimedOut)),
        }
    }

    /// Waits for the runner to exit on its own until `deadline`.
    fn exit_within(&mut self, deadline: Instant) -> Option<i32> {
        loop {
            if let Some(status) = self.hold.service() {
                return Some(status);
            }
            self.events.wait(None, deadline).ok()?;
        }
    }

    /// The runner's end, once it has closed its channels: it exits, or it
    /// is killed within a few seconds (a submission may close the channel
    /// and stay).
    fn ended(&mut self) -> Gone {
        self.hold.resume();
        match self.exit_within(Instant::now() + Duration::from_secs(5)) {
            Some(status) => {
                let gone = gone(status, self.phase);
                self.kill(gone)
            }
            None => self.kill(Gone::Ended {
                code: None,
                signal: Some(libc::SIGKILL),
            }),
        }
    }

    /// Kills the runner and its namespace's init (and so everything in
    /// its PID namespace), reaps them, and returns `why`.
    pub fn kill(&mut self, why: Gone) -> Gone {
        self.hold.kill();
        if let Some(init) = self.init.take() {
            // SAFETY: kills and reaps our own child, the namespace's init.
            unsafe {
                libc::kill(init, libc::SIGKILL);
                libc::waitpid(init, std::ptr::null_mut(), 0);
            }
        }
        // Outside a PID namespace (weaker isolation), a process the runner
        // left would outlive it: the tree goes too (it cannot fork under its
        // filter, so this finds nothing). Inside one, its init's death took
        // everything, and this process's `/proc` is the node's, whose
        // numbers are not its namespace's: no walk there.
        if !self.namespaced && !self.walked {
            self.walked = true;
            hpcagent_sandbox::reap::kill_tree(self.pid as u32);
        }
        why
    }
}

/// The longest a runner's threads may take to stop after a call returned.
const STOP: Duration = Duration::from_secs(5);

/// The runner's report channel, read with a deadline.
struct Reading<'a> {
    report: &'a File,
    hold: &'a mut Hold,
    events: &'a ChildSignals,
    deadline: Instant,
    /// Until when to look without sleeping.
    spin_until: Option<Instant>,
}

impl Read for Reading<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.report.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                done => return done,
            }
            if self
                .spin_until
                .is_some_and(|t| Instant::now() < t.min(self.deadline))
            {
                if self.events.pending() {
                    self.hold.service();
                }
                std::hint::spin_loop();
                continue;
            }
            match self
                .events
                .wait(Some(self.report.as_raw_fd()), self.deadline)
            {
                Ok(true) => {}
                // A new thread, a signal, an exit: the channel closes when
                // the runner has ended, and the read above says so.
                Ok(false) => {
                    self.hold.service();
                }
                Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill(Gone::TimedOut);
    }
}

/// How a reaped runner ended, from its wait status; an exit before its own
/// code ran names the step of its start that failed.
fn gone(status: i32, phase: Phase) -> Gone {
    if libc::WIFSIGNALED(status) {
        return Gone::Ended {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        };
    }
    let code = libc::WEXITSTATUS(status);
    let starting = (phase == Phase::Starting).then(|| describe_start_failure(code));
    match starting.flatten() {
        Some(step) => Gone::Failed {
            stage: "start".into(),
            message: format!("the runner could not start: it failed {step}"),
        },
        None => Gone::Ended {
            code: Some(code),
            signal: None,
        },
    }
}

/// A pipe whose ends only their descriptors reach: mode 0, so a runner
/// cannot open its channel anew through `/proc/self/fd` (for the other
/// end); it may not change the mode back (seccomp). The end `ours` (0 the
/// reading one, 1 the writing one) never blocks; the runner's does.
fn pipe(ours: usize) -> Result<(OwnedFd, OwnedFd), StartError> {
    let (r, w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| StartError::Pipe(e.into()))?;
    let mine = if ours == 0 { &r } else { &w };
    // SAFETY: fchmod and fcntl on descriptors we own (a pipe's ends share its inode).
    let set = unsafe {
        libc::fchmod(r.as_raw_fd(), 0) == 0
            && libc::fcntl(mine.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) == 0
    };
    if !set {
        return Err(StartError::Pipe(std::io::Error::last_os_error()));
    }
    Ok((r, w))
}

/// Writes all of `bytes` to `file` (non-blocking) by `deadline`.
fn write_within(file: &File, bytes: &[u8], deadline: Instant) -> std::io::Result<()> {
    let mut left = bytes;
    while !left.is_empty() {
        match (&*file).write(left) {
            Ok(n) => left = &left[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut poll = libc::pollfd {
                    fd: file.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                let ms = deadline
                    .saturating_duration_since(Instant::now())
                    .as_millis();
                // SAFETY: one pollfd on the stack.
                if unsafe { libc::poll(&mut poll, 1, ms.min(i32::MAX as u128) as i32) } == 0 {
                    return Err(std::io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

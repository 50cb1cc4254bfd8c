//! A runner as the supervisor holds it: started in namespaces of its own,
//! stopped whenever it is not making a call, and timed from outside.
//!
//! A call: the supervisor writes which argument list to use on the runner's
//! call channel while it is stopped, reads the clock, and continues it (SIGCONT).
//! The runner calls the kernel and writes a byte on its report channel. The
//! supervisor then stops it (SIGSTOP) and reads the clock once the kernel
//! reports every thread of the runner stopped (`waitpid`). Work a thread of
//! the submission does before the stop is inside the time; after it,
//! nothing runs until the next call. Nothing in the runner's address space
//! decides a time: a byte written early only stops the call early, with
//! whatever outputs it has by then, and a runner that stops itself only
//! waits for its deadline.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use hpcagent_sandbox::limits::Limits;
use hpcagent_sandbox::namespaces::{NamespaceError, Spawn, describe_start_failure};

use super::process::FAILED;
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
    phase: Phase,
    reaped: bool,
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
    /// The run's shared buffers.
    pub buffers: i32,
    /// Its stdout and stderr.
    pub output: (i32, i32),
    pub limits: &'a Limits,
    pub namespaces: bool,
}

/// Why a runner could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("pipe: {0}")]
    Pipe(nix::Error),
    #[error("NUL in {0:?}")]
    Nul(String),
    #[error(transparent)]
    Spawn(#[from] NamespaceError),
    #[error(transparent)]
    Setup(#[from] serde_json::Error),
}

impl Child {
    /// Starts a runner and sends it its setup; it is running until [`ready`].
    ///
    /// [`ready`]: Child::ready
    pub fn start(setup: &RunnerSetup, start: &Start) -> Result<Child, StartError> {
        let (calls_r, calls_w) = pipe()?;
        let (report_r, report_w) = pipe()?;
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
            ],
            limits: start.limits.clone(),
            namespaces: start.namespaces,
            same_layout: true,
        };
        let started = spawn.start()?;
        // The runner holds its ends now; ours would keep its channel open.
        drop((calls_r, report_w));
        let mut child = Child {
            pid: started.pid,
            init: started.init,
            namespaced: started.init.is_some(),
            walked: false,
            calls: Some(File::from(calls_w)),
            report: File::from(report_r),
            phase: Phase::Starting,
            reaped: false,
        };
        let mut text = serde_json::to_vec(setup)?;
        text.push(b'\n');
        // A runner that died at once closed its stdin: `ready` says why.
        if let Some(calls) = &mut child.calls {
            let _ = calls.write_all(&text);
        }
        Ok(child)
    }

    /// Waits for the runner's reports until it is ready (then stops it) or
    /// gone; `confined` receives its confinement report.
    pub fn ready(
        &mut self,
        within: Duration,
        mut confined: impl FnMut(Report),
    ) -> Result<(), Gone> {
        let deadline = Instant::now() + within;
        loop {
            if !wait_readable(
                &self.report,
                deadline.saturating_duration_since(Instant::now()),
            ) {
                return Err(self.kill(Gone::TimedOut));
            }
            match read_frame::<Report>(&mut self.report, 0) {
                Ok(Some((Report::Ready, _))) if self.phase == Phase::Loading => {
                    self.phase = Phase::Calling;
                    return self.stop();
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
                // Out of order, closed, or garbage: broken or tampered with.
                _ => return Err(self.ended()),
            }
        }
    }

    /// Makes call `index` within `budget`; its time, from continuing the
    /// runner to every thread of it stopped.
    pub fn call(&mut self, index: u32, budget: Duration) -> Result<Duration, Gone> {
        let sent = self
            .calls
            .as_mut()
            .map(|c| c.write_all(&index.to_le_bytes()));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.ended());
        }
        let start = Instant::now();
        self.signal(libc::SIGCONT);
        if !wait_readable(&self.report, budget) {
            return Err(self.kill(Gone::TimedOut));
        }
        let mut byte = [0u8; 1];
        match self.report.read(&mut byte) {
            Ok(1) if byte[0] == FAILED => {
                let failure = match read_frame::<Report>(&mut self.report, 0) {
                    Ok(Some((Report::Failed { stage, message }, _))) => {
                        charged(stage, message, CALL_STAGES, "call")
                    }
                    _ => return Err(self.ended()),
                };
                Err(self.kill(failure))
            }
            // DONE, or any byte the submission wrote: either way the call
            // is over as far as the clock is concerned.
            Ok(1) => {
                self.stop()?;
                Ok(start.elapsed())
            }
            _ => Err(self.ended()),
        }
    }

    /// Ends the runner's calls (EOF on its call channel), collects its last
    /// reports (a profile's counters) and lets it exit on its own (its
    /// buffered output flushed), all within `within`; then kills what is left.
    pub fn finish(mut self, within: Duration) -> Vec<Report> {
        // Closing our end of its call channel is the EOF it waits for.
        self.calls = None;
        self.signal(libc::SIGCONT);
        let mut reports = Vec::new();
        let deadline = Instant::now() + within;
        while wait_readable(
            &self.report,
            deadline.saturating_duration_since(Instant::now()),
        ) {
            match read_frame::<Report>(&mut self.report, 0) {
                Ok(Some((report, _))) => reports.push(report),
                _ => break,
            }
        }
        // Its channel closes before its exit has flushed what it printed.
        while !self.reaped && Instant::now() < deadline {
            // SAFETY: waits for our own child without blocking.
            if unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) } == self.pid {
                self.reaped = true;
            } else {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        self.kill(Gone::TimedOut);
        reports
    }

    /// Stops the runner and waits until all its threads are stopped.
    fn stop(&mut self) -> Result<(), Gone> {
        self.signal(libc::SIGSTOP);
        let mut status = 0;
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WUNTRACED) };
        if r == self.pid && libc::WIFSTOPPED(status) {
            return Ok(());
        }
        self.reaped = r == self.pid;
        Err(self.kill(gone(status, self.phase)))
    }

    /// The runner's end, once it has closed its channels: it exits, or it
    /// is killed within a few seconds (a submission may close the channel
    /// and stay).
    fn ended(&mut self) -> Gone {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut status = 0;
        while !self.reaped && Instant::now() < deadline {
            // SAFETY: waits for our own child without blocking.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                self.reaped = true;
                return gone(status, self.phase);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.kill(Gone::Ended {
            code: None,
            signal: Some(libc::SIGKILL),
        })
    }

    /// Kills the runner and its namespace's init (and so everything in
    /// its PID namespace), reaps them, and returns `why`.
    pub fn kill(&mut self, why: Gone) -> Gone {
        if !self.reaped {
            self.signal(libc::SIGKILL);
            // SAFETY: reaps our own child.
            unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
            self.reaped = true;
        }
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

    fn signal(&self, signal: i32) {
        if !self.reaped {
            // SAFETY: kill(2) on our own, not yet reaped, child.
            unsafe { libc::kill(self.pid, signal) };
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

fn pipe() -> Result<(OwnedFd, OwnedFd), StartError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(StartError::Pipe)
}

/// Whether `file` has something to read (or was closed) within `timeout`.
fn wait_readable(file: &File, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let mut poll = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd on the stack.
        let r = unsafe { libc::poll(&mut poll, 1, ms) };
        if r > 0 {
            return true;
        }
        if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // A timeout that fell short of its millisecond by rounding: once more.
            if r == 0 && Instant::now() < deadline {
                continue;
            }
            return false;
        }
    }
}

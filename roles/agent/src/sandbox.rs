//! `hpcagent agent sandbox`: an agent CLI in a sandbox of its own.
//!
//! The `command` policy runs each attempt's CLI through this small
//! supervisor, which the worker starts with the CLI's [`Spec`] on stdin. It
//! is not dumpable, and it is the *child subreaper* of everything the CLI
//! starts: when the CLI exits, or the worker asks it to stop (TERM, passed
//! on to the CLI's session, then 5 s of grace), it stops and kills the
//! whole tree below it, a `setsid` daemon included, and only then exits,
//! with the CLI's status. The CLI itself runs in a session of its own,
//! with none of the worker's descriptors, under
//!
//! - Landlock: the filesystem readable but for the run directory (the
//!   store, the judges' caches, the other tasks' workspaces, the
//!   orchestrator's address file) and the node's temporary directories
//!   (the judges' sandboxes, other users' sockets), its own attempt's
//!   directory readable, its workspace and a scratch directory writable;
//!   TCP only to its model's port and its tool server's; no signals to
//!   processes outside it (the worker, the orchestrator);
//! - seccomp ([`Profile::Agent`]): no Unix sockets (a same-user tmux or
//!   D-Bus session would run its commands outside any sandbox), no
//!   ptrace or other processes' memory, no System V or POSIX IPC.
//!
//! It holds no token: the worker keeps them, and the CLI reaches the
//! attempt's tools only, with the attempt's secret.

use std::ffi::CString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hpcagent_sandbox::landlock::{Confinement, restrict_self};
use hpcagent_sandbox::limits::close_on_exec_from;
use hpcagent_sandbox::reap;
use hpcagent_sandbox::seccomp::{Filters, Profile};
use serde::{Deserialize, Serialize};

/// The arguments that make the hpcagent binary this supervisor.
pub const ENTRY: [&str; 2] = ["agent", "sandbox"];

/// How long the CLI has between TERM and KILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What to run, and where it may reach.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub confinement: Confinement,
}

impl Spec {
    /// The sandbox of an attempt: `run_dir` and the node's temporary
    /// directories hidden, `attempt_dir` readable, `writable` ones
    /// writable, TCP to `ports` only.
    pub fn confine(
        run_dir: &Path,
        attempt_dir: &Path,
        writable: &[PathBuf],
        ports: &[u16],
    ) -> Confinement {
        let hidden: Vec<PathBuf> = [
            run_dir.to_path_buf(),
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
            PathBuf::from("/run"),
        ]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
        let mut read = hpcagent_sandbox::landlock::everything_but(&hidden);
        read.push(attempt_dir.to_path_buf());
        Confinement {
            read,
            write: writable.to_vec(),
            system: false,
            connect: ports.to_vec(),
            gpus: false,
        }
    }
}

/// Whether agent CLIs can be confined here: without Landlock the sandbox
/// holds nothing of the filesystem, and the agents refuse to run CLIs
/// unless the operator allowed `weak` isolation; without its network rules
/// (ABI 4) the CLI may reach any TCP port, which is said once.
pub fn check(weak_allowed: bool) -> anyhow::Result<()> {
    let abi = hpcagent_sandbox::landlock::abi_version();
    if abi == 0 && !weak_allowed {
        anyhow::bail!(
            "the kernel has no Landlock, so an agent CLI would read and write what this user can \
             (the store, the judges' caches, the other tasks); run where Landlock is enabled, or \
             set ISOLATION=weak to run CLIs without it"
        );
    }
    if abi == 0 {
        tracing::warn!("no Landlock: agent CLIs run with this user's rights (ISOLATION=weak)");
    } else if abi < 4 {
        tracing::warn!(
            abi,
            "Landlock below ABI 4: agent CLIs may connect to any TCP port"
        );
    }
    Ok(())
}

/// Runs the supervisor: the spec from stdin; its exit code (the CLI's).
pub fn main() -> i32 {
    // SAFETY: prctl with integer arguments: no other process of this user
    // (the CLI) may read this one's memory.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
    // The worker's death is a TERM.
    reap::die_with_parent(libc::SIGTERM);
    reap::become_subreaper();
    let mut text = String::new();
    let spec: Spec = match std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("agent sandbox: bad spec: {e}");
            return 2;
        }
    };
    match start(&spec) {
        Ok(cli) => supervise(cli),
        Err(e) => {
            eprintln!("agent sandbox: cannot start {:?}: {e}", spec.argv.first());
            127
        }
    }
}

/// What the child needs, made before the fork so that it allocates nothing.
struct Prepared {
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
    ruleset: Option<std::os::fd::OwnedFd>,
    filters: Filters,
}

/// Forks and executes the CLI, confined; its process id.
fn start(spec: &Spec) -> Result<libc::pid_t, String> {
    let c = |s: &str| CString::new(s).map_err(|_| format!("NUL in {s:?}"));
    let program = spec.argv.first().ok_or("an empty command")?;
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/bin:/bin");
    let program =
        resolve(program, path, &spec.cwd).ok_or_else(|| format!("{program} not found"))?;
    let prepared = Prepared {
        program: c(&program.display().to_string())?,
        argv: spec.argv.iter().map(|a| c(a)).collect::<Result<_, _>>()?,
        env: spec
            .env
            .iter()
            .map(|(k, v)| c(&format!("{k}={v}")))
            .collect::<Result<_, _>>()?,
        cwd: c(&spec.cwd.display().to_string())?,
        ruleset: spec.confinement.prepare().map_err(|e| e.to_string())?,
        filters: Filters::new(Profile::Agent).map_err(|e| e.to_string())?,
    };
    let argv: Vec<*const libc::c_char> = prepared
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let env: Vec<*const libc::c_char> = prepared
        .env
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    block_signals(true);
    // SAFETY: this process is single-threaded; the child makes system calls
    // on values prepared above and leaves by execve or _exit.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error().to_string()),
        // SAFETY: the child: system calls on the C strings prepared above
        // (alive until execve), then execve or _exit.
        0 => unsafe {
            block_signals(false);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if null < 0 || libc::dup2(null, 0) < 0 {
                libc::_exit(126);
            }
            libc::setsid();
            close_on_exec_from(3);
            if libc::chdir(prepared.cwd.as_ptr()) != 0 {
                libc::_exit(126);
            }
            if let Some(fd) = &prepared.ruleset
                && restrict_self(fd).is_err()
            {
                libc::_exit(126);
            }
            if prepared.filters.install().is_err() {
                libc::_exit(126);
            }
            libc::execve(prepared.program.as_ptr(), argv.as_ptr(), env.as_ptr());
            libc::_exit(127)
        },
        pid => Ok(pid),
    }
}

/// Where `program` is: as given when it has a slash, else on `path`.
fn resolve(program: &str, path: &str, cwd: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(cwd.join(program));
    }
    path.split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// Blocks (or unblocks) the signals the supervisor waits for.
fn block_signals(block: bool) {
    // SAFETY: sigset operations on a stack value; sigprocmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::sigprocmask(how, &set, std::ptr::null_mut());
    }
}

/// Waits for the CLI to exit or for a stop; then kills everything below
/// this process and exits with the CLI's status.
fn supervise(cli: libc::pid_t) -> i32 {
    let mut stopping: Option<Instant> = None;
    let code = loop {
        if let Some(code) = reap_children(cli) {
            break code;
        }
        if stopping.is_some_and(|since| since.elapsed() >= STOP_GRACE) {
            break 128 + libc::SIGKILL;
        }
        match wait_signal(Duration::from_millis(200)) {
            Some(libc::SIGTERM | libc::SIGINT | libc::SIGHUP) if stopping.is_none() => {
                // SAFETY: kill(2) on the CLI's session (its process group).
                unsafe { libc::kill(-cli, libc::SIGTERM) };
                stopping = Some(Instant::now());
            }
            _ => {}
        }
    };
    reap::kill_tree(std::process::id());
    while reap_children(-1).is_some() {}
    code
}

/// Reaps exited children; the CLI's exit code once it has exited.
fn reap_children(cli: libc::pid_t) -> Option<i32> {
    loop {
        let mut status = 0;
        // SAFETY: waits for our own children without blocking.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return None;
        }
        if pid == cli || cli == -1 {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
    }
}

/// The next blocked signal within `timeout`, if any.
fn wait_signal(timeout: Duration) -> Option<i32> {
    // SAFETY: sigset operations and sigtimedwait on stack values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        let wait = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        let signal = libc::sigtimedwait(&set, std::ptr::null_mut(), &wait);
        (signal > 0).then_some(signal)
    }
}

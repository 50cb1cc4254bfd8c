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
//!   TCP only to its model's meter and its tool server; no signals to
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

/// The supervisor's exit code when the CLI never ran, with a first line on
/// stderr that starts [`CANNOT_START_SAYS`] and says why.
pub const CANNOT_START: i32 = 127;
pub const CANNOT_START_SAYS: &str = "agent sandbox: cannot start";

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
    /// directories hidden, `readable` ones (its attempt's directory) seen,
    /// `writable` ones writable, TCP to `ports` only.
    pub fn confine(
        run_dir: &Path,
        readable: &[PathBuf],
        writable: &[PathBuf],
        ports: &[u16],
    ) -> Confinement {
        let mut read = hpcagent_sandbox::landlock::everything_but(&hidden(run_dir));
        read.extend_from_slice(readable);
        Confinement {
            read,
            write: writable.to_vec(),
            system: false,
            connect: ports.to_vec(),
            gpus: false,
            any_tcp: false,
        }
    }
}

/// What an attempt's sandbox hides: `run_dir` and the node's temporary
/// directories.
pub fn hidden(run_dir: &Path) -> Vec<PathBuf> {
    let mut hidden = hpcagent_common::hidden::node_temporaries();
    hidden.push(run_dir.to_path_buf());
    hidden
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
            let program = spec.argv.first().map_or("", String::as_str);
            eprintln!("{CANNOT_START_SAYS} {program}: {e}");
            CANNOT_START
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
    // The child's failures before execve come back here, on a pipe that
    // execve closes: an empty read is a CLI that runs.
    let mut failed = [0 as libc::c_int; 2];
    // SAFETY: pipe2 into a two-element array.
    if unsafe { libc::pipe2(failed.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    block_signals(true);
    // SAFETY: this process is single-threaded; the child makes system calls
    // on values prepared above and leaves by execve or _exit.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error().to_string()),
        // SAFETY: the child: system calls on the C strings prepared above
        // (alive until execve), then execve or _exit.
        0 => unsafe {
            let fail = |stage: Stage| -> ! {
                let report = [stage as i32, *libc::__errno_location()];
                libc::write(failed[1], report.as_ptr().cast(), size_of_val(&report));
                libc::_exit(CANNOT_START)
            };
            block_signals(false);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if null < 0 || libc::dup2(null, 0) < 0 {
                fail(Stage::Stdin);
            }
            libc::setsid();
            close_on_exec_from(3);
            if libc::chdir(prepared.cwd.as_ptr()) != 0 {
                fail(Stage::Directory);
            }
            if let Some(fd) = &prepared.ruleset
                && restrict_self(fd).is_err()
            {
                fail(Stage::Landlock);
            }
            if prepared.filters.install().is_err() {
                fail(Stage::Seccomp);
            }
            libc::execve(prepared.program.as_ptr(), argv.as_ptr(), env.as_ptr());
            fail(Stage::Execute)
        },
        pid => {
            // SAFETY: our copy of the write end; the read end is ours.
            unsafe { libc::close(failed[1]) };
            let mut report = [0 as libc::c_int; 2];
            // SAFETY: reads at most the report's size into it.
            let n =
                unsafe { libc::read(failed[0], report.as_mut_ptr().cast(), size_of_val(&report)) };
            // SAFETY: our read end, read above.
            unsafe { libc::close(failed[0]) };
            if n <= 0 {
                return Ok(pid);
            }
            reap_children(pid);
            let error = std::io::Error::from_raw_os_error(report[1]);
            Err(format!("{}: {error}", Stage::name(report[0])))
        }
    }
}

/// Where the CLI's start failed, as the child reports it.
#[derive(Clone, Copy)]
enum Stage {
    Stdin = 1,
    Directory,
    Landlock,
    Seccomp,
    Execute,
}

impl Stage {
    fn name(code: i32) -> &'static str {
        match code {
            1 => "its stdin (/dev/null)",
            2 => "its working directory",
            3 => "its Landlock rules",
            4 => "its seccomp filter",
            _ => "execve (the sandbox hides /tmp, /var/tmp, /dev/shm, /run and the run directory)",
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A CLI whose program the sandbox hides cannot start, and the reason
    /// comes back to the supervisor (which writes it to agent.stderr)
    /// instead of a bare exit 127.
    #[test]
    fn a_program_the_sandbox_hides_is_reported_as_never_started() {
        if hpcagent_sandbox::landlock::abi_version() == 0 {
            panic!("this test needs Landlock, which the agent sandbox requires");
        }
        let run_dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let program = run_dir.path().join("cli.sh");
        std::fs::write(&program, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let workspace = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let spec = Spec {
            argv: vec![program.display().to_string()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: workspace.path().to_path_buf(),
            confinement: Spec::confine(run_dir.path(), &[], &[workspace.path().into()], &[]),
        };
        let why = start(&spec).expect_err("a hidden program cannot start");
        assert!(
            why.starts_with("execve") && why.contains("Permission denied"),
            "{why}"
        );
    }
}

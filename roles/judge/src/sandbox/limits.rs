//! Limits the judge puts on a child process (a compiler or the runner) before
//! it executes: its own session and process group (so a timeout kills the
//! whole group), resource limits, CPU pinning, and a network namespace of its
//! own where the kernel permits.
//!
//! Applied in `pre_exec`, between fork and exec, so only async-signal-safe
//! calls are made there: raw `setrlimit`, `setsid`, `sched_setaffinity` and
//! `unshare` on values computed beforehand.

use std::os::unix::process::CommandExt;

/// Resource limits of one child; `None` leaves a limit as inherited.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub address_space: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub file_size: Option<u64>,
    pub processes: Option<u64>,
    /// CPUs the child may run on.
    pub cpus: Vec<usize>,
    /// Ask for a private network namespace (silently kept when refused).
    pub isolate_network: bool,
}

impl Limits {
    /// Installs the limits on `command` (taking effect in the child).
    pub fn install(&self, command: &mut std::process::Command) {
        let limits = self.clone();
        let mut cpuset: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in &limits.cpus {
            unsafe { libc::CPU_SET(cpu, &mut cpuset) };
        }
        // SAFETY: the closure only makes async-signal-safe system calls on
        // values captured by copy; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                set(libc::RLIMIT_CORE, Some(0))?;
                set(libc::RLIMIT_AS, limits.address_space)?;
                // The soft limit first (SIGXCPU, reported as a timeout); the
                // hard limit's SIGKILL only if that is ignored.
                set_soft_hard(libc::RLIMIT_CPU, limits.cpu_seconds.map(|s| (s, s + 5)))?;
                set(libc::RLIMIT_FSIZE, limits.file_size)?;
                set(libc::RLIMIT_NPROC, limits.processes)?;
                if !limits.cpus.is_empty() {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpuset);
                }
                if limits.isolate_network && libc::unshare(libc::CLONE_NEWNET) != 0 {
                    // Unprivileged: a user namespace may be allowed to own one.
                    libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
                }
                Ok(())
            });
        }
    }
}

fn set(resource: libc::__rlimit_resource_t, value: Option<u64>) -> std::io::Result<()> {
    set_soft_hard(resource, value.map(|v| (v, v)))
}

fn set_soft_hard(
    resource: libc::__rlimit_resource_t,
    value: Option<(u64, u64)>,
) -> std::io::Result<()> {
    let Some((soft, hard)) = value else {
        return Ok(());
    };
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: plain system call on a stack value.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Processes the current real user already runs (RLIMIT_NPROC counts them all).
pub fn user_process_count() -> u64 {
    let uid = nix::unistd::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .is_some_and(|u| u == uid.to_string())
            })
        })
        .map(|e| {
            // Threads count towards RLIMIT_NPROC too.
            std::fs::read_dir(e.path().join("task"))
                .map(|t| t.count() as u64)
                .unwrap_or(1)
        })
        .sum()
}

//! Limits put on an untrusted child before it executes: resource limits and
//! CPU pinning ([`Limits::apply`]), and for a command its own session and
//! process group too, so that a timeout kills the whole group
//! ([`Limits::install`]).
//!
//! Applied between fork and exec, so only async-signal-safe calls are made
//! there: raw `setrlimit`, `setsid` and `sched_setaffinity` on values
//! computed beforehand.

use std::os::unix::process::CommandExt;

use serde::{Deserialize, Serialize};

/// Resource limits of one child; `None` leaves a limit as inherited.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Limits {
    pub address_space: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub file_size: Option<u64>,
    pub processes: Option<u64>,
    /// CPUs the child may run on.
    pub cpus: Vec<usize>,
}

impl Limits {
    /// Installs the limits on `command`, in a session of its own.
    pub fn install(&self, command: &mut std::process::Command) {
        let limits = self.clone();
        // SAFETY: the closure only makes async-signal-safe system calls on
        // values captured by copy; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                limits.apply()
            });
        }
    }

    /// Applies the limits to the calling process. No allocation: safe
    /// between fork and exec.
    pub fn apply(&self) -> std::io::Result<()> {
        set(libc::RLIMIT_CORE, Some(0))?;
        set(libc::RLIMIT_AS, self.address_space)?;
        // The soft limit first (SIGXCPU, reported as a timeout); the
        // hard limit's SIGKILL only if that is ignored.
        set_soft_hard(libc::RLIMIT_CPU, self.cpu_seconds.map(|s| (s, s + 5)))?;
        set(libc::RLIMIT_FSIZE, self.file_size)?;
        set(libc::RLIMIT_NPROC, self.processes)?;
        if !self.cpus.is_empty() {
            // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET bounds-checks.
            let mut cpuset: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &cpu in &self.cpus {
                // SAFETY: CPU_SET writes one bit of the set it is given, in bounds.
                unsafe { libc::CPU_SET(cpu, &mut cpuset) };
            }
            // SAFETY: a stack value of the size passed.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpuset) };
        }
        Ok(())
    }
}

/// Marks every descriptor from `first` on close-on-exec, so a program this
/// process executes next inherits none of them: whatever the process itself
/// inherited (from srun, a shell, a test harness) stops here. A raw system
/// call: safe between fork and exec. Kernels before 5.11 do not know the
/// flag; there the descriptors stay as they are.
pub fn close_on_exec_from(first: u32) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with integer arguments.
    unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) };
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

/// Processes the current user already runs (RLIMIT_NPROC counts them all,
/// threads included). Called for every compile and run of a judge without
/// slot users.
///
/// A process's `/proc` directory belongs to its user, so one stat of each
/// picks the user's processes. Reading every process's `status` instead
/// took 75-80 ms for a user with one process among 2,000 (a large node's
/// kernel threads alone are that many); the stat takes 11 ms. A process
/// of the user's running with another effective user (a setuid program)
/// is owned by that one and not counted; the caller's margin covers a few.
pub fn user_process_count() -> u64 {
    use std::os::unix::fs::MetadataExt;
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
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| {
            std::fs::read_dir(e.path().join("task"))
                .map(|t| t.count() as u64)
                .unwrap_or(1)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_processes_include_this_one_and_its_threads() {
        let threads = 3;
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads + 1));
        let held: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                })
            })
            .collect();
        let own = std::fs::read_dir("/proc/self/task").unwrap().count() as u64;
        let counted = user_process_count();
        barrier.wait();
        held.into_iter().for_each(|t| t.join().unwrap());
        assert!(own > threads as u64, "{own} threads");
        assert!(
            counted >= own,
            "counted {counted}, this process alone has {own} threads"
        );
    }
}

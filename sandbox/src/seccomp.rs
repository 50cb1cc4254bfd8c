//! System-call filters (seccomp-bpf, compiled by `seccompiler`) for the two
//! kinds of untrusted process: a run of a submission, and an agent CLI.
//!
//! Both are deny lists on top of Landlock and namespaces: an allow list
//! would have to know every call a compiler runtime, OpenMP, a GPU driver
//! or Node.js makes, and break on the next release of any of them. What is
//! denied is what reaches beyond the process: other processes (ptrace,
//! their memory, their descriptors), System V and POSIX IPC (state that
//! outlives a run and crosses between runs), Unix sockets (the node's
//! servers: a same-user tmux or D-Bus session runs commands outside any
//! sandbox), io_uring (its operations bypass this filter), and the kernel's
//! own knobs (mounts, namespaces, modules, BPF, keys, clocks). A run may
//! also not create processes or execute programs, so that every thread it
//! has stops when its process is stopped ([`Profile::Run`]).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Which filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// A submission's run: threads only, no programs, no sockets at all.
    /// `counters` keeps `perf_event_open` for PAPI profiles.
    Run { counters: bool },
    /// An agent CLI: it starts programs (compilers, git, its tool server) and
    /// talks TCP to its model, but reaches no Unix socket and no other
    /// process's memory.
    Agent,
}

/// Why a profile's filters could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("no seccomp filter for {0}")]
    Arch(&'static str),
    #[error("seccomp filter: {0}")]
    Filter(#[from] seccompiler::BackendError),
}

/// The filters of a profile, in the order they are installed.
pub struct Filters(Vec<BpfProgram>);

impl Filters {
    /// Compiles the filters of `profile` for this machine's architecture.
    pub fn new(profile: Profile) -> Result<Filters, SeccompError> {
        let arch = target_arch()?;
        let mut programs = vec![compile(denied(profile), libc::EPERM, arch)?];
        if let Profile::Run { .. } = profile {
            // glibc's pthread_create tries clone3 first, whose flags lie
            // behind a pointer no filter can read; ENOSYS makes it fall back
            // to clone, whose flags the other filter checks.
            programs.push(compile(
                BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
                libc::ENOSYS,
                arch,
            )?);
        }
        Ok(Filters(programs))
    }

    /// Installs the filters on the calling thread and everything it starts
    /// (`PR_SET_NO_NEW_PRIVS` first, which the kernel requires). Makes raw
    /// system calls only, so it may run between fork and exec.
    pub fn install(&self) -> std::io::Result<()> {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        for program in &self.0 {
            let fprog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: the program outlives the call; the kernel copies it.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &fprog as *const libc::sock_fprog,
                )
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

fn target_arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<BpfProgram, SeccompError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// Calls that match no rule go through; a call with an empty rule list is
/// denied whatever its arguments.
fn denied(profile: Profile) -> BTreeMap<i64, Vec<SeccompRule>> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALWAYS.iter().map(|&call| (call, Vec::new())).collect();
    match profile {
        Profile::Run { counters } => {
            for &call in RUN_ONLY {
                rules.insert(call, Vec::new());
            }
            if !counters {
                rules.insert(libc::SYS_perf_event_open, Vec::new());
            }
            // A clone without CLONE_THREAD is a new process.
            rules.insert(
                libc::SYS_clone,
                vec![rule(
                    0,
                    SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
                    0,
                )],
            );
            // Another process's priority (outside a PID namespace, the judge's).
            rules.insert(
                libc::SYS_setpriority,
                vec![
                    rule(0, SeccompCmpOp::Ne, libc::PRIO_PROCESS as u64),
                    rule(1, SeccompCmpOp::Ne, 0),
                ],
            );
        }
        Profile::Agent => {
            rules.insert(libc::SYS_perf_event_open, Vec::new());
            rules.insert(
                libc::SYS_socket,
                vec![rule(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)],
            );
        }
    }
    rules
}

fn rule(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompRule {
    let condition = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .expect("argument index below 6");
    SeccompRule::new(vec![condition]).expect("one condition")
}

/// Denied to every untrusted process.
const ALWAYS: &[i64] = &[
    // Other processes.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_process_madvise,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    // State that outlives a process and is shared between them.
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // Operations that bypass this filter, or the kernel's own machinery.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    // Mounts and namespaces.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // The machine.
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_syslog,
    libc::SYS_vhangup,
];

/// Denied to runs only: processes, programs and every socket.
#[cfg(target_arch = "x86_64")]
const RUN_ONLY: &[i64] = &[
    libc::SYS_fork,
    libc::SYS_vfork,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_pidfd_send_signal,
];

/// Denied to runs only (aarch64 has no fork or vfork: clone covers them).
#[cfg(not(target_arch = "x86_64"))]
const RUN_ONLY: &[i64] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_pidfd_send_signal,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `body` in a forked child under `profile`; its exit code.
    fn in_child(profile: Profile, body: impl FnOnce() -> i32) -> i32 {
        let filters = Filters::new(profile).unwrap();
        // SAFETY: the child makes system calls and exits; the test process's
        // other threads are not touched.
        match unsafe { libc::fork() } {
            0 => {
                let code = if filters.install().is_ok() {
                    body()
                } else {
                    99
                };
                // SAFETY: the forked child ends without unwinding into the test harness.
                unsafe { libc::_exit(code) }
            }
            pid => {
                let mut status = 0;
                // SAFETY: waits for the child forked above; `status` outlives the call.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert!(libc::WIFEXITED(status), "status {status}");
                libc::WEXITSTATUS(status)
            }
        }
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn a_run_gets_threads_but_no_process_socket_or_ipc() {
        let code = in_child(Profile::Run { counters: false }, || {
            // SAFETY: raw calls whose results are only compared.
            unsafe {
                if libc::syscall(libc::SYS_clone, libc::SIGCHLD as u64, 0, 0, 0, 0) != -1
                    || errno() != libc::EPERM
                {
                    return 1;
                }
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) != -1 {
                    return 2;
                }
                if libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) != -1 {
                    return 3;
                }
                if libc::shmget(libc::IPC_PRIVATE, 4096, 0o600) != -1 {
                    return 4;
                }
                if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != libc::ENOSYS {
                    return 5;
                }
                if libc::setpriority(libc::PRIO_PROCESS, 1, 10) != -1 {
                    return 6;
                }
                if libc::setpriority(libc::PRIO_PROCESS, 0, 1) != 0 {
                    return 7;
                }
            }
            // glibc falls back from clone3 to clone with CLONE_THREAD.
            match std::thread::spawn(|| 40).join() {
                Ok(40) => 0,
                _ => 8,
            }
        });
        assert_eq!(code, 0, "see the numbered checks");
    }

    #[test]
    fn an_agent_starts_programs_and_talks_tcp_but_reaches_no_unix_socket() {
        let code = in_child(Profile::Agent, || {
            // SAFETY: raw calls whose results are only compared.
            unsafe {
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) != -1 {
                    return 1;
                }
                let tcp = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                if tcp < 0 {
                    return 2;
                }
                libc::close(tcp);
                if libc::shmget(libc::IPC_PRIVATE, 4096, 0o600) != -1 {
                    return 3;
                }
            }
            match std::process::Command::new("true").status() {
                Ok(s) if s.success() => 0,
                _ => 4,
            }
        });
        assert_eq!(code, 0, "see the numbered checks");
    }
}

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
//! has stops when its process is stopped ([`Profile::Run`]); nor ask the
//! kernel to signal it later or on someone else's write (timers, `O_ASYNC`,
//! `F_SETSIG`), continue itself, change its scheduling, priority or CPUs,
//! resize a pipe, or change a file's mode (its channels are mode 0, so
//! that it cannot open them anew): a run is timed from outside, and none of
//! these may move work out of the timed interval.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Which filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// A submission's run: threads only, no programs, no sockets at all.
    /// `counters` keeps `perf_event_open` for PAPI profiles; `sockets`
    /// keeps Internet sockets for a profiled run, whose profiler's library
    /// talks to its profiler over the loopback of the network namespace
    /// they share (and nothing else: the namespace has no other interface).
    /// Unix sockets stay denied: a pathname one reaches the node's servers.
    Run { counters: bool, sockets: bool },
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
        Profile::Run { counters, sockets } => {
            for &call in RUN_ONLY {
                rules.insert(call, Vec::new());
            }
            if sockets {
                rules.insert(
                    libc::SYS_socket,
                    vec![
                        SeccompRule::new(vec![
                            condition(0, SeccompCmpOp::Ne, libc::AF_INET as u64),
                            condition(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64),
                        ])
                        .expect("two conditions"),
                    ],
                );
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
            rules.extend(run_arguments());
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
    SeccompRule::new(vec![condition(arg, op, value)]).expect("one condition")
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).expect("argument index below 6")
}

/// `fcntl` commands that make the kernel signal the process on another's
/// I/O (with the signal it picks: `SIGCONT` would end its stop), or
/// resize a pipe (a small full one blocks its writer).
const F_SETSIG: u64 = 10;
const F_SETOWN_EX: u64 = 15;
/// `ioctl` requests to the same effect as `O_ASYNC` and `F_SETOWN`.
const FIOASYNC: u64 = 0x5452;
const FIOSETOWN: u64 = 0x8901;
const SIOCSPGRP: u64 = 0x8902;
/// `fchmodat2` (Linux 6.6), the same number on x86_64 and aarch64.
const SYS_FCHMODAT2: i64 = 452;

/// Calls a run may make only with some arguments: denied with these.
fn run_arguments() -> Vec<(i64, Vec<SeccompRule>)> {
    let eq = |arg, value: u64| rule(arg, SeccompCmpOp::Eq, value);
    let fcntl = [
        F_SETSIG,
        libc::F_SETOWN as u64,
        F_SETOWN_EX,
        libc::F_SETLEASE as u64,
        libc::F_NOTIFY as u64,
        libc::F_SETPIPE_SZ as u64,
    ];
    let mut fcntl: Vec<SeccompRule> = fcntl.iter().map(|&cmd| eq(1, cmd)).collect();
    // F_SETFL with O_ASYNC: signals on every write to the descriptor.
    fcntl.push(
        SeccompRule::new(vec![
            condition(1, SeccompCmpOp::Eq, libc::F_SETFL as u64),
            condition(
                2,
                SeccompCmpOp::MaskedEq(libc::O_ASYNC as u64),
                libc::O_ASYNC as u64,
            ),
        ])
        .expect("two conditions"),
    );
    let ioctl = [FIOASYNC, FIOSETOWN, SIOCSPGRP];
    // Continuing itself (the signal is the second argument of kill, tkill
    // and rt_sigqueueinfo, the third of tgkill and rt_tgsigqueueinfo).
    let cont = libc::SIGCONT as u64;
    vec![
        (libc::SYS_fcntl, fcntl),
        (libc::SYS_ioctl, ioctl.iter().map(|&r| eq(1, r)).collect()),
        (libc::SYS_kill, vec![eq(1, cont)]),
        (libc::SYS_tkill, vec![eq(1, cont)]),
        (libc::SYS_rt_sigqueueinfo, vec![eq(1, cont)]),
        (libc::SYS_tgkill, vec![eq(2, cont)]),
        (libc::SYS_rt_tgsigqueueinfo, vec![eq(2, cont)]),
    ]
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

/// Denied to runs only: processes, programs, every socket, signals
/// arranged for later, scheduling, and file modes.
const RUN_ONLY: &[i64] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_pidfd_send_signal,
    // A POSIX timer signals the process with the signal it picks; an
    // interval timer or an alarm with theirs: work in a handler then runs
    // when the timer says, not when the supervisor calls. (A timerfd
    // signals nobody: it stays.)
    libc::SYS_timer_create,
    libc::SYS_setitimer,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_alarm,
    // A shorter slice or a higher priority wins wakeups; other CPUs are
    // the supervisor's and other slots'.
    libc::SYS_sched_setattr,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setaffinity,
    libc::SYS_setpriority,
    libc::SYS_ioprio_set,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    SYS_FCHMODAT2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    // aarch64 has no fork or vfork: clone covers them.
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
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
    fn a_profiled_run_gets_internet_sockets_but_no_unix_socket() {
        let profiled = Profile::Run {
            counters: false,
            sockets: true,
        };
        let code = in_child(profiled, || {
            // SAFETY: raw calls whose results are only compared.
            unsafe {
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) != -1 || errno() != libc::EPERM
                {
                    return 1;
                }
                if libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) < 0 {
                    return 2;
                }
                if libc::socket(libc::AF_INET6, libc::SOCK_DGRAM, 0) < 0 && errno() == libc::EPERM {
                    return 3;
                }
                if libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0) != -1 {
                    return 4;
                }
                if libc::syscall(libc::SYS_clone, libc::SIGCHLD as u64, 0, 0, 0, 0) != -1 {
                    return 5;
                }
            }
            0
        });
        assert_eq!(code, 0, "see the numbered checks");
    }

    #[test]
    fn a_run_gets_threads_but_no_process_socket_or_ipc() {
        let code = in_child(
            Profile::Run {
                counters: false,
                sockets: false,
            },
            || {
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
                }
                // glibc falls back from clone3 to clone with CLONE_THREAD.
                match std::thread::spawn(|| 40).join() {
                    Ok(40) => 0,
                    _ => 8,
                }
            },
        );
        assert_eq!(code, 0, "see the numbered checks");
    }

    #[test]
    fn a_run_cannot_arrange_to_be_continued_reschedule_itself_or_reopen_its_channels() {
        let code = in_child(
            Profile::Run {
                counters: false,
                sockets: false,
            },
            || {
                let denied = |r: libc::c_long| r == -1 && errno() == libc::EPERM;
                let mut pipe = [0; 2];
                // SAFETY: raw calls on this process's own descriptors and
                // itself, whose results are only compared.
                unsafe {
                    if libc::pipe(pipe.as_mut_ptr()) != 0 {
                        return 1;
                    }
                    let fd = pipe[0];
                    let fcntl = |cmd: libc::c_int, arg: libc::c_int| {
                        libc::fcntl(fd, cmd, arg) as libc::c_long
                    };
                    if !denied(fcntl(10, libc::SIGCONT)) {
                        return 2; // F_SETSIG
                    }
                    if !denied(fcntl(libc::F_SETOWN, libc::getpid())) {
                        return 3;
                    }
                    if !denied(fcntl(libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK)) {
                        return 4;
                    }
                    if fcntl(libc::F_SETFL, libc::O_NONBLOCK) != 0 {
                        return 5; // other flags stay allowed
                    }
                    if !denied(fcntl(libc::F_SETPIPE_SZ, 4096)) {
                        return 6;
                    }
                    let on: libc::c_int = 1;
                    if !denied(libc::ioctl(fd, libc::FIOASYNC, &on) as libc::c_long) {
                        return 7;
                    }
                    let mut timer: libc::timer_t = std::mem::zeroed();
                    let r =
                        libc::timer_create(libc::CLOCK_MONOTONIC, std::ptr::null_mut(), &mut timer);
                    if !denied(r as libc::c_long) {
                        return 8;
                    }
                    let every = libc::itimerval {
                        it_interval: libc::timeval {
                            tv_sec: 0,
                            tv_usec: 1000,
                        },
                        it_value: libc::timeval {
                            tv_sec: 0,
                            tv_usec: 1000,
                        },
                    };
                    let r = libc::setitimer(libc::ITIMER_REAL, &every, std::ptr::null_mut());
                    if !denied(r as libc::c_long) {
                        return 17;
                    }
                    #[cfg(target_arch = "x86_64")]
                    if !denied(libc::syscall(libc::SYS_alarm, 1)) {
                        return 18;
                    }
                    if !denied(libc::kill(libc::getpid(), libc::SIGCONT) as libc::c_long) {
                        return 9;
                    }
                    let tgkill = libc::syscall(
                        libc::SYS_tgkill,
                        libc::getpid(),
                        libc::gettid(),
                        libc::SIGCONT,
                    );
                    if !denied(tgkill) {
                        return 10;
                    }
                    if libc::kill(libc::getpid(), 0) != 0 {
                        return 11; // other signals stay allowed
                    }
                    if !denied(libc::setpriority(libc::PRIO_PROCESS, 0, 1) as libc::c_long) {
                        return 12;
                    }
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(0, &mut set);
                    let size = std::mem::size_of::<libc::cpu_set_t>();
                    if !denied(libc::sched_setaffinity(0, size, &set) as libc::c_long) {
                        return 13;
                    }
                    if !denied(libc::syscall(libc::SYS_sched_setattr, 0, 0, 0)) {
                        return 14;
                    }
                    if !denied(libc::fchmod(fd, 0o600) as libc::c_long) {
                        return 15;
                    }
                    let path = c"/proc/self/fd/0";
                    if !denied(
                        libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), 0o600, 0) as libc::c_long
                    ) {
                        return 16;
                    }
                }
                0
            },
        );
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

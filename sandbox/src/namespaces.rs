//! Namespaces of a run's own.
//!
//! A program started by [`Spawn::start`] runs in new PID, mount, IPC and
//! network namespaces: it sees no other process of the node (its `/proc` is
//! mounted afresh and lists its namespace only), System V and POSIX IPC
//! objects it makes die with it and no other run sees them, its abstract
//! Unix sockets and network are its own (loopback, down; a profiled run
//! shares its profiler's, [`own_loopback_network`]). It gets the
//! descriptors it is given as 0, 1, 2, … and no other, in a session of its
//! own.
//!
//! It is the second process of its PID namespace, and the starter's child.
//! The first (its init, a loop that only waits to be killed) keeps the
//! namespace: the first process of a PID namespace ignores every signal it
//! sends itself, so a program that is first would not die of its own
//! `abort()`, file-size or CPU limit; and killing the init ends every
//! process left in the namespace. The starter stays the program's parent,
//! so it sees it stop and end (`waitpid`).
//!
//! The starter first moves into a PID namespace of its own
//! ([`own_pid_namespace`]), so that it may make one for each program and
//! return to its own after each; an unprivileged one takes a user
//! namespace of its own first, in which it holds the capabilities to
//! create the others, its user and group mapped to themselves so files keep
//! their owners. The programs it starts run as that same (non-root) user,
//! and `exec` drops the namespace's capabilities, so a program cannot
//! unmount its `/proc` to see the node's.

use std::ffi::CString;
use std::os::fd::RawFd;

use crate::limits::Limits;

/// Why a namespace could not be made or a program started in one.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("cannot make a PID namespace: {0}")]
    PidNamespace(std::io::Error),
    #[error("the kernel refuses this user a user namespace: {0}")]
    UserNamespace(std::io::Error),
    #[error("fork: {0}")]
    Fork(std::io::Error),
    /// A file it needs (under `/proc/self`, or `/dev/null`).
    #[error("{path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("{0} descriptors for a runner")]
    TooManyDescriptors(usize),
    #[error("cannot make mount, IPC and network namespaces: {0}")]
    Unshare(std::io::Error),
    #[error("cannot mount a /proc of its own: {0}")]
    Proc(std::io::Error),
    #[error("cannot bring loopback up: {0}")]
    Loopback(std::io::Error),
    #[error("cannot return to its own PID namespace: {0}")]
    ReturnToOwn(std::io::Error),
    #[error("cannot start a runner: {0}")]
    Clone(std::io::Error),
    #[error("a process in namespaces of its own failed {0}")]
    ProbeFailed(&'static str),
    #[error("the probe ended with status {0}")]
    ProbeStatus(i32),
}

fn file_error(path: &str) -> impl FnOnce(std::io::Error) -> NamespaceError + '_ {
    move |source| NamespaceError::File {
        path: path.to_string(),
        source,
    }
}

/// Most descriptors a spawned program is given.
const MAX_FDS: usize = 8;

/// Moves the calling process into a PID namespace of its own (and, unless
/// root, a user namespace of its own first): it forks, the original waits
/// for the fork and exits with its status, and the fork returns from here,
/// the first process of the new namespace. Every process it starts dies
/// with it. The process must be single-threaded.
pub fn own_pid_namespace() -> Result<(), NamespaceError> {
    if !nix::unistd::geteuid().is_root() {
        own_user_namespace()?;
    }
    // SAFETY: unshare with a flag (pid_for_children only), then fork in a
    // single-threaded process.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        return Err(NamespaceError::PidNamespace(std::io::Error::last_os_error()));
    }
    // SAFETY: as above, this process is single-threaded.
    match unsafe { libc::fork() } {
        -1 => Err(NamespaceError::Fork(std::io::Error::last_os_error())),
        0 => {
            // It dies with the original.
            crate::reap::die_with_parent(libc::SIGKILL);
            Ok(())
        }
        child => {
            let mut status = 0;
            // SAFETY: waits for our own child.
            while unsafe { libc::waitpid(child, &mut status, 0) } < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            std::process::exit(code)
        }
    }
}

/// Moves the calling process into PID, mount, IPC and network namespaces
/// of its own (and a user namespace first, unless root), with a `/proc`
/// that lists its PID namespace only: [`own_pid_namespace`], then the rest,
/// for a process that starts programs in them itself (a compiler's
/// wrapper) rather than one program per namespace ([`Spawn`]). Returns in
/// the new namespaces' first process; the process must be single-threaded.
pub fn own_namespaces() -> Result<(), NamespaceError> {
    own_pid_namespace()?;
    // SAFETY: unshare with flags; the process is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWNET) } != 0 {
        return Err(NamespaceError::Unshare(std::io::Error::last_os_error()));
    }
    // SAFETY: mount with constant C strings.
    let mounted = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
            && libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) == 0
    };
    if !mounted {
        return Err(NamespaceError::Proc(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Gives the calling process a user namespace of its own, its user and
/// group mapped to themselves. The process must be single-threaded.
fn own_user_namespace() -> Result<(), NamespaceError> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    // SAFETY: unshare with a flag; the caller is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        return Err(NamespaceError::UserNamespace(
            std::io::Error::last_os_error(),
        ));
    }
    let write = |file: &str, text: String| {
        let path = format!("/proc/self/{file}");
        std::fs::write(&path, text).map_err(file_error(&path))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1"))?;
    write("gid_map", format!("{gid} {gid} 1"))
}

/// Moves the calling process into a network namespace of its own, whose
/// only interface, loopback, is up (unless root, into a user namespace of
/// its own first, where it may make one). A profiled run lives in one: the
/// profiler, the supervisor and the runner talk over loopback and reach
/// nothing else. The process must be single-threaded.
pub fn own_loopback_network() -> Result<(), NamespaceError> {
    if !nix::unistd::geteuid().is_root() {
        own_user_namespace()?;
    }
    // SAFETY: unshare with a flag; the caller is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(NamespaceError::Unshare(std::io::Error::last_os_error()));
    }
    loopback_up().map_err(NamespaceError::Loopback)
}

/// Sets `lo` up in this process's network namespace.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a socket of this process's, and an ifreq it owns.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let socket = <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(socket);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *to = *from as libc::c_char;
        }
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A program to start, alone, in namespaces of its own.
pub struct Spawn {
    pub program: CString,
    /// Its arguments, the program's name first.
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    /// Descriptors of this process the program gets as 0, 1, 2, … (at most 8).
    pub fds: Vec<RawFd>,
    /// Its resource limits and CPUs.
    pub limits: Limits,
    /// New PID, mount, IPC and network namespaces; `false` starts a plain
    /// child (the weaker isolation an operator may allow where the kernel
    /// offers no namespaces).
    pub namespaces: bool,
    /// A network namespace of its own (loopback only, down); `false` shares
    /// this process's, as a profiled run does its profiler's
    /// ([`own_loopback_network`]). Only with `namespaces`.
    pub own_network: bool,
    /// The same address-space layout every time (no randomization): two
    /// programs started alike then place their code, stack and memory at
    /// the same addresses, and use the caches alike.
    pub same_layout: bool,
}

/// Why a started child exited before `exec`: its exit code names the step.
pub fn describe_start_failure(code: i32) -> Option<&'static str> {
    Some(match code {
        120 => "making its mounts private",
        121 => "mounting its own /proc",
        122 => "setting its limits",
        123 => "placing its descriptors",
        124 => "executing the program",
        _ => return None,
    })
}

/// What the child reads after `clone`: all of it made by the parent, so the
/// child allocates nothing.
struct Child<'a> {
    spawn: &'a Spawn,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

/// A started program: its process id, and its namespace's init (both in
/// the starter's PID namespace, both its children).
#[derive(Debug, Clone, Copy)]
pub struct Started {
    pub pid: libc::pid_t,
    pub init: Option<libc::pid_t>,
}

impl Spawn {
    /// Starts the program.
    pub fn start(&self) -> Result<Started, NamespaceError> {
        if self.fds.len() > MAX_FDS {
            return Err(NamespaceError::TooManyDescriptors(self.fds.len()));
        }
        let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let child = Child {
            spawn: self,
            argv: pointers(&self.argv),
            envp: pointers(&self.envp),
        };
        if !self.namespaces {
            let pid = clone_with(enter, &child, 0)?;
            return Ok(Started { pid, init: None });
        }
        // New PID namespaces are for this process's children from here on,
        // until it takes its own back (for the next runner's).
        let own =
            std::fs::File::open("/proc/self/ns/pid").map_err(file_error("/proc/self/ns/pid"))?;
        // SAFETY: unshare with a flag; pid_for_children only.
        if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
            return Err(NamespaceError::PidNamespace(std::io::Error::last_os_error()));
        }
        let init = clone_with(keep_namespace, &child, 0);
        let pid = init.and_then(|init| {
            let network = if self.own_network {
                libc::CLONE_NEWNET
            } else {
                0
            };
            let flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC | network;
            clone_with(enter, &child, flags).map(|pid| (pid, init))
        });
        // SAFETY: setns back into this process's own PID namespace.
        let back =
            unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&own), libc::CLONE_NEWPID) };
        if back != 0 {
            return Err(NamespaceError::ReturnToOwn(std::io::Error::last_os_error()));
        }
        let (pid, init) = pid?;
        Ok(Started {
            pid,
            init: Some(init),
        })
    }
}

/// Clones a child that runs `body` on its own stack with `flags` (and
/// SIGCHLD when it ends); its process id.
fn clone_with(
    body: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    child: &Child,
    flags: libc::c_int,
) -> Result<libc::pid_t, NamespaceError> {
    let mut stack = vec![0u8; 256 << 10];
    // The stack grows down from its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    // SAFETY: the child runs `body` on its own copy of this process's memory
    // (no CLONE_VM), where `child` and `stack` stay valid, and leaves by
    // execve or _exit.
    let pid = unsafe {
        libc::clone(
            body,
            top as *mut libc::c_void,
            flags | libc::SIGCHLD,
            child as *const Child as *mut libc::c_void,
        )
    };
    if pid < 0 {
        return Err(NamespaceError::Clone(std::io::Error::last_os_error()));
    }
    Ok(pid)
}

/// A PID namespace's init: it waits to be killed (its parent's death kills
/// it too), and every process left in the namespace dies with it.
extern "C" fn keep_namespace(_: *mut libc::c_void) -> libc::c_int {
    crate::reap::die_with_parent(libc::SIGKILL);
    // SAFETY: prctl, close_range, setsid and pause take no pointers.
    unsafe {
        // The program shares its namespace with it, and may share its user.
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        // It holds nothing open: a pipe end it kept would hide the
        // program's end from whoever reads the other.
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0);
        libc::setsid();
        loop {
            libc::pause();
        }
    }
}

/// The child's side of [`Spawn::start`]: system calls only, then `execve`.
extern "C" fn enter(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Child`, in this process's copy of its memory.
    let child = unsafe { &*(arg as *const Child) };
    let spawn = child.spawn;
    // SAFETY: raw system calls on values the parent prepared.
    unsafe {
        // A session of its own: its process group is no one else's.
        libc::setsid();
        if spawn.namespaces {
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                libc::_exit(120);
            }
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
            {
                libc::_exit(121);
            }
        }
        crate::reap::die_with_parent(libc::SIGKILL);
        // The starter may block signals it reads as a descriptor (SIGCHLD,
        // see `hold`): the program starts with none blocked.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if spawn.same_layout {
            libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
        }
        if spawn.limits.apply().is_err() {
            libc::_exit(122);
        }
        if place_fds(&spawn.fds).is_err() {
            libc::_exit(123);
        }
        libc::execve(
            spawn.program.as_ptr(),
            child.argv.as_ptr(),
            child.envp.as_ptr(),
        );
        libc::_exit(124)
    }
}

/// Puts `fds[i]` at descriptor `i` and closes every other descriptor.
fn place_fds(fds: &[RawFd]) -> Result<(), ()> {
    let n = fds.len();
    let mut moved = [0 as RawFd; MAX_FDS];
    // SAFETY: fcntl, dup2 and close_range on descriptors of this process.
    unsafe {
        // First out of the way of the targets, then into place.
        for (i, &fd) in fds.iter().enumerate() {
            moved[i] = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 64);
            if moved[i] < 0 {
                return Err(());
            }
        }
        for (i, &fd) in moved[..n].iter().enumerate() {
            if libc::dup2(fd, i as RawFd) < 0 {
                return Err(());
            }
        }
        if libc::syscall(libc::SYS_close_range, n as u32, u32::MAX, 0) != 0 {
            // Kernels before 5.9: close one by one.
            for fd in n as RawFd..1024 {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

/// Whether this process may start runs in namespaces of their own: it tries,
/// twice (each in its own), with a program that exits at once. Moves into
/// namespaces of its own first, so call it in a process of its own
/// (`hpcagent judge exec --probe`).
pub fn probe(program: &std::path::Path) -> Result<(), NamespaceError> {
    own_pid_namespace()?;
    for _ in 0..2 {
        probe_once(program)?;
    }
    Ok(())
}

fn probe_once(program: &std::path::Path) -> Result<(), NamespaceError> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(file_error("/dev/null"))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
    let c = |s: &str| CString::new(s).expect("no NUL");
    let spawn = Spawn {
        program: c(&program.display().to_string()),
        argv: vec![c("hpcagent"), c("--version")],
        envp: Vec::new(),
        fds: vec![fd, fd, fd],
        limits: Limits::default(),
        namespaces: true,
        own_network: true,
        same_layout: false,
    };
    let started = spawn.start()?;
    let mut status = 0;
    // SAFETY: waits for the child just started, then ends its namespace.
    unsafe {
        libc::waitpid(started.pid, &mut status, 0);
        if let Some(init) = started.init {
            libc::kill(init, libc::SIGKILL);
            libc::waitpid(init, std::ptr::null_mut(), 0);
        }
    }
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(code) => Err(NamespaceError::ProbeFailed(
            describe_start_failure(code).unwrap_or("to run"),
        )),
        None => Err(NamespaceError::ProbeStatus(status)),
    }
}

//! The walls around untrusted code: a submission's run, a compiler, an agent
//! CLI. Owns the mechanisms, not the policy of who gets which:
//!
//! - [`namespaces`]: a user namespace of the caller's own (so an
//!   unprivileged judge may make the others), and starting a program as the
//!   first process of new PID, mount, IPC and network namespaces, with its
//!   own `/proc`, only the descriptors it is given, and its limits;
//! - [`hold`]: holding a run stopped from outside, in a way it cannot
//!   undo (ptrace-stops), and its children's events as a descriptor;
//! - [`seccomp`]: the system calls a run or an agent CLI may not make;
//! - [`landlock`]: the files it may read and write, the ports it may
//!   connect to, the processes it may signal;
//! - [`limits`]: its session, resource limits and CPUs;
//! - [`reap`]: stopping and killing a process tree, so nothing outlives the
//!   work it was started for.
//!
//! It does not decide what is untrusted, where sandbox directories go, or
//! what a run computes: the judge and the agent role do.

pub mod hold;
pub mod landlock;
pub mod limits;
pub mod namespaces;
pub mod reap;
pub mod seccomp;

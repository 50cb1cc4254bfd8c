//! Landlock confinement, inherited across `exec`: applied by the runner to
//! itself before it loads untrusted code ([`Confinement::apply`]), and to a
//! compiler between fork and exec ([`Confinement::install`], with the rules
//! made beforehand in the judge, so that no helper process is started).
//!
//! Read-only: the system directories a compiler or a shared object needs.
//! Read-write: the sandbox directory (and `/dev`, for `/dev/null` and GPU
//! device files). Everything else (the judge's cache, the reference outputs,
//! the user's files) is out of reach. Where the kernel supports it, TCP bind and
//! connect are denied and signals to processes outside the sandbox (the judge)
//! are blocked. Landlock is best-effort by design: on an older kernel the
//! status says what was enforced, and the judge reports it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    path_beneath_rules,
};
use serde::{Deserialize, Serialize};

/// System directories readable inside the sandbox.
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
];

/// Device files a sandboxed process may use (not all of `/dev`: no `/dev/shm`
/// to outlive the run or talk to other runs through).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// GPU device nodes, by prefix in `/dev`.
const GPU_DEVICES: &[&str] = &["nvidia", "kfd", "dri"];

/// What a confined process may touch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Confinement {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
}

/// How much of the confinement the kernel enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    Full,
    Partial,
    None,
}

impl Confinement {
    /// Restricts the calling process (and everything it later runs).
    pub fn apply(&self) -> Result<Enforcement, String> {
        let status: RestrictionStatus = self
            .ruleset()
            .and_then(|r| r.restrict_self())
            .map_err(|e| format!("landlock: {e}"))?;
        Ok(match status.ruleset {
            RulesetStatus::FullyEnforced => Enforcement::Full,
            RulesetStatus::PartiallyEnforced => Enforcement::Partial,
            RulesetStatus::NotEnforced => Enforcement::None,
        })
    }

    /// Makes `command`'s process confined, and `as_user` when given, before
    /// it executes. The rules are made now; the child only switches user and
    /// restricts itself, with async-signal-safe system calls.
    pub fn install(&self, command: &mut Command, as_user: Option<u32>) -> Result<(), String> {
        let ruleset: Option<OwnedFd> = self.ruleset().map_err(|e| format!("landlock: {e}"))?.into();
        // SAFETY: the closure makes raw system calls only, on values it owns.
        unsafe {
            command.pre_exec(move || {
                if let Some(id) = as_user {
                    switch_user(id)?;
                }
                // No ruleset: the kernel has no Landlock (best effort, as in `apply`).
                if let Some(fd) = &ruleset
                    && (libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                        || libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) != 0)
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    fn ruleset(&self) -> Result<RulesetCreated, RulesetError> {
        let abi = ABI::V6;
        let read_dirs: Vec<PathBuf> = SYSTEM_READ
            .iter()
            .map(PathBuf::from)
            .chain(self.read.iter().cloned())
            .filter(|p| p.exists())
            .collect();
        let write_dirs: Vec<PathBuf> = self.write.iter().filter(|p| p.exists()).cloned().collect();
        let devices = devices();
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
            .and_then(|r| r.scope(Scope::Signal | Scope::AbstractUnixSocket))
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(&read_dirs, AccessFs::from_read(abi))))
            .and_then(|r| r.add_rules(path_beneath_rules(&write_dirs, AccessFs::from_all(abi))))
            .and_then(|r| r.add_rules(path_beneath_rules(&devices, AccessFs::from_file(abi))))
    }
}

/// The device files to allow: the harmless ones, and the GPU's.
fn devices() -> Vec<PathBuf> {
    let gpu = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            GPU_DEVICES
                .iter()
                .any(|p| e.file_name().to_string_lossy().starts_with(p))
        })
        .map(|e| e.path());
    DEVICES
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .chain(gpu)
        .collect()
}

/// Becomes `id` (user and group) with no supplementary groups, for good.
pub fn become_user(id: u32) -> Result<(), String> {
    switch_user(id).map_err(|e| format!("cannot become uid {id}: {e}"))
}

/// [`become_user`] without allocating, for use between fork and exec.
fn switch_user(id: u32) -> std::io::Result<()> {
    // SAFETY: plain system calls; the order (groups, gid, uid) is the one that
    // leaves no way back to root.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(id) != 0
            || libc::setuid(id) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

//! Landlock confinement, applied by a process to itself before it loads or
//! runs untrusted code (it is inherited across `exec`).
//!
//! Read-only: the system directories a compiler or a shared object needs.
//! Read-write: the sandbox directory (and `/dev`, for `/dev/null` and GPU
//! device files). Everything else (the judge's cache, the reference outputs,
//! the user's files) is out of reach. Where the kernel supports it, TCP bind and
//! connect are denied and signals to processes outside the sandbox (the judge)
//! are blocked. Landlock is best-effort by design: on an older kernel the
//! status says what was enforced, and the judge reports it.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use serde::{Deserialize, Serialize};

/// System directories readable inside the sandbox.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
];

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
        let abi = ABI::V6;
        let read_dirs: Vec<PathBuf> = SYSTEM_READ
            .iter()
            .map(PathBuf::from)
            .chain(self.read.iter().cloned())
            .filter(|p| p.exists())
            .collect();
        let write_dirs: Vec<PathBuf> = self
            .write
            .iter()
            .cloned()
            .chain(std::iter::once(PathBuf::from("/dev")))
            .filter(|p| p.exists())
            .collect();
        let status: RestrictionStatus = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
            .and_then(|r| r.scope(Scope::Signal | Scope::AbstractUnixSocket))
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(&read_dirs, AccessFs::from_read(abi))))
            .and_then(|r| r.add_rules(path_beneath_rules(&write_dirs, AccessFs::from_all(abi))))
            .and_then(|r| r.restrict_self())
            .map_err(|e| format!("landlock: {e}"))?;
        Ok(match status.ruleset {
            RulesetStatus::FullyEnforced => Enforcement::Full,
            RulesetStatus::PartiallyEnforced => Enforcement::Partial,
            RulesetStatus::NotEnforced => Enforcement::None,
        })
    }
}

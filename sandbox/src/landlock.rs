//! Landlock rules: which files a confined process may read and write, which
//! TCP ports it may connect to, and that it may signal no process outside
//! its domain nor reach an abstract Unix socket made outside it. Inherited
//! across `exec`. Applied by a process to itself ([`Confinement::apply`]),
//! or prepared beforehand and applied between fork and exec
//! ([`Confinement::prepare`], [`restrict_self`]).
//!
//! Landlock is best-effort by design: on an older kernel the status says
//! what was enforced. What it cannot do at all (a pathname Unix socket is
//! reached by `connect`, which needs no file access right before ABI 9) the
//! seccomp filters and namespaces of [`crate::seccomp`] and
//! [`crate::namespaces`] close.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    path_beneath_rules,
};
use serde::{Deserialize, Serialize};

/// System directories a compiler, a shared object or a program needs to read.
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
];

/// Device files a confined process may use (not all of `/dev`: no `/dev/shm`
/// to outlive a run or talk to other runs through).
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
    /// Readable trees besides [`SYSTEM_READ`] (when `system` is set).
    pub read: Vec<PathBuf>,
    /// Readable and writable trees.
    pub write: Vec<PathBuf>,
    /// Whether the system directories are readable.
    pub system: bool,
    /// TCP ports it may connect to (none: no TCP at all). Binding is never allowed.
    pub connect: Vec<u16>,
    /// TCP is not Landlock's to govern (`connect` is moot): a profiled
    /// run's network namespace has loopback only, which its profiler uses.
    #[serde(default)]
    pub any_tcp: bool,
    /// Whether the node's GPU device files are usable.
    pub gpus: bool,
}

/// How much of the confinement the kernel enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    Full,
    Partial,
    None,
}

/// Why a confinement could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("landlock: {0}")]
    Ruleset(#[from] RulesetError),
    #[error("cannot become uid {uid}: {source}")]
    BecomeUser { uid: u32, source: std::io::Error },
}

impl Confinement {
    /// Restricts the calling thread (and everything it later starts).
    pub fn apply(&self) -> Result<Enforcement, LandlockError> {
        let status: RestrictionStatus = self.ruleset().and_then(|r| r.restrict_self())?;
        Ok(match status.ruleset {
            RulesetStatus::FullyEnforced => Enforcement::Full,
            RulesetStatus::PartiallyEnforced => Enforcement::Partial,
            RulesetStatus::NotEnforced => Enforcement::None,
        })
    }

    /// The ruleset, made now, for [`restrict_self`] between fork and exec;
    /// `None` where the kernel has no Landlock (best effort, as in [`apply`]).
    ///
    /// [`apply`]: Confinement::apply
    pub fn prepare(&self) -> Result<Option<OwnedFd>, LandlockError> {
        let ruleset = self.ruleset()?;
        Ok(ruleset.into())
    }

    fn ruleset(&self) -> Result<RulesetCreated, RulesetError> {
        let abi = ABI::V6;
        let system = SYSTEM_READ
            .iter()
            .filter(|_| self.system)
            .map(PathBuf::from);
        let read_dirs: Vec<PathBuf> = system
            .chain(self.read.iter().cloned())
            .filter(|p| p.exists())
            .collect();
        let write_dirs: Vec<PathBuf> = self.write.iter().filter(|p| p.exists()).cloned().collect();
        let devices = devices(self.gpus);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?;
        if !self.any_tcp {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        let mut created = ruleset
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(&read_dirs, AccessFs::from_read(abi))))
            .and_then(|r| r.add_rules(path_beneath_rules(&write_dirs, AccessFs::from_all(abi))))
            .and_then(|r| r.add_rules(path_beneath_rules(&devices, AccessFs::from_file(abi))))?;
        for &port in &self.connect {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
        Ok(created)
    }
}

/// Enforces a prepared ruleset on the calling thread, with
/// `PR_SET_NO_NEW_PRIVS`. Raw system calls only: safe between fork and exec.
pub fn restrict_self(ruleset: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: prctl and landlock_restrict_self take integers.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The Landlock ABI version the kernel offers (0 when none).
pub fn abi_version() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no pointers.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}

/// The device files to allow: the harmless ones, and the GPU's when asked.
fn devices(gpus: bool) -> Vec<PathBuf> {
    let gpu = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            gpus && GPU_DEVICES
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

/// Every tree under `/` except `hidden` ones (and what lies below them):
/// Landlock only allows, so a tree is hidden by allowing each of its
/// siblings, level by level down from `/`. Only what exists now is listed;
/// a directory made later beside a hidden one stays out of reach too.
pub fn everything_but(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .collect();
    let mut open = vec![PathBuf::from("/")];
    for h in &hidden {
        let Some(i) = open.iter().position(|a| h.starts_with(a)) else {
            continue;
        };
        let above = open.swap_remove(i);
        let mut level = above;
        for part in h.strip_prefix(&level).unwrap_or(Path::new("")).components() {
            let next = level.join(part);
            let siblings = std::fs::read_dir(&level).into_iter().flatten();
            open.extend(
                siblings
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| *p != next),
            );
            level = next;
        }
    }
    // A tree that holds a hidden one was split above; drop what a later
    // hidden path reached inside an earlier sibling list. Symbolic links
    // lead to what other entries cover (`/bin` to `/usr/bin`); sockets and
    // FIFOs (`/dev/log`, `/dev/stdin` through `/proc/self/fd`) take no rule.
    open.retain(|p| {
        !hidden.iter().any(|h| p.starts_with(h))
            && std::fs::symlink_metadata(p).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                let t = m.file_type();
                t.is_dir() || t.is_file() || t.is_char_device() || t.is_block_device()
            })
    });
    open
}

/// Becomes `id` (user and group) with no supplementary groups, for good.
pub fn become_user(id: u32) -> Result<(), LandlockError> {
    switch_user(id).map_err(|source| LandlockError::BecomeUser { uid: id, source })
}

/// [`become_user`] without allocating, for use between fork and exec.
pub fn switch_user(id: u32) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_but_leaves_out_exactly_the_hidden_trees() {
        let root = tempfile_dir();
        for dir in ["a/x", "a/y/secret", "a/y/open", "b"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        let hidden = [root.join("a/y/secret"), root.join("b")];
        let open = everything_but(&hidden);
        let covered = |p: &Path| open.iter().any(|o| p.starts_with(o));
        assert!(covered(&root.join("a/x")));
        assert!(covered(&root.join("a/y/open")));
        assert!(covered(Path::new("/usr/lib")));
        assert!(!covered(&root.join("a/y/secret")));
        assert!(!covered(&root.join("b")));
        assert!(!covered(&root.join("a/y")), "a parent of a hidden tree");
        assert!(!open.contains(&PathBuf::from("/")));
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hpcagent-landlock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }
}

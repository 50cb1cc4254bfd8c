//! An attempt's workspace: the one directory an agent's file tools reach.
//!
//! Paths are relative to the workspace. One that is absolute, climbs out with
//! `..`, or leads out through a symbolic link (an external agent CLI has a
//! shell and can make one) is refused with a reason the model can read.
//!
//! The tools run in the agent role, outside the CLI's sandbox, so what the
//! CLI leaves in its workspace is hostile: files are opened beneath the
//! workspace by the kernel (`openat2` with `RESOLVE_BENEATH`, so a link
//! swapped in after the check cannot lead out), without blocking (a FIFO
//! would otherwise wait forever for a writer), and only when they are plain
//! files with one name (a hard link would reach a file outside that the
//! role's user can read). Reads stop at their limit rather than reading a
//! file whole. Callers on an async runtime still run these off it, with a
//! deadline (see `tools.rs`): a file system may hang where no flag helps.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

/// The most a `read_file` returns; longer files are cut with a note.
pub const READ_LIMIT: usize = 256 << 10;
/// The most a `write_file` takes, and the largest source a grade sends.
pub const WRITE_LIMIT: usize = 1 << 20;
/// The most entries a `list_files` names.
pub const LIST_LIMIT: usize = 2000;

/// Why a workspace operation was refused or failed; the text is what the
/// model reads.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("{0:?} is absolute; give a path inside the workspace, like \"solution.c\"")]
    Absolute(String),
    #[error("{0:?} leads out of the workspace")]
    OutOfWorkspace(String),
    #[error("{0:?} is not a relative path")]
    NotRelative(String),
    #[error("{0:?} leads out of the workspace (through a link)")]
    ThroughLink(String),
    #[error("{path:?} is {kind}, not a plain file; the tools read and write plain files only")]
    NotPlain { path: String, kind: &'static str },
    #[error(
        "{path:?} has {names} names (a hard link); the tools read and write only files with one name"
    )]
    HardLinked { path: String, names: u64 },
    #[error("{path:?} has {bytes} bytes, more than a source may have here ({WRITE_LIMIT})")]
    SourceTooBig { path: String, bytes: u64 },
    #[error("{0} bytes is more than a file may hold here ({WRITE_LIMIT})")]
    WriteTooBig(usize),
    #[error("give a file name")]
    NoFileName,
    #[error("cannot {doing} {path:?}: {source}")]
    Io {
        doing: &'static str,
        path: String,
        source: std::io::Error,
    },
}

impl WorkspaceError {
    fn io(doing: &'static str, path: &str) -> impl FnOnce(std::io::Error) -> WorkspaceError {
        let path = path.to_string();
        move |source| WorkspaceError::Io {
            doing,
            path,
            source,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// A file's first bytes, up to a limit, and how many it has in all.
struct Head {
    bytes: Vec<u8>,
    size: u64,
}

impl Workspace {
    /// The workspace of an attempt: `<attempt_dir>/workspace`, created if absent.
    pub fn create(attempt_dir: &Path) -> std::io::Result<Workspace> {
        let root = attempt_dir.join("workspace");
        std::fs::create_dir_all(&root)?;
        Ok(Workspace {
            root: root.canonicalize()?,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file `relative` names, if it stays inside the workspace.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, WorkspaceError> {
        let full = self.root.join(inside(relative)?);
        self.check_links(&full, relative)?;
        Ok(full)
    }

    /// Refuses a path whose existing part resolves outside the workspace.
    fn check_links(&self, full: &Path, relative: &str) -> Result<(), WorkspaceError> {
        let existing = full
            .ancestors()
            .find(|p| p.symlink_metadata().is_ok())
            .unwrap_or(&self.root);
        let real = existing
            .canonicalize()
            .map_err(WorkspaceError::io("resolve", relative))?;
        if real.starts_with(&self.root) {
            Ok(())
        } else {
            Err(WorkspaceError::ThroughLink(relative.to_string()))
        }
    }

    /// The text of a file, cut at [`READ_LIMIT`] with a note.
    pub fn read(&self, relative: &str) -> Result<String, WorkspaceError> {
        let head = self.head(relative, READ_LIMIT)?;
        let mut text = String::from_utf8_lossy(&head.bytes).into_owned();
        if head.size > READ_LIMIT as u64 {
            text.push_str(&format!(
                "\n[cut: the file has {} bytes, only the first {READ_LIMIT} are shown]",
                head.size
            ));
        }
        Ok(text)
    }

    /// A source file to grade, whole: one over [`WRITE_LIMIT`] is refused,
    /// since a cut source would be graded as something the agent never wrote.
    pub fn read_source(&self, relative: &str) -> Result<String, WorkspaceError> {
        let head = self.head(relative, WRITE_LIMIT)?;
        if head.size > WRITE_LIMIT as u64 {
            return Err(WorkspaceError::SourceTooBig {
                path: relative.to_string(),
                bytes: head.size,
            });
        }
        Ok(String::from_utf8_lossy(&head.bytes).into_owned())
    }

    fn head(&self, relative: &str, limit: usize) -> Result<Head, WorkspaceError> {
        let file = self.open(relative, OFlag::O_RDONLY)?;
        let size = plain_file(&file, relative)?.len();
        let mut bytes = Vec::with_capacity(limit.min(size as usize));
        file.take(limit as u64)
            .read_to_end(&mut bytes)
            .map_err(WorkspaceError::io("read", relative))?;
        Ok(Head { bytes, size })
    }

    pub fn write(&self, relative: &str, content: &str) -> Result<usize, WorkspaceError> {
        if content.len() > WRITE_LIMIT {
            return Err(WorkspaceError::WriteTooBig(content.len()));
        }
        let path = self.resolve(relative)?;
        if path == self.root {
            return Err(WorkspaceError::NoFileName);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(WorkspaceError::io("write", relative))?;
        }
        // Not truncated on open: a hard link must be refused before its
        // target loses a byte.
        let mut file = self.open(relative, OFlag::O_WRONLY | OFlag::O_CREAT)?;
        plain_file(&file, relative)?;
        file.set_len(0)
            .and_then(|()| file.write_all(content.as_bytes()))
            .map_err(WorkspaceError::io("write", relative))?;
        Ok(content.len())
    }

    /// The files under `relative` (the whole workspace for ""), with sizes,
    /// at most [`LIST_LIMIT`] of them; `true` when there were more.
    pub fn list(&self, relative: &str) -> Result<(Vec<(String, u64)>, bool), WorkspaceError> {
        let dir = self.resolve(relative)?;
        let mut out = Vec::new();
        let complete =
            walk(&self.root, &dir, &mut out).map_err(WorkspaceError::io("list", relative))?;
        out.sort();
        Ok((out, !complete))
    }

    /// Opens `relative` beneath the workspace without following a link out
    /// and without waiting on a FIFO or a device.
    fn open(&self, relative: &str, access: OFlag) -> Result<File, WorkspaceError> {
        let path = self.resolve(relative)?;
        let beneath = path.strip_prefix(&self.root).unwrap_or(&path);
        let flags = access | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        match open_beneath(&self.root, beneath, flags) {
            Ok(fd) => Ok(File::from(fd)),
            Err(Errno::EXDEV | Errno::ELOOP) => {
                Err(WorkspaceError::ThroughLink(relative.to_string()))
            }
            Err(Errno::ENXIO) => Err(WorkspaceError::NotPlain {
                path: relative.to_string(),
                kind: "a FIFO or a socket",
            }),
            Err(e) => Err(WorkspaceError::io(
                if access.contains(OFlag::O_WRONLY) {
                    "write"
                } else {
                    "read"
                },
                relative,
            )(e.into())),
        }
    }
}

/// `beneath` opened under `root` by the kernel's own check (Linux 5.6+);
/// on an older kernel, by path with the final link refused, after the
/// caller's check of the path.
fn open_beneath(root: &Path, beneath: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
    let dir = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let target: &Path = if beneath.as_os_str().is_empty() {
        Path::new(".")
    } else {
        beneath
    };
    // openat2 refuses a mode without O_CREAT (EINVAL), unlike open.
    let mode = if flags.contains(OFlag::O_CREAT) {
        Mode::from_bits_truncate(0o644)
    } else {
        Mode::empty()
    };
    let how = OpenHow::new()
        .flags(flags)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match nix::fcntl::openat2(&dir, target, how) {
        Err(Errno::ENOSYS) => nix::fcntl::openat(&dir, target, flags | OFlag::O_NOFOLLOW, mode),
        other => other,
    }
}

/// The file's metadata, if it is a plain file with one name.
fn plain_file(file: &File, relative: &str) -> Result<std::fs::Metadata, WorkspaceError> {
    let meta = file
        .metadata()
        .map_err(WorkspaceError::io("read", relative))?;
    let kind = meta.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("a device")
    };
    if let Some(kind) = what {
        return Err(WorkspaceError::NotPlain {
            path: relative.to_string(),
            kind,
        });
    }
    if meta.nlink() > 1 {
        return Err(WorkspaceError::HardLinked {
            path: relative.to_string(),
            names: meta.nlink(),
        });
    }
    Ok(meta)
}

/// `relative` as a path inside the workspace, `..` resolved lexically.
fn inside(relative: &str) -> Result<PathBuf, WorkspaceError> {
    let path = Path::new(relative.trim());
    if path.is_absolute() {
        return Err(WorkspaceError::Absolute(relative.to_string()));
    }
    let mut inside = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => inside.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !inside.pop() {
                    return Err(WorkspaceError::OutOfWorkspace(relative.to_string()));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(WorkspaceError::NotRelative(relative.to_string()));
            }
        }
    }
    Ok(inside)
}

/// Adds the files under `dir` to `out`; false when [`LIST_LIMIT`] cut it short.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) -> std::io::Result<bool> {
    for entry in std::fs::read_dir(dir)? {
        if out.len() >= LIST_LIMIT {
            return Ok(false);
        }
        let entry = entry?;
        let meta = entry.path().symlink_metadata()?;
        if meta.is_dir() {
            if !walk(root, &entry.path(), out)? {
                return Ok(false);
            }
        } else {
            let name = entry
                .path()
                .strip_prefix(root)
                .unwrap_or(&entry.path())
                .display()
                .to_string();
            out.push((name, meta.len()));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path()).unwrap();
        (dir, ws)
    }

    #[test]
    fn files_inside_are_written_read_and_listed() {
        let (_dir, ws) = workspace();
        ws.write("solution.c", "int x;").unwrap();
        ws.write("notes/plan.md", "tile it").unwrap();
        assert_eq!(ws.read("./solution.c").unwrap(), "int x;");
        assert_eq!(ws.read("notes/../solution.c").unwrap(), "int x;");
        assert_eq!(
            ws.list("").unwrap().0,
            [
                ("notes/plan.md".to_string(), 7),
                ("solution.c".to_string(), 6)
            ]
        );
    }

    #[test]
    fn paths_out_of_the_workspace_are_refused() {
        let (dir, ws) = workspace();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        for path in ["../secret", "/etc/passwd", "a/../../secret", ".."] {
            let err = ws.read(path).unwrap_err().to_string();
            assert!(
                err.contains("workspace") || err.contains("absolute"),
                "{path}: {err}"
            );
        }
        assert!(ws.write("../escape.c", "x").is_err());
        assert!(!dir.path().join("escape.c").exists());
    }

    #[test]
    fn links_out_of_the_workspace_are_refused() {
        let (dir, ws) = workspace();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.root().join("link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), ws.root().join("up")).unwrap();
        for path in ["link", "up/secret"] {
            let err = ws.read(path).unwrap_err().to_string();
            assert!(err.contains("through a link"), "{path}: {err}");
        }
        assert!(ws.write("up/new.c", "x").is_err());
        assert!(!dir.path().join("new.c").exists());
    }

    #[test]
    fn big_files_are_cut_and_big_writes_refused() {
        let (_dir, ws) = workspace();
        std::fs::write(ws.root().join("big"), vec![b'a'; READ_LIMIT + 10]).unwrap();
        assert!(
            ws.read("big")
                .unwrap()
                .ends_with("only the first 262144 are shown]")
        );
        assert!(ws.write("huge", &"a".repeat(WRITE_LIMIT + 1)).is_err());
    }

    /// A FIFO would block an open for reading until a writer came, and one
    /// for writing until a reader did: both answer at once, refused.
    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let (_dir, ws) = workspace();
        let fifo = ws.root().join("fifo.c");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let read = ws.read("fifo.c").unwrap_err().to_string();
        assert!(read.contains("not a plain file"), "{read}");
        assert!(ws.read_source("fifo.c").is_err());
        let write = ws.write("fifo.c", "x").unwrap_err().to_string();
        assert!(write.contains("not a plain file"), "{write}");
    }

    /// A hard link to a file outside reads nothing of it and writes nothing
    /// to it.
    #[test]
    fn a_hard_link_is_refused_both_ways() {
        let (dir, ws) = workspace();
        let outside = dir.path().join("secret");
        std::fs::write(&outside, "the token").unwrap();
        std::fs::hard_link(&outside, ws.root().join("linked.c")).unwrap();
        let read = ws.read("linked.c").unwrap_err().to_string();
        assert!(read.contains("hard link"), "{read}");
        assert!(!read.contains("the token"));
        let write = ws.write("linked.c", "pwned").unwrap_err().to_string();
        assert!(write.contains("hard link"), "{write}");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "the token");
    }

    #[test]
    fn directories_are_not_read_as_files() {
        let (_dir, ws) = workspace();
        std::fs::create_dir(ws.root().join("dir")).unwrap();
        let err = ws.read("dir").unwrap_err().to_string();
        assert!(err.contains("a directory"), "{err}");
    }

    /// A file far larger than memory is read only as far as its limit.
    #[test]
    fn a_huge_file_is_cut_without_reading_it_whole() {
        let (_dir, ws) = workspace();
        let huge = std::fs::File::create(ws.root().join("huge.c")).unwrap();
        huge.set_len(1 << 40).unwrap();
        let text = ws.read("huge.c").unwrap();
        assert_eq!(text.len(), READ_LIMIT + text[READ_LIMIT..].len());
        assert!(
            text.ends_with("only the first 262144 are shown]"),
            "{}",
            &text[READ_LIMIT..]
        );
        let source = ws.read_source("huge.c").unwrap_err().to_string();
        assert!(source.contains("1099511627776 bytes"), "{source}");
    }

    #[test]
    fn a_listing_stops_at_its_limit() {
        let (_dir, ws) = workspace();
        for i in 0..LIST_LIMIT + 5 {
            std::fs::write(ws.root().join(format!("f{i}")), "").unwrap();
        }
        let (files, cut) = ws.list("").unwrap();
        assert_eq!((files.len(), cut), (LIST_LIMIT, true));
    }

    /// Writing replaces a file's content, and links inside are followed.
    #[test]
    fn a_write_replaces_and_links_inside_are_followed() {
        let (_dir, ws) = workspace();
        ws.write("a.c", "a longer first text").unwrap();
        ws.write("a.c", "short").unwrap();
        std::os::unix::fs::symlink("a.c", ws.root().join("b.c")).unwrap();
        assert_eq!(ws.read("b.c").unwrap(), "short");
    }
}

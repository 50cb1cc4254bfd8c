//! An attempt's workspace: the one directory an agent's file tools reach.
//!
//! Paths are relative to the workspace. One that is absolute, climbs out with
//! `..`, or leads out through a symbolic link (an external agent CLI has a
//! shell and can make one) is refused with a reason the model can read.

use std::path::{Component, Path, PathBuf};

/// The most a `read_file` returns; longer files are cut with a note.
pub const READ_LIMIT: usize = 256 << 10;
/// The most a `write_file` takes.
pub const WRITE_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
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
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, String> {
        let path = Path::new(relative.trim());
        if path.is_absolute() {
            return Err(format!(
                "{relative:?} is absolute; give a path inside the workspace, like \"solution.c\""
            ));
        }
        let mut inside = PathBuf::new();
        for component in path.components() {
            match component {
                Component::Normal(part) => inside.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !inside.pop() {
                        return Err(format!("{relative:?} leads out of the workspace"));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(format!("{relative:?} is not a relative path"));
                }
            }
        }
        let full = self.root.join(&inside);
        self.check_links(&full, relative)?;
        Ok(full)
    }

    /// Refuses a path whose existing part resolves outside the workspace.
    fn check_links(&self, full: &Path, relative: &str) -> Result<(), String> {
        let existing = full
            .ancestors()
            .find(|p| p.symlink_metadata().is_ok())
            .unwrap_or(&self.root);
        let real = existing
            .canonicalize()
            .map_err(|e| format!("{relative:?}: {e}"))?;
        if real.starts_with(&self.root) {
            Ok(())
        } else {
            Err(format!(
                "{relative:?} leads out of the workspace (through a link)"
            ))
        }
    }

    pub fn read(&self, relative: &str) -> Result<String, String> {
        let path = self.resolve(relative)?;
        let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {relative:?}: {e}"))?;
        let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(READ_LIMIT)]).into_owned();
        if bytes.len() > READ_LIMIT {
            text.push_str(&format!(
                "\n[cut: the file has {} bytes, only the first {READ_LIMIT} are shown]",
                bytes.len()
            ));
        }
        Ok(text)
    }

    pub fn write(&self, relative: &str, content: &str) -> Result<usize, String> {
        if content.len() > WRITE_LIMIT {
            return Err(format!(
                "{} bytes is more than a file may hold here ({WRITE_LIMIT})",
                content.len()
            ));
        }
        let path = self.resolve(relative)?;
        if path == self.root {
            return Err("give a file name".into());
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{relative:?}: {e}"))?;
        }
        if path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(format!("{relative:?} is a link; write a plain file"));
        }
        std::fs::write(&path, content).map_err(|e| format!("cannot write {relative:?}: {e}"))?;
        Ok(content.len())
    }

    /// The files under `relative` (the whole workspace for ""), with sizes.
    pub fn list(&self, relative: &str) -> Result<Vec<(String, u64)>, String> {
        let dir = self.resolve(relative)?;
        let mut out = Vec::new();
        walk(&self.root, &dir, &mut out).map_err(|e| format!("cannot list {relative:?}: {e}"))?;
        out.sort();
        Ok(out)
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.path().symlink_metadata()?;
        if meta.is_dir() {
            walk(root, &entry.path(), out)?;
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
    Ok(())
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
            ws.list("").unwrap(),
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
            let err = ws.read(path).unwrap_err();
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
        assert!(ws.read("link").unwrap_err().contains("through a link"));
        assert!(ws.read("up/secret").unwrap_err().contains("through a link"));
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
}

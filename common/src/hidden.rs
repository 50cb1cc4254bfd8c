//! The node's temporary directories, which an agent CLI's sandbox hides
//! (the judges' sandboxes and other users' sockets live there), and the
//! check that an `AGENT_COMMAND` does not need them. The sandbox itself is
//! the agent role's; the list is here so that configuration checks can
//! refuse a command before anything starts.

use std::path::{Path, PathBuf};

/// The directories hidden from agent CLIs on this node, as they exist.
pub fn node_temporaries() -> Vec<PathBuf> {
    [
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
        PathBuf::from("/run"),
    ]
    .into_iter()
    .filter(|p| p.exists())
    .collect()
}

/// The first file `command` names (its program, resolved on `path`, the
/// program's `#!` interpreter, an absolute path in an argument) that lies
/// in one of `hidden`, where the CLI could not reach it: (the file as
/// given, the hidden directory). Links are followed: the sandbox sees
/// where they lead. Placeholders (`{workspace}`) are the attempt's own.
pub fn needs_hidden(
    command: &[String],
    path: &str,
    hidden: &[PathBuf],
) -> Option<(String, PathBuf)> {
    let program = command.first()?;
    let resolved = resolve(program, path);
    let interpreter = resolved.as_deref().and_then(interpreter);
    let arguments = command[1..]
        .iter()
        .filter(|a| !a.contains('{'))
        .map(|a| a.split_once('=').map_or(a.as_str(), |(_, value)| value))
        .filter(|a| a.starts_with('/'))
        .map(PathBuf::from);
    resolved
        .into_iter()
        .chain(interpreter)
        .chain(arguments)
        .find_map(|file| {
            let real = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            hidden
                .iter()
                .find(|dir| real.starts_with(dir) || file.starts_with(dir))
                .map(|dir| (file.display().to_string(), dir.clone()))
        })
}

/// Where `program` is: as given when it has a slash, else on `path`.
fn resolve(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return std::path::absolute(program).ok();
    }
    path.split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// A script's `#!` interpreter.
fn interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = std::str::from_utf8(head[..n].strip_prefix(b"#!")?).ok()?;
    let first = line.lines().next()?.split_whitespace().next()?;
    Some(PathBuf::from(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_program_its_interpreter_or_an_argument_in_a_hidden_directory_is_found() {
        let hidden = tempfile::tempdir().unwrap();
        let seen = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let dirs = [hidden.path().to_path_buf()];
        let script = |dir: &Path, name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            p.display().to_string()
        };
        let inside = script(hidden.path(), "cli.sh", "#!/bin/sh\n");
        let outside = script(seen.path(), "cli.sh", "#!/bin/sh\n");
        let hidden_shell = script(hidden.path(), "sh", "");
        let via_hidden = script(seen.path(), "via.sh", &format!("#!{hidden_shell} -e\n"));
        let link = seen.path().join("link");
        std::os::unix::fs::symlink(&inside, &link).unwrap();
        let found = |line: &str| needs_hidden(&words(line), "/usr/bin:/bin", &dirs).map(|f| f.0);
        assert_eq!(found(&inside), Some(inside.clone()), "the program");
        assert_eq!(found(&outside), None);
        assert_eq!(found(&via_hidden), Some(hidden_shell), "its interpreter");
        assert_eq!(
            found(&link.display().to_string()),
            Some(link.display().to_string()),
            "a link into it"
        );
        assert_eq!(
            found(&format!("{outside} --config={inside}")),
            Some(inside.clone()),
            "an option's value"
        );
        assert_eq!(
            found(&format!("{outside} --cd {{workspace}} {{prompt}}")),
            None
        );
        assert_eq!(found("sh -c true"), None, "a program on PATH outside");
    }
}

//! Where a configuration value came from, and problems reported against it.
//!
//! Every error a user can make in configuration is reported as
//! `<where>: <KEY>: <what is wrong>`, where `<where>` is `file:line` for an env
//! file and names the variable, flag, site profile or default otherwise.

use std::fmt;
use std::path::{Path, PathBuf};

/// The layer (and, for the env file, the line) a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Built into hpcagent.
    Default,
    /// From the site profile `SITE=<name>`.
    Site(&'static str),
    /// From an env file; line 0 means the file as a whole.
    File { path: PathBuf, line: usize },
    /// From the process environment variable of this name (`HPCAGENT_<KEY>`).
    Process(String),
    /// From a command-line flag, as the user wrote it.
    Cli(String),
}

impl Origin {
    pub fn file(path: &Path, line: usize) -> Origin {
        Origin::File {
            path: path.to_path_buf(),
            line,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => write!(f, "default"),
            Origin::Site(site) => write!(f, "site profile {site}"),
            Origin::File { path, line: 0 } => write!(f, "{}", path.display()),
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Process(var) => write!(f, "environment {var}"),
            Origin::Cli(flag) => write!(f, "command line {flag}"),
        }
    }
}

/// One configuration problem: where, which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub origin: Origin,
    pub key: Option<String>,
    pub message: String,
}

impl Diagnostic {
    pub fn new(origin: Origin, key: Option<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            origin,
            key,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{}: {key}: {}", self.origin, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

/// All the problems found in one configuration; non-empty.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigError(pub Vec<Diagnostic>);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(Diagnostic::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

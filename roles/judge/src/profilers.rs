//! The profilers a judge offers: which tool serves which language, and
//! which of them this node has (on the PATH, and for perf, usable here).

use std::collections::BTreeMap;
use std::fmt;
use std::process::Command;
use std::str::FromStr;

use hpcagent_corpus::language::Language;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    None,
    LinuxPerf,
    Papi,
    Nsys,
    Ncu,
    Rocprofv3,
}

impl Tool {
    pub const ALL: [Tool; 6] = [
        Tool::None,
        Tool::LinuxPerf,
        Tool::Papi,
        Tool::Nsys,
        Tool::Ncu,
        Tool::Rocprofv3,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Tool::None => "none",
            Tool::LinuxPerf => "linuxperf",
            Tool::Papi => "papi",
            Tool::Nsys => "nsys",
            Tool::Ncu => "ncu",
            Tool::Rocprofv3 => "rocprofv3",
        }
    }

    pub(super) fn serves(self, language: Language) -> bool {
        match self {
            Tool::None => true,
            Tool::LinuxPerf | Tool::Papi => !language.is_gpu(),
            Tool::Nsys | Tool::Ncu => language == Language::Cuda,
            Tool::Rocprofv3 => language == Language::Hip,
        }
    }

    /// The tools that profile `language`, for the InvalidArgument message.
    pub(super) fn for_language(language: Language) -> Vec<&'static str> {
        Tool::ALL
            .into_iter()
            .filter(|t| *t != Tool::None && t.serves(language))
            .map(Tool::as_str)
            .collect()
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = if s.is_empty() { "none".to_string() } else { s };
        Tool::ALL
            .into_iter()
            .find(|t| t.as_str() == s || (s == "perf" && *t == Tool::LinuxPerf))
            .ok_or_else(|| {
                format!("unknown tool {s:?} (none, linuxperf, papi, nsys, ncu, rocprofv3)")
            })
    }
}

/// Which tools this node has, or why each is missing.
#[derive(Debug, Clone, Default)]
pub struct Profilers {
    missing: BTreeMap<&'static str, String>,
}

impl Profilers {
    pub fn detect() -> Profilers {
        let mut missing = BTreeMap::new();
        if let Err(why) = perf_usable() {
            missing.insert("linuxperf", why);
        }
        // SAFETY: loading the PAPI library only to see that it exists.
        let papi = [
            "libpapi.so",
            "libpapi.so.7.0",
            "libpapi.so.7",
            "libpapi.so.6.0",
        ]
        .iter()
        .any(|n| unsafe { libloading::Library::new(*n) }.is_ok());
        if !papi {
            missing.insert("papi", "PAPI (libpapi.so) is not installed".to_string());
        }
        for (tool, command) in [("nsys", "nsys"), ("ncu", "ncu"), ("rocprofv3", "rocprofv3")] {
            if !on_path(command) {
                missing.insert(tool, format!("{command} is not on PATH"));
            }
        }
        Profilers { missing }
    }

    pub fn available(&self) -> Vec<String> {
        Tool::ALL
            .into_iter()
            .filter(|t| !self.missing.contains_key(t.as_str()))
            .map(|t| t.as_str().to_string())
            .collect()
    }

    pub fn missing(&self) -> Vec<String> {
        self.missing
            .iter()
            .map(|(tool, why)| format!("{tool}: {why}"))
            .collect()
    }

    /// Why `tool` cannot run on this node, if it cannot.
    pub(crate) fn check(&self, tool: Tool) -> Result<(), String> {
        match self.missing.get(tool.as_str()) {
            Some(why) => Err(format!("{tool} cannot run on this node: {why}")),
            None => Ok(()),
        }
    }
}

fn on_path(command: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(command).is_file()))
}

/// perf exists and `perf_event_paranoid` lets this user count its own processes.
fn perf_usable() -> Result<(), String> {
    let version = Command::new("perf").arg("--version").output();
    if !version.is_ok_and(|o| o.status.success()) {
        return Err("perf is not installed (Debian: linux-perf)".into());
    }
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    if paranoid > 2 && !nix::unistd::geteuid().is_root() {
        return Err(format!(
            "perf_event_paranoid is {paranoid}: unprivileged users cannot count events (ask for 2 or lower)"
        ));
    }
    Ok(())
}

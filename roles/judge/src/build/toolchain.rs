//! The compilers this node has, their versions, and the judge's fixed flags.
//!
//! Detected once when the judge starts (and reported), so a missing compiler
//! is a clear answer naming it rather than a build log saying "not found".

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use serde::Serialize;

use hpcagent_corpus::language::Language;

/// One usable compiler.
#[derive(Debug, Clone, Serialize)]
pub struct Compiler {
    pub command: String,
    /// First line of `--version`: part of every build's cache key.
    pub version: String,
    /// The judge's fixed flags for this language.
    pub flags: Vec<String>,
}

/// Every language's compiler, or why it is missing.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Toolchain {
    pub compilers: BTreeMap<Language, Compiler>,
    pub missing: BTreeMap<Language, String>,
}

impl Toolchain {
    /// Looks for each compiler (`HPCAGENT_CC`, `_CXX`, `_FC`, `_NVCC`, `_HIPCC`
    /// override the commands).
    pub fn detect() -> Toolchain {
        let mut toolchain = Toolchain::default();
        for language in Language::ALL {
            let (var, default) = command_of(language);
            let command = std::env::var(var).unwrap_or_else(|_| default.to_string());
            match version_of(&command) {
                Some(version) => {
                    let flags = fixed_flags(language, &command);
                    toolchain.compilers.insert(
                        language,
                        Compiler {
                            command,
                            version,
                            flags,
                        },
                    );
                }
                None => {
                    toolchain.missing.insert(
                        language,
                        format!("{command} not found (set {var} to use another compiler)"),
                    );
                }
            }
        }
        toolchain
    }

    pub fn compiler(&self, language: Language) -> Result<&Compiler, String> {
        self.compilers.get(&language).ok_or_else(|| {
            self.missing
                .get(&language)
                .cloned()
                .unwrap_or_else(|| format!("no compiler for {language}"))
        })
    }
}

fn command_of(language: Language) -> (&'static str, &'static str) {
    match language {
        Language::C => ("HPCAGENT_CC", "gcc"),
        Language::Cpp => ("HPCAGENT_CXX", "g++"),
        Language::Fortran => ("HPCAGENT_FC", "gfortran"),
        Language::Cuda => ("HPCAGENT_NVCC", "nvcc"),
        Language::Hip => ("HPCAGENT_HIPCC", "hipcc"),
    }
}

fn version_of(command: &str) -> Option<String> {
    let out = Command::new(command)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // nvcc prints its identity on the last line; the others on the first.
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("release"))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))?;
    Some(line.trim().to_string())
}

/// The newest dialect flag of `candidates` the compiler accepts (gcc 12 knows
/// `-std=c2x` but not `-std=c23`).
fn dialect(command: &str, language: &str, candidates: &[&str], probe: &str) -> Option<String> {
    candidates.iter().find_map(|flag| {
        let mut child = Command::new(command)
            .args([flag, "-x", language, "-fsyntax-only", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        child.stdin.take()?.write_all(probe.as_bytes()).ok()?;
        child.wait().ok()?.success().then(|| flag.to_string())
    })
}

fn fixed_flags(language: Language, command: &str) -> Vec<String> {
    let host = [
        "-O3",
        "-march=native",
        "-fPIC",
        "-shared",
        "-fopenmp",
        "-Wall",
    ];
    let mut flags: Vec<String> = match language {
        Language::C | Language::Cpp | Language::Fortran => {
            host.iter().map(|s| s.to_string()).collect()
        }
        Language::Cuda => {
            // `native` needs a device; a node that builds for another
            // (a CI machine, a login node) names its target.
            let arch = std::env::var("HPCAGENT_CUDA_ARCH").unwrap_or_else(|_| "native".into());
            vec![
                "-O3".into(),
                "-shared".into(),
                "-Xcompiler=-fPIC,-march=native,-fopenmp".into(),
                format!("-arch={arch}"),
            ]
        }
        Language::Hip => {
            let arch = std::env::var("HPCAGENT_HIP_ARCH").unwrap_or_else(|_| "native".into());
            vec![
                "-O3".into(),
                "-fPIC".into(),
                "-shared".into(),
                "-march=native".into(),
                format!("--offload-arch={arch}"),
            ]
        }
    };
    match language {
        Language::C => flags.extend(dialect(
            command,
            "c",
            &["-std=c23", "-std=c2x", "-std=c17"],
            "int main(void){return 0;}\n",
        )),
        Language::Cpp => flags.extend(dialect(
            command,
            "c++",
            &["-std=c++23", "-std=c++2b", "-std=c++20"],
            "int main(){return 0;}\n",
        )),
        Language::Fortran => flags.extend([
            "-std=f2018".to_string(),
            "-ffree-line-length-none".to_string(),
        ]),
        Language::Cuda | Language::Hip => flags.push("-std=c++17".into()),
    }
    flags
}

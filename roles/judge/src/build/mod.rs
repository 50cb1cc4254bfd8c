//! Building submissions and baselines into shared objects, with a
//! content-addressed cache.
//!
//! A build is keyed by hash(source, language, every flag, compiler version):
//! the same submission is compiled once per judge rank. Each rank has its own
//! cache directory ([`cache_root`]), so judges sharing a node never write to the
//! same place. The cache keeps at most 4 GiB, the least recently used going
//! first ([`bound`]). Compilers run confined ([`confined`]: namespaces of
//! their own, Landlock, limits, none of the judge's descriptors): they read
//! the system and the build directory, not the judge's cache or reference
//! outputs, and see none of the node's processes.

mod bound;
pub mod confined;
pub mod flags;
mod pragmas;
pub mod toolchain;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::data::write_private;
use crate::sandbox_dir;
use confined::Walls;
use hpcagent_corpus::fingerprint;
use hpcagent_corpus::language::Language;
use hpcagent_sandbox::limits::{Limits, close_on_exec_from};
use toolchain::Toolchain;

/// Launcher rank variables, in the order that decides: each is enough alone.
pub const RANK_VARIABLES: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
];

/// The first rank variable that is set in the process environment, and its value.
pub fn rank() -> Option<(&'static str, String)> {
    rank_from(&|var| std::env::var(var).ok())
}

/// The first of [`RANK_VARIABLES`] that `lookup` finds set (and not blank).
pub fn rank_from(lookup: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
    RANK_VARIABLES.iter().find_map(|var| {
        lookup(var)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (*var, v.trim().to_string()))
    })
}

/// `<base>/rank-<r>` under a launcher, `<base>` otherwise.
pub fn cache_root(base: &Path, rank: Option<&str>) -> PathBuf {
    match rank {
        Some(r) => base.join(format!("rank-{r}")),
        None => base.to_path_buf(),
    }
}

/// The default cache base: `HPCAGENT_CACHE_DIR`, else `$XDG_CACHE_HOME/hpcagent`,
/// else `~/.cache/hpcagent`.
pub fn default_cache_base() -> PathBuf {
    if let Some(dir) = std::env::var_os("HPCAGENT_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("hpcagent");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("hpcagent")
}

/// The preprocessed source, in the build directory, that [`pragmas`] reads.
const PREPROCESSED: &str = "source.i";

/// The most a preprocessed source may take (a C++ source with the standard
/// library's headers takes a few MiB).
const MAX_PREPROCESSED: u64 = 256 << 20;

/// What to build.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    pub language: Language,
    pub text: &'a str,
    /// File name stem of the source (the symbol, for readable logs).
    pub stem: &'a str,
    /// Agent flags, already checked against the allow-list.
    pub flags: &'a [String],
    /// Judge-internal macro definitions (the baseline's `real` and `SYMBOL`).
    pub defines: &'a [String],
    /// The user the compiler runs as (a root judge's slot user).
    pub run_as: Option<u32>,
    /// The CPUs the compiler may use (its slot's).
    pub cpus: &'a [usize],
}

/// A built shared object.
#[derive(Debug, Clone)]
pub struct Built {
    pub library: PathBuf,
    pub log: String,
    pub cached: bool,
    pub seconds: f64,
}

/// How much of each of a compiler's output streams a build keeps (and a
/// verdict carries): whole up to this, else both ends, as
/// [`hpcagent_common::words::ends`] cuts. A cascade of errors must not cost
/// the first.
pub const LOG_KEPT: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}")]
    Missing(String),
    #[error("compilation failed")]
    Failed { log: String },
    /// The source sets an option the flags' policy refuses ([`pragmas`]).
    #[error("{0}")]
    Refused(String),
    #[error("compilation did not finish within {0:?}")]
    TimedOut(Duration),
    #[error("build harness: {0}")]
    Harness(String),
}

/// Builds sources for one judge.
#[derive(Debug, Clone)]
pub struct Builder {
    pub toolchain: Toolchain,
    builds: PathBuf,
    shared: Option<PathBuf>,
    timeout: Duration,
    /// The hpcagent binary, whose `judge exec --compile` confines compilers.
    exe: PathBuf,
    /// Compilers get namespaces of their own (`false` only under weaker
    /// isolation, where the node gives none).
    namespaces: bool,
}

impl Builder {
    pub fn new(
        toolchain: Toolchain,
        cache: &Path,
        shared: Option<PathBuf>,
        exe: PathBuf,
        namespaces: bool,
    ) -> Builder {
        Builder {
            toolchain,
            builds: cache.join("builds"),
            shared,
            timeout: Duration::from_secs(180),
            exe,
            namespaces,
        }
    }

    /// The shared object for `source`: from the cache, or compiled now.
    pub async fn build(&self, source: &Source<'_>) -> Result<Built, BuildError> {
        let start = Instant::now();
        let compiler = self
            .toolchain
            .compiler(source.language)
            .map_err(BuildError::Missing)?;
        let (before, after) = self.flags(source);
        let key = fingerprint(&[
            source.text.as_bytes(),
            source.language.as_str().as_bytes(),
            compiler.version.as_bytes(),
            compiler.flags.join(" ").as_bytes(),
            before.join(" ").as_bytes(),
            after.join(" ").as_bytes(),
        ]);
        let entry = self.builds.join(&key[..32]);
        let library = entry.join("lib.so");
        if library.is_file() {
            bound::touch(&library);
            let log = std::fs::read_to_string(entry.join("build.log")).unwrap_or_default();
            return Ok(Built {
                library,
                log,
                cached: true,
                seconds: start.elapsed().as_secs_f64(),
            });
        }
        let dir = sandbox_dir::create("build")
            .map_err(|e| BuildError::Harness(format!("sandbox: {e}")))?;
        let file = format!("{}.{}", source.stem, source.language.extension());
        std::fs::write(dir.path().join(&file), source.text)
            .map_err(|e| BuildError::Harness(e.to_string()))?;
        if let Some(uid) = source.run_as {
            nix::unistd::chown(dir.path(), Some(uid.into()), Some(uid.into()))
                .map_err(|e| BuildError::Harness(format!("chown build dir: {e}")))?;
        }
        let mut argv: Vec<String> = compiler.flags.clone();
        argv.extend(before);
        let mut preprocess = argv.clone();
        preprocess.extend(["-E", "-o", PREPROCESSED, &file].map(String::from));
        argv.extend(["-o".to_string(), "lib.so".to_string(), file]);
        argv.extend(after);
        // The source's own options are checked beside the compile (on a
        // slot of two CPUs it costs no time); a refusal discards the build.
        // gfortran has no such directives; nvcc's host pragmas never reach
        // the device code, whose semantics its flags alone set.
        let scans = matches!(source.language, Language::C | Language::Cpp | Language::Hip);
        let (checked, log) = tokio::join!(
            async {
                match scans {
                    true => {
                        self.check_source_options(
                            &compiler.command,
                            &preprocess,
                            dir.path(),
                            source,
                        )
                        .await
                    }
                    false => Ok(()),
                }
            },
            self.compile(&compiler.command, &argv, dir.path(), source)
        );
        checked?;
        let log = log?;
        // Publish atomically: a concurrent identical build wins or loses whole.
        std::fs::create_dir_all(&self.builds).map_err(|e| BuildError::Harness(e.to_string()))?;
        let staging = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&self.builds)
            .map_err(|e| BuildError::Harness(e.to_string()))?;
        std::fs::copy(dir.path().join("lib.so"), staging.path().join("lib.so"))
            .map_err(|e| BuildError::Harness(format!("the compiler produced no library: {e}")))?;
        write_private(&staging.path().join("build.log"), log.as_bytes())
            .map_err(|e| BuildError::Harness(e.to_string()))?;
        let staged = staging.keep();
        if std::fs::rename(&staged, &entry).is_err() {
            let _ = std::fs::remove_dir_all(&staged);
        }
        let builds = self.builds.clone();
        tokio::task::spawn_blocking(move || bound::trim(&builds, bound::BYTES));
        Ok(Built {
            library,
            log,
            cached: false,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Flags before the source file and after it (libraries link after).
    fn flags(&self, source: &Source<'_>) -> (Vec<String>, Vec<String>) {
        let mut before: Vec<String> = source.defines.to_vec();
        let mut after = Vec::new();
        if let Some(shared) = &self.shared {
            before.push(format!("-I{}", shared.join("include").display()));
            after.push(format!("-L{}", shared.join("lib").display()));
            if source.language != Language::Cuda {
                after.push(format!("-Wl,-rpath,{}", shared.join("lib").display()));
            }
        }
        for flag in source.flags {
            if flag.starts_with("-l") || flag.starts_with("-L") {
                after.push(flag.clone());
            } else {
                before.push(flag.clone());
            }
        }
        if source.language != Language::Cuda && source.language != Language::Hip {
            after.push("-lm".into());
        }
        (before, after)
    }

    /// Refuses a source that sets, by pragma or attribute, an option the
    /// flags' policy refuses ([`pragmas`]): `argv` preprocesses it into
    /// [`PREPROCESSED`] with the build's own flags.
    async fn check_source_options(
        &self,
        command: &str,
        argv: &[String],
        dir: &Path,
        source: &Source<'_>,
    ) -> Result<(), BuildError> {
        self.compile(command, argv, dir, source).await?;
        let path = dir.join(PREPROCESSED);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_PREPROCESSED {
            return Err(BuildError::Failed {
                log: format!(
                    "the preprocessed source takes {size} bytes, more than the {MAX_PREPROCESSED} a build may"
                ),
            });
        }
        let text = std::fs::read(&path)
            .map_err(|e| BuildError::Harness(format!("the preprocessed source: {e}")))?;
        let _ = std::fs::remove_file(&path);
        pragmas::check(&String::from_utf8_lossy(&text)).map_err(|refused| {
            BuildError::Refused(format!(
                "{refused} (the optimization level and floating-point semantics are fixed for sources as for flags)"
            ))
        })
    }

    async fn compile(
        &self,
        command: &str,
        args: &[String],
        dir: &Path,
        source: &Source<'_>,
    ) -> Result<String, BuildError> {
        let walls = Walls {
            run_as: source.run_as,
            read: self.shared.iter().cloned().collect(),
            write: dir.to_path_buf(),
            namespaces: self.namespaces,
        };
        let walls =
            serde_json::to_string(&walls).map_err(|e| BuildError::Harness(e.to_string()))?;
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(confined::ENTRY)
            .arg(walls)
            .arg(command)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(passthrough_env())
            .env("HOME", dir)
            .env("TMPDIR", dir)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let processes = if source.run_as.is_some() {
            0
        } else {
            hpcagent_sandbox::limits::user_process_count()
        };
        Limits {
            // A `#include "/dev/zero"` must not take the node's memory (GPU
            // compilers reserve large address ranges: they get no cap).
            address_space: (!source.language.is_gpu()).then_some(8 << 30),
            cpu_seconds: Some(self.timeout.as_secs() * 2),
            file_size: Some(1 << 30),
            processes: Some(processes + 512),
            cpus: source.cpus.to_vec(),
        }
        .install(&mut cmd);
        // SAFETY: the closure makes one raw system call.
        unsafe {
            cmd.pre_exec(|| {
                close_on_exec_from(3);
                Ok(())
            });
        }
        let mut child = tokio::process::Command::from(cmd)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BuildError::Harness(format!("cannot start {command}: {e}")))?;
        let pid = child.id();
        let output = match tokio::time::timeout(self.timeout, async {
            let (mut out, mut err) = (
                child.stdout.take().expect("piped"),
                child.stderr.take().expect("piped"),
            );
            let (o, e, status) =
                tokio::join!(read_ends(&mut out), read_ends(&mut err), child.wait());
            (o, e, status)
        })
        .await
        {
            Ok(done) => done,
            Err(_) => {
                if let Some(pid) = pid {
                    hpcagent_sandbox::reap::kill_group(pid);
                }
                return Err(BuildError::TimedOut(self.timeout));
            }
        };
        let (stdout, stderr, status) = output;
        let status = status.map_err(|e| BuildError::Harness(e.to_string()))?;
        let log = format!("{stdout}{stderr}");
        if status.success() {
            Ok(log)
        } else if status.code() == Some(confined::CANNOT_CONFINE)
            && stderr.starts_with(confined::CANNOT_CONFINE_SAYS)
        {
            // The node's fault, not the code's: a compiler its slot user
            // cannot run, walls the kernel refuses.
            Err(BuildError::Harness(stderr.trim_end().to_string()))
        } else {
            Err(BuildError::Failed { log })
        }
    }
}

/// Reads to the end, keeping both ends ([`LOG_KEPT`]):
/// a compiler that writes gigabytes of errors must neither block on a full
/// pipe nor fill the judge, and its first error and its last words are the
/// ones to read.
async fn read_ends(reader: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    use tokio::io::AsyncReadExt;
    let (head_max, tail_max) = hpcagent_common::words::ends_budget(LOG_KEPT);
    let (mut head, mut tail) = (Vec::new(), std::collections::VecDeque::new());
    let mut cut = 0;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = head_max.saturating_sub(head.len()).min(n);
                head.extend_from_slice(&chunk[..room]);
                tail.extend(&chunk[room..n]);
                let over = tail.len().saturating_sub(tail_max);
                tail.drain(..over);
                cut += over;
            }
        }
    }
    let (head, tail) = (
        String::from_utf8_lossy(&head),
        String::from_utf8_lossy(tail.make_contiguous()),
    );
    match cut {
        0 => format!("{head}{tail}"),
        cut => hpcagent_common::words::cut_between(&head, cut, &tail),
    }
}

/// Environment compilers and runtimes need from the judge's; nothing else
/// (no tokens, no user settings) reaches untrusted code.
pub fn passthrough_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| {
            ["PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH"].contains(&k.as_str())
                || ["CUDA_", "ROCM_", "HIP_", "NVHPC", "HSA_"]
                    .iter()
                    .any(|p| k.starts_with(p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_variable_is_enough_alone_and_the_first_wins() {
        for var in RANK_VARIABLES {
            let found = rank_from(&|v| (v == *var).then(|| "3".to_string()));
            assert_eq!(found, Some((*var, "3".to_string())), "{var} alone");
        }
        let both = rank_from(&|v| match v {
            "PMI_RANK" => Some("1".into()),
            "SLURM_PROCID" => Some("0".into()),
            _ => None,
        });
        assert_eq!(both, Some(("PMI_RANK", "1".to_string())));
        assert_eq!(rank_from(&|_| None), None);
        assert_eq!(
            cache_root(Path::new("/c"), Some("2")),
            Path::new("/c/rank-2")
        );
        assert_eq!(cache_root(Path::new("/c"), None), Path::new("/c"));
    }
}

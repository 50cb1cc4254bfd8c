//! The judge: one corpus, one toolchain, one cache, N slots, and the requests
//! it answers (`task`, `score`, `submit`, `profile`, `capabilities`).
//!
//! Request checking lives here: a request that can never succeed as sent is
//! [`JudgeError::InvalidArgument`]; something missing on this node is
//! [`JudgeError::FailedPrecondition`]. What a submission does once it is
//! built is a [`Verdict`], never an error. Grading itself is in
//! [`crate::grade`], profiling in [`crate::profile`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use hpcagent_proto::v1 as pb;
use nix::fcntl::{Flock, FlockArg};

use crate::build::{self, Builder, flags, toolchain::Toolchain};
use crate::data::DataCache;
use crate::data::ahead::Ahead;
use crate::hab_tasks::{Denominator, HabTaskError, HabTasks};
use crate::peers::Peers;
use crate::profilers::Profilers;
use crate::slots::{self, Slots};
use hpcagent_corpus::language::Language;
use hpcagent_corpus::{Corpus, Kernel, Precision, Preset, abi};

/// How a judge is set up.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    pub corpus: PathBuf,
    /// C baselines of an HPCAgent-Bench corpus's tasks: `<path key>/baseline.c`.
    pub baselines: Option<PathBuf>,
    /// Cache base; the rank suffix is added to it.
    pub cache_base: PathBuf,
    /// Bytes of cases (inputs and reference outputs) the cache keeps.
    pub case_cache_bytes: u64,
    /// The hpcagent binary (runs the runner and the compiler confinement).
    pub exe: PathBuf,
    /// The shared mount prebuilt libraries and `-I`/`-L` paths must lie in.
    pub shared: Option<PathBuf>,
    /// Grading slots; default one per GPU, or 1.
    pub slots: Option<usize>,
    /// Preset of the public case.
    pub preset: Preset,
    /// Timed pairs a grade makes at least (after one to warm up).
    pub reps: u32,
    /// The half-width, relative to the speedup, its 95% interval is measured to.
    pub interval: f64,
    /// Time a grade's timed pairs may take, however wide the interval still is.
    pub time_cap: Duration,
    /// Grade where runs cannot have namespaces of their own (or, for an
    /// unprivileged judge, Landlock): every verdict says so.
    pub weak_isolation: bool,
    /// The Python the NumPy oracle runs in ([`crate::oracle::find`]).
    pub python: String,
    pub public_seed: u64,
    /// Seeds the held-out cases; keep it secret.
    pub secret: u64,
    pub hidden_cases: u32,
    /// A submit's speedup above this many times its task's baseline per
    /// runner CPU (a kernel's `plausible_speedup` overrides it) is
    /// confirmed before it is credited ([`PLAUSIBLE_PER_CPU`] unless set).
    pub plausible_per_cpu: f64,
    /// Other judges that confirm such a speedup (`judge serve --peer`; a
    /// campaign's judges learn theirs from the orchestrator).
    pub peers: Vec<String>,
}

/// Above this speedup per runner CPU over the task's own baseline a submit
/// is confirmed before it is credited, unless its kernel says otherwise
/// (`plausible_speedup`): vectorizing and blocking a naive loop nest gains
/// up to tens per core.
pub const PLAUSIBLE_PER_CPU: f64 = 32.0;

impl JudgeConfig {
    /// Defaults for `exe` and `corpus`: public preset M, at least 10 timed
    /// pairs to ±1% within 30 s, 2 held-out cases, full isolation.
    pub fn new(corpus: PathBuf, exe: PathBuf) -> JudgeConfig {
        JudgeConfig {
            corpus,
            baselines: None,
            cache_base: build::default_cache_base(),
            case_cache_bytes: crate::data::bound::DEFAULT_BYTES,
            exe,
            shared: std::env::var_os("HPCAGENT_SHARED_DIR").map(PathBuf::from),
            slots: None,
            preset: Preset::M,
            // The fewest that can tell a change (timing::FEWEST_TO_TELL
            // rounds of two): more follow until the verdict is decided.
            reps: 12,
            interval: 0.01,
            time_cap: Duration::from_secs(30),
            weak_isolation: false,
            python: std::env::var(crate::oracle::PYTHON_VAR).unwrap_or_else(|_| "python3".into()),
            public_seed: 42,
            // Any text works: judges of a campaign share it to draw the same cases.
            secret: std::env::var("HPCAGENT_JUDGE_SECRET")
                .ok()
                .filter(|s| !s.is_empty())
                .map(|s| {
                    let digest = hpcagent_corpus::fingerprint(&[s.as_bytes()]);
                    u64::from_str_radix(&digest[..16], 16).expect("hex digest")
                })
                .unwrap_or_else(random_secret),
            hidden_cases: 2,
            plausible_per_cpu: PLAUSIBLE_PER_CPU,
            peers: Vec::new(),
        }
    }
}

/// A held-out secret of this judge's own, from the OS's random source.
fn random_secret() -> u64 {
    rand::random()
}

/// A request the judge will not grade.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JudgeError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    Internal(String),
}

/// What to grade.
#[derive(Debug, Clone)]
pub struct Submission {
    pub task_id: String,
    pub language: Language,
    pub precision: Option<Precision>,
    /// The public case's preset; `None`: the judge's.
    pub preset: Option<Preset>,
    pub code: Code,
    pub flags: Vec<String>,
    /// Another judge asks for this Submit to confirm a speedup above its
    /// task's plausible bound: it is not confirmed again.
    pub confirming: bool,
}

impl Submission {
    /// C source for a task at the judge's preset, with no extra flags: a
    /// baseline, built as a submission is.
    pub fn baseline(task_id: &str, precision: Precision, source: String) -> Submission {
        Submission {
            task_id: task_id.to_string(),
            language: Language::C,
            precision: Some(precision),
            preset: None,
            code: Code::Source(source),
            flags: Vec::new(),
            confirming: false,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Code {
    Source(String),
    /// A prebuilt shared object in the shared mount.
    Library(PathBuf),
}

impl TryFrom<pb::GradeRequest> for Submission {
    type Error = JudgeError;
    fn try_from(r: pb::GradeRequest) -> Result<Submission, JudgeError> {
        let language = r.language.parse().map_err(JudgeError::InvalidArgument)?;
        let precision = if r.precision.is_empty() {
            None
        } else {
            Some(r.precision.parse().map_err(JudgeError::InvalidArgument)?)
        };
        let preset = parse_preset(&r.preset)?;
        let code = match r.code {
            Some(pb::grade_request::Code::Source(s)) => Code::Source(s),
            Some(pb::grade_request::Code::LibraryPath(p)) => Code::Library(PathBuf::from(p)),
            None => {
                return Err(JudgeError::InvalidArgument(
                    "a submission needs source or library_path".into(),
                ));
            }
        };
        Ok(Submission {
            task_id: r.task_id,
            language,
            precision,
            preset,
            code,
            flags: r.flags,
            confirming: r.confirming,
        })
    }
}

/// A request's preset: "" is the judge's own.
pub fn parse_preset(text: &str) -> Result<Option<Preset>, JudgeError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(JudgeError::InvalidArgument)
}

/// Users per judge instance: slots beyond this share users.
const SLOT_UIDS: u32 = 256;

/// How runs are kept apart: each in namespaces of its own, under a seccomp
/// filter and Landlock; as root, each slot's runs as a user of their own.
#[derive(Debug, Clone)]
pub struct Isolation {
    pub root: bool,
    pub uid_base: u32,
    pub landlock_abi: i64,
    /// Whether runs can have PID, mount, IPC and network namespaces of
    /// their own here, or why not.
    pub namespaces: Result<(), String>,
    /// Whether runs can be held by ptrace between calls (a stop they
    /// cannot undo), or why not.
    pub hold: Result<(), String>,
}

impl Isolation {
    fn detect(rank: Option<u32>, exe: &Path) -> Isolation {
        // Far above any real account (LDAP included), below the reserved (uid_t)-1.
        let base: u32 = std::env::var("HPCAGENT_RUNNER_UID_BASE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3_000_000_000);
        // Judges on one node must not share users either (RLIMIT_NPROC counts
        // per user): the rank tells them apart, or else the process id.
        let instance = rank.unwrap_or(std::process::id());
        let probed = hpcagent_runner::probe(exe);
        Isolation {
            root: nix::unistd::geteuid().is_root(),
            uid_base: base + instance % 1_000_000 * SLOT_UIDS,
            landlock_abi: hpcagent_sandbox::landlock::abi_version(),
            namespaces: probed.namespaces,
            hold: probed.hold,
        }
    }

    /// The user a slot's runs (and builds) become (root judges only).
    pub fn run_as(&self, slot: usize) -> Option<u32> {
        self.root.then_some(self.uid_base + slot as u32 % SLOT_UIDS)
    }

    /// What falls short of full isolation here; empty when nothing does.
    pub fn shortfalls(&self) -> Vec<String> {
        let mut short = Vec::new();
        if let Err(why) = &self.namespaces {
            short.push(format!("runs cannot have namespaces of their own ({why})"));
        }
        if let Err(why) = &self.hold {
            short.push(format!(
                "runs cannot be held stopped between calls by ptrace ({why}), only by signals they can undo"
            ));
        }
        // A root judge's runs are other users: the judge's files are closed
        // to them without Landlock too.
        if !self.root && self.landlock_abi == 0 {
            short.push(
                "the kernel has no Landlock, so runs could read and write what the judge's user can"
                    .into(),
            );
        }
        short
    }

    pub fn describe(&self) -> String {
        let users = if self.root {
            "one user per slot"
        } else {
            "runs as the judge's user"
        };
        let namespaces = match &self.namespaces {
            Ok(()) if self.root => "own PID, mount, IPC and network namespaces".to_string(),
            Ok(()) => "own user, PID, mount, IPC and network namespaces".to_string(),
            Err(why) => format!("no namespaces of their own ({why})"),
        };
        let landlock = match self.landlock_abi {
            abi if abi >= 6 => format!("landlock ABI {abi} (files, TCP, signals)"),
            abi if abi >= 4 => format!("landlock ABI {abi} (files, TCP)"),
            abi if abi >= 1 => format!("landlock ABI {abi} (files)"),
            _ => "no landlock".into(),
        };
        let held = match &self.hold {
            Ok(()) => "held by ptrace between calls".to_string(),
            Err(why) => format!("stopped by signals between calls ({why})"),
        };
        format!(
            "{users}; {namespaces}; {held}; seccomp (no processes, sockets, IPC, timers or scheduling); {landlock}"
        )
    }
}

/// A judge ready to answer requests.
pub struct Judge {
    pub config: JudgeConfig,
    pub corpus: Corpus,
    /// When the corpus is an HPCAgent-Bench checkout: its tasks as written.
    pub hab: Option<HabTasks>,
    pub builder: Builder,
    pub data: DataCache,
    /// Input sets of grades against NumPy, made while it is idle.
    pub(crate) ahead: Ahead,
    pub slots: Slots,
    pub isolation: Isolation,
    pub profilers: Profilers,
    pub cache: PathBuf,
    pub rank: Option<(&'static str, String)>,
    /// The judges that confirm a speedup above its task's plausible bound.
    pub peers: Peers,
    /// The node's timing lock: timed pairs on one node, of this judge and
    /// any other, never overlap. Each run's supervisor opens it for itself,
    /// so the lock is its own and goes with it.
    pub timing_lock: Option<PathBuf>,
}

/// Why a judge refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    HabTasks(#[from] HabTaskError),
    /// The corpus's problems, one a line.
    #[error("the corpus at {path} is invalid:\n{problems}")]
    Corpus { path: PathBuf, problems: String },
    #[error(
        "the cache {cache} is inside {root}, which submissions can read; put it elsewhere (--cache)"
    )]
    CacheLocation { cache: PathBuf, root: PathBuf },
    #[error("cache {path}: {error}")]
    Cache {
        path: PathBuf,
        error: std::io::Error,
    },
    /// What the node lacks for isolation, `; `-separated.
    #[error(
        "this judge refuses to grade: {0}. Run it where the kernel allows these \
         (unprivileged user namespaces, Landlock), or allow weaker isolation \
         explicitly (`--weak-isolation`, `ISOLATION=weak` in a campaign): every \
         verdict will then say what it lacked"
    )]
    Isolation(String),
}

impl Judge {
    /// Loads the corpus and detects what this node has.
    pub fn new(config: JudgeConfig) -> Result<Judge, SetupError> {
        let (corpus, hab) = if hpcagent_corpus::hab::is_checkout(&config.corpus) {
            let (tasks, corpus) = HabTasks::load(&config.corpus, config.baselines.clone())?;
            (corpus, Some(tasks))
        } else {
            let corpus = Corpus::load(&config.corpus).map_err(|errors| {
                let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
                SetupError::Corpus {
                    path: config.corpus.clone(),
                    problems: lines.join("\n"),
                }
            })?;
            (corpus, None)
        };
        let rank = build::rank();
        let cache = build::cache_root(&config.cache_base, rank.as_ref().map(|(_, r)| r.as_str()));
        check_cache_location(&cache, config.shared.as_deref())?;
        std::fs::create_dir_all(&cache).map_err(|error| SetupError::Cache {
            path: cache.clone(),
            error,
        })?;
        let isolation =
            Isolation::detect(rank.as_ref().and_then(|(_, r)| r.parse().ok()), &config.exe);
        let short = isolation.shortfalls();
        if !short.is_empty() && !config.weak_isolation {
            return Err(SetupError::Isolation(short.join("; ")));
        }
        let builder = Builder::new(
            Toolchain::detect(),
            &cache,
            config.shared.clone(),
            config.exe.clone(),
            isolation.namespaces.is_ok(),
        );
        let gpus = visible_gpus();
        let slots = Slots::new(
            config.slots.unwrap_or(gpus.len().max(1)),
            &slots::allowed_cpus(),
            &gpus,
        );
        let data = DataCache::new(cache.clone(), config.python.clone())
            .with_bound(config.case_cache_bytes);
        Ok(Judge {
            ahead: Ahead::new(data.clone()),
            data,
            profilers: Profilers::detect(),
            peers: Peers::fixed(config.peers.clone()),
            config,
            corpus,
            hab,
            builder,
            slots,
            isolation,
            cache,
            rank,
            timing_lock: open_timing_lock(),
        })
    }

    /// The kernel, language and precision a request names, or why not.
    pub fn resolve(
        &self,
        task_id: &str,
        precision: Option<Precision>,
    ) -> Result<(&Kernel, Precision), JudgeError> {
        let kernel = match &self.hab {
            Some(tasks) => Some(
                tasks
                    .graded(&self.corpus, task_id)
                    .map_err(|e| JudgeError::InvalidArgument(e.to_string()))?,
            ),
            None => self.corpus.find(task_id),
        };
        let kernel = kernel.ok_or_else(|| {
            let names: Vec<&str> = self
                .corpus
                .kernels
                .iter()
                .map(|k| k.name.as_str())
                .collect();
            JudgeError::InvalidArgument(format!(
                "unknown task {task_id:?}; known: {}",
                names.join(", ")
            ))
        })?;
        let precision = precision.unwrap_or(kernel.precisions[0]);
        if !kernel.precisions.contains(&precision) {
            let offered: Vec<&str> = kernel.precisions.iter().map(|p| p.as_str()).collect();
            return Err(JudgeError::InvalidArgument(format!(
                "{} has no {precision} variant (it has {})",
                kernel.name,
                offered.join(", ")
            )));
        }
        Ok((kernel, precision))
    }

    /// Libraries in the shared mount's `lib/` (names as `-l` takes them).
    pub fn shared_libraries(&self) -> Vec<String> {
        let Some(shared) = &self.config.shared else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(shared.join("lib")) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_prefix("lib")?;
                let stem = stem.split(".so").next()?.trim_end_matches(".a");
                (!stem.is_empty()).then(|| stem.to_string())
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// A private copy of a prebuilt library that lies inside the shared mount.
    ///
    /// The file is opened once and judged by what was opened (its path as the
    /// kernel resolved it), then copied from that descriptor: swapping a path
    /// component for a symlink after the check gains nothing.
    pub fn copy_library(&self, path: &Path) -> Result<PathBuf, JudgeError> {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let shared = self.config.shared.as_ref().ok_or_else(|| {
            JudgeError::InvalidArgument(
                "this judge has no shared mount, so it takes no prebuilt libraries".into(),
            )
        })?;
        let path = if path.is_relative() {
            shared.join(path)
        } else {
            path.to_path_buf()
        };
        let invalid =
            |e: std::io::Error| JudgeError::InvalidArgument(format!("{}: {e}", path.display()));
        let mut file = std::fs::File::open(&path).map_err(invalid)?;
        let real =
            std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(invalid)?;
        let root = std::fs::canonicalize(shared).unwrap_or_else(|_| shared.clone());
        if !real.starts_with(&root) {
            return Err(JudgeError::InvalidArgument(format!(
                "{} resolves to {}, outside the shared mount {}",
                path.display(),
                real.display(),
                root.display()
            )));
        }
        let mut bytes = Vec::new();
        (&mut file)
            .take(1 << 30)
            .read_to_end(&mut bytes)
            .map_err(invalid)?;
        let copy = self.cache.join("prebuilt").join(format!(
            "{}.so",
            &hpcagent_corpus::fingerprint(&[&bytes])[..32]
        ));
        crate::data::write_private(&copy, &bytes)
            .map_err(|e| JudgeError::Internal(e.to_string()))?;
        Ok(copy)
    }

    /// `Task`: everything an agent needs to write the kernel (for an
    /// HPCAgent-Bench task on the loop track, its translator's C is made
    /// here if no grade made it before).
    pub async fn task(
        &self,
        task_id: &str,
        language: Language,
        precision: Option<Precision>,
        preset: Option<Preset>,
    ) -> Result<pb::TaskInfo, JudgeError> {
        let (kernel, precision) = self.resolve(task_id, precision)?;
        let preset = preset.unwrap_or(self.config.preset);
        let tolerance = kernel.tolerance(precision);
        let compiler_flags = self
            .builder
            .toolchain
            .compiler(language)
            .map(|c| c.flags.clone())
            .unwrap_or_default();
        let sources = self.sources(kernel, preset).await;
        let mut notes = vec![
            "Arrays are row-major (C order) and do not overlap. Write only the outputs; inputs are const.".to_string(),
            sources.grading,
        ];
        if language == Language::Fortran {
            notes.push("Fortran sees row-major arrays with their dimensions reversed.".into());
        }
        if language.is_gpu() {
            notes
                .push("Pointers are device pointers; the function is called from the host.".into());
        }
        if !kernel.notes.is_empty() {
            notes.push(kernel.notes.clone());
        }
        notes.extend(sources.hints);
        Ok(pb::TaskInfo {
            task_id: kernel.id.clone(),
            kernel: kernel.name.clone(),
            track: kernel.track.clone(),
            description: kernel.description.clone(),
            language: language.to_string(),
            precision: precision.to_string(),
            c_prototype: abi::c_prototype(kernel, precision),
            language_prototype: abi::language_prototype(kernel, precision, language),
            symbol: kernel.symbol(precision),
            preset: preset.to_string(),
            sizes: kernel
                .presets
                .get(&preset)
                .into_iter()
                .flatten()
                .map(|(name, value)| pb::Dimension {
                    name: name.clone(),
                    value: *value,
                })
                .collect(),
            rtol: tolerance.rtol,
            atol: tolerance.atol,
            reference_source: sources.reference,
            judge_flags: compiler_flags,
            allowed_flags: flags::describe(),
            libraries: self.shared_libraries(),
            tags: kernel.tags.clone(),
            notes: notes.join("\n"),
            baseline_source: sources.baseline,
        })
    }

    /// A task's reference and baseline sources, how it is graded, and its
    /// hints: the kernel's own files, or an HPCAgent-Bench manifest's.
    async fn sources(&self, kernel: &Kernel, preset: Preset) -> TaskSources {
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        let Some((tasks, manifested)) = self
            .hab
            .as_ref()
            .and_then(|t| t.find(&kernel.id).ok().map(|m| (t, m)))
        else {
            return TaskSources {
                reference: read(&kernel.reference_path()),
                baseline: read(&kernel.baseline_path()),
                grading: format!(
                    "Score times the kernel against the baseline on fresh random inputs at the \
                     public sizes ({preset}), then checks it on the public case (seed {}); Submit \
                     times it at sizes of its own and adds held-out seeds and sizes.",
                    self.config.public_seed
                ),
                hints: Vec::new(),
            };
        };
        let denominator = tasks.denominator(manifested);
        let (baseline, denominator_text) = match &denominator {
            Denominator::Overlay(file) => (
                Some(read(file)),
                "a C baseline (the operator's), timed in pairs beside it on the same inputs"
                    .to_string(),
            ),
            Denominator::Translator => {
                let text = "the C HPCAgent-Bench's translator emits from the reference \
                            (single-core, as HPCAgent-Bench times this track), timed in pairs \
                            beside it on the same inputs";
                match self
                    .data
                    .translated(&tasks.root, manifested, &kernel.fingerprint)
                    .await
                {
                    Ok(translated) => (Some(translated.source), text.to_string()),
                    Err(e) => (None, format!("{text} (which cannot be made here: {e})")),
                }
            }
            Denominator::Numpy => (
                None,
                "the NumPy reference's fastest call on the same inputs, as HPCAgent-Bench times \
                 this track"
                    .to_string(),
            ),
        };
        let sizes = match manifested.variation() {
            hpcagent_corpus::hab::Variation::Transform => format!(
                "sizes drawn around {preset}'s (its inputs are made from the sizes alone: at \
                 {preset}'s they would be the public case's)"
            ),
            _ => format!("{preset}'s sizes, as HPCAgent-Bench's judge times them"),
        };
        let mut hints = vec![format!(
            "{} (level {}, {}): HPCAgent-Bench gives an agent {} s for this level.",
            manifested.name,
            manifested.level,
            manifested.kind,
            hpcagent_corpus::hab::level_budget_seconds(manifested.level)
        )];
        hints.extend(
            manifested
                .hints(&tasks.root)
                .iter()
                .map(|file| read(file).trim_end().to_string())
                .filter(|text| !text.is_empty()),
        );
        TaskSources {
            reference: read(&manifested.reference),
            // As the judge builds it: a translator's symbol renamed to the task's.
            baseline: baseline
                .map(|source| {
                    let renamed = crate::hab_tasks::renaming(manifested, &source)
                        .map(|emitted| format!("#define {emitted} {}\n", manifested.abi.symbol));
                    format!("{}{source}", renamed.unwrap_or_default())
                })
                .unwrap_or_default(),
            grading: format!(
                "Inputs are HPCAgent-Bench's for seed {} at {preset}; outputs hold generated data \
                 before the call. The speedup's denominator is {denominator_text}, timed at \
                 {sizes} on inputs of the grade's own. Submit adds five held-out cases drawn \
                 differently.",
                self.config.public_seed
            ),
            hints,
        }
    }

    /// What this judge can build and profile, and how it isolates runs.
    pub fn capabilities(&self) -> pb::JudgeCapabilities {
        let toolchain = &self.builder.toolchain;
        let mut missing: Vec<String> = toolchain.missing.values().cloned().collect();
        missing.extend(self.profilers.missing());
        pb::JudgeCapabilities {
            compilers: toolchain
                .compilers
                .iter()
                .map(|(language, c)| pb::Compiler {
                    language: language.to_string(),
                    command: c.command.clone(),
                    version: c.version.clone(),
                })
                .collect(),
            profilers: self.profilers.available(),
            missing,
            slots: self.slots.count() as u32,
            kernels: self.corpus.kernels.iter().map(|k| k.name.clone()).collect(),
            cache_dir: self.cache.display().to_string(),
            sandbox_dir: crate::sandbox_dir::root().display().to_string(),
            rank: self
                .rank
                .as_ref()
                .map(|(var, r)| format!("{r} (from {var})"))
                .unwrap_or_default(),
            isolation: self.isolation.describe(),
        }
    }
}

/// What [`Judge::task`] shows of a task beyond its ABI.
struct TaskSources {
    reference: String,
    baseline: String,
    /// How it is graded, in a sentence or two.
    grading: String,
    /// The manifest's name, level and hints (HPCAgent-Bench tasks).
    hints: Vec<String>,
}

/// The cache holds the reference outputs: it must not lie where sandboxed
/// runs may read (the system directories, the shared mount).
fn check_cache_location(cache: &Path, shared: Option<&Path>) -> Result<(), SetupError> {
    let absolute = std::path::absolute(cache).unwrap_or_else(|_| cache.to_path_buf());
    let readable = hpcagent_sandbox::landlock::SYSTEM_READ
        .iter()
        .map(Path::new)
        .chain(shared);
    for root in readable {
        if absolute.starts_with(root) {
            return Err(SetupError::CacheLocation {
                cache: absolute,
                root: root.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// The node's timing lock (`HPCAGENT_TIMING_LOCK`, else one per user in
/// the temporary directory, which a Slurm job's steps on a node share),
/// made if missing; `None` (with a warning) where it cannot be.
fn open_timing_lock() -> Option<PathBuf> {
    let path = timing_lock_path();
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(_) => Some(path),
        Err(e) => {
            tracing::warn!(
                "the timing lock {} cannot be opened ({e}): timed pairs of judges on this node may overlap",
                path.display()
            );
            None
        }
    }
}

pub fn timing_lock_path() -> PathBuf {
    std::env::var_os("HPCAGENT_TIMING_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let uid = nix::unistd::geteuid().as_raw();
            std::env::temp_dir().join(format!("hpcagent-timing-{uid}.lock"))
        })
}

/// Waits for the node's timing lock and holds it until dropped: Python
/// that draws inputs or times the reference runs while no grade on the
/// node times its calls.
pub(crate) async fn node_quiet() -> Result<Flock<std::fs::File>, LockError> {
    quiet_at(timing_lock_path()).await
}

/// Waits for the timing lock at `path`, and holds it until dropped.
pub(crate) async fn quiet_at(path: PathBuf) -> Result<Flock<std::fs::File>, LockError> {
    let held = path.clone();
    tokio::task::spawn_blocking(move || hold_timing_lock(&path))
        .await
        .map_err(std::io::Error::other)
        .and_then(|locked| locked)
        .map_err(|error| LockError { path: held, error })
}

/// Blocks until the timing lock at `path` is this caller's, and holds it
/// until dropped: for what times work outside a judge (the benches) as a
/// judge's timed calls hold it.
pub fn hold_timing_lock(path: &Path) -> std::io::Result<Flock<std::fs::File>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e.into())
}

/// The node's timing lock could not be waited for.
#[derive(Debug, thiserror::Error)]
#[error("waiting for the node's timing lock {path}: {error}")]
pub struct LockError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

/// GPU indices this process may use (`CUDA_VISIBLE_DEVICES`,
/// `ROCR_VISIBLE_DEVICES` or `HIP_VISIBLE_DEVICES`); none on CPU nodes.
fn visible_gpus() -> Vec<u32> {
    [
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok())
    .map(|list| {
        list.split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    })
    .unwrap_or_default()
}

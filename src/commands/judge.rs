//! `hpcagent judge`: serve the Judge service, or ask one (task, score, submit,
//! profile, capabilities). `exec` is the judge's own helper (a run's
//! supervisor and runners).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use hpcagent_corpus::Language;
use hpcagent_corpus::{Corpus, Preset, hab};
use hpcagent_judge::verdict::Verdict;
use hpcagent_judge::{Judge, JudgeConfig, build, oracle};
use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::judge_client::JudgeClient;

#[derive(Debug, Args)]
pub struct JudgeArgs {
    #[command(subcommand)]
    command: JudgeCommand,
}

#[derive(Debug, Subcommand)]
enum JudgeCommand {
    /// Serve the Judge gRPC service.
    Serve(ServeArgs),
    /// Describe a task: the exact C prototype first, then the rest.
    Task(TaskArgs),
    /// Make an HPCAgent-Bench task's inputs (and its reference's outputs) into a directory.
    Inputs(InputsArgs),
    /// Grade a submission on the public case (never recorded).
    Score(GradeArgs),
    /// Grade a submission on the public and held-out cases.
    Submit(GradeArgs),
    /// Run a submission under a profiler.
    Profile(ProfileArgs),
    /// What a judge can build and profile.
    Capabilities(ClientArgs),
}

/// Where the judge finds its corpus and keeps its cache.
#[derive(Debug, Args)]
pub struct JudgeSetup {
    /// The task corpus (default: HPCAGENT_BENCHMARKS or ./benchmarks).
    #[arg(long, value_name = "DIR", value_parser = absolute)]
    corpus: Option<PathBuf>,
    /// C baselines of an HPCAgent-Bench corpus's tasks, `<path key>/baseline.c`,
    /// timed against instead of what HPCAgent-Bench times a task against
    /// (its translator's C on the loop-level track, made by the judge from
    /// the checkout; its NumPy reference elsewhere).
    #[arg(long, value_name = "DIR", value_parser = absolute)]
    baselines: Option<PathBuf>,
    /// Cache base directory; the rank suffix is added (default: ~/.cache/hpcagent).
    #[arg(long, value_name = "DIR", value_parser = absolute)]
    cache: Option<PathBuf>,
    /// GiB of cases (inputs and reference outputs) the cache keeps; the
    /// least recently used beyond go, those of grades in flight stay.
    #[arg(long, value_name = "GIB", default_value_t = hpcagent_judge::data::bound::DEFAULT_BYTES >> 30)]
    case_cache_gib: u64,
    /// Shared mount for prebuilt libraries and -I/-L paths (default: HPCAGENT_SHARED_DIR).
    #[arg(long, value_name = "DIR", value_parser = absolute)]
    shared: Option<PathBuf>,
    /// Preset of the public case.
    #[arg(long, default_value = "M")]
    pub preset: Preset,
    /// Timed pairs (a baseline call and a submission call) a grade makes at
    /// least, after one pair to warm up; 12, six rounds of one pair in
    /// each order, are the fewest that can tell a change.
    #[arg(long, default_value_t = 12)]
    reps: u32,
    /// How narrow a grade measures the speedup's 95% interval: its half
    /// width as a fraction of the speedup (0.01: within ±1%).
    #[arg(long, default_value_t = 0.01)]
    interval: f64,
    /// Seconds a grade's timed pairs may take, however wide the interval still is.
    #[arg(long, default_value_t = 30)]
    time_cap: u64,
    /// Grade even where runs cannot have namespaces of their own (or, for
    /// an unprivileged judge, the kernel has no Landlock); every verdict
    /// then says what its run lacked.
    #[arg(long)]
    weak_isolation: bool,
    /// Grading slots (default: one per visible GPU, else 1).
    #[arg(long)]
    slots: Option<usize>,
    /// A submit whose speedup is above this many times its task's baseline
    /// per runner CPU (a kernel's `plausible_speedup` overrides it) is
    /// graded again, and by a peer, before it is credited.
    #[arg(long, value_name = "TIMES", default_value_t = hpcagent_judge::judge::PLAUSIBLE_PER_CPU)]
    plausible_per_cpu: f64,
    /// Another judge that confirms such a speedup (repeatable), e.g.
    /// http://node2:8800.
    #[arg(long = "peer", value_name = "URL")]
    peers: Vec<String>,
}

/// A directory as given, made absolute against the working directory: a
/// run's processes start elsewhere (the runner in a sandbox of its own),
/// where a relative path names nothing.
fn absolute(dir: &str) -> Result<PathBuf, String> {
    std::path::absolute(dir).map_err(|e| format!("{dir}: {e}"))
}

impl JudgeSetup {
    /// The corpus directory this setup names.
    pub fn corpus_root(&self) -> PathBuf {
        self.corpus.clone().unwrap_or_else(Corpus::default_root)
    }

    /// The HPCAgent-Bench manifests of the corpus, when it is such a
    /// checkout (no `kernel.toml` kernels, `*.yaml` manifests).
    pub fn hab_corpus(&self) -> anyhow::Result<Option<HabCorpus>> {
        hab_corpus(self.corpus_root())
    }

    pub fn judge(&self) -> anyhow::Result<Judge> {
        let exe = std::env::current_exe().context("cannot find the hpcagent executable")?;
        let mut config = JudgeConfig::new(
            self.corpus.clone().unwrap_or_else(Corpus::default_root),
            exe,
        );
        if let Some(cache) = &self.cache {
            config.cache_base = cache.clone();
        }
        config.case_cache_bytes = self.case_cache_gib << 30;
        config.baselines = self.baselines.clone();
        if self.shared.is_some() {
            config.shared = self.shared.clone();
        }
        config.preset = self.preset;
        config.reps = self.reps.max(1);
        config.interval = self.interval;
        config.time_cap = std::time::Duration::from_secs(self.time_cap.max(1));
        config.weak_isolation = self.weak_isolation;
        config.slots = self.slots;
        config.plausible_per_cpu = self.plausible_per_cpu;
        config.peers = self.peers.clone();
        let oracle = oracle::find(&build::default_cache_base(), |progress| {
            eprintln!("{progress}")
        })?;
        config.python = oracle.python;
        Judge::new(config).map_err(anyhow::Error::msg)
    }
}

/// The HPCAgent-Bench manifests under `root`, when it is such a checkout
/// (no `kernel.toml` kernels, `*.yaml` manifests).
pub fn hab_corpus(root: PathBuf) -> anyhow::Result<Option<HabCorpus>> {
    if !hab::is_checkout(&root) {
        return Ok(None);
    }
    let (kernels, refused) =
        hab::load(&root).with_context(|| format!("cannot read {}", root.display()))?;
    Ok(Some(HabCorpus {
        root,
        kernels,
        refused,
    }))
}

/// An HPCAgent-Bench checkout read as a corpus.
pub struct HabCorpus {
    pub root: PathBuf,
    pub kernels: Vec<hab::Kernel>,
    pub refused: Vec<hab::Refusal>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8800")]
    listen: std::net::SocketAddr,
    /// Tasks (comma-separated ids or path keys) whose cases to make in
    /// the background from the start, before any grade asks: an
    /// HPCAgent-Bench task's public case with its reference's times, and
    /// the held-out cases of a submit.
    #[arg(long, value_delimiter = ',', value_name = "TASKS")]
    warm: Vec<String>,
    /// The most disk (MiB) the warmed cases may take; the tasks after are
    /// made when first graded.
    #[arg(long, value_name = "MIB", default_value_t = hpcagent_judge::warm::WARM_BUDGET >> 20)]
    warm_budget: u64,
    #[command(flatten)]
    setup: JudgeSetup,
}

#[derive(Debug, Args)]
struct ClientArgs {
    /// The judge to ask, e.g. http://127.0.0.1:8800.
    #[arg(long, value_name = "URL")]
    judge: String,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct TaskArgs {
    /// Kernel name (gemm) or path under benchmarks/ (dense_linear_algebra/gemm).
    id: String,
    #[arg(long, default_value = "c")]
    language: Language,
    #[arg(long)]
    precision: Option<String>,
    /// Ask this judge instead of reading the local corpus.
    #[arg(long, value_name = "URL")]
    judge: Option<String>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    setup: JudgeSetup,
}

#[derive(Debug, Args)]
struct InputsArgs {
    /// The manifest's path key, or its stem when unambiguous.
    id: String,
    /// The HPCAgent-Bench checkout's benchmarks directory.
    #[arg(long, value_name = "DIR")]
    corpus: PathBuf,
    #[arg(long, default_value = "S")]
    preset: String,
    /// The data seed (HPCAgent-Bench's public case uses 42).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long, default_value = "fp64")]
    precision: String,
    /// Where the `.npy` files go.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Also run the NumPy reference on them (its outputs under DIR/expected/).
    #[arg(long)]
    reference: bool,
}

#[derive(Debug, Args)]
struct GradeArgs {
    #[command(flatten)]
    client: ClientArgs,
    #[arg(long)]
    task: String,
    #[arg(long)]
    language: Language,
    #[arg(long)]
    precision: Option<String>,
    /// The public case's preset (S, M, L, XL); default: the judge's.
    #[arg(long)]
    preset: Option<Preset>,
    /// An extra compiler flag (repeatable), checked against the allow-list.
    #[arg(long = "flag", value_name = "FLAG", allow_hyphen_values = true)]
    flags: Vec<String>,
    /// Grade a prebuilt library in the judge's shared mount instead of FILE.
    #[arg(long, value_name = "PATH", conflicts_with = "file")]
    library: Option<PathBuf>,
    /// The source file.
    #[arg(required_unless_present = "library")]
    file: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ProfileArgs {
    #[command(flatten)]
    grade: GradeArgs,
    /// none, linuxperf, papi, nsys, ncu or rocprofv3.
    #[arg(long, default_value = "none")]
    tool: String,
    /// A counter to collect (PAPI event names); repeatable.
    #[arg(long = "event")]
    events: Vec<String>,
}

/// Runs a judge's own helper process (`main` found its arguments: the
/// supervisor of a run, a runner, the namespace probe) and exits with its status.
pub fn run_process(entry: hpcagent_runner::Entry) -> ! {
    std::process::exit(hpcagent_runner::run_entry(
        entry,
        hpcagent_judge::build::confined::main,
    ))
}

pub fn run(args: JudgeArgs) -> anyhow::Result<()> {
    match args.command {
        JudgeCommand::Serve(a) => runtime()?.block_on(serve(a)),
        JudgeCommand::Task(a) => runtime()?.block_on(task(a)),
        JudgeCommand::Inputs(a) => inputs(a),
        JudgeCommand::Score(a) => runtime()?.block_on(grade(a, false)),
        JudgeCommand::Submit(a) => runtime()?.block_on(grade(a, true)),
        JudgeCommand::Profile(a) => runtime()?.block_on(profile(a)),
        JudgeCommand::Capabilities(a) => runtime()?.block_on(capabilities(a)),
    }
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    crate::commands::init_logging();
    let judge = args.setup.judge()?;
    let preset = args.setup.preset;
    let warm = args
        .warm
        .into_iter()
        .map(|kernel| hpcagent_judge::warm::ToWarm {
            kernel,
            precision: None,
            preset,
        })
        .collect();
    hpcagent_judge::standalone::serve(judge, args.listen, warm, args.warm_budget << 20).await?;
    Ok(())
}

async fn connect(url: &str) -> anyhow::Result<JudgeClient<tonic::transport::Channel>> {
    let client = JudgeClient::connect(url.to_string())
        .await
        .with_context(|| format!("cannot reach the judge at {url}"))?;
    Ok(client.max_decoding_message_size(64 << 20))
}

async fn task(args: TaskArgs) -> anyhow::Result<()> {
    if args.judge.is_none()
        && let Some(corpus) = args.setup.hab_corpus()?
    {
        return hab_task(&args, &corpus);
    }
    let info = match &args.judge {
        Some(url) => connect(url)
            .await?
            .task(pb::TaskRequest {
                task_id: args.id.clone(),
                language: args.language.to_string(),
                precision: args.precision.clone().unwrap_or_default(),
                preset: String::new(),
            })
            .await
            .map_err(rpc_error)?
            .into_inner(),
        None => {
            let judge = args.setup.judge()?;
            let precision = args
                .precision
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            judge
                .task(&args.id, args.language, precision, None)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&task_json(&info))?);
        return Ok(());
    }
    println!("{}", info.c_prototype);
    println!();
    println!(
        "task {} ({}), {} {}",
        info.task_id, info.track, info.language, info.precision
    );
    println!("{}", info.description);
    let sizes: Vec<String> = info
        .sizes
        .iter()
        .map(|d| format!("{}={}", d.name, d.value))
        .collect();
    println!("public preset {}: {}", info.preset, sizes.join(" "));
    println!("tolerance: rtol {:e}, atol {:e}", info.rtol, info.atol);
    if info.language != "c" {
        println!("\nin {}:\n{}", info.language, info.language_prototype);
    }
    println!("\njudge flags: {}", info.judge_flags.join(" "));
    println!("allowed flags: {}", info.allowed_flags);
    if !info.libraries.is_empty() {
        println!(
            "libraries in the shared mount: {}",
            info.libraries.join(", ")
        );
    }
    println!("\n{}", info.notes);
    println!(
        "\nreference (NumPy, the oracle):\n{}",
        info.reference_source
    );
    Ok(())
}

/// An HPCAgent-Bench task's inputs at a preset and seed, as `.npy` files.
fn inputs(args: InputsArgs) -> anyhow::Result<()> {
    let corpus = hab_corpus(args.corpus.clone())?.with_context(|| {
        format!(
            "{} holds no HPCAgent-Bench manifests",
            args.corpus.display()
        )
    })?;
    anyhow::ensure!(
        matches!(args.precision.as_str(), "fp64" | "fp32"),
        "--precision is fp64 or fp32"
    );
    let kernel = hab::find(&corpus.kernels, &args.id).map_err(anyhow::Error::msg)?;
    hpcagent_judge::data::hab::check_fits(kernel, &args.preset).map_err(anyhow::Error::msg)?;
    let plan = kernel
        .input_plan(
            &corpus.root,
            kernel
                .preset_symbols(&args.preset)
                .map_err(anyhow::Error::msg)?,
            args.seed,
            &args.precision,
        )
        .map_err(anyhow::Error::msg)?;
    let python = oracle::find(&build::default_cache_base(), |p| eprintln!("{p}"))?.python;
    let missing = hpcagent_judge::data::hab::missing_modules(
        &python,
        &hab::checkout(&corpus.root),
        &kernel.needs(),
    )
    .map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        missing.is_empty(),
        "{} needs {}, which {python} cannot import: give the judge a Python that has them \
         (HPCAGENT_PYTHON)",
        kernel.key,
        missing.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let made = hpcagent_judge::data::hab::make_inputs(&python, &plan, &args.out, args.reference)
        .map_err(anyhow::Error::msg)?;
    for m in &made.inputs {
        println!("{:24} {:10} {:?}", m.name, m.dtype, m.shape);
    }
    for m in made.expected.iter().flatten() {
        println!("expected/{:15} {:10} {:?}", m.name, m.dtype, m.shape);
    }
    Ok(())
}

/// A task of an HPCAgent-Bench manifest: what a submission exports, and the
/// reference that defines it. (Grading such tasks is not built yet.)
fn hab_task(args: &TaskArgs, corpus: &HabCorpus) -> anyhow::Result<()> {
    let kernel = hab::find(&corpus.kernels, &args.id).map_err(|why| {
        // A refused manifest is named with its reason, not as missing.
        let refused = corpus
            .refused
            .iter()
            .find(|r| r.key.ends_with(args.id.as_str()));
        anyhow::anyhow!(match refused {
            Some(r) => format!("{} is refused: {}", r.key, r.reason),
            None => why.to_string(),
        })
    })?;
    anyhow::ensure!(
        args.language == Language::C,
        "HPCAgent-Bench tasks are described in C only so far"
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(kernel)?);
        return Ok(());
    }
    println!("{};", kernel.abi.c_prototype());
    println!();
    println!(
        "task {} ({}, level {}, {})",
        kernel.key, kernel.track, kernel.level, kernel.kind
    );
    println!("{}", kernel.name);
    println!(
        "agent time budget: {} s (level {})",
        hab::level_budget_seconds(kernel.level),
        kernel.level
    );
    for hint in kernel.hints(&corpus.root) {
        let text = std::fs::read_to_string(&hint)
            .with_context(|| format!("cannot read {}", hint.display()))?;
        println!("\nhint ({}):\n{}", hint.display(), text.trim_end());
    }
    let reference = std::fs::read_to_string(&kernel.reference)
        .with_context(|| format!("cannot read {}", kernel.reference.display()))?;
    println!(
        "\nreference (NumPy, {}() in {}):\n{reference}",
        kernel.entry,
        kernel.reference.display()
    );
    Ok(())
}

fn task_json(info: &pb::TaskInfo) -> serde_json::Value {
    serde_json::json!({
        "task_id": info.task_id, "kernel": info.kernel, "track": info.track,
        "description": info.description, "language": info.language, "precision": info.precision,
        "c_prototype": info.c_prototype, "language_prototype": info.language_prototype,
        "symbol": info.symbol, "preset": info.preset,
        "sizes": info.sizes.iter().map(|d| (d.name.clone(), d.value)).collect::<std::collections::BTreeMap<_, _>>(),
        "rtol": info.rtol, "atol": info.atol, "reference_source": info.reference_source,
        "judge_flags": info.judge_flags, "allowed_flags": info.allowed_flags,
        "libraries": info.libraries, "tags": info.tags, "notes": info.notes,
        "baseline_source": info.baseline_source,
    })
}

fn grade_request(args: &GradeArgs) -> anyhow::Result<pb::GradeRequest> {
    let code = match (&args.library, &args.file) {
        (Some(lib), _) => pb::grade_request::Code::LibraryPath(lib.display().to_string()),
        (None, Some(file)) => pb::grade_request::Code::Source(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?,
        ),
        (None, None) => bail!("give a source FILE or --library"),
    };
    Ok(pb::GradeRequest {
        task_id: args.task.clone(),
        language: args.language.to_string(),
        precision: args.precision.clone().unwrap_or_default(),
        code: Some(code),
        flags: args.flags.clone(),
        client: "hpcagent judge cli".into(),
        lease_id: String::new(),
        preset: args.preset.map(|p| p.to_string()).unwrap_or_default(),
        confirming: false,
        on_behalf: None,
    })
}

async fn grade(args: GradeArgs, submit: bool) -> anyhow::Result<()> {
    let request = grade_request(&args)?;
    let mut client = connect(&args.client.judge).await?;
    let answer = if submit {
        client.submit(request).await
    } else {
        client.score(request).await
    };
    let verdict = Verdict::from(answer.map_err(rpc_error)?.into_inner());
    print_verdict(&verdict, args.client.json)
}

async fn profile(args: ProfileArgs) -> anyhow::Result<()> {
    let request = pb::ProfileRequest {
        submission: Some(grade_request(&args.grade)?),
        tool: args.tool.clone(),
        events: args.events.clone(),
    };
    let report = connect(&args.grade.client.judge)
        .await?
        .profile(request)
        .await
        .map_err(rpc_error)?
        .into_inner();
    let verdict = report.run.clone().map(Verdict::from);
    if args.grade.client.json {
        let json = serde_json::json!({
            "tool": report.tool, "summary": report.summary, "counters": report.counters,
            "stdout_tail": report.stdout_tail, "stderr_tail": report.stderr_tail, "run": verdict,
            "unavailable": report.unavailable,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return profiled(&report);
    }
    if let Some(v) = &verdict {
        print_verdict(v, false)?;
    }
    println!("\n{} profile:\n{}", report.tool, report.summary);
    if !report.stdout_tail.is_empty() {
        println!("\nstdout:\n{}", report.stdout_tail);
    }
    profiled(&report)
}

/// A report that profiled nothing ends the command with its reason.
fn profiled(report: &pb::ProfileReport) -> anyhow::Result<()> {
    if report.unavailable.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "{} is unavailable here: {}",
        report.tool,
        report.unavailable
    )
}

async fn capabilities(args: ClientArgs) -> anyhow::Result<()> {
    let caps = connect(&args.judge)
        .await?
        .capabilities(pb::CapabilitiesRequest {})
        .await
        .map_err(rpc_error)?
        .into_inner();
    if args.json {
        let json = serde_json::json!({
            "compilers": caps.compilers.iter().map(|c| serde_json::json!({"language": c.language, "command": c.command, "version": c.version})).collect::<Vec<_>>(),
            "profilers": caps.profilers, "missing": caps.missing, "slots": caps.slots,
            "kernels": caps.kernels, "cache_dir": caps.cache_dir, "sandbox_dir": caps.sandbox_dir,
            "rank": caps.rank, "isolation": caps.isolation,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    for c in &caps.compilers {
        println!("{:8} {} ({})", c.language, c.command, c.version);
    }
    println!("profilers: {}", caps.profilers.join(", "));
    for m in &caps.missing {
        println!("missing: {m}");
    }
    println!(
        "slots: {}  kernels: {}  rank: {}",
        caps.slots,
        caps.kernels.len(),
        caps.rank
    );
    println!("cache: {}  sandbox: {}", caps.cache_dir, caps.sandbox_dir);
    println!("isolation: {}", caps.isolation);
    Ok(())
}

/// Prints a verdict for a person, or as one JSON object.
pub fn print_verdict(v: &Verdict, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(v)?);
        return Ok(());
    }
    println!("{}: {}", v.status, v.message);
    if let Some(t) = &v.timing {
        println!(
            "time: median {} min {} spread {:.1}% ({} calls)",
            human_ns(t.median_ns),
            human_ns(t.min_ns),
            t.spread * 100.0,
            t.reps
        );
    }
    if let Some(d) = &v.device {
        println!(
            "device: median {} a call on the GPU, transfers apart (the runner's own measure)",
            human_ns(d.median_ns)
        );
    }
    if let Some(b) = &v.baseline {
        let speedup = v
            .speedup
            .map(|s| {
                let speedup =
                    hpcagent_common::speedup::Speedup::new(s, v.speedup_low, v.speedup_high);
                // "no change" stands alone; a change reads "speedup 1.23x".
                let word = if speedup.no_change() { "" } else { "speedup " };
                format!(" → {word}{speedup}")
            })
            .unwrap_or_default();
        let at: Vec<String> = v
            .timed_sizes
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let pairs = match (v.pairs, at.is_empty()) {
            (0, _) => String::new(),
            (n, true) => format!(" over {n} timed pairs"),
            (n, false) => format!(" over {n} timed pairs at {}", at.join(", ")),
        };
        println!("baseline: median {}{speedup}{pairs}", human_ns(b.median_ns));
    }
    if !v.isolation.is_empty() && v.isolation != "full" {
        println!("isolation: {}", v.isolation);
    }
    if !v.plausibility.is_empty() {
        println!("plausibility: {}", v.plausibility);
    }
    if v.correct || v.max_abs_error > 0.0 {
        println!(
            "error: max abs {:e}, max rel {:e}",
            v.max_abs_error, v.max_rel_error
        );
    }
    if v.hidden_total > 0 {
        println!("held-out: {}/{} passed", v.hidden_passed, v.hidden_total);
    }
    if !v.build_log.trim().is_empty() && v.status != hpcagent_judge::verdict::Status::Ok {
        println!("build log:\n{}", v.build_log.trim_end());
    }
    println!(
        "({:.2} s{})",
        v.elapsed_s,
        if v.cached_build { ", cached build" } else { "" }
    );
    Ok(())
}

fn human_ns(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.3} s", n / 1e9),
        n if n >= 1e6 => format!("{:.3} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.3} µs", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}

/// An RPC error for the user; invalid requests exit 2 (see `commands::report`).
fn rpc_error(status: tonic::Status) -> anyhow::Error {
    let error = anyhow::anyhow!("{}: {}", code_name(status.code()), status.message());
    if status.code() == tonic::Code::InvalidArgument {
        error.context(crate::commands::InvalidRequest)
    } else {
        error
    }
}

fn code_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::InvalidArgument => "invalid argument",
        tonic::Code::FailedPrecondition => "failed precondition",
        tonic::Code::Unavailable => "unavailable",
        tonic::Code::Internal => "internal error",
        _ => "error",
    }
}

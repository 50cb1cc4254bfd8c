//! `hpcagent bench campaign`: what the judges spend on a whole campaign,
//! against the same work done by hand.
//!
//! The campaign: `hpcagent up` on this machine, the baseline policy over
//! the corpus in C at a preset where calls take 0.1–1 s (M by default),
//! one agent and one judge, so that every grade has the judge to itself and
//! the sum of the grades' times is the judge's busy time (with more, a
//! grade's time would include waiting for a slot or the node's timing
//! lock). Each grade's time is the judge's own, from request to verdict,
//! as the store keeps it.
//!
//! By hand, for each settled task: `gcc` with the judge's flags twice (the
//! submission, and the baseline to time it against), then a driver made
//! for the kernel from its manifest (compiled beforehand, not counted):
//! a warm-up pair and as many pairs as the grade made (baseline, then
//! submission, on inputs drawn fresh for each pair, the in/out arrays
//! restored before each call), then the submission once on fresh inputs
//! for each correctness check the grade made, all at the sizes the grade
//! timed at (a submit draws its own around the preset's; its verdict says
//! which). By hand computes no reference outputs and compares nothing: the
//! judge's extra work is in the ratio.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use hpcagent_corpus::abi::{self, Arg};
use hpcagent_corpus::{Corpus, DType, Init, Kernel, Precision, Preset, Role, ScalarValue, Sizes};
use hpcagent_orchestrator::store::Reader;

use crate::judge::{judge_flags, run};

#[derive(Debug, Clone)]
pub struct Options {
    pub exe: PathBuf,
    /// The repository (benchmarks/).
    pub repo: PathBuf,
    pub preset: Preset,
    /// Only these kernels (all of the corpus when empty).
    pub kernels: Vec<String>,
    pub work_dir: PathBuf,
    /// Where the campaign runs (kept after the bench); a campaign that
    /// finished there before is measured again instead of run again.
    pub run_dir: PathBuf,
}

/// One settled task's grade and the same work by hand.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Task {
    pub kernel: String,
    pub pairs: u32,
    pub checks: u32,
    /// The baseline's median call, as the judge timed it.
    pub call_ms: f64,
    pub graded_s: f64,
    pub by_hand_s: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub preset: String,
    /// `up` from start to exit.
    pub campaign_s: f64,
    pub tasks: Vec<Task>,
    /// Tasks that did not settle ok, with why.
    pub unsettled: Vec<(String, String)>,
}

impl Outcome {
    pub fn busy_s(&self) -> f64 {
        self.tasks.iter().map(|t| t.graded_s).sum()
    }

    pub fn by_hand_s(&self) -> f64 {
        self.tasks.iter().map(|t| t.by_hand_s).sum()
    }
}

pub fn run_bench(options: &Options) -> anyhow::Result<Outcome> {
    let dir = &options.work_dir;
    std::fs::create_dir_all(dir)?;
    let corpus = Corpus::load(&options.repo.join("benchmarks"))
        .map_err(|e| anyhow::anyhow!("the corpus: {e:?}"))?;
    let flags = judge_flags()?;
    let run_dir = options.run_dir.clone();
    let campaign_s = match finished_campaign(&run_dir) {
        Some(seconds) => {
            eprintln!("campaign: the one that finished in {}", run_dir.display());
            seconds
        }
        None => {
            rehearse(options, &corpus, &flags)?;
            campaign(options)?
        }
    };
    let reader = Reader::open(&run_dir)
        .with_context(|| format!("cannot read the store in {}", run_dir.display()))?;
    let rows = reader.tasks()?;
    let tasks: BTreeMap<String, (String, String)> = rows
        .iter()
        .map(|t| (t.id.clone(), (t.kernel.clone(), t.precision.clone())))
        .collect();
    let mut outcome = Outcome {
        preset: options.preset.as_str().to_string(),
        campaign_s,
        tasks: Vec::new(),
        unsettled: Vec::new(),
    };
    for verdict in reader.verdicts()?.into_iter().filter(|v| v.settled) {
        let (name, precision) = tasks
            .get(&verdict.task)
            .with_context(|| format!("a verdict of an unknown task {}", verdict.task))?;
        let detail: serde_json::Value = serde_json::from_str(&verdict.detail)?;
        if verdict.status != "ok" {
            let why = detail["message"].as_str().unwrap_or_default();
            outcome
                .unsettled
                .push((name.clone(), format!("{}: {why}", verdict.status)));
            continue;
        }
        let kernel = corpus
            .find(name)
            .with_context(|| format!("{name} is not in the corpus"))?;
        let precision: Precision = precision.parse().map_err(anyhow::Error::msg)?;
        let pairs = detail["pairs"]
            .as_u64()
            .context("a verdict without pairs")? as u32;
        let checks = match verdict.kind.as_str() {
            "submit" => 3 + detail["hidden_total"].as_u64().unwrap_or(0) as u32,
            _ => 1,
        };
        let sizes: Sizes = serde_json::from_value(detail["timed_sizes"].clone())
            .context("a verdict without the sizes it timed at")?;
        let work = Work {
            kernel,
            precision,
            sizes,
            pairs,
            checks,
        };
        let by_hand_s = work.by_hand(&flags, dir)?;
        let task = Task {
            kernel: name.clone(),
            pairs,
            checks,
            call_ms: detail["baseline_ns"].as_f64().unwrap_or(0.0) / 1e6,
            graded_s: detail["elapsed_s"]
                .as_f64()
                .context("a verdict without its time")?,
            by_hand_s,
        };
        eprintln!(
            "{}: graded {:.2} s, by hand {:.2} s ({} pairs, {} checks, a call {:.1} ms)",
            task.kernel, task.graded_s, task.by_hand_s, task.pairs, task.checks, task.call_ms
        );
        outcome.tasks.push(task);
    }
    for task in rows.iter().filter(|t| t.state != "settled") {
        let why = task.status.clone().unwrap_or_default();
        outcome
            .unsettled
            .push((task.kernel.clone(), format!("{}: {why}", task.state)));
    }
    anyhow::ensure!(!outcome.tasks.is_empty(), "no task settled ok");
    Ok(outcome)
}

/// Every kernel's work by hand at S with no pairs and no checks (the
/// builds and a warm-up pair), before the campaign: a kernel the by-hand
/// side cannot do fails the bench in seconds, not after the campaign.
fn rehearse(options: &Options, corpus: &Corpus, flags: &[String]) -> anyhow::Result<()> {
    let dir = options.work_dir.join("rehearsal");
    std::fs::create_dir_all(&dir)?;
    for kernel in corpus
        .kernels
        .iter()
        .filter(|k| options.kernels.is_empty() || options.kernels.contains(&k.name))
    {
        let work = Work {
            kernel,
            precision: Precision::Fp64,
            sizes: kernel.sizes(Preset::S).clone(),
            pairs: 0,
            checks: 0,
        };
        work.by_hand(flags, &dir)
            .with_context(|| format!("by hand, {}", kernel.name))?;
    }
    Ok(())
}

/// How long the campaign of `run_dir` took, if one finished there.
fn finished_campaign(run_dir: &Path) -> Option<f64> {
    let store = run_dir.join(hpcagent_orchestrator::store::FILE_NAME);
    if !store.exists() {
        return None;
    }
    let row = Reader::open(run_dir).ok()?.campaign().ok()??;
    (row.state == "finished").then_some(row.ended_at? - row.started_at)
}

/// Runs the campaign in its run directory; how long `up` took.
fn campaign(options: &Options) -> anyhow::Result<f64> {
    let run_dir = &options.run_dir;
    let env = options.work_dir.join("campaign.env");
    let mut text = format!(
        "SITE=local\nAGENT_NODES=1\nAGENTS_PER_NODE=1\nJUDGE_NODES=1\nLANGUAGES=c\n\
         PRESET={}\nAGENT_POLICY=baseline\nTIME_LIMIT=04:00:00\nRUN_ROOT={}\n",
        options.preset.as_str(),
        options.work_dir.display()
    );
    if !options.kernels.is_empty() {
        writeln!(text, "KERNELS={}", options.kernels.join(","))?;
    }
    std::fs::write(&env, text)?;
    let started = Instant::now();
    eprintln!(
        "campaign in {}: the baseline policy over {} at {}, one agent, one judge",
        run_dir.display(),
        if options.kernels.is_empty() {
            "the corpus".to_string()
        } else {
            options.kernels.join(", ")
        },
        options.preset.as_str()
    );
    run(
        Command::new(&options.exe)
            .args(["up", "--executor", "local", "--env"])
            .arg(&env)
            .arg("--run-dir")
            .arg(run_dir)
            .current_dir(&options.repo),
        "hpcagent up",
    )?;
    Ok(started.elapsed().as_secs_f64())
}

/// One grade's work, to do by hand.
struct Work<'a> {
    kernel: &'a Kernel,
    precision: Precision,
    /// The sizes of the calls (the grade's timed sizes).
    sizes: Sizes,
    pairs: u32,
    checks: u32,
}

impl Work<'_> {
    /// Compiles the kernel's driver (not counted); its path.
    fn compile_driver(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let ident = self.kernel.ident();
        let source = dir.join(format!("{ident}-driver.c"));
        std::fs::write(&source, self.driver()?)?;
        let driver = dir.join(format!("{ident}-driver"));
        run(
            Command::new("gcc")
                .args(["-O2", "-o"])
                .arg(&driver)
                .arg(&source)
                .args(["-ldl", "-lm"]),
            "gcc (the driver)",
        )?;
        Ok(driver)
    }

    /// Seconds: the two builds and the driver's calls.
    fn by_hand(&self, flags: &[String], dir: &Path) -> anyhow::Result<f64> {
        let ident = self.kernel.ident();
        let driver = self.compile_driver(dir)?;
        let real = match self.precision {
            Precision::Fp32 => "float",
            _ => "double",
        };
        let defines = [
            format!("-Dreal={real}"),
            format!("-DSYMBOL={}", self.kernel.symbol(self.precision)),
        ];
        let started = Instant::now();
        let mut libraries = Vec::new();
        for side in ["baseline", "submission"] {
            let library = dir.join(format!("{ident}-{side}.so"));
            run(
                Command::new("gcc")
                    .args(flags)
                    .args(&defines)
                    .arg(self.kernel.baseline_path())
                    .arg("-o")
                    .arg(&library)
                    // As the judge links a C build.
                    .arg("-lm"),
                "gcc",
            )?;
            libraries.push(library);
        }
        run(
            Command::new(&driver)
                .args(&libraries)
                .args([self.pairs.to_string(), self.checks.to_string()]),
            &format!("the driver of {}", self.kernel.name),
        )?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// A C driver calling the kernel's symbol with its ABI's arguments at
    /// its sizes: `driver BASELINE.so SUBMISSION.so PAIRS CHECKS`.
    fn driver(&self) -> anyhow::Result<String> {
        let sizes = &self.sizes;
        let args = abi::args(self.kernel, self.precision);
        let mut declare = String::new();
        let mut draw = String::new();
        let mut restore = String::new();
        let mut params = Vec::new();
        let mut call = Vec::new();
        for arg in &args {
            match arg {
                Arg::Array {
                    name, dtype, role, ..
                } => {
                    let spec = self
                        .kernel
                        .arrays
                        .iter()
                        .find(|a| &a.name == name)
                        .context("an ABI array not in the manifest")?;
                    let n = self.kernel.elements(spec, sizes)?.max(1);
                    let t = dtype.c_type();
                    writeln!(declare, "  {t} *a_{name} = calloc({n}, sizeof({t}));")?;
                    let konst = if *role == Role::In { "const " } else { "" };
                    params.push(format!("{konst}{t} *"));
                    call.push(format!("a_{name}"));
                    if role.is_input() {
                        let target = match role {
                            Role::InOut => format!("i_{name}"),
                            _ => format!("a_{name}"),
                        };
                        if *role == Role::InOut {
                            writeln!(declare, "  {t} *i_{name} = calloc({n}, sizeof({t}));")?;
                            writeln!(
                                restore,
                                "      memcpy(a_{name}, i_{name}, {n} * sizeof({t}));"
                            )?;
                        }
                        let value = draw_value(*dtype, spec.init)?;
                        writeln!(
                            draw,
                            "    for (size_t i = 0; i < {n}; i++) {target}[i] = {value};"
                        )?;
                    }
                }
                Arg::Scalar { name, dtype } => {
                    params.push(dtype.c_type().to_string());
                    let value = match self.kernel.scalars.iter().find(|s| &s.name == name) {
                        Some(s) => match s.value {
                            ScalarValue::Int(v) => v.to_string(),
                            ScalarValue::Real(v) => format!("{v:e}"),
                        },
                        None => sizes
                            .get(name)
                            .with_context(|| format!("no size {name}"))?
                            .to_string(),
                    };
                    call.push(format!("({}){value}", dtype.c_type()));
                }
                Arg::Workspace => {
                    let bytes = self.kernel.workspace_bytes(sizes)?.max(1);
                    writeln!(declare, "  uint8_t *workspace = calloc({bytes}, 1);")?;
                    params.push("uint8_t *".into());
                    call.push("workspace".into());
                }
                Arg::WorkspaceSize => {
                    params.push("int64_t".into());
                    call.push(format!("(int64_t){}", self.kernel.workspace_bytes(sizes)?));
                }
            }
        }
        Ok(DRIVER
            .replace("@PARAMS@", &params.join(", "))
            .replace("@SYMBOL@", &self.kernel.symbol(self.precision))
            .replace("@DECLARE@", &declare)
            .replace("@DRAW@", &draw)
            .replace("@RESTORE@", &restore)
            .replace("@CALL@", &call.join(", ")))
    }
}

/// The C expression of one drawn element of `dtype` by `init`.
fn draw_value(dtype: DType, init: Init) -> anyhow::Result<String> {
    let float = match init {
        Init::Uniform => "2.0 * unit() - 1.0".to_string(),
        Init::Normal => "normal()".to_string(),
        Init::Lognormal => "exp(0.5 * normal())".to_string(),
        Init::Positive => "0.5 + unit()".to_string(),
        Init::Zeros => "0".to_string(),
        Init::Int { lo, hi } => format!("{lo} + (int64_t)(next() % {}ull)", (hi - lo).max(1)),
    };
    Ok(match dtype {
        DType::F64 | DType::F32 => format!("({}) ({float})", dtype.c_type()),
        DType::C128 => anyhow::bail!("the by-hand driver draws no complex arrays"),
        _ => match init {
            Init::Int { .. } => format!("({}) ({float})", dtype.c_type()),
            Init::Zeros => "0".to_string(),
            _ => format!("({}) (next() % 2)", dtype.c_type()),
        },
    })
}

/// The driver's frame; the `@…@` parts are the kernel's.
const DRIVER: &str = r#"
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17;
  return state;
}
static double unit(void) { return (double)(next() >> 11) * 0x1.0p-53; }
static double normal(void) {
  return sqrt(-2.0 * log(unit() + 1e-300)) * cos(6.283185307179586 * unit());
}
typedef void (*kernel_fn)(@PARAMS@);
int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "driver BASELINE.so SUBMISSION.so PAIRS CHECKS\n"); return 2; }
  kernel_fn kernel[2];
  for (int side = 0; side < 2; side++) {
    void *lib = dlopen(argv[1 + side], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    kernel[side] = (kernel_fn)dlsym(lib, "@SYMBOL@");
    if (!kernel[side]) { fprintf(stderr, "no @SYMBOL@\n"); return 1; }
  }
  int pairs = atoi(argv[3]), checks = atoi(argv[4]);
@DECLARE@
  /* A warm-up pair, the pairs, then the submission alone for the checks. */
  for (int round = -1; round < pairs + checks; round++) {
@DRAW@
    for (int side = round < pairs ? 0 : 1; side < 2; side++) {
@RESTORE@
      kernel[side](@CALL@);
    }
  }
  return 0;
}
"#;

pub fn render(o: &Outcome) -> String {
    let n = o.tasks.len();
    let mut calls: Vec<f64> = o.tasks.iter().map(|t| t.call_ms).collect();
    calls.sort_by(f64::total_cmp);
    let within = calls
        .iter()
        .filter(|&&c| (100.0..=1000.0).contains(&c))
        .count();
    let mut out = format!(
        "hpcagent campaign: the baseline policy over {n} kernels in C at {}, one agent, one judge\n\
         calls: the baseline's median call {:.2} to {:.1} ms (median {:.1} ms); {within} of {n} within 0.1–1 s\n\
         the judge's busy time (the grades' own times): {:.1} s; the same builds and calls by hand: {:.1} s\n\
         busy vs by hand: {:.2}× the time; the campaign from `up` to its end: {:.1} s\n",
        o.preset,
        calls[0],
        calls[n - 1],
        crate::stats::median(&mut calls.clone()),
        o.busy_s(),
        o.by_hand_s(),
        o.busy_s() / o.by_hand_s(),
        o.campaign_s,
    );
    let mut worst: Vec<&Task> = o.tasks.iter().collect();
    worst.sort_by(|a, b| (b.graded_s / b.by_hand_s).total_cmp(&(a.graded_s / a.by_hand_s)));
    out.push_str("the grades furthest from by hand:");
    for t in worst.iter().take(5) {
        let _ = write!(
            out,
            " {} {:.2}× ({:.1}/{:.1} s, a call {:.1} ms);",
            t.kernel,
            t.graded_s / t.by_hand_s,
            t.graded_s,
            t.by_hand_s,
            t.call_ms
        );
    }
    for (kernel, why) in &o.unsettled {
        let _ = write!(out, "\nnot settled ok: {kernel}: {why}");
    }
    out
}

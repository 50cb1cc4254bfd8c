//! `hpcagent bench judge`: what grading costs over doing the same work by
//! hand, and what the build cache saves.
//!
//! By hand: compile gemm with the judge's own flags into a library, then a
//! small driver (compiled beforehand, not counted) loads it and makes 1 + N
//! calls on gemm's S inputs, restoring the in/out array before each. The
//! judge: a Score call of the same source at S from a connected client (as
//! an agent makes it), on a judge whose baseline and reference data are
//! already warm (they are per task, not per submission). Then the same
//! source again: its build comes from the cache.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use hpcagent_proto::v1::{self as pb, judge_client::JudgeClient};
use tonic::transport::Channel;

use crate::stats::{median, ratio_line};

#[derive(Debug, Clone)]
pub struct Options {
    pub exe: PathBuf,
    /// The repository (benchmarks/ and tests/submissions/gemm_ok.c).
    pub repo: PathBuf,
    pub repeats: usize,
    pub work_dir: PathBuf,
}

/// Timed calls of a grade (the judge's default).
const CALLS: usize = 20;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub by_hand_ms: f64,
    pub graded_ms: f64,
    pub cached_ms: f64,
    /// graded / by hand (target ≤ 1.15).
    pub overhead: f64,
    /// graded / cached (target ≥ 5).
    pub cache_speedup: f64,
}

const DRIVER: &str = r#"
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef void (*gemm_fn)(const double *, const double *, double *, int64_t, int64_t, int64_t,
                        double, double, uint8_t *, int64_t);
int main(int argc, char **argv) {
  const int64_t NI = 100, NJ = 110, NK = 120;
  int calls = atoi(argv[2]);
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  gemm_fn gemm = (gemm_fn)dlsym(lib, "gemm_fp64");
  if (!gemm) { fprintf(stderr, "no gemm_fp64\n"); return 1; }
  double *A = malloc(sizeof(double) * NI * NK), *B = malloc(sizeof(double) * NK * NJ);
  double *C0 = malloc(sizeof(double) * NI * NJ), *C = malloc(sizeof(double) * NI * NJ);
  srand(42);
  for (int64_t i = 0; i < NI * NK; i++) A[i] = rand() / (double)RAND_MAX;
  for (int64_t i = 0; i < NK * NJ; i++) B[i] = rand() / (double)RAND_MAX;
  for (int64_t i = 0; i < NI * NJ; i++) C0[i] = rand() / (double)RAND_MAX;
  for (int c = 0; c <= calls; c++) {
    memcpy(C, C0, sizeof(double) * NI * NJ);
    gemm(A, B, C, NI, NJ, NK, 1.5, 1.2, NULL, 0);
  }
  printf("%f\n", C[0]);
  return 0;
}
"#;

/// The judge's fixed flags for C, from the toolchain the judge detects.
fn judge_flags() -> anyhow::Result<Vec<String>> {
    let toolchain = hpcagent_judge::build::toolchain::Toolchain::detect();
    let compiler = toolchain
        .compiler(hpcagent_judge::language::Language::C)
        .map_err(anyhow::Error::msg)?;
    Ok(compiler.flags.clone())
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = command
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Compile with the judge's flags, then 1 + N calls through the driver.
fn by_hand(flags: &[String], source: &Path, driver: &Path, dir: &Path) -> anyhow::Result<f64> {
    let library = dir.join("by-hand.so");
    let start = Instant::now();
    run(
        Command::new("gcc")
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(&library),
        "gcc",
    )?;
    run(
        Command::new(driver).arg(&library).arg(CALLS.to_string()),
        "the driver",
    )?;
    Ok(start.elapsed().as_secs_f64())
}

struct Judge {
    process: std::process::Child,
    url: String,
}

impl Drop for Judge {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn start_judge(options: &Options) -> anyhow::Result<Judge> {
    let mut process = Command::new(&options.exe)
        .args(["judge", "serve", "--listen", "127.0.0.1:0", "--preset", "S"])
        .arg("--cache")
        .arg(options.work_dir.join("cache"))
        .current_dir(&options.repo)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the judge")?;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(process.stdout.take().expect("piped")),
        &mut line,
    )?;
    let address = line
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("the judge said {line:?}"))?;
    Ok(Judge {
        url: format!("http://{address}"),
        process,
    })
}

/// A client connected to the judge, as an agent holds one: a grade's
/// latency is its Score call, not the start of a process to make it.
struct Client {
    runtime: tokio::runtime::Runtime,
    judge: JudgeClient<Channel>,
}

impl Client {
    fn connect(judge: &Judge) -> anyhow::Result<Client> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let judge = runtime
            .block_on(JudgeClient::connect(judge.url.clone()))
            .with_context(|| format!("cannot reach the judge at {}", judge.url))?;
        Ok(Client { runtime, judge })
    }

    /// One Score of `source`; seconds, and whether the build was cached.
    fn grade(&mut self, source: &Path) -> anyhow::Result<(f64, bool)> {
        let request = pb::GradeRequest {
            task_id: "gemm".into(),
            language: "c".into(),
            code: Some(pb::grade_request::Code::Source(std::fs::read_to_string(
                source,
            )?)),
            client: "hpcagent bench judge".into(),
            ..Default::default()
        };
        let start = Instant::now();
        let verdict = self
            .runtime
            .block_on(self.judge.score(request))
            .context("Score")?
            .into_inner();
        let seconds = start.elapsed().as_secs_f64();
        anyhow::ensure!(
            verdict.status() == pb::Status::Ok,
            "the grade was not ok: {:?}: {}",
            verdict.status(),
            verdict.message
        );
        Ok((seconds, verdict.cached_build))
    }
}

pub fn run_bench(options: &Options) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&options.work_dir)?;
    let dir = &options.work_dir;
    let flags = judge_flags()?;
    let driver_source = dir.join("driver.c");
    std::fs::write(&driver_source, DRIVER)?;
    let driver = dir.join("driver");
    run(
        Command::new("gcc")
            .args(["-O2", "-o"])
            .arg(&driver)
            .arg(&driver_source)
            .arg("-ldl"),
        "gcc (the driver)",
    )?;
    let gemm = std::fs::read_to_string(options.repo.join("tests/submissions/gemm_ok.c"))?;
    let judge = start_judge(options)?;
    let mut client = Client::connect(&judge)?;
    // Baseline timing and reference data are per task: make them warm.
    let warm = dir.join("warm.c");
    std::fs::write(&warm, format!("/* warm-up */\n{gemm}"))?;
    client.grade(&warm)?;

    anyhow::ensure!(
        options.repeats > 0,
        "the judge bench needs at least one round"
    );
    let (mut hand, mut graded, mut cached) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..options.repeats {
        // A new comment is a new submission: a cold build, each time.
        let source = dir.join(format!("variant-{i}.c"));
        std::fs::write(&source, format!("/* variant {i} */\n{gemm}"))?;
        hand.push(by_hand(&flags, &source, &driver, dir)?);
        let (t, hit) = client.grade(&source)?;
        anyhow::ensure!(!hit, "a new variant came from the cache");
        graded.push(t);
        let (t, hit) = client.grade(&source)?;
        anyhow::ensure!(hit, "the resubmission was built again");
        cached.push(t);
    }
    // Ratios within a round, then their median: the three measurements of a
    // round are back to back, so a noisy neighbour skews them alike.
    let mut overheads: Vec<f64> = graded.iter().zip(&hand).map(|(g, h)| g / h).collect();
    let mut speedups: Vec<f64> = graded.iter().zip(&cached).map(|(g, c)| g / c).collect();
    Ok(Outcome {
        by_hand_ms: median(&mut hand) * 1e3,
        graded_ms: median(&mut graded) * 1e3,
        cached_ms: median(&mut cached) * 1e3,
        overhead: median(&mut overheads),
        cache_speedup: median(&mut speedups),
    })
}

pub fn render(o: &Outcome, repeats: usize) -> String {
    format!(
        "hpcagent judge: gemm at S in C, {CALLS} timed calls, medians of {repeats} rounds\n\
         by hand (gcc with the judge's flags, then 1 + {CALLS} calls): {:.0} ms\n\
         graded (a Score call, new source):                      {:.0} ms\n\
         graded again (build from the cache):                    {:.0} ms\n\
         {}\n{}",
        o.by_hand_ms,
        o.graded_ms,
        o.cached_ms,
        ratio_line("grade vs by hand", o.overhead, "the time", "≤ 1.15×"),
        ratio_line("cache hit", o.cache_speedup, "faster", "≥ 5×"),
    )
}

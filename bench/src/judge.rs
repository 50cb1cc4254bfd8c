//! `hpcagent bench judge`: what grading costs over doing the same work by
//! hand, and what the build cache saves.
//!
//! The judge: a Score call of gemm at S from a connected client (as an
//! agent makes it), on a judge whose baseline build and reference data are
//! already warm (they are per task, not per submission). It times the
//! submission in pairs beside the baseline until its verdict is decided
//! (`timing::StopRule` in hpcagent-runner), so the number of calls is the
//! grade's own (`pairs` in its verdict). Then the same source again: its
//! build comes from the cache.
//!
//! By hand, the same work: compile gemm with the judge's own flags into a
//! library, then a small driver (compiled beforehand, not counted) loads it
//! and makes a warm-up pair and as many pairs of calls as the grade made
//! (the baseline is the same loop here), drawing fresh inputs for each pair
//! and restoring the in/out array before each call, as the judge does. The
//! old by-hand measure (1 + 20 calls of the submission alone, what a grade
//! made before pairs) is printed beside it, for what a grade now costs.

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

/// Timed calls of the submission a grade made before pairs.
const OLD_CALLS: usize = 20;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// The same calls as the grade, by hand.
    pub by_hand_ms: f64,
    /// 1 + 20 calls of the submission alone, by hand.
    pub by_hand_old_ms: f64,
    pub graded_ms: f64,
    pub cached_ms: f64,
    /// Timed pairs a grade made (median).
    pub pairs: f64,
    /// graded / by hand, the same calls (target ≤ 1.15).
    pub overhead: f64,
    /// graded / 1 + 20 calls by hand.
    pub over_old: f64,
    /// graded / cached.
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
/* argv: library, pairs (each: fresh inputs, then two calls), or "alone N" */
#ifndef SIZES
#define SIZES 100, 110, 120 /* gemm at S in the project's corpus */
#endif
int main(int argc, char **argv) {
  const int64_t sizes[3] = {SIZES}, NI = sizes[0], NJ = sizes[1], NK = sizes[2];
  int pairs = atoi(argv[2]), per_draw = argc > 3 ? 1 : 2;
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  gemm_fn gemm = (gemm_fn)dlsym(lib, "gemm_fp64");
  if (!gemm) { fprintf(stderr, "no gemm_fp64\n"); return 1; }
  double *A = malloc(sizeof(double) * NI * NK), *B = malloc(sizeof(double) * NK * NJ);
  double *C0 = malloc(sizeof(double) * NI * NJ), *C = malloc(sizeof(double) * NI * NJ);
  srand(42);
  for (int p = 0; p <= pairs; p++) {
    if (per_draw == 2 || p == 0) {
      for (int64_t i = 0; i < NI * NK; i++) A[i] = rand() / (double)RAND_MAX;
      for (int64_t i = 0; i < NK * NJ; i++) B[i] = rand() / (double)RAND_MAX;
      for (int64_t i = 0; i < NI * NJ; i++) C0[i] = rand() / (double)RAND_MAX;
    }
    for (int c = 0; c < per_draw; c++) {
      memcpy(C, C0, sizeof(double) * NI * NJ);
      gemm(A, B, C, NI, NJ, NK, 1.5, 1.2, NULL, 0);
    }
  }
  printf("%f\n", C[0]);
  return 0;
}
"#;

/// The judge's fixed flags for C, from the toolchain the judge detects.
pub(crate) fn judge_flags() -> anyhow::Result<Vec<String>> {
    let toolchain = hpcagent_judge::build::toolchain::Toolchain::detect();
    let compiler = toolchain
        .compiler(hpcagent_corpus::language::Language::C)
        .map_err(anyhow::Error::msg)?;
    Ok(compiler.flags.clone())
}

pub(crate) fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
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

/// Compiles the by-hand driver for gemm of `sizes` (NI, NJ, NK).
pub(crate) fn driver(dir: &Path, sizes: [i64; 3]) -> anyhow::Result<PathBuf> {
    let source = dir.join("driver.c");
    std::fs::write(&source, DRIVER)?;
    let [ni, nj, nk] = sizes;
    let driver = dir.join(format!("driver-{ni}-{nj}-{nk}"));
    run(
        Command::new("gcc")
            .args(["-O2", &format!("-DSIZES={ni},{nj},{nk}"), "-o"])
            .arg(&driver)
            .arg(&source)
            .arg("-ldl"),
        "gcc (the driver)",
    )?;
    Ok(driver)
}

/// What the driver makes after the build.
pub(crate) enum Calls {
    /// A warm-up pair and this many pairs, fresh inputs for each.
    Pairs(u32),
    /// 1 + this many calls of the submission alone, on one input.
    Alone(usize),
}

/// Compile with the judge's flags, then `calls` through the driver.
pub(crate) fn by_hand(
    flags: &[String],
    source: &Path,
    driver: &Path,
    dir: &Path,
    calls: Calls,
) -> anyhow::Result<f64> {
    let library = dir.join("by-hand.so");
    let _quiet = node_quiet()?;
    let start = Instant::now();
    run(
        Command::new("gcc")
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(&library),
        "gcc",
    )?;
    let mut driver = Command::new(driver);
    driver.arg(&library);
    match calls {
        Calls::Pairs(n) => driver.arg(n.to_string()),
        Calls::Alone(n) => driver.args([n.to_string(), "alone".into()]),
    };
    run(&mut driver, "the driver")?;
    Ok(start.elapsed().as_secs_f64())
}

/// The node's timing lock, held until what is returned goes, as a
/// judge's timed calls hold it: what the bench times outside hpcagent's
/// judges (by hand, a peer's grade) has no judge's own work beside it,
/// such as the input sets a judge makes ahead while idle.
pub(crate) fn node_quiet() -> anyhow::Result<impl Drop> {
    let path = hpcagent_judge::judge::timing_lock_path();
    hpcagent_judge::judge::hold_timing_lock(&path)
        .with_context(|| format!("taking the timing lock {}", path.display()))
}

pub(crate) struct Judge {
    process: std::process::Child,
    pub url: String,
}

impl Drop for Judge {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn start_judge(options: &Options) -> anyhow::Result<Judge> {
    start_judge_with(
        &options.exe,
        &options.repo,
        &options.work_dir.join("cache"),
        &[],
    )
}

/// A judge serving at S from `cache`, with `extra` arguments.
pub(crate) fn start_judge_with(
    exe: &Path,
    repo: &Path,
    cache: &Path,
    extra: &[String],
) -> anyhow::Result<Judge> {
    let mut process = Command::new(exe)
        .args(["judge", "serve", "--listen", "127.0.0.1:0", "--preset", "S"])
        .arg("--cache")
        .arg(cache)
        .args(extra)
        .current_dir(repo)
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
pub(crate) struct Client {
    runtime: tokio::runtime::Runtime,
    judge: JudgeClient<Channel>,
}

impl Client {
    pub(crate) fn connect(judge: &Judge) -> anyhow::Result<Client> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let judge = runtime
            .block_on(JudgeClient::connect(judge.url.clone()))
            .with_context(|| format!("cannot reach the judge at {}", judge.url))?;
        Ok(Client { runtime, judge })
    }

    /// One Score of `source`; seconds, whether the build was cached, and
    /// the timed pairs it made.
    fn grade(&mut self, source: &Path) -> anyhow::Result<(f64, bool, u32)> {
        self.ask("gemm", source, false)
    }

    /// One Score (or Submit) of `source` to `task`: seconds, whether the
    /// build was cached, the timed pairs it made.
    pub(crate) fn ask(
        &mut self,
        task: &str,
        source: &Path,
        submit: bool,
    ) -> anyhow::Result<(f64, bool, u32)> {
        let (seconds, verdict) = self.verdict(task, &std::fs::read_to_string(source)?, submit)?;
        anyhow::ensure!(
            verdict.status() == pb::Status::Ok,
            "the grade was not ok: {:?}: {}",
            verdict.status(),
            verdict.message
        );
        Ok((seconds, verdict.cached_build, verdict.pairs))
    }

    /// One Score (or Submit) of C `source` to `task`: seconds, and the
    /// verdict whatever its status.
    pub(crate) fn verdict(
        &mut self,
        task: &str,
        source: &str,
        submit: bool,
    ) -> anyhow::Result<(f64, pb::Verdict)> {
        let request = pb::GradeRequest {
            task_id: task.into(),
            language: "c".into(),
            code: Some(pb::grade_request::Code::Source(source.to_string())),
            client: "hpcagent bench judge".into(),
            ..Default::default()
        };
        let start = Instant::now();
        let verdict = if submit {
            self.runtime.block_on(self.judge.submit(request))
        } else {
            self.runtime.block_on(self.judge.score(request))
        }
        .context("the grade")?
        .into_inner();
        Ok((start.elapsed().as_secs_f64(), verdict))
    }
}

pub fn run_bench(options: &Options) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&options.work_dir)?;
    let dir = &options.work_dir;
    let flags = judge_flags()?;
    let driver = driver(dir, [100, 110, 120])?;
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
    let mut rounds = Vec::new();
    for i in 0..options.repeats {
        // A new comment is a new submission: a cold build, each time.
        let source = dir.join(format!("variant-{i}.c"));
        std::fs::write(&source, format!("/* variant {i} */\n{gemm}"))?;
        let (graded, hit, pairs) = client.grade(&source)?;
        anyhow::ensure!(!hit, "a new variant came from the cache");
        let hand = by_hand(&flags, &source, &driver, dir, Calls::Pairs(pairs))?;
        let old = by_hand(&flags, &source, &driver, dir, Calls::Alone(OLD_CALLS))?;
        let (cached, hit, _) = client.grade(&source)?;
        anyhow::ensure!(hit, "the resubmission was built again");
        rounds.push(Round {
            hand,
            old,
            graded,
            cached,
            pairs: pairs as f64,
        });
    }
    // Ratios within a round, then their median: the measurements of a round
    // are back to back, so a noisy neighbour skews them alike.
    let column = |f: fn(&Round) -> f64| -> Vec<f64> { rounds.iter().map(f).collect() };
    Ok(Outcome {
        by_hand_ms: median(&mut column(|r| r.hand)) * 1e3,
        by_hand_old_ms: median(&mut column(|r| r.old)) * 1e3,
        graded_ms: median(&mut column(|r| r.graded)) * 1e3,
        cached_ms: median(&mut column(|r| r.cached)) * 1e3,
        pairs: median(&mut column(|r| r.pairs)),
        overhead: median(&mut column(|r| r.graded / r.hand)),
        over_old: median(&mut column(|r| r.graded / r.old)),
        cache_speedup: median(&mut column(|r| r.graded / r.cached)),
    })
}

/// One round's seconds (and the grade's pairs).
struct Round {
    hand: f64,
    old: f64,
    graded: f64,
    cached: f64,
    pairs: f64,
}

pub fn render(o: &Outcome, repeats: usize) -> String {
    format!(
        "hpcagent judge: gemm at S in C, timed in pairs beside the baseline until its verdict is decided, medians of {repeats} rounds\n\
         graded (a Score call, new source; {:.0} timed pairs):     {:.0} ms\n\
         by hand, the same calls (gcc, then {:.0} pairs on fresh inputs): {:.0} ms\n\
         by hand, as a grade was before pairs (gcc, then 1 + {OLD_CALLS} calls): {:.0} ms\n\
         graded again (build from the cache):                    {:.0} ms\n\
         {}\n\
         a grade costs {:.2}× the old 1 + {OLD_CALLS} calls by hand: the pairs it needs to decide\n\
         cache hit: {:.2}× faster, {:.0} ms saved (the build; the pairs remain)",
        o.pairs,
        o.graded_ms,
        o.pairs + 1.0,
        o.by_hand_ms,
        o.by_hand_old_ms,
        o.cached_ms,
        ratio_line(
            "grade vs by hand (same calls)",
            o.overhead,
            "the time",
            "≤ 1.15×"
        ),
        o.over_old,
        o.cache_speedup,
        o.graded_ms - o.cached_ms,
    )
}

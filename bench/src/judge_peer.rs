//! `hpcagent bench judge --peer-hab …`: hpcagent's judge and
//! HPCAgent-Bench's own judge on the same work in the same run.
//!
//! The work is HPCAgent-Bench's gemm at its S (NI=1000, NJ=1100, NK=1200),
//! graded from an HPCAgent-Bench checkout by both judges, the source an
//! i-k-j C kernel (tests/submissions/gemm_ok.c, new each grade by a
//! comment so that no build comes from a cache). By hand, the same work as
//! a grade of either judge: `gcc` with the judge's flags, then 1 + 20 calls
//! through a driver (compiled beforehand, not counted).
//!
//! Each round measures, alternating which judge goes first:
//! - a warm grade (a judge that graded the task before);
//! - a fresh judge's first grade over the cache an earlier judge kept;
//! - a fresh judge's first grade over an empty cache, after idle time as
//!   long as the peer's first grade took beyond its warm one (its baseline's
//!   cost): what a judge started before agents submit has had to prepare;
//! - a submit (5 held-out cases on both).
//!
//! Times are as a client sees them, from request to answer; a judge's own
//! start is not counted. Each ratio is the median of the rounds' own ratios.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::judge::{Calls, Client, by_hand, driver, judge_flags, start_judge_with};
use crate::stats::median;

/// The task, by its path key in an HPCAgent-Bench checkout.
const TASK: &str = "scientific_computing/dense_linear_algebra/gemm/gemm";
/// gemm at HPCAgent-Bench's S.
const SIZES: [i64; 3] = [1000, 1100, 1200];
/// Timed calls both judges make of a submission, after one to warm up.
const CALLS: usize = 20;

#[derive(Debug, Clone)]
pub struct Options {
    pub exe: PathBuf,
    pub repo: PathBuf,
    /// `hpcagent_bench/benchmarks` of an HPCAgent-Bench checkout.
    pub corpus: PathBuf,
    /// HPCAgent-Bench's `hpcagent-bench` executable (in its venv).
    pub peer: PathBuf,
    pub rounds: usize,
    pub work_dir: PathBuf,
}

/// One round's seconds.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    hand: f64,
    idle: f64,
    peer: Grades,
    ours: Grades,
}

#[derive(Debug, Clone, Copy, Default)]
struct Grades {
    warm: f64,
    fresh_kept: f64,
    fresh_empty: f64,
    submit: f64,
}

/// Medians over the rounds: seconds, and ratios to by hand.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub rounds: usize,
    pub by_hand_s: f64,
    pub idle_s: f64,
    /// (what, peer seconds, peer / by hand, ours seconds, ours / by hand, ours / peer)
    pub rows: Vec<(String, f64, f64, f64, f64, f64)>,
}

pub fn run_bench(options: &Options) -> anyhow::Result<Outcome> {
    anyhow::ensure!(options.rounds > 0, "the bench needs at least one round");
    let dir = &options.work_dir;
    std::fs::create_dir_all(dir)?;
    let flags = judge_flags()?;
    let driver = driver(dir, SIZES)?;
    let gemm = std::fs::read_to_string(options.repo.join("tests/submissions/gemm_ok.c"))?;
    let mut variants = 0;
    let mut variant = || -> anyhow::Result<PathBuf> {
        variants += 1;
        let path = dir.join(format!("variant-{variants}.c"));
        std::fs::write(&path, format!("/* variant {variants} */\n{gemm}"))?;
        Ok(path)
    };

    let peer_cache = dir.join("peer-shared");
    let mut peer = Peer::start(&options.peer, &peer_cache)?;
    peer.grade(&variant()?, false)?;
    let kept = dir.join("cache-kept");
    let judge = start_judge_with(&options.exe, &options.repo, &kept, &corpus_args(options))?;
    let mut ours = Client::connect(&judge)?;
    ours.ask(TASK, &variant()?, true)?;

    let mut rounds = Vec::new();
    for r in 0..options.rounds {
        let hand = by_hand(&flags, &variant()?, &driver, dir, Calls::Alone(CALLS))?;
        let mut round = Round {
            hand,
            ..Round::default()
        };
        let mut peer_grades = |round: &mut Round| -> anyhow::Result<()> {
            round.peer.warm = peer.grade(&variant()?, false)?;
            let mut fresh = Peer::start(&options.peer, &peer_cache)?;
            round.peer.fresh_kept = fresh.grade(&variant()?, false)?;
            drop(fresh);
            let empty = dir.join(format!("peer-empty-{r}"));
            let mut fresh = Peer::start(&options.peer, &empty)?;
            std::thread::sleep(Duration::from_secs_f64(round.idle));
            round.peer.fresh_empty = fresh.grade(&variant()?, false)?;
            round.peer.submit = peer.grade(&variant()?, true)?;
            Ok(())
        };
        // The idle time is the peer's baseline cost, so the peer's warm and
        // kept-cache grades come first in every round; the alternation is
        // in the rest.
        round.idle = 0.0;
        peer_grades(&mut round)?;
        round.idle = (round.peer.fresh_kept - round.peer.warm).max(0.0);
        let mut our_grades = |round: &mut Round| -> anyhow::Result<()> {
            round.ours.warm = ours.ask(TASK, &variant()?, false)?.0;
            let fresh =
                start_judge_with(&options.exe, &options.repo, &kept, &corpus_args(options))?;
            round.ours.fresh_kept = Client::connect(&fresh)?.ask(TASK, &variant()?, false)?.0;
            drop(fresh);
            let mut args = corpus_args(options);
            args.extend(["--warm".to_string(), TASK.to_string()]);
            let empty = dir.join(format!("cache-empty-{r}"));
            let fresh = start_judge_with(&options.exe, &options.repo, &empty, &args)?;
            let mut client = Client::connect(&fresh)?;
            std::thread::sleep(Duration::from_secs_f64(round.idle));
            round.ours.fresh_empty = client.ask(TASK, &variant()?, false)?.0;
            round.ours.submit = ours.ask(TASK, &variant()?, true)?.0;
            Ok(())
        };
        our_grades(&mut round)?;
        eprintln!(
            "round {}: by hand {:.2} s; peer {:.2}/{:.2}/{:.2}/{:.2}; hpcagent {:.2}/{:.2}/{:.2}/{:.2} (warm/fresh kept/fresh empty after {:.1} s/submit)",
            r + 1,
            round.hand,
            round.peer.warm,
            round.peer.fresh_kept,
            round.peer.fresh_empty,
            round.peer.submit,
            round.ours.warm,
            round.ours.fresh_kept,
            round.ours.fresh_empty,
            round.ours.submit,
            round.idle
        );
        rounds.push(round);
    }
    Ok(summarize(&rounds))
}

fn corpus_args(options: &Options) -> Vec<String> {
    vec!["--corpus".into(), options.corpus.display().to_string()]
}

fn summarize(rounds: &[Round]) -> Outcome {
    let med = |f: &dyn Fn(&Round) -> f64| median(&mut rounds.iter().map(f).collect::<Vec<_>>());
    let row = |what: &str, pick: fn(&Grades) -> f64| {
        (
            what.to_string(),
            med(&|r| pick(&r.peer)),
            med(&|r| pick(&r.peer) / r.hand),
            med(&|r| pick(&r.ours)),
            med(&|r| pick(&r.ours) / r.hand),
            med(&|r| pick(&r.ours) / pick(&r.peer)),
        )
    };
    Outcome {
        rounds: rounds.len(),
        by_hand_s: med(&|r| r.hand),
        idle_s: med(&|r| r.idle),
        rows: vec![
            row("warm grade", |g| g.warm),
            row("fresh judge's first grade, kept cache", |g| g.fresh_kept),
            row("fresh judge's first grade, empty cache", |g| g.fresh_empty),
            row("submit (5 held-out cases)", |g| g.submit),
        ],
    }
}

pub fn render(o: &Outcome) -> String {
    let mut out = format!(
        "hpcagent judge vs HPCAgent-Bench's judge: gemm at HPCAgent-Bench's S ({}×{}×{}) in C, \
         an i-k-j kernel, 1 + {CALLS} calls a grade; medians of {} rounds\n\
         by hand (gcc, then 1 + {CALLS} calls): {:.2} s; idle before a fresh judge's first \
         grade over an empty cache: {:.1} s\n",
        SIZES[0], SIZES[1], SIZES[2], o.rounds, o.by_hand_s, o.idle_s
    );
    out.push_str(&format!(
        "{:<42} {:>22} {:>22} {:>16}\n",
        "", "HPCAgent-Bench", "hpcagent", "hpcagent / peer"
    ));
    for (what, peer, peer_ratio, ours, ours_ratio, vs) in &o.rows {
        out.push_str(&format!(
            "{what:<42} {:>13.2} s ({peer_ratio:.2}×) {:>13.2} s ({ours_ratio:.2}×) {vs:>15.2}×\n",
            peer, ours
        ));
    }
    out.push_str(
        "(ratios in parentheses: to by hand; targets: warm ≤ 1.03×, fresh ≤ 1.15× and below \
         the peer's, submit below the peer's)",
    );
    out
}

/// HPCAgent-Bench's judge, served natively as its PEER.md says.
struct Peer {
    process: Child,
    url: String,
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Peer {
    /// Serves it at S with `shared` as its shared directory; returns once
    /// it accepts connections.
    fn start(exe: &Path, shared: &Path) -> anyhow::Result<Peer> {
        std::fs::create_dir_all(shared)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let process = Command::new(exe)
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--preset", "S"])
            .env("HPCAGENT_BENCH_SHARED_DIR", shared)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "{} did not listen on {port} within 60 s",
                exe.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Peer {
            process,
            url: format!("http://127.0.0.1:{port}"),
            runtime,
            http: reqwest::Client::new(),
        })
    }

    /// One `/score` (or `/submit`) of `source`: seconds; fails unless correct.
    fn grade(&mut self, source: &Path, submit: bool) -> anyhow::Result<f64> {
        let body = serde_json::json!({
            "kernel": "gemm", "language": "c", "rank": 0,
            "source": std::fs::read_to_string(source)?,
            "build": [], "workspace_bytes": null,
        });
        let url = format!("{}/{}", self.url, if submit { "submit" } else { "score" });
        let started = Instant::now();
        let answer: serde_json::Value = self.runtime.block_on(async {
            self.http
                .post(&url)
                .json(&body)
                .timeout(Duration::from_secs(600))
                .send()
                .await?
                .json()
                .await
        })?;
        let seconds = started.elapsed().as_secs_f64();
        anyhow::ensure!(
            answer["correct"] == true,
            "HPCAgent-Bench's judge did not grade it correct: {answer}"
        );
        if submit {
            anyhow::ensure!(
                answer["hidden_total"] == 5,
                "its submit ran other than 5 hidden cases: {answer}"
            );
        }
        Ok(seconds)
    }
}

//! `hpcagent bench judge --peer-hab …`: hpcagent's judge and
//! HPCAgent-Bench's own judge on the same work in the same run.
//!
//! The work is HPCAgent-Bench's gemm, graded from an HPCAgent-Bench
//! checkout by both judges, the source an i-k-j C kernel
//! (tests/submissions/gemm_ok.c, new each grade by a comment so that no
//! build comes from a cache), at two sizes: HPCAgent-Bench's S (NI=1000,
//! NJ=1100, NK=1200), then hpcagent's own S (its corpus's gemm, 100×110×120),
//! where a call takes a millisecond and what a judge adds to it shows. For
//! the second, both judges read a copy of the peer's package whose gemm S
//! is set to those sizes (HPCAgent-Bench reads its corpus from its own
//! package only). By hand, the same work as a grade of either judge: `gcc`
//! with the judge's flags, then 1 + 20 calls through a driver (compiled
//! beforehand, not counted).
//!
//! Each round measures, the peer first in odd rounds and hpcagent first in
//! even ones:
//! - a warm grade (a judge that graded the task before);
//! - a fresh judge's first grade over the cache an earlier judge kept;
//! - a fresh judge's first grade over an empty cache, asked at once (a
//!   judge a user starts and grades on, with nothing prepared);
//! - the same after idle time as long as the peer's first grade took
//!   beyond its warm one (its baseline's cost, from the round's own grades
//!   when the peer goes first, else from the round before): what a
//!   campaign's judge, started with its tasks to warm before agents
//!   submit, has had to prepare (printed beside the first, never instead);
//! - a submit (5 held-out cases on both).
//!
//! With `--noise N`, N CPU-bound processes spin on the node for the whole
//! bench (not pinned: they go where the scheduler puts them, as another
//! job's or a user's work does): a node where other work runs, as users'
//! nodes often are. Without it the node is as quiet as the machine is.
//!
//! Times are as a client sees them, from request to answer; a judge's own
//! start is not counted. Each ratio is the median of the rounds' own ratios.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::judge::{Calls, Client, by_hand, driver, judge_flags, run, start_judge_with};
use crate::stats::median;

/// The task, by its path key in an HPCAgent-Bench checkout.
const TASK: &str = "scientific_computing/dense_linear_algebra/gemm/gemm";
/// gemm at HPCAgent-Bench's S.
const HAB_S: [i64; 3] = [1000, 1100, 1200];
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
    /// CPU-bound processes spinning on the node through the bench.
    pub noise: usize,
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
    fresh_at_once: f64,
    fresh_empty: f64,
    submit: f64,
}

/// Whose S the work is at, its sizes, and where both judges read the task.
struct Work {
    whose: &'static str,
    sizes: [i64; 3],
    /// `hpcagent_bench/benchmarks` as hpcagent's judge reads it.
    corpus: PathBuf,
    /// The peer's package copy to import instead of its installed one.
    package: Option<PathBuf>,
}

/// Medians over the rounds: seconds, and ratios to by hand.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// Whose S, and its sizes.
    pub whose: String,
    pub sizes: [i64; 3],
    pub rounds: usize,
    /// CPU-bound processes that spun on the node.
    pub noise: usize,
    pub by_hand_s: f64,
    pub idle_s: f64,
    /// (what, peer seconds, peer / by hand, ours seconds, ours / by hand, ours / peer)
    pub rows: Vec<(String, f64, f64, f64, f64, f64)>,
}

/// Both sizes, HPCAgent-Bench's S first.
pub fn run_bench(options: &Options) -> anyhow::Result<Vec<Outcome>> {
    anyhow::ensure!(options.rounds > 0, "the bench needs at least one round");
    std::fs::create_dir_all(&options.work_dir)?;
    let theirs = Work {
        whose: "HPCAgent-Bench's S",
        sizes: HAB_S,
        corpus: options.corpus.clone(),
        package: None,
    };
    let ours = own_size(options)?;
    let _noise = Noise::start(options.noise)?;
    let mut outcomes = Vec::new();
    for work in [theirs, ours] {
        eprintln!("gemm at {} ({:?})", work.whose, work.sizes);
        outcomes.push(measure(options, &work)?);
    }
    Ok(outcomes)
}

/// CPU-bound processes, killed when dropped.
struct Noise(Vec<Child>);

impl Noise {
    fn start(n: usize) -> anyhow::Result<Noise> {
        let spin = || {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .spawn()
                .context("cannot start a CPU-bound process")
        };
        Ok(Noise(
            (0..n).map(|_| spin()).collect::<anyhow::Result<_>>()?,
        ))
    }
}

impl Drop for Noise {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The work at hpcagent's S: a copy of the peer's installed package whose
/// gemm S is the sizes of hpcagent's own gemm at S.
fn own_size(options: &Options) -> anyhow::Result<Work> {
    let corpus = hpcagent_corpus::Corpus::load(&options.repo.join("benchmarks"))
        .map_err(|e| anyhow::anyhow!("hpcagent's corpus: {e:?}"))?;
    let gemm = corpus
        .find("gemm")
        .context("hpcagent's corpus has no gemm")?;
    let s = gemm.sizes(hpcagent_corpus::Preset::S);
    let size = |n: &str| {
        s.get(n)
            .copied()
            .with_context(|| format!("gemm's S has no {n}"))
    };
    let sizes = [size("NI")?, size("NJ")?, size("NK")?];
    let installed = imported_package(&options.peer, None)?;
    let root = options.work_dir.join("peer-at-own-s");
    let package = root.join("hpcagent_bench");
    if package.exists() {
        std::fs::remove_dir_all(&package)?;
    }
    std::fs::create_dir_all(&root)?;
    run(
        Command::new("cp").arg("-r").arg(&installed).arg(&package),
        "cp (the peer's package)",
    )?;
    let corpus = package.join("benchmarks");
    let manifest = corpus.join(format!("{TASK}.yaml"));
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let theirs = "  S:\n    NI: 1000\n    NJ: 1100\n    NK: 1200\n";
    anyhow::ensure!(
        text.contains(theirs),
        "{} does not set S as this bench knows it (NI: 1000, NJ: 1100, NK: 1200)",
        manifest.display()
    );
    let own = format!(
        "  S:\n    NI: {}\n    NJ: {}\n    NK: {}\n",
        sizes[0], sizes[1], sizes[2]
    );
    std::fs::write(&manifest, text.replacen(theirs, &own, 1))?;
    let imported = imported_package(&options.peer, Some(&root))?;
    anyhow::ensure!(
        imported.canonicalize()? == package.canonicalize()?,
        "the peer imports {} ahead of the copy {}: it would grade at its own S",
        imported.display(),
        package.display()
    );
    Ok(Work {
        whose: "hpcagent's S",
        sizes,
        corpus,
        package: Some(root),
    })
}

/// The directory of the `hpcagent_bench` package the peer's venv imports
/// (with `path` ahead of its own when given).
pub(crate) fn imported_package(peer: &Path, path: Option<&Path>) -> anyhow::Result<PathBuf> {
    let python = peer.with_file_name("python");
    let mut command = Command::new(&python);
    if let Some(path) = path {
        command.env("PYTHONPATH", path);
    }
    let out = command
        .args([
            "-c",
            "import hpcagent_bench, os; print(os.path.dirname(hpcagent_bench.__file__))",
        ])
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} cannot import hpcagent_bench: {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// Every round at one size.
fn measure(options: &Options, work: &Work) -> anyhow::Result<Outcome> {
    let dir = &options.work_dir.join(format!(
        "{}x{}x{}",
        work.sizes[0], work.sizes[1], work.sizes[2]
    ));
    std::fs::create_dir_all(dir)?;
    let flags = judge_flags()?;
    let driver = driver(dir, work.sizes)?;
    let gemm = std::fs::read_to_string(options.repo.join("tests/submissions/gemm_ok.c"))?;
    let mut variants = Variants {
        dir: dir.clone(),
        gemm,
        made: 0,
    };

    let peer_cache = dir.join("peer-shared");
    let mut peer = Peer::start(&options.peer, &peer_cache, work.package.as_deref())?;
    peer.grade(&variants.next()?, false)?;
    let kept = dir.join("cache-kept");
    let judge = start_judge_with(&options.exe, &options.repo, &kept, &corpus_args(work))?;
    let mut ours = Client::connect(&judge)?;
    ours.ask(TASK, &variants.next()?, true)?;

    let mut rounds: Vec<Round> = Vec::new();
    for r in 0..options.rounds {
        let hand = by_hand(&flags, &variants.next()?, &driver, dir, Calls::Alone(CALLS))?;
        let mut on = Bench {
            options,
            work,
            dir,
            variants: &mut variants,
            round: r,
        };
        // The idle time is the peer's baseline cost: what its first grade
        // took beyond its warm one, measured in the round when the peer
        // goes first, else taken from the round before.
        let round = match rounds.last().filter(|_| r % 2 == 1) {
            Some(before) => {
                let idle = before.idle;
                let ours = on.ours(&mut ours, &kept, idle)?;
                let (peer, _) = on.peer(&mut peer, &peer_cache, Some(idle))?;
                Round {
                    hand,
                    idle,
                    peer,
                    ours,
                }
            }
            None => {
                let (peer, idle) = on.peer(&mut peer, &peer_cache, None)?;
                let ours = on.ours(&mut ours, &kept, idle)?;
                Round {
                    hand,
                    idle,
                    peer,
                    ours,
                }
            }
        };
        eprintln!(
            "round {}: by hand {:.2} s; peer {:.2}/{:.2}/{:.2}/{:.2}/{:.2}; hpcagent {:.2}/{:.2}/{:.2}/{:.2}/{:.2} (warm/fresh kept/fresh empty at once/after {:.1} s/submit; {} first)",
            r + 1,
            round.hand,
            round.peer.warm,
            round.peer.fresh_kept,
            round.peer.fresh_at_once,
            round.peer.fresh_empty,
            round.peer.submit,
            round.ours.warm,
            round.ours.fresh_kept,
            round.ours.fresh_at_once,
            round.ours.fresh_empty,
            round.ours.submit,
            round.idle,
            if r % 2 == 1 { "hpcagent" } else { "peer" }
        );
        rounds.push(round);
    }
    Ok(summarize(work, &rounds, options.noise))
}

/// The submission, new each grade (a comment) so no build is cached.
struct Variants {
    dir: PathBuf,
    gemm: String,
    made: usize,
}

impl Variants {
    fn next(&mut self) -> anyhow::Result<PathBuf> {
        self.made += 1;
        let path = self.dir.join(format!("variant-{}.c", self.made));
        std::fs::write(&path, format!("/* variant {} */\n{}", self.made, self.gemm))?;
        Ok(path)
    }
}

/// One round's grades of either judge.
struct Bench<'a> {
    options: &'a Options,
    work: &'a Work,
    dir: &'a Path,
    variants: &'a mut Variants,
    round: usize,
}

impl Bench<'_> {
    /// The peer's four grades, and its baseline cost (its first grade over
    /// its warm one); its empty-cache grade after `idle`, or that cost.
    fn peer(
        &mut self,
        warm: &mut Peer,
        kept: &Path,
        idle: Option<f64>,
    ) -> anyhow::Result<(Grades, f64)> {
        let exe = &self.options.peer;
        let mut g = Grades {
            warm: warm.grade(&self.variants.next()?, false)?,
            ..Grades::default()
        };
        let package = self.work.package.as_deref();
        g.fresh_kept = Peer::start(exe, kept, package)?.grade(&self.variants.next()?, false)?;
        let cost = (g.fresh_kept - g.warm).max(0.0);
        let at_once = self.dir.join(format!("peer-at-once-{}", self.round));
        g.fresh_at_once =
            Peer::start(exe, &at_once, package)?.grade(&self.variants.next()?, false)?;
        let empty = self.dir.join(format!("peer-empty-{}", self.round));
        let mut fresh = Peer::start(exe, &empty, package)?;
        std::thread::sleep(Duration::from_secs_f64(idle.unwrap_or(cost)));
        g.fresh_empty = fresh.grade(&self.variants.next()?, false)?;
        g.submit = warm.grade(&self.variants.next()?, true)?;
        Ok((g, cost))
    }

    /// hpcagent's four grades; its judge over an empty cache is started
    /// with the task to warm, as a campaign's judges are, `idle` s before.
    fn ours(&mut self, warm: &mut Client, kept: &Path, idle: f64) -> anyhow::Result<Grades> {
        let (exe, repo) = (&self.options.exe, &self.options.repo);
        let args = corpus_args(self.work);
        let mut g = Grades {
            warm: warm.ask(TASK, &self.variants.next()?, false)?.0,
            ..Grades::default()
        };
        let fresh = start_judge_with(exe, repo, kept, &args)?;
        g.fresh_kept = Client::connect(&fresh)?
            .ask(TASK, &self.variants.next()?, false)?
            .0;
        drop(fresh);
        let at_once = self.dir.join(format!("cache-at-once-{}", self.round));
        let fresh = start_judge_with(exe, repo, &at_once, &args)?;
        g.fresh_at_once = Client::connect(&fresh)?
            .ask(TASK, &self.variants.next()?, false)?
            .0;
        drop(fresh);
        let mut warming = args;
        warming.extend(["--warm".to_string(), TASK.to_string()]);
        let empty = self.dir.join(format!("cache-empty-{}", self.round));
        let fresh = start_judge_with(exe, repo, &empty, &warming)?;
        let mut client = Client::connect(&fresh)?;
        std::thread::sleep(Duration::from_secs_f64(idle));
        g.fresh_empty = client.ask(TASK, &self.variants.next()?, false)?.0;
        g.submit = warm.ask(TASK, &self.variants.next()?, true)?.0;
        Ok(g)
    }
}

fn corpus_args(work: &Work) -> Vec<String> {
    vec!["--corpus".into(), work.corpus.display().to_string()]
}

fn summarize(work: &Work, rounds: &[Round], noise: usize) -> Outcome {
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
        whose: work.whose.to_string(),
        sizes: work.sizes,
        rounds: rounds.len(),
        noise,
        by_hand_s: med(&|r| r.hand),
        idle_s: med(&|r| r.idle),
        rows: vec![
            row("warm grade", |g| g.warm),
            row("fresh judge's first grade, kept cache", |g| g.fresh_kept),
            row("fresh judge's first grade, empty cache", |g| {
                g.fresh_at_once
            }),
            row("  the same, warming its task first", |g| g.fresh_empty),
            row("submit (5 held-out cases)", |g| g.submit),
        ],
    }
}

pub fn render(o: &Outcome) -> String {
    let mut out = format!(
        "hpcagent judge vs HPCAgent-Bench's judge: gemm at {} ({}×{}×{}) in C, \
         an i-k-j kernel, 1 + {CALLS} calls a grade; medians of {} rounds; {}\n\
         by hand (gcc, then 1 + {CALLS} calls): {:.3} s; idle of a warming judge before its \
         first grade over an empty cache: {:.2} s\n",
        o.whose,
        o.sizes[0],
        o.sizes[1],
        o.sizes[2],
        o.rounds,
        match o.noise {
            0 => "a quiet node".to_string(),
            n => format!("{n} CPU-bound processes on the node"),
        },
        o.by_hand_s,
        o.idle_s
    );
    out.push_str(&format!(
        "{:<42} {:>22} {:>22} {:>16}\n",
        "", "HPCAgent-Bench", "hpcagent", "hpcagent / peer"
    ));
    for (what, peer, peer_ratio, ours, ours_ratio, vs) in &o.rows {
        out.push_str(&format!(
            "{what:<42} {:>13.3} s ({peer_ratio:.2}×) {:>13.3} s ({ours_ratio:.2}×) {vs:>15.2}×\n",
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
pub(crate) struct Peer {
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
    /// Serves at S with `shared` as its shared directory, importing its
    /// package from `package` when given; returns once it accepts
    /// connections.
    pub(crate) fn start(exe: &Path, shared: &Path, package: Option<&Path>) -> anyhow::Result<Peer> {
        std::fs::create_dir_all(shared)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = Command::new(exe);
        if let Some(package) = package {
            // Ahead of the venv's editable install, whose finder Python
            // consults after the path.
            command.env("PYTHONPATH", package);
        }
        let process = command
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
        let source = std::fs::read_to_string(source)?;
        let (seconds, answer) = self.post("gemm", &source, submit)?;
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

    /// One `/score` (or `/submit`) of C `source` to `kernel`: seconds, and
    /// the answer whatever it says.
    pub(crate) fn post(
        &mut self,
        kernel: &str,
        source: &str,
        submit: bool,
    ) -> anyhow::Result<(f64, serde_json::Value)> {
        let body = serde_json::json!({
            "kernel": kernel, "language": "c", "rank": 0, "source": source,
            "build": [], "workspace_bytes": null,
        });
        let url = format!("{}/{}", self.url, if submit { "submit" } else { "score" });
        let _quiet = crate::judge::node_quiet()?;
        let started = Instant::now();
        let text = self.runtime.block_on(async {
            self.http
                .post(&url)
                .json(&body)
                .timeout(Duration::from_secs(600))
                .send()
                .await?
                .text()
                .await
        })?;
        let seconds = started.elapsed().as_secs_f64();
        Ok((
            seconds,
            python_json(&text).context("HPCAgent-Bench's answer")?,
        ))
    }
}

/// JSON as Python's `json` writes it, whose floats may be `NaN` or
/// `Infinity` (a speedup over a time of 0), which JSON has no words for:
/// read as null where the text does not parse as it is.
fn python_json(text: &str) -> anyhow::Result<serde_json::Value> {
    serde_json::from_str(text).or_else(|_| {
        let nulled = text
            .replace("-Infinity", "null")
            .replace("Infinity", "null")
            .replace("NaN", "null");
        serde_json::from_str(&nulled)
            .with_context(|| format!("not JSON: {}", text.chars().take(200).collect::<String>()))
    })
}

#[cfg(test)]
mod tests {
    use super::python_json;

    #[test]
    fn python_s_non_finite_floats_read_as_null() {
        let v =
            python_json(r#"{"speedups": {"numpy": NaN, "c": Infinity, "d": -Infinity}, "x": 1.5}"#)
                .unwrap();
        assert!(v["speedups"]["numpy"].is_null() && v["speedups"]["d"].is_null());
        assert_eq!(v["x"], 1.5);
        assert!(python_json("<html>").is_err());
    }
}

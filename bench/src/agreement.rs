//! `hpcagent bench agreement`: hpcagent's speedups on HPCAgent-Bench's
//! tasks against the ones HPCAgent-Bench's own judge gives, on the same C.
//!
//! A sample of the checkout's manifests, drawn by the project across its
//! tracks (each track's keys in the order of a hash of the seed and the
//! key, taken a track at a time), is translated to C by HPCAgent-Bench's
//! own translator, run from the peer's venv as its judge runs it, never
//! copied. Both judges grade that C `rounds` times (`Score`, at S; the
//! median of each judge's speedups, as one grade of a microsecond call is
//! noisy on either), a round over the whole sample at a time: a kernel's
//! grades lie minutes apart, so that a spell of the shared node's noise
//! (which lengthens a long call more than a short one, whose fastest can
//! fall between its bursts) moves one of them, which the median leaves
//! out, not all of them. hpcagent's from
//! `--corpus` alone, with no `BASELINES`, so each divides by what it finds
//! (the translator's C on the loop-level track, NumPy elsewhere), and
//! HPCAgent-Bench's as its server answers. A kernel the translator cannot
//! translate is left out and the next drawn instead: the sample is of
//! kernels it translates. The raw speedups are compared (HPCAgent-Bench's
//! `speedups`, before its significance test credits 1.0), for the kernels
//! both grade correct: agreement is within a factor 1.5.
//!
//! It also times each judge's grades as a client meets them: a kernel's
//! first grade (the task new to hpcagent's judge, which makes its cases
//! then) and the later ones, against HPCAgent-Bench's on the same C.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use hpcagent_corpus::hab::{self, Kernel};
use hpcagent_proto::v1 as pb;

use crate::judge::{Client, start_judge_with};
use crate::judge_peer::{Peer, imported_package};

/// The factor within which two judges' speedups agree.
pub const FACTOR: f64 = 1.5;

#[derive(Debug, Clone)]
pub struct Options {
    pub exe: PathBuf,
    pub repo: PathBuf,
    /// `hpcagent_bench/benchmarks` of an HPCAgent-Bench checkout.
    pub corpus: PathBuf,
    /// HPCAgent-Bench's `hpcagent-bench` executable (in its venv).
    pub peer: PathBuf,
    pub kernels: usize,
    pub seed: u64,
    /// These kernels alone, by key, instead of `kernels` drawn.
    pub only: Vec<String>,
    /// Grades of each kernel by each judge.
    pub rounds: usize,
    pub work_dir: PathBuf,
}

/// One kernel, as both judges graded it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub key: String,
    pub track: String,
    /// What hpcagent's speedup divides (`translator C`, `numpy`).
    pub denominator: String,
    /// hpcagent's status (its first grade's) and raw speedup (the median).
    pub ours: String,
    pub ours_speedup: Option<f64>,
    /// Whether HPCAgent-Bench's judge graded it correct (every time), and
    /// its raw speedup (the median).
    pub peer_correct: bool,
    pub peer_speedup: Option<f64>,
    /// A request to HPCAgent-Bench's judge failed (no answer, or none
    /// that reads as JSON): the kernel is not compared.
    pub peer_failed: bool,
    /// Why either did not grade it, in words.
    pub note: String,
    /// Each judge's grades of the kernel, in seconds as the client waited
    /// for them, first grade first.
    pub ours_s: Vec<f64>,
    pub peer_s: Vec<f64>,
    /// Each judge's raw speedup of each of its grades that ended correct.
    pub ours_speedups: Vec<f64>,
    pub peer_speedups: Vec<f64>,
}

impl Row {
    /// hpcagent's speedup over HPCAgent-Bench's, where both graded it correct.
    pub fn ratio(&self) -> Option<f64> {
        match (self.ours.as_str(), self.ours_speedup, self.peer_speedup) {
            ("ok", Some(ours), Some(peer)) if self.peer_correct && peer > 0.0 => Some(ours / peer),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub rounds: usize,
    pub rows: Vec<Row>,
    /// Drawn kernels the translator did not translate (left out).
    pub untranslated: Vec<String>,
}

pub fn run_bench(options: &Options) -> anyhow::Result<Outcome> {
    anyhow::ensure!(options.kernels > 0, "the bench needs at least one kernel");
    anyhow::ensure!(options.rounds > 0, "the bench needs at least one round");
    std::fs::create_dir_all(&options.work_dir)?;
    let (kernels, _) = hab::load(&options.corpus)
        .with_context(|| format!("cannot read {}", options.corpus.display()))?;
    let drawn = match options.only.as_slice() {
        [] => draw(&kernels, options.seed),
        keys => named(&kernels, keys)?,
    };
    let wanted = match options.only.len() {
        0 => options.kernels,
        named => named,
    };
    let judge = start_judge_with(
        &options.exe,
        &options.repo,
        &options.work_dir.join("cache"),
        &["--corpus".into(), options.corpus.display().to_string()],
    )?;
    let mut ours = Client::connect(&judge)?;
    let mut peer = Peer::start(&options.peer, &options.work_dir.join("peer-shared"), None)?;
    let (sample, untranslated) = translated_sample(&options.peer, &drawn, wanted)?;
    let mut rows: Vec<Row> = sample.iter().map(|(kernel, _)| Row::new(kernel)).collect();
    for round in 0..options.rounds {
        for ((kernel, source), row) in sample.iter().zip(&mut rows) {
            if row.peer_failed {
                continue;
            }
            let said = grade(&mut ours, &mut peer, kernel, source, round, row)?;
            eprintln!(
                "round {}/{}, {}: {said}",
                round + 1,
                options.rounds,
                row.key
            );
        }
    }
    for row in &mut rows {
        let median = |v: &[f64]| (!v.is_empty()).then(|| crate::stats::median(&mut v.to_vec()));
        row.ours_speedup = median(&row.ours_speedups);
        row.peer_speedup = median(&row.peer_speedups);
    }
    Ok(Outcome {
        seed: options.seed,
        rounds: options.rounds,
        rows,
        untranslated,
    })
}

/// A kernel of the sample, and the C HPCAgent-Bench's translator emits for it.
type Translated<'k> = (&'k Kernel, String);

/// The first `wanted` kernels of `drawn` the translator translates, with
/// their C; and the keys of those it did not, left out.
fn translated_sample<'k>(
    peer: &Path,
    drawn: &[&'k Kernel],
    wanted: usize,
) -> anyhow::Result<(Vec<Translated<'k>>, Vec<String>)> {
    let mut sample = Vec::new();
    let mut untranslated = Vec::new();
    // Translated a few at a time: the translator's Python starts once per batch.
    for batch in drawn.chunks(wanted.max(4)) {
        let mut sources = translate(peer, batch)?;
        for kernel in batch {
            if sample.len() == wanted {
                return Ok((sample, untranslated));
            }
            match sources.remove(&kernel.key) {
                Some(source) => sample.push((*kernel, source)),
                None => untranslated.push(kernel.key.clone()),
            }
        }
    }
    Ok((sample, untranslated))
}

/// Every kernel in the order the sample takes them: each track's in the
/// order of a hash of `seed` and its key, a track at a time.
fn draw(kernels: &[Kernel], seed: u64) -> Vec<&Kernel> {
    let mut tracks: BTreeMap<&str, Vec<&Kernel>> = BTreeMap::new();
    for kernel in kernels {
        tracks.entry(&kernel.track).or_default().push(kernel);
    }
    for keys in tracks.values_mut() {
        keys.sort_by_key(|k| fnv1a(seed, &k.key));
    }
    let longest = tracks.values().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| tracks.values().filter_map(move |keys| keys.get(i).copied()))
        .collect()
}

/// The kernels of `keys`, in their order.
fn named<'k>(kernels: &'k [Kernel], keys: &[String]) -> anyhow::Result<Vec<&'k Kernel>> {
    keys.iter()
        .map(|key| {
            kernels
                .iter()
                .find(|k| k.key == *key)
                .with_context(|| format!("the corpus has no kernel {key}"))
        })
        .collect()
}

/// FNV-1a over the seed's bytes and the key's: an order that is the same
/// on every machine and Rust release.
fn fnv1a(seed: u64, key: &str) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for byte in seed.to_le_bytes().iter().chain(key.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The C HPCAgent-Bench's translator emits for each kernel it translates,
/// by key, from the peer's venv.
fn translate(peer: &Path, kernels: &[&Kernel]) -> anyhow::Result<BTreeMap<String, String>> {
    let package = imported_package(peer, None)?;
    let translators = package.join("numpy_translators").join("src");
    // Its emitter (and what it starts) prints what it wrote on descriptor
    // 1: the answer goes to a copy of it, and 1 to stderr meanwhile.
    const EMIT: &str = r#"
import json, os, sys
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
from hpcagent_bench.harness.agent import emit_reference_source
keys = json.load(sys.stdin)
out = {}
for key in keys:
    try:
        out[key] = emit_reference_source(key, "c")
    except Exception as e:
        print(f"{key}: {type(e).__name__}: {e}", file=sys.stderr)
    sys.stdout.flush()
json.dump(out, answer)
answer.close()
"#;
    let keys: Vec<&str> = kernels.iter().map(|k| k.key.as_str()).collect();
    let mut child = Command::new(peer.with_file_name("python"))
        .args(["-c", EMIT])
        .env("PYTHONPATH", &translators)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the peer's Python")?;
    serde_json::to_writer(child.stdin.take().expect("piped"), &keys)?;
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "HPCAgent-Bench's translator failed ({})",
        out.status
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

impl Row {
    /// `kernel`'s row, before either judge graded it.
    fn new(kernel: &Kernel) -> Row {
        Row {
            key: kernel.key.clone(),
            track: kernel.track.clone(),
            denominator: String::new(),
            ours: String::new(),
            ours_speedup: None,
            peer_correct: true,
            peer_speedup: None,
            peer_failed: false,
            note: String::new(),
            ours_s: Vec::new(),
            peer_s: Vec::new(),
            ours_speedups: Vec::new(),
            peer_speedups: Vec::new(),
        }
    }
}

/// One grade of a kernel's C by each judge, its `round`th, into its row;
/// what each judge said of it, in words.
fn grade(
    ours: &mut Client,
    peer: &mut Peer,
    kernel: &Kernel,
    source: &str,
    round: usize,
    row: &mut Row,
) -> anyhow::Result<String> {
    // The translator names its function for the module and precision;
    // the task's symbol is what both judges call.
    let ours_source = match hpcagent_judge::hab_tasks::renaming(kernel, source) {
        Some(emitted) => format!("#define {emitted} {}\n{source}", kernel.abi.symbol),
        None => source.to_string(),
    };
    let (seconds, verdict) = ours.verdict(&kernel.key, &ours_source, false)?;
    row.ours_s.push(seconds);
    if round == 0 {
        row.denominator = verdict.denominator.clone();
        row.ours = pb::Status::word_of(verdict.status).to_string();
        if verdict.status() != pb::Status::Ok {
            row.note = format!("hpcagent: {}; ", verdict.message);
        }
    }
    match verdict.status() {
        pb::Status::Ok if row.ours == "ok" => row.ours_speedups.push(verdict.speedup),
        // A later grade that did not end ok is said, not left out quietly.
        _ if round > 0 && row.ours == "ok" => {
            row.note.push_str(&format!(
                "hpcagent's grade {}: {}; ",
                round + 1,
                verdict.message
            ));
        }
        _ => {}
    }
    let ours_said = format!(
        "hpcagent {} {:.3}×",
        pb::Status::word_of(verdict.status),
        verdict.speedup
    );
    let (seconds, answer) = match peer.post(&kernel.stem, source, false) {
        Ok(answered) => answered,
        Err(e) => {
            // The row says so and the bench goes on: an end here lost
            // the summary of every kernel graded before it.
            row.note
                .push_str(&format!("HPCAgent-Bench's request failed: {e:#}"));
            row.peer_correct = false;
            row.peer_failed = true;
            return Ok(format!("{ours_said}, HPCAgent-Bench's request failed"));
        }
    };
    row.peer_s.push(seconds);
    let correct = answer["correct"] == true;
    if !correct {
        if row.peer_correct {
            let why = answer["error"]
                .as_str()
                .or(answer["detail"].as_str())
                .unwrap_or("");
            let why = why.lines().next().unwrap_or("");
            row.note.push_str(&format!("HPCAgent-Bench: {why}"));
        }
        row.peer_correct = false;
    }
    let speedup = answer["speedups"]
        .as_object()
        .and_then(|s| s.values().find_map(serde_json::Value::as_f64));
    row.peer_speedups.extend(speedup);
    Ok(format!(
        "{ours_said}, HPCAgent-Bench correct {correct} {}",
        speedup.map_or("-".into(), |s| format!("{s:.3}×"))
    ))
}

pub fn render(o: &Outcome) -> String {
    let mut out = format!(
        "hpcagent vs HPCAgent-Bench's judge on the C its translator emits: {} kernels drawn \
         across tracks (seed {}), Score at S, each judge's median raw speedup of {} grades, \
         a round over the sample at a time\n",
        o.rows.len(),
        o.seed,
        o.rounds
    );
    out.push_str(&format!(
        "{:64} {:22} {:>14} {:>14} {:>8} {:>15}\n",
        "kernel", "track", "hpcagent", "HPCAgent-Bench", "ratio", "first grade, s"
    ));
    for row in &o.rows {
        let ours = match row.ours_speedup {
            Some(s) => format!("{s:.2}× {}", short(&row.denominator)),
            None => row.ours.clone(),
        };
        let peer = match (row.peer_correct, row.peer_speedup) {
            (true, Some(s)) => format!("{s:.2}×"),
            _ if row.peer_failed => "failed".into(),
            _ => "not correct".into(),
        };
        let ratio = row.ratio().map_or("-".into(), |r| format!("{r:.2}"));
        let first = match (row.ours_s.first(), row.peer_s.first()) {
            (Some(o), Some(p)) => format!("{o:.2} / {p:.2}"),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:64} {:22} {ours:>14} {peer:>14} {ratio:>8} {first:>15}\n",
            row.key, row.track
        ));
        if !row.note.is_empty() {
            out.push_str(&format!("    {}\n", row.note));
        }
    }
    let both: Vec<f64> = o.rows.iter().filter_map(Row::ratio).collect();
    let within = both
        .iter()
        .filter(|r| (1.0 / FACTOR..=FACTOR).contains(*r))
        .count();
    out.push_str(&format!(
        "both correct: {} of {}; within {FACTOR}× of HPCAgent-Bench's: {within} of {} \
         (target: 9 in 10); not translated, left out: {}",
        both.len(),
        o.rows.len(),
        both.len(),
        o.untranslated.len()
    ));
    out.push('\n');
    out.push_str(&steadiness(&o.rows));
    out.push_str(&cost(&o.rows));
    out
}

/// How far each judge's own grades of a kernel lie apart (its fastest
/// speedup over its slowest), over the kernels both grade correct: the
/// agreement the target asks of two judges cannot be finer than each
/// judge's agreement with itself.
fn steadiness(rows: &[Row]) -> String {
    let graded: Vec<&Row> = rows.iter().filter(|r| r.ratio().is_some()).collect();
    let apart = |speedups: &[f64]| {
        let low = speedups.iter().copied().fold(f64::INFINITY, f64::min);
        let high = speedups.iter().copied().fold(0.0, f64::max);
        high / low
    };
    let line = |name: &str, speedups: &dyn Fn(&Row) -> &[f64]| {
        let mut spreads: Vec<f64> = graded.iter().map(|r| apart(speedups(r))).collect();
        let beyond: Vec<String> = graded
            .iter()
            .zip(&spreads)
            .filter(|(_, s)| **s > FACTOR)
            .map(|(r, s)| format!("{} {s:.2}×", r.key.rsplit('/').next().unwrap_or("")))
            .collect();
        let within = spreads.len() - beyond.len();
        let median = match spreads.is_empty() {
            true => "-".to_string(),
            false => format!("{:.2}×", crate::stats::median(&mut spreads)),
        };
        let beyond = match beyond.is_empty() {
            true => String::new(),
            false => format!(", beyond: {}", beyond.join(", ")),
        };
        format!(
            "{name}: {within} of {} within {FACTOR}× (median {median}{beyond})",
            graded.len()
        )
    };
    format!(
        "each judge against itself, its fastest grade of a kernel over its slowest: {}; {}\n",
        line("hpcagent", &|r| &r.ours_speedups),
        line("HPCAgent-Bench", &|r| &r.peer_speedups)
    )
}

/// What each judge's grades cost, hpcagent's over HPCAgent-Bench's: a
/// kernel's first grade (the task new to hpcagent's judge) and the later
/// ones, by kernel and in all.
fn cost(rows: &[Row]) -> String {
    let first: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((*r.ours_s.first()?, *r.peer_s.first()?)))
        .collect();
    let later: Vec<(f64, f64)> = rows
        .iter()
        .flat_map(|r| r.ours_s.iter().zip(&r.peer_s).skip(1))
        .map(|(o, p)| (*o, *p))
        .collect();
    let line = |what: &str, grades: &[(f64, f64)], by: &str, bound: Option<f64>| {
        if grades.is_empty() {
            return format!("{what}: none\n");
        }
        let mut ratios: Vec<f64> = grades.iter().map(|(o, p)| o / p).collect();
        let (ours, peer) = grades
            .iter()
            .fold((0.0, 0.0), |(a, b), (o, p)| (a + o, b + p));
        let within = bound.map_or(String::new(), |b| {
            let n = ratios.iter().filter(|r| **r <= b).count();
            format!("; within {b}× of HPCAgent-Bench's: {n} of {}", ratios.len())
        });
        // The median sorts the ratios: the range is then their ends.
        let median = crate::stats::median(&mut ratios);
        let (low, high) = (ratios[0], ratios[ratios.len() - 1]);
        format!(
            "{what}: hpcagent {ours:.1} s, HPCAgent-Bench {peer:.1} s ({:.2}×); by {by} \
             median {median:.2}× ({low:.2}–{high:.2}×){within}\n",
            ours / peer
        )
    };
    line("first grades", &first, "kernel", Some(2.0)) + &line("later grades", &later, "grade", None)
}

/// A denominator's word, short enough for the table.
fn short(denominator: &str) -> &str {
    match denominator {
        "translator C" => "C",
        "numpy" => "np",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_the_seed_s_and_a_ratio_is_of_kernels_both_grade_correct() {
        assert_eq!(fnv1a(7, "a/b"), fnv1a(7, "a/b"));
        assert_ne!(fnv1a(1, "a"), fnv1a(2, "a"));
        assert_ne!(fnv1a(1, "a"), fnv1a(1, "b"));
        let row = |ours: &str, o: Option<f64>, correct: bool, p: Option<f64>| Row {
            key: String::new(),
            track: String::new(),
            denominator: String::new(),
            ours: ours.into(),
            ours_speedup: o,
            peer_correct: correct,
            peer_speedup: p,
            peer_failed: false,
            note: String::new(),
            ours_s: vec![3.0, 1.0],
            peer_s: vec![1.0, 1.0],
            ours_speedups: o.into_iter().collect(),
            peer_speedups: p.into_iter().collect(),
        };
        assert_eq!(row("ok", Some(3.0), true, Some(2.0)).ratio(), Some(1.5));
        assert_eq!(row("ok", Some(3.0), false, Some(2.0)).ratio(), None);
        assert_eq!(row("incorrect", None, true, Some(2.0)).ratio(), None);
        // Costs count every kernel graded, correct or not.
        let cost = cost(&[row("ok", None, true, None), {
            let mut r = row("incorrect", None, false, None);
            r.ours_s = vec![1.0, 2.0, 4.0];
            r.peer_s = vec![2.0, 2.0, 2.0];
            r
        }]);
        assert_eq!(
            cost,
            "first grades: hpcagent 4.0 s, HPCAgent-Bench 3.0 s (1.33×); by kernel median \
             3.00× (0.50–3.00×); within 2× of HPCAgent-Bench's: 1 of 2\n\
             later grades: hpcagent 7.0 s, HPCAgent-Bench 5.0 s (1.40×); by grade median \
             1.00× (1.00–2.00×)\n"
        );
    }

    #[test]
    fn each_judge_s_grades_of_a_kernel_are_held_against_each_other() {
        let row = |ours: &[f64], peer: &[f64]| Row {
            key: "track/k/k".into(),
            track: String::new(),
            denominator: String::new(),
            ours: "ok".into(),
            ours_speedup: Some(ours[0]),
            peer_correct: true,
            peer_speedup: Some(peer[0]),
            peer_failed: false,
            note: String::new(),
            ours_s: Vec::new(),
            peer_s: Vec::new(),
            ours_speedups: ours.to_vec(),
            peer_speedups: peer.to_vec(),
        };
        let mut wrong = row(&[1.0], &[1.0]);
        wrong.ours = "incorrect".into();
        let line = steadiness(&[
            row(&[2.0, 2.2, 2.1], &[10.0, 30.0, 17.0]),
            row(&[5.0, 5.0, 5.0], &[4.0, 5.0, 4.5]),
            wrong,
        ]);
        assert_eq!(
            line,
            "each judge against itself, its fastest grade of a kernel over its slowest: \
             hpcagent: 2 of 2 within 1.5× (median 1.10×); \
             HPCAgent-Bench: 1 of 2 within 1.5× (median 3.00×, beyond: k 3.00×)\n"
        );
    }
}

//! `hpcagent corpus list` and `hpcagent corpus check`.

use clap::{Args, Subcommand};
use hpcagent_corpus::Preset;
use hpcagent_corpus::hab;
use hpcagent_judge::data::hab as hab_data;
use hpcagent_judge::discrimination;
use hpcagent_judge::verdict::Status;
use hpcagent_judge::{build, oracle};

use super::judge::{HabCorpus, JudgeSetup, runtime};

#[derive(Debug, Args)]
pub struct CorpusArgs {
    #[command(subcommand)]
    command: CorpusCommand,
}

#[derive(Debug, Subcommand)]
enum CorpusCommand {
    /// One line per kernel: name, track, precisions, S sizes.
    List(ListArgs),
    /// Validate every kernel: manifest, preset memory, reference, baseline agrees at S.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// One JSON array: each kernel with its track, level, kind, presets
    /// (and, for HPCAgent-Bench manifests, each preset's bytes and its ABI).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    setup: JudgeSetup,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Only these kernels (repeatable).
    #[arg(long = "kernel")]
    kernels: Vec<String>,
    #[command(flatten)]
    setup: JudgeSetup,
}

impl CorpusArgs {
    /// `corpus list` only prints; `corpus check` runs a judge in this process.
    pub fn only_prints(&self) -> bool {
        matches!(self.command, CorpusCommand::List(_))
    }
}

pub fn run(args: CorpusArgs) -> anyhow::Result<()> {
    match args.command {
        CorpusCommand::List(a) => list(a),
        CorpusCommand::Check(a) => check(a),
    }
}

fn list(args: ListArgs) -> anyhow::Result<()> {
    if let Some(corpus) = args.setup.hab_corpus()? {
        return list_hab(&corpus, args.json);
    }
    let judge = args.setup.judge()?;
    if args.json {
        let kernels: Vec<serde_json::Value> = judge
            .corpus
            .kernels
            .iter()
            .map(|k| {
                let presets: Vec<&str> = Preset::ALL.iter().map(|p| p.as_str()).collect();
                let precisions: Vec<&str> = k.precisions.iter().map(|p| p.as_str()).collect();
                serde_json::json!({"key": k.id, "name": k.name, "track": k.track,
                                   "presets": presets, "precisions": precisions})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&kernels)?);
        return Ok(());
    }
    for k in &judge.corpus.kernels {
        let precisions: Vec<&str> = k.precisions.iter().map(|p| p.as_str()).collect();
        let sizes: Vec<String> = k
            .sizes(Preset::S)
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        println!(
            "{:14} {:22} {:10} S: {}",
            k.name,
            k.track,
            precisions.join(","),
            sizes.join(" ")
        );
    }
    Ok(())
}

/// An HPCAgent-Bench checkout's manifests: a line each, or JSON.
fn list_hab(corpus: &HabCorpus, json: bool) -> anyhow::Result<()> {
    if json {
        let kernels: Vec<serde_json::Value> = corpus
            .kernels
            .iter()
            .map(|k| {
                let bytes: serde_json::Map<String, serde_json::Value> = k
                    .presets
                    .iter()
                    .map(|p| (p.clone(), k.bytes(p).ok().into()))
                    .collect();
                serde_json::json!({"key": k.key, "name": k.name, "track": k.track,
                                   "level": k.level, "kind": k.kind, "presets": k.presets,
                                   "bytes": bytes, "abi": k.abi})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&kernels)?);
        return Ok(());
    }
    for k in &corpus.kernels {
        println!(
            "{:60} {:22} L{} {:11} {}",
            k.key, k.track, k.level, k.kind, k.abi.symbol
        );
    }
    if !corpus.refused.is_empty() {
        eprintln!(
            "{} manifest(s) refused; `hpcagent corpus check` says why",
            corpus.refused.len()
        );
    }
    Ok(())
}

/// An HPCAgent-Bench checkout: every manifest refused, and why: one that
/// does not load, and one whose reference or initializer needs a module the
/// judge's Python cannot import. (Grading these kernels is not built yet:
/// nothing is built or run.)
fn check_hab(corpus: &HabCorpus) -> anyhow::Result<()> {
    for r in &corpus.refused {
        println!("REFUSED {}: {}", r.key, r.reason);
    }
    let needs: Vec<_> = corpus.kernels.iter().map(|k| (k, k.needs())).collect();
    let wanted: std::collections::BTreeSet<String> =
        needs.iter().flat_map(|(_, n)| n.iter().cloned()).collect();
    let mut unmet = 0;
    if !wanted.is_empty() {
        let python = oracle::find(&build::default_cache_base(), |p| eprintln!("{p}"))?.python;
        let missing = hab_data::missing_modules(&python, &hab::checkout(&corpus.root), &wanted)
            .map_err(anyhow::Error::msg)?;
        for (kernel, needs) in &needs {
            let lacking: Vec<&str> = needs
                .iter()
                .filter(|n| missing.contains(*n))
                .map(String::as_str)
                .collect();
            if !lacking.is_empty() {
                unmet += 1;
                println!(
                    "REFUSED {}: needs {}, which {python} cannot import",
                    kernel.key,
                    lacking.join(", ")
                );
            }
        }
    }
    let refused = corpus.refused.len() + unmet;
    println!(
        "{} of {} manifests in {} can be read by this judge",
        corpus.kernels.len() - unmet,
        corpus.kernels.len() + corpus.refused.len(),
        corpus.root.display()
    );
    if refused == 0 {
        Ok(())
    } else {
        anyhow::bail!("{refused} manifest(s) refused")
    }
}

fn check(mut args: CheckArgs) -> anyhow::Result<()> {
    if let Some(corpus) = args.setup.hab_corpus()? {
        return check_hab(&corpus);
    }
    // The check runs at S whatever the judge's usual preset.
    args.setup.preset = Preset::S;
    let judge = args.setup.judge()?;
    let selected: Vec<_> = judge
        .corpus
        .kernels
        .iter()
        .filter(|k| args.kernels.is_empty() || args.kernels.iter().any(|n| n == &k.name))
        .collect();
    if selected.is_empty() {
        anyhow::bail!("no kernel matches {:?}", args.kernels);
    }
    let mut failures = 0;
    let rt = runtime()?;
    for kernel in selected {
        for problem in kernel.preset_problems() {
            println!("FAIL {:14} {problem}", kernel.name);
            failures += 1;
        }
        for &precision in &kernel.precisions {
            let verdict = rt
                .block_on(hpcagent_judge::grade::check_baseline(
                    &judge, kernel, precision,
                ))
                .map_err(|e| anyhow::anyhow!("{}: {e}", kernel.name))?;
            let ok = verdict.status == Status::Ok;
            if !ok {
                failures += 1;
            }
            let time = verdict
                .timing
                .map(|t| format!("{:.3} ms", t.median_ns / 1e6))
                .unwrap_or_default();
            println!(
                "{} {:14} {:5} {:12} {} {}",
                if ok { "ok  " } else { "FAIL" },
                kernel.name,
                precision.as_str(),
                verdict.status.as_str(),
                time,
                if ok {
                    String::new()
                } else {
                    format!("{} {}", verdict.message, verdict.build_log)
                }
            );
            let degenerate = rt
                .block_on(discrimination::degenerate(&judge.data, kernel, precision))
                .map_err(|e| anyhow::anyhow!("{}: {e}", kernel.name))?;
            if let Some(why) = degenerate {
                failures += 1;
                println!("FAIL {:14} {:5} {why}", kernel.name, precision.as_str());
            }
        }
    }
    if failures > 0 {
        anyhow::bail!("{failures} check(s) failed");
    }
    println!(
        "every kernel checked: manifests valid, references run, baselines agree at S, \
         and no trivial submission passes"
    );
    Ok(())
}

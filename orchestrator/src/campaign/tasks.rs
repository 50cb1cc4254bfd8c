//! The campaign's task set: kernels × languages × repeats, from the
//! configuration and the corpus.
//!
//! `KERNELS` names kernels, tracks or tags (empty: the whole corpus), each
//! with an optional preset suffix (`gemm@L`, `stencils@S`) that overrides
//! `PRESET` for those tasks; `PROBLEMS_FILE` instead lists problems as a JSON
//! array of `"kernel[@preset]"`, `"kernel[@preset]:language"` or
//! `{"kernel": …, "language": …, "precision": …, "preset": …}`.
//!
//! An HPCAgent-Bench checkout's tasks are named by path key; a bare stem
//! (the key's last part) names them too, and one the judge cannot grade is
//! refused with why.

use std::collections::BTreeMap;
use std::time::Duration;

use hpcagent_corpus::{Corpus, Kernel, Precision, Preset};
use serde::Deserialize;

use crate::scheduler::TaskSpec;
use hpcagent_common::config::{Config, ConfigError, Origin};

/// A kernel with the languages (and optional precision and preset) to run it in.
type Selected<'a> = (&'a Kernel, Vec<String>, Option<String>, Option<Preset>);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Problem {
    Name(String),
    Full {
        kernel: String,
        language: Option<String>,
        precision: Option<String>,
        preset: Option<String>,
    },
}

/// The campaign's tasks from the corpus at `corpus_root`, as `up` makes
/// them: `plan` and `submit` ask too, so that an unknown kernel is refused
/// before anything reaches Slurm rather than inside the queued job.
pub fn from_corpus(
    config: &Config,
    corpus_root: &std::path::Path,
) -> anyhow::Result<Vec<TaskSpec>> {
    // An HPCAgent-Bench checkout's manifests that cannot be graded are
    // named where a task selects them (`KERNELS`), not here.
    let (corpus, refused) = hpcagent_corpus::load_any(corpus_root).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("the corpus is invalid:\n{}", lines.join("\n"))
    })?;
    Ok(task_set(config, &corpus, &refused)?)
}

/// Every task of the campaign, in a stable order.
pub fn task_set(
    config: &Config,
    corpus: &Corpus,
    refused: &BTreeMap<String, String>,
) -> Result<Vec<TaskSpec>, ConfigError> {
    let s = &config.settings;
    let languages: Vec<String> = s.languages.0.iter().map(|l| l.to_string()).collect();
    let problems: Vec<Selected> = match &s.problems_file {
        Some(path) => read_problems(config, corpus, refused, &path.0, &languages)?,
        None => select_kernels(config, corpus, refused)?
            .into_iter()
            .map(|(k, preset)| (k, languages.clone(), None, preset))
            .collect(),
    };
    // A kernel's own budget (an HPCAgent-Bench level's) holds unless the
    // operator set `TASK_BUDGET`.
    let own_budget = config.origin("TASK_BUDGET") == Origin::Default;
    let mut tasks = Vec::new();
    for (kernel, languages, precision, preset) in problems {
        let precision = precision.unwrap_or_else(|| precision_for(kernel, s.precision.as_str()));
        for language in languages {
            for repeat in 0..s.repeats {
                let mut id = format!("{}.{language}.{precision}", kernel.name);
                if let Some(preset) = preset {
                    id.push_str(&format!("@{preset}"));
                }
                if s.repeats > 1 {
                    id.push_str(&format!("#{repeat}"));
                }
                tasks.push(TaskSpec {
                    id,
                    kernel: kernel.name.clone(),
                    track: kernel.track.clone(),
                    language: language.clone(),
                    precision: precision.clone(),
                    preset: preset.map(|p| p.to_string()),
                    budget: kernel
                        .budget_seconds
                        .filter(|_| own_budget)
                        .map(|s| Duration::from_secs(s.into())),
                });
            }
        }
    }
    Ok(tasks)
}

/// The campaign's precision where the kernel has it, else the kernel's own.
fn precision_for(kernel: &Kernel, wanted: &str) -> String {
    let wanted: Option<Precision> = wanted.parse().ok();
    match wanted {
        Some(p) if kernel.precisions.contains(&p) => p.to_string(),
        _ => kernel.precisions[0].to_string(),
    }
}

/// `name` and its preset suffix: `gemm@L` → (`gemm`, L).
fn split_preset(entry: &str) -> Result<(&str, Option<Preset>), String> {
    match entry.rsplit_once('@') {
        None => Ok((entry, None)),
        Some((name, preset)) => preset
            .parse()
            .map(|p| (name, Some(p)))
            .map_err(|e| format!("{entry:?}: {e}")),
    }
}

fn select_kernels<'a>(
    config: &Config,
    corpus: &'a Corpus,
    refused: &BTreeMap<String, String>,
) -> Result<Vec<(&'a Kernel, Option<Preset>)>, ConfigError> {
    let entries = &config.settings.kernels.0;
    if entries.is_empty() {
        return Ok(corpus.kernels.iter().map(|k| (k, None)).collect());
    }
    let mut selected: Vec<(&Kernel, Option<Preset>)> = Vec::new();
    let mut errors = Vec::new();
    for entry in entries {
        let (name, preset) = match split_preset(entry) {
            Ok(split) => split,
            Err(why) => {
                errors.push(config.diagnostic("KERNELS", why));
                continue;
            }
        };
        let matches: Vec<&Kernel> = corpus
            .kernels
            .iter()
            .filter(|k| {
                k.name == name
                    || stem(k) == name
                    || k.track == name
                    || k.tags.iter().any(|t| t == name)
            })
            .collect();
        if matches.is_empty() {
            let why = unknown_kernel(corpus, refused, name);
            errors.push(config.diagnostic("KERNELS", why));
        }
        for k in matches {
            if !selected.iter().any(|(s, _)| s.name == k.name) {
                selected.push((k, preset));
            }
        }
    }
    if errors.is_empty() {
        Ok(selected)
    } else {
        Err(ConfigError(errors))
    }
}

/// The last part of a kernel's path: an HPCAgent-Bench manifest's stem.
fn stem(kernel: &Kernel) -> &str {
    kernel.id.rsplit('/').next().unwrap_or(&kernel.id)
}

fn unknown_kernel(corpus: &Corpus, refused: &BTreeMap<String, String>, name: &str) -> String {
    let named = refused
        .iter()
        .find(|(key, _)| *key == name || key.rsplit('/').next() == Some(name));
    if let Some((key, why)) = named {
        return format!("{key} cannot be graded: {why}");
    }
    let nearest =
        hpcagent_common::words::nearest(name, corpus.kernels.iter().map(|k| k.name.as_str()))
            .map(|n| format!("; did you mean {n}?"))
            .unwrap_or_default();
    format!(
        "{name:?} is neither a kernel, a track nor a tag of {}{nearest}",
        corpus.root.display()
    )
}

fn read_problems<'a>(
    config: &Config,
    corpus: &'a Corpus,
    refused: &BTreeMap<String, String>,
    path: &std::path::Path,
    languages: &[String],
) -> Result<Vec<Selected<'a>>, ConfigError> {
    let fail = |message: String| ConfigError(vec![config.diagnostic("PROBLEMS_FILE", message)]);
    let text =
        std::fs::read_to_string(path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    let problems: Vec<Problem> = serde_json::from_str(&text).map_err(|e| {
        fail(format!(
            "{}: not a JSON list of problems: {e}",
            path.display()
        ))
    })?;
    problems
        .into_iter()
        .map(|p| {
            let (kernel, language, precision, preset) = match p {
                Problem::Name(s) => match s.split_once(':') {
                    Some((k, l)) => (k.to_string(), Some(l.to_string()), None, None),
                    None => (s, None, None, None),
                },
                Problem::Full {
                    kernel,
                    language,
                    precision,
                    preset,
                } => (kernel, language, precision, preset),
            };
            let (name, suffix) = split_preset(&kernel).map_err(fail)?;
            let preset = match preset {
                Some(p) => Some(
                    p.parse::<Preset>()
                        .map_err(|e| fail(format!("{kernel}: {e}")))?,
                ),
                None => suffix,
            };
            let k = corpus
                .find(name)
                .or_else(|| corpus.kernels.iter().find(|k| stem(k) == name))
                .ok_or_else(|| fail(unknown_kernel(corpus, refused, name)))?;
            let langs = language
                .map(|l| vec![l])
                .unwrap_or_else(|| languages.to_vec());
            Ok((k, langs, precision, preset))
        })
        .collect()
}

/// The version of the corpus at `dir`: the commit of the git checkout
/// holding it, `-dirty` when its files differ from that commit; empty
/// where it is in no checkout (or git is missing). Kept with the run, so
/// that two runs tell whether they graded the same tasks.
pub fn corpus_version(dir: &std::path::Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return String::new();
    };
    match git(&["status", "--porcelain", "--", "."]) {
        Some(changes) if !changes.is_empty() => format!("{commit}-dirty"),
        _ => commit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpcagent_common::config::{Sources, resolve};

    fn tasks(kernels: &str) -> Result<Vec<TaskSpec>, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.env");
        std::fs::write(&path, format!("KERNELS={kernels}\nLANGUAGES=c\n")).unwrap();
        let config = resolve(&Sources {
            env_file: Some(path),
            ..Sources::default()
        })
        .unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../benchmarks");
        let corpus = Corpus::load(&root).unwrap_or_else(|e| panic!("{e:?}"));
        task_set(&config, &corpus, &BTreeMap::new())
    }

    #[test]
    fn names_tracks_and_tags_take_a_preset_suffix() {
        let set = tasks("gemm@L,stencils@S,atax").unwrap();
        let gemm = set.iter().find(|t| t.kernel == "gemm").unwrap();
        assert_eq!(
            (gemm.id.as_str(), gemm.preset.as_deref()),
            ("gemm.c.fp64@L", Some("L"))
        );
        assert_eq!(
            gemm.track, "dense_linear_algebra",
            "a task has its kernel's track"
        );
        assert!(
            set.iter()
                .filter(|t| t.kernel.contains("jacobi") || t.kernel.contains("heat"))
                .all(|t| t.preset.as_deref() == Some("S")),
            "a track's suffix applies to its kernels"
        );
        let atax = set.iter().find(|t| t.kernel == "atax").unwrap();
        assert_eq!(
            (atax.id.as_str(), atax.preset.as_deref()),
            ("atax.c.fp64", None)
        );
    }

    /// The task set of `env` over the HPCAgent-Bench fixtures.
    fn hab_tasks(env: &str) -> Result<Vec<TaskSpec>, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.env");
        std::fs::write(&path, format!("LANGUAGES=c\n{env}")).unwrap();
        let config = resolve(&Sources {
            env_file: Some(path),
            ..Sources::default()
        })
        .unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/hab-corpus");
        let (corpus, refused) =
            hpcagent_corpus::load_any(&root).unwrap_or_else(|e| panic!("{e:?}"));
        task_set(&config, &corpus, &refused)
    }

    #[test]
    fn hpcagent_bench_tasks_are_path_keys_with_their_level_s_budget() {
        let set = hab_tasks("KERNELS=product,spprod\n").unwrap();
        let budgets: Vec<(&str, Option<Duration>)> =
            set.iter().map(|t| (t.id.as_str(), t.budget)).collect();
        assert_eq!(
            budgets,
            [
                (
                    "scientific_computing/dense_linear_algebra/product/product.c.fp64",
                    Some(Duration::from_secs(180))
                ),
                (
                    "scientific_computing/sparse_linear_algebra/spprod/spprod.c.fp64",
                    Some(Duration::from_secs(600))
                ),
            ]
        );
        assert!(
            set.iter().all(|t| t.track == "scientific_computing"),
            "a task has its manifest's taxonomy track"
        );
        // The operator's TASK_BUDGET wins.
        let set = hab_tasks("KERNELS=product\nTASK_BUDGET=00:20:00\n").unwrap();
        assert_eq!(set[0].budget, None);
        // A manifest the judge cannot grade is refused at the key, with why.
        let err = hab_tasks("KERNELS=energy\n").unwrap_err().to_string();
        assert!(
            err.contains("KERNELS") && err.contains("what the reference returns"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_preset_suffix_is_refused_at_the_key() {
        let err = tasks("gemm@XXL").unwrap_err().to_string();
        assert!(err.contains("KERNELS") && err.contains("gemm@XXL"), "{err}");
    }
}

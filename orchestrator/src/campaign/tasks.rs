//! The campaign's task set: kernels × languages × repeats, from the
//! configuration and the corpus.
//!
//! `KERNELS` names kernels or whole tracks (empty: the whole corpus);
//! `PROBLEMS_FILE` instead lists problems as a JSON array of `"kernel"`,
//! `"kernel:language"` or `{"kernel": …, "language": …, "precision": …}`.

use hpcagent_judge::corpus::{Corpus, Kernel, Precision};
use serde::Deserialize;

use crate::config::{Config, ConfigError};
use crate::scheduler::TaskSpec;

/// A kernel with the languages (and optional precision) to run it in.
type Selected<'a> = (&'a Kernel, Vec<String>, Option<String>);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Problem {
    Name(String),
    Full {
        kernel: String,
        language: Option<String>,
        precision: Option<String>,
    },
}

/// Every task of the campaign, in a stable order.
pub fn task_set(config: &Config, corpus: &Corpus) -> Result<Vec<TaskSpec>, ConfigError> {
    let s = &config.settings;
    let languages: Vec<String> = s.languages.0.iter().map(|l| l.to_string()).collect();
    let problems: Vec<Selected> = match &s.problems_file {
        Some(path) => read_problems(config, corpus, &path.0, &languages)?,
        None => select_kernels(config, corpus)?
            .into_iter()
            .map(|k| (k, languages.clone(), None))
            .collect(),
    };
    let mut tasks = Vec::new();
    for (kernel, languages, precision) in problems {
        let precision = precision.unwrap_or_else(|| precision_for(kernel, s.precision.as_str()));
        for language in languages {
            for repeat in 0..s.repeats {
                let mut id = format!("{}.{language}.{precision}", kernel.name);
                if s.repeats > 1 {
                    id.push_str(&format!("#{repeat}"));
                }
                tasks.push(TaskSpec {
                    id,
                    kernel: kernel.name.clone(),
                    language: language.clone(),
                    precision: precision.clone(),
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

fn select_kernels<'a>(config: &Config, corpus: &'a Corpus) -> Result<Vec<&'a Kernel>, ConfigError> {
    let names = &config.settings.kernels.0;
    if names.is_empty() {
        return Ok(corpus.kernels.iter().collect());
    }
    let mut selected: Vec<&Kernel> = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        let matches: Vec<&Kernel> = corpus
            .kernels
            .iter()
            .filter(|k| &k.name == name || &k.track == name || k.tags.contains(name))
            .collect();
        if matches.is_empty() {
            errors.push(config.diagnostic("KERNELS", unknown_kernel(corpus, name)));
        }
        for k in matches {
            if !selected.iter().any(|s| s.name == k.name) {
                selected.push(k);
            }
        }
    }
    if errors.is_empty() {
        Ok(selected)
    } else {
        Err(ConfigError(errors))
    }
}

fn unknown_kernel(corpus: &Corpus, name: &str) -> String {
    let nearest = corpus
        .kernels
        .iter()
        .map(|k| (strsim::levenshtein(name, &k.name), &k.name))
        .min()
        .filter(|(d, _)| *d <= 3)
        .map(|(_, n)| format!("; did you mean {n}?"))
        .unwrap_or_default();
    format!(
        "{name:?} is neither a kernel, a track nor a tag of {}{nearest}",
        corpus.root.display()
    )
}

fn read_problems<'a>(
    config: &Config,
    corpus: &'a Corpus,
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
            let (kernel, language, precision) = match p {
                Problem::Name(s) => match s.split_once(':') {
                    Some((k, l)) => (k.to_string(), Some(l.to_string()), None),
                    None => (s, None, None),
                },
                Problem::Full {
                    kernel,
                    language,
                    precision,
                } => (kernel, language, precision),
            };
            let k = corpus
                .find(&kernel)
                .ok_or_else(|| fail(unknown_kernel(corpus, &kernel)))?;
            let langs = language
                .map(|l| vec![l])
                .unwrap_or_else(|| languages.to_vec());
            Ok((k, langs, precision))
        })
        .collect()
}

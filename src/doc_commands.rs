//! The docs' promise that every `hpcagent` command they show is one that
//! runs: each such line in a shell code block (```sh) of README.md and docs/
//! must parse with the real command line (subcommand, flags and their
//! values). Other blocks hold diagrams and templates, not commands.

use std::path::Path;

use clap::Parser;

use crate::Cli;

/// The `hpcagent …` lines of the shell code blocks in `text`, without shell
/// comments, background `&` and redirections.
fn commands_in(text: &str) -> Vec<String> {
    let mut fenced = None;
    let mut found = Vec::new();
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            fenced = match fenced {
                Some(_) => None,
                None => Some(info == "sh"),
            };
            continue;
        }
        let line = line.trim();
        let line = line
            .strip_prefix("cargo run --release -- ")
            .map_or(line, |rest| rest);
        if fenced != Some(true) || !line.starts_with("hpcagent ") {
            continue;
        }
        let end = [" #", " &", " >", " |"]
            .iter()
            .filter_map(|cut| line.find(cut))
            .min()
            .unwrap_or(line.len());
        found.push(line[..end].trim().to_string());
    }
    found
}

#[test]
fn every_command_in_the_docs_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        pages.push(entry.unwrap().path());
    }
    let mut checked = 0;
    for page in pages
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        for command in commands_in(&std::fs::read_to_string(page).unwrap()) {
            let words = shell_words::split(&command).unwrap();
            if let Err(e) = Cli::try_parse_from(&words) {
                panic!("{}: `{command}` does not parse:\n{e}", page.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} commands found in the docs");
}

#[test]
fn lines_are_cut_before_comments_and_redirections() {
    let text = "```sh\nhpcagent results r --format csv > r.csv\nhpcagent judge serve &  # bg\n```\nhpcagent outside\n```\nhpcagent diagram\n```\n";
    assert_eq!(
        commands_in(text),
        ["hpcagent results r --format csv", "hpcagent judge serve"]
    );
}

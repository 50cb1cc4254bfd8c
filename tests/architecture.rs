//! docs/architecture.md's crate graph is the one `cargo metadata` gives, and
//! the dependency rules it states hold.

mod common;
#[path = "architecture/modules.rs"]
mod modules;

use std::collections::{BTreeMap, BTreeSet};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Each workspace crate's normal (not dev or build) dependencies on the others.
fn metadata() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|name| name.starts_with("hpcagent"))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The `deps` block of docs/architecture.md.
fn documented() -> Graph {
    let page = std::fs::read_to_string(common::repo().join("docs/architecture.md")).unwrap();
    let block = page
        .split("```deps\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```deps block");
    block
        .lines()
        .map(|line| {
            let (name, deps) = line.split_once(':').expect("crate: deps");
            let deps = deps.split_whitespace().map(str::to_string).collect();
            (name.trim().to_string(), deps)
        })
        .collect()
}

#[test]
fn the_documented_crate_graph_is_cargo_s() {
    assert_eq!(documented(), metadata());
}

#[test]
fn roles_depend_on_neither_each_other_nor_the_orchestrator() {
    const ROLES: [&str; 3] = ["hpcagent-judge", "hpcagent-agent", "hpcagent-inference"];
    let graph = metadata();
    for role in ROLES {
        let deps = &graph[role];
        assert!(!deps.contains("hpcagent-orchestrator"), "{role}: {deps:?}");
        assert!(
            ROLES.iter().all(|other| !deps.contains(*other)),
            "{role}: {deps:?}"
        );
    }
    let orchestrator = &graph["hpcagent-orchestrator"];
    assert!(
        ROLES.iter().all(|role| !orchestrator.contains(*role)),
        "{orchestrator:?}"
    );
    assert!(graph.contains_key("hpcagent-corpus"));
}

/// An item is imported from the crate that owns it: no crate passes on
/// another workspace crate's modules or items as if they were its own.
#[test]
fn no_crate_re_exports_another_workspace_crate() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        for (_, path) in modules::files(&src) {
            let code = std::fs::read_to_string(&path).unwrap();
            for line in code.lines().map(str::trim_start) {
                let Some(rest) = line.strip_prefix("pub") else {
                    continue;
                };
                let rest = rest.trim_start_matches(|c| c != ' ').trim_start();
                if rest.starts_with("use hpcagent_") {
                    let file = path.strip_prefix(&src).unwrap().display();
                    found.push(format!("{name}: {file}: {line}"));
                }
            }
        }
    }
    assert!(found.is_empty(), "re-exports:\n{}", found.join("\n"));
}

/// Each workspace crate's `src/` directory, by crate name.
fn crate_sources() -> Vec<(String, std::path::PathBuf)> {
    let repo = common::repo();
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap();
    std::iter::once(".")
        .chain(members.split(',').map(|m| m.trim().trim_matches('"')))
        .filter(|m| !m.is_empty())
        .map(|m| (m.to_string(), repo.join(m).join("src")))
        .collect()
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        let files = modules::files(&src);
        let edges = files
            .iter()
            .map(|(module, path)| {
                let code = modules::code(path);
                (module.clone(), modules::named(module, &code, &files))
            })
            .collect();
        for cycle in modules::sibling_cycles(&edges) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            found.push(format!("{name}: {} name each other", names.join(", ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn no_type_has_its_impl_spread_over_more_than_three_files() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        for (ty, files) in modules::inherent_impls(&modules::files(&src)) {
            if files.len() > 3 {
                let files: Vec<String> = files
                    .iter()
                    .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
                    .collect();
                found.push(format!("{name}: impl {ty} in {} files", files.len()));
            }
        }
    }
    assert!(found.is_empty(), "spread impls:\n{}", found.join("\n"));
}

/// Each crate's layer, from the page's layer block ("layer 2   orchestrator …").
fn layers() -> BTreeMap<String, u32> {
    let page = std::fs::read_to_string(common::repo().join("docs/architecture.md")).unwrap();
    page.lines()
        .filter_map(|line| line.strip_prefix("layer "))
        .flat_map(|rest| {
            let mut words = rest.split_whitespace();
            let layer: u32 = words.next().unwrap().parse().unwrap();
            words
                .filter(|w| !w.starts_with('('))
                .map(move |w| {
                    let name = if w == "hpcagent" {
                        w.to_string()
                    } else {
                        format!("hpcagent-{w}")
                    };
                    (name, layer)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_crate_depends_only_on_crates_of_lower_layers() {
    let layers = layers();
    let graph = metadata();
    assert_eq!(
        layers.keys().collect::<BTreeSet<_>>(),
        graph.keys().collect::<BTreeSet<_>>(),
        "every crate has a layer on the page"
    );
    for (name, deps) in &graph {
        for dep in deps {
            assert!(
                layers[dep] < layers[name],
                "{name} (layer {}) depends on {dep} (layer {})",
                layers[name],
                layers[dep]
            );
        }
    }
}

#[test]
fn main_dispatches_and_commands_has_one_module_per_subcommand() {
    let src = common::repo().join("src");
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    let functions = main.matches("\nfn ").count() + main.matches("\npub fn ").count();
    assert_eq!(
        functions, 1,
        "main.rs defines `main` and nothing else to run"
    );
    assert!(!main.contains("\nimpl "), "main.rs implements nothing");
    // Each subcommand `Name(name::NameArgs)` and the module it names.
    let commands = std::fs::read_to_string(src.join("commands/mod.rs")).unwrap();
    let enum_body = commands
        .split("pub enum Command {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .unwrap();
    let named: BTreeSet<String> = enum_body
        .lines()
        .filter_map(|l| l.trim().split_once('(').map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once("::").map(|(module, _)| module.to_string()))
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(src.join("commands"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|stem| stem != "mod")
        .collect();
    assert_eq!(named, files, "one module per subcommand, and none else");
    for file in &files {
        let text =
            std::fs::read_to_string(src.join("commands").join(format!("{file}.rs"))).unwrap();
        for service in [
            "impl Judge for",
            "impl Orchestrator for",
            "TcpListener::bind",
        ] {
            assert!(
                !text.contains(service),
                "commands/{file}.rs serves something ({service})"
            );
        }
    }
}

#[test]
fn the_codemap_names_every_top_level_module_of_every_crate() {
    let page = std::fs::read_to_string(common::repo().join("docs/architecture.md")).unwrap();
    let codemap = page
        .split("## Codemap")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    let mut missing = Vec::new();
    for (name, src) in crate_sources() {
        let folder = if name == "." {
            "src/".to_string()
        } else {
            format!("{name}/")
        };
        let paragraph = codemap
            .split(&format!("**{folder}**"))
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap_or_else(|| panic!("the codemap has no paragraph for {folder}"));
        let named: BTreeSet<&str> = paragraph.split('`').skip(1).step_by(2).collect();
        for entry in std::fs::read_dir(&src).unwrap().map(|e| e.unwrap().path()) {
            let stem = entry.file_stem().unwrap().to_string_lossy().into_owned();
            let (shown, also) = if entry.is_dir() {
                // `placement.rs` with its tests in `placement/`: one module.
                (format!("{stem}/"), stem.clone())
            } else if matches!(stem.as_str(), "lib" | "main") && name != "." {
                continue;
            } else {
                (stem.clone(), format!("{stem}.rs"))
            };
            // A module with a folder of its own may be named either way.
            let folder_too = format!("{stem}/");
            if !named.contains(shown.as_str())
                && !named.contains(also.as_str())
                && !named.contains(folder_too.as_str())
            {
                missing.push(format!("{folder}: {shown}"));
            }
        }
        for word in &named {
            if let Some(dir) = word.strip_suffix('/')
                && !dir.contains(' ')
                && !src.join(dir).is_dir()
                && !common::repo().join(word).is_dir()
            {
                missing.push(format!("{folder}: {word} is no folder"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the codemap is not the tree:\n{}",
        missing.join("\n")
    );
}

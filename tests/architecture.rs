//! docs/architecture.md's crate graph is the one `cargo metadata` gives, and
//! the dependency rules it states hold.

mod common;

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

//! `hostlist::expand` and `hostlist::compress` against the real
//! `scontrol show hostnames` / `scontrol show hostlist` of the local Slurm
//! (scripts/local-slurm/up.sh; the test command starts it).

use std::process::Command;

use hpcagent_orchestrator::hostlist::{compress, expand};

/// Expressions both tools must agree on: padding, several bracket groups,
/// comma lists inside and outside brackets, mixed prefixes and widths, order
/// and duplicates.
const EXPRESSIONS: &[&str] = &[
    "n1",
    "nid001",
    "nid[001-004]",
    "nid[001-004,010]",
    "nid[001-003,007,010-012]",
    "n[1-3],m1,n4",
    "n[9-10]",
    "n[08-12]",
    "n[98-102]",
    "n[099-101]",
    "n[1-003]",
    "n[0001-3]",
    "n[001-1000]",
    "a[1-2]b[3-4]",
    "rack[1-2]-node[01-03]",
    "x[1-2]y[1-2]z[1-2]",
    "n[1-3,2]",
    "n[1,3,5]",
    "n[1-2],n[1-2]",
    "n[1-3],n[4-5]",
    "n[1-3],n[2-5]",
    "n3,n1,n2",
    "n1,n1,n2",
    "n9,n010",
    "n9,n10,n011",
    "n007,n8",
    "n7,n08",
    "n01,n1",
    "n0,n00,n000",
    "n,n1,n2",
    "a,b,c",
    "x,x",
    "1,2,3",
    "[1-4]",
    "gpu[1-2],cpu[1-2],gpu3",
    "n1-ib,n2-ib",
    "nid[001-002] nid[003-004]",
    "a1b3,a1b4,a2b3",
    "login01,nid[000100-000103]",
];

fn scontrol(what: &str, expr: &str) -> String {
    let out = Command::new("scontrol")
        .args(["show", what, expr])
        .output()
        .expect("scontrol must be installed: run scripts/test.sh, which installs and starts the local Slurm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("fatal"),
        "scontrol show {what} {expr:?} failed: {stderr} (is SLURM_CONF set? scripts/local-slurm/up.sh prints it)"
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn expand_matches_scontrol_show_hostnames() {
    assert!(EXPRESSIONS.len() >= 30);
    for expr in EXPRESSIONS {
        let slurm: Vec<String> = scontrol("hostnames", expr)
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(expand(expr).unwrap(), slurm, "expanding {expr:?}");
    }
}

#[test]
fn compress_matches_scontrol_show_hostlist() {
    for expr in EXPRESSIONS {
        let slurm = scontrol("hostlist", expr).trim().to_string();
        assert_eq!(
            compress(&expand(expr).unwrap()),
            slurm,
            "compressing {expr:?}"
        );
    }
}

#[test]
fn what_slurm_refuses_is_refused() {
    for expr in ["n[3-1]", "n[a-b]", "n[1-2]-ib", "x[0-1]y", "n[1-2]]"] {
        let slurm = scontrol("hostnames", expr);
        assert!(
            slurm.contains("Invalid hostlist") || slurm.trim().is_empty(),
            "{expr:?}: {slurm}"
        );
        assert!(expand(expr).is_err(), "{expr:?} should be refused");
    }
}

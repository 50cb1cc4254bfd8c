//! The fault and hostile-input suite's table: each case a test checks is
//! recorded as one row, and `scripts/test.sh` prints every row at the end of
//! the run (pass or fail), so the suite's results read as one table.

use std::io::Write;
use std::path::PathBuf;

/// Where rows go: one file per group under cargo's scratch directory for
/// integration tests (`target/tmp/suite/`), which test.sh empties first.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("suite")
}

/// Records one case: its group (e.g. "hostile", "fault", "load", "env"),
/// what was done, what was expected, what happened, and whether it passed.
pub fn record(group: &str, case: &str, expected: &str, got: &str, pass: bool) {
    let dir = dir();
    std::fs::create_dir_all(&dir).unwrap();
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{group}.tsv")))
        .unwrap();
    let row = format!(
        "{}\t{}\t{}\t{}\t{}\n",
        clean(group),
        clean(case),
        clean(expected),
        clean(got),
        if pass { "pass" } else { "FAIL" }
    );
    // One write per row: cases graded at once append to the same file, and
    // `writeln!` on a File writes each piece of the format on its own.
    file.write_all(row.as_bytes()).unwrap();
}

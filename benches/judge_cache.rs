//! A grade whose build comes from the cache against the same grade compiled
//! cold, in one run of one judge (a ratio; absolute times on a shared machine
//! mean little).
//!
//! `cargo bench --bench judge_cache`

use std::process::{Command, Stdio};
use std::time::Instant;

const REPEATS: usize = 5;

fn main() {
    let exe = env!("CARGO_BIN_EXE_hpcagent");
    let repo = env!("CARGO_MANIFEST_DIR");
    let cache = tempfile::tempdir().expect("temp dir");
    let mut judge = Command::new(exe)
        .args([
            "judge",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--preset",
            "S",
            "--cache",
        ])
        .arg(cache.path())
        .current_dir(repo)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the judge");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(judge.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = format!("http://{}", line.trim().trim_start_matches("listening on "));
    let source = std::fs::read_to_string(format!("{repo}/tests/submissions/gemm_ok.c")).unwrap();
    let grade = |text: &str| -> (f64, bool) {
        let file = cache.path().join(format!("g{}.c", text.len()));
        std::fs::write(&file, text).unwrap();
        let start = Instant::now();
        let out = Command::new(exe)
            .args([
                "judge",
                "score",
                "--judge",
                &url,
                "--task",
                "gemm",
                "--language",
                "c",
                "--json",
            ])
            .arg(&file)
            .output()
            .unwrap();
        let seconds = start.elapsed().as_secs_f64();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a verdict");
        assert_eq!(v["status"], "ok", "{v}");
        (seconds, v["cached_build"] == true)
    };
    // The first grade also measures the baseline and generates the data.
    grade(&format!("/* warm-up */\n{source}"));
    let mut cold = Vec::new();
    let mut cached = Vec::new();
    for i in 0..REPEATS {
        let text = format!("/* variant {i:04} */\n{source}");
        let (t, hit) = grade(&text);
        assert!(!hit);
        cold.push(t);
        let (t, hit) = grade(&text);
        assert!(hit);
        cached.push(t);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (cold, cached) = (median(&mut cold), median(&mut cached));
    println!("judge_cache: gemm at S, client round trip, median of {REPEATS}");
    println!("  compiled cold     {:8.1} ms", cold * 1e3);
    println!("  build from cache  {:8.1} ms", cached * 1e3);
    println!(
        "  ratio             {:8.2}x faster from the cache",
        cold / cached
    );
    let _ = judge.kill();
    let _ = judge.wait();
}

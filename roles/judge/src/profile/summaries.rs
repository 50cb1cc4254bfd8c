//! What a profiler's output says, read from the files it wrote: `perf
//! stat` counters and `perf report` hot symbols, `nsys stats`'s kernel
//! summary, and rocprofv3's kernel trace, by column name.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use hpcagent_common::words::tail;

/// `perf stat -x,` lines: value,unit,event,...; unsupported events say so.
pub(super) fn perf_stat_summary(path: &Path) -> (String, BTreeMap<String, f64>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counters = BTreeMap::new();
    let mut lines = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(value), Some(event)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        match value.trim().parse::<f64>() {
            Ok(v) => {
                counters.insert(event.to_string(), v);
                lines.push(format!("{event}: {v}"));
            }
            Err(_) => lines.push(format!(
                "{event}: {}",
                value.trim_matches(|c| c == '<' || c == '>')
            )),
        }
    }
    if lines.is_empty() {
        lines.push("perf stat produced no counters".into());
    }
    (lines.join("\n"), counters)
}

/// Where a `perf record` profile's samples fell: by shared object, then the
/// hottest symbols inside the submission.
pub(super) fn perf_report(data: &Path, recorded: bool) -> String {
    if !recorded || !data.is_file() {
        return "perf record did not complete".into();
    }
    let by_dso = perf_report_lines(data, &["--sort", "dso"]);
    let in_submission = perf_report_lines(data, &["--sort", "symbol", "--dsos", "submission.so"]);
    format!(
        "samples by shared object (perf record; the runner's own work is in hpcagent):\n{by_dso}\n\
         hottest symbols of the submission:\n{in_submission}"
    )
}

fn perf_report_lines(data: &Path, sort: &[&str]) -> String {
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "--percent-limit",
            "1",
        ])
        .args(sort)
        .arg("-i")
        .arg(data)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| {
                    l.trim_start()
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_digit())
                })
                // Newer perf appends empty columns shown as "-".
                .map(|l| l.trim_end_matches(|c: char| c == '-' || c.is_whitespace()))
                .take(15)
                .collect();
            if lines.is_empty() {
                no_samples(&String::from_utf8_lossy(&o.stderr))
            } else {
                lines.join("\n")
            }
        }
        Ok(o) => format!(
            "perf report failed: {}",
            tail(&String::from_utf8_lossy(&o.stderr), 500)
        ),
        Err(e) => format!("perf report: {e}"),
    }
}

/// "(no samples)", with perf's own explanation when it gave one (a
/// truncated perf.data says so on stderr yet exits 0).
fn no_samples(stderr: &str) -> String {
    let why: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(2)
        .collect();
    if why.is_empty() {
        "(no samples)".into()
    } else {
        format!("(no samples: {})", why.join(" "))
    }
}

/// `nsys stats` on the report: per-kernel GPU time. The export must be forced
/// to be overwritten, or a rerun silently reports the old profile.
pub(super) fn nsys_summary(out: &Path) -> String {
    let result = Command::new("nsys")
        .args([
            "stats",
            "--force-export=true",
            "--force-overwrite=true",
            "--report",
            "cuda_gpu_kern_sum",
            "--format",
            "csv",
            "--output",
        ])
        .arg(out.join("stats"))
        .arg(out.join("report.nsys-rep"))
        .output();
    match result {
        Ok(o) if o.status.success() => {
            let csv = std::fs::read_dir(out)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.to_string_lossy().contains("cuda_gpu_kern_sum"));
            csv.map(|p| csv_text(&p))
                .unwrap_or_else(|| String::from_utf8_lossy(&o.stdout).into_owned())
        }
        Ok(o) => format!(
            "nsys stats failed: {}",
            tail(&String::from_utf8_lossy(&o.stderr), 1000)
        ),
        Err(e) => format!("nsys stats: {e}"),
    }
}

pub(super) fn csv_text(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|t| tail(&t, 6000))
        .unwrap_or_else(|e| format!("{}: {e}", path.display()))
}

/// Sums kernel durations from rocprofv3's kernel trace. Columns differ
/// between versions, so they are found by header name.
pub(super) fn rocprof_summary(out: &Path) -> (String, BTreeMap<String, f64>) {
    let trace = walk(&out.join("rocprof"))
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with("kernel_trace.csv"));
    let Some(trace) = trace else {
        return (
            "rocprofv3 wrote no kernel_trace.csv".into(),
            BTreeMap::new(),
        );
    };
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(|h| h.trim_matches('"'))
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(name), Some(start), Some(end)) = (
        col("Kernel_Name"),
        col("Start_Timestamp"),
        col("End_Timestamp"),
    ) else {
        return (
            format!("unexpected kernel_trace.csv columns: {}", header.join(",")),
            BTreeMap::new(),
        );
    };
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches('"')).collect();
        let (Some(k), Some(s), Some(e)) = (fields.get(name), fields.get(start), fields.get(end))
        else {
            continue;
        };
        if let (Ok(s), Ok(e)) = (s.parse::<f64>(), e.parse::<f64>()) {
            *totals.entry(k.to_string()).or_default() += e - s;
        }
    }
    let summary: Vec<String> = totals
        .iter()
        .map(|(k, ns)| format!("{k}: {ns:.0} ns total"))
        .collect();
    (
        format!("kernel time by kernel:\n{}", summary.join("\n")),
        totals,
    )
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

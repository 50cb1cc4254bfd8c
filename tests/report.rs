//! `hpcagent report` on a real local campaign, and the page as a browser
//! (headless Chromium) renders it: every figure is there, with a size.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{example, hpcagent, only_run_dir, stderr, stdout};

const FIGURES: [&str; 5] = ["speedup", "distribution", "status", "effort", "timeline"];

/// Measures each inlined figure as laid out, and writes what it found into
/// the DOM, where `--dump-dom` shows it. Added to a copy of the page only:
/// the report itself carries no script.
const PROBE: &str = r#"<script>
const found = [];
for (const svg of document.querySelectorAll("figure > svg")) {
  const box = svg.getBoundingClientRect();
  const texts = svg.querySelectorAll("text").length;
  svg.setAttribute("data-rendered", `${Math.round(box.width)}x${Math.round(box.height)}x${texts}`);
  found.push(svg.id);
}
document.body.setAttribute("data-figures", found.join(","));
</script>
</body>"#;

#[test]
fn a_campaign_report_shows_every_figure_in_a_browser() {
    let root = tempfile::tempdir().unwrap();
    let run_dir = run_campaign(root.path(), "gemm,atax,softmax", "c,cpp");

    let out = hpcagent().arg("report").arg(&run_dir).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let page = run_dir.join("report/index.html");
    assert_eq!(
        stdout(&out).trim(),
        page.display().to_string(),
        "it prints the page"
    );
    for id in FIGURES {
        for ext in ["svg", "png"] {
            let file = run_dir.join(format!("report/{id}.{ext}"));
            let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} holds {len} bytes", file.display());
        }
    }
    let html = std::fs::read_to_string(&page).unwrap();
    for task in ["gemm.c.fp64", "atax.cpp.fp64", "softmax.c.fp64"] {
        assert!(
            html.contains(&format!("<tr><td>{task}</td>")),
            "{task} in the results table"
        );
    }
    assert!(
        html.contains("<tr><th>state</th><td>finished</td></tr>"),
        "{html}"
    );
    // Each row has its verdict's words and links to its attempt.
    let gemm = html
        .lines()
        .find(|l| l.starts_with("<tr><td>gemm.c.fp64</td>"))
        .unwrap();
    assert!(gemm.contains("<td>correct on the public case"), "{gemm}");
    // Its track, from the corpus through the store.
    assert!(
        gemm.contains("<td>gemm</td><td>dense_linear_algebra</td><td>c</td>"),
        "{gemm}"
    );
    assert!(
        html.contains("<td>softmax</td><td>ml</td><td>cpp</td>"),
        "{html}"
    );
    assert!(
        gemm.contains("/tasks/gemm.c.fp64/attempt-1\">attempt 1</a>"),
        "{gemm}"
    );
    assert!(
        html.contains("<tr><th>settled</th><td>6 (6 by their agents, 6 ok)</td></tr>")
            && html.contains("<tr><th>agents failed</th><td>0</td></tr>"),
        "{html}"
    );
    assert!(
        html.contains("<tr><th>agent policy</th><td>baseline</td></tr>"),
        "{html}"
    );
    // The baseline's submits are the baseline: solved, each S_i 1 (no
    // change) or identical code's measure, within [1, 1.05].
    let score = html
        .split("<tr><th>HPCAgent-Bench Score</th><td>")
        .nth(1)
        .expect("a Score row");
    assert!(score.contains(" (6 of 6 solved; fast_1 "), "{score}");
    let value: f64 = score[..score.find(' ').unwrap()].parse().unwrap();
    assert!((1.0..=1.05).contains(&value), "{score}");
    assert!(
        html.contains("<tr><th>cost</th><td>") && html.contains(" node-hours; "),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            "<tr><th>hpcagent</th><td>{}</td></tr>",
            env!("CARGO_PKG_VERSION")
        )),
        "{html}"
    );
    // The corpus is this checkout's: its commit, as the run began.
    let version = html
        .split("<tr><th>corpus version</th><td>")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .expect("a corpus version row");
    let commit = version.trim_end_matches("-dirty");
    assert!(
        commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{version}"
    );

    let dom = render_in_chromium(&page);
    // What the browser laid out: the run's identity and Score, its
    // configuration, and a speedup axis that says it is a log scale.
    for shown in [
        "<th>hpcagent</th>",
        "<th>HPCAgent-Bench Score</th>",
        "<details id=\"configuration\">",
        "log scale",
    ] {
        assert!(dom.contains(shown), "{shown} not in the rendered page");
    }
    let found = attribute(&dom, "<body", "data-figures").expect("the probe ran");
    assert_eq!(found, FIGURES.join(","), "the figures the browser found");
    for id in FIGURES {
        assert_drawn(&dom, id);
    }

    // Elsewhere with --out; a directory with no campaign is refused.
    let elsewhere = root.path().join("elsewhere");
    let out = hpcagent()
        .arg("report")
        .arg(&run_dir)
        .arg("--out")
        .arg(&elsewhere)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(elsewhere.join("index.html").is_file());
    let out = hpcagent().arg("report").arg(root.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no campaign ever ran there"),
        "{}",
        stderr(&out)
    );
}

/// `kernels` in `languages` with the baseline policy, on this machine.
fn run_campaign(root: &Path, kernels: &str, languages: &str) -> PathBuf {
    let env = example("local.env");
    let out = hpcagent()
        .args(["up", "--env", env.to_str().unwrap(), "--set"])
        .arg(format!("KERNELS={kernels}"))
        .arg("--set")
        .arg(format!("LANGUAGES={languages}"))
        .arg("--set")
        .arg(format!("RUN_ROOT={}", root.display()))
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    only_run_dir(root)
}

/// The DOM of `page` after Chromium loaded it with [`PROBE`] added.
fn render_in_chromium(page: &Path) -> String {
    let html = std::fs::read_to_string(page).unwrap();
    assert_eq!(html.matches("</body>").count(), 1);
    let probe = page.with_file_name("probe.html");
    std::fs::write(&probe, html.replace("</body>", PROBE)).unwrap();
    let profile = tempfile::tempdir().unwrap();
    // `timeout`: a browser that hangs fails the test rather than stalling it.
    let out = Command::new("timeout")
        .args([
            "60",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .arg("--window-size=1200,900")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium (exit {:?}; scripts/test.sh installs Debian's chromium): {}",
        out.status.code(),
        stderr(&out)
    );
    stdout(&out)
}

/// That the figure `id` was laid out with a size and its text (axes,
/// labels, legend), as the probe measured it.
fn assert_drawn(dom: &str, id: &str) {
    let rendered = attribute(dom, &format!("<svg id=\"{id}\""), "data-rendered")
        .unwrap_or_else(|| panic!("{id} not measured"));
    let [width, height, texts]: [u32; 3] = rendered
        .split('x')
        .map(|n| n.parse().unwrap())
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    assert!(
        width >= 400 && height >= 200,
        "{id} rendered {width}x{height}"
    );
    assert!(
        texts >= 5,
        "{id} has {texts} text elements: axes, labels, legend"
    );
}

/// The value of `name` in the first tag of `dom` that starts with `tag`.
fn attribute(dom: &str, tag: &str, name: &str) -> Option<String> {
    let start = dom.find(tag)?;
    let element = &dom[start..start + dom[start..].find('>')?];
    let value = element.split(&format!("{name}=\"")).nth(1)?;
    Some(value[..value.find('"')?].to_string())
}

/// Two campaigns over the same tasks: the baseline policy, and an agent
/// CLI that crashes on atax and ends without submitting elsewhere (over
/// one task more, which the comparison leaves out, and where it leaves
/// code that does not compile). `compare` lines them up: both identities,
/// each task's end in each run (the crash named, and what was graded in
/// its place), and each run's HPCAgent-Bench Score over the common tasks;
/// `--page` writes the same as one page. The second run's report links
/// the build log its broken code left, as a browser shows it.
#[test]
fn two_campaigns_compare_over_their_common_tasks() {
    let root = tempfile::tempdir().unwrap();
    let (a_root, b_root) = (root.path().join("a"), root.path().join("b"));
    let a = run_campaign(&a_root, "gemm,atax", "c");
    let crashes_on_atax = "sh -c 'case {workspace} in *atax*) exit 3;; \
         *dot*) for f in *.c; do echo not C > $f; done;; esac'";
    let out = common::command_campaign(hpcagent(), "gemm,atax,dot", crashes_on_atax, &b_root)
        .args(["--set", "LANGUAGES=c"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let b = only_run_dir(&b_root);

    let pages = root.path().join("pages");
    let table = compare_with_page(&a, &b, &pages);
    let line = |start: &str| {
        table
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?}: {table}"))
            .to_string()
    };
    assert!(line("A  policy baseline").contains("hpcagent "), "{table}");
    assert!(
        line("B  policy command").contains("command sh -c 'case {workspace}"),
        "{table}"
    );
    let atax = line("atax.c.fp64");
    assert!(
        atax.contains("agent crashed; starter graded ok"),
        "the crash and what was graded instead: {atax}"
    );
    assert!(!line("gemm.c.fp64").contains("crashed"), "{table}");
    // The baseline's submits are the baseline, solved, at identical
    // code's measure (within [1, 1.05]); no agent of B submitted: nothing
    // solved, Score 1.
    let a_score = line("A  HPCAgent-Bench Score");
    assert!(a_score.contains(" (2 of 2 solved"), "{table}");
    let value: f64 = a_score
        .split_whitespace()
        .nth(3)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{a_score}"));
    assert!((1.0..=1.05).contains(&value), "{table}");
    assert!(
        line("B  HPCAgent-Bench Score").contains("Score 1.000 (0 of 2 solved"),
        "{table}"
    );
    assert!(
        table.contains("over the 2 tasks all runs have (1 others left out)"),
        "{table}"
    );

    let json = hpcagent()
        .args(["compare", "--format", "json"])
        .args([&a, &b])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["runs"][1]["identity"]["policy"], "command", "{json}");
    assert_eq!(json["runs"][0]["score"]["n_solved"], 2, "{json}");
    // What each run cost: its campaign's time on its nodes.
    let cost = &json["runs"][0]["cost"];
    assert!(cost["wall_s"].as_f64().unwrap() > 0.0, "{cost}");
    assert!(cost["node_hours"].as_f64().unwrap() > 0.0, "{cost}");
    assert!(a_score.contains("node-hours"), "{table}");
    assert_eq!(json["tasks"].as_array().unwrap().len(), 2, "{json}");

    let page = std::fs::read_to_string(pages.join("compare.html")).unwrap();
    assert!(page.contains("<td>atax.c.fp64</td>"), "{page}");
    assert!(page.contains("agent crashed; starter graded ok"), "{page}");
    assert!(page.contains("policy baseline") && page.contains("policy command"));
    // As a browser lays it out: its figure is there, with a size and text.
    let dom = render_in_chromium(&pages.join("compare.html"));
    assert_eq!(
        attribute(&dom, "<body", "data-figures").as_deref(),
        Some("speedups")
    );
    assert_drawn(&dom, "speedups");
    assert!(
        dom.contains("<td>atax.c.fp64</td>"),
        "the table in the rendered page"
    );

    let out = hpcagent().arg("report").arg(&b).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let dom = render_in_chromium(&b.join("report/index.html"));
    let log = b.join("tasks/dot.c.fp64/attempt-1/build.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("error"), "{}: {text}", log.display());
    let row = dom
        .lines()
        .find(|l| l.contains("<td>dot.c.fp64</td>"))
        .unwrap_or_else(|| panic!("no dot row in the rendered page: {dom}"));
    assert!(
        row.contains(&format!(
            "<a href=\"file://{}\">build log</a>",
            log.display()
        )),
        "the row links its build log: {row}"
    );
    assert!(
        !dom.lines()
            .find(|l| l.contains("<td>atax.c.fp64</td>"))
            .is_some_and(|l| l.contains("build log")),
        "a starter that built leaves no build log to link"
    );
}

/// Two campaigns of one submission of an HPCAgent-Bench task timed against
/// its NumPy reference, on judges whose Pythons differ: a wheel's NumPy and
/// Debian's, each with its own OpenBLAS (3-4x apart on this project's
/// machines). `compare` names the task as one whose speedups do not
/// compare, with each run's NumPy and BLAS, and its page says the same; a
/// run beside itself has nothing to say.
#[test]
fn compare_names_the_tasks_whose_runs_divide_by_different_numpys() {
    let (wheel, debian) = (numpy_of("python3"), numpy_of("/usr/bin/python3"));
    assert_ne!(
        wheel, debian,
        "the test needs two Pythons with different NumPys"
    );
    let root = tempfile::tempdir().unwrap();
    let ok = common::repo().join("tests/submissions/hab/masked_ok.c");
    // What it leaves in the workspace is submitted for it by its worker.
    let leaves_ok = format!("cp {} {{workspace}}/solution.c", ok.display());
    let run = |name: &str, python: Option<&str>| {
        let runs = root.path().join(name);
        let mut up = common::command_campaign(hpcagent(), "masked", &leaves_ok, &runs);
        up.arg("--set").arg(format!(
            "CORPUS={}",
            common::repo().join("tests/hab-corpus").display()
        ));
        match python {
            Some(python) => up.env("HPCAGENT_PYTHON", python),
            None => up.env_remove("HPCAGENT_PYTHON"),
        };
        let out = up.output().unwrap();
        // Settled by the worker's submit of what the CLI left: the run
        // says its agent failed (it never submitted), as it should.
        assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
        assert!(stdout(&out).contains(" ok (left) "), "{}", stdout(&out));
        only_run_dir(&runs)
    };
    let (a, b) = (run("a", None), run("b", Some("/usr/bin/python3")));
    let pages = root.path().join("pages");
    let table = compare_with_page(&a, &b, &pages);
    let said: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("speedups over different denominators"))
        .collect();
    assert_eq!(said.len(), 2, "the heading and one task: {table}");
    let task = said[1];
    assert!(
        task.starts_with("  machine_learning/masked/masked.c.fp64  ")
            && task.contains(&format!("A numpy (NumPy {wheel}; OpenBLAS "))
            && task.contains(&format!("; B numpy (NumPy {debian}; OpenBLAS ")),
        "{table}"
    );
    let page = std::fs::read_to_string(pages.join("compare.html")).unwrap();
    assert!(
        page.contains("id=\"unlike\"") && page.contains(&format!("B numpy (NumPy {debian}; ")),
        "{page}"
    );

    let alone = hpcagent().arg("compare").args([&a, &a]).output().unwrap();
    assert!(alone.status.success(), "{}", stderr(&alone));
    assert!(
        !stdout(&alone).contains("different denominators"),
        "{}",
        stdout(&alone)
    );
}

/// `hpcagent compare A B --page PAGES`: the table it printed.
fn compare_with_page(a: &Path, b: &Path, pages: &Path) -> String {
    let out = hpcagent()
        .arg("compare")
        .args([a, b])
        .arg("--page")
        .arg(pages)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The version of NumPy `python` imports.
fn numpy_of(python: &str) -> String {
    let out = Command::new(python)
        .args(["-c", "import numpy; print(numpy.__version__)"])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(out.status.success(), "{python} cannot import NumPy");
    stdout(&out).trim().to_string()
}

//! Every case a grade makes of an HPCAgent-Bench task but the public one (a
//! held-out case, an input set it times on) differs from the public case,
//! over every manifest at hand: the project's fixtures (`tests/hab-corpus`)
//! always, and HPCAgent-Bench's whole corpus where `HPCAGENT_BENCH_SOURCE`
//! names a checkout of it. A case differs by its sizes, by its seed (a
//! generator that draws from it), or by its initializer's seed argument:
//! the walk compares plans, without Python, except for an initializer that
//! makes its values from the sizes alone, whose cases also differ in their
//! values (`hab_inputs.py`'s `vary`). For each of those, a case at the
//! public sizes is made in Python (at S) beside the public case, and the
//! transformation is held to what it promises: the inputs differ (unless
//! nothing in them may change: integers and constants, where every case
//! differs in sizes instead), and the reference's outputs differ from the
//! public case's and are finite wherever the public case's are.

use std::path::{Path, PathBuf};

use super::*;
use hpcagent_corpus::hab::{self, Symbols, Variation};

const SECRET: u64 = 0x5ec2e7;
const GRADE: [u8; 32] = [7; 32];

/// How the walk found each case to differ, and those it did not.
#[derive(Debug, Default)]
struct Walked {
    manifests: usize,
    cases: usize,
    by_sizes: usize,
    by_seed: usize,
    by_seed_argument: usize,
    /// Cases at the public sizes whose values the transformation changes.
    transformed: usize,
    /// The tasks of those cases (no size of theirs varies).
    at_public_sizes: std::collections::BTreeSet<String>,
    /// Tasks whose values at the public sizes the transformation changes,
    /// made in Python at S.
    by_values: usize,
    /// Tasks whose initializer makes nothing a transformation may change.
    kept: Vec<String>,
    /// (path key, preset, case) of each case no different from the public one.
    same: Vec<String>,
}

/// The plans of every case a grade of `kernel` at `preset` makes but the
/// public one, named: the held-out cases of a submit and the input sets
/// a score and a submit time on.
fn variants(root: &Path, kernel: &Kernel, preset: Preset) -> (InputPlan, Vec<(String, InputPlan)>) {
    let mut cases = case_plans(root, kernel, preset, 42, SECRET, Mode::Submit).unwrap();
    let public = cases.remove(0);
    let mut named: Vec<(String, InputPlan)> = cases
        .into_iter()
        .enumerate()
        .map(|(i, plan)| (format!("held-out {}", i + 1), plan))
        .collect();
    // A score's and a submit's alike.
    let draws = timed_draws(kernel, preset, &GRADE).unwrap();
    let count = timed_sets(kernel.bytes_at(&draws[0]).ok(), None);
    let plans = timed_plans(root, kernel, &draws, &GRADE, count).unwrap();
    named.extend(
        plans
            .into_iter()
            .enumerate()
            .map(|(i, plan)| (format!("timed set {i}"), plan)),
    );
    (public, named)
}

/// The integer symbols of `symbols`: a case's sizes, and its knobs'.
fn sizes_of(symbols: &Symbols) -> hpcagent_corpus::Sizes {
    symbols
        .iter()
        .filter(|(_, v)| !v.is_bool())
        .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_i64()?)))
        .collect()
}

fn walk(root: &Path) -> Walked {
    let (kernels, _) = hab::load(root).unwrap();
    let mut walked = Walked::default();
    for kernel in &kernels {
        walked.manifests += 1;
        let variation = kernel.variation();
        for preset in Preset::ALL
            .into_iter()
            .filter(|p| kernel.presets.iter().any(|k| k == p.as_str()))
        {
            let (public, variants) = variants(root, kernel, preset);
            for (name, plan) in variants {
                walked.cases += 1;
                // Sizes apart, its seed or its values: a replayed answer is
                // of the wrong shape or for other sizes.
                let seed_argument = match &variation {
                    Variation::SeedArgument(arg) => arg.as_str(),
                    _ => "",
                };
                let sizes = |symbols: &Symbols| {
                    let mut sizes = sizes_of(symbols);
                    sizes.remove(seed_argument);
                    sizes
                };
                let values_differ = match &variation {
                    Variation::Seeded => plan.seed != public.seed,
                    Variation::SeedArgument(arg) => {
                        plan.symbols.get(arg.as_str()) != public.symbols.get(arg.as_str())
                    }
                    // As the transformation's below do.
                    Variation::Transform => plan.vary.is_some(),
                };
                // At whichever of its draws the case is made.
                let made_at = std::iter::once(&plan.symbols).chain(&plan.fallbacks);
                let at_public = made_at
                    .filter(|s| sizes(s) == sizes(&public.symbols))
                    .count();
                match (sizes(&plan.symbols) != sizes(&public.symbols), &variation) {
                    _ if at_public > 0 && !values_differ => {
                        walked
                            .same
                            .push(format!("{} at {preset:?}: {name}", kernel.key));
                    }
                    (true, _) => walked.by_sizes += 1,
                    (false, Variation::Seeded) => walked.by_seed += 1,
                    (false, Variation::SeedArgument(_)) => walked.by_seed_argument += 1,
                    (false, Variation::Transform) => walked.transformed += 1,
                }
                if at_public > 0 && variation == Variation::Transform {
                    walked.at_public_sizes.insert(kernel.key.clone());
                }
            }
        }
    }
    let python = std::env::var("HPCAGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let scratch = tempfile::tempdir().unwrap();
    for kernel in kernels
        .iter()
        .filter(|k| k.variation() == Variation::Transform)
    {
        let symbols = kernel.preset_symbols("S").unwrap();
        let public = kernel
            .input_plan(root, symbols.clone(), 42, "fp64")
            .unwrap();
        let varied = kernel.variant_plan(root, vec![symbols], 7, "fp64").unwrap();
        let dir = scratch.path().join(&kernel.stem);
        for (plan, to) in [(&public, "public"), (&varied, "varied")] {
            crate::data::hab::make_inputs(&python, plan, &dir.join(to), true)
                .unwrap_or_else(|e| panic!("{} ({to}): {e}", kernel.key));
        }
        match compare_in_python(&python, &dir) {
            Compared::Differ => walked.by_values += 1,
            // Nothing the transformation may change: every case of the
            // task must differ in sizes (above), and did.
            Compared::NothingToVary if walked.at_public_sizes.contains(&kernel.key) => {
                walked.same.push(format!(
                    "{}: a case at the public sizes, and nothing to vary",
                    kernel.key
                ))
            }
            Compared::NothingToVary => walked.kept.push(kernel.key.clone()),
            Compared::Broken(why) => walked.same.push(format!("{} at S: {why}", kernel.key)),
        }
    }
    walked
}

/// What the transformation did to a task's values, as `compare_in_python`
/// found them.
enum Compared {
    Differ,
    NothingToVary,
    Broken(String),
}

/// Compares `dir`'s public and varied cases (`make_inputs` with the
/// reference's outputs): inputs, outputs, and where outputs are finite.
fn compare_in_python(python: &str, dir: &Path) -> Compared {
    const CHECK: &str = r#"
import json, os, sys
import numpy as np
public, varied = (os.path.join(sys.argv[1], d) for d in ("public", "varied"))
def arrays(case, listing, under):
    return {a["name"]: np.load(os.path.join(case, under, a["name"] + ".npy"))
            for a in json.load(open(os.path.join(case, listing)))}
inputs = [arrays(c, "inputs.json", "") for c in (public, varied)]
outputs = [arrays(c, "expected.json", "expected") for c in (public, varied)]
def same(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()
if all(same(inputs[0][n], inputs[1][n]) for n in inputs[0]):
    print("nothing to vary")
elif all(same(outputs[0][n], outputs[1][n]) for n in outputs[0]):
    print("the outputs are the public case's")
else:
    lost = [n for n in outputs[0] if np.issubdtype(outputs[0][n].dtype, np.number)
            and np.any(np.isfinite(outputs[0][n]) & ~np.isfinite(outputs[1][n]))]
    print("not finite: " + ", ".join(lost) if lost else "differ")
"#;
    let out = std::process::Command::new(python)
        .args(["-c", CHECK])
        .arg(dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match said.as_str() {
        "differ" => Compared::Differ,
        "nothing to vary" => Compared::NothingToVary,
        _ => Compared::Broken(format!(
            "{said} {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn assert_all_differ(root: &Path) -> Walked {
    let walked = walk(root);
    eprintln!(
        "{}: {} manifests, {} cases besides the public ones: {} drawn at other sizes; at the \
         public sizes, {} with another seed, {} with another seed argument, {} with transformed \
         values; tasks whose initializer takes no seed with a case that may be at the public \
         sizes: {:?}; of all tasks whose initializer takes no seed, {} have values the \
         transformation changes (made at S), {} none: {:?}",
        root.display(),
        walked.manifests,
        walked.cases,
        walked.by_sizes,
        walked.by_seed,
        walked.by_seed_argument,
        walked.transformed,
        walked.at_public_sizes,
        walked.by_values,
        walked.kept.len(),
        walked.kept
    );
    assert!(
        walked.same.is_empty(),
        "{} cases equal to the public one:\n{}",
        walked.same.len(),
        walked.same.join("\n")
    );
    walked
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hab-corpus")
}

#[test]
fn no_case_of_a_fixture_is_the_public_one() {
    let walked = assert_all_differ(&fixtures());
    // The fixture of a seed-less initializer is among them, and its values
    // were compared.
    assert!(walked.by_values > 0, "{walked:?}");
    // Held-out cases differ in their sizes too; the sets a grade times on
    // are at the public sizes (HPCAgent-Bench's), with seeds of their own.
    assert!(walked.by_sizes > 0 && walked.by_seed > 0, "{walked:?}");
}

/// Over HPCAgent-Bench's own 635 manifests, where a checkout is at hand
/// (`HPCAGENT_BENCH_SOURCE`, as `scripts/bench-peers.sh` takes it); a
/// machine without one walks the fixtures alone, and says so.
#[test]
fn no_case_of_hpcagent_bench_s_corpus_is_the_public_one() {
    let Ok(source) = std::env::var("HPCAGENT_BENCH_SOURCE") else {
        eprintln!(
            "HPCAGENT_BENCH_SOURCE is not set: the walk over HPCAgent-Bench's corpus did not run \
             (the fixtures' did)"
        );
        return;
    };
    let root = Path::new(&source).join("hpcagent_bench/benchmarks");
    let walked = assert_all_differ(&root);
    assert!(walked.manifests >= 600, "{walked:?}");
}

/// Every held-out case of a submit at S, and the input set a submit times
/// on, made with the reference's outputs in Python as a grade makes them,
/// over HPCAgent-Bench's corpus (`HPCAGENT_BENCH_SOURCE`): each is made (at
/// its first draw, or one of its fallbacks where the initializer or the
/// reference refuses a draw) wherever the public case can be; how many
/// were made at a fallback is said. A task whose public case cannot be made
/// here either (a module this Python lacks, a reference slower than a
/// limit its wrapper sets) is listed, not failed. Slow (the corpus's
/// references run in Python loops), so run by hand:
/// `cargo test -p hpcagent-judge --lib every_drawn -- --ignored`.
#[test]
#[ignore]
fn every_drawn_case_of_hpcagent_bench_s_corpus_can_be_made() {
    let source = std::env::var("HPCAGENT_BENCH_SOURCE").expect("HPCAGENT_BENCH_SOURCE");
    let root = Path::new(&source).join("hpcagent_bench/benchmarks");
    let (kernels, _) = hab::load(&root).unwrap();
    let python = std::env::var("HPCAGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let cache = tempfile::tempdir().unwrap();
    let data = crate::data::DataCache::new(cache.path().to_path_buf(), python);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (mut made, mut fell_back, mut unmade, mut broken) = (0, Vec::new(), Vec::new(), Vec::new());
    for kernel in &kernels {
        let Ok(graded) = kernel.graded() else {
            continue;
        };
        let mut plans = case_plans(&root, kernel, Preset::S, 42, SECRET, Mode::Submit).unwrap();
        let draws = timed_draws(kernel, Preset::S, &GRADE).unwrap();
        plans.extend(timed_plans(&root, kernel, &draws, &GRADE, 1).unwrap());
        let make =
            |plans: &[InputPlan]| runtime.block_on(data.hab_cases(&graded, plans, Need::Reference));
        // All in one process; where that fails (or outlasts the wrapper's
        // limit), the public case and then each drawn one alone.
        let drawn = &plans[1..];
        let cases: Vec<(HabCase, &InputPlan)> = match make(drawn) {
            Ok(cases) => cases.into_iter().zip(drawn).collect(),
            Err(_) => {
                if let Err(public) = make(&plans[..1]) {
                    unmade.push(format!("{}: {public}", kernel.key));
                    continue;
                }
                let mut cases = Vec::new();
                for plan in drawn {
                    match make(std::slice::from_ref(plan)) {
                        Ok(made) => cases.extend(made.into_iter().map(|case| (case, plan))),
                        Err(e) => broken.push(format!("{} {:?}: {e}", kernel.key, plan.symbols)),
                    }
                }
                cases
            }
        };
        made += cases.len();
        for (case, plan) in &cases {
            if case.sizes != sizes_of(&plan.symbols) {
                fell_back.push(kernel.key.clone());
            }
            data.discard(case);
        }
    }
    fell_back.dedup();
    eprintln!(
        "{made} drawn cases made, of {} tasks at a fallback for some: {fell_back:?}; {} tasks whose \
         public case cannot be made here either:\n{}",
        fell_back.len(),
        unmade.len(),
        unmade.join("\n")
    );
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// A corpus of one manifest (`key`), its reference and its initializer's
/// module, in a fresh root.
fn one_task(
    key: &str,
    manifest: &str,
    reference: &str,
    initializer: &str,
) -> (tempfile::TempDir, Kernel) {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join(format!("{key}.yaml"));
    let dir = path.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    std::fs::write(&path, manifest).unwrap();
    std::fs::write(dir.join(format!("{stem}_numpy.py")), reference).unwrap();
    if !initializer.is_empty() {
        std::fs::write(dir.join(format!("{stem}.py")), initializer).unwrap();
    }
    let (mut kernels, refused) = hab::load(root.path()).unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    (root, kernels.remove(0))
}

const PRESETS: &str = "parameters:\n  S: {N: 8}\n  M: {N: 16}\n  L: {N: 32}\n  XL: {N: 64}\n";

#[test]
fn the_transformation_keeps_what_each_kind_of_array_guarantees() {
    let manifest = format!(
        "name: k\nkind: microkernel\nlevel: 1\n{PRESETS}\
         init:\n  func_name: initialize\n  input_args: [N]\n\
         \x20 output_args: [idx, counts, ones, spd, lower, copy, vec, out]\n\
         \x20 arrays:\n    idx: {{shape: \"(N,)\", dtype: int64}}\n    counts: (N,)\n    ones: (N,)\n\
         \x20   spd: (N, N)\n    lower: (N, N)\n    copy: (N, N)\n    vec: (N,)\n    out: (N,)\n\
         output_args: [out]\n"
    );
    let initializer = "import numpy as np\n\n\
        def initialize(N, datatype=np.float64):\n\
        \x20   idx = np.arange(N)[::-1].copy()\n\
        \x20   counts = np.arange(N, dtype=datatype)\n\
        \x20   ones = np.ones(N, dtype=datatype)\n\
        \x20   b = np.fromfunction(lambda i, j: (i + 2 * j + 1) % N / N, (N, N), dtype=datatype)\n\
        \x20   spd = b @ b.T + N * np.eye(N)\n\
        \x20   lower = np.tril(b + 1)\n\
        \x20   vec = np.linspace(-1, 1, N, dtype=datatype)\n\
        \x20   return idx, counts, ones, spd, lower, lower.copy(), vec, np.zeros(N)\n";
    let reference =
        "def k(idx, counts, ones, spd, lower, copy, vec, out):\n    out[:] = spd @ vec\n";
    let (root, kernel) = one_task("sci/k/k", &manifest, reference, initializer);
    assert_eq!(kernel.variation(), Variation::Transform);
    let symbols = kernel.preset_symbols("S").unwrap();
    let public = kernel
        .input_plan(root.path(), symbols.clone(), 42, "fp64")
        .unwrap();
    let varied = kernel
        .variant_plan(root.path(), vec![symbols], 3, "fp64")
        .unwrap();
    let python = std::env::var("HPCAGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = tempfile::tempdir().unwrap();
    for (plan, to) in [(&public, "public"), (&varied, "varied")] {
        crate::data::hab::make_inputs(&python, plan, &out.path().join(to), false).unwrap();
    }
    const CHECK: &str = r#"
import os, sys
import numpy as np
at = lambda case, name: np.load(os.path.join(sys.argv[1], case, name + ".npy"))
p, v = (lambda n: at("public", n)), (lambda n: at("varied", n))
for kept in ("idx", "counts", "ones", "out"):
    assert np.array_equal(p(kept), v(kept)), kept
spd = v("spd")
assert np.array_equal(spd, spd.T) and not np.array_equal(spd, p("spd"))
np.linalg.cholesky(spd)
lower = v("lower")
assert np.array_equal(np.tril(lower), lower) and not np.array_equal(lower, p("lower"))
assert np.array_equal(lower, v("copy"))
ratio = v("vec") / p("vec")
assert np.all((ratio >= 0.5) & (ratio <= 1.0)) and len(set(ratio)) > 1
print("kept")
"#;
    let checked = std::process::Command::new(&python)
        .args(["-c", CHECK])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&checked.stdout).trim(),
        "kept",
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

#[test]
fn a_draw_the_reference_refuses_falls_back_to_the_next() {
    // The output's extent is a literal that fits S alone (as many
    // KernelBench ports' are): every draw is refused, the preset's own
    // sizes are taken.
    let manifest = format!(
        "name: f\nkind: microkernel\nlevel: 1\n{PRESETS}\
         init:\n  arrays:\n    x: (N,)\n    out: (6,)\noutput_args: [out]\n"
    );
    let reference = "def f(x, out):\n    out[:] = x[1:-1] * 2\n";
    let (root, kernel) = one_task("llr/f/f", &manifest, reference, "");
    let plans = case_plans(root.path(), &kernel, Preset::S, 42, SECRET, Mode::Submit).unwrap();
    assert!(
        plans[1..]
            .iter()
            .all(|p| p.symbols != plans[0].symbols && !p.fallbacks.is_empty())
    );
    let graded = kernel.graded().unwrap();
    let python = std::env::var("HPCAGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let cache = tempfile::tempdir().unwrap();
    let data = crate::data::DataCache::new(cache.path().to_path_buf(), python);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cases = runtime
        .block_on(data.hab_cases(&graded, &plans, Need::Reference))
        .unwrap();
    let s = hpcagent_corpus::Sizes::from([("N".to_string(), 8)]);
    assert!(
        cases.iter().all(|c| c.sizes == s),
        "{:?}",
        cases.iter().map(|c| &c.sizes).collect::<Vec<_>>()
    );
    // The held-out cases still differ from the public one: in their seeds.
    assert!(plans[1..].iter().all(|p| p.seed != plans[0].seed));
}

#[test]
fn a_grade_times_on_as_many_sets_as_its_bytes_and_the_reference_s_time_allow() {
    const MIB: u64 = 1 << 20;
    // Small and quick: HPCAgent-Bench's 20 calls.
    assert_eq!(timed_sets(Some(60 << 10), Some(100_000)), 20);
    // 29 MB sets (its gemm at S): 8 in 256 MiB; a 0.4 s reference: 5.
    assert_eq!(timed_sets(Some(29 * MIB), None), 8);
    assert_eq!(timed_sets(Some(29 * MIB), Some(400_000_000)), 5);
    // Gigabytes, or seconds of Python: the fewest.
    assert_eq!(timed_sets(Some(1800 * MIB), Some(1_000_000)), 3);
    assert_eq!(timed_sets(Some(MIB), Some(3_000_000_000)), 3);
    // Shapes an initializer decides: as if five fit.
    assert_eq!(timed_sets(None, Some(1_000)), 5);
}

#[test]
fn timed_sets_are_cut_into_few_even_batches_of_at_most_five() {
    for sets in 1..=TIMED_SETS.1 as usize {
        let size = batch_size(sets);
        let sizes: Vec<usize> = (0..sets)
            .collect::<Vec<_>>()
            .chunks(size)
            .map(<[usize]>::len)
            .collect();
        assert_eq!(sizes.len(), sets.div_ceil(BATCH_SETS), "{sets}: {sizes:?}");
        assert!(sizes.iter().all(|&n| n <= BATCH_SETS), "{sets}: {sizes:?}");
        // No batch of one beside bigger ones: its round trip would weigh
        // on its one call as on none of the others'.
        assert!(
            sets < 2 || sizes.iter().all(|&n| n >= 2),
            "{sets}: {sizes:?}"
        );
    }
    assert_eq!(batch_size(20), 5);
    assert_eq!(batch_size(6), 3);
}

/// Whether another open of the lock file could take it now.
fn free(lock: &Path) -> bool {
    let file = std::fs::File::open(lock).unwrap();
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(_) => true,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => false,
        Err((_, e)) => panic!("{e}"),
    }
}

#[test]
fn the_timing_lock_is_let_go_while_a_grade_waits_for_its_build() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("timing.lock");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (built, word) = tokio::sync::oneshot::channel::<bool>();
        let word: Word = Box::pin(async { word.await.unwrap() });
        let (gate, timing) = quiet_gate(word, lock.clone()).await.unwrap();
        let Gate { word, drawn } = gate;
        // Held while the sets are drawn, and let go once they are.
        assert!(!free(&lock));
        drawn();
        assert!(free(&lock));
        // Taken again for the reference once the build is done, and held
        // until the grade lets it go.
        built.send(true).unwrap();
        assert!(word.await);
        assert!(!free(&lock));
        assert!(matches!(*timing.lock().unwrap(), Some(Ok(_))));
        drop(timing);
        assert!(free(&lock));
    });
    // A build that failed: the word is no, and the lock stays free.
    runtime.block_on(async {
        let built: Word = Box::pin(async { false });
        let (gate, timing) = quiet_gate(built, lock.clone()).await.unwrap();
        drop(gate.drawn);
        assert!(!gate.word.await);
        assert!(free(&lock));
        assert!(timing.lock().unwrap().is_none());
    });
}

/// A verdict against NumPy whose submission's fastest call took 1 ms.
fn timed_verdict() -> Verdict {
    let mut verdict = Verdict::new(Status::Ok, "");
    verdict.timing = crate::verdict::Timing::from_samples(&[1_000_000]);
    verdict
}

#[test]
fn a_reference_call_the_node_slowed_is_named_and_a_calm_one_is_not() {
    let call = |ns, waited_ns| ReferenceCall { ns, waited_ns };
    let mut calm = timed_verdict();
    against_numpy(
        &mut calm,
        &[call(3_000_000, 40_000), call(2_000_000, 45_000)],
    );
    assert_eq!(calm.speedup, Some(2.0));
    assert_eq!(calm.stopped, "", "a wait of a few wake-ups was named");

    let mut slowed = timed_verdict();
    against_numpy(
        &mut slowed,
        &[call(3_000_000, 0), call(2_000_000, 1_500_000)],
    );
    assert_eq!(slowed.speedup, Some(2.0));
    assert!(
        slowed.stopped.contains("waited 1.500 ms for a CPU")
            && slowed.stopped.contains("reads high"),
        "{}",
        slowed.stopped
    );

    // Slowed, but not the call the speedup divides.
    let mut beside = timed_verdict();
    against_numpy(
        &mut beside,
        &[call(3_000_000, 2_000_000), call(2_000_000, 0)],
    );
    assert_eq!(beside.stopped, "");
}

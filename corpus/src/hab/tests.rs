//! Manifests written for these tests, in HPCAgent-Bench's format, one per
//! feature of the ABI derivation.

use std::collections::BTreeMap;

use super::*;

/// A corpus of `(path key, manifest, reference)` triples in a fresh root.
fn corpus(files: &[(&str, &str, &str)]) -> (tempfile::TempDir, Vec<Kernel>, Vec<Refusal>) {
    let root = tempfile::tempdir().unwrap();
    for (key, manifest, reference) in files {
        let path = root.path().join(format!("{key}.yaml"));
        let dir = path.parent().unwrap();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&path, manifest).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        std::fs::write(dir.join(format!("{stem}_numpy.py")), reference).unwrap();
    }
    let (kernels, refused) = load(root.path()).unwrap();
    (root, kernels, refused)
}

fn names(abi: &Abi) -> Vec<&str> {
    abi.args.iter().map(|a| a.name.as_str()).collect()
}

const PRESETS_N: &str = "parameters:\n  S: {N: 8}\n  M: {N: 64}\n  L: {N: 128}\n  XL: {N: 256}\n";

/// The project's own kernels in this format (tests/hab-corpus).
fn fixtures() -> Vec<Kernel> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/hab-corpus");
    let (kernels, refused) = load(&root).unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    kernels
}

fn fixture(key: &str) -> Kernel {
    find(&fixtures(), key).unwrap().clone()
}

#[test]
fn a_dense_kernel_sorts_pointers_then_scalars_and_symbols_bytewise() {
    let k = fixture("product");
    assert_eq!(
        k.key,
        "scientific_computing/dense_linear_algebra/product/product"
    );
    assert_eq!(
        (k.track.as_str(), k.level, k.kind.as_str()),
        ("scientific_computing", 1, "microkernel")
    );
    assert_eq!(k.presets, ["S", "M", "L", "XL"]);
    assert_eq!(k.abi.symbol, "product_fp64");
    // NI and NK are not parameters but shapes use them: they are passed too.
    assert_eq!(
        names(&k.abi),
        [
            "left",
            "out",
            "right",
            "NI",
            "NJ",
            "NK",
            "gain",
            "steps",
            "workspace",
            "workspace_size"
        ]
    );
    assert_eq!(
        k.abi.c_prototype(),
        "void product_fp64(const double *restrict left, double *restrict out, \
         const double *restrict right, int64_t NI, int64_t NJ, int64_t NK, double gain, \
         int64_t steps, uint8_t *restrict workspace, int64_t workspace_size)"
    );
}

#[test]
fn knobs_bools_and_pinned_dtypes_reach_the_abi_typed() {
    let abi = fixture("knobs").abi;
    assert_eq!(
        names(&abi),
        [
            "idx",
            "q",
            "w",
            "x",
            "z",
            "K",
            "N",
            "bias",
            "eps",
            "scale",
            "workspace",
            "workspace_size"
        ]
    );
    let ty = |name: &str| {
        let arg = abi.args.iter().find(|a| a.name == name).unwrap();
        c_type(&arg.dtype).unwrap()
    };
    assert_eq!(
        ["idx", "q", "w", "z", "K", "N", "bias", "eps", "scale"].map(ty),
        [
            "int32_t",
            "int8_t",
            "float",
            "double _Complex",
            "int32_t",
            "int64_t",
            "bool",
            "double",
            "double"
        ]
    );
    assert!(
        !abi.args.iter().any(|a| a.name == "extra"),
        "fuzzed-only symbols are not passed"
    );
}

#[test]
fn a_sparse_array_becomes_its_active_formats_buffers() {
    let abi = fixture("spprod").abi;
    assert_eq!(abi.symbol, "spprod_coo_fp64");
    assert_eq!(
        names(&abi),
        [
            "S_cols",
            "S_rows",
            "S_vals",
            "r",
            "v",
            "M",
            "N",
            "nnz",
            "workspace",
            "workspace_size"
        ]
    );
    assert!(
        abi.args
            .iter()
            .filter(|a| a.name.starts_with("S_"))
            .all(|a| a.constant)
    );
    assert!(!abi.args.iter().find(|a| a.name == "r").unwrap().constant);
}

#[test]
fn the_loop_tracks_defaults_apply() {
    let k = fixture("shift");
    assert_eq!(
        (k.track.as_str(), k.entry.as_str()),
        ("loop_level_reasoning", "shift")
    );
    assert_eq!(
        names(&k.abi),
        ["a", "b", "LEN", "workspace", "workspace_size"]
    );
}

#[test]
fn without_a_declared_shape_every_symbol_is_kept() {
    let manifest = "name: s\nkind: microkernel\nlevel: 1\n\
        parameters:\n  S: {N: 8, seed: 1}\n  M: {N: 8, seed: 1}\n  L: {N: 8, seed: 1}\n  XL: {N: 8, seed: 1}\n\
        init:\n  arrays:\n    a: (4,)\noutput_args: [a]\n";
    let (_root, kernels, refused) = corpus(&[("llr/s/s", manifest, "def s(a):\n    pass\n")]);
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(
        names(&kernels[0].abi),
        ["a", "N", "seed", "workspace", "workspace_size"]
    );
}

#[test]
fn the_entry_is_func_name_else_the_only_def_else_the_modules_namesake() {
    let manifest = format!(
        "name: e\nkind: microkernel\nlevel: 1\n{PRESETS_N}init:\n  arrays:\n    a: (N,)\noutput_args: [a]\n"
    );
    let two = "def helper(x):\n    pass\n\ndef entry(a, N):\n    pass\n";
    let (_root, kernels, refused) = corpus(&[
        ("llr/entry/entry", &manifest, two),
        ("llr/other/other", &manifest, two),
    ]);
    assert_eq!(kernels.len(), 1);
    assert_eq!(kernels[0].entry, "entry");
    assert_eq!(refused.len(), 1);
    assert!(refused[0].reason.contains("set func_name"), "{refused:?}");
}

#[test]
fn unknown_keys_are_refused_and_stems_resolve_when_unambiguous() {
    let good = format!(
        "name: g\nkind: microkernel\nlevel: 1\n{PRESETS_N}init:\n  arrays:\n    a: (N,)\noutput_args: [a]\n"
    );
    let bad = format!("{good}rtol: 1e-3\n");
    let reference = "def g(a, N):\n    pass\n";
    let (_root, kernels, refused) = corpus(&[
        ("llr/g/g", &good, reference),
        ("sci/x/g/g", &good, reference),
        ("llr/h/h", &bad, reference),
        ("llr/g/_private", &good, reference),
    ]);
    assert_eq!(kernels.len(), 2, "{kernels:?}");
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].reason.contains("unknown field `rtol`"),
        "{refused:?}"
    );
    assert!(
        find(&kernels, "g")
            .unwrap_err()
            .to_string()
            .contains("ambiguous")
    );
    assert_eq!(find(&kernels, "sci/x/g/g").unwrap().key, "sci/x/g/g");
    assert_eq!(find(&kernels, "llr/g/g.yaml").unwrap().key, "llr/g/g");
}

#[test]
fn a_presets_bytes_count_every_array_the_call_passes() {
    // 40×60 + 40×50 + 50×60 doubles.
    assert_eq!(fixture("product").bytes("S").unwrap(), 7400 * 8);
    // Three COO buffers of nnz, and two vectors, in 8-byte elements.
    assert_eq!(
        fixture("spprod").bytes("S").unwrap(),
        (3 * 256 + 2 * 64) * 8
    );
    // x f64, idx i32, w f32, z c128, q int4 in bytes (N × 2).
    assert_eq!(
        fixture("knobs").bytes("S").unwrap(),
        8 * (8 + 4 + 4 + 16 + 2)
    );
}

#[test]
fn hints_apply_from_the_root_down_with_the_levels_and_the_subtrack() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/hab-corpus");
    let spprod = fixture("spprod");
    let relative: Vec<String> = spprod
        .hints(&root)
        .iter()
        .map(|h| h.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert_eq!(
        relative,
        [
            "hints.j2",
            "scientific_computing/hints.j2",
            "scientific_computing/hints_lvl3.j2",
            "subtracks/sparse/hints.j2",
            "scientific_computing/sparse_linear_algebra/spprod/hints.j2",
        ]
    );
    let shift = fixture("shift");
    assert_eq!(shift.hints(&root), [root.join("hints.j2")]);
    assert_eq!(
        [
            level_budget_seconds(shift.level),
            level_budget_seconds(2),
            level_budget_seconds(spprod.level)
        ],
        [180, 300, 600]
    );
}

#[test]
fn what_a_kernel_needs_beyond_numpy_is_named() {
    assert!(fixture("product").needs().is_empty(), "numpy alone");
    assert!(
        fixture("energy").needs().is_empty(),
        "the run's float types are the judge's to give"
    );
    let manifest = format!(
        "name: n\nkind: microkernel\nlevel: 1\n{PRESETS_N}init:\n  arrays:\n    a: (N,)\noutput_args: [a]\n"
    );
    let reference = "import math\nimport numpy as np\nfrom scipy.sparse import csr_matrix\nimport numba, typing\n\ndef n(a, N):\n    pass\n";
    let (_root, kernels, _) = corpus(&[("llr/n/n", &manifest, reference)]);
    assert_eq!(
        kernels[0].needs().into_iter().collect::<Vec<_>>(),
        ["numba", "scipy.sparse"]
    );
}

/// Draws of `key`'s symbols at `preset` from a fixed stream, unlike the
/// public case at `public`.
fn draws_of(kernel: &Kernel, preset: &str, public: &str) -> Vec<Symbols> {
    let public = kernel.preset_symbols(public).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut unit = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    kernel.size_draws(preset, Some(&public), &mut unit).unwrap()
}

fn int(symbols: &Symbols, name: &str) -> i64 {
    symbols
        .get(name)
        .and_then(serde_norway::Value::as_i64)
        .unwrap()
}

#[test]
fn a_draw_scales_each_size_within_the_manifest_s_relations_and_constraints() {
    let manifest = "name: d\nkind: microkernel\nlevel: 1\n\
        parameters:\n\
        \x20 S: {N: 40, M: 40, B: 8, T: 4, C: 100, R: 20, V: 100}\n\
        \x20 M: {N: 400, M: 400, B: 8, T: 8, C: 200, R: 40, V: 200}\n\
        \x20 L: {N: 800, M: 800, B: 8, T: 16, C: 400, R: 80, V: 400}\n\
        \x20 XL: {N: 1600, M: 1600, B: 8, T: 32, C: 800, R: 160, V: 800}\n\
        \x20 fuzzed: {C: {derive: 'R * 5'}, V: [90, 104]}\n\
        config:\n  G: {value: 4}\n\
        constraints: ['N % B == 0', 'T * 2 <= N']\n\
        init:\n  arrays:\n    a: (N, M)\n    b: (C - V + 1,)\n    out: (T,)\noutput_args: [out]\n";
    let reference = "def d(a, b, out, N, M, B, T, C, R, V, G):\n    pass\n";
    let (_root, kernels, refused) = corpus(&[("sci/d/d", manifest, reference)]);
    assert!(refused.is_empty(), "{refused:?}");
    let kernel = &kernels[0];
    let draws = draws_of(kernel, "S", "S");
    assert_eq!(draws.len(), 3, "{draws:?}");
    let public = kernel.preset_symbols("S").unwrap();
    for drawn in &draws {
        assert_ne!(drawn, &public);
        let (n, m) = (int(drawn, "N"), int(drawn, "M"));
        // Equal at S, drawn as one; B (constant over presets) divides N.
        assert_eq!(n, m, "{drawn:?}");
        assert!([32, 40, 48].contains(&n), "{drawn:?}");
        assert_eq!(int(drawn, "B"), 8);
        // A knob is not a size.
        assert_eq!(int(drawn, "G"), 4);
        // Derived from the drawn R; V within its range, C - V + 1 >= 1.
        assert_eq!(int(drawn, "C"), 5 * int(drawn, "R"), "{drawn:?}");
        assert!((90..=104).contains(&int(drawn, "V")), "{drawn:?}");
        assert!(int(drawn, "C") >= int(drawn, "V"), "{drawn:?}");
        assert!(2 * int(drawn, "T") <= n);
    }
    // Drawn at M, the public case at S: M's sizes are unlike it already,
    // and the draws still scale them.
    let at_m = draws_of(kernel, "M", "S");
    assert!(
        at_m.iter()
            .all(|d| (336..=464).contains(&int(d, "N")) && int(d, "N") % 8 == 0),
        "{at_m:?}"
    );
}

#[test]
fn sizes_too_small_to_scale_move_by_one_and_fixed_ones_not_at_all() {
    let manifest = |sizes: [(i64, i64); 4]| {
        let presets: String = ["S", "M", "L", "XL"]
            .iter()
            .zip(sizes)
            .map(|(p, (n, k))| format!("  {p}: {{N: {n}, K: {k}}}\n"))
            .collect();
        format!(
            "name: t\nkind: microkernel\nlevel: 1\nparameters:\n{presets}\
             init:\n  arrays:\n    a: (N, K)\noutput_args: [a]\n"
        )
    };
    let reference = "def t(a, N, K):\n    pass\n";
    let small = manifest([(2, 5), (3, 5), (4, 5), (5, 5)]);
    let fixed = manifest([(7, 5), (7, 5), (7, 5), (7, 5)]);
    let (_root, kernels, _) = corpus(&[
        ("llr/t/t", small.as_str(), reference),
        ("llr/u/u", fixed.as_str(), reference),
    ]);
    let small = find(&kernels, "t").unwrap();
    let draws = draws_of(small, "S", "S");
    // 2 × 0.85–1.15 rounds to 2; 1 is no size.
    let ns: Vec<i64> = draws.iter().map(|d| int(d, "N")).collect();
    assert_eq!(ns, [3], "{draws:?}");
    assert!(draws.iter().all(|d| int(d, "K") == 5));
    assert!(draws_of(find(&kernels, "u").unwrap(), "S", "S").is_empty());
}

#[test]
fn a_generator_varies_its_values_with_its_seed_its_seed_argument_or_not_at_all() {
    assert_eq!(fixture("product").variation(), Variation::Seeded);
    assert_eq!(
        fixture("spprod").variation(),
        Variation::Seeded,
        "it takes rng"
    );
    assert_eq!(fixture("formula").variation(), Variation::Transform);
    let manifest = format!(
        "name: s\nkind: microkernel\nlevel: 1\n{PRESETS_N}\
         config:\n  draw: {{value: 7, selects: seed}}\n\
         init:\n  func_name: initialize\n  input_args: [N, draw]\n  output_args: [a]\n\
         \x20 arrays:\n    a: (N,)\noutput_args: [a]\n"
    );
    let (root, kernels, refused) = corpus(&[("sci/s/s", &manifest, "def s(a):\n    pass\n")]);
    assert!(refused.is_empty(), "{refused:?}");
    std::fs::write(
        root.path().join("sci/s/s.py"),
        "import numpy as np\n\ndef initialize(N, draw, datatype=np.float64):\n    \
         return np.random.default_rng(draw).random(N)\n",
    )
    .unwrap();
    let kernel = &kernels[0];
    assert_eq!(kernel.variation(), Variation::SeedArgument("draw".into()));
    let symbols = kernel.preset_symbols("S").unwrap();
    let public = kernel
        .input_plan(root.path(), symbols.clone(), 42, "fp64")
        .unwrap();
    let varied = kernel
        .variant_plan(root.path(), vec![symbols], 42, "fp64")
        .unwrap();
    assert_eq!(int(&public.symbols, "draw"), 7);
    assert_ne!(int(&varied.symbols, "draw"), 7);
    assert_eq!(varied.vary, None);
    let formula = fixture("formula");
    let symbols = formula.preset_symbols("S").unwrap();
    let varied = formula
        .variant_plan(Path::new("/"), vec![symbols], 9, "fp64")
        .unwrap();
    assert_eq!(varied.vary, Some(9));
}

#[test]
fn pairs_may_draw_a_declarative_task_s_arrays_but_not_an_initializer_s() {
    let shapes = |pairs: &[(&str, &[i64])]| -> BTreeMap<String, Vec<i64>> {
        pairs
            .iter()
            .map(|(n, s)| (n.to_string(), s.to_vec()))
            .collect()
    };
    let product = fixture("product");
    let drawn = product
        .fresh_draws(&shapes(&[
            ("left", &[4, 5]),
            ("out", &[4, 6]),
            ("right", &[5, 6]),
        ]))
        .unwrap();
    assert_eq!(
        drawn.values().collect::<Vec<_>>(),
        [&crate::Init::Uniform; 3]
    );
    // A one-dimensional integer array is a permutation, which a draw is not.
    let knobs = fixture("knobs");
    let knob_shapes = shapes(&[
        ("idx", &[8]),
        ("q", &[8, 2]),
        ("w", &[8]),
        ("x", &[8]),
        ("z", &[8]),
    ]);
    assert_eq!(knobs.fresh_draws(&knob_shapes), None);
    assert_eq!(fixture("formula").fresh_draws(&BTreeMap::new()), None);
}

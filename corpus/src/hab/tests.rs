//! Manifests written for these tests, in HPCAgent-Bench's format, one per
//! feature of the ABI derivation.

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

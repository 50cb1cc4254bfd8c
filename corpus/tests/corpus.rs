//! The committed corpus: every manifest valid, the tracks covered, and every
//! preset within its memory ceiling and growing from S to XL.

use std::collections::BTreeSet;
use std::path::Path;

use hpcagent_corpus::{Corpus, Precision, Preset, abi};

fn corpus() -> Corpus {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benchmarks");
    Corpus::load(&root).unwrap_or_else(|errors| {
        panic!(
            "{}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

#[test]
fn the_corpus_spans_the_tracks() {
    let corpus = corpus();
    assert!(
        corpus.kernels.len() >= 12,
        "{} kernels",
        corpus.kernels.len()
    );
    let tracks: BTreeSet<&str> = corpus.kernels.iter().map(|k| k.track.as_str()).collect();
    for track in [
        "dense_linear_algebra",
        "stencils",
        "tsvc",
        "reductions",
        "ml",
        "integer",
    ] {
        assert!(tracks.contains(track), "no {track} kernel");
    }
    assert!(
        corpus
            .kernels
            .iter()
            .any(|k| k.precisions == [Precision::I64]),
        "an integer kernel compares exactly"
    );
}

#[test]
fn presets_fit_their_memory_ceilings_and_grow() {
    for kernel in &corpus().kernels {
        assert_eq!(
            kernel.preset_problems(),
            Vec::<String>::new(),
            "{}",
            kernel.name
        );
        let m = kernel
            .bytes(kernel.sizes(Preset::M), Precision::Fp64)
            .unwrap_or(0);
        assert!(m <= 4 << 30, "{}: M holds {m} bytes", kernel.name);
    }
}

#[test]
fn the_gemm_prototype_is_the_seeds() {
    let corpus = corpus();
    let gemm = corpus.find("gemm").unwrap();
    assert_eq!(
        abi::c_prototype(gemm, Precision::Fp64),
        "void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C, \
         const int64_t NI, const int64_t NJ, const int64_t NK, const double alpha, const double beta, \
         uint8_t *restrict workspace, const int64_t workspace_size)"
    );
    assert_eq!(
        corpus.find("dense_linear_algebra/gemm").unwrap().name,
        "gemm"
    );
    assert_eq!(
        corpus.find("jacobi-2d").unwrap().symbol(Precision::Fp32),
        "jacobi_2d_fp32"
    );
}

//! Which compiler and linker tokens an agent may add, and why others are refused.
//!
//! The judge's own flags are fixed (`-O3 -march=native -fPIC`, the dialect,
//! OpenMP). An agent may add include and library paths inside the shared
//! mount, macros, libraries that exist, and tuning flags that do not change
//! floating-point semantics. Everything else is refused with the reason, so
//! the agent learns the rule instead of guessing.

use std::path::Path;

/// Tuning flags accepted as given (or with `=value` where they end in `=`).
const TUNING: &[&str] = &[
    "-funroll-loops",
    "-funroll-all-loops",
    "-fno-unroll-loops",
    "-fpeel-loops",
    "-ftree-vectorize",
    "-fno-tree-vectorize",
    "-ftree-loop-vectorize",
    "-ftree-slp-vectorize",
    "-fvect-cost-model=",
    "-fsimd-cost-model=",
    "-fprefetch-loop-arrays",
    "-fopenmp",
    "-fopenmp-simd",
    "-floop-interchange",
    "-floop-unroll-and-jam",
    "-fipa-pta",
    "-fstrict-aliasing",
    "-fomit-frame-pointer",
    "-falign-loops=",
    "-falign-functions=",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fno-semantic-interposition",
    "-fsplit-loops",
    "-fversion-loops-for-strides",
];

/// Floating-point flags that change results: refused by name.
const FAST_MATH: &[&str] = &[
    "-ffast-math",
    "-Ofast",
    "-funsafe-math-optimizations",
    "-fassociative-math",
    "-freciprocal-math",
    "-ffinite-math-only",
    "-fno-signed-zeros",
    "-fcx-limited-range",
    "-fcx-fortran-rules",
    "-fexcess-precision",
    "-frounding-math",
    "--use_fast_math",
    "-use_fast_math",
    "-ffp-contract=fast",
];

/// Libraries any build may link without the shared mount.
pub const SYSTEM_LIBRARIES: &[&str] = &[
    "m",
    "pthread",
    "gomp",
    "rt",
    "dl",
    "stdc++",
    "gfortran",
    "cudart",
    "cublas",
    "cublasLt",
    "cusparse",
    "cufft",
    "curand",
    "amdhip64",
    "hipblas",
    "rocblas",
    "hipsparse",
    "hipfft",
    "rocrand",
];

/// A one-line description of the allow-list, for `Task`.
pub fn describe() -> String {
    format!(
        "-D<NAME>[=value]; -I<dir> and -L<dir> inside the shared mount; -l<name> for a library in the \
         shared mount or one of: {}; tuning flags: {}. The optimization level, target, dialect and \
         floating-point semantics are fixed (no -O*, -m*, -std=, fast-math family).",
        SYSTEM_LIBRARIES.join(", "),
        TUNING
            .iter()
            .map(|f| if f.ends_with('=') {
                format!("{f}…")
            } else {
                f.to_string()
            })
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Checks every agent token; the first refusal says which and why.
pub fn check(
    tokens: &[String],
    shared: Option<&Path>,
    shared_libraries: &[String],
) -> Result<(), String> {
    for token in tokens {
        check_one(token, shared, shared_libraries)
            .map_err(|why| format!("flag {token:?} refused: {why}"))?;
    }
    Ok(())
}

fn check_one(
    token: &str,
    shared: Option<&Path>,
    shared_libraries: &[String],
) -> Result<(), String> {
    if let Some(fast) = FAST_MATH
        .iter()
        .find(|f| token == **f || token.starts_with(&format!("{f}=")))
    {
        return Err(format!(
            "{fast} changes floating-point results; the judge compares against exact semantics"
        ));
    }
    if TUNING
        .iter()
        .any(|f| token == *f || (f.ends_with('=') && token.starts_with(f) && token.len() > f.len()))
    {
        return Ok(());
    }
    if let Some(def) = token.strip_prefix("-D") {
        let name = def.split('=').next().unwrap_or("");
        let ok = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        return if ok {
            Ok(())
        } else {
            Err("-D needs a macro name".into())
        };
    }
    if let Some(dir) = token
        .strip_prefix("-I")
        .or_else(|| token.strip_prefix("-L"))
    {
        return inside_shared(dir, shared);
    }
    if let Some(lib) = token.strip_prefix("-l") {
        if lib.is_empty() || lib.starts_with(':') || lib.contains('/') {
            return Err("-l takes a library name, not a file".into());
        }
        if SYSTEM_LIBRARIES.contains(&lib) || shared_libraries.iter().any(|l| l == lib) {
            return Ok(());
        }
        return Err(format!(
            "library {lib:?} is not installed in the shared mount (installed: {}) nor a system library",
            if shared_libraries.is_empty() {
                "none".to_string()
            } else {
                shared_libraries.join(", ")
            }
        ));
    }
    Err(match token {
        t if t.starts_with("-O") => "the optimization level is fixed (-O3)".into(),
        t if t.starts_with("-m") || t.starts_with("-arch") || t.starts_with("--offload-arch") => {
            "target flags are fixed (-march=native)".into()
        }
        t if t.starts_with("-std=") => "the language dialect is fixed".into(),
        t if t.starts_with("-Wl,") || t.starts_with("-Xlinker") || t.starts_with("-X") => {
            "linker and pass-through options are not allowed".into()
        }
        "-o" | "-c" | "-S" | "-E" | "-shared" | "-static" | "-x" => {
            "the judge decides what is built".into()
        }
        t if t.starts_with("-fplugin")
            || t.starts_with("-specs")
            || t.starts_with("-B")
            || t.starts_with("--sysroot")
            || t.starts_with("-include")
            || t.starts_with("-imacros")
            || t.starts_with("-wrapper") =>
        {
            "it can run or inject code outside the submission".into()
        }
        _ => "not in the allow-list (see the task's allowed flags)".into(),
    })
}

fn inside_shared(dir: &str, shared: Option<&Path>) -> Result<(), String> {
    let Some(shared) = shared else {
        return Err("no shared mount is configured on this judge".into());
    };
    let resolved = std::fs::canonicalize(dir).map_err(|_| format!("{dir} does not exist"))?;
    let shared = std::fs::canonicalize(shared).unwrap_or_else(|_| shared.to_path_buf());
    if resolved.starts_with(&shared) {
        Ok(())
    } else {
        Err(format!(
            "{dir} is outside the shared mount {}",
            shared.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(token: &str) -> Result<(), String> {
        check(&[token.to_string()], None, &["myblas".into()])
    }

    #[test]
    fn allows_tuning_macros_and_known_libraries() {
        for ok in [
            "-funroll-loops",
            "-fvect-cost-model=unlimited",
            "-DBLOCK=64",
            "-D_GNU_SOURCE",
            "-lm",
            "-lmyblas",
            "-fopenmp",
        ] {
            assert_eq!(verdict(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_with_reasons() {
        let why = |t: &str| verdict(t).unwrap_err();
        assert!(why("-ffast-math").contains("changes floating-point results"));
        assert!(why("-Ofast").contains("changes floating-point results"));
        assert!(why("-O2").contains("fixed (-O3)"));
        assert!(why("-march=skylake").contains("target flags are fixed"));
        assert!(why("-Wl,-rpath,/tmp").contains("linker"));
        assert!(why("-lfoo").contains("not installed in the shared mount (installed: myblas)"));
        assert!(why("-l:libc.so").contains("library name, not a file"));
        assert!(why("-I/usr/include").contains("no shared mount"));
        assert!(why("-fplugin=evil.so").contains("inject code"));
        assert!(why("-fno-signed-zeros").contains("changes floating-point"));
        assert!(why("--frobnicate").contains("allow-list"));
    }
}

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

/// A flag the judge refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flag {token:?} refused: {why}")]
pub struct Refused {
    pub token: String,
    pub why: Why,
}

/// Why a flag is refused; the words are the agent's to read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    #[error("{0} changes floating-point results; the judge compares against exact semantics")]
    FastMath(&'static str),
    #[error("-D needs a macro name")]
    MacroName,
    #[error("-l takes a library name, not a file")]
    LibraryFile,
    #[error(
        "library {lib:?} is not installed in the shared mount (installed: {installed}) nor a system library"
    )]
    NotInstalled { lib: String, installed: String },
    #[error("the optimization level is fixed (-O3)")]
    Optimization,
    #[error("target flags are fixed (-march=native)")]
    Target,
    #[error("the language dialect is fixed")]
    Dialect,
    #[error("linker and pass-through options are not allowed")]
    Linker,
    #[error("the judge decides what is built")]
    Output,
    #[error("it can run or inject code outside the submission")]
    Injection,
    #[error("not in the allow-list (see the task's allowed flags)")]
    NotAllowed,
    #[error("no shared mount is configured on this judge")]
    NoSharedMount,
    #[error("{0} does not exist")]
    NoDir(String),
    #[error("{dir} is outside the shared mount {shared}")]
    OutsideShared { dir: String, shared: String },
}

/// Checks every agent token; the first refusal says which and why.
pub fn check(
    tokens: &[String],
    shared: Option<&Path>,
    shared_libraries: &[String],
) -> Result<(), Refused> {
    for token in tokens {
        check_one(token, shared, shared_libraries).map_err(|why| Refused {
            token: token.clone(),
            why,
        })?;
    }
    Ok(())
}

/// Checks an option a source sets for itself, as the flag it stands for
/// (see [`super::pragmas`]).
pub(crate) fn check_option(token: &str) -> Result<(), Why> {
    check_one(token, None, &[])
}

fn check_one(token: &str, shared: Option<&Path>, shared_libraries: &[String]) -> Result<(), Why> {
    if let Some(fast) = FAST_MATH
        .iter()
        .find(|f| token == **f || token.starts_with(&format!("{f}=")))
    {
        return Err(Why::FastMath(fast));
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
        return if ok { Ok(()) } else { Err(Why::MacroName) };
    }
    if let Some(dir) = token
        .strip_prefix("-I")
        .or_else(|| token.strip_prefix("-L"))
    {
        return inside_shared(dir, shared);
    }
    if let Some(lib) = token.strip_prefix("-l") {
        if lib.is_empty() || lib.starts_with(':') || lib.contains('/') {
            return Err(Why::LibraryFile);
        }
        if SYSTEM_LIBRARIES.contains(&lib) || shared_libraries.iter().any(|l| l == lib) {
            return Ok(());
        }
        return Err(Why::NotInstalled {
            lib: lib.to_string(),
            installed: if shared_libraries.is_empty() {
                "none".to_string()
            } else {
                shared_libraries.join(", ")
            },
        });
    }
    Err(match token {
        t if t.starts_with("-O") => Why::Optimization,
        t if t.starts_with("-m") || t.starts_with("-arch") || t.starts_with("--offload-arch") => {
            Why::Target
        }
        t if t.starts_with("-std=") => Why::Dialect,
        t if t.starts_with("-Wl,") || t.starts_with("-Xlinker") || t.starts_with("-X") => {
            Why::Linker
        }
        "-o" | "-c" | "-S" | "-E" | "-shared" | "-static" | "-x" => Why::Output,
        t if t.starts_with("-fplugin")
            || t.starts_with("-specs")
            || t.starts_with("-B")
            || t.starts_with("--sysroot")
            || t.starts_with("-include")
            || t.starts_with("-imacros")
            || t.starts_with("-wrapper") =>
        {
            Why::Injection
        }
        _ => Why::NotAllowed,
    })
}

fn inside_shared(dir: &str, shared: Option<&Path>) -> Result<(), Why> {
    let Some(shared) = shared else {
        return Err(Why::NoSharedMount);
    };
    let resolved = std::fs::canonicalize(dir).map_err(|_| Why::NoDir(dir.to_string()))?;
    let shared = std::fs::canonicalize(shared).unwrap_or_else(|_| shared.to_path_buf());
    if resolved.starts_with(&shared) {
        Ok(())
    } else {
        Err(Why::OutsideShared {
            dir: dir.to_string(),
            shared: shared.display().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(token: &str) -> Result<(), Refused> {
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
        let why = |t: &str| verdict(t).unwrap_err().to_string();
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

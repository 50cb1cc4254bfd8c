//! The languages a submission may be written in.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    C,
    Cpp,
    Fortran,
    Cuda,
    Hip,
}

impl Language {
    pub const ALL: [Language; 5] = [
        Language::C,
        Language::Cpp,
        Language::Fortran,
        Language::Cuda,
        Language::Hip,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Fortran => "fortran",
            Language::Cuda => "cuda",
            Language::Hip => "hip",
        }
    }

    /// File extension the compiler recognises the language by.
    pub fn extension(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Fortran => "f90",
            Language::Cuda => "cu",
            Language::Hip => "hip.cpp",
        }
    }

    /// Runs on a GPU: buffers live in device memory.
    pub fn is_gpu(self) -> bool {
        matches!(self, Language::Cuda | Language::Hip)
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Language {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let alias = match s.as_str() {
            "c++" | "cxx" => "cpp",
            "f90" | "f" => "fortran",
            other => other,
        };
        Language::ALL
            .into_iter()
            .find(|l| l.as_str() == alias)
            .ok_or_else(|| format!("unknown language {s:?} (c, cpp, fortran, cuda, hip)"))
    }
}

//! The value types configuration keys hold, and how each is parsed from text.
//!
//! Every layer (defaults, site profile, env file, `HPCAGENT_*` variables, CLI
//! flags) supplies text; a key's type parses it and explains a refusal in words
//! a researcher can act on.

use std::fmt;
use std::path::PathBuf;

use hpcagent_corpus::Language;
use hpcagent_corpus::Preset;
use serde::{Serialize, Serializer};

/// A type a configuration key can hold.
pub trait ConfigValue: Sized {
    /// What the docs say the key accepts.
    const SYNTAX: &'static str;
    fn parse(raw: &str) -> Result<Self, String>;

    /// The text that means this value wherever it is read again (for
    /// `env.resolved`, which a batch job reads from another directory).
    fn canonical(&self, raw: &str) -> String {
        raw.to_string()
    }
}

impl ConfigValue for u32 {
    const SYNTAX: &'static str = "whole number ≥ 0";
    fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        match raw.parse::<i64>() {
            Ok(n) if n < 0 => Err(format!("{n} is negative; a count must be 0 or more")),
            Ok(n) => u32::try_from(n).map_err(|_| format!("{n} is too large")),
            Err(_) => Err(format!("{raw:?} is not a whole number")),
        }
    }
}

impl ConfigValue for bool {
    const SYNTAX: &'static str = "true | false (also 1/0, yes/no)";
    fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            other => Err(format!("{other:?} is not true or false")),
        }
    }
}

impl ConfigValue for String {
    const SYNTAX: &'static str = "text";
    fn parse(raw: &str) -> Result<Self, String> {
        Ok(raw.to_string())
    }
}

/// Unset when the text is empty: `ACCOUNT=` means "no account".
impl<T: ConfigValue> ConfigValue for Option<T> {
    const SYNTAX: &'static str = T::SYNTAX;
    fn parse(raw: &str) -> Result<Self, String> {
        if raw.trim().is_empty() {
            Ok(None)
        } else {
            T::parse(raw).map(Some)
        }
    }

    fn canonical(&self, raw: &str) -> String {
        self.as_ref().map_or_else(String::new, |v| v.canonical(raw))
    }
}

/// A TCP port a role listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Port(pub u16);

impl ConfigValue for Port {
    const SYNTAX: &'static str = "TCP port 1-65535";
    fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().parse::<u32>() {
            Ok(p @ 1..=65535) => Ok(Port(p as u16)),
            _ => Err(format!("{raw:?} is not a TCP port (1-65535)")),
        }
    }
}

/// Command-line arguments, split by shell-words rules so quoting survives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Args(pub Vec<String>);

impl ConfigValue for Args {
    const SYNTAX: &'static str = "arguments, split like a shell would (quotes kept together)";
    fn parse(raw: &str) -> Result<Self, String> {
        shell_words::split(raw)
            .map(Args)
            .map_err(|e| format!("cannot split into arguments: {e}"))
    }
}

/// `NAME=value` assignments for a step's environment, shell-words quoted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Assignments(pub Vec<(String, String)>);

impl ConfigValue for Assignments {
    const SYNTAX: &'static str = "NAME=value words, shell-quoted";
    fn parse(raw: &str) -> Result<Self, String> {
        let words = Args::parse(raw)?.0;
        words
            .into_iter()
            .map(|word| match word.split_once('=') {
                Some((name, value)) if !name.is_empty() => {
                    Ok((name.to_string(), value.to_string()))
                }
                _ => Err(format!("{word:?} is not NAME=value")),
            })
            .collect::<Result<_, _>>()
            .map(Assignments)
    }
}

/// A comma- or space-separated list of names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct List(pub Vec<String>);

impl ConfigValue for List {
    const SYNTAX: &'static str = "comma- or space-separated names";
    fn parse(raw: &str) -> Result<Self, String> {
        Ok(List(
            raw.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        ))
    }
}

/// A filesystem path, made absolute against the current directory so that a
/// batch job started elsewhere sees the same place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AbsPath(pub PathBuf);

impl ConfigValue for AbsPath {
    const SYNTAX: &'static str = "path (relative paths are taken from the current directory)";
    fn parse(raw: &str) -> Result<Self, String> {
        if raw.trim().is_empty() {
            return Err("empty path".into());
        }
        std::path::absolute(raw.trim())
            .map(AbsPath)
            .map_err(|e| format!("cannot make {raw:?} absolute: {e}"))
    }

    fn canonical(&self, _raw: &str) -> String {
        self.0.display().to_string()
    }
}

/// Declares a closed set of names as an enum with parsing and display.
macro_rules! choice {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl ConfigValue for $name {
            const SYNTAX: &'static str = concat!("one of: " $(, $text, " ")+);
            fn parse(raw: &str) -> Result<Self, String> {
                let raw = raw.trim();
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(raw))
                    .ok_or_else(|| format!(
                        "{raw:?} is not one of: {}",
                        Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
                    ))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

choice! {
    /// The machine a campaign runs on; selects a site profile.
    Site { Local = "local", Alps = "alps", Beverin = "beverin" }
}

choice! {
    /// What agents do with a task.
    Policy { Builtin = "builtin", Command = "command", Baseline = "baseline" }
}

choice! {
    /// Whether each model turn must call a tool.
    ToolChoice { Auto = "auto", Required = "required" }
}

choice! {
    /// Where agents' web searches go.
    SearchProvider { Off = "off", Searxng = "searxng", Brave = "brave" }
}

choice! {
    /// How much isolation judges and agent CLIs insist on.
    Isolation { Strict = "strict", Weak = "weak" }
}

/// A percentage above 0 and at most 50.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percent(pub f64);

impl ConfigValue for Percent {
    const SYNTAX: &'static str = "number above 0 and at most 50 (percent)";
    fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().trim_end_matches('%').parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 50.0 => Ok(Percent(x)),
            Ok(x) => Err(format!("{x} is not above 0 and at most 50")),
            Err(_) => Err(format!("{:?} is not a number", raw.trim())),
        }
    }
}

/// A share of a whole, in percent: from 0 to 100.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Share(pub f64);

impl ConfigValue for Share {
    const SYNTAX: &'static str = "number from 0 to 100 (percent)";
    fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().trim_end_matches('%').parse::<f64>() {
            Ok(x) if (0.0..=100.0).contains(&x) => Ok(Share(x)),
            Ok(x) => Err(format!("{x} is outside 0 to 100")),
            Err(_) => Err(format!("{:?} is not a number", raw.trim())),
        }
    }
}

/// A number from 0 to 2 (a sampling temperature).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratio(pub f32);

impl ConfigValue for Ratio {
    const SYNTAX: &'static str = "number from 0 to 2";
    fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().parse::<f32>() {
            Ok(x) if (0.0..=2.0).contains(&x) => Ok(Ratio(x)),
            Ok(x) => Err(format!("{x} is outside 0 to 2")),
            Err(_) => Err(format!("{:?} is not a number", raw.trim())),
        }
    }
}

choice! {
    /// The floating-point precision of a campaign's tasks.
    Precision { Fp64 = "fp64", Fp32 = "fp32" }
}

/// The corpus's presets and languages are the judge's own types.
impl ConfigValue for Preset {
    const SYNTAX: &'static str = "one of: S M L XL";
    fn parse(raw: &str) -> Result<Self, String> {
        raw.parse()
    }
}

impl ConfigValue for Language {
    const SYNTAX: &'static str = "one of: c cpp fortran cuda hip";
    fn parse(raw: &str) -> Result<Self, String> {
        raw.parse()
    }
}

/// A non-empty list of distinct languages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Languages(pub Vec<Language>);

impl ConfigValue for Languages {
    const SYNTAX: &'static str = "comma-separated: c, cpp, fortran, cuda, hip";
    fn parse(raw: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for name in List::parse(raw)?.0 {
            let language = Language::parse(&name)?;
            if !out.contains(&language) {
                out.push(language);
            }
        }
        if out.is_empty() {
            return Err("at least one language is needed".into());
        }
        Ok(Languages(out))
    }
}

/// A Slurm time limit, kept as written (Slurm parses it again) and in seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimeLimit {
    pub text: String,
    pub seconds: u64,
}

impl ConfigValue for TimeLimit {
    const SYNTAX: &'static str = "Slurm time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS";
    fn parse(raw: &str) -> Result<Self, String> {
        let text = raw.trim();
        let bad = || format!("{text:?} is not a Slurm time limit ({})", Self::SYNTAX);
        let number = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let (days, clock) = match text.split_once('-') {
            Some((d, rest)) => (Some(number(d)?), rest),
            None => (None, text),
        };
        let parts = clock
            .split(':')
            .map(number)
            .collect::<Result<Vec<_>, _>>()?;
        let seconds = match (days, parts.as_slice()) {
            (None, [m]) => m * 60,
            (None, [m, s]) => m * 60 + s,
            (None, [h, m, s]) => h * 3600 + m * 60 + s,
            (Some(d), [h]) => d * 86400 + h * 3600,
            (Some(d), [h, m]) => d * 86400 + h * 3600 + m * 60,
            (Some(d), [h, m, s]) => d * 86400 + h * 3600 + m * 60 + s,
            _ => return Err(bad()),
        };
        if seconds == 0 {
            return Err(format!("{text:?} is a zero time limit"));
        }
        Ok(TimeLimit {
            text: text.to_string(),
            seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_refuse_negatives_and_words() {
        assert_eq!(u32::parse(" 4 "), Ok(4));
        assert_eq!(
            u32::parse("-1").unwrap_err(),
            "-1 is negative; a count must be 0 or more"
        );
        assert_eq!(
            u32::parse("four").unwrap_err(),
            "\"four\" is not a whole number"
        );
    }

    #[test]
    fn time_limits_in_every_slurm_form() {
        let secs = |s| TimeLimit::parse(s).map(|t| t.seconds);
        assert_eq!(secs("30"), Ok(1800));
        assert_eq!(secs("30:15"), Ok(1815));
        assert_eq!(secs("02:00:00"), Ok(7200));
        assert_eq!(secs("1-12"), Ok(129_600));
        assert_eq!(secs("1-00:30"), Ok(88_200));
        assert_eq!(secs("1-00:00:01"), Ok(86_401));
        assert!(secs("1:2:3:4").is_err());
        assert!(secs("soon").is_err());
        assert!(secs("0").is_err());
    }

    #[test]
    fn assignments_and_choices() {
        let a = Assignments::parse(r#"NCCL_NET="AWS Libfabric" NCCL_PROTO=^LL128"#).unwrap();
        assert_eq!(a.0[0], ("NCCL_NET".into(), "AWS Libfabric".into()));
        assert!(Assignments::parse("JUSTAWORD").is_err());
        assert_eq!(Site::parse("Alps"), Ok(Site::Alps));
        assert_eq!(
            Site::parse("lumi").unwrap_err(),
            "\"lumi\" is not one of: local, alps, beverin"
        );
        assert_eq!(
            Languages::parse("c, fortran,c").unwrap().0,
            [Language::C, Language::Fortran]
        );
    }
}

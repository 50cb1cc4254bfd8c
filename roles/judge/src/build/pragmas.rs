//! Compiler options a source sets for itself, held to the flags' policy.
//!
//! `#pragma GCC optimize("fast-math")`, `__attribute__((optimize(...)))`
//! (`[[gnu::optimize]]` too) and clang's `#pragma clang fp reassociate(on)`
//! or `#pragma float_control(precise, off)` change what the fixed flags fix:
//! the optimization level and floating-point semantics. Each option they
//! set is checked as the flag it stands for ([`super::flags`]), so a
//! source may set what an agent may add on the command line (tuning flags
//! such as `unroll-loops`) and nothing else, and a refusal names the line.
//!
//! The text checked is the translation unit as the compiler's preprocessor
//! gives it (`-E`): a pragma made by a macro (`_Pragma`) or an attribute
//! behind one is there in full. Lines of system headers (line marker flag
//! 3) are left out: the compiler's own headers set options of their own.

use super::flags::{Why, check_option};

/// A source option the flags' policy refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {what} sets {option}, refused: {why}")]
pub struct Refused {
    pub file: String,
    pub line: u64,
    /// The pragma or attribute, in a few words.
    pub what: &'static str,
    /// The flag it stands for.
    pub option: String,
    pub why: Why,
}

/// The first option `preprocessed` sets that the flags' policy refuses.
pub fn check(preprocessed: &str) -> Result<(), Box<Refused>> {
    let mut place = Place::default();
    let mut text = String::new();
    let mut lines: Vec<(usize, String, u64)> = Vec::new();
    for line in preprocessed.lines() {
        if place.marker(line) {
            continue;
        }
        if !place.system {
            if let Some(pragma) = line.trim_start().strip_prefix("#pragma") {
                pragma_options(pragma)
                    .into_iter()
                    .try_for_each(|(what, option)| refuse(&place, what, option))?;
            } else {
                lines.push((text.len(), place.file.clone(), place.line));
                text.push_str(line);
                text.push('\n');
            }
        }
        place.line += 1;
    }
    for (at, what, option) in attribute_options(&text) {
        let index = lines.partition_point(|(start, _, _)| *start <= at) - 1;
        let (_, file, line) = &lines[index];
        let place = Place {
            file: file.clone(),
            line: *line,
            system: false,
        };
        refuse(&place, what, option)?;
    }
    Ok(())
}

fn refuse(place: &Place, what: &'static str, option: String) -> Result<(), Box<Refused>> {
    check_option(&option).map_err(|why| {
        Box::new(Refused {
            file: place.file.clone(),
            line: place.line,
            what,
            option,
            why,
        })
    })
}

/// Where the preprocessed text is, from its line markers.
#[derive(Debug, Default)]
struct Place {
    file: String,
    line: u64,
    system: bool,
}

impl Place {
    /// Takes a line marker (`# 12 "file.c" 1 3`); whether `line` was one.
    fn marker(&mut self, line: &str) -> bool {
        let Some(rest) = line
            .strip_prefix("# ")
            .or_else(|| line.strip_prefix("#line "))
        else {
            return false;
        };
        let mut parts = rest.splitn(2, ' ');
        let Some(number) = parts.next().and_then(|n| n.parse::<u64>().ok()) else {
            return false;
        };
        let rest = parts.next().unwrap_or("");
        let (file, flags) = match rest.strip_prefix('"').and_then(|r| r.split_once('"')) {
            Some((file, flags)) => (file.to_string(), flags),
            None => (self.file.clone(), ""),
        };
        self.file = file;
        self.line = number;
        self.system = flags.split_whitespace().any(|f| f == "3");
        true
    }
}

/// What a `#pragma` line (after the word) sets, as flags.
fn pragma_options(pragma: &str) -> Vec<(&'static str, String)> {
    let tokens = tokens(pragma);
    let words: Vec<&str> = tokens
        .iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    match words.as_slice() {
        ["GCC", "optimize", ..] => optimize_options(&tokens[2..])
            .into_iter()
            .map(|o| ("#pragma GCC optimize", o))
            .collect(),
        ["clang", "fp", rest @ ..] => {
            let set =
                |name: &str, value: &str| rest.windows(2).any(|w| w[0] == name && w[1] == value);
            let mut options = Vec::new();
            if set("reassociate", "on") {
                options.push(("#pragma clang fp", "-fassociative-math".to_string()));
            }
            if set("contract", "fast") {
                options.push(("#pragma clang fp", "-ffp-contract=fast".to_string()));
            }
            options
        }
        ["float_control", rest @ ..] if rest.windows(2).any(|w| w == ["precise", "off"]) => {
            vec![(
                "#pragma float_control",
                "-funsafe-math-optimizations".into(),
            )]
        }
        _ => Vec::new(),
    }
}

/// What `optimize` attributes in `text` set: (byte offset, attribute, flag).
fn attribute_options(text: &str) -> Vec<(usize, &'static str, String)> {
    let tokens = tokens_at(text);
    let mut found = Vec::new();
    // Depth of parentheses inside `__attribute__((…))`, of brackets in `[[…]]`.
    let mut in_attribute: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    for (i, (at, token)) in tokens.iter().enumerate() {
        match token {
            Token::Word(w) if w == "__attribute__" || w == "__attribute" => {
                in_attribute.push(depth);
            }
            Token::Punct('[') => {
                if matches!(tokens.get(i + 1), Some((_, Token::Punct('[')))) {
                    in_attribute.push(depth);
                }
                depth += 1;
            }
            Token::Punct('(') => depth += 1,
            Token::Punct(')' | ']') => {
                depth = depth.saturating_sub(1);
                if in_attribute.last() == Some(&depth) {
                    in_attribute.pop();
                }
            }
            Token::Word(w)
                if (w == "optimize" || w == "__optimize__")
                    && !in_attribute.is_empty()
                    && matches!(tokens.get(i + 1), Some((_, Token::Punct('(')))) =>
            {
                let args: Vec<Token> = tokens[i + 1..].iter().map(|(_, t)| t.clone()).collect();
                for option in optimize_options(&args) {
                    found.push((*at, "an optimize attribute", option));
                }
            }
            _ => {}
        }
    }
    found
}

/// The options of `optimize(...)` (its parenthesized arguments first in
/// `tokens`): strings of comma-separated options, or an integer level.
fn optimize_options(tokens: &[Token]) -> Vec<String> {
    let mut options = Vec::new();
    let mut depth = 0;
    for token in tokens {
        match token {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            Token::Str(s) => options.extend(s.split(',').map(str::trim).map(as_flag)),
            Token::Number(n) => options.push(format!("-O{n}")),
            _ => {}
        }
    }
    options
}

/// An optimize option as the flag it stands for: `fast-math` is
/// `-ffast-math`, `O2` and `Ofast` are `-O2` and `-Ofast`.
fn as_flag(option: &str) -> String {
    if option.starts_with('-') {
        return option.to_string();
    }
    let level = option.strip_prefix('O').is_some_and(|l| {
        l.is_empty()
            || l.chars().all(|c| c.is_ascii_digit())
            || ["s", "g", "z", "fast"].contains(&l)
    });
    if level {
        format!("-{option}")
    } else {
        format!("-f{option}")
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Str(String),
    Number(String),
    Punct(char),
}

fn tokens(text: &str) -> Vec<Token> {
    tokens_at(text).into_iter().map(|(_, t)| t).collect()
}

/// C tokens, roughly (enough to find attributes and their strings), with
/// their byte offsets; comments are gone after the preprocessor.
fn tokens_at(text: &str) -> Vec<(usize, Token)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let mut value = Vec::new();
            i += 1;
            while i < bytes.len() && bytes[i] != c {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                value.push(bytes[i]);
                i += 1;
            }
            i += 1;
            if c == b'"' {
                out.push((
                    start,
                    Token::Str(String::from_utf8_lossy(&value).into_owned()),
                ));
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((start, Token::Word(text[start..i].to_string())));
        } else if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            out.push((start, Token::Number(text[start..i].to_string())));
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            out.push((start, Token::Punct(c as char)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(body: &str) -> String {
        format!(
            "# 1 \"gemm.c\"\n# 1 \"/usr/include/stdint.h\" 1 3\n#pragma GCC optimize (\"fast-math\")\ntypedef long int64_t;\n# 2 \"gemm.c\" 2\n{body}"
        )
    }

    fn refused(body: &str) -> Option<String> {
        check(&unit(body)).err().map(|r| r.to_string())
    }

    #[test]
    fn fast_math_and_levels_are_refused_in_source_as_on_the_command_line() {
        let why = refused("#pragma GCC optimize (\"fast-math\")\n").unwrap();
        assert!(
            why.starts_with("gemm.c:2: #pragma GCC optimize sets -ffast-math"),
            "{why}"
        );
        assert!(why.contains("changes floating-point results"), "{why}");
        assert!(
            refused("#pragma GCC optimize (\"O3,unroll-loops\")\n")
                .unwrap()
                .contains("-O3")
        );
        assert!(
            refused("#pragma GCC optimize (2)\n")
                .unwrap()
                .contains("-O2")
        );
        let attribute = "int x;\nvoid f(void) __attribute__((hot, __optimize__(\"-Ofast\")));\n";
        let why = refused(attribute).unwrap();
        assert!(
            why.starts_with("gemm.c:3: an optimize attribute sets -Ofast"),
            "{why}"
        );
        assert!(refused("[[gnu::optimize(\"no-signed-zeros\")]] void f(void);\n").is_some());
        assert!(
            refused("#pragma clang fp reassociate(on)\n")
                .unwrap()
                .contains("-fassociative-math")
        );
        assert!(refused("#pragma float_control(precise, off, push)\n").is_some());
    }

    #[test]
    fn tuning_options_system_headers_and_plain_identifiers_pass() {
        assert_eq!(refused("#pragma GCC optimize (\"unroll-loops\")\n"), None);
        assert_eq!(
            refused("__attribute__((optimize(\"tree-vectorize\"))) void f(void);\n"),
            None
        );
        assert_eq!(
            refused("void optimize(int level);\nint main(void) { optimize(3); }\n"),
            None
        );
        assert_eq!(
            refused("#pragma GCC target(\"avx2\")\n#pragma omp parallel for\n"),
            None
        );
        assert_eq!(
            refused("#pragma clang fp contract(on) exceptions(ignore)\n"),
            None
        );
    }
}

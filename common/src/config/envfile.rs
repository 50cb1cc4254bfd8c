//! The env-file format: dotenv-style `KEY=value` lines, read as data.
//!
//! The file is parsed, never executed: no command substitution, no globbing,
//! nothing a shell would do besides quoting and `${VAR}` expansion. Accepted:
//!
//! - blank lines and `#` comments (whole lines, or after an unquoted value
//!   following whitespace);
//! - an optional `export ` prefix;
//! - a value that starts with `'` is literal up to the closing quote; one that
//!   starts with `"` takes escapes (`\" \\ \$ \n \t`) and expansion; any other
//!   value runs to the end of the line (trimmed), with expansion, and keeps
//!   quotes inside it as they are, so `--opt "a b"` survives for a shell-words
//!   split later;
//! - `$VAR`, `${VAR}`, `${VAR:-default}` (unset or empty) and `${VAR-default}`
//!   (unset), looked up first among keys set earlier in the file, then in the
//!   process environment. An unset variable without a default is an error: a
//!   silently empty node count or path is worse than a refusal.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::diagnostic::{Diagnostic, Origin};

/// One `KEY=value` assignment and the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// A parsed env file: its path (as given) and its assignments in file order.
#[derive(Debug, Clone)]
pub struct EnvFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
}

impl EnvFile {
    /// Reads and parses `path`, expanding variables from `lookup`: the lines
    /// that parsed, and a diagnostic for each that did not.
    pub fn load(
        path: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(EnvFile, Vec<Diagnostic>), Diagnostic> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Diagnostic::new(
                Origin::file(path, 0),
                None,
                format!("cannot read the env file: {e}"),
            )
        })?;
        Ok(parse(path, &text, lookup))
    }

    /// The line that set `key`, if the file set it.
    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.entries.iter().find(|e| e.key == key).map(|e| e.line)
    }
}

/// Parses env-file text: the lines that parsed, and every problem (not only the first).
pub fn parse(
    path: &Path,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> (EnvFile, Vec<Diagnostic>) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut errors = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let origin = Origin::file(path, line);
        let earlier = |name: &str| {
            entries
                .iter()
                .rev()
                .find(|e| e.key == name)
                .map(|e| e.value.clone())
                .or_else(|| lookup(name))
        };
        match parse_line(raw, &earlier) {
            Ok(None) => {}
            Ok(Some((key, value))) => {
                if let Some(first) = seen.get(&key) {
                    errors.push(Diagnostic::new(
                        origin,
                        Some(key),
                        format!("set twice (first on line {first}); keep one"),
                    ));
                    continue;
                }
                seen.insert(key.clone(), line);
                entries.push(Entry { key, value, line });
            }
            Err(LineError { key, message }) => errors.push(Diagnostic::new(origin, key, message)),
        }
    }
    let file = EnvFile {
        path: path.to_path_buf(),
        entries,
    };
    (file, errors)
}

struct LineError {
    key: Option<String>,
    message: String,
}

impl LineError {
    fn new(key: Option<&str>, message: impl Into<String>) -> Self {
        LineError {
            key: key.map(str::to_string),
            message: message.into(),
        }
    }
}

fn parse_line(
    raw: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(String, String)>, LineError> {
    let line = raw.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line
        .strip_prefix("export ")
        .map(str::trim_start)
        .unwrap_or(line);
    let Some((key, rest)) = line.split_once('=') else {
        let word = line.split_whitespace().next().unwrap_or(line);
        return Err(LineError::new(
            is_key(word).then_some(word),
            "expected KEY=value (this line has no '=')",
        ));
    };
    let key = key.trim_end();
    if !is_key(key) {
        return Err(LineError::new(
            None,
            format!(
                "{key:?} is not a valid key name (letters, digits and '_', not starting with a digit)"
            ),
        ));
    }
    let value = parse_value(rest.trim_start(), lookup).map_err(|m| LineError::new(Some(key), m))?;
    Ok(Some((key.to_string(), value)))
}

fn is_key(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses the text after `=`: a quoted value, or an unquoted one in which
/// quotes are ordinary characters (so `--opt "a b"` keeps its quotes for a
/// later shell-words split), then an optional comment.
fn parse_value(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut chars = text.chars().peekable();
    let mut out = String::new();
    match chars.peek() {
        Some('\'') => {
            chars.next();
            let mut closed = false;
            for c in chars.by_ref() {
                if c == '\'' {
                    closed = true;
                    break;
                }
                out.push(c);
            }
            if !closed {
                return Err("unterminated single quote".into());
            }
        }
        Some('"') => {
            chars.next();
            parse_double_quoted(&mut chars, &mut out, lookup)?;
        }
        _ => {
            let mut previous_was_space = true;
            // Inside a single-quoted part, as a shell would read it: `$`
            // is a character (`sh -c 'echo $HOME'` is the CLI's to expand).
            let mut single_quoted = false;
            while let Some(c) = chars.next() {
                match c {
                    '#' if previous_was_space && !single_quoted => {
                        return Ok(out.trim_end().to_string());
                    }
                    '\'' => {
                        single_quoted = !single_quoted;
                        out.push(c);
                    }
                    '$' if !single_quoted => expand(&mut chars, &mut out, lookup)?,
                    c => out.push(c),
                }
                previous_was_space = c.is_whitespace();
            }
            return Ok(out.trim_end().to_string());
        }
    }
    let rest: String = chars.collect();
    let rest = rest.trim_start();
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(format!("unexpected {rest:?} after the closing quote"));
    }
    Ok(out)
}

fn parse_double_quoted(
    chars: &mut Chars<'_>,
    out: &mut String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(()),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(e @ ('"' | '\\' | '$')) => out.push(e),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => break,
            },
            '$' => expand(chars, out, lookup)?,
            c => out.push(c),
        }
    }
    Err("unterminated double quote".into())
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// Expands what follows a `$`: `{NAME}`, `{NAME:-default}`, `{NAME-default}` or `NAME`.
fn expand(
    chars: &mut Chars<'_>,
    out: &mut String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    match chars.peek() {
        Some('{') => {
            chars.next();
            let body = take_braced(chars)?;
            out.push_str(&expand_braced(&body, lookup)?);
        }
        Some(c) if c.is_ascii_alphabetic() || *c == '_' => {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if !(c.is_ascii_alphanumeric() || c == '_') {
                    break;
                }
                name.push(c);
                chars.next();
            }
            out.push_str(&lookup(&name).ok_or_else(|| unset(&name))?);
        }
        _ => out.push('$'),
    }
    Ok(())
}

/// Takes the text up to the `}` that closes an already consumed `{`.
fn take_braced(chars: &mut Chars<'_>) -> Result<String, String> {
    let mut depth = 1;
    let mut body = String::new();
    for c in chars.by_ref() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(body);
                }
            }
            _ => {}
        }
        body.push(c);
    }
    Err("unterminated ${...}".into())
}

fn expand_braced(body: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let name_end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, rest) = body.split_at(name_end);
    if !is_key(name) {
        return Err(format!("${{{body}}} does not start with a variable name"));
    }
    let value = lookup(name);
    let default = |text: &str| parse_value(text, lookup);
    match rest {
        "" => value.ok_or_else(|| unset(name)),
        _ if rest.starts_with(":-") => match value {
            Some(v) if !v.is_empty() => Ok(v),
            _ => default(&rest[2..]),
        },
        _ if rest.starts_with('-') => match value {
            Some(v) => Ok(v),
            None => default(&rest[1..]),
        },
        _ => Err(format!(
            "${{{body}}}: only ${{VAR}}, ${{VAR:-default}} and ${{VAR-default}} are supported"
        )),
    }
}

fn unset(name: &str) -> String {
    format!("${{{name}}} is not set (give a default with ${{{name}:-value}})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SCRATCH" => Some("/scratch/u".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn parse_ok(text: &str) -> Vec<(String, String)> {
        let (file, errors) = parse(Path::new("t.env"), text, &env);
        assert!(errors.is_empty(), "{errors:?}");
        file.entries.into_iter().map(|e| (e.key, e.value)).collect()
    }

    fn parse_err(text: &str) -> Vec<String> {
        let (_, errors) = parse(Path::new("t.env"), text, &env);
        errors.iter().map(|d| d.to_string()).collect()
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_quoted_and_commented_values() {
        let text = "# a comment\n\nA=1\nexport B = two words  # trailing\nC='lit $SCRATCH # not a comment'\nD=\"x \\\"y\\\" $SCRATCH\"  # c\nE=a#b\nF=it's\n";
        assert_eq!(
            parse_ok(text),
            kv(&[
                ("A", "1"),
                ("B", "two words"),
                ("C", "lit $SCRATCH # not a comment"),
                ("D", "x \"y\" /scratch/u"),
                ("E", "a#b"),
                ("F", "it's"),
            ])
        );
    }

    #[test]
    fn expansion_forms() {
        let text = "R=${SCRATCH}/runs\nS=${R}/x\nT=${NOPE:-fallback}\nU=${EMPTY:-dflt}\nV=${EMPTY-kept}\nW=$SCRATCH.\nX=${NOPE:-${SCRATCH}/d}\nY=cost $5\n";
        assert_eq!(
            parse_ok(text),
            kv(&[
                ("R", "/scratch/u/runs"),
                ("S", "/scratch/u/runs/x"),
                ("T", "fallback"),
                ("U", "dflt"),
                ("V", ""),
                ("W", "/scratch/u."),
                ("X", "/scratch/u/d"),
                ("Y", "cost $5"),
            ])
        );
    }

    #[test]
    fn single_quoted_parts_of_a_value_are_not_expanded() {
        let got = parse_ok("A=sh -c 'echo $SCRATCH # kept' $SCRATCH # comment\n");
        assert_eq!(got[0].1, "sh -c 'echo $SCRATCH # kept' /scratch/u");
        let words = shell_words::split(&got[0].1).unwrap();
        assert_eq!(words, ["sh", "-c", "echo $SCRATCH # kept", "/scratch/u"]);
    }

    #[test]
    fn quoted_arguments_survive_for_shell_words() {
        let got = parse_ok(r#"VLLM_EXTRA_ARGS=--max-model-len 4096 --chat-template "a b""#);
        assert_eq!(got[0].1, r#"--max-model-len 4096 --chat-template "a b""#);
        let words = shell_words::split(&got[0].1).unwrap();
        assert_eq!(words, ["--max-model-len", "4096", "--chat-template", "a b"]);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let errors = parse_err("A=1\nNOEQUALS\nB=${UNSET_VAR}\n9X=1\nC='open\nA=2\nD=\"x\" y\n");
        assert_eq!(
            errors,
            [
                "t.env:2: NOEQUALS: expected KEY=value (this line has no '=')",
                "t.env:3: B: ${UNSET_VAR} is not set (give a default with ${UNSET_VAR:-value})",
                "t.env:4: \"9X\" is not a valid key name (letters, digits and '_', not starting with a digit)",
                "t.env:5: C: unterminated single quote",
                "t.env:6: A: set twice (first on line 1); keep one",
                "t.env:7: D: unexpected \"y\" after the closing quote",
            ]
        );
    }

    #[test]
    fn nothing_is_executed() {
        let got = parse_ok("A=$(touch /tmp/hpcagent-pwned)\nB=`id`\n");
        assert_eq!(
            got,
            kv(&[("A", "$(touch /tmp/hpcagent-pwned)"), ("B", "`id`")])
        );
        assert!(!Path::new("/tmp/hpcagent-pwned").exists());
    }
}

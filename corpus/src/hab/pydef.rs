//! The top-level functions of a Python reference (or initializer module),
//! and the parameters of each: enough to know which function is the entry,
//! what it takes positionally, and which keywords it accepts, without
//! running Python. (A reference is called positionally; keyword-only
//! parameters are fixed knobs and never passed. An initializer is handed
//! `rng` only where it accepts it.)

/// Why a reference's entry cannot be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("a def without parameters at byte {0}")]
    NoParameters(usize),
    #[error("def {0}: its parameter list does not close")]
    Unclosed(String),
    #[error("no def {0}")]
    NoDef(String),
    #[error("several defs and none named {0}: set func_name")]
    NoEntry(String),
}

/// A top-level `def`: its name, positional parameter names in order, and
/// whether it accepts any keyword (`**kwargs`) besides its named ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    pub name: String,
    pub positional: Vec<String>,
    /// Every named parameter, positional or keyword-only, in order.
    pub named: Vec<String>,
    pub var_keywords: bool,
}

impl Def {
    /// Whether a call may pass `name` as a keyword.
    pub fn accepts(&self, name: &str) -> bool {
        self.var_keywords || self.named.iter().any(|n| n == name)
    }
}

/// Every top-level `def` of `source`, in order.
pub fn defs(source: &str) -> Result<Vec<Def>, ReferenceError> {
    let mut out = Vec::new();
    let mut rest = source;
    let mut offset = 0;
    while let Some(at) = find_top_level_def(rest) {
        let after = &rest[at + 4..];
        let open = after
            .find('(')
            .ok_or(ReferenceError::NoParameters(offset + at))?;
        let name = after[..open].trim().to_string();
        let (params, used) =
            parenthesized(&after[open..]).ok_or_else(|| ReferenceError::Unclosed(name.clone()))?;
        let params = strip_comments(params);
        let (named, var_keywords) = named(&params);
        out.push(Def {
            name,
            positional: positional(&params),
            named,
            var_keywords,
        });
        let consumed = at + 4 + open + used;
        offset += consumed;
        rest = &rest[consumed..];
    }
    Ok(out)
}

/// The byte offset of the next `def ` that starts a line at column 0.
fn find_top_level_def(text: &str) -> Option<usize> {
    let mut start = 0;
    loop {
        let found = text[start..].find("def ")? + start;
        if found == 0 || text.as_bytes()[found - 1] == b'\n' {
            return Some(found);
        }
        start = found + 4;
    }
}

/// The text inside the parentheses `text` starts with, and the bytes up to
/// and including the closing one; strings and nested brackets respected.
fn parenthesized(text: &str) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'\'' | b'"' => quote = Some(b),
                b'#' => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((&text[1..i], i + 1));
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// The positional parameter names of a parameter list: before a bare `*`
/// or `*args`, without `/`, `**kwargs`, annotations and defaults.
fn positional(params: &str) -> Vec<String> {
    let mut names = Vec::new();
    for part in split_top_level(params) {
        let part = part.trim();
        if part.is_empty() || part == "/" {
            continue;
        }
        if part.starts_with('*') {
            break;
        }
        names.push(name_of(part));
    }
    names
}

/// Every named parameter of a parameter list (without `/`, `*args`,
/// `**kwargs`, annotations and defaults), and whether it has `**kwargs`.
fn named(params: &str) -> (Vec<String>, bool) {
    let mut names = Vec::new();
    let mut var_keywords = false;
    for part in split_top_level(params) {
        let part = part.trim();
        if let Some(rest) = part.strip_prefix("**") {
            var_keywords = !rest.trim().is_empty();
            continue;
        }
        if part.is_empty() || part == "/" || part.starts_with('*') {
            continue;
        }
        names.push(name_of(part));
    }
    (names, var_keywords)
}

fn name_of(part: &str) -> String {
    part.split([':', '='])
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `text` without its `#` comments (outside strings).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut in_comment = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_comment {
            if c == '\n' {
                in_comment = false;
                out.push(c);
            }
            continue;
        }
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '#' => {
                in_comment = true;
                continue;
            }
            None if c == '\'' || c == '"' => quote = Some(c),
            None => {}
        }
        out.push(c);
    }
    out
}

/// `text` split at commas outside brackets and strings.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_parameters_stop_at_the_keyword_only_ones() {
        let source = "import numpy as np\n\n\
            @decorated\n\
            def kernel(A: np.ndarray, B, n=(1, 2), *, scale=1.0):\n    pass\n\n\
            class K:\n    def method(self, x):\n        pass\n\n\
            def helper(\n    x,  # a comment, with (parens\n    y=\"a,b)\",\n    /,\n    z=[1, 2],\n    *args,\n    w,\n    **kw,\n):\n    return x\n";
        let found = defs(source).unwrap();
        assert_eq!(
            found,
            [
                Def {
                    name: "kernel".into(),
                    positional: vec!["A".into(), "B".into(), "n".into()],
                    named: vec!["A".into(), "B".into(), "n".into(), "scale".into()],
                    var_keywords: false,
                },
                Def {
                    name: "helper".into(),
                    positional: vec!["x".into(), "y".into(), "z".into()],
                    named: vec!["x".into(), "y".into(), "z".into(), "w".into()],
                    var_keywords: true,
                },
            ]
        );
        assert!(found[1].accepts("rng") && !found[0].accepts("rng"));
        assert!(found[0].accepts("scale"));
    }

    #[test]
    fn an_unclosed_list_is_an_error() {
        assert!(
            defs("def f(a, b:\n")
                .unwrap_err()
                .to_string()
                .contains("does not close")
        );
    }
}

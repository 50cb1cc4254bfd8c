//! Slurm hostlist expressions: `nid[001-004,010]`, `a[1-2]b[3-4]`, `n1,m[2-3]`.
//!
//! [`expand`] and [`compress`] give exactly what `scontrol show hostnames` and
//! `scontrol show hostlist` print (a test checks both against the real tools).
//! Written here rather than taken from a crate: the crates on crates.io expand
//! but either do not compress or compress differently from Slurm (sorting,
//! merging zero-padded widths), and the orchestrator prints node lists that
//! operators compare with Slurm's own output.
//!
//! Slurm's rules, as its `hostlist.c` implements them:
//! - a name's numeric suffix is its trailing digits; their count is its width
//!   (`nid001` is prefix `nid`, number 1, width 3); a name without trailing
//!   digits stands alone and never joins a range;
//! - compressing keeps the given order (no sorting, duplicates kept) and only
//!   joins a name onto the range just before it when the prefix matches, the
//!   number follows on, and the widths are compatible (`n9,n10` join; `n9,n010`
//!   do not);
//! - neighbouring ranges with one prefix share one bracket: `n[1-3,7]`.

use std::fmt::Write;

/// Refuses expansions larger than this, rather than exhausting memory on a typo.
const MAX_HOSTS: usize = 1 << 20;

/// Why an expression is not a hostlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hostlist {expr:?}: {reason}")]
pub struct HostlistError {
    pub expr: String,
    pub reason: Reason,
}

/// What is wrong with a hostlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    #[error("']' without '['")]
    UnopenedBracket,
    #[error("'[' without ']'")]
    UnclosedBracket,
    #[error("text {0:?} after the last ']'")]
    TextAfterBracket(String),
    #[error("more than {MAX_HOSTS} hosts")]
    TooManyHosts,
    #[error("invalid range {0:?}")]
    Range(String),
    #[error("number too large in {0:?}")]
    NumberTooLarge(String),
    #[error("invalid range {part:?}: {lo} > {hi}")]
    Reversed { part: String, lo: u64, hi: u64 },
    #[error("range {0:?} has more than {MAX_HOSTS} hosts")]
    RangeTooLarge(String),
}

/// Every host name an expression denotes, in order, duplicates kept.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let fail = |reason: Reason| HostlistError {
        expr: expr.to_string(),
        reason,
    };
    let mut hosts = Vec::new();
    for item in split_top_level(expr).map_err(fail)? {
        expand_item(item, &mut hosts).map_err(fail)?;
        if hosts.len() > MAX_HOSTS {
            return Err(fail(Reason::TooManyHosts));
        }
    }
    Ok(hosts)
}

/// The shortest expression Slurm would print for these hosts, in this order.
pub fn compress<S: AsRef<str>>(hosts: &[S]) -> String {
    let mut ranges: Vec<Range> = Vec::new();
    for host in hosts {
        push_host(&mut ranges, host.as_ref());
    }
    ranged_string(&ranges)
}

/// Splits at commas and whitespace outside brackets; drops empty items.
fn split_top_level(expr: &str) -> Result<Vec<&str>, Reason> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1).ok_or(Reason::UnopenedBracket)?,
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                items.push(&expr[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(Reason::UnclosedBracket);
    }
    items.push(&expr[start..]);
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

/// Expands one item such as `a[1-2]b[3-4]`, in Slurm's order: the last
/// bracket varies fastest, the one before it slowest, then the others from
/// right to left (`x[1-2]y[1-2]z[1-2]` gives x1y1z1 x1y1z2 x2y1z1 …).
fn expand_item(item: &str, out: &mut Vec<String>) -> Result<(), Reason> {
    let Some(open) = item.rfind('[') else {
        if item.contains(']') {
            return Err(Reason::UnopenedBracket);
        }
        out.push(item.to_string());
        return Ok(());
    };
    let close = open + item[open..].find(']').ok_or(Reason::UnclosedBracket)?;
    if close + 1 != item.len() {
        return Err(Reason::TextAfterBracket(item[close + 1..].to_string()));
    }
    let numbers = bracket_numbers(&item[open + 1..close])?;
    expand_prefix(&item[..open], &numbers, out)
}

/// Expands the brackets left in `prefix` (rightmost first, outermost), then
/// appends each of the last bracket's `numbers`.
fn expand_prefix(prefix: &str, numbers: &[String], out: &mut Vec<String>) -> Result<(), Reason> {
    let Some(open) = prefix.rfind('[') else {
        if prefix.contains(']') {
            return Err(Reason::UnopenedBracket);
        }
        out.extend(numbers.iter().map(|n| format!("{prefix}{n}")));
        return if out.len() > MAX_HOSTS {
            Err(Reason::TooManyHosts)
        } else {
            Ok(())
        };
    };
    let close = open + prefix[open..].find(']').ok_or(Reason::UnclosedBracket)?;
    let (head, tail) = (&prefix[..open], &prefix[close + 1..]);
    for n in bracket_numbers(&prefix[open + 1..close])? {
        expand_prefix(&format!("{head}{n}{tail}"), numbers, out)?;
    }
    Ok(())
}

/// The zero-padded numbers of a bracket body such as `001-004,010`.
fn bracket_numbers(body: &str) -> Result<Vec<String>, Reason> {
    let mut numbers = Vec::new();
    for part in body.split(',') {
        let (lo_text, hi_text) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo_text) || !digits(hi_text) {
            return Err(Reason::Range(part.to_string()));
        }
        let parse = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| Reason::NumberTooLarge(part.to_string()))
        };
        let (lo, hi) = (parse(lo_text)?, parse(hi_text)?);
        if lo > hi {
            return Err(Reason::Reversed {
                part: part.to_string(),
                lo,
                hi,
            });
        }
        if hi - lo >= MAX_HOSTS as u64 {
            return Err(Reason::RangeTooLarge(part.to_string()));
        }
        let width = lo_text.len();
        numbers.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(numbers)
}

/// Slurm's hostrange: `prefix[lo-hi]` at `width` digits, or a name with no number.
#[derive(Debug, Clone)]
struct Range {
    prefix: String,
    lo: u64,
    hi: u64,
    width: usize,
    single: bool,
}

fn parse_host(host: &str) -> Range {
    let digits = host.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, suffix) = host.split_at(host.len() - digits);
    match suffix.parse::<u64>() {
        Ok(n) if digits > 0 => Range {
            prefix: prefix.to_string(),
            lo: n,
            hi: n,
            width: digits,
            single: false,
        },
        _ => Range {
            prefix: host.to_string(),
            lo: 0,
            hi: 0,
            width: 0,
            single: true,
        },
    }
}

fn push_host(ranges: &mut Vec<Range>, host: &str) {
    let mut new = parse_host(host);
    if let Some(tail) = ranges.last_mut()
        && !tail.single
        && !new.single
        && tail.prefix == new.prefix
        && tail.hi + 1 == new.lo
        && widths_combine(tail, &mut new)
    {
        tail.hi = new.hi;
        return;
    }
    ranges.push(new);
}

/// Slurm's `hostrange_width_combine`: may narrow either width to the other's.
fn widths_combine(a: &mut Range, b: &mut Range) -> bool {
    if a.width == b.width {
        return true;
    }
    let a_own = zero_padding(a.lo, a.width);
    let a_other = zero_padding(a.lo, b.width);
    let b_own = zero_padding(b.lo, b.width);
    let b_other = zero_padding(b.lo, a.width);
    match (a_own == a_other, b_own == b_other) {
        (false, false) => false,
        (false, true) => {
            b.width = a.width;
            true
        }
        (true, _) => {
            a.width = b.width;
            true
        }
    }
}

/// How many leading zeros `n` gets when printed at `width` digits.
fn zero_padding(n: u64, width: usize) -> usize {
    let digits = n.checked_ilog10().unwrap_or(0) as usize + 1;
    width.saturating_sub(digits)
}

fn same_bracket(a: &Range, b: &Range) -> bool {
    a.prefix == b.prefix && !a.single && !b.single
}

fn ranged_string(ranges: &[Range]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ranges.len() {
        if !out.is_empty() {
            out.push(',');
        }
        let first = &ranges[i];
        let bracket =
            first.hi > first.lo || ranges.get(i + 1).is_some_and(|n| same_bracket(first, n));
        out.push_str(&first.prefix);
        if !bracket {
            if !first.single {
                let _ = write!(out, "{:0w$}", first.lo, w = first.width);
            }
            i += 1;
            continue;
        }
        out.push('[');
        loop {
            let r = &ranges[i];
            let _ = write!(out, "{:0w$}", r.lo, w = r.width);
            if r.hi > r.lo {
                let _ = write!(out, "-{:0w$}", r.hi, w = r.width);
            }
            i += 1;
            if i == ranges.len() || !same_bracket(&ranges[i - 1], &ranges[i]) {
                break;
            }
            out.push(',');
        }
        out.push(']');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        expand(expr).unwrap()
    }

    #[test]
    fn expands_padding_groups_and_lists() {
        assert_eq!(
            names("nid[001-003,010]"),
            ["nid001", "nid002", "nid003", "nid010"]
        );
        assert_eq!(names("a[1-2]b[3-4]"), ["a1b3", "a1b4", "a2b3", "a2b4"]);
        assert_eq!(
            names("x[1-2]y[1-2]z[1]"),
            ["x1y1z1", "x2y1z1", "x1y2z1", "x2y2z1"]
        );
        assert_eq!(names("n[9-10],m1 x"), ["n9", "n10", "m1", "x"]);
        assert_eq!(names("n[1-003]"), ["n1", "n2", "n3"]);
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n[1-2]-ib").is_err());
        assert!(expand("n[1-2").is_err());
        assert!(expand("n[1-99999999]").is_err());
    }

    #[test]
    fn compresses_like_slurm() {
        let c = |hosts: &str| compress(&hosts.split(',').collect::<Vec<_>>());
        assert_eq!(c("n1,n2,n3"), "n[1-3]");
        assert_eq!(c("n3,n1,n2"), "n[3,1-2]");
        assert_eq!(c("n9,n10"), "n[9-10]");
        assert_eq!(c("n9,n010"), "n[9,010]");
        assert_eq!(c("n1,m1,n2"), "n1,m1,n2");
        assert_eq!(c("n,n1,n2"), "n,n[1-2]");
        assert_eq!(c("1,2,3"), "[1-3]");
    }
}

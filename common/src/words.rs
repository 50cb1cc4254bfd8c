//! Words for people: argument vectors printed so that a person can read
//! them and a shell can run them, a "did you mean", and the tail (or both
//! ends) of a text too long to show whole.

use std::borrow::Cow;

/// True when `word` means the same to a shell with or without quotes.
pub fn is_plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,@+=%^".contains(c))
}

/// `word`, quoted only if a shell needs it.
pub fn quote(word: &str) -> Cow<'_, str> {
    if is_plain(word) {
        Cow::Borrowed(word)
    } else {
        shell_words::quote(word)
    }
}

/// The words joined into one shell command line.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The candidate most like `name`, for a "did you mean" hint: within three
/// edits (a quarter of a long candidate's length), transpositions counted
/// as one; `None` when nothing is that close.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(distance, c)| *distance <= 3.max(c.len() / 4))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// The last `max` bytes of `text`, cut at a character boundary, with a
/// mark where it was cut.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// At most about `max` bytes of `text`: all of it when it fits, else its
/// first three quarters and its last quarter, with a line saying how much
/// was cut between them. For a compiler's output, whose first error is
/// the one to read and whose last lines say how it ended.
pub fn ends(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    // A head cut back to a whole character leaves its bytes to the tail.
    let mut head = ends_budget(max).0;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut start = text.len() - (max - head);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    cut_between(&text[..head], start - head, &text[start..])
}

/// How [`ends`] shares `max` bytes: the head's, then the tail's. For
/// whoever keeps both ends of a stream as it reads ([`cut_between`] joins
/// them).
pub fn ends_budget(max: usize) -> (usize, usize) {
    let head = max / 4 * 3;
    (head, max - head)
}

/// `head` and `tail` with the line that says `cut` bytes lay between them.
pub fn cut_between(head: &str, cut: usize, tail: &str) -> String {
    format!("{head}\n[… {cut} bytes cut …]\n{tail}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_only_what_needs_it() {
        let line = super::join(&["srun", "--job-name=judge-0", "a b", "it's", "$HOME"]);
        assert_eq!(line, r#"srun --job-name=judge-0 'a b' 'it'\''s' '$HOME'"#);
        assert_eq!(shell_words::split(&line).unwrap()[3], "it's");
    }

    #[test]
    fn the_nearest_candidate_is_suggested_when_close() {
        let keys = ["JUDGE_NODES", "AGENT_NODES", "TIME_LIMIT"];
        use super::nearest;
        assert_eq!(nearest("JUDGE_NODE", keys), Some("JUDGE_NODES"));
        assert_eq!(
            nearest("TIEM_LIMIT", keys),
            Some("TIME_LIMIT"),
            "a swap is one edit"
        );
        assert_eq!(nearest("PARTITION", keys), None);
        assert_eq!(nearest("gem", ["gemm", "atax"]), Some("gemm"));
    }

    #[test]
    fn a_tail_is_whole_characters_and_marks_its_cut() {
        use super::tail;
        assert_eq!(tail("short", 10), "short");
        assert_eq!(tail("abcdef", 3), "…def");
        // "é" is two bytes: a cut inside it moves past it.
        assert_eq!(tail("aéb", 2), "…b");
    }

    #[test]
    fn both_ends_are_kept_and_the_cut_between_them_is_said() {
        use super::ends;
        assert_eq!(ends("short", 10), "short");
        assert_eq!(ends("abcdefghijklmnop", 8), "abcdef\n[… 8 bytes cut …]\nop");
        // A cut inside "é" (two bytes) grows to whole characters.
        assert_eq!(ends("aaéaaaaaaéb", 4), "aa\n[… 10 bytes cut …]\nb");
    }
}

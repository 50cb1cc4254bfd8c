//! Printing argument vectors so that a person can read them and a shell can run them.

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

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_only_what_needs_it() {
        let line = super::join(&["srun", "--job-name=judge-0", "a b", "it's", "$HOME"]);
        assert_eq!(line, r#"srun --job-name=judge-0 'a b' 'it'\''s' '$HOME'"#);
        assert_eq!(shell_words::split(&line).unwrap()[3], "it's");
    }
}

//! Text preparation for the FTS5 index.
//!
//! SQLite's `unicode61` tokenizer splits on spaces and punctuation, so a run of Chinese or
//! Japanese characters with no spaces would become one giant token that no query matches.
//! Indexing each CJK character as its own token, and querying a CJK run as a phrase of its
//! characters, makes any substring of CJK text findable while English keeps porter stemming.

/// Text as it must be written into an FTS5 column: CJK characters separated by spaces, and
/// symbols as spaces.
pub fn index_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else if !c.is_ascii() && !c.is_alphanumeric() && !is_combining_mark(c) {
            // `unicode61` knows Unicode 6.1 only, and keeps every later symbol (most emoji) as a
            // token of its own, which no query can name; as spaces they only separate words,
            // as punctuation does, and every tokenizer reading this text agrees on its words.
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// An FTS5 `MATCH` expression requiring every term of `query`; `None` when it has no terms.
pub fn match_query(query: &str) -> Option<String> {
    build(query, " ")
}

/// An FTS5 `MATCH` expression requiring any term of `query`; `None` when it has no terms.
pub fn match_query_any(query: &str) -> Option<String> {
    build(query, " OR ")
}

fn build(query: &str, joiner: &str) -> Option<String> {
    let terms = phrases(query);
    if terms.is_empty() {
        return None;
    }
    Some(
        terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(joiner),
    )
}

/// Split a query into the phrases [`match_query`] joins: words of letters and digits, and CJK
/// runs as space-separated character phrases. Every FTS5 operator character is dropped, so
/// user input can never be misread as query syntax.
pub fn phrases(query: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut word = String::new();
    let mut cjk = String::new();
    let flush = |buf: &mut String, terms: &mut Vec<String>| {
        let t = buf.trim().to_owned();
        if !t.is_empty() {
            terms.push(t);
        }
        buf.clear();
    };
    for c in query.chars() {
        if is_cjk(c) {
            flush(&mut word, &mut terms);
            if !cjk.is_empty() {
                cjk.push(' ');
            }
            cjk.push(c);
        } else if c.is_alphanumeric() || c == '_' {
            flush(&mut cjk, &mut terms);
            word.push(c);
        } else {
            flush(&mut word, &mut terms);
            flush(&mut cjk, &mut terms);
        }
    }
    flush(&mut word, &mut terms);
    flush(&mut cjk, &mut terms);
    terms
}

/// A combining accent, which `unicode61` with `remove_diacritics` drops from inside a word.
pub fn is_combining_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF)
}

/// Whether `c` belongs to a script written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana and Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B and later
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(query: &str, expected: Option<&str>) {
        assert_eq!(match_query(query).as_deref(), expected, "query {query:?}");
    }

    #[test]
    fn queries_quote_terms_and_split_cjk() {
        check("nats consumer", Some("\"nats\" \"consumer\""));
        check("数据库", Some("\"数 据 库\""));
        check("修复 bug", Some("\"修 复\" \"bug\""));
        check("  \"*:()^-+ ", None);
        check("NEAR(a b)", Some("\"NEAR\" \"a\" \"b\""));
        check("file_path.rs", Some("\"file_path\" \"rs\""));
        assert_eq!(match_query_any("a b").as_deref(), Some("\"a\" OR \"b\""));
    }

    #[test]
    fn index_text_spaces_cjk_only() {
        assert_eq!(index_text("ab 数据"), "ab  数  据 ");
        assert_eq!(index_text("plain text"), "plain text");
    }
}

//! Finding `KEY=value`-style assignments and `--password value` flags whose key names a secret.
//!
//! These two rules fire on ordinary words (`token`, `key`, `pass`), so they run in most texts;
//! they are hand-written parsers started at each occurrence of a key marker rather than regexes,
//! which would cost more to compile than the hook client spends on a whole payload. What counts
//! as a secret key and a secret value is decided in [`crate::keys`].

use std::ops::Range;
use std::sync::LazyLock;

use crate::keys::{self, Assignment};
use crate::scan::Scanner;

/// A key must contain one of these (ASCII case-insensitively) to name a secret.
pub(crate) const KEY_MARKERS: &[&str] = &["pass", "pw", "secret", "token", "key", "auth", "cred"];

static KEY_SCANNER: LazyLock<Scanner> = LazyLock::new(|| Scanner::new(KEY_MARKERS.iter().copied()));

/// Characters of an assignment key: `DB_PASSWORD`, `spring.datasource.password`, `X-Api-Key`.
fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-')
}

fn is_blank(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

fn skip_blanks(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(|&b| is_blank(b)) {
        at += 1;
    }
    at
}

/// The maximal run of key characters around a marker found at `start..end`, without leading
/// dots or dashes (a key starts at a word boundary).
fn key_around(text: &[u8], start: usize, end: usize) -> Range<usize> {
    let mut key_start = start;
    while key_start > 0 && is_key_byte(text[key_start - 1]) {
        key_start -= 1;
    }
    while key_start < start && matches!(text[key_start], b'.' | b'-') {
        key_start += 1;
    }
    let mut key_end = end;
    while key_end < text.len() && is_key_byte(text[key_end]) {
        key_end += 1;
    }
    key_start..key_end
}

/// How far the gates look around a marker for the rest of a key; keys are never this long, and
/// a gate that runs out of room lets the rule run rather than risk missing a secret.
const GATE_REACH: usize = 128;

/// Gate of the assignment rule: after the key around the marker, an optional closing quote
/// (possibly escaped), blanks, then `=` or `:`.
pub(crate) fn key_then_operator(text: &[u8], _: usize, end: usize) -> bool {
    let key_end = end
        + text[end..]
            .iter()
            .take(GATE_REACH)
            .take_while(|&&b| is_key_byte(b))
            .count();
    if key_end == end + GATE_REACH {
        return true;
    }
    let mut at = key_end;
    while at < key_end + 3 && text.get(at) == Some(&b'\\') {
        at += 1;
    }
    if matches!(text.get(at), Some(b'"' | b'\'')) {
        at += 1;
    }
    matches!(text.get(skip_blanks(text, at)), Some(b'=' | b':'))
}

/// Gate of the flag rule: the word around the marker starts with a dash.
pub(crate) fn flag_key(text: &[u8], start: usize, _: usize) -> bool {
    let is_flag_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let word = text[..start]
        .iter()
        .rev()
        .take(GATE_REACH)
        .take_while(|&&b| is_flag_byte(b))
        .count();
    word == GATE_REACH || text.get(start - word) == Some(&b'-')
}

/// One parsed `key <op> value`.
struct Parsed {
    key: Range<usize>,
    /// What closes the key: nothing, a quote, or an escaped quote (`\"`).
    key_close: Range<usize>,
    /// Whether the typed form `KEY: Type = value` was used.
    typed: bool,
    op: &'static str,
    space_before: bool,
    space_after: bool,
    value: Range<usize>,
    /// Inside the quotes, when the value is quoted.
    inner: Option<Range<usize>>,
}

/// Parses a value at `at`: a JSON-escaped string `\"…\"`, a double-quoted string with escapes,
/// a single- or back-quoted string on one line, or else a run of characters up to a blank, a
/// quote or `&`. Returns the value's range and, when quoted, the range inside the quotes.
fn parse_value(
    text: &[u8],
    at: usize,
    stop_at_ampersand: bool,
) -> Option<(Range<usize>, Option<Range<usize>>)> {
    let first = *text.get(at)?;
    if first == b'\\' {
        let mut open = at;
        while text.get(open) == Some(&b'\\') {
            open += 1;
        }
        if text.get(open) == Some(&b'"') {
            let close = text[open + 1..]
                .iter()
                .position(|&b| matches!(b, b'"' | b'\r' | b'\n'))
                .map(|n| open + 1 + n);
            if let Some(close) = close.filter(|&close| {
                text[close] == b'"' && close > open + 1 && text[close - 1] == b'\\'
            }) {
                let mut inner_end = close;
                while inner_end > open + 1 && text[inner_end - 1] == b'\\' {
                    inner_end -= 1;
                }
                return Some((at..close + 1, Some(open + 1..inner_end)));
            }
        }
    }
    match first {
        b'"' => {
            let mut at_byte = at + 1;
            loop {
                match *text.get(at_byte)? {
                    b'"' => return Some((at..at_byte + 1, Some(at + 1..at_byte))),
                    b'\\' if text.get(at_byte + 1).is_some_and(|&b| b != b'\n') => at_byte += 2,
                    b'\\' | b'\r' | b'\n' => return None,
                    _ => at_byte += 1,
                }
            }
        }
        b'\'' | b'`' => {
            let close = at
                + 1
                + text[at + 1..]
                    .iter()
                    .position(|&b| b == first || b == b'\r' || b == b'\n')?;
            (text[close] == first).then(|| (at..close + 1, Some(at + 1..close)))
        }
        _ => {
            let end = text[at..]
                .iter()
                .position(|&b| {
                    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'' | b'`')
                        || (stop_at_ampersand && b == b'&')
                })
                .map_or(text.len(), |n| at + n);
            (end > at).then_some((at..end, None))
        }
    }
}

/// Parses the type in `KEY: Type = value`: a word of type characters and up to three more
/// blank-separated ones (`&'static str`, `Option<String>`, `std::string::String`).
fn parse_type(text: &[u8], at: usize) -> Option<usize> {
    let is_type_byte = |b: u8| {
        b.is_ascii_alphanumeric()
            || matches!(b, b'_' | b'&' | b'<' | b'>' | b'[' | b']' | b'\'' | b':')
    };
    let first = *text.get(at)?;
    if !(first.is_ascii_alphabetic() || first == b'_' || first == b'&') {
        return None;
    }
    let word_end = |from: usize| {
        from + text[from..]
            .iter()
            .take_while(|&&b| is_type_byte(b))
            .count()
    };
    let mut end = word_end(at + 1);
    for _ in 0..3 {
        let next = skip_blanks(text, end);
        if next > end && text.get(next).is_some_and(|&b| is_type_byte(b)) {
            end = word_end(next);
        } else {
            break;
        }
    }
    Some(end)
}

/// Parses `key <op> value` for a key at `key`.
fn parse_assignment(text: &[u8], key: Range<usize>) -> Option<Parsed> {
    let mut at = key.end;
    while at < key.end + 3 && text.get(at) == Some(&b'\\') {
        at += 1;
    }
    if matches!(text.get(at), Some(b'"' | b'\'')) {
        at += 1;
    }
    let key_close = key.end..at;
    let op_at = skip_blanks(text, at);
    // The typed form, `TOKEN: &str = "value"`.
    if text.get(op_at) == Some(&b':')
        && let Some(type_end) = parse_type(text, skip_blanks(text, op_at + 1))
    {
        // `= ` after a blank: `password: abc==` is a base64 value, not a type and an `=`.
        let equals = skip_blanks(text, type_end);
        if equals > type_end
            && text.get(equals) == Some(&b'=')
            && text.get(equals + 1) != Some(&b'=')
            && let Some((value, inner)) = parse_value(text, skip_blanks(text, equals + 1), true)
        {
            return Some(Parsed {
                key,
                key_close,
                typed: true,
                op: "=",
                space_before: false,
                space_after: false,
                value,
                inner,
            });
        }
    }
    let rest = &text[op_at..];
    let op = if rest.starts_with(b"=>") {
        "=>"
    } else if rest.starts_with(b":=") {
        ":="
    } else if rest.starts_with(b"=") {
        "="
    } else if rest.starts_with(b":") {
        ":"
    } else {
        return None;
    };
    let value_at = skip_blanks(text, op_at + op.len());
    let (value, inner) = parse_value(text, value_at, true)?;
    Some(Parsed {
        key,
        key_close,
        typed: false,
        op,
        space_before: op_at > at,
        space_after: value_at > op_at + op.len(),
        value,
        inner,
    })
}

/// Spans of secret values in `KEY=value` assignments (see [`crate::keys`] for the reading).
pub(crate) fn assignments(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    // Keys are looked at once each, and never inside the previous assignment.
    let mut next = 0;
    KEY_SCANNER.scan(bytes, |_, start, end| {
        if start < next {
            return;
        }
        let key = key_around(bytes, start, end);
        next = key.end;
        if key.start >= key.end
            || !(bytes[key.start].is_ascii_alphanumeric() || bytes[key.start] == b'_')
        {
            return;
        }
        if let Some(parsed) = parse_assignment(bytes, key) {
            next = parsed.value.end;
            if let Some(span) = judge_assignment(text, &parsed) {
                spans.push(span);
            }
        }
    });
    spans
}

/// Decides whether a parsed assignment holds a secret; returns the span to redact.
fn judge_assignment(text: &str, parsed: &Parsed) -> Option<Range<usize>> {
    let key = text.get(parsed.key.clone())?;
    if !keys::is_secret_key(key) {
        return None;
    }
    let closing = &text.as_bytes()[parsed.key_close.clone()];
    let before = &text[..parsed.key.start];
    let key_quoted = !closing.is_empty() && before.ends_with(['"', '\'']);
    let value = text.get(parsed.value.clone())?;
    // `'token: 'iter` is a Rust lifetime bound, not a quoted key.
    if before.ends_with('\'') && closing.is_empty() && value.starts_with('\'') {
        return None;
    }
    // `Secret => "x"` is a match arm; hashes quote their keys or make them symbols (`:token =>`).
    let symbol = before.ends_with(':') && !before.ends_with("::");
    if parsed.op == "=>" && !key_quoted && !symbol {
        return None;
    }
    if !key_quoted && keys::is_object_path(key, parsed.op) {
        return None;
    }
    if let Some(inner) = parsed.inner.clone() {
        // A JSON-escaped value belongs to a JSON-escaped key, not to prose in a string.
        if value.starts_with('\\') && !closing.starts_with(b"\\") {
            return None;
        }
        // `"Digest %s" % auth`, `" --user=" + name`: a template or a fragment, not the value.
        let after = text[parsed.value.end..].trim_start_matches([' ', '\t']);
        if after.starts_with(['+', '%', '*']) {
            return None;
        }
        return keys::quoted_is_secret(key, text.get(inner.clone())?).then_some(inner);
    }
    // The typed form (`TOKEN: &str = …`) is only trusted with a quoted literal.
    if parsed.typed {
        return None;
    }
    Assignment {
        text,
        key,
        key_start: parsed.key.start,
        op: parsed.op,
        key_quoted,
        space_before: parsed.space_before,
        space_after: parsed.space_after,
        value: parsed.value.clone(),
    }
    .unquoted_secret()
}

/// Spans of secret values given to flags: `--password hunter2`, `--api-key=…`, `-token …`.
pub(crate) fn secret_flags(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut next = 0;
    KEY_SCANNER.scan(bytes, |_, start, _| {
        if start < next {
            return;
        }
        let is_flag_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
        let mut word_start = start;
        while word_start > 0 && is_flag_byte(bytes[word_start - 1]) {
            word_start -= 1;
        }
        let word_end = start
            + bytes[start..]
                .iter()
                .take_while(|&&b| is_flag_byte(b))
                .count();
        next = word_end;
        // One or two dashes, at the start of a line or after a blank, then a letter.
        let dashes = bytes[word_start..word_end]
            .iter()
            .take_while(|&&b| b == b'-')
            .count();
        let key_start = word_start + dashes;
        let after_blank = word_start == 0 || matches!(bytes[word_start - 1], b' ' | b'\t' | b'\n');
        if !(1..=2).contains(&dashes)
            || !after_blank
            || !bytes.get(key_start).is_some_and(u8::is_ascii_alphabetic)
        {
            return;
        }
        let value_at = match bytes.get(word_end) {
            Some(b'=') => word_end + 1,
            Some(b' ' | b'\t') => skip_blanks(bytes, word_end),
            _ => return,
        };
        // A back-quoted value is a command substitution, not a literal.
        if bytes.get(value_at) == Some(&b'`') {
            return;
        }
        let Some((value, inner)) = parse_value(bytes, value_at, false) else {
            return;
        };
        next = value.end;
        if let Some(span) = judge_flag(text, key_start..word_end, value, inner) {
            spans.push(span);
        }
    });
    spans
}

/// Decides whether a flag's value is a secret; returns the span to redact.
fn judge_flag(
    text: &str,
    key: Range<usize>,
    value: Range<usize>,
    inner: Option<Range<usize>>,
) -> Option<Range<usize>> {
    /// `--password options instead of via the URL`: documentation about the flag, not a use of it.
    const PROSE: &[&str] = &[
        "and", "or", "to", "is", "are", "the", "a", "an", "of", "for", "with", "in", "on", "if",
        "when", "can", "must", "should", "option", "options", "flag", "flags", "argument",
        "instead", "was", "will", "may", "not", "as",
    ];
    let key = text.get(key)?;
    if !keys::is_secret_key(key) {
        return None;
    }
    if let Some(inner) = inner {
        return keys::quoted_is_secret(key, text.get(inner.clone())?).then_some(inner);
    }
    let raw = text.get(value.clone())?;
    if raw.starts_with(['-', '<', '>', '|', '$', '[', '(', '`'])
        || keys::is_placeholder(raw)
        || keys::is_path(raw)
        || PROSE
            .iter()
            .any(|word| word.eq_ignore_ascii_case(raw.trim_end_matches([',', '.', ';', ':'])))
    {
        return None;
    }
    Some(value)
}

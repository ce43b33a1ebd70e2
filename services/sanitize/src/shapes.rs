//! Provider tokens described as shapes: a literal prefix, then runs of character classes.
//!
//! Matching is possessive (a run takes every character of its class, then checks its bounds),
//! which is exact here because no run's class contains the literal that follows it. A shape
//! table costs nothing to build, unlike the equivalent regexes, whose compilation would dominate
//! the hook client's run time.

use std::ops::Range;

/// A set of bytes a run may consist of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Class {
    /// `[A-Za-z0-9]`
    Alnum,
    /// `[A-Za-z0-9_]`
    Word,
    /// `[A-Za-z0-9_-]`
    Base64Url,
    /// `[A-Za-z0-9_.-]`, for tokens with dotted suffixes.
    Base64UrlDot,
    /// `[A-Za-z0-9+/]`
    Base64,
    /// `[A-Za-z0-9-]`
    AlnumDash,
    /// `[0-9a-fA-F]`
    Hex,
    /// `[0-9a-f]`
    LowerHex,
    /// `[A-Z0-9]`
    UpperAlnum,
    /// `[0-9]`
    Digit,
    /// One of the listed bytes.
    OneOf(&'static [u8]),
}

impl Class {
    pub(crate) fn contains(self, byte: u8) -> bool {
        match self {
            Class::Alnum => byte.is_ascii_alphanumeric(),
            Class::Word => byte.is_ascii_alphanumeric() || byte == b'_',
            Class::Base64Url => byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-',
            Class::Base64UrlDot => {
                byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.')
            }
            Class::Base64 => byte.is_ascii_alphanumeric() || byte == b'+' || byte == b'/',
            Class::AlnumDash => byte.is_ascii_alphanumeric() || byte == b'-',
            Class::Hex => byte.is_ascii_hexdigit(),
            Class::LowerHex => byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte),
            Class::UpperAlnum => byte.is_ascii_uppercase() || byte.is_ascii_digit(),
            Class::Digit => byte.is_ascii_digit(),
            Class::OneOf(bytes) => bytes.contains(&byte),
        }
    }
}

/// One step of a shape.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part {
    /// These exact bytes (case-sensitive).
    Lit(&'static str),
    /// Between `min` and `max` bytes of the class, as many as there are.
    Run(Class, usize, usize),
    /// The next byte, if any, is not a word character (`\b` after a word character).
    End,
}

/// Unbounded run length.
pub(crate) const MANY: usize = usize::MAX;

/// A token shape; its first part is a [`Part::Lit`], the token's fixed prefix.
pub(crate) type Shape = &'static [Part];

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Matches `shape` at `start`; returns the end of the match.
fn match_at(text: &[u8], start: usize, shape: Shape) -> Option<usize> {
    let mut at = start;
    for part in shape {
        match *part {
            Part::Lit(literal) => {
                if !text[at..].starts_with(literal.as_bytes()) {
                    return None;
                }
                at += literal.len();
            }
            Part::Run(class, min, max) => {
                let len = text[at..]
                    .iter()
                    .take(max)
                    .take_while(|&&b| class.contains(b))
                    .count();
                if len < min {
                    return None;
                }
                at += len;
            }
            Part::End => {
                if text.get(at).is_some_and(|&b| is_word_byte(b)) {
                    return None;
                }
            }
        }
    }
    Some(at)
}

/// Finds every non-overlapping match of any of `shapes` in `text`, leftmost first; a match must
/// start at a word boundary when its prefix starts with a word character.
pub(crate) fn find(text: &str, shapes: &[Shape]) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut found: Vec<Range<usize>> = Vec::new();
    for shape in shapes {
        let Some(Part::Lit(prefix)) = shape.first() else {
            continue;
        };
        let needs_boundary = prefix.bytes().next().is_some_and(is_word_byte);
        // An occurrence inside the first run of an earlier attempt (`eyJeyJeyJ…`) ends that run
        // at the same place and so fares the same; skipping it keeps the search linear.
        let first_run = match shape.get(1) {
            Some(Part::Run(class, _, MANY)) if prefix.bytes().all(|b| class.contains(b)) => {
                Some(*class)
            }
            _ => None,
        };
        let mut skip_until = 0;
        for (start, _) in text.match_indices(prefix) {
            if start < skip_until || (needs_boundary && start > 0 && is_word_byte(bytes[start - 1]))
            {
                continue;
            }
            if let Some(class) = first_run {
                let run_start = start + prefix.len();
                skip_until = run_start
                    + bytes[run_start..]
                        .iter()
                        .take_while(|&&b| class.contains(b))
                        .count();
            }
            if let Some(end) = match_at(bytes, start, shape) {
                // A trailing dot ends the sentence, not the token.
                let end = start + text[start..end].trim_end_matches('.').len();
                found.push(start..end);
                skip_until = skip_until.max(end);
            }
        }
    }
    found.sort_by_key(|range| (range.start, usize::MAX - range.end));
    let mut kept: Vec<Range<usize>> = Vec::with_capacity(found.len());
    for range in found {
        if kept.last().is_none_or(|last| range.start >= last.end) {
            kept.push(range);
        }
    }
    kept
}

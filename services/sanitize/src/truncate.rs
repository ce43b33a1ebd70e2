//! Head-and-tail truncation of oversized tool output.

use crate::Truncation;

/// Keeps the first and last `preview` characters of a text longer than `max` characters, with a
/// line in between saying what was cut; see [`crate::Sanitizer::truncate`].
pub(crate) fn truncate(text: &str, max: usize, preview: usize) -> (String, Option<Truncation>) {
    // A text of at most `max` bytes has at most `max` characters: skip counting.
    if text.len() <= max {
        return (text.to_owned(), None);
    }
    let original_chars = text.chars().count();
    if original_chars <= max {
        return (text.to_owned(), None);
    }
    let original_lines = count_lines(text);
    let head_end = text
        .char_indices()
        .nth(preview)
        .map_or(text.len(), |(at, _)| at);
    let tail_start = if preview == 0 {
        text.len()
    } else {
        text.char_indices()
            .rev()
            .nth(preview - 1)
            .map_or(0, |(at, _)| at)
    };
    let marker = format!(
        "\n[… truncated: {original_chars} chars, {original_lines} lines in total; showing first {preview} and last {preview} chars …]\n"
    );
    let mut out = String::with_capacity(head_end + marker.len() + (text.len() - tail_start));
    out.push_str(&text[..head_end]);
    out.push_str(&marker);
    out.push_str(&text[tail_start..]);
    (
        out,
        Some(Truncation {
            original_chars,
            original_lines,
        }),
    )
}

/// Counts lines the way [`str::lines`] does: a final line needs no newline, an empty text has none.
pub(crate) fn count_lines(text: &str) -> usize {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    if text.is_empty() || text.ends_with('\n') {
        newlines
    } else {
        newlines + 1
    }
}

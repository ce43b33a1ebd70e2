//! Removal of tag-delimited blocks: system tags injected by agent hosts and `<private>` blocks.
//!
//! A hand-written scanner rather than a regex, because the closing tag must match the opening
//! tag's name, blocks of the same name may nest, and an unclosed block must swallow the rest.

use std::borrow::Cow;

use crate::PRIVATE_MARKER;

/// Tag names whose whole block is dropped; hosts inject them and they are not the user's words.
const SYSTEM_TAGS: &[&str] = &[
    "system-reminder",
    "system_instruction",
    "system-instruction",
    "system",
];

/// Tag name whose block the user asked never to be stored.
const PRIVATE_TAGS: &[&str] = &["private"];

/// Removes every system tag block; returns the text and how many blocks went.
pub(crate) fn strip_system_tags(text: &str) -> (Cow<'_, str>, u32) {
    replace_blocks(text, SYSTEM_TAGS, "")
}

/// Replaces every `<private>` block by [`PRIVATE_MARKER`]; returns the text and how many blocks went.
pub(crate) fn hide_private_blocks(text: &str) -> (Cow<'_, str>, u32) {
    replace_blocks(text, PRIVATE_TAGS, PRIVATE_MARKER)
}

/// A tag found at some byte offset.
struct Tag<'n> {
    name: &'n str,
    closing: bool,
    /// Byte offset just past the tag's `>`, or the end of the text when the tag never closes.
    end: usize,
}

/// Parses the tag starting at `at` (where `text[at..]` starts with `<`) if its name is one of `names`.
fn parse_tag<'n>(text: &str, at: usize, names: &[&'n str]) -> Option<Tag<'n>> {
    let bytes = text.as_bytes();
    let mut pos = at + 1;
    let closing = bytes.get(pos) == Some(&b'/');
    if closing {
        pos += 1;
    }
    let name_start = pos;
    while pos < bytes.len()
        && (bytes[pos].is_ascii_alphanumeric() || bytes[pos] == b'-' || bytes[pos] == b'_')
    {
        pos += 1;
    }
    let candidate = &text[name_start..pos];
    let name = names
        .iter()
        .copied()
        .find(|name| name.eq_ignore_ascii_case(candidate))?;
    // `<system>`, `<system attr="x">`, `<system/>` and `</system >` are tags; `<systemd>` is not,
    // and neither is `<system-reminder-x>` for the name `system-reminder` (the scan above ate it).
    match bytes.get(pos) {
        Some(b'>' | b'/' | b' ' | b'\t' | b'\r' | b'\n') | None => {}
        Some(_) => return None,
    }
    let end = text[pos..]
        .find('>')
        .map_or(text.len(), |offset| pos + offset + 1);
    Some(Tag { name, closing, end })
}

/// Replaces each block `<name …>…</name>` (ASCII case-insensitive, nesting of the same name
/// respected) by `replacement`; an unclosed block runs to the end of the text.
fn replace_blocks<'t>(text: &'t str, names: &[&str], replacement: &str) -> (Cow<'t, str>, u32) {
    let mut out = String::new();
    let mut copied = 0;
    let mut count = 0u32;
    let mut search = 0;
    while let Some(offset) = text[search..].find('<') {
        let start = search + offset;
        let Some(open) = parse_tag(text, start, names).filter(|tag| !tag.closing) else {
            search = start + 1;
            continue;
        };
        let self_closing = text[..open.end].ends_with("/>");
        let end = if self_closing {
            open.end
        } else {
            block_end(text, open.end, open.name, names)
        };
        out.push_str(&text[copied..start]);
        out.push_str(replacement);
        copied = end;
        search = end;
        count += 1;
        if end >= text.len() {
            break;
        }
    }
    if count == 0 {
        return (Cow::Borrowed(text), 0);
    }
    out.push_str(&text[copied..]);
    (Cow::Owned(out), count)
}

/// Finds the byte offset just past the tag closing a block named `name` whose body starts at `from`.
fn block_end(text: &str, from: usize, name: &str, names: &[&str]) -> usize {
    let mut depth = 1u32;
    let mut search = from;
    while let Some(offset) = text[search..].find('<') {
        let at = search + offset;
        match parse_tag(text, at, names) {
            Some(tag) if tag.name == name => {
                if tag.closing {
                    depth -= 1;
                    if depth == 0 {
                        return tag.end;
                    }
                } else if !text[..tag.end].ends_with("/>") {
                    depth += 1;
                }
                search = tag.end.max(at + 1);
            }
            _ => search = at + 1,
        }
        if search >= text.len() {
            break;
        }
    }
    // Fail closed: with no closing tag, the rest of the text belongs to the block.
    text.len()
}

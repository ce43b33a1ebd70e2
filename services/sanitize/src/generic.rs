//! Generic secret detection: secrets of shapes no rule in [`crate::secrets`] names.
//!
//! Two detectors, both judged by [`random_token`] rather than by a vendor's exact shape:
//!
//! - [`prefixed_tokens`]: a vendor-style prefix (one to four short words joined by `_` or `-`,
//!   such as `acme_live_`, `lin_api_`, `xoxq-` or `AGE-SECRET-KEY-`) followed by a long token
//!   that looks random. This is how most vendors shape their keys today, so it catches a new
//!   vendor's key bare in command output or in a file that was read.
//! - [`keyed_values`]: a value that looks random under a key whose name contains `key`, `token`,
//!   `secret`, `pass`, `credential` or `auth`, written as an env assignment (`LINEAR_KEY=…`), in
//!   JSON or YAML (`"key": "…"`, `token: …`), as a CLI flag (`--password …`) or as a header
//!   (`X-Api-Key: …`). The named-key rules only redact keys they recognise as secret; this one
//!   takes any such key but asks more of the value.
//!
//! What looks random is deliberately strict, because coding sessions are full of long
//! identifiers: a token needs at least [`MIN_BODY`] characters, letters and digits (or a real mix
//! of cases), enough distinct characters, and no run of ordinary words. Ids that are random but
//! public are kept: commit SHAs and other hex digests of hash lengths, UUIDs, lockfile integrity
//! strings (`sha512-…`), tool-call and message ids (`toolu_…`, `msg_…`), base64 that decodes to
//! text, paths and version strings.

use std::ops::Range;

/// Fewest characters a random body must have; shorter tokens are too often ordinary ids.
pub(crate) const MIN_BODY: usize = 20;

/// Longest a single word of a vendor prefix may be.
const MAX_PREFIX_WORD: usize = 12;

/// Most words a vendor prefix may have (`AGE-SECRET-KEY-` has three).
const MAX_PREFIX_WORDS: usize = 4;

/// Prefixes of public identifiers that are random but not secret: Anthropic's and OpenAI's
/// message, request, tool-call and file ids, Stripe's object ids, and digest algorithm names.
#[rustfmt::skip]
const PUBLIC_PREFIXES: &[&str] = &[
    "toolu", "srvtoolu", "msg", "req", "request", "call", "chatcmpl", "file", "run", "thread",
    "asst", "batch", "evt", "cus", "sub", "pi", "ch", "in", "price", "prod", "txn", "id", "uuid",
    "sha", "sha1", "sha256", "sha384", "sha512", "md5", "blake2b", "blake3", "commit", "hash",
    "digest", "checksum", "integrity", "rev", "oid", "tree", "blob", "trace", "span", "session",
    "compact", "agent", "task", "tmp", "temp", "test", "build", "cache", "chunk", "node", "v",
];

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

/// Shannon entropy of the bytes of `text`, in bits per character.
pub(crate) fn entropy(text: &[u8]) -> f64 {
    if text.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &byte in text {
        counts[usize::from(byte)] += 1;
    }
    let n = text.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// True when `token` (letters, digits and a few separators) reads as random rather than as an
/// identifier, a digest, a UUID, a version, a path or encoded text.
pub(crate) fn random_token(token: &str) -> bool {
    let bytes = token.as_bytes();
    let alnum = bytes.iter().filter(|b| b.is_ascii_alphanumeric()).count();
    if alnum < MIN_BODY
        || !bytes.iter().all(|&b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=' | b'.')
        })
    {
        return false;
    }
    // Base64 padding only ever ends a token.
    let trimmed = token.trim_end_matches('=');
    if trimmed.contains('=') {
        return false;
    }
    let upper = bytes.iter().filter(|b| b.is_ascii_uppercase()).count();
    let lower = bytes.iter().filter(|b| b.is_ascii_lowercase()).count();
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    if upper + lower == 0 {
        return false;
    }
    // Random letters switch case often; an identifier in camelCase switches once a word.
    let switches = bytes
        .windows(2)
        .filter(|w| {
            (w[0].is_ascii_uppercase() && w[1].is_ascii_lowercase())
                || (w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        })
        .count();
    if digits == 0 && switches * 4 < alnum {
        return false;
    }
    if is_hex(trimmed) || is_uuid(trimmed) || is_version(trimmed) || is_path(trimmed) {
        return false;
    }
    if has_words(trimmed) || decodes_to_text(trimmed) {
        return false;
    }
    // Random text of n characters uses nearly n distinct characters up to its alphabet's size;
    // repetitive or patterned text does not.
    let distinct = {
        let mut seen = [false; 128];
        bytes
            .iter()
            .for_each(|&b| seen[usize::from(b & 0x7f)] = true);
        seen.iter().filter(|&&s| s).count()
    };
    distinct * 2 >= alnum.min(40) && entropy(bytes) >= 3.5
}

/// Hex digests and SHAs are public (commits, lockfile checksums, content hashes), whatever
/// their length; an unknown vendor's hex key is caught only under a key or a prefix.
fn is_hex(token: &str) -> bool {
    // Dashes too: the tail of a UUID is hex and dashes.
    token.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Hex in the 8-4-4-4-12 layout of a UUID, or two or more UUIDs joined.
fn is_uuid(token: &str) -> bool {
    let groups: Vec<&str> = token.split('-').collect();
    groups.len() >= 5
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Dotted numbers with suffixes: `1.2.3-beta.4+build.567`.
fn is_version(token: &str) -> bool {
    token
        .split(['.', '-', '+'])
        .filter(|p| !p.is_empty())
        .all(|p| {
            p.bytes().all(|b| b.is_ascii_digit())
                || p.bytes().all(|b| b.is_ascii_alphabetic())
                || p.strip_prefix(['v', 'V'])
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        && token.contains('.')
}

/// More than one `/`-separated segment of names: a path, not base64.
fn is_path(token: &str) -> bool {
    let segments: Vec<&str> = token.split('/').filter(|s| !s.is_empty()).collect();
    segments.len() >= 2
        && segments
            .iter()
            .filter(|s| has_words(s) || s.len() < 12)
            .count()
            * 2
            >= segments.len()
}

/// True when ordinary words make up a good share of the token: four letters or more of one case
/// in a row that contain a vowel and no run of four consonants, as words do and random text of
/// that length rarely does.
fn has_words(token: &str) -> bool {
    let bytes = token.as_bytes();
    let mut word_chars = 0;
    let mut words = 0;
    let mut i = 0;
    while i < bytes.len() {
        // A word may start with a capital (camelCase), then runs lower case; or is all upper.
        let start = i;
        let mut j = i;
        if bytes[j].is_ascii_uppercase() {
            j += 1;
            if j < bytes.len() && bytes[j].is_ascii_uppercase() {
                while j < bytes.len() && bytes[j].is_ascii_uppercase() {
                    j += 1;
                }
            } else {
                while j < bytes.len() && bytes[j].is_ascii_lowercase() {
                    j += 1;
                }
            }
        } else {
            while j < bytes.len() && bytes[j].is_ascii_lowercase() {
                j += 1;
            }
        }
        if j == start {
            i += 1;
            continue;
        }
        if j - start >= 4 && is_wordlike(&bytes[start..j]) {
            word_chars += j - start;
            words += 1;
        }
        i = j;
    }
    let alnum = bytes
        .iter()
        .filter(|b| b.is_ascii_alphanumeric())
        .count()
        .max(1);
    words >= 2 && word_chars * 2 >= alnum || word_chars * 10 >= alnum * 7
}

fn is_wordlike(letters: &[u8]) -> bool {
    let is_vowel = |b: &u8| {
        matches!(
            b.to_ascii_lowercase(),
            b'a' | b'e' | b'i' | b'o' | b'u' | b'y'
        )
    };
    let vowels = letters.iter().filter(|b| is_vowel(b)).count();
    let mut run = 0;
    let mut max_run = 0;
    for b in letters {
        run = if is_vowel(b) { 0 } else { run + 1 };
        max_run = max_run.max(run);
    }
    vowels * 5 >= letters.len() && max_run <= 3
}

/// True when the token is base64 of mostly printable text (a sentence, JSON, a config file).
fn decodes_to_text(token: &str) -> bool {
    let Some(decoded) = crate::parsers::decode_base64url(token.trim_end_matches('=').as_bytes())
    else {
        return false;
    };
    if decoded.len() < 12 {
        return false;
    }
    let printable = decoded
        .iter()
        .filter(|&&b| b.is_ascii_graphic() || b == b' ' || b == b'\n' || b == b'\t')
        .count();
    let letters_or_space = decoded
        .iter()
        .filter(|&&b| b.is_ascii_alphabetic() || b == b' ')
        .count();
    printable * 100 >= decoded.len() * 95 && letters_or_space * 10 >= decoded.len() * 6
}

/// Spans of tokens that are a vendor-style prefix followed by a random body; the whole token is
/// redacted, prefix included, since the prefix alone says whose key leaked and nothing more.
pub(crate) fn prefixed_tokens(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_token_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_token_byte(bytes[i]) {
            i += 1;
        }
        let end = i;
        if end - start > MIN_BODY && prefixed_secret(&text[start..end], bytes, start, end) {
            spans.push(start..end);
        }
    }
    spans
}

/// Judges one token found by [`prefixed_tokens`] at `start..end` of `bytes`.
fn prefixed_secret(token: &str, bytes: &[u8], start: usize, end: usize) -> bool {
    // A token inside a path, a domain or a file name is a name, not a key.
    let before = start.checked_sub(1).map(|i| bytes[i]);
    let after = bytes.get(end).copied();
    if matches!(before, Some(b'/' | b'\\' | b'.' | b'@' | b'#'))
        || matches!(after, Some(b'/' | b'\\' | b'@'))
        || (after == Some(b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_alphanumeric))
    {
        return false;
    }
    let first = token.as_bytes()[0];
    if !first.is_ascii_alphabetic() {
        return false;
    }
    let mut prefix_words = 0;
    let mut at = 0;
    for (offset, byte) in token.bytes().enumerate() {
        if byte != b'_' && byte != b'-' {
            continue;
        }
        let word = &token[at..offset];
        if word.is_empty()
            || word.len() > MAX_PREFIX_WORD
            || !word.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return false;
        }
        prefix_words += 1;
        if prefix_words == 1 && PUBLIC_PREFIXES.iter().any(|p| word.eq_ignore_ascii_case(p)) {
            return false;
        }
        let body = &token[offset + 1..];
        if body.len() >= MIN_BODY && random_token(body) {
            return true;
        }
        if prefix_words == MAX_PREFIX_WORDS {
            return false;
        }
        at = offset + 1;
    }
    false
}

/// Words in a key that make a random value under it a secret.
pub(crate) const KEY_WORDS: &[&str] = &["key", "token", "secret", "pass", "credential", "auth"];

/// Spans of random values under keys naming a secret, in any of the usual notations.
pub(crate) fn keyed_values(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_key_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let key_start = i;
        while i < bytes.len() && is_key_byte(bytes[i]) {
            i += 1;
        }
        let key = &bytes[key_start..i];
        if key.len() > 64 || !names_secret(key) {
            continue;
        }
        let flag = key.starts_with(b"--") || key.starts_with(b"-");
        if let Some(value) = value_after(bytes, i, flag)
            && spans.last().is_none_or(|last| last.end <= value.start)
            && random_token(&text[value.clone()])
        {
            i = value.end;
            spans.push(value);
        }
    }
    spans
}

fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.')
}

fn names_secret(key: &[u8]) -> bool {
    let lower = key.to_ascii_lowercase();
    KEY_WORDS
        .iter()
        .any(|word| lower.windows(word.len()).any(|w| w == word.as_bytes()))
}

/// The value following a key that ends at `at`: a closing quote, blanks, an operator (`=`, `:`,
/// `:=`, or for a flag a blank), blanks, an opening quote, then a run of token characters.
fn value_after(bytes: &[u8], mut at: usize, flag: bool) -> Option<Range<usize>> {
    let skip_quote = |at: usize| {
        if matches!(bytes.get(at), Some(b'"' | b'\'')) {
            at + 1
        } else {
            at
        }
    };
    let skip_blanks = |mut at: usize| {
        while matches!(bytes.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        at
    };
    // A JSON key inside a string is written `\"key\": \"value\"`.
    if bytes.get(at) == Some(&b'\\') {
        at += 1;
    }
    at = skip_quote(at);
    let blanks = skip_blanks(at);
    match bytes.get(blanks) {
        Some(b'=') => at = blanks + 1,
        Some(b':') => at = blanks + 1 + usize::from(bytes.get(blanks + 1) == Some(&b'=')),
        _ if flag && blanks > at => at = blanks,
        _ => return None,
    }
    at = skip_blanks(at);
    if bytes.get(at) == Some(&b'\\') {
        at += 1;
    }
    at = skip_quote(at);
    let start = at;
    while at < bytes.len()
        && (bytes[at].is_ascii_alphanumeric()
            || matches!(bytes[at], b'_' | b'-' | b'+' | b'/' | b'=' | b'.'))
    {
        at += 1;
    }
    // A trailing full stop ends a sentence, not the value.
    while at > start && bytes[at - 1] == b'.' {
        at -= 1;
    }
    (at > start).then_some(start..at)
}

/// Redacts a JSON string that looks random under a key naming a secret (`{"key": "…"}`), which
/// the named-key judgement in [`crate::keys`] does not take; returns whether it did.
pub(crate) fn redact_json_field(key: &str, value: &mut serde_json::Value) -> bool {
    let serde_json::Value::String(text) = value else {
        return false;
    };
    if !names_secret(key.as_bytes()) || !random_token(text) {
        return false;
    }
    *value = serde_json::Value::String(format!("{}generic-keyed]", crate::REDACTED_PREFIX));
    true
}

#[cfg(test)]
mod tests {
    use crate::{Config, Sanitizer};

    fn clean(text: &str) -> String {
        Sanitizer::new(&Config::default())
            .unwrap()
            .clean_text(text)
            .0
    }

    /// A fixed random-looking body: 40 characters of mixed case and digits.
    const BODY: &str = "Zq8vR2mXpL4tN7wKc9HbF3sJdY6gA1eUoT5iWnQx";

    #[track_caller]
    fn assert_redacted(text: &str, secret: &str) {
        let cleaned = clean(text);
        assert!(
            !cleaned.contains(secret),
            "{secret} survived in {cleaned:?}"
        );
        assert!(cleaned.contains("[REDACTED:"), "{cleaned:?}");
    }

    #[track_caller]
    fn assert_kept(text: &str) {
        assert_eq!(clean(text), text, "ordinary text was redacted");
    }

    #[test]
    fn an_unknown_vendors_prefixed_key_is_redacted_bare() {
        for prefix in ["lin_api_", "acme_live_", "xoxq-", "zz9-prod-"] {
            let key = format!("{prefix}{BODY}");
            assert_redacted(&format!("created key {key}\ndone"), &key[prefix.len()..]);
        }
    }

    #[test]
    fn an_age_secret_key_line_is_redacted() {
        // The real shape: Bech32 upper case, digits and letters mixed.
        let key = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZLD9XQRE8C4KP7S3H5N0WUMJ6TVAQ2LGXZRSQ4P8D0F";
        assert_redacted(
            &format!("# created: 2024-01-01\n# public key: age1xyz\n{key}\n"),
            &key[15..],
        );
    }

    #[test]
    fn a_random_value_under_any_key_naming_a_secret_is_redacted() {
        let value = "k3Jd9sLq2Wm8ZxP0vRt7NbY4cHg6Fa1Q";
        for text in [
            format!("LINEAR_KEY={value}"),
            format!(r#"{{"key": "{value}"}}"#),
            format!("auth_code: {value}"),
            format!("mytool login --password {value}"),
            format!("curl -H 'X-Api-Key: {value}' https://example.com"),
            format!("VENDOR_CREDENTIAL := \"{value}\""),
        ] {
            assert_redacted(&text, value);
        }
    }

    #[test]
    fn a_random_value_under_key_in_json_is_redacted() {
        let sanitizer = Sanitizer::new(&Config::default()).unwrap();
        let mut value = serde_json::json!({"key": "k3Jd9sLq2Wm8ZxP0vRt7NbY4cHg6Fa1Q", "name": "k3Jd9sLq2Wm8ZxP0vRt7NbY4cHg6Fa1Q"});
        let report = sanitizer.clean_json(&mut value);
        assert_eq!(report.secrets_redacted, 1);
        assert_eq!(value["key"], "[REDACTED:generic-keyed]");
        assert_eq!(value["name"], "k3Jd9sLq2Wm8ZxP0vRt7NbY4cHg6Fa1Q");
    }

    #[test]
    fn git_shas_are_kept() {
        assert_kept("commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: someone");
        assert_kept("git_sha=9fceb02d0ae598e95dc970b74767f19372d61af8");
        assert_kept("cache_key: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
        assert_kept("commit_9fceb02d0ae598e95dc970b74767f19372d61af8 merged");
    }

    #[test]
    fn uuids_are_kept() {
        assert_kept("session_id: 258c7280-ae70-4798-800f-63464d01a85d");
        assert_kept("idempotency_key=258c7280-ae70-4798-800f-63464d01a85d");
        assert_kept("run-258c7280-ae70-4798-800f-63464d01a85d");
    }

    #[test]
    fn lockfile_hashes_are_kept() {
        assert_kept(
            r#""integrity": "sha512-Wd3bUJvuqT5CWt0CzJr3cWuGkNhQTcdjJ5kmGzKqoqQ5bqbWwcdLfJ0ALmvpcL7fMoTtrjwYz0cnXTfNHyfR0g==""#,
        );
        assert_kept(
            "checksum = \"3c69f8df4ff8a2e41a78dcc5b5cb0b1d2e1cbdb0a8d9b6e5a4d9d3cb0d4e5f6a\"",
        );
    }

    #[test]
    fn base64_of_a_sentence_is_kept() {
        // "This is a perfectly ordinary sentence about tokens." in base64.
        assert_kept(
            "MESSAGE_KEY=VGhpcyBpcyBhIHBlcmZlY3RseSBvcmRpbmFyeSBzZW50ZW5jZSBhYm91dCB0b2tlbnMu",
        );
    }

    #[test]
    fn paths_identifiers_and_versions_are_kept() {
        assert_kept("token_file: /home/dev/.config/acme/credentials_v2/token_store2.json");
        assert_kept("see services/sanitize/src/generic_tests_2024/fixtures_for_tokens.rs");
        assert_kept("fn parse_auth_header_value_with_fallback2(input: &str)");
        assert_kept("let accessTokenRefreshHandlerFactory2 = make();");
        assert_kept("auth_version: 1.24.3-beta.7+build.20240101");
        assert_kept("my_feature_flag_name_for_rollout_2024 enabled");
        assert_kept(
            "tool_use_id toolu_01XyZabcDEF234ghiJKL567mno and msg_01AbCdEfGhIjKlMnOpQrStUv",
        );
    }

    #[test]
    fn clean_excerpt_redacts_a_secret_that_straddles_the_cut() {
        let sanitizer = Sanitizer::new(&Config::default()).unwrap();
        let key = format!("acme_live_{BODY}");
        let mut payload = "x".repeat(2048 - 20);
        payload.push(' ');
        payload.push_str(&key);
        payload.push_str(" trailing");
        let excerpt = sanitizer.clean_excerpt(payload.as_bytes(), 2048);
        assert!(excerpt.len() <= 2048);
        // Before the fix the first 19 characters of the key were kept: enough to see, too short
        // to be recognised once cut.
        assert!(!excerpt.contains(&key[..15]), "{}", &excerpt[2000..]);
    }
}

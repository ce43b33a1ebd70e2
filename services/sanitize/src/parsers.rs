//! Hand-written finders for secrets that sit in a little syntax: `Authorization` headers,
//! bearer tokens, passwords in URLs, `.netrc` lines, SQL password clauses, `mysql -p…` and
//! `sshpass -p …`, Telegram and Discord bot tokens.
//!
//! Most are equivalent to a short regex (quoted in their documentation), written out because the
//! regexes' case-insensitive literals make them slow to compile, and the hook client compiles
//! whatever it uses once per process. Each finder reports spans in order, never overlapping, and
//! resumes after its last match the way a regex search does.

use std::ops::Range;

use crate::keys;
use crate::shapes::Class;

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

fn is_blank(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

/// The end of the run of bytes satisfying `keep` starting at `at`.
fn run(text: &[u8], at: usize, keep: impl Fn(u8) -> bool) -> usize {
    at + text
        .get(at..)
        .unwrap_or_default()
        .iter()
        .take_while(|&&b| keep(b))
        .count()
}

/// Start offsets of `needle` (lower-case ASCII letters first) in `text`, ASCII case-insensitively.
fn find_ci(text: &[u8], needle: &[u8]) -> Vec<usize> {
    let Some(&first) = needle.first() else {
        return Vec::new();
    };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), text)
        .filter(|&at| starts_with_ci(text, at, needle))
        .collect()
}

/// True when `text[at..]` starts with `word`, ASCII case-insensitively.
fn starts_with_ci(text: &[u8], at: usize, word: &[u8]) -> bool {
    text.get(at..at + word.len())
        .is_some_and(|found| found.eq_ignore_ascii_case(word))
}

/// `(?i)\bbearer[\t ]+(?P<s>[A-Za-z0-9._~+/-]{8,}=*)`, where the token must mix letters and
/// digits (so `Bearer authentication` is prose).
pub(crate) fn bearer_tokens(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut next = 0;
    for start in find_ci(bytes, b"bearer") {
        if start < next || (start > 0 && is_word_byte(bytes[start - 1])) {
            continue;
        }
        let token_start = run(bytes, start + 6, is_blank);
        if token_start == start + 6 {
            continue;
        }
        let token_end = run(bytes, token_start, |b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'-')
        });
        if token_end - token_start < 8 {
            continue;
        }
        let token_end = run(bytes, token_end, |b| b == b'=');
        next = token_end;
        let token = &text[token_start..token_end];
        if keys::looks_random(token) && !keys::is_placeholder(token) {
            spans.push(token_start..token_end);
        }
    }
    spans
}

/// Schemes of the `Authorization` header after which any value is a credential.
const AUTH_SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "bot",
    "negotiate",
    "ntlm",
    "apikey",
    "api-key",
    "sso-key",
    "hmac",
    "key",
];

/// `(?i)authorization["']?[\t ]*[:=][\t ]*["']?(?:(?P<scheme>bearer|basic|…)[\t ]+)?(?P<s>[^ \t\r\n"',;\\]+)`:
/// after a scheme any value is redacted; without one, only a token-shaped value (so that
/// `authorization = header[1]` stays).
pub(crate) fn authorization_headers(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut next = 0;
    for start in find_ci(bytes, b"authorization") {
        if start < next {
            continue;
        }
        let mut at = start + "authorization".len();
        if matches!(bytes.get(at), Some(b'"' | b'\'')) {
            at += 1;
        }
        at = run(bytes, at, is_blank);
        if !matches!(bytes.get(at), Some(b':' | b'=')) {
            continue;
        }
        at = run(bytes, at + 1, is_blank);
        if matches!(bytes.get(at), Some(b'"' | b'\'')) {
            at += 1;
        }
        let is_value_byte = |b: u8| {
            !matches!(
                b,
                b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'' | b',' | b';' | b'\\'
            )
        };
        let word_end = run(bytes, at, |b| b.is_ascii_alphabetic() || b == b'-');
        let scheme = AUTH_SCHEMES
            .iter()
            .any(|scheme| bytes[at..word_end].eq_ignore_ascii_case(scheme.as_bytes()));
        let after_scheme = run(bytes, word_end, is_blank);
        let (value_start, scheme) = if scheme
            && after_scheme > word_end
            && run(bytes, after_scheme, is_value_byte) > after_scheme
        {
            (after_scheme, true)
        } else {
            (at, false)
        };
        let value_end = run(bytes, value_start, is_value_byte);
        if value_end == value_start {
            continue;
        }
        next = value_end;
        let value = &text[value_start..value_end];
        if keys::is_placeholder(value) {
            continue;
        }
        let token_shaped = value.len() >= 16
            && keys::looks_random(value)
            && value.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'/' | b'=' | b'~')
            });
        if scheme || token_shaped {
            spans.push(value_start..value_end);
        }
    }
    spans
}

/// `(?i)\b[a-z][a-z0-9+.-]{1,30}://[^ \t\r\n:/@?#'"<>\[\]]*:(?P<s>[^ \t\r\n/?#'"<>]+)@[a-z0-9\[_%-]`:
/// the password of `scheme://user:password@host`, which may itself hold `@` or `:` (the last `@`
/// before the path ends it); the scheme, the user and the host are kept.
pub(crate) fn url_passwords(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut next = 0;
    for (marker, _) in text.match_indices("://") {
        // The scheme: a letter at a word boundary, then 1 to 30 of `[a-z0-9+.-]`, leftmost.
        let is_scheme_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-');
        let mut run_start = marker;
        while run_start > 0 && is_scheme_byte(bytes[run_start - 1]) {
            run_start -= 1;
        }
        let scheme_start = (run_start.max(next)..marker).find(|&at| {
            bytes[at].is_ascii_alphabetic()
                && (at == 0 || !is_word_byte(bytes[at - 1]))
                && (2..=31).contains(&(marker - at))
        });
        if scheme_start.is_none() {
            continue;
        }
        let user_end = run(bytes, marker + 3, |b| {
            !matches!(
                b,
                b' ' | b'\t'
                    | b'\r'
                    | b'\n'
                    | b':'
                    | b'/'
                    | b'@'
                    | b'?'
                    | b'#'
                    | b'\''
                    | b'"'
                    | b'<'
                    | b'>'
                    | b'['
                    | b']'
            )
        });
        if bytes.get(user_end) != Some(&b':') {
            continue;
        }
        let password_start = user_end + 1;
        let region_end = run(bytes, password_start, |b| {
            !matches!(
                b,
                b' ' | b'\t' | b'\r' | b'\n' | b'/' | b'?' | b'#' | b'\'' | b'"' | b'<' | b'>'
            )
        });
        let is_host_byte =
            |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'[' | b'_' | b'%' | b'-');
        let Some(at_sign) = (password_start + 1..region_end.min(bytes.len()))
            .rev()
            .find(|&at| bytes[at] == b'@' && bytes.get(at + 1).is_some_and(|&b| is_host_byte(b)))
        else {
            continue;
        };
        next = at_sign + 2;
        if !keys::is_placeholder(&text[password_start..at_sign]) {
            spans.push(password_start..at_sign);
        }
    }
    spans
}

/// `(?i)\b(?:machine|login)[\t ]+[^ \t\r\n]+[ \t\r\n]+password[\t ]+["']?(?P<s>[^ \t\r\n"']+)`.
pub(crate) fn netrc_passwords(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut starts: Vec<(usize, usize)> = find_ci(bytes, b"machine")
        .into_iter()
        .map(|at| (at, 7))
        .chain(find_ci(bytes, b"login").into_iter().map(|at| (at, 5)))
        .collect();
    starts.sort_unstable();
    let mut spans = Vec::new();
    let mut next = 0;
    for (start, len) in starts {
        if start < next || (start > 0 && is_word_byte(bytes[start - 1])) {
            continue;
        }
        let name_start = run(bytes, start + len, is_blank);
        let name_end = run(bytes, name_start, |b| {
            !matches!(b, b' ' | b'\t' | b'\r' | b'\n')
        });
        if name_start == start + len || name_end == name_start {
            continue;
        }
        let keyword = run(bytes, name_end, |b| {
            matches!(b, b' ' | b'\t' | b'\r' | b'\n')
        });
        if keyword == name_end || !starts_with_ci(bytes, keyword, b"password") {
            continue;
        }
        let mut value_start = run(bytes, keyword + 8, is_blank);
        if value_start == keyword + 8 {
            continue;
        }
        if matches!(bytes.get(value_start), Some(b'"' | b'\'')) {
            value_start += 1;
        }
        let value_end = run(bytes, value_start, |b| {
            !matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'')
        });
        if value_end == value_start {
            continue;
        }
        next = value_end;
        if !keys::is_placeholder(&text[value_start..value_end]) {
            spans.push(value_start..value_end);
        }
    }
    spans
}

/// `(?i)(?:identified[\t ]+by|with[\t ]+(?:encrypted[\t ]+)?password)[\t ]+['"](?P<s>[^'"\r\n]+)['"]`.
pub(crate) fn sql_passwords(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let after_words = |mut at: usize, words: &[&[u8]]| -> Option<usize> {
        for word in words {
            if !starts_with_ci(bytes, at, word) {
                return None;
            }
            let blanks_end = run(bytes, at + word.len(), is_blank);
            if blanks_end == at + word.len() {
                return None;
            }
            at = blanks_end;
        }
        Some(at)
    };
    let mut quote_starts: Vec<usize> = find_ci(bytes, b"identified")
        .into_iter()
        .filter_map(|at| after_words(at, &[b"identified", b"by"]))
        .collect();
    for at in find_ci(bytes, b"with") {
        if let Some(found) = after_words(at, &[b"with", b"password"])
            .or_else(|| after_words(at, &[b"with", b"encrypted", b"password"]))
        {
            quote_starts.push(found);
        }
    }
    quote_starts.sort_unstable();
    let mut spans = Vec::new();
    let mut next = 0;
    for quote in quote_starts {
        if quote < next || !matches!(bytes.get(quote), Some(b'"' | b'\'')) {
            continue;
        }
        let value_end = run(bytes, quote + 1, |b| {
            !matches!(b, b'"' | b'\'' | b'\r' | b'\n')
        });
        if value_end == quote + 1 || !matches!(bytes.get(value_end), Some(b'"' | b'\'')) {
            continue;
        }
        next = value_end + 1;
        if !keys::is_placeholder(&text[quote + 1..value_end]) {
            spans.push(quote + 1..value_end);
        }
    }
    spans
}

/// `(?:\b|bot)(?P<s>[0-9]{8,10}:AA[A-Za-z0-9_-]{33,})`, including inside the Bot API's URLs.
pub(crate) fn telegram_tokens(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut next = 0;
    for (marker, _) in text.match_indices(":AA") {
        let mut digits_start = marker;
        while digits_start > 0 && bytes[digits_start - 1].is_ascii_digit() {
            digits_start -= 1;
        }
        let bounded = digits_start == 0
            || !is_word_byte(bytes[digits_start - 1])
            || text[..digits_start].ends_with("bot");
        if digits_start < next || !bounded || !(8..=10).contains(&(marker - digits_start)) {
            continue;
        }
        let end = run(bytes, marker + 3, |b| Class::Base64Url.contains(b));
        if end - (marker + 3) >= 33 {
            next = end;
            spans.push(digits_start..end);
        }
    }
    spans
}

/// True when a dot at `at` starts a Discord token's six-character middle segment, with room for
/// the id before it and the signature after it.
pub(crate) fn discord_middle(text: &[u8], at: usize) -> bool {
    let base64url = |b: u8| Class::Base64Url.contains(b);
    text.get(at + 7) == Some(&b'.')
        && text[at + 1..at + 7].iter().all(|&b| base64url(b))
        && text[..at]
            .iter()
            .rev()
            .take(23)
            .filter(|&&b| base64url(b))
            .count()
            == 23
        && text[at + 8..]
            .iter()
            .take(27)
            .filter(|&&b| base64url(b))
            .count()
            == 27
}

/// `\b(?P<id>[MNO][A-Za-z0-9_-]{23,27})\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}`, where the id
/// segment must decode to the bot's numeric id.
pub(crate) fn discord_tokens(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let base64url = |b: u8| Class::Base64Url.contains(b);
    let mut spans = Vec::new();
    let mut next = 0;
    for (dot, _) in text.match_indices('.') {
        if dot < next || !discord_middle(bytes, dot) {
            continue;
        }
        // The id is at most 28 characters long, so look no further back than that.
        let reach = bytes[dot.saturating_sub(28)..dot]
            .iter()
            .rev()
            .take_while(|&&b| base64url(b))
            .count();
        let Some(id_start) = ((dot - reach).max(next)..dot).find(|&at| {
            matches!(bytes[at], b'M' | b'N' | b'O')
                && (at == 0 || !is_word_byte(bytes[at - 1]))
                && (24..=28).contains(&(dot - at))
        }) else {
            continue;
        };
        let signature_end = dot
            + 8
            + bytes[dot + 8..]
                .iter()
                .take(40)
                .take_while(|&&b| base64url(b))
                .count();
        if signature_end - (dot + 8) < 27 {
            continue;
        }
        next = signature_end;
        let decoded = decode_base64url(&bytes[id_start..dot]);
        if decoded
            .as_ref()
            .is_some_and(|id| id.len() >= 17 && id.iter().all(u8::is_ascii_digit))
        {
            spans.push(id_start..signature_end);
        }
    }
    spans
}

/// Decodes unpadded base64 or base64url; `None` on a byte outside both alphabets.
pub(crate) fn decode_base64url(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0u32;
    for &byte in text {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from(buffer >> bits).ok()?);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Passwords given on a command line as `-p`: glued to the flag for the MySQL clients
/// (`mysql -u root -pS3cret`; a bare `-p` prompts instead), glued or separate for `sshpass`.
pub(crate) fn command_line_passwords(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut next = 0;
    let mut commands: Vec<(usize, bool)> = find_ci(bytes, b"mysql")
        .into_iter()
        .map(|at| (at, false))
        .collect();
    commands.extend(find_ci(bytes, b"sshpass").into_iter().map(|at| (at, true)));
    commands.sort_unstable();
    for (command, separate_allowed) in commands {
        if command < next || (command > 0 && is_word_byte(bytes[command - 1])) {
            continue;
        }
        let line_end = run(bytes, command, |b| b != b'\n');
        let flag = (command..line_end.saturating_sub(1))
            .find(|&at| {
                is_blank(bytes[at]) && bytes[at + 1] == b'-' && bytes.get(at + 2) == Some(&b'p')
            })
            .map(|at| at + 3);
        let Some(flag) = flag else {
            // Later commands on this line would search the same, flag-less rest of it.
            next = line_end;
            continue;
        };
        let value_start = match bytes.get(flag) {
            Some(b' ' | b'\t') if separate_allowed => run(bytes, flag, is_blank),
            Some(b) if !matches!(b, b' ' | b'\t' | b'\r' | b'\n') => flag,
            _ => continue,
        };
        let quoted = matches!(bytes.get(value_start), Some(b'"' | b'\''));
        let inner_start = value_start + usize::from(quoted);
        let value_end = if quoted {
            run(bytes, inner_start, |b| {
                b != bytes[value_start] && b != b'\n'
            })
        } else {
            run(bytes, value_start, |b| {
                !matches!(b, b' ' | b'\t' | b'\r' | b'\n')
            })
        };
        next = value_end;
        let value = &text[inner_start..value_end];
        // A value starting with a dash is the next flag: `-p` alone makes the client prompt.
        if !value.is_empty() && !value.starts_with('-') && !keys::is_placeholder(value) {
            spans.push(inner_start..value_end);
        }
    }
    spans
}

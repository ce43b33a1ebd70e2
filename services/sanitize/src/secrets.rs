//! Secret redaction: a table of rules, each a regex plus a judgement on its matches.
//!
//! Cost model: a single ASCII case-insensitive Aho-Corasick pass over the text finds the literal
//! markers each rule needs (`ghp_`, `eyJ`, `PRIVATE KEY`, `token`…); only rules whose marker
//! occurs run, and each rule's regex is compiled on first use and then kept for the life of the
//! process. A text without secret-ish markers therefore costs one linear scan and nothing else.
//!
//! Rules run in table order over the output of the previous rule, specific shapes first, so a
//! token inside an assignment is reported by its provider kind and the assignment rule then sees
//! `[REDACTED:…]`, which every rule treats as already done (this is also what makes cleaning
//! idempotent).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex};

use crate::keys::{self, Assignment};

/// Every redaction starts with this, and no rule redacts text that contains it.
pub(crate) const REDACTED_PREFIX: &str = "[REDACTED:";

/// Decides what part of a match to redact, if any.
type Accept = fn(&str, &Captures<'_>) -> Option<Range<usize>>;

/// One secret shape.
struct Rule {
    /// Written into the replacement, `[REDACTED:<kind>]`.
    kind: &'static str,
    /// Literals (ASCII case-insensitive) of which at least one must occur for the rule to be
    /// able to match; empty means the rule always runs.
    markers: &'static [&'static str],
    /// The regex; by convention the group `s`, when present, is the secret itself.
    pattern: &'static str,
    accept: Accept,
}

/// Markers of the generic key-based rules: a key must contain one of these to name a secret.
const KEY_MARKERS: &[&str] = &["pass", "pw", "secret", "token", "key", "auth", "cred"];

/// The rules, most specific first.
const RULES: &[Rule] = &[
    Rule {
        kind: "private-key",
        markers: &["PRIVATE KEY"],
        // A whole PEM block (RSA, EC, DSA, OPENSSH, PGP, ENCRYPTED, PKCS#8), with real newlines or
        // JSON `\n` escapes; without an END line, the base64 and header lines that follow.
        pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.*?)-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,\\ \t\r\n-]*)",
        accept: whole,
    },
    Rule {
        kind: "private-key",
        markers: &["PRIVATE KEY"],
        // The tail of a PEM block whose BEGIN line was cut off.
        pattern: r"(?:[A-Za-z0-9+/=]{16,}(?:\r?\n|\\r\\n|\\n))+-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
        accept: whole,
    },
    Rule { kind: "jwt", markers: &["eyJ"], pattern: r"(?-u:\b)eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{10,}", accept: whole },
    Rule {
        kind: "aws-access-key",
        markers: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)",
        accept: whole,
    },
    Rule {
        kind: "aws-secret-key",
        markers: &["secret_access", "secretaccess", "secret-access", "aws_secret", "awssecret", "aws-secret"],
        pattern: r#"(?i)(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)["']?[\t ]*[:=][\t ]*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        accept: group_s,
    },
    Rule { kind: "gcp-api-key", markers: &["AIza"], pattern: r"(?-u:\b)AIza[0-9A-Za-z_-]{35}", accept: whole },
    Rule { kind: "gcp-oauth-secret", markers: &["GOCSPX-"], pattern: r"(?-u:\b)GOCSPX-[A-Za-z0-9_-]{24,}", accept: whole },
    Rule { kind: "gcp-oauth-token", markers: &["ya29."], pattern: r"(?-u:\b)ya29\.[A-Za-z0-9_-]{20,}", accept: whole },
    Rule {
        kind: "azure-storage-key",
        markers: &["AccountKey", "SharedAccessKey"],
        pattern: r"(?i)(?:AccountKey|SharedAccessKey)[\t ]*=[\t ]*(?P<s>[A-Za-z0-9+/]{20,}={0,2})",
        accept: group_s,
    },
    Rule { kind: "azure-sas-token", markers: &["sig="], pattern: r"[?&]sig=(?P<s>[A-Za-z0-9%+/]{20,}(?:%3[Dd]|=){0,2})", accept: group_s },
    Rule {
        kind: "github-token",
        markers: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        pattern: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        accept: whole,
    },
    Rule {
        kind: "gitlab-token",
        markers: &[
            "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glsoat-", "glft-", "glimt-", "glagent-", "glffct-",
            "GR1348941",
        ],
        pattern: r"(?-u:\b)(?:gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*|GR1348941[A-Za-z0-9_-]{20,})",
        accept: whole,
    },
    Rule {
        kind: "slack-token",
        markers: &["xoxb-", "xoxp-", "xoxa-", "xoxo-", "xoxs-", "xoxr-", "xoxe", "xapp-"],
        pattern: r"(?-u:\b)(?:xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})",
        accept: whole,
    },
    Rule {
        kind: "slack-webhook",
        markers: &["hooks.slack.com"],
        pattern: r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{20,})",
        accept: group_s,
    },
    Rule {
        kind: "discord-webhook",
        markers: &["/api/webhooks/"],
        pattern: r"(?i)discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/(?P<s>[A-Za-z0-9_-]{30,})",
        accept: group_s,
    },
    Rule {
        kind: "stripe-key",
        markers: &["sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"],
        pattern: r"(?-u:\b)(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
        accept: whole,
    },
    Rule { kind: "anthropic-key", markers: &["sk-ant-"], pattern: r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}", accept: whole },
    Rule {
        kind: "openai-key",
        markers: &["sk-"],
        // Dashes are allowed only after a known infix, so `sk-spinner-circle-bounce` stays.
        pattern: r"(?-u:\b)sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})",
        accept: random,
    },
    Rule { kind: "huggingface-token", markers: &["hf_"], pattern: r"(?-u:\b)hf_[A-Za-z0-9]{30,}", accept: random_or_mixed_case },
    Rule { kind: "npm-token", markers: &["npm_"], pattern: r"(?-u:\b)npm_[A-Za-z0-9]{36,}", accept: random },
    Rule { kind: "pypi-token", markers: &["pypi-AgE"], pattern: r"(?-u:\b)pypi-AgE[A-Za-z0-9_-]{50,}", accept: whole },
    Rule {
        kind: "sendgrid-key",
        markers: &["SG."],
        pattern: r"(?-u:\b)SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
        accept: whole,
    },
    Rule { kind: "twilio-api-key", markers: &["SK"], pattern: r"(?-u:\b)SK[0-9a-fA-F]{32}(?-u:\b)", accept: whole },
    Rule {
        kind: "twilio-auth-token",
        markers: &["twilio"],
        pattern: r#"(?i)twilio[_-]?auth[_-]?token["']?[\t ]*[:=][\t ]*["']?(?P<s>[0-9a-f]{32})"#,
        accept: group_s,
    },
    Rule {
        kind: "shopify-token",
        markers: &["shpat_", "shpss_", "shpca_", "shppa_"],
        pattern: r"(?-u:\b)shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
        accept: whole,
    },
    Rule {
        kind: "digitalocean-token",
        markers: &["dop_v1_", "doo_v1_", "dor_v1_"],
        pattern: r"(?-u:\b)do[opr]_v1_[a-f0-9]{64}",
        accept: whole,
    },
    Rule { kind: "databricks-token", markers: &["dapi"], pattern: r"(?-u:\b)dapi[a-f0-9]{32}(?:-[0-9]+)?", accept: random },
    Rule { kind: "docker-token", markers: &["dckr_pat_"], pattern: r"(?-u:\b)dckr_pat_[A-Za-z0-9_-]{20,}", accept: whole },
    Rule { kind: "vault-token", markers: &["hvs.", "hvb."], pattern: r"(?-u:\b)hv[sb]\.[A-Za-z0-9_-]{24,}", accept: whole },
    Rule {
        kind: "grafana-token",
        markers: &["glsa_", "glc_"],
        pattern: r"(?-u:\b)(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})",
        accept: whole,
    },
    Rule { kind: "groq-key", markers: &["gsk_"], pattern: r"(?-u:\b)gsk_[A-Za-z0-9]{40,}", accept: random },
    Rule { kind: "xai-key", markers: &["xai-"], pattern: r"(?-u:\b)xai-[A-Za-z0-9]{40,}", accept: random },
    Rule {
        kind: "telegram-bot-token",
        markers: &[":AA"],
        // Also inside the API's URLs, where the token follows `/bot` with no word boundary.
        pattern: r"(?:(?-u:\b)|bot)(?P<s>[0-9]{8,10}:AA[A-Za-z0-9_-]{33,})",
        accept: group_s,
    },
    Rule {
        kind: "discord-token",
        // No literal marks these tokens, so the rule always runs; its regex is cheap.
        markers: &[],
        pattern: r"(?-u:\b)(?P<id>[MNO][A-Za-z0-9_-]{23,27})\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}",
        accept: discord_token,
    },
    Rule {
        kind: "password-in-url",
        markers: &["://"],
        // scheme://user:PASSWORD@host: the password may hold `@` or `:`, so take the last `@`
        // before the path; the scheme, the user and the host are kept.
        pattern: r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]{1,30}://[^ \t\r\n:/@?#'"<>\[\]]*:(?P<s>[^ \t\r\n/?#'"<>]+)@[a-z0-9\[_%-]"#,
        accept: group_s_unless_placeholder,
    },
    Rule {
        kind: "authorization-header",
        markers: &["authorization"],
        pattern: r#"(?i)authorization["']?[\t ]*[:=][\t ]*["']?(?:(?P<scheme>bearer|basic|token|bot|negotiate|ntlm|apikey|api-key|sso-key|hmac|key)[\t ]+)?(?P<s>[^ \t\r\n"',;]+)"#,
        accept: authorization_value,
    },
    Rule {
        kind: "bearer-token",
        markers: &["bearer"],
        pattern: r"(?i)(?-u:\b)bearer[\t ]+(?P<s>[A-Za-z0-9._~+/-]{8,}=*)",
        accept: random_group_s,
    },
    Rule {
        kind: "curl-user-password",
        markers: &["curl"],
        pattern: r#"(?-u:\b)curl(?-u:\b)[^\n]*?[\t ](?:-u|--user)(?:[\t ]+|=)?["']?[^ \t\r\n:"']+:(?P<s>[^ \t\r\n"']+)"#,
        accept: group_s_unless_placeholder,
    },
    Rule {
        kind: "netrc-password",
        markers: &["machine", "login"],
        pattern: r"(?i)(?-u:\b)(?:machine|login)[\t ]+[^ \t\r\n]+[ \t\r\n]+password[\t ]+(?P<s>[^ \t\r\n]+)",
        accept: group_s_unless_placeholder,
    },
    Rule {
        kind: "sql-password",
        markers: &["identified", "password"],
        pattern: r#"(?i)(?:identified[\t ]+by|with[\t ]+(?:encrypted[\t ]+)?password)[\t ]+['"](?P<s>[^'"\r\n]+)['"]"#,
        accept: group_s_unless_placeholder,
    },
    Rule {
        kind: "assignment",
        markers: KEY_MARKERS,
        // KEY=value, KEY: value, "key": "value", key := value, key => value, and the typed
        // `KEY: &str = "value"`; `keys::Assignment` decides whether the value is a literal.
        pattern: concat!(
            r"(?i)(?-u:\b)(?P<key>[a-z0-9_.-]*(?:pass|pw|secret|token|key|auth|cred)[a-z0-9_.-]*)",
            r#"(?P<kq>\\{0,3}["']?)"#,
            r"(?:[\t ]*:[\t ]*(?P<ty>[a-z_&][a-z0-9_&<>\[\]':]*(?:[\t ]+[a-z0-9_&<>\[\]':]+){0,3})[\t ]*=[\t ]*",
            r"|(?P<sp1>[\t ]*)(?P<op>=>|:=|=|:)(?P<sp2>[\t ]*))",
            r#"(?P<val>\\+"[^"\r\n]*?\\+"|"(?:[^"\\\r\n]|\\.)*"|'[^'\r\n]*'|`[^`\r\n]*`|[^ \t\r\n"'`&]+)"#,
        ),
        accept: assignment,
    },
    Rule {
        kind: "secret-flag",
        markers: KEY_MARKERS,
        pattern: r#"(?im)(?:^|[ \t])--?(?P<key>[a-z][a-z0-9_-]*)(?:=|[\t ]+)(?P<val>"(?:[^"\\\r\n]|\\.)*"|'[^'\r\n]*'|[^ \t\r\n"']+)"#,
        accept: secret_flag,
    },
];

/// One compiled regex slot per rule, filled on the rule's first use.
static COMPILED: [OnceLock<Regex>; RULES.len()] = [const { OnceLock::new() }; RULES.len()];

/// Bit of [`Markers`] set when a system tag may be present.
const SYSTEM_TAG_BIT: u32 = 0;
/// Bit of [`Markers`] set when a `<private>` block may be present.
const PRIVATE_BIT: u32 = 1;
/// Bit of [`Markers`] for the first rule; rule `i` owns bit `FIRST_RULE_BIT + i`.
const FIRST_RULE_BIT: u32 = 2;

const _: () = assert!(RULES.len() + FIRST_RULE_BIT as usize <= 128, "the marker bit set holds 128 bits");

/// The marker automaton, which marker owns which bits, and the bits of rules that always run.
struct Prefilter {
    automaton: AhoCorasick,
    owners: Vec<u128>,
    always: u128,
}

static PREFILTER: LazyLock<Prefilter> = LazyLock::new(|| {
    let mut markers: Vec<String> = Vec::new();
    let mut owners: Vec<u128> = Vec::new();
    let mut add = |marker: &str, bit: u32| {
        let lower = marker.to_ascii_lowercase();
        match markers.iter().position(|known| *known == lower) {
            Some(index) => owners[index] |= 1 << bit,
            None => {
                markers.push(lower);
                owners.push(1 << bit);
            }
        }
    };
    add("<system", SYSTEM_TAG_BIT);
    add("<private", PRIVATE_BIT);
    let mut always = 0u128;
    for (index, rule) in RULES.iter().enumerate() {
        let bit = FIRST_RULE_BIT + index as u32;
        if rule.markers.is_empty() {
            always |= 1 << bit;
        }
        for marker in rule.markers {
            add(marker, bit);
        }
    }
    let automaton = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(&markers)
        .expect("the marker literals form a valid automaton");
    Prefilter { automaton, owners, always }
});

/// Which filters a text may need, from one pass over it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Markers(u128);

impl Markers {
    /// Finds the markers present in `text`.
    pub(crate) fn scan(text: &str) -> Markers {
        let prefilter = &*PREFILTER;
        let mut bits = prefilter.always;
        for found in prefilter.automaton.find_overlapping_iter(text) {
            bits |= prefilter.owners[found.pattern().as_usize()];
        }
        Markers(bits)
    }

    pub(crate) fn system_tags(self) -> bool {
        self.0 & (1 << SYSTEM_TAG_BIT) != 0
    }

    pub(crate) fn private_blocks(self) -> bool {
        self.0 & (1 << PRIVATE_BIT) != 0
    }

    fn rule(self, index: usize) -> bool {
        self.0 & (1 << (FIRST_RULE_BIT as usize + index)) != 0
    }
}

/// Redacts every secret in `text` that the rules flagged by `markers` find; returns the text and
/// the number of secrets replaced.
pub(crate) fn redact<'t>(text: &'t str, markers: &Markers) -> (Cow<'t, str>, u32) {
    let mut current = Cow::Borrowed(text);
    let mut count = 0u32;
    for (index, rule) in RULES.iter().enumerate() {
        if !markers.rule(index) {
            continue;
        }
        let regex = COMPILED[index].get_or_init(|| Regex::new(rule.pattern).expect("a secret rule is a valid regex"));
        if let Some((replaced, n)) = apply(rule, regex, &current) {
            current = Cow::Owned(replaced);
            count = count.saturating_add(n);
        }
    }
    (current, count)
}

/// Runs one rule over `text`; returns the new text and the number of redactions, or `None`
/// when the rule redacted nothing.
fn apply(rule: &Rule, regex: &Regex, text: &str) -> Option<(String, u32)> {
    let done = redactions(text);
    let mut out = String::new();
    let mut copied = 0;
    let mut count = 0u32;
    for caps in regex.captures_iter(text) {
        let Some(span) = (rule.accept)(text, &caps) else {
            continue;
        };
        let Some(span) = outside_redactions(text, span, &done) else {
            continue;
        };
        // A span reaching past an earlier one (a value running to the end of its line) was
        // already covered.
        if span.start < copied {
            continue;
        }
        out.push_str(&text[copied..span.start]);
        out.push_str(REDACTED_PREFIX);
        out.push_str(rule.kind);
        out.push(']');
        copied = span.end;
        count += 1;
    }
    if count == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some((out, count))
}

/// Byte ranges of the `[REDACTED:…]` markers already in `text`.
fn redactions(text: &str) -> Vec<Range<usize>> {
    text.match_indices(REDACTED_PREFIX)
        .map(|(start, _)| start..text[start..].find(']').map_or(text.len(), |end| start + end + 1))
        .collect()
}

/// Keeps a span clear of earlier redactions: a span starting inside one is dropped, and a span
/// running into one stops before it, so no rule ever rewrites another rule's marker.
fn outside_redactions(text: &str, span: Range<usize>, done: &[Range<usize>]) -> Option<Range<usize>> {
    let mut span = span;
    for marker in done {
        if marker.start <= span.start && span.start < marker.end {
            return None;
        }
        if span.start < marker.start && marker.start < span.end {
            span.end = span.start + text[span.start..marker.start].trim_end().len();
        }
    }
    (!span.is_empty()).then_some(span)
}

/// The secret group `s` when the rule has one, else the whole match.
fn secret_span(caps: &Captures<'_>) -> Range<usize> {
    caps.name("s").map_or_else(|| caps.get(0).map_or(0..0, |m| m.range()), |m| m.range())
}

fn whole(_: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    caps.get(0).map(|m| m.range())
}

fn group_s(_: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    Some(secret_span(caps))
}

fn group_s_unless_placeholder(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let span = secret_span(caps);
    (!keys::is_placeholder(&text[span.clone()])).then_some(span)
}

/// Accepts prefixed tokens only when their body looks random, so a slug that merely starts
/// like a token (`sk-proj-management-dashboard-settings`) is left alone.
fn random(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let span = secret_span(caps);
    let body = text[span.clone()].split_once(['_', '-']).map_or(&text[span.clone()], |(_, body)| body);
    keys::looks_random(body).then_some(span)
}

fn random_group_s(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let span = secret_span(caps);
    let value = &text[span.clone()];
    (keys::looks_random(value) && !keys::is_placeholder(value)).then_some(span)
}

/// Hugging Face tokens are letters only, but random letters mix cases.
fn random_or_mixed_case(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let span = secret_span(caps);
    let body = &text[span.start + 3..span.end];
    let mixed = body.bytes().any(|b| b.is_ascii_uppercase()) && body.bytes().any(|b| b.is_ascii_lowercase());
    (mixed || keys::looks_random(body)).then_some(span)
}

/// An `Authorization` value: anything after a scheme, or a random-looking raw value.
fn authorization_value(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let span = secret_span(caps);
    let value = &text[span.clone()];
    if keys::is_placeholder(value) {
        return None;
    }
    (caps.name("scheme").is_some() || (value.len() >= 8 && keys::looks_random(value))).then_some(span)
}

/// A Discord bot token's first segment is the bot's numeric id in base64.
fn discord_token(_: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let id = caps.name("id")?;
    let decoded = decode_base64url(id.as_str())?;
    (decoded.len() >= 17 && decoded.iter().all(u8::is_ascii_digit)).then(|| caps.get(0).map(|m| m.range()))?
}

/// Decodes unpadded base64 or base64url; `None` on a character outside both alphabets.
fn decode_base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0u32;
    for byte in text.bytes() {
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
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The generic assignment rule; see [`keys`] for the reading of keys and values.
fn assignment(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let key = caps.name("key")?;
    let value = caps.name("val")?;
    if !keys::is_secret_key(key.as_str()) {
        return None;
    }
    if let Some(inner) = quoted_inner(text, value.range()) {
        return (!keys::is_placeholder(&text[inner.clone()])).then_some(inner);
    }
    // The typed form (`TOKEN: &str = …`) is only trusted with a quoted literal.
    if caps.name("ty").is_some() {
        return None;
    }
    let key_quoted = caps.name("kq").is_some_and(|m| !m.is_empty())
        && text[..key.start()].ends_with(['"', '\'']);
    let spaced = caps.name("sp1").is_some_and(|m| !m.is_empty()) || caps.name("sp2").is_some_and(|m| !m.is_empty());
    Assignment {
        text,
        key: key.as_str(),
        key_start: key.start(),
        op: caps.name("op").map_or("=", |m| m.as_str()),
        key_quoted,
        spaced,
        value: value.range(),
    }
    .unquoted_secret()
}

/// `--password hunter2`, `--api-key=…`, `-token …`.
fn secret_flag(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let key = caps.name("key")?;
    let value = caps.name("val")?;
    if !keys::is_secret_key(key.as_str()) {
        return None;
    }
    if let Some(inner) = quoted_inner(text, value.range()) {
        return (!keys::is_placeholder(&text[inner.clone()])).then_some(inner);
    }
    let raw = value.as_str();
    if raw.starts_with(['-', '<', '>', '|', '$', '[', '(', '`']) || keys::is_placeholder(raw) || keys::is_path(raw) {
        return None;
    }
    Some(value.range())
}

/// The range inside the quotes of a quoted value (`"…"`, `'…'`, `` `…` `` or JSON-escaped `\"…\"`).
fn quoted_inner(text: &str, range: Range<usize>) -> Option<Range<usize>> {
    let raw = &text[range.clone()];
    let escapes = raw.len() - raw.trim_start_matches('\\').len();
    let quote = raw[escapes..].chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    // The closing quote carries as many backslashes as the opening one; compare bytes, since the
    // character before them may be multi-byte.
    let edge = escapes + 1;
    let bytes = raw.as_bytes();
    if bytes.len() < 2 * edge {
        return None;
    }
    let closing = &bytes[bytes.len() - edge..];
    if closing.last() != Some(&(quote as u8)) || !closing[..escapes].iter().all(|&b| b == b'\\') {
        return None;
    }
    Some(range.start + edge..range.end - edge)
}

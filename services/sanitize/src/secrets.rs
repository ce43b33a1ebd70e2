//! Secret redaction: a table of rules, each a regex plus a judgement on its matches, and two
//! hand-written parsers for `KEY=value` assignments and `--password value` flags.
//!
//! Cost model, tuned for the hook client (one process per agent event): one pass of a literal
//! [`Scanner`] over the text finds the markers the rules key on (`ghp_`, `eyJ`, `PRIVATE KEY`,
//! `token`…), and a cheap check of each occurrence (enough token characters after `ghp_`, an
//! operator after `token`…) decides which rules can possibly match. Only those run, and each
//! rule's regex is compiled on its first use and kept for the life of the process. The regexes
//! work on bytes with Unicode disabled, which keeps compilation cheap; they only ever match
//! ASCII around their edges, so spans fall on character boundaries (and are checked anyway).
//!
//! Rules run in table order over the output of the previous rule, specific shapes first, so a
//! token inside an assignment is reported by its provider kind and the assignment rule then sees
//! `[REDACTED:…]`, which no rule ever rewrites (this is also what makes cleaning idempotent).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{LazyLock, OnceLock};

use regex::bytes::{Captures, Regex, RegexBuilder};

use crate::assign;
use crate::keys;
use crate::scan::Scanner;

/// Every redaction starts with this, and no rule redacts text that contains it.
pub(crate) const REDACTED_PREFIX: &str = "[REDACTED:";

/// Decides what part of a regex match to redact, if any.
type Accept = fn(&str, &Captures<'_>) -> Option<Range<usize>>;

/// One secret shape.
struct Rule {
    /// Written into the replacement, `[REDACTED:<kind>]`.
    kind: &'static str,
    /// Literals (ASCII case-insensitive) of which at least one must occur for the rule to match.
    markers: &'static [&'static str],
    /// What an occurrence of a marker must look like to schedule the rule; never stricter than
    /// the rule itself, only cheaper.
    gate: Gate,
    find: Find,
}

/// The cheap check of a marker occurrence.
#[derive(Clone, Copy)]
enum Gate {
    /// Any occurrence will do.
    Any,
    /// At least this many token characters must follow the marker.
    Tail(usize),
    /// A custom check of the occurrence at `start..end` in the text.
    Check(fn(&[u8], usize, usize) -> bool),
}

/// How a rule finds its secrets.
enum Find {
    /// A regex; by convention the group `s`, when present, is the secret itself.
    Regex {
        pattern: &'static str,
        accept: Accept,
    },
    /// A parser returning the spans to redact.
    Parse(fn(&str) -> Vec<Range<usize>>),
}

/// The rules, most specific first.
const RULES: &[Rule] = &[
    Rule {
        kind: "private-key",
        markers: &["PRIVATE KEY"],
        // A whole PEM block (RSA, EC, DSA, OPENSSH, PGP, ENCRYPTED, PKCS#8), with real newlines or
        // JSON `\n` escapes; without an END line, the base64 and header lines that follow.
        find: Find::Regex {
            pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.*?)-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,\\ \t\r\n-]*)",
            accept: whole,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "private-key",
        markers: &["PRIVATE KEY"],
        // The tail of a PEM block whose BEGIN line was cut off.
        find: Find::Regex {
            pattern: r"(?:[A-Za-z0-9+/=]{16,}(?:\r?\n|\\r\\n|\\n))+-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
            accept: whole,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "jwt",
        markers: &["eyJ"],
        find: Find::Regex {
            pattern: r"(?-u:\b)eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{10,}",
            accept: whole,
        },
        gate: Gate::Tail(24),
    },
    Rule {
        kind: "aws-access-key",
        markers: &["AKIA", "ASIA", "ABIA", "ACCA"],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)",
            accept: whole,
        },
        gate: Gate::Tail(16),
    },
    Rule {
        kind: "aws-secret-key",
        markers: &[
            "secret_access",
            "secretaccess",
            "secret-access",
            "aws_secret",
            "awssecret",
            "aws-secret",
        ],
        find: Find::Regex {
            pattern: r#"(?i)(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)["']?[\t ]*[:=][\t ]*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            accept: group_s,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "gcp-api-key",
        markers: &["AIza"],
        find: Find::Regex {
            pattern: r"(?-u:\b)AIza[0-9A-Za-z_-]{35}",
            accept: whole,
        },
        gate: Gate::Tail(35),
    },
    Rule {
        kind: "gcp-oauth-secret",
        markers: &["GOCSPX-"],
        find: Find::Regex {
            pattern: r"(?-u:\b)GOCSPX-[A-Za-z0-9_-]{24,}",
            accept: whole,
        },
        gate: Gate::Tail(24),
    },
    Rule {
        kind: "gcp-oauth-token",
        markers: &["ya29."],
        find: Find::Regex {
            pattern: r"(?-u:\b)ya29\.[A-Za-z0-9_-]{20,}",
            accept: whole,
        },
        gate: Gate::Tail(20),
    },
    Rule {
        kind: "azure-storage-key",
        markers: &["AccountKey", "SharedAccessKey"],
        find: Find::Regex {
            pattern: r"(?i)(?:AccountKey|SharedAccessKey)[\t ]*=[\t ]*(?P<s>[A-Za-z0-9+/]{20,}={0,2})",
            accept: group_s,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "azure-sas-token",
        markers: &["sig="],
        find: Find::Regex {
            pattern: r"[?&]sig=(?P<s>[A-Za-z0-9%+/]{20,}(?:%3[Dd]|=){0,2})",
            accept: group_s,
        },
        gate: Gate::Tail(20),
    },
    Rule {
        kind: "github-token",
        markers: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
            accept: whole,
        },
        gate: Gate::Tail(22),
    },
    Rule {
        kind: "gitlab-token",
        markers: &[
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "gloas-",
            "glsoat-",
            "glft-",
            "glimt-",
            "glagent-",
            "glffct-",
            "GR1348941",
        ],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?:gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*|GR1348941[A-Za-z0-9_-]{20,})",
            accept: whole,
        },
        gate: Gate::Tail(20),
    },
    Rule {
        kind: "slack-token",
        markers: &[
            "xoxb-", "xoxp-", "xoxa-", "xoxo-", "xoxs-", "xoxr-", "xoxe", "xapp-",
        ],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?:xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})",
            accept: whole,
        },
        gate: Gate::Tail(10),
    },
    Rule {
        kind: "slack-webhook",
        markers: &["hooks.slack.com"],
        find: Find::Regex {
            pattern: r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{20,})",
            accept: group_s,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "discord-webhook",
        markers: &["/api/webhooks/"],
        find: Find::Regex {
            pattern: r"(?i)discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/(?P<s>[A-Za-z0-9_-]{30,})",
            accept: group_s,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "stripe-key",
        markers: &["sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
            accept: whole,
        },
        gate: Gate::Tail(16),
    },
    Rule {
        kind: "anthropic-key",
        markers: &["sk-ant-"],
        find: Find::Regex {
            pattern: r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}",
            accept: whole,
        },
        gate: Gate::Tail(20),
    },
    Rule {
        kind: "openai-key",
        markers: &["sk-"],
        // Dashes are allowed only after a known infix, so `sk-spinner-circle-bounce` stays.
        find: Find::Regex {
            pattern: r"(?-u:\b)sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})",
            accept: random,
        },
        gate: Gate::Tail(20),
    },
    Rule {
        kind: "huggingface-token",
        markers: &["hf_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)hf_[A-Za-z0-9]{30,}",
            accept: random_or_mixed_case,
        },
        gate: Gate::Tail(30),
    },
    Rule {
        kind: "npm-token",
        markers: &["npm_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)npm_[A-Za-z0-9]{36,}",
            accept: random,
        },
        gate: Gate::Tail(36),
    },
    Rule {
        kind: "pypi-token",
        markers: &["pypi-AgE"],
        find: Find::Regex {
            pattern: r"(?-u:\b)pypi-AgE[A-Za-z0-9_-]{50,}",
            accept: whole,
        },
        gate: Gate::Tail(50),
    },
    Rule {
        kind: "sendgrid-key",
        markers: &["SG."],
        find: Find::Regex {
            pattern: r"(?-u:\b)SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
            accept: whole,
        },
        gate: Gate::Tail(33),
    },
    Rule {
        kind: "twilio-api-key",
        markers: &["SK"],
        find: Find::Regex {
            pattern: r"(?-u:\b)SK[0-9a-fA-F]{32}(?-u:\b)",
            accept: whole,
        },
        gate: Gate::Tail(32),
    },
    Rule {
        kind: "twilio-auth-token",
        markers: &["twilio"],
        find: Find::Regex {
            pattern: r#"(?i)twilio[_-]?auth[_-]?token["']?[\t ]*[:=][\t ]*["']?(?P<s>[0-9a-f]{32})"#,
            accept: group_s,
        },
        gate: Gate::Any,
    },
    Rule {
        kind: "shopify-token",
        markers: &["shpat_", "shpss_", "shpca_", "shppa_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
            accept: whole,
        },
        gate: Gate::Tail(32),
    },
    Rule {
        kind: "digitalocean-token",
        markers: &["dop_v1_", "doo_v1_", "dor_v1_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)do[opr]_v1_[a-f0-9]{64}",
            accept: whole,
        },
        gate: Gate::Tail(64),
    },
    Rule {
        kind: "databricks-token",
        markers: &["dapi"],
        find: Find::Regex {
            pattern: r"(?-u:\b)dapi[a-f0-9]{32}(?:-[0-9]+)?",
            accept: random,
        },
        gate: Gate::Tail(32),
    },
    Rule {
        kind: "docker-token",
        markers: &["dckr_pat_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)dckr_pat_[A-Za-z0-9_-]{20,}",
            accept: whole,
        },
        gate: Gate::Tail(20),
    },
    Rule {
        kind: "vault-token",
        markers: &["hvs.", "hvb."],
        find: Find::Regex {
            pattern: r"(?-u:\b)hv[sb]\.[A-Za-z0-9_-]{24,}",
            accept: whole,
        },
        gate: Gate::Tail(24),
    },
    Rule {
        kind: "grafana-token",
        markers: &["glsa_", "glc_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})",
            accept: whole,
        },
        gate: Gate::Tail(32),
    },
    Rule {
        kind: "groq-key",
        markers: &["gsk_"],
        find: Find::Regex {
            pattern: r"(?-u:\b)gsk_[A-Za-z0-9]{40,}",
            accept: random,
        },
        gate: Gate::Tail(40),
    },
    Rule {
        kind: "xai-key",
        markers: &["xai-"],
        find: Find::Regex {
            pattern: r"(?-u:\b)xai-[A-Za-z0-9]{40,}",
            accept: random,
        },
        gate: Gate::Tail(40),
    },
    Rule {
        kind: "telegram-bot-token",
        markers: &[":AA"],
        // Also inside the API's URLs, where the token follows `/bot` with no word boundary.
        find: Find::Regex {
            pattern: r"(?:(?-u:\b)|bot)(?P<s>[0-9]{8,10}:AA[A-Za-z0-9_-]{33,})",
            accept: group_s,
        },
        gate: Gate::Tail(33),
    },
    Rule {
        kind: "discord-token",
        // No literal marks these tokens; the dots around their six-character middle do.
        markers: &["."],
        find: Find::Regex {
            pattern: r"(?-u:\b)(?P<id>[MNO][A-Za-z0-9_-]{23,27})\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}",
            accept: discord_token,
        },
        gate: Gate::Check(discord_middle_segment),
    },
    Rule {
        kind: "password-in-url",
        markers: &["://"],
        // scheme://user:PASSWORD@host: the password may hold `@` or `:`, so take the last `@`
        // before the path; the scheme, the user and the host are kept.
        find: Find::Regex {
            pattern: r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]{1,30}://[^ \t\r\n:/@?#'"<>\[\]]*:(?P<s>[^ \t\r\n/?#'"<>]+)@[a-z0-9\[_%-]"#,
            accept: group_s_unless_placeholder,
        },
        gate: Gate::Check(url_with_password),
    },
    Rule {
        kind: "authorization-header",
        markers: &["authorization"],
        find: Find::Regex {
            pattern: r#"(?i)authorization["']?[\t ]*[:=][\t ]*["']?(?:(?P<scheme>bearer|basic|token|bot|negotiate|ntlm|apikey|api-key|sso-key|hmac|key)[\t ]+)?(?P<s>[^ \t\r\n"',;\\]+)"#,
            accept: authorization_value,
        },
        gate: Gate::Check(then_operator),
    },
    Rule {
        kind: "bearer-token",
        markers: &["bearer"],
        find: Find::Regex {
            pattern: r"(?i)(?-u:\b)bearer[\t ]+(?P<s>[A-Za-z0-9._~+/-]{8,}=*)",
            accept: random_group_s,
        },
        gate: Gate::Check(then_blank_and_token),
    },
    Rule {
        kind: "curl-user-password",
        markers: &["curl"],
        find: Find::Regex {
            pattern: r#"(?-u:\b)curl(?-u:\b)[^\n]*?[\t ](?:-u|--user)(?:[\t ]+|=)?["']?[^ \t\r\n:"']+:(?P<s>[^ \t\r\n"']+)"#,
            accept: group_s_unless_placeholder,
        },
        gate: Gate::Check(curl_with_user),
    },
    Rule {
        kind: "netrc-password",
        markers: &["machine", "login"],
        find: Find::Regex {
            pattern: r#"(?i)(?-u:\b)(?:machine|login)[\t ]+[^ \t\r\n]+[ \t\r\n]+password[\t ]+["']?(?P<s>[^ \t\r\n"']+)"#,
            accept: group_s_unless_placeholder,
        },
        gate: Gate::Check(password_follows),
    },
    Rule {
        kind: "sql-password",
        markers: &["identified", "password"],
        find: Find::Regex {
            pattern: r#"(?i)(?:identified[\t ]+by|with[\t ]+(?:encrypted[\t ]+)?password)[\t ]+['"](?P<s>[^'"\r\n]+)['"]"#,
            accept: group_s_unless_placeholder,
        },
        gate: Gate::Check(sql_password_clause),
    },
    Rule {
        kind: "assignment",
        markers: assign::KEY_MARKERS,
        // KEY=value, KEY: value, "key": "value", key := value, key => value, and the typed
        // `KEY: &str = "value"`; see `assign` and `keys` for what counts as a secret literal.
        gate: Gate::Check(assign::key_then_operator),
        find: Find::Parse(assign::assignments),
    },
    Rule {
        kind: "secret-flag",
        markers: assign::KEY_MARKERS,
        gate: Gate::Check(assign::flag_key),
        find: Find::Parse(assign::secret_flags),
    },
];

/// One compiled regex slot per rule, filled on the rule's first use.
static COMPILED: [OnceLock<Regex>; RULES.len()] = [const { OnceLock::new() }; RULES.len()];

/// Bit of [`Markers`] set when a system tag may be present.
const SYSTEM_TAG_BIT: usize = 0;
/// Bit of [`Markers`] set when a `<private>` block may be present.
const PRIVATE_BIT: usize = 1;
/// Bit of [`Markers`] for the first rule; rule `i` owns bit `FIRST_RULE_BIT + i`.
const FIRST_RULE_BIT: usize = 2;

const _: () = assert!(
    RULES.len() + FIRST_RULE_BIT <= 128,
    "the marker bit set holds 128 bits"
);

/// The marker scanner and, for each marker, the bits it may set.
struct Prefilter {
    scanner: Scanner,
    owners: Vec<Vec<usize>>,
}

static PREFILTER: LazyLock<Prefilter> = LazyLock::new(|| {
    let mut markers: Vec<String> = Vec::new();
    let mut owners: Vec<Vec<usize>> = Vec::new();
    let mut add = |marker: &str, bit: usize| {
        let lower = marker.to_ascii_lowercase();
        match markers.iter().position(|known| *known == lower) {
            Some(index) => owners[index].push(bit),
            None => {
                markers.push(lower);
                owners.push(vec![bit]);
            }
        }
    };
    add("<system", SYSTEM_TAG_BIT);
    add("<private", PRIVATE_BIT);
    for (index, rule) in RULES.iter().enumerate() {
        for marker in rule.markers {
            add(marker, FIRST_RULE_BIT + index);
        }
    }
    Prefilter {
        scanner: Scanner::new(markers.iter().map(String::as_str)),
        owners,
    }
});

/// Which filters a text may need, from one pass over it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Markers(u128);

impl Markers {
    /// Finds the markers present in `text` and checks each occurrence against its rules' gates.
    pub(crate) fn scan(text: &str) -> Markers {
        let prefilter = &*PREFILTER;
        let bytes = text.as_bytes();
        let mut bits = 0u128;
        prefilter.scanner.scan(bytes, |id, start, end| {
            for &bit in &prefilter.owners[id] {
                if bits & (1 << bit) != 0 {
                    continue;
                }
                let open = match bit.checked_sub(FIRST_RULE_BIT) {
                    None => true,
                    Some(index) => match RULES[index].gate {
                        Gate::Any => true,
                        Gate::Tail(min) => {
                            bytes[end..]
                                .iter()
                                .take(min)
                                .filter(|&&b| is_token_byte(b))
                                .count()
                                >= min
                        }
                        Gate::Check(check) => check(bytes, start, end),
                    },
                };
                if open {
                    bits |= 1 << bit;
                }
            }
        });
        Markers(bits)
    }

    pub(crate) fn system_tags(self) -> bool {
        self.0 & (1 << SYSTEM_TAG_BIT) != 0
    }

    pub(crate) fn private_blocks(self) -> bool {
        self.0 & (1 << PRIVATE_BIT) != 0
    }

    fn rule(self, index: usize) -> bool {
        self.0 & (1 << (FIRST_RULE_BIT + index)) != 0
    }
}

/// Characters that can continue a token after its prefix, for [`Gate::Tail`].
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b'+' | b'/' | b'=' | b'%')
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
        let spans = match &rule.find {
            Find::Regex { pattern, accept } => {
                let regex = COMPILED[index].get_or_init(|| {
                    RegexBuilder::new(pattern)
                        .unicode(false)
                        .build()
                        .expect("a secret rule is a valid regex")
                });
                regex
                    .captures_iter(current.as_bytes())
                    .filter_map(|caps| accept(&current, &caps))
                    .collect()
            }
            Find::Parse(parse) => parse(&current),
        };
        if let Some((replaced, n)) = replace(&current, rule.kind, spans) {
            current = Cow::Owned(replaced);
            count = count.saturating_add(n);
        }
    }
    (current, count)
}

/// Replaces `spans` (in order) of `text` with `[REDACTED:<kind>]`; returns the new text and the
/// number of replacements, or `None` when nothing was replaced.
fn replace(text: &str, kind: &str, spans: Vec<Range<usize>>) -> Option<(String, u32)> {
    if spans.is_empty() {
        return None;
    }
    let done = redactions(text);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut count = 0u32;
    for span in spans {
        let Some(span) = outside_redactions(text, span, &done) else {
            continue;
        };
        // A span reaching past an earlier one (a value running to the end of its line) was
        // already covered; a span off a character boundary would be a bug, so it is widened.
        let span = widen_to_char_boundaries(text, span);
        if span.start < copied {
            continue;
        }
        out.push_str(&text[copied..span.start]);
        out.push_str(REDACTED_PREFIX);
        out.push_str(kind);
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

fn widen_to_char_boundaries(text: &str, span: Range<usize>) -> Range<usize> {
    let mut start = span.start.min(text.len());
    let mut end = span.end.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

/// Byte ranges of the `[REDACTED:…]` markers already in `text`.
fn redactions(text: &str) -> Vec<Range<usize>> {
    text.match_indices(REDACTED_PREFIX)
        .map(|(start, _)| {
            start
                ..text[start..]
                    .find(']')
                    .map_or(text.len(), |end| start + end + 1)
        })
        .collect()
}

/// Keeps a span clear of earlier redactions: a span starting inside one is dropped, and a span
/// running into one stops before it, so no rule ever rewrites another rule's marker.
fn outside_redactions(
    text: &str,
    span: Range<usize>,
    done: &[Range<usize>],
) -> Option<Range<usize>> {
    let mut span = span;
    for marker in done {
        if marker.start <= span.start && span.start < marker.end {
            return None;
        }
        if span.start < marker.start && marker.start < span.end {
            let kept = text
                .get(span.start..marker.start)
                .map_or(0, |before| before.trim_end().len());
            span.end = span.start + kept;
        }
    }
    (!span.is_empty()).then_some(span)
}

/// The text of a capture group, if it lies on character boundaries.
fn group<'t>(text: &'t str, caps: &Captures<'_>, name: &str) -> Option<(&'t str, Range<usize>)> {
    let range = caps.name(name)?.range();
    Some((text.get(range.clone())?, range))
}

/// The secret group `s` when the rule has one, else the whole match.
fn secret<'t>(text: &'t str, caps: &Captures<'_>) -> Option<(&'t str, Range<usize>)> {
    let range = caps.name("s").or_else(|| caps.get(0))?.range();
    Some((text.get(range.clone())?, range))
}

fn whole(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let range = caps.get(0)?.range();
    text.get(range.clone()).map(|_| range)
}

fn group_s(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    secret(text, caps).map(|(_, range)| range)
}

fn group_s_unless_placeholder(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let (value, range) = secret(text, caps)?;
    (!keys::is_placeholder(value)).then_some(range)
}

/// Accepts prefixed tokens only when their body looks random, so a slug that merely starts
/// like a token (`sk-proj-management-dashboard-settings`) is left alone.
fn random(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let (value, range) = secret(text, caps)?;
    let body = value.split_once(['_', '-']).map_or(value, |(_, body)| body);
    keys::looks_random(body).then_some(range)
}

fn random_group_s(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let (value, range) = secret(text, caps)?;
    (keys::looks_random(value) && !keys::is_placeholder(value)).then_some(range)
}

/// Hugging Face tokens are letters only, but random letters mix cases.
fn random_or_mixed_case(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let (value, range) = secret(text, caps)?;
    let body = value.get(3..)?;
    let mixed = body.bytes().any(|b| b.is_ascii_uppercase())
        && body.bytes().any(|b| b.is_ascii_lowercase());
    (mixed || keys::looks_random(body)).then_some(range)
}

/// An `Authorization` value: anything after a scheme, or a token-shaped raw value.
fn authorization_value(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let (value, range) = secret(text, caps)?;
    if keys::is_placeholder(value) {
        return None;
    }
    // Without a scheme, only a token-shaped value counts: `authorization = header[1]` is code.
    let token_shaped = value.len() >= 16
        && keys::looks_random(value)
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'/' | b'=' | b'~')
        });
    (caps.name("scheme").is_some() || token_shaped).then_some(range)
}

/// A Discord bot token's first segment is the bot's numeric id in base64.
fn discord_token(text: &str, caps: &Captures<'_>) -> Option<Range<usize>> {
    let (id, _) = group(text, caps, "id")?;
    let decoded = decode_base64url(id)?;
    (decoded.len() >= 17 && decoded.iter().all(u8::is_ascii_digit))
        .then(|| caps.get(0).map(|m| m.range()))?
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
            out.push(u8::try_from(buffer >> bits).ok()?);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Gate of the Discord rule: a dot, six base64url characters, a dot.
fn discord_middle_segment(text: &[u8], start: usize, _: usize) -> bool {
    text.get(start + 7) == Some(&b'.')
        && text[start + 1..start + 7]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Gate of the URL rule: `scheme://` followed, within the authority, by `:` and then `@`.
fn url_with_password(text: &[u8], _: usize, end: usize) -> bool {
    let authority = text[end..]
        .iter()
        .take_while(|&&b| !matches!(b, b'/' | b'?' | b'#' | b' ' | b'\t' | b'\r' | b'\n'));
    let mut colon = false;
    for &byte in authority {
        match byte {
            b':' => colon = true,
            b'@' if colon => return true,
            _ => {}
        }
    }
    false
}

/// Gate of the `Authorization` rule: an optional quote, blanks, then `:` or `=`.
fn then_operator(text: &[u8], _: usize, end: usize) -> bool {
    let rest = &text[end..];
    let rest = rest
        .strip_prefix(b"\"")
        .or_else(|| rest.strip_prefix(b"'"))
        .unwrap_or(rest);
    matches!(
        rest.iter().find(|&&b| b != b' ' && b != b'\t'),
        Some(b':' | b'=')
    )
}

/// Gate of the bearer rule: blanks, then a token character.
fn then_blank_and_token(text: &[u8], _: usize, end: usize) -> bool {
    let rest = &text[end..];
    matches!(rest.first(), Some(b' ' | b'\t'))
        && rest
            .iter()
            .find(|&&b| b != b' ' && b != b'\t')
            .is_some_and(|&b| is_token_byte(b))
}

/// Gate of the curl rule: `-u` or `--user` later on the same line.
fn curl_with_user(text: &[u8], _: usize, end: usize) -> bool {
    let line = text[end..]
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or_default();
    line.windows(3).any(|w| w == b" -u" || w == b"\t-u") || line.windows(6).any(|w| w == b"--user")
}

/// Gate of the netrc rule: the word `password` within the next few hundred bytes.
fn password_follows(text: &[u8], _: usize, end: usize) -> bool {
    text[end..(end + 400).min(text.len())]
        .windows(8)
        .any(|w| w.eq_ignore_ascii_case(b"password"))
}

/// Gate of the SQL rule: `IDENTIFIED`, or `PASSWORD` right after `WITH` or `ENCRYPTED`.
fn sql_password_clause(text: &[u8], start: usize, end: usize) -> bool {
    if text[start..end].eq_ignore_ascii_case(b"identified") {
        return true;
    }
    let before = text[..start].trim_ascii_end();
    let ends_with = |word: &[u8]| {
        before.len() >= word.len() && before[before.len() - word.len()..].eq_ignore_ascii_case(word)
    };
    ends_with(b"with") || ends_with(b"encrypted")
}

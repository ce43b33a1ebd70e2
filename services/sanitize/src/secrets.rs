//! Secret redaction: a table of rules, each finding one kind of secret.
//!
//! Cost model, tuned for the hook client (one process per agent event): one pass of a literal
//! [`Scanner`] over the text finds the markers the rules key on (`ghp_`, `eyJ`, `PRIVATE KEY`,
//! `token`…), and a cheap check of each occurrence (enough token characters after `ghp_`, an
//! operator after `token`…) decides which rules can possibly match. Only those run. Most rules
//! are token shapes ([`crate::shapes`]) or small parsers ([`crate::parsers`], [`crate::assign`])
//! that cost nothing to set up; the few regexes, for rare multi-line or multi-part shapes, are
//! compiled on first use (on bytes, Unicode off, which compiles fastest) and kept for the life of
//! the process. Their matches only ever end next to ASCII, so spans fall on character
//! boundaries (and are checked anyway).
//!
//! Rules run in table order over the output of the previous rule, specific shapes first, so a
//! token inside an assignment is reported by its provider kind and the assignment rule then sees
//! `[REDACTED:…]`, which no rule ever rewrites (this is also what makes cleaning idempotent).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{LazyLock, OnceLock};

use regex::bytes::{Captures, Regex, RegexBuilder};

use crate::REDACTED_PREFIX;
use crate::assign;
use crate::generic;
use crate::keys;
use crate::parsers;
use crate::scan::Scanner;
use crate::shapes::{self, Class::*, MANY, Part::*, Shape};

/// Decides what part of a regex match to redact, if any.
type Accept = fn(&str, &Captures<'_>) -> Option<Range<usize>>;

/// Decides whether a token matched by a shape is a secret.
type Judge = fn(&str) -> bool;

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
    /// Token shapes; every match the judge accepts is redacted whole.
    Shapes(&'static [Shape], Judge),
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
        gate: Gate::Any,
        // A whole PEM block (RSA, EC, DSA, OPENSSH, PGP, ENCRYPTED, PKCS#8), with real newlines or
        // JSON `\n` escapes; without an END line, the base64 and header lines that follow.
        find: Find::Regex {
            pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.*?)-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,\\ \t\r\n-]*)",
            accept: whole,
        },
    },
    Rule {
        kind: "private-key",
        markers: &["PRIVATE KEY"],
        gate: Gate::Any,
        // The tail of a PEM block whose BEGIN line was cut off.
        find: Find::Regex {
            pattern: r"(?:[A-Za-z0-9+/=]{16,}(?:\r?\n|\\r\\n|\\n))+-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
            accept: whole,
        },
    },
    Rule {
        kind: "jwt",
        markers: &["eyJ"],
        gate: Gate::Tail(24),
        find: Find::Shapes(
            &[&[
                Lit("eyJ"),
                Run(Base64Url, 6, MANY),
                Lit("."),
                Run(Base64Url, 6, MANY),
                Lit("."),
                Run(Base64Url, 10, MANY),
            ]],
            any,
        ),
    },
    Rule {
        kind: "aws-access-key",
        markers: &["AKIA", "ASIA", "ABIA", "ACCA"],
        gate: Gate::Tail(16),
        find: Find::Shapes(
            &[
                &[Lit("AKIA"), Run(UpperAlnum, 16, 16), End],
                &[Lit("ASIA"), Run(UpperAlnum, 16, 16), End],
                &[Lit("ABIA"), Run(UpperAlnum, 16, 16), End],
                &[Lit("ACCA"), Run(UpperAlnum, 16, 16), End],
            ],
            any,
        ),
    },
    Rule {
        kind: "aws-secret-key",
        markers: &["secret_access", "secretaccess", "aws_secret"],
        gate: Gate::Any,
        find: Find::Regex {
            pattern: r#"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|aws_secret_key|AWS_SECRET_KEY|secret_access_key|SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey)["']?[\t ]*[:=][\t ]*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            accept: group_s,
        },
    },
    Rule {
        kind: "gcp-api-key",
        markers: &["AIza"],
        gate: Gate::Tail(35),
        find: Find::Shapes(&[&[Lit("AIza"), Run(Base64Url, 35, 35)]], any),
    },
    Rule {
        kind: "gcp-oauth-secret",
        markers: &["GOCSPX-"],
        gate: Gate::Tail(24),
        find: Find::Shapes(&[&[Lit("GOCSPX-"), Run(Base64Url, 24, MANY)]], any),
    },
    Rule {
        kind: "gcp-oauth-token",
        markers: &["ya29."],
        gate: Gate::Tail(20),
        find: Find::Shapes(&[&[Lit("ya29."), Run(Base64Url, 20, MANY)]], any),
    },
    Rule {
        kind: "azure-storage-key",
        markers: &["AccountKey", "SharedAccessKey"],
        gate: Gate::Any,
        find: Find::Regex {
            pattern: r"(?:AccountKey|SharedAccessKey)[\t ]*=[\t ]*(?P<s>[A-Za-z0-9+/]{20,}={0,2})",
            accept: group_s,
        },
    },
    Rule {
        kind: "azure-sas-token",
        markers: &["sig="],
        gate: Gate::Tail(20),
        find: Find::Regex {
            pattern: r"[?&]sig=(?P<s>[A-Za-z0-9%+/]{20,}(?:%3[Dd]|=){0,2})",
            accept: group_s,
        },
    },
    Rule {
        kind: "github-token",
        markers: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        gate: Gate::Tail(22),
        find: Find::Shapes(
            &[
                &[Lit("ghp_"), Run(Alnum, 36, MANY)],
                &[Lit("gho_"), Run(Alnum, 36, MANY)],
                &[Lit("ghu_"), Run(Alnum, 36, MANY)],
                &[Lit("ghs_"), Run(Alnum, 36, MANY)],
                &[Lit("ghr_"), Run(Alnum, 36, MANY)],
                &[Lit("github_pat_"), Run(Word, 22, MANY)],
            ],
            any,
        ),
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
        gate: Gate::Tail(20),
        find: Find::Shapes(
            &[
                &[Lit("glpat-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("gldt-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glrt-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glptt-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glcbt-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("gloas-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glsoat-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glft-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glimt-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glagent-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("glffct-"), Run(Base64UrlDot, 20, MANY)],
                &[Lit("GR1348941"), Run(Base64Url, 20, MANY)],
            ],
            any,
        ),
    },
    Rule {
        kind: "slack-token",
        markers: &[
            "xoxb-", "xoxp-", "xoxa-", "xoxo-", "xoxs-", "xoxr-", "xoxe", "xapp-",
        ],
        gate: Gate::Tail(10),
        find: Find::Shapes(
            &[
                &[Lit("xoxe.xoxb-"), Run(AlnumDash, 10, MANY)],
                &[Lit("xoxe.xoxp-"), Run(AlnumDash, 10, MANY)],
                &[
                    Lit("xox"),
                    Run(OneOf(b"abposre"), 1, 1),
                    Lit("-"),
                    Run(AlnumDash, 10, MANY),
                ],
                &[
                    Lit("xapp-"),
                    Run(Digit, 1, 1),
                    Lit("-"),
                    Run(AlnumDash, 10, MANY),
                ],
            ],
            any,
        ),
    },
    Rule {
        kind: "slack-webhook",
        markers: &["hooks.slack.com"],
        gate: Gate::Any,
        find: Find::Regex {
            pattern: r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{20,})",
            accept: group_s,
        },
    },
    Rule {
        kind: "discord-webhook",
        markers: &["/api/webhooks/"],
        gate: Gate::Any,
        find: Find::Regex {
            pattern: r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/(?P<s>[A-Za-z0-9_-]{30,})",
            accept: group_s,
        },
    },
    Rule {
        kind: "stripe-key",
        markers: &["sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"],
        gate: Gate::Tail(16),
        find: Find::Shapes(
            &[
                &[Lit("sk_live_"), Run(Alnum, 16, MANY)],
                &[Lit("rk_live_"), Run(Alnum, 16, MANY)],
                &[Lit("sk_test_"), Run(Alnum, 16, MANY)],
                &[Lit("rk_test_"), Run(Alnum, 16, MANY)],
                &[Lit("whsec_"), Run(Alnum, 24, MANY)],
            ],
            any,
        ),
    },
    Rule {
        kind: "anthropic-key",
        markers: &["sk-ant-"],
        gate: Gate::Tail(20),
        find: Find::Shapes(&[&[Lit("sk-ant-"), Run(Base64Url, 20, MANY)]], any),
    },
    Rule {
        kind: "openai-key",
        markers: &["sk-"],
        gate: Gate::Tail(20),
        // Dashes are allowed only after a known infix, so `sk-spinner-circle-bounce` stays.
        find: Find::Shapes(
            &[
                &[Lit("sk-proj-"), Run(Base64Url, 20, MANY)],
                &[Lit("sk-svcacct-"), Run(Base64Url, 20, MANY)],
                &[Lit("sk-admin-"), Run(Base64Url, 20, MANY)],
                &[Lit("sk-None-"), Run(Base64Url, 20, MANY)],
                &[Lit("sk-"), Run(Alnum, 32, MANY)],
            ],
            random_body,
        ),
    },
    Rule {
        kind: "huggingface-token",
        markers: &["hf_"],
        gate: Gate::Tail(30),
        find: Find::Shapes(&[&[Lit("hf_"), Run(Alnum, 30, MANY)]], random_or_mixed_case),
    },
    Rule {
        kind: "npm-token",
        markers: &["npm_"],
        gate: Gate::Tail(36),
        find: Find::Shapes(&[&[Lit("npm_"), Run(Alnum, 36, MANY)]], random_body),
    },
    Rule {
        kind: "pypi-token",
        markers: &["pypi-AgE"],
        gate: Gate::Tail(50),
        find: Find::Shapes(&[&[Lit("pypi-AgE"), Run(Base64Url, 50, MANY)]], any),
    },
    Rule {
        kind: "sendgrid-key",
        markers: &["SG."],
        gate: Gate::Tail(33),
        find: Find::Shapes(
            &[&[
                Lit("SG."),
                Run(Base64Url, 16, 32),
                Lit("."),
                Run(Base64Url, 16, 64),
            ]],
            any,
        ),
    },
    Rule {
        kind: "twilio-api-key",
        markers: &["SK"],
        gate: Gate::Tail(32),
        find: Find::Shapes(&[&[Lit("SK"), Run(Hex, 32, 32), End]], any),
    },
    Rule {
        kind: "twilio-auth-token",
        markers: &["twilio"],
        gate: Gate::Any,
        find: Find::Regex {
            pattern: r#"(?:TWILIO_AUTH_TOKEN|twilio_auth_token|twilioAuthToken|TwilioAuthToken)["']?[\t ]*[:=][\t ]*["']?(?P<s>[0-9a-fA-F]{32})"#,
            accept: group_s,
        },
    },
    Rule {
        kind: "shopify-token",
        markers: &["shpat_", "shpss_", "shpca_", "shppa_"],
        gate: Gate::Tail(32),
        find: Find::Shapes(
            &[
                &[Lit("shpat_"), Run(Hex, 32, 32)],
                &[Lit("shpss_"), Run(Hex, 32, 32)],
                &[Lit("shpca_"), Run(Hex, 32, 32)],
                &[Lit("shppa_"), Run(Hex, 32, 32)],
            ],
            any,
        ),
    },
    Rule {
        kind: "digitalocean-token",
        markers: &["dop_v1_", "doo_v1_", "dor_v1_"],
        gate: Gate::Tail(64),
        find: Find::Shapes(
            &[
                &[Lit("dop_v1_"), Run(LowerHex, 64, 64)],
                &[Lit("doo_v1_"), Run(LowerHex, 64, 64)],
                &[Lit("dor_v1_"), Run(LowerHex, 64, 64)],
            ],
            any,
        ),
    },
    Rule {
        kind: "databricks-token",
        markers: &["dapi"],
        gate: Gate::Tail(32),
        find: Find::Shapes(&[&[Lit("dapi"), Run(LowerHex, 32, 32)]], random_body),
    },
    Rule {
        kind: "docker-token",
        markers: &["dckr_pat_"],
        gate: Gate::Tail(20),
        find: Find::Shapes(&[&[Lit("dckr_pat_"), Run(Base64Url, 20, MANY)]], any),
    },
    Rule {
        kind: "vault-token",
        markers: &["hvs.", "hvb."],
        gate: Gate::Tail(24),
        find: Find::Shapes(
            &[
                &[Lit("hvs."), Run(Base64Url, 24, MANY)],
                &[Lit("hvb."), Run(Base64Url, 24, MANY)],
            ],
            any,
        ),
    },
    Rule {
        kind: "grafana-token",
        markers: &["glsa_", "glc_"],
        gate: Gate::Tail(32),
        find: Find::Shapes(
            &[
                &[Lit("glsa_"), Run(Alnum, 32, 32), Lit("_"), Run(Hex, 8, 8)],
                &[Lit("glc_"), Run(Base64, 32, MANY), Run(OneOf(b"="), 0, 2)],
            ],
            any,
        ),
    },
    Rule {
        kind: "groq-key",
        markers: &["gsk_"],
        gate: Gate::Tail(40),
        find: Find::Shapes(&[&[Lit("gsk_"), Run(Alnum, 40, MANY)]], random_body),
    },
    Rule {
        kind: "xai-key",
        markers: &["xai-"],
        gate: Gate::Tail(40),
        find: Find::Shapes(&[&[Lit("xai-"), Run(Alnum, 40, MANY)]], random_body),
    },
    Rule {
        kind: "telegram-bot-token",
        markers: &[":AA"],
        gate: Gate::Tail(33),
        find: Find::Parse(parsers::telegram_tokens),
    },
    Rule {
        kind: "discord-token",
        // No literal marks these tokens; the dots around their six-character middle do.
        markers: &["."],
        gate: Gate::Check(discord_middle_segment),
        find: Find::Parse(parsers::discord_tokens),
    },
    Rule {
        kind: "password-in-url",
        markers: &["://"],
        gate: Gate::Check(url_with_password),
        find: Find::Parse(parsers::url_passwords),
    },
    Rule {
        kind: "authorization-header",
        markers: &["authorization"],
        gate: Gate::Check(then_operator),
        find: Find::Parse(parsers::authorization_headers),
    },
    Rule {
        kind: "bearer-token",
        markers: &["bearer"],
        gate: Gate::Check(then_blank_and_token),
        find: Find::Parse(parsers::bearer_tokens),
    },
    Rule {
        kind: "curl-user-password",
        markers: &["curl"],
        gate: Gate::Check(curl_with_user),
        find: Find::Regex {
            pattern: r#"\bcurl\b[^\n]*?[\t ](?:-u|--user)(?:[\t ]+|=)?["']?[^ \t\r\n:"']+:(?P<s>[^ \t\r\n"']+)"#,
            accept: group_s_unless_placeholder,
        },
    },
    Rule {
        kind: "cli-password",
        markers: &["mysql", "sshpass"],
        gate: Gate::Check(dash_p_follows),
        find: Find::Parse(parsers::command_line_passwords),
    },
    Rule {
        kind: "netrc-password",
        markers: &["machine", "login"],
        gate: Gate::Check(password_follows),
        find: Find::Parse(parsers::netrc_passwords),
    },
    Rule {
        kind: "sql-password",
        markers: &["identified", "password"],
        gate: Gate::Check(sql_password_clause),
        find: Find::Parse(parsers::sql_passwords),
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
    Rule {
        kind: "generic-keyed",
        // Any key naming a secret, with a value that looks random; after the named-key rules,
        // so what they recognise keeps their kind.
        markers: generic::KEY_WORDS,
        gate: Gate::Any,
        find: Find::Parse(generic::keyed_values),
    },
    Rule {
        kind: "generic-token",
        // No literal marks an unknown vendor's key, so this rule runs on every text; it is one
        // linear pass over the token characters.
        markers: &[],
        gate: Gate::Any,
        find: Find::Parse(generic::prefixed_tokens),
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
    /// The bits of rules without markers, which run on every text.
    always: u128,
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
    let always = RULES
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule.markers.is_empty())
        .fold(0u128, |bits, (index, _)| {
            bits | 1 << (FIRST_RULE_BIT + index)
        });
    Prefilter {
        scanner: Scanner::new(markers.iter().map(String::as_str)),
        owners,
        always,
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
        let mut bits = prefilter.always;
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
            Find::Shapes(shapes, judge) => shapes::find(&current, shapes)
                .into_iter()
                .filter(|range| judge(&current[range.clone()]))
                .collect(),
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
fn replace(text: &str, kind: &str, mut spans: Vec<Range<usize>>) -> Option<(String, u32)> {
    if spans.is_empty() {
        return None;
    }
    // Finders report spans in order; sorting is cheap insurance for the sweep below.
    spans.sort_by_key(|span| span.start);
    let done = redactions(text);
    let mut pending = done.as_slice();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut count = 0u32;
    for span in spans {
        let Some(span) = outside_redactions(text, span, &mut pending) else {
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

/// Keeps a span clear of earlier redactions (`done`, sorted, consumed from the front as spans
/// move right): a span starting inside one is dropped, and a span running into one stops
/// before it, so no rule ever rewrites another rule's marker.
fn outside_redactions(
    text: &str,
    span: Range<usize>,
    done: &mut &[Range<usize>],
) -> Option<Range<usize>> {
    while done.first().is_some_and(|marker| marker.end <= span.start) {
        *done = &done[1..];
    }
    let mut span = span;
    if let Some(marker) = done.first() {
        if marker.start <= span.start {
            return None;
        }
        if marker.start < span.end {
            let kept = text
                .get(span.start..marker.start)
                .map_or(0, |before| before.trim_end().len());
            span.end = span.start + kept;
        }
    }
    (!span.is_empty()).then_some(span)
}

/// The secret group `s` when the rule has one, else the whole match, if on character boundaries.
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

/// Every match of a specific enough shape is a secret.
fn any(_: &str) -> bool {
    true
}

/// Accepts prefixed tokens only when their body looks random, so a slug that merely starts
/// like a token (`sk-proj-management-dashboard-settings`) is left alone.
fn random_body(token: &str) -> bool {
    keys::looks_random(token.split_once(['_', '-']).map_or(token, |(_, body)| body))
}

/// Hugging Face tokens are letters only, but random letters mix cases.
fn random_or_mixed_case(token: &str) -> bool {
    let body = token.get(3..).unwrap_or_default();
    let mixed = body.bytes().any(|b| b.is_ascii_uppercase())
        && body.bytes().any(|b| b.is_ascii_lowercase());
    mixed || keys::looks_random(body)
}

/// Gate of the Discord rule: an id's worth of base64url, a dot, six more, a dot, and more.
fn discord_middle_segment(text: &[u8], start: usize, _: usize) -> bool {
    parsers::discord_middle(text, start)
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

/// How far along a line the command gates look for a flag.
const LINE_REACH: usize = 2048;

/// The rest of the line after `end`, up to [`LINE_REACH`] bytes.
fn rest_of_line(text: &[u8], end: usize) -> &[u8] {
    let rest = &text[end..(end + LINE_REACH).min(text.len())];
    rest.split(|&b| b == b'\n').next().unwrap_or_default()
}

/// Gate of the curl rule: `-u` or `--user` later on the same line.
fn curl_with_user(text: &[u8], _: usize, end: usize) -> bool {
    let line = rest_of_line(text, end);
    line.len() == LINE_REACH
        || line.windows(3).any(|w| w == b" -u" || w == b"\t-u")
        || line.windows(6).any(|w| w == b"--user")
}

/// Gate of the command-line password rule: ` -p` later on the same line.
fn dash_p_follows(text: &[u8], _: usize, end: usize) -> bool {
    let line = rest_of_line(text, end);
    line.len() == LINE_REACH
        || line
            .windows(3)
            .any(|w| (w[0] == b' ' || w[0] == b'\t') && w[1] == b'-' && w[2] == b'p')
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

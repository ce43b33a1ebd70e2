//! Privacy filters applied to everything mneme captures before it touches disk or an LLM.
//!
//! The same [`Sanitizer`] runs in the hook client (one short-lived process per agent event) and in
//! the long-running ingest service, so it is built to be cheap to start: construction only parses
//! the exclude globs; cleaning starts with one literal pass over the text that finds the markers a
//! secret could hang on (`ghp_`, `PRIVATE KEY`, `token`…), and only the rules whose markers occur
//! run. Most rules are token shapes and small parsers that need no setup; the few regexes (rare
//! multi-line or multi-part shapes) and the glob set are compiled on first use, once per process.
//!
//! Invariants:
//!
//! - [`Sanitizer::clean_text`] strips system tags, then replaces `<private>` blocks, then redacts
//!   secrets, in that order; an unclosed system tag or `<private>` block hides everything after it
//!   (fail closed).
//! - A redacted secret becomes `[REDACTED:<kind>]`; the text around it (an assignment's key, a URL's
//!   scheme, user and host) is kept so the observation stays useful.
//! - Cleaning is idempotent: cleaning already cleaned text changes nothing and reports nothing.
//! - Nothing here guesses by entropy alone: the generic detectors (`generic`) ask for a vendor-style
//!   prefix or a key naming a secret as well as a random-looking value, and keep hex digests,
//!   UUIDs, lockfile checksums, ids and base64 of text, so those survive unchanged.
//! - Truncation never splits a UTF-8 character, and [`Sanitizer::clean_output`] cleans before it
//!   truncates so that a secret can never be cut in half and escape redaction.

use std::borrow::Cow;
use std::sync::OnceLock;

use globset::{Candidate, Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};

mod assign;
mod generic;
mod keys;
mod parsers;
mod scan;
mod secrets;
mod shapes;
mod tags;
mod truncate;
pub mod url;

/// Every redaction starts with this, and no rule redacts text that contains it.
pub(crate) const REDACTED_PREFIX: &str = "[REDACTED:";

/// What replaces a private block, so readers can tell something was withheld.
pub(crate) const PRIVATE_MARKER: &str = "[PRIVATE]";

#[cfg(test)]
mod tests;

/// How a [`Sanitizer`] behaves; [`Config::default`] is what the hook and ingest use unless told otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Glob patterns (globset syntax, matched against the full path and the file name, ASCII
    /// case-insensitively, `*` not crossing `/`) whose file content must be dropped, e.g. `*.env*`,
    /// `**/secrets/**`, `*.pem`, `id_rsa*`.
    pub exclude_globs: Vec<String>,
    /// Maximum characters kept for one tool output before truncation.
    pub max_output_chars: usize,
    /// Characters kept at the head and at the tail when truncating.
    pub preview_chars: usize,
}

impl Default for Config {
    fn default() -> Self {
        let globs = [
            "*.env",
            "*.env.*",
            ".env*",
            "*.pem",
            "*.key",
            "id_rsa*",
            "id_ed25519*",
            "**/.ssh/**",
            "**/.aws/credentials",
            "**/.netrc",
        ];
        Config {
            exclude_globs: globs.iter().map(|glob| (*glob).to_owned()).collect(),
            max_output_chars: 100_000,
            preview_chars: 4_000,
        }
    }
}

/// Why a [`Sanitizer`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// One of [`Config::exclude_globs`] is not a valid glob.
    #[error("invalid exclude glob `{pattern}`")]
    InvalidGlob {
        /// The offending pattern, as configured.
        pattern: String,
        /// What globset objected to.
        #[source]
        source: globset::Error,
    },
}

/// What cleaning did to a piece of text; add reports up with [`Report::merge`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Secrets replaced by `[REDACTED:<kind>]`.
    pub secrets_redacted: u32,
    /// `<private>` blocks replaced by `[PRIVATE]`.
    pub private_blocks: u32,
    /// System tag blocks (`<system-reminder>` and friends) removed.
    pub system_tags_stripped: u32,
    /// Whether the text was truncated.
    pub truncated: bool,
}

impl Report {
    /// Adds `other` to this report (counts saturate rather than wrap).
    pub fn merge(&mut self, other: Report) {
        self.secrets_redacted = self.secrets_redacted.saturating_add(other.secrets_redacted);
        self.private_blocks = self.private_blocks.saturating_add(other.private_blocks);
        self.system_tags_stripped = self
            .system_tags_stripped
            .saturating_add(other.system_tags_stripped);
        self.truncated |= other.truncated;
    }

    /// True when cleaning changed nothing: no redaction, no removed block, no truncation.
    pub fn is_clean(&self) -> bool {
        *self == Report::default()
    }
}

/// How big a text was before [`Sanitizer::truncate`] cut it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    /// Characters (Unicode scalar values) in the original text.
    pub original_chars: usize,
    /// Lines in the original text, counted like [`str::lines`].
    pub original_lines: usize,
}

/// The privacy filters, configured once and shared freely (`Send + Sync`).
#[derive(Debug, Clone)]
pub struct Sanitizer {
    /// The parsed exclude globs; they are validated by [`Sanitizer::new`] but only compiled into a
    /// set on the first [`Sanitizer::is_excluded_path`] call, because most hook events never ask.
    globs: Vec<Glob>,
    glob_set: OnceLock<Option<GlobSet>>,
    max_output_chars: usize,
    preview_chars: usize,
}

impl Sanitizer {
    /// Builds a sanitizer, failing when an exclude glob does not parse.
    pub fn new(config: &Config) -> Result<Sanitizer, Error> {
        let globs = config
            .exclude_globs
            .iter()
            .map(|pattern| {
                // Matching is ASCII case-insensitive by lower-casing both sides, which compiles much
                // faster than globset's Unicode case folding.
                GlobBuilder::new(&pattern.to_ascii_lowercase())
                    .literal_separator(true)
                    .build()
                    .map_err(|source| Error::InvalidGlob {
                        pattern: pattern.clone(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sanitizer {
            globs,
            glob_set: OnceLock::new(),
            max_output_chars: config.max_output_chars,
            // Head and tail together must stay within the limit, or truncating would grow the text.
            preview_chars: config.preview_chars.min(config.max_output_chars / 2),
        })
    }

    /// Strips system tags, replaces private blocks with `[PRIVATE]`, and replaces secrets with
    /// `[REDACTED:<kind>]`, in that order.
    pub fn clean_text(&self, text: &str) -> (String, Report) {
        let Some((mut cleaned, mut report)) = clean_once(text) else {
            return (text.to_owned(), Report::default());
        };
        // Removing text can join what it separated (a command and its `-p` flag once a key block
        // between them is gone, the halves of a tag), so repeat until a round changes nothing:
        // that is what makes cleaning idempotent. Every round that changes something replaces
        // text that was not a marker, so this ends; the bound is a guard, not a limit in practice.
        for _ in 0..MAX_ROUNDS {
            let Some((again, more)) = clean_once(&cleaned) else {
                break;
            };
            cleaned = again;
            report.merge(more);
        }
        (cleaned, report)
    }

    /// Applies [`Sanitizer::clean_text`] to every string value inside a JSON value, in place.
    ///
    /// Object keys are left alone. A string stored under a key that names a secret (`"password"`,
    /// `"api_key"`, `"GITHUB_TOKEN"`, `"Authorization"`…) is redacted whole unless it is a
    /// placeholder, a path or a constant, because in JSON such a value is always a literal; so is
    /// a number of four digits or more under a password-like key.
    pub fn clean_json(&self, value: &mut serde_json::Value) -> Report {
        let mut report = Report::default();
        self.clean_json_into(value, &mut report);
        report
    }

    fn clean_json_into(&self, value: &mut serde_json::Value, report: &mut Report) {
        use serde_json::Value;
        match value {
            Value::String(text) => {
                let (cleaned, r) = self.clean_text(text);
                if !r.is_clean() {
                    *text = cleaned;
                }
                report.merge(r);
            }
            Value::Array(items) => items
                .iter_mut()
                .for_each(|item| self.clean_json_into(item, report)),
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    self.clean_json_into(item, report);
                    // A key the named-key rules do not take (`"key"`) still hides a random value.
                    if (keys::is_secret_json_key(key) && keys::redact_json_field(key, item))
                        || generic::redact_json_field(key, item)
                    {
                        report.secrets_redacted = report.secrets_redacted.saturating_add(1);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// True when the path matches an exclude glob, tried against the full path and the file name
    /// (backslashes count as separators, so Windows paths work too).
    pub fn is_excluded_path(&self, path: &str) -> bool {
        if self.globs.is_empty() {
            return false;
        }
        let set = self.glob_set.get_or_init(|| {
            let mut builder = GlobSetBuilder::new();
            for glob in &self.globs {
                builder.add(glob.clone());
            }
            builder.build().ok()
        });
        let normalised = path.replace('\\', "/").to_ascii_lowercase();
        let name = normalised.rsplit('/').next().unwrap_or(&normalised);
        match set {
            Some(set) => {
                set.is_match_candidate(&Candidate::new(&normalised))
                    || (name != normalised && set.is_match(name))
            }
            // Every glob compiled on its own in `new`, so only a size limit can make the set fail;
            // then match glob by glob rather than exclude nothing.
            None => self.globs.iter().any(|glob| {
                let matcher = glob.compile_matcher();
                matcher.is_match(&normalised) || matcher.is_match(name)
            }),
        }
    }

    /// Truncates text longer than `max_output_chars`, keeping `preview_chars` characters at the head
    /// and at the tail around a line saying how much was cut; never splits a UTF-8 character.
    ///
    /// Returns the text unchanged and `None` when it fits.
    pub fn truncate(&self, text: &str) -> (String, Option<Truncation>) {
        truncate::truncate(text, self.max_output_chars, self.preview_chars)
    }

    /// Cleans the start of a payload that could not be read and cuts it to at most `max_bytes`
    /// bytes (on a character boundary), for a dead letter's excerpt.
    ///
    /// Cleaning comes first, over [`EXCERPT_MARGIN`] bytes more than are kept, so a secret that
    /// straddles the cut is still whole when it is redacted and no half of it is left behind.
    pub fn clean_excerpt(&self, payload: &[u8], max_bytes: usize) -> String {
        let end = payload.len().min(max_bytes.saturating_add(EXCERPT_MARGIN));
        let (cleaned, _) = self.clean_text(&String::from_utf8_lossy(&payload[..end]));
        let mut cut = cleaned.len().min(max_bytes);
        while !cleaned.is_char_boundary(cut) {
            cut -= 1;
        }
        cleaned[..cut].to_owned()
    }

    /// Cleans a tool output and then truncates it; cleaning first means a secret straddling the
    /// cut can never leave half of itself behind.
    pub fn clean_output(&self, text: &str) -> (String, Report) {
        let (cleaned, mut report) = self.clean_text(text);
        let (kept, truncation) = self.truncate(&cleaned);
        report.truncated = truncation.is_some();
        (kept, report)
    }
}

/// How much more than it keeps [`Sanitizer::clean_excerpt`] cleans: longer than any one secret
/// but a PEM block, which is redacted from its BEGIN line even when its END line is cut off.
pub const EXCERPT_MARGIN: usize = 8 * 1024;

/// Most cleaning rounds [`Sanitizer::clean_text`] runs before giving up on reaching a fixed point.
const MAX_ROUNDS: usize = 16;

/// One round of cleaning: system tags, private blocks, secrets. `None` when nothing changed.
fn clean_once(text: &str) -> Option<(String, Report)> {
    let mut report = Report::default();
    // One pass finds every marker; removing blocks can only remove markers, so the result still
    // tells which rules may apply afterwards.
    let found = secrets::Markers::scan(text);
    let mut current = Cow::Borrowed(text);
    if found.system_tags() {
        let (out, n) = tags::strip_system_tags(&current);
        report.system_tags_stripped = n;
        current = Cow::Owned(out.into_owned());
    }
    if found.private_blocks() {
        let (out, n) = tags::hide_private_blocks(&current);
        report.private_blocks = n;
        current = Cow::Owned(out.into_owned());
    }
    let (out, n) = secrets::redact(&current, &found);
    report.secrets_redacted = n;
    (!report.is_clean()).then(|| (out.into_owned(), report))
}

/// The spans the generic detectors alone would redact in `text` (vendor-prefixed random tokens,
/// random values under keys naming a secret), for measuring them; cleaning never calls this.
pub fn generic_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = generic::prefixed_tokens(text);
    spans.extend(generic::keyed_values(text));
    spans.sort_by_key(|span| span.start);
    spans
}

/// Stable content hash (lowercase sha256 hex) of the given parts, each prefixed with its length in
/// bytes so that `["ab", "c"]` and `["a", "bc"]` hash differently; used for deduplication.
pub fn content_hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

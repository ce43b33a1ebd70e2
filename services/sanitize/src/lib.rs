//! Privacy filters applied to everything mneme captures before it touches disk or an LLM.
//!
//! The same [`Sanitizer`] runs in the hook client (one short-lived process per agent event) and in
//! the long-running ingest service, so it is built to be cheap to construct: the regexes are
//! compiled lazily, at most once per process, and only when a case-insensitive literal pass over
//! the text finds a marker that one of them could match.
//!
//! Invariants:
//!
//! - [`Sanitizer::clean_text`] strips system tags, then replaces `<private>` blocks, then redacts
//!   secrets, in that order; an unclosed system tag or `<private>` block hides everything after it
//!   (fail closed).
//! - A redacted secret becomes `[REDACTED:<kind>]`; the text around it (an assignment's key, a URL's
//!   scheme, user and host) is kept so the observation stays useful.
//! - Cleaning is idempotent: cleaning already cleaned text changes nothing and reports nothing.
//! - Nothing here guesses by entropy alone, so commit SHAs, UUIDs, digests and lockfile checksums
//!   survive unchanged.
//! - Truncation never splits a UTF-8 character, and [`Sanitizer::clean_output`] cleans before it
//!   truncates so that a secret can never be cut in half and escape redaction.

use std::sync::OnceLock;

use globset::{Candidate, Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};

mod assign;
mod keys;
mod scan;
mod secrets;
mod tags;
mod truncate;

#[cfg(any(test, feature = "corpus"))]
pub mod corpus;

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
    glob_set: OnceLock<GlobSet>,
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
                GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .case_insensitive(true)
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

    /// Strips system tags, replaces private blocks, redacts secrets (in that order).
    pub fn clean_text(&self, text: &str) -> (String, Report) {
        let mut report = Report::default();
        let found = secrets::Markers::scan(text);
        let mut current = std::borrow::Cow::Borrowed(text);
        if found.system_tags() {
            let (out, n) = tags::strip_system_tags(&current);
            report.system_tags_stripped = n;
            current = std::borrow::Cow::Owned(out.into_owned());
        }
        if found.private_blocks() {
            let (out, n) = tags::hide_private_blocks(&current);
            report.private_blocks = n;
            current = std::borrow::Cow::Owned(out.into_owned());
        }
        let (out, n) = secrets::redact(&current, &found);
        report.secrets_redacted = n;
        (out.into_owned(), report)
    }

    /// Applies [`Sanitizer::clean_text`] to every string value inside a JSON value, in place.
    ///
    /// Object keys are left alone. A string or number stored under a key that names a secret
    /// (`"password"`, `"api_key"`, `"GITHUB_TOKEN"`…) is redacted whole unless it is a placeholder,
    /// because in JSON such a value is always a literal.
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
                    if keys::is_secret_key(key) && keys::redact_json_field(key, item) {
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
            // Every glob already compiled on its own in `new`, so the set cannot fail to build; if
            // it somehow did, an empty set would exclude nothing, so fall back to the slow path.
            builder.build().unwrap_or_else(|_| GlobSet::empty())
        });
        let normalised = path.replace('\\', "/");
        let full = Candidate::new(&normalised);
        if set.is_match_candidate(&full) {
            return true;
        }
        let name = normalised.rsplit('/').next().unwrap_or(&normalised);
        if set.is_empty() {
            // Only reachable if building the set failed above: match glob by glob.
            return self.globs.iter().any(|glob| {
                let matcher = glob.compile_matcher();
                matcher.is_match(&normalised) || matcher.is_match(name)
            });
        }
        name != normalised && set.is_match(name)
    }

    /// Truncates text longer than `max_output_chars`, keeping `preview_chars` characters at the head
    /// and at the tail around a line saying how much was cut; never splits a UTF-8 character.
    ///
    /// Returns the text unchanged and `None` when it fits.
    pub fn truncate(&self, text: &str) -> (String, Option<Truncation>) {
        truncate::truncate(text, self.max_output_chars, self.preview_chars)
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

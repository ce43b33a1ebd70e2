//! What makes two observations "the same": normalised failure signatures, the subject a success
//! must match to fix a failure, and decision/preference/architecture statements in prompts.
//! Pure functions, no I/O.

use observation::identity::{command_key, relative};
use observation::row::Observation;
use serde::Serialize;
use serde_json::Value;

/// The normalised signature of a failure: two failures with equal signatures are one error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signature {
    pub tool: String,
    /// The command's program and subcommand (`git push`), for shell tools.
    pub command: String,
    pub error_class: String,
    /// The file, relative to the project, for file tools.
    pub file: String,
}

impl Signature {
    /// The stable hash of this signature.
    pub fn hash(&self) -> String {
        pattern_hash(&[
            "error",
            &self.tool,
            &self.command,
            &self.error_class,
            &self.file,
        ])
    }

    /// What a later success must match to fix it: the command, else the file.
    pub fn subject(&self) -> String {
        subject(&self.tool, &self.command, &self.file)
    }

    /// How the failure reads in a pattern's title.
    pub fn describe(&self) -> String {
        let what = if !self.command.is_empty() {
            format!("`{}`", self.command)
        } else if !self.file.is_empty() {
            format!("{} on {}", self.tool, self.file)
        } else {
            self.tool.clone()
        };
        format!("{what} fails: {}", self.error_class)
    }
}

/// A stable, short hash of the parts that make a pattern what it is.
pub fn pattern_hash(parts: &[&str]) -> String {
    sanitize::content_hash(parts)[..16].to_owned()
}

fn subject(tool: &str, command: &str, file: &str) -> String {
    if !command.is_empty() {
        format!("{tool}:{command}")
    } else if !file.is_empty() {
        format!("{tool}:{file}")
    } else {
        String::new()
    }
}

/// Whether a tool runs shell commands, in any host's vocabulary.
pub fn is_shell(tool: &str) -> bool {
    matches!(
        tool,
        "Bash" | "Shell" | "run_shell_command" | "execute_bash" | "shell" | "local_shell"
    )
}

fn input(raw: &Observation) -> Value {
    raw.input
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or(Value::Null)
}

/// The command of a shell call and the project-relative file of a file call.
pub fn command_and_file(raw: &Observation) -> (String, String) {
    let input = input(raw);
    if is_shell(&raw.tool_name) {
        let command = input
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| raw.title.split_once(": ").map(|(_, c)| c.to_owned()))
            .unwrap_or_default();
        return (command_key(&command), String::new());
    }
    let file = ["file_path", "notebook_path", "path"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
        .unwrap_or_default();
    (String::new(), relative(&file, &raw.project))
}

/// The full first line of a shell call's command, for showing how something was fixed.
pub fn command_line(raw: &Observation) -> String {
    input(raw)
        .get("command")
        .and_then(Value::as_str)
        .and_then(|c| c.lines().next())
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// The signature of a failed tool call.
pub fn signature(raw: &Observation) -> Signature {
    let (command, file) = command_and_file(raw);
    Signature {
        tool: raw.tool_name.clone(),
        command,
        error_class: error_class(raw.output.as_deref().unwrap_or("")),
        file,
    }
}

/// The subject of a successful call, matched against open failures.
pub fn success_subject(raw: &Observation) -> String {
    let (command, file) = command_and_file(raw);
    subject(&raw.tool_name, &command, &file)
}

const ERROR_WORDS: [&str; 14] = [
    "error",
    "fatal",
    "failed",
    "exception",
    "traceback",
    "not found",
    "does not exist",
    "denied",
    "cannot",
    "could not",
    "no such",
    "panicked",
    "rejected",
    "invalid",
];

fn is_errorish(line: &str) -> bool {
    let lower = line.to_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

/// Whether a failure is not the tool's: the user rejected the call, or the host cancelled it
/// because a parallel call failed. Such failures teach nothing about the command or file.
pub fn is_not_a_failure(output: &str) -> bool {
    output.contains("Sibling tool call errored")
        || output.contains("doesn't want to proceed with this tool use")
        || output.contains("The tool use was rejected")
}

/// The class of an error, stable across runs: the exit code, and the error line with
/// everything run-specific (numbers, paths, names with separators) replaced by `*`.
pub fn error_class(output: &str) -> String {
    // Hooks can deliver an error that was JSON-escaped once more, with literal `\n`s.
    let text = output
        .replace("\\n", "\n")
        .replace("<tool_use_error>", "")
        .replace("</tool_use_error>", "");
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return "failed".to_owned();
    };
    if let Some(code) = first.strip_prefix("Exit code") {
        let exit = format!("exit {}", code.trim());
        // A test or build run prints its own noise first; only an error on the very next line
        // (`fatal: …` from git) is part of the class.
        return match lines.next() {
            Some(next) if is_errorish(next) => format!("{exit}: {}", normalise(next)),
            _ => exit,
        };
    }
    let line = std::iter::once(first)
        .chain(lines)
        .take(20)
        .find(|l| is_errorish(l))
        .unwrap_or(first);
    normalise(line)
}

/// Lowercase, the first sentence, run-specific words replaced by `*`, at most 12 words.
fn normalise(line: &str) -> String {
    let line = line
        .split(". ")
        .next()
        .unwrap_or(line)
        .trim_end_matches('.');
    let words: Vec<String> = line
        .split_whitespace()
        .take(12)
        .map(|word| {
            let core = word.trim_matches(|c: char| ".,:;'\"`()[]{}<>".contains(c));
            let specific = core.chars().any(|c| {
                c.is_ascii_digit() || matches!(c, '/' | '\\' | '_' | '-' | '.' | '=' | '@')
            });
            if specific {
                "*".to_owned()
            } else {
                word.to_lowercase()
            }
        })
        .collect();
    words.join(" ")
}

/// The kind of a statement in a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    Decision,
    Preference,
    Architecture,
}

impl StatementKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StatementKind::Decision => "decision",
            StatementKind::Preference => "preference",
            StatementKind::Architecture => "architecture",
        }
    }
}

const DECISION: [&str; 16] = [
    "let's use",
    "lets use",
    "let's go with",
    "we decided",
    "we've decided",
    "decided to",
    "we'll use",
    "we will use",
    "go with",
    "switch to",
    "我们决定",
    "决定用",
    "决定使用",
    "就用",
    "改用",
    "采用",
];

const PREFERENCE: [&str; 20] = [
    "i prefer",
    "we prefer",
    "prefer ",
    "rather than",
    "instead of",
    "always use",
    "never use",
    "should always",
    "should never",
    "must always",
    "must never",
    "don't ever",
    "do not ever",
    "from now on",
    "偏好",
    "更喜欢",
    "总是",
    "永远不要",
    "始终",
    "不要用",
];

const ARCHITECTURE: [&str; 20] = [
    "architecture",
    "microservice",
    "service",
    "layer",
    "module",
    "schema",
    "database",
    "queue",
    "api",
    "protocol",
    "storage",
    "framework",
    "crate",
    "library",
    "架构",
    "模块",
    "服务",
    "数据库",
    "框架",
    "接口",
];

/// Statements of decisions, preferences and architecture choices in `text`.
pub fn statements(text: &str) -> Vec<(StatementKind, String)> {
    let mut out = Vec::new();
    for sentence in sentences(text) {
        if sentence.chars().count() > 300 {
            continue;
        }
        let lower = sentence.to_lowercase();
        let starts_absolute = lower.starts_with("always ") || lower.starts_with("never ");
        let decision = DECISION.iter().any(|p| lower.contains(p));
        let preference = starts_absolute || PREFERENCE.iter().any(|p| lower.contains(p));
        if !decision && !preference {
            continue;
        }
        let kind = if ARCHITECTURE.iter().any(|w| has_word(&lower, w)) {
            StatementKind::Architecture
        } else if decision {
            StatementKind::Decision
        } else {
            StatementKind::Preference
        };
        out.push((kind, sentence.to_owned()));
    }
    out
}

/// Whether `word` occurs in `text` as a word (CJK words as substrings).
fn has_word(text: &str, word: &str) -> bool {
    if !word.is_ascii() {
        return text.contains(word);
    }
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric)
            && !after.is_some_and(|c| c.is_alphanumeric() && c != 's')
    })
}

/// Split text into sentences (English and Chinese punctuation, and lines).
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\n', '。', '！', '？', '!', '?', ';', '；'])
        .flat_map(|s| s.split(". "))
        .map(|s| s.trim().trim_end_matches('.'))
        .filter(|s| s.chars().count() >= 6)
}

/// The key two statements share when they say the same thing: lowercase letters and digits.
pub fn statement_key(sentence: &str) -> String {
    sentence
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(tool: &str, input: &str, output: &str, project: &str) -> Observation {
        Observation {
            kind: "tool_failure".into(),
            tool_name: tool.into(),
            input: Some(input.into()),
            output: Some(output.into()),
            project: project.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_same_failure_in_two_checkouts_has_one_signature() {
        let a = signature(&failure(
            "Bash",
            r#"{"command":"git push 2>&1"}"#,
            "Exit code 128\nfatal: The current branch spotter-gqc has no upstream branch.\nTo push",
            "/w/spotter-gqc",
        ));
        let b = signature(&failure(
            "Bash",
            r#"{"command":"cd /w/spotter-dov && git push"}"#,
            "Exit code 128\nfatal: The current branch spotter-dov has no upstream branch.",
            "/w/spotter-dov",
        ));
        assert_eq!(a, b);
        assert_eq!(a.command, "git push");
        assert_eq!(
            a.error_class,
            "exit 128: fatal: the current branch * has no upstream branch"
        );
        assert_eq!(a.subject(), "Bash:git push");
        let c = signature(&failure(
            "Edit",
            r#"{"file_path":"/w/spotter-gqc/lib/a.ex"}"#,
            "<tool_use_error>String to replace not found in file. String: defp x</tool_use_error>",
            "/w/spotter-gqc",
        ));
        assert_eq!(c.file, "lib/a.ex");
        assert_eq!(c.error_class, "string to replace not found in file");
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn escaped_newlines_are_lines_and_cancellations_are_not_failures() {
        assert_eq!(
            error_class("Pre-commit validation failed:\\n\\n[DIALYZER]\\nFinding suitable PLTs"),
            "* validation failed:"
        );
        assert!(is_not_a_failure(
            "<tool_use_error>Sibling tool call errored</tool_use_error>"
        ));
        assert!(!is_not_a_failure("Exit code 1"));
    }

    #[test]
    fn noisy_test_output_keeps_only_the_exit_code() {
        assert_eq!(
            error_class("Exit code 2\nCompiling 4 files (.ex)\nerror: boom 123"),
            "exit 2"
        );
    }

    #[test]
    fn statements_are_classified_in_english_and_chinese() {
        let found = statements(
            "Let's use SQLite for the storage layer. Always run mix format before committing. \
             We decided to drop the retry. fix the test",
        );
        assert_eq!(
            found.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            vec![
                StatementKind::Architecture,
                StatementKind::Preference,
                StatementKind::Decision
            ]
        );
        let zh = statements("我们决定使用 NATS 作为消息总线。以后总是先写测试。");
        assert_eq!(zh.len(), 2);
        assert_eq!(zh[0].0, StatementKind::Decision);
        assert_eq!(zh[1].0, StatementKind::Preference);
        assert!(statements("run the tests please and tell me what broke").is_empty());
        assert_eq!(
            statement_key("Let's use SQLite!"),
            statement_key("let's use sqlite")
        );
    }
}

//! Reading one registry file: its categories and entries, and a [`Problem`] for each thing in
//! it that cannot be used, with the line it is on, while everything else in the file still
//! loads.
//!
//! The YAML parser gives values without positions, so the line an entry starts on is found in
//! the text itself ([`Layout`]): the lines of the `capabilities:` list that begin an item, in
//! order. The same layout is what [`crate::add`] and [`crate::remove`] edit, line by line, so
//! that a person's comments and formatting survive.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use yaml_serde::{Mapping, Value};

use crate::model::{Capability, Category, Kind, clip, id_problem};

/// Something in a registry file that cannot be used as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    /// One-based; `None` when the line cannot be told.
    pub line: Option<usize>,
    /// The field of an entry, or the top-level key, the problem is in.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Which of the two files of a directory a text is, which sets the default `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Hand,
    Generated,
}

impl Origin {
    fn default_source(self) -> &'static str {
        match self {
            Origin::Hand => "hand-written",
            Origin::Generated => "generated",
        }
    }
}

/// One usable entry of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    Capability(Capability),
    /// `disabled: true`: hides the entry of this id from the files before.
    Disabled(String),
}

/// What a file holds that can be used, and what cannot.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub categories: Vec<Category>,
    pub entries: Vec<Entry>,
    pub problems: Vec<Problem>,
    /// The id of every entry that has one, valid or not, in file order; what `add` refuses to
    /// repeat and `remove` looks for.
    pub ids: Vec<Option<String>>,
}

/// The fields an entry may have.
const FIELDS: [&str; 9] = [
    "id",
    "name",
    "category",
    "kind",
    "description",
    "when",
    "invoke",
    "source",
    "disabled",
];

/// Reads a registry file's text. A text that is not YAML is one problem for the whole file.
pub(crate) fn parse(file: &Path, text: &str, origin: Origin) -> Parsed {
    let mut parsed = Parsed::default();
    let problem = |line: Option<usize>, field: Option<&str>, message: String| Problem {
        file: file.to_path_buf(),
        line,
        field: field.map(str::to_owned),
        message,
    };
    let value: Value = match yaml_serde::from_str(text) {
        Ok(value) => value,
        Err(err) => {
            let line = err.location().map(|at| at.line());
            parsed
                .problems
                .push(problem(line, None, format!("not valid yaml: {err}")));
            return parsed;
        }
    };
    let top = match value {
        Value::Null => return parsed,
        Value::Mapping(top) => top,
        _ => {
            parsed.problems.push(problem(
                Some(1),
                None,
                "expected a mapping with `categories` and `capabilities`".to_owned(),
            ));
            return parsed;
        }
    };
    let layout = Layout::of(text);

    for (key, value) in &top {
        let Some(key) = key.as_str() else {
            parsed.problems.push(problem(
                None,
                None,
                "top-level keys must be strings; ignored".to_owned(),
            ));
            continue;
        };
        let line = top_key_line(text, key);
        match key {
            "categories" => categories(value, text, line, &mut parsed, &problem),
            "capabilities" => match value {
                Value::Null => {}
                Value::Sequence(items) => {
                    // The lines found in the text are trusted only when they are as many as the
                    // parser's items; otherwise an odd layout could name the wrong entry.
                    let lines = (layout.items.len() == items.len())
                        .then(|| layout.items.iter().map(|i| i + 1).collect::<Vec<_>>());
                    let mut seen: HashMap<String, Option<usize>> = HashMap::new();
                    for (index, item) in items.iter().enumerate() {
                        let at = lines.as_ref().map_or(line, |lines| Some(lines[index]));
                        let id = item
                            .as_mapping()
                            .and_then(|m| m.get("id"))
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        parsed.ids.push(id);
                        let Some(entry) = entry(item, at, origin, &mut parsed.problems, &problem)
                        else {
                            continue;
                        };
                        let id = match &entry {
                            Entry::Capability(cap) => &cap.id,
                            Entry::Disabled(id) => id,
                        };
                        if let Some(first) = seen.get(id) {
                            let first = first.map(|l| format!(" (first at line {l})"));
                            parsed.problems.push(problem(
                                at,
                                Some("id"),
                                format!(
                                    "duplicate id `{id}`{}; this entry is ignored",
                                    first.unwrap_or_default()
                                ),
                            ));
                            continue;
                        }
                        seen.insert(id.clone(), at);
                        parsed.entries.push(entry);
                    }
                }
                _ => parsed.problems.push(problem(
                    line,
                    Some("capabilities"),
                    "expected a list of capabilities".to_owned(),
                )),
            },
            other => parsed.problems.push(problem(
                line,
                Some(other),
                "unknown top-level key; ignored".to_owned(),
            )),
        }
    }
    parsed
}

fn categories(
    value: &Value,
    text: &str,
    line: Option<usize>,
    parsed: &mut Parsed,
    problem: &impl Fn(Option<usize>, Option<&str>, String) -> Problem,
) {
    let map = match value {
        Value::Null => return,
        Value::Mapping(map) => map,
        _ => {
            parsed.problems.push(problem(
                line,
                Some("categories"),
                "expected a mapping of category id to a one-line description".to_owned(),
            ));
            return;
        }
    };
    for (id, description) in map {
        let Some(id) = scalar(id) else {
            parsed.problems.push(problem(
                line,
                Some("categories"),
                "a category id must be a string".to_owned(),
            ));
            continue;
        };
        let at = nested_key_line(text, line, &id).or(line);
        if let Some(why) = id_problem(&id) {
            parsed.problems.push(problem(
                at,
                Some("categories"),
                format!("category id `{id}`: {why}"),
            ));
            continue;
        }
        let description = match description {
            Value::Null => String::new(),
            other => match scalar(other) {
                Some(text) => text,
                None => {
                    parsed.problems.push(problem(
                        at,
                        Some("categories"),
                        format!("category `{id}`: expected a one-line description"),
                    ));
                    continue;
                }
            },
        };
        parsed.categories.push(Category {
            id,
            description: clip(&description, crate::model::MAX_DESCRIPTION),
        });
    }
}

/// One entry, or `None` after reporting why it cannot be used.
fn entry(
    item: &Value,
    line: Option<usize>,
    origin: Origin,
    problems: &mut Vec<Problem>,
    problem: &impl Fn(Option<usize>, Option<&str>, String) -> Problem,
) -> Option<Entry> {
    let Some(map) = item.as_mapping() else {
        problems.push(problem(
            line,
            None,
            "expected an entry with id, name, category, kind, description and invoke".to_owned(),
        ));
        return None;
    };
    // An unknown field is reported but leaves the entry usable; what `fail` reports does not.
    for key in map.keys() {
        match key.as_str() {
            Some(key) if FIELDS.contains(&key) => {}
            Some(key) => problems.push(problem(
                line,
                Some(key),
                "unknown field; ignored".to_owned(),
            )),
            None => problems.push(problem(
                line,
                None,
                "field names must be strings; ignored".to_owned(),
            )),
        }
    }
    let mut errors = Errors {
        list: Vec::new(),
        make: problem,
        line,
    };

    let disabled = match map.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(disabled)) => *disabled,
        Some(_) => {
            errors.fail("disabled", "expected true or false".to_owned());
            problems.append(&mut errors.list);
            return None;
        }
    };

    let id = errors.required(map, "id");
    if let Some(id) = &id
        && let Some(why) = id_problem(id)
    {
        errors.fail("id", why);
        problems.append(&mut errors.list);
        return None;
    }
    // Hiding an entry needs nothing but its id.
    if disabled {
        problems.append(&mut errors.list);
        return id.map(Entry::Disabled);
    }

    let name = errors.required(map, "name");
    let category = errors.required(map, "category");
    let kind = match errors.required(map, "kind") {
        Some(kind) => match Kind::from_name(&kind) {
            Some(kind) => Some(kind),
            None => {
                let known: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                errors.fail(
                    "kind",
                    format!(
                        "unknown kind `{kind}`; expected one of {}",
                        known.join(", ")
                    ),
                );
                None
            }
        },
        None => None,
    };
    let description = errors.required(map, "description");
    let invoke = errors.required(map, "invoke");
    let when = match map.get("when") {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Sequence(items)) => {
            let texts: Option<Vec<String>> = items.iter().map(scalar_text).collect();
            if texts.is_none() {
                errors.fail("when", "expected a list of strings".to_owned());
            }
            texts
        }
        // One trigger written without brackets is read as a list of one.
        Some(Value::String(one)) => Some(vec![one.clone()]),
        Some(_) => {
            errors.fail("when", "expected a list of strings".to_owned());
            None
        }
    };
    let source = match map.get("source") {
        None | Some(Value::Null) => Some(origin.default_source().to_owned()),
        Some(value) => match scalar_text(value) {
            Some(source) => Some(source),
            None => {
                errors.fail("source", "expected a string".to_owned());
                None
            }
        },
    };

    if !errors.list.is_empty() {
        problems.append(&mut errors.list);
        return None;
    }
    Some(Entry::Capability(
        Capability {
            id: id?,
            name: name?,
            category: category?,
            kind: kind?,
            description: description?,
            when: when?,
            invoke: invoke?,
            source: source?,
            disabled: false,
            scope: Default::default(),
        }
        .clipped(),
    ))
}

/// The problems that make one entry unusable.
struct Errors<'a, F> {
    list: Vec<Problem>,
    make: &'a F,
    line: Option<usize>,
}

impl<F: Fn(Option<usize>, Option<&str>, String) -> Problem> Errors<'_, F> {
    fn fail(&mut self, field: &str, message: String) {
        self.list.push((self.make)(self.line, Some(field), message));
    }

    /// A required text field, or `None` after reporting it missing or of the wrong type.
    fn required(&mut self, map: &Mapping, field: &str) -> Option<String> {
        match map.get(field) {
            None | Some(Value::Null) => {
                self.fail(field, "missing required field".to_owned());
                None
            }
            Some(value) => match scalar_text(value) {
                Some(text) if !text.trim().is_empty() => Some(text),
                Some(_) => {
                    self.fail(field, "must not be empty".to_owned());
                    None
                }
                None => {
                    self.fail(field, "expected a string".to_owned());
                    None
                }
            },
        }
    }
}

/// A string value as text. Only strings: a number where text is expected is more likely a
/// mistake than a name.
fn scalar_text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

/// A key or value that reads naturally as text (a category called `2024` is fine).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The one-based line of a top-level key, found as a line starting with it at column zero.
fn top_key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| key_of(line) == Some(key))
        .map(|i| i + 1)
}

/// The one-based line of an indented key after the line `after` (one-based).
fn nested_key_line(text: &str, after: Option<usize>, key: &str) -> Option<usize> {
    let after = after?;
    text.lines()
        .enumerate()
        .skip(after)
        .take_while(|(_, line)| line.trim().is_empty() || line.starts_with([' ', '\t', '#']))
        .find(|(_, line)| key_of(line.trim_start()) == Some(key))
        .map(|(i, _)| i + 1)
}

/// The key a `key: value` line starts with, unquoted.
fn key_of(line: &str) -> Option<&str> {
    let (key, _) = line.split_once(':')?;
    let key = key.trim_end();
    let key = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .or_else(|| key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')))
        .unwrap_or(key);
    (!key.is_empty()).then_some(key)
}

/// Where the `capabilities:` list is in a file's text, by zero-based line index.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The `capabilities:` line.
    pub key: Option<usize>,
    /// The key's value is written on its own line (`capabilities: []`): not a block list.
    pub inline: bool,
    /// The indentation of the list's dashes, when it has items.
    pub indent: Option<usize>,
    /// The first line of each item, in order.
    pub items: Vec<usize>,
    /// One past the list's last line of content: where a new item goes.
    pub end: usize,
}

impl Layout {
    pub(crate) fn of(text: &str) -> Layout {
        let lines: Vec<&str> = text.lines().collect();
        let mut layout = Layout::default();
        let Some(key) = lines
            .iter()
            .position(|line| key_of(line) == Some("capabilities"))
        else {
            layout.end = lines.len();
            return layout;
        };
        layout.key = Some(key);
        layout.end = key + 1;
        let rest = lines[key].split_once(':').map_or("", |(_, rest)| rest);
        if !strip_comment(rest).trim().is_empty() {
            layout.inline = true;
            return layout;
        }
        for (index, line) in lines.iter().enumerate().skip(key + 1) {
            let content = line.trim_start();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let indent = line.len() - content.len();
            let dash = content == "-" || content.starts_with("- ") || content.starts_with("-\t");
            let document_marker = indent == 0 && (line.starts_with("---") || *line == "...");
            if document_marker {
                break;
            }
            match layout.indent {
                None if dash => {
                    layout.indent = Some(indent);
                    layout.items.push(index);
                }
                None => break,
                Some(item) if indent < item => break,
                Some(item) if indent == item && dash => layout.items.push(index),
                // A key at the items' own indentation ends a list written at column zero.
                Some(item) if indent == item => break,
                Some(_) => {}
            }
            layout.end = index + 1;
        }
        layout
    }

    /// The lines of item `index`: from its first line to the next item's, less the blank lines
    /// and comments that trail it, which belong to what follows.
    pub(crate) fn item_lines(&self, lines: &[&str], index: usize) -> std::ops::Range<usize> {
        let start = self.items[index];
        let mut end = self.items.get(index + 1).copied().unwrap_or(self.end);
        let indent = self.indent.unwrap_or(0);
        while end > start + 1 {
            let line = lines[end - 1];
            let content = line.trim_start();
            let trailing = content.is_empty()
                || (content.starts_with('#') && line.len() - content.len() <= indent);
            if !trailing {
                break;
            }
            end -= 1;
        }
        start..end
    }
}

/// A value's text without a trailing `# comment` (a `#` after whitespace, outside quotes).
fn strip_comment(text: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return &text[..at],
            None => {}
        }
        previous = c;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_hand(text: &str) -> Parsed {
        parse(Path::new("caps.yaml"), text, Origin::Hand)
    }

    fn ids(parsed: &Parsed) -> Vec<&str> {
        parsed
            .entries
            .iter()
            .map(|e| match e {
                Entry::Capability(c) => c.id.as_str(),
                Entry::Disabled(id) => id.as_str(),
            })
            .collect()
    }

    const GOOD: &str = "\
# My capabilities.
categories:
  testing: Running, writing and fixing tests
  '2024': Old things

capabilities:
  # The test suite.
  - id: make-test
    name: make test
    category: testing
    kind: task
    description: Run the whole test suite through the Makefile
    when: [run the tests, check nothing broke]
    invoke: make test
    source: Makefile
  - id: deploy
    name: deploy
    category: ops
    kind: command
    description: Ship it
    invoke: /deploy
";

    #[test]
    fn a_good_file_loads_with_defaults() {
        let parsed = parse_hand(GOOD);
        assert_eq!(parsed.problems, vec![]);
        assert_eq!(ids(&parsed), ["make-test", "deploy"]);
        let Entry::Capability(deploy) = &parsed.entries[1] else {
            panic!()
        };
        assert_eq!(deploy.source, "hand-written");
        assert!(deploy.when.is_empty());
        assert_eq!(parsed.categories.len(), 2);
        assert_eq!(parsed.categories[1].id, "2024");
    }

    #[test]
    fn the_layout_finds_each_item_and_the_end_of_the_list() {
        let layout = Layout::of(GOOD);
        assert_eq!(layout.key, Some(5));
        assert_eq!(layout.indent, Some(2));
        assert_eq!(layout.items, vec![7, 15]);
        assert_eq!(layout.end, 21);

        let zero = "capabilities:\n- id: a\n  name: b\n# trailing\n- id: c\nother: 1\n";
        let layout = Layout::of(zero);
        assert_eq!(layout.indent, Some(0));
        assert_eq!(layout.items, vec![1, 4]);
        assert_eq!(layout.end, 5);
        let lines: Vec<&str> = zero.lines().collect();
        assert_eq!(layout.item_lines(&lines, 0), 1..3);

        assert!(Layout::of("capabilities: [] # none yet\n").inline);
        assert!(!Layout::of("capabilities: # none yet\n").inline);
    }

    #[test]
    fn an_invalid_entry_is_reported_with_its_line_and_field_and_the_rest_loads() {
        let text = "\
capabilities:
  - id: first
    name: first
    category: c
    kind: task
    description: d
    invoke: run first
  - id: broken
    name: broken
    category: c
    kind: task
    description: d
    when: 5
  - id: second
    name: second
    category: c
    kind: macro
    description: d
    invoke: run second
  - id: Bad Id
  - id: third
    name: third
    category: c
    kind: tool
    description: d
    invoke: third
    colour: blue
  - id: first
    disabled: true
";
        let parsed = parse_hand(text);
        assert_eq!(ids(&parsed), ["first", "third"]);
        let shown: Vec<String> = parsed.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "caps.yaml:8: field `invoke`: missing required field",
                "caps.yaml:8: field `when`: expected a list of strings",
                "caps.yaml:14: field `kind`: unknown kind `macro`; expected one of skill, command, agent, mcp-tool, mcp-server, task, tool",
                "caps.yaml:20: field `id`: `B` is not allowed: use lowercase letters, digits and . _ : -",
                "caps.yaml:21: field `colour`: unknown field; ignored",
                "caps.yaml:28: field `id`: duplicate id `first` (first at line 2); this entry is ignored",
            ]
        );
    }

    #[test]
    fn broken_yaml_is_one_problem_on_the_parsers_line() {
        let parsed = parse_hand("capabilities:\n  - id: a\n    name: [unclosed\n    kind: task\n");
        assert!(parsed.entries.is_empty());
        assert_eq!(parsed.problems.len(), 1);
        let problem = &parsed.problems[0];
        assert!(
            problem.line.is_some_and(|l| (3..=5).contains(&l)),
            "{problem}"
        );
        assert!(problem.message.starts_with("not valid yaml"), "{problem}");
    }

    #[test]
    fn odd_shapes_are_problems_not_panics() {
        assert!(parse_hand("").problems.is_empty());
        assert!(parse_hand("# only a comment\n").problems.is_empty());
        assert!(parse_hand("capabilities:\n").problems.is_empty());
        assert_eq!(parse_hand("- a\n").problems.len(), 1);
        let parsed = parse_hand("capabilities: 3\nextra: 1\ncategories: [a]\n");
        let fields: Vec<_> = parsed.problems.iter().map(|p| p.field.clone()).collect();
        assert_eq!(
            fields,
            [
                Some("capabilities".to_owned()),
                Some("extra".to_owned()),
                Some("categories".to_owned())
            ]
        );
        assert_eq!(parsed.problems[1].line, Some(2));
        let parsed = parse_hand("capabilities:\n  - just text\n  - id: ok\n    disabled: true\n");
        assert_eq!(parsed.problems.len(), 1);
        assert_eq!(parsed.problems[0].line, Some(2));
        assert_eq!(ids(&parsed), ["ok"]);
    }
}

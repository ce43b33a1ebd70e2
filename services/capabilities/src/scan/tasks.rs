//! The project's own tasks, read from its build files: Makefile targets, justfile recipes,
//! `package.json` scripts, cargo aliases, Python scripts (`[project.scripts]`, Poetry's, PDM's)
//! and Taskfile tasks.

use std::path::Path;

use serde_json::Value as Json;

use super::secret;
use super::{found, read_small};
use crate::model::{Capability, Kind};

const CATEGORY: &str = "project-tasks";

/// Every task of the project in `dir`.
pub(crate) fn scan(dir: &Path) -> Vec<Capability> {
    let mut tasks = Vec::new();
    if let Some((name, text)) = first_of(dir, &["GNUmakefile", "makefile", "Makefile"]) {
        tasks.extend(makefile(&name, &text));
    }
    if let Some((name, text)) = first_of(dir, &["justfile", "Justfile", ".justfile"]) {
        tasks.extend(justfile(&name, &text));
    }
    if let Some(text) = read_small(&dir.join("package.json")) {
        tasks.extend(package_json(&text));
    }
    if let Some(text) = read_small(&dir.join(".cargo/config.toml"))
        .or_else(|| read_small(&dir.join(".cargo/config")))
    {
        tasks.extend(cargo_aliases(&text));
    }
    if let Some(text) = read_small(&dir.join("pyproject.toml")) {
        tasks.extend(pyproject(&text));
    }
    if let Some((name, text)) = first_of(
        dir,
        &[
            "Taskfile.yml",
            "Taskfile.yaml",
            "taskfile.yml",
            "taskfile.yaml",
        ],
    ) {
        tasks.extend(taskfile(&name, &text));
    }
    tasks
}

/// The first of these files in `dir` that exists, by the order `make` and the others look.
fn first_of(dir: &Path, names: &[&str]) -> Option<(String, String)> {
    names
        .iter()
        .find_map(|name| Some(((*name).to_owned(), read_small(&dir.join(name))?)))
}

fn task(
    prefix: &str,
    name: &str,
    description: String,
    invoke: String,
    source: &str,
) -> Option<Capability> {
    let mut cap = found(
        prefix,
        name,
        Kind::Task,
        CATEGORY,
        description,
        invoke,
        source,
    )?;
    cap.name = cap.invoke.clone();
    Some(cap)
}

/// Makefile targets with their `## description` (after the target) or the `# comment` line
/// just above them. `.PHONY` and other special targets, pattern rules and targets made of
/// variables are left out, as are recipe lines and `define` blocks.
fn makefile(source: &str, text: &str) -> Vec<Capability> {
    let mut found = Vec::new();
    let mut comment: Option<String> = None;
    let mut in_define = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if in_define {
            in_define = trimmed != "endef";
            continue;
        }
        if trimmed.starts_with("define ") || trimmed == "define" {
            in_define = true;
            comment = None;
            continue;
        }
        if line.starts_with('\t') {
            comment = None;
            continue;
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            comment = Some(text.trim_start_matches('#').trim().to_owned());
            continue;
        }
        let above = comment.take();
        let Some((targets, rest)) = line.split_once(':') else {
            continue;
        };
        // `X := y`, `X ::= y` and `X = a:b` are assignments, not rules.
        if rest.starts_with('=') || rest.starts_with(":=") || targets.contains('=') {
            continue;
        }
        let inline = rest
            .split_once("##")
            .map(|(_, text)| text.trim().to_owned())
            .filter(|text| !text.is_empty());
        let description = inline.or(above.filter(|text| !text.is_empty()));
        for target in targets.split_whitespace() {
            if target.starts_with('.') || target.contains('%') || target.contains('$') {
                continue;
            }
            let description = description
                .clone()
                .unwrap_or_else(|| format!("The Makefile target `{target}`"));
            found.extend(task(
                "make",
                target,
                description,
                format!("make {target}"),
                source,
            ));
        }
    }
    found
}

/// justfile recipes with the comment line above them; recipes starting with `_` are private
/// and left out, as are settings, aliases, assignments and attributes.
fn justfile(source: &str, text: &str) -> Vec<Capability> {
    let mut found = Vec::new();
    let mut comment: Option<String> = None;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) || line.trim().is_empty() {
            comment = None;
            continue;
        }
        if let Some(text) = line.strip_prefix('#') {
            // A shebang is not a description.
            comment = (!text.starts_with('!')).then(|| text.trim().to_owned());
            continue;
        }
        if line.starts_with('[') {
            // Attributes sit between a recipe's comment and the recipe.
            continue;
        }
        let above = comment.take();
        let Some((head, rest)) = line.split_once(':') else {
            continue;
        };
        if rest.starts_with('=') {
            continue;
        }
        let mut words = head.split_whitespace();
        let Some(name) = words.next().map(|name| name.trim_start_matches('@')) else {
            continue;
        };
        if ["set", "alias", "export", "import", "mod"].contains(&name)
            || name.starts_with('_')
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            continue;
        }
        let description = above
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| format!("The just recipe `{name}`"));
        found.extend(task(
            "just",
            name,
            description,
            format!("just {name}"),
            source,
        ));
    }
    found
}

/// `package.json` scripts, run with `npm run`; the description is the script itself, with
/// anything shaped like a secret left out.
fn package_json(text: &str) -> Vec<Capability> {
    let Ok(json) = serde_json::from_str::<Json>(text) else {
        return Vec::new();
    };
    let Some(scripts) = json.get("scripts").and_then(Json::as_object) else {
        return Vec::new();
    };
    scripts
        .iter()
        .filter_map(|(name, script)| {
            let script = script.as_str()?;
            task(
                "npm",
                name,
                command_text(script),
                format!("npm run {name}"),
                "package.json",
            )
        })
        .collect()
}

/// `[alias]` of `.cargo/config.toml`: a string or a list of words.
fn cargo_aliases(text: &str) -> Vec<Capability> {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let Some(aliases) = doc.get("alias").and_then(|item| item.as_table_like()) else {
        return Vec::new();
    };
    aliases
        .iter()
        .filter_map(|(name, value)| {
            let expansion = match value.as_str() {
                Some(text) => text.to_owned(),
                None => value
                    .as_array()?
                    .iter()
                    .filter_map(|word| word.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            task(
                "cargo",
                name,
                format!("cargo {}", command_text(&expansion)),
                format!("cargo {name}"),
                ".cargo/config.toml",
            )
        })
        .collect()
}

/// `pyproject.toml`'s scripts: `[project.scripts]` (installed commands), Poetry's (run with
/// `poetry run`) and PDM's (`pdm run`, with their `help`).
fn pyproject(text: &str) -> Vec<Capability> {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let table = |path: &[&str]| {
        let mut item = doc.as_item();
        for key in path {
            item = item.get(key)?;
        }
        item.as_table_like()
    };
    let mut found = Vec::new();
    if let Some(scripts) = table(&["project", "scripts"]) {
        for (name, target) in scripts.iter() {
            let target = target.as_str().unwrap_or_default();
            found.extend(task(
                "py",
                name,
                format!("Runs the Python entry point {target}"),
                name.to_owned(),
                "pyproject.toml",
            ));
        }
    }
    if let Some(scripts) = table(&["tool", "poetry", "scripts"]) {
        for (name, target) in scripts.iter() {
            let target = target
                .as_str()
                .map(str::to_owned)
                .or_else(|| {
                    Some(
                        target
                            .as_table_like()?
                            .get("callable")?
                            .as_str()?
                            .to_owned(),
                    )
                })
                .unwrap_or_default();
            found.extend(task(
                "py",
                name,
                format!("Runs the Python entry point {target}"),
                format!("poetry run {name}"),
                "pyproject.toml",
            ));
        }
    }
    if let Some(scripts) = table(&["tool", "pdm", "scripts"]) {
        for (name, script) in scripts.iter() {
            // `_` holds settings shared by every script, not a script.
            if name == "_" {
                continue;
            }
            let description = match script.as_str() {
                Some(command) => Some(command_text(command)),
                None => script.as_table_like().and_then(|script| {
                    let field = |key: &str| script.get(key).and_then(|item| item.as_str());
                    field("help").map(str::to_owned).or_else(|| {
                        ["cmd", "shell", "call"]
                            .into_iter()
                            .find_map(field)
                            .map(command_text)
                    })
                }),
            }
            .unwrap_or_else(|| format!("The PDM script `{name}`"));
            found.extend(task(
                "py",
                name,
                description,
                format!("pdm run {name}"),
                "pyproject.toml",
            ));
        }
    }
    found
}

/// Taskfile tasks (`task <name>`) with their `desc` (else `summary`); internal tasks are left
/// out.
fn taskfile(source: &str, text: &str) -> Vec<Capability> {
    let Ok(yaml_serde::Value::Mapping(doc)) = yaml_serde::from_str::<yaml_serde::Value>(text)
    else {
        return Vec::new();
    };
    let Some(tasks) = doc.get("tasks").and_then(yaml_serde::Value::as_mapping) else {
        return Vec::new();
    };
    tasks
        .iter()
        .filter_map(|(name, body)| {
            let name = name.as_str()?;
            let field = |key: &str| body.get(key).and_then(yaml_serde::Value::as_str);
            if body.get("internal").and_then(yaml_serde::Value::as_bool) == Some(true) {
                return None;
            }
            let description = field("desc")
                .or_else(|| field("summary"))
                .map(str::to_owned)
                .unwrap_or_else(|| format!("The Taskfile task `{name}`"));
            task("task", name, description, format!("task {name}"), source)
        })
        .collect()
}

/// A command as a description: its words with anything secret left out.
fn command_text(command: &str) -> String {
    let words: Vec<String> = command.split_whitespace().map(String::from).collect();
    let Some((first, rest)) = words.split_first() else {
        return String::new();
    };
    secret::command_line(first, rest)
}

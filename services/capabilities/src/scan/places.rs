//! The hosts' own files: skills (`SKILL.md` with YAML front matter), commands (Markdown, or
//! Gemini's TOML), agents (Markdown, or Kiro's JSON) and MCP server configurations (JSON's
//! `mcpServers`, Codex's `[mcp_servers.<name>]`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value as Json;

use super::secret;
use super::{Context, found, parent_name, read_config, read_small, stem};
use crate::model::{Capability, Kind};

/// A skill: its front matter's `name`, `description` and `category`, else its folder's name and
/// its first line of text.
pub(crate) fn skill(ctx: &Context<'_>) -> Option<Capability> {
    let text = read_small(ctx.path)?;
    let (fields, body) = front_matter(&text);
    let name = fields
        .get("name")
        .cloned()
        .unwrap_or_else(|| parent_name(ctx.path));
    let description = fields
        .get("description")
        .cloned()
        .or_else(|| first_line(body))
        .unwrap_or_else(|| format!("The {name} skill"));
    let category = fields
        .get("category")
        .map(|category| category.trim().to_lowercase())
        .filter(|category| crate::model::id_problem(category).is_none())
        .unwrap_or_else(|| "skills".to_owned());
    found(
        "skill",
        &name,
        Kind::Skill,
        &category,
        description,
        format!("skill {name}"),
        ctx.source,
    )
}

/// A command: one file, invoked as `/<file stem>`.
pub(crate) fn command(ctx: &Context<'_>) -> Option<Capability> {
    let text = read_small(ctx.path)?;
    let name = stem(ctx.path);
    let description = if ctx.path.extension().is_some_and(|ext| ext == "toml") {
        let doc: toml_edit::DocumentMut = text.parse().ok()?;
        doc.get("description")
            .and_then(|item| item.as_str())
            .map(str::to_owned)
            .or_else(|| doc.get("prompt")?.as_str().and_then(first_line))
    } else {
        let (fields, body) = front_matter(&text);
        fields
            .get("description")
            .cloned()
            .or_else(|| first_line(body))
    }
    .unwrap_or_else(|| format!("The /{name} command"));
    found(
        "command",
        &name,
        Kind::Command,
        "commands",
        description,
        format!("/{name}"),
        ctx.source,
    )
    .map(|mut cap| {
        cap.name = format!("/{name}");
        cap
    })
}

/// A subagent: Markdown with front matter, or Kiro's JSON (`name`, `description`).
pub(crate) fn agent(ctx: &Context<'_>) -> Option<Capability> {
    let text = read_small(ctx.path)?;
    let (name, description) = if ctx.path.extension().is_some_and(|ext| ext == "json") {
        let json: Json = serde_json::from_str(&text).ok()?;
        let field = |key: &str| json.get(key).and_then(Json::as_str).map(str::to_owned);
        (field("name"), field("description"))
    } else {
        let (fields, body) = front_matter(&text);
        (
            fields.get("name").cloned(),
            fields
                .get("description")
                .cloned()
                .or_else(|| first_line(body)),
        )
    };
    let name = name
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| stem(ctx.path));
    let description = description.unwrap_or_else(|| format!("The {name} agent"));
    found(
        "agent",
        &name,
        Kind::Agent,
        "agents",
        description,
        format!("agent {name}"),
        ctx.source,
    )
}

/// The MCP servers of a configuration file: those for everywhere, and those Claude Code's
/// `.claude.json` keeps for the scanned project (`projects.<path>.mcpServers`).
pub(crate) fn mcp_servers(ctx: &Context<'_>) -> (Vec<Capability>, Vec<Capability>) {
    let Some(text) = read_config(ctx.path) else {
        return (Vec::new(), Vec::new());
    };
    if ctx.path.extension().is_some_and(|ext| ext == "toml") {
        return (codex_servers(ctx, &text), Vec::new());
    }
    let Ok(json) = serde_json::from_str::<Json>(&text) else {
        tracing::warn!(path = %ctx.path.display(), "capability scan skips an mcp configuration that is not json");
        return (Vec::new(), Vec::new());
    };
    let everywhere = json_servers(json.get("mcpServers"), ctx.source);
    let for_project = match (ctx.project, json.get("projects").and_then(Json::as_object)) {
        (Some(project), Some(projects)) => projects
            .iter()
            .filter(|(path, _)| same_dir(Path::new(path), project))
            .flat_map(|(_, entry)| {
                // Named without the project's path, so the file reads the same on every machine.
                let source = format!("{} (this project's mcpServers)", ctx.source);
                json_servers(entry.get("mcpServers"), &source)
            })
            .collect(),
        _ => Vec::new(),
    };
    (everywhere, for_project)
}

/// Whether two paths name one directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
}

fn json_servers(servers: Option<&Json>, source: &str) -> Vec<Capability> {
    let Some(servers) = servers.and_then(Json::as_object) else {
        return Vec::new();
    };
    servers
        .iter()
        .filter_map(|(name, server)| {
            let text = |key: &str| server.get(key).and_then(Json::as_str).unwrap_or_default();
            let args: Vec<String> = server
                .get("args")
                .and_then(Json::as_array)
                .map(|args| {
                    args.iter()
                        .filter_map(Json::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let url = [text("url"), text("httpUrl"), text("serverUrl")]
                .into_iter()
                .find(|url| !url.is_empty())
                .unwrap_or_default();
            server_capability(name, text("command"), &args, url, source)
        })
        .collect()
}

fn codex_servers(ctx: &Context<'_>, text: &str) -> Vec<Capability> {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        tracing::warn!(path = %ctx.path.display(), "capability scan skips a codex configuration that is not toml");
        return Vec::new();
    };
    let Some(servers) = doc.get("mcp_servers").and_then(|item| item.as_table_like()) else {
        return Vec::new();
    };
    servers
        .iter()
        .filter_map(|(name, server)| {
            let server = server.as_table_like()?;
            let text = |key: &str| {
                server
                    .get(key)
                    .and_then(|item| item.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            let args: Vec<String> = server
                .get("args")
                .and_then(|item| item.as_array())
                .map(|args| {
                    args.iter()
                        .filter_map(|arg| arg.as_str())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            server_capability(name, &text("command"), &args, &text("url"), ctx.source)
        })
        .collect()
}

/// One MCP server, described by how it is started or reached, with no secret in it: the
/// environment and headers are never read, and the command line and URL lose their secrets.
fn server_capability(
    name: &str,
    command: &str,
    args: &[String],
    url: &str,
    source: &str,
) -> Option<Capability> {
    let description = if !command.is_empty() {
        format!(
            "MCP server started as `{}`",
            secret::command_line(command, args)
        )
    } else if !url.is_empty() {
        format!("MCP server at {}", secret::url(url))
    } else {
        format!("MCP server {name}")
    };
    found(
        "mcp",
        name,
        Kind::McpServer,
        "mcp-servers",
        description,
        format!("mcp server {name}"),
        source,
    )
}

/// A Markdown file's YAML front matter (the text between a first line `---` and the next) as
/// text fields, and the text after it. Front matter that is not valid YAML (an unquoted colon in
/// a description is common) is read line by line as `key: value`.
pub(crate) fn front_matter(text: &str) -> (BTreeMap<String, String>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut fields = BTreeMap::new();
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (fields, text);
    };
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((head_end, body_start)) = end else {
        return (fields, text);
    };
    let head = &rest[..head_end];
    match yaml_serde::from_str::<yaml_serde::Value>(head) {
        Ok(yaml_serde::Value::Mapping(map)) => {
            for (key, value) in map {
                let (Some(key), Some(value)) = (key.as_str(), scalar(&value)) else {
                    continue;
                };
                fields.insert(key.to_owned(), value);
            }
        }
        _ => {
            for line in head.lines() {
                if line.starts_with([' ', '\t']) {
                    continue;
                }
                if let Some((key, value)) = line.split_once(':') {
                    let value = value.trim().trim_matches(['"', '\'']);
                    if !value.is_empty() {
                        fields.insert(key.trim().to_owned(), value.to_owned());
                    }
                }
            }
        }
    }
    (fields, &rest[body_start..])
}

fn scalar(value: &yaml_serde::Value) -> Option<String> {
    match value {
        yaml_serde::Value::String(text) => Some(text.clone()),
        yaml_serde::Value::Number(number) => Some(number.to_string()),
        yaml_serde::Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The first line of text, without Markdown heading marks.
pub(crate) fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_read_as_yaml_or_line_by_line() {
        let (fields, body) = front_matter("---\nname: a\ndescription: b c\n---\n# Title\n");
        assert_eq!(fields["name"], "a");
        assert_eq!(fields["description"], "b c");
        assert_eq!(body, "# Title\n");
        let (fields, _) = front_matter("---\nname: a\ndescription: Use when: x\n---\n");
        assert_eq!(fields["description"], "Use when: x");
        let (fields, body) = front_matter("# No front matter\n");
        assert!(fields.is_empty());
        assert_eq!(first_line(body).as_deref(), Some("No front matter"));
    }
}

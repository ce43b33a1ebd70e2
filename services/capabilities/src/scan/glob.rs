//! The capability places' patterns: paths relative to a root whose components may hold `*`,
//! which matches any run of characters within that one component.

use std::path::{Path, PathBuf};

/// The files under `base` that `pattern` names, sorted. A `*` does not match a name starting
/// with `.` unless the pattern's component starts with one too, as in a shell. Symlinks are
/// followed (skills are often linked in from a repository); the patterns' fixed depth keeps a
/// link loop from being walked forever.
pub(crate) fn matches(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut current = vec![base.to_path_buf()];
    let components: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    for (index, component) in components.iter().enumerate() {
        let last = index + 1 == components.len();
        let mut next = Vec::new();
        for dir in &current {
            if !component.contains('*') {
                let path = dir.join(component);
                if exists_as(&path, last) {
                    next.push(path);
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|name| component_matches(component, name))
                .collect();
            names.sort();
            for name in names {
                let path = dir.join(name);
                if exists_as(&path, last) {
                    next.push(path);
                }
            }
        }
        current = next;
    }
    current
}

/// Whether `path` is a file (for the pattern's last component) or a directory (before it).
fn exists_as(path: &Path, file: bool) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| if file { meta.is_file() } else { meta.is_dir() })
}

/// Whether one component's pattern matches one name.
pub(crate) fn component_matches(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().expect("split yields at least one part");
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        // No `*`: the whole name must be the pattern.
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_matches_within_one_component() {
        assert!(component_matches("*.md", "deploy.md"));
        assert!(!component_matches("*.md", "deploy.toml"));
        assert!(component_matches("*", "anything"));
        assert!(!component_matches("*", ".hidden"));
        assert!(component_matches(".*", ".hidden"));
        assert!(component_matches("a*b*c", "abc"));
        assert!(component_matches("a*b*c", "axxbyyc"));
        assert!(!component_matches("a*b*c", "axxbyy"));
        assert!(!component_matches("ab*ba", "aba"));
        assert!(component_matches("SKILL.md", "SKILL.md"));
        assert!(!component_matches("SKILL.md", "SKILL.mdx"));
    }

    #[test]
    fn patterns_walk_directories_and_sort_what_they_find() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        for path in [
            ".claude/skills/b/SKILL.md",
            ".claude/skills/a/SKILL.md",
            ".claude/skills/c/README.md",
            ".claude/skills/.hidden/SKILL.md",
        ] {
            let path = base.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        // A directory where a file is expected is not a match.
        std::fs::create_dir_all(base.join(".claude/skills/d/SKILL.md")).unwrap();
        let found = matches(base, ".claude/skills/*/SKILL.md");
        assert_eq!(
            found,
            vec![
                base.join(".claude/skills/a/SKILL.md"),
                base.join(".claude/skills/b/SKILL.md")
            ]
        );
        assert!(matches(base, ".nothing/*.md").is_empty());
    }
}

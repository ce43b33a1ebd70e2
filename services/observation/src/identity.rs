//! What makes two observations of different sessions "the same thing": a shell command's
//! program and subcommand, a file relative to its project. The compressor and the pattern
//! service must agree on them, or a fix the compressor names would not match the pattern's.

/// `path` relative to `project` when it lies inside it, so checkouts of one repository in
/// different places (git worktrees) name a file the same way.
pub fn relative(path: &str, project: &str) -> String {
    let project = project.trim_end_matches('/');
    if !project.is_empty()
        && let Some(rest) = path.strip_prefix(project)
        && let Some(rest) = rest.strip_prefix('/')
    {
        return rest.to_owned();
    }
    path.to_owned()
}

/// The command's program and subcommand (`git push`, `cargo test`), without `cd … &&`, env
/// assignments, sudo, and arguments: what makes two runs "the same command".
pub fn command_key(command: &str) -> String {
    // The command that matters is the first one after any `cd`: `cd x && mix test | head`.
    let part = command
        .split("&&")
        .map(str::trim)
        .find(|p| !p.starts_with("cd ") && !p.is_empty())
        .unwrap_or(command);
    let words: Vec<&str> = part
        .split_whitespace()
        .skip_while(|w| w.contains('=') || matches!(*w, "sudo" | "env" | "time" | "exec"))
        .collect();
    let Some(program) = words.first() else {
        return String::new();
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    match words.get(1) {
        Some(sub)
            if !sub.starts_with('-')
                && sub
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':')) =>
        {
            format!("{program} {sub}")
        }
        _ => program.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_key_is_program_and_subcommand() {
        assert_eq!(command_key("git push 2>&1"), "git push");
        assert_eq!(
            command_key("cd /a/b && mix test test/x_test.exs"),
            "mix test"
        );
        assert_eq!(command_key("RUST_LOG=debug cargo test -p x"), "cargo test");
        assert_eq!(command_key("node assets/build.js"), "node");
        assert_eq!(command_key("sudo /usr/bin/ls -la"), "ls");
        assert_eq!(command_key("   "), "");
    }

    #[test]
    fn relative_only_strips_a_whole_project_prefix() {
        assert_eq!(relative("/p/src/a.rs", "/p/"), "src/a.rs");
        assert_eq!(relative("/px/a.rs", "/p"), "/px/a.rs");
        assert_eq!(relative("/p/a.rs", ""), "/p/a.rs");
    }
}

//! Keeping secrets out of the registry. An MCP server's configuration often carries tokens
//! (environment values, `--api-key` arguments, credentials in URLs, authorisation headers); the
//! registry describes a server by its command line with every such value left out, since the
//! registry is read by agents and may be shared.

/// What stands in for a value left out.
pub(crate) const LEFT_OUT: &str = "<secret>";

/// mneme's sanitiser, over what this module made of a command line or URL: the known secret
/// shapes and the generic detectors catch what a word-by-word look misses (a token in a
/// header, a key glued to other text), as everywhere else mneme writes to disk.
fn scrubbed(text: String) -> String {
    static SANITIZER: std::sync::LazyLock<Option<sanitize::Sanitizer>> =
        std::sync::LazyLock::new(|| sanitize::Sanitizer::new(&sanitize::Config::default()).ok());
    match SANITIZER.as_ref() {
        Some(sanitizer) => sanitizer.clean_text(&text).0,
        // The default configuration always builds; were it ever not to, nothing is written
        // rather than something unscrubbed.
        None => LEFT_OUT.to_owned(),
    }
}

/// Words in a flag or key name that say its value is secret.
const SECRET_WORDS: [&str; 10] = [
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "auth",
    "bearer",
    "credential",
    "cookie",
    "session",
];

/// Whether a flag or key name (`--api-key`, `GITHUB_TOKEN`, `password`) names a secret.
pub(crate) fn secret_name(name: &str) -> bool {
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| name.contains(word))
}

/// A command line with secret values left out: the value after a secret-naming flag, the value
/// of `--flag=value` and `NAME=value` when the name is secret, anything shaped like a token, and
/// credentials and query strings in URLs.
pub(crate) fn command_line(command: &str, args: &[String]) -> String {
    let mut words = Vec::with_capacity(args.len() + 1);
    if !command.is_empty() {
        words.push(word(command));
    }
    let mut hide_next = false;
    for arg in args {
        if hide_next {
            words.push(LEFT_OUT.to_owned());
            hide_next = false;
            continue;
        }
        if arg.starts_with('-') && !arg.contains('=') && secret_name(arg) {
            hide_next = true;
            words.push(arg.clone());
            continue;
        }
        words.push(word(arg));
    }
    scrubbed(words.join(" "))
}

/// One word of a command line with any secret in it left out.
pub(crate) fn word(word: &str) -> String {
    if let Some((name, _)) = word.split_once('=')
        && secret_name(name)
    {
        return format!("{name}={LEFT_OUT}");
    }
    if word.contains("://") {
        return url(word);
    }
    if looks_like_token(word) {
        return LEFT_OUT.to_owned();
    }
    word.to_owned()
}

/// A URL without its user information and query string, where credentials are put.
pub(crate) fn url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let path: Vec<String> = path
        .split('/')
        .map(|segment| {
            if looks_like_token(segment) {
                LEFT_OUT.to_owned()
            } else {
                segment.to_owned()
            }
        })
        .collect();
    scrubbed(format!("{scheme}://{host}{}", path.join("/")))
}

/// Whether a word has the shape of a generated secret: long, one unbroken run of letters,
/// digits and `-_`, with both letters and digits, or a known token prefix.
pub(crate) fn looks_like_token(word: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "sk-",
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "glpat-",
        "lin_api_",
    ];
    if PREFIXES.iter().any(|prefix| word.starts_with(prefix)) && word.len() > 12 {
        return true;
    }
    word.len() >= 24
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn secret_values_are_left_out_of_command_lines() {
        assert_eq!(
            command_line(
                "npx",
                &args(&[
                    "-y",
                    "@linear/mcp",
                    "--api-key",
                    "abc",
                    "--token=xyz",
                    "--port",
                    "80"
                ])
            ),
            "npx -y @linear/mcp --api-key <secret> --token=<secret> --port 80"
        );
        assert_eq!(
            command_line(
                "env",
                &args(&["GITHUB_TOKEN=ghp_1234567890abcdef", "server"])
            ),
            "env GITHUB_TOKEN=<secret> server"
        );
        assert_eq!(
            command_line("run", &args(&["a1b2c3d4e5f6g7h8i9j0k1l2m3"])),
            "run <secret>"
        );
        assert_eq!(
            command_line("uvx", &args(&["mcp-server-fetch"])),
            "uvx mcp-server-fetch"
        );
    }

    #[test]
    fn urls_lose_credentials_and_queries() {
        assert_eq!(
            url("https://user:hunter2@mcp.example.com/sse?token=abc#x"),
            "https://mcp.example.com/sse"
        );
        assert_eq!(
            url("https://hooks.example.com/v1/a1b2c3d4e5f6g7h8i9j0k1l2m3/mcp"),
            "https://hooks.example.com/v1/<secret>/mcp"
        );
        assert_eq!(url("http://localhost:8080"), "http://localhost:8080");
    }
}

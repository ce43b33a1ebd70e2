//! Judging assignments: does a key name a secret, and is its value a literal worth redacting?
//!
//! Keys:
//!
//! - A key names a secret when one of its words (split on `_ - . $` and camelCase humps) is a
//!   secret word (`password`, `passwd`, `pwd`, `pass`, `passphrase`, `secret`, `token`, `auth`,
//!   `credentials`, `apikey`…), contains a run-together one (`PGPASSWORD`), or is `key` after a
//!   qualifier (`api_key`, `SIGNING_KEY`, `stripeKey`). In JSON, `Authorization` and `Cookie`
//!   header names count too.
//! - A key that only describes a secret is not one: a last word such as `name`, `id`, `type`,
//!   `url`, `path`, `file`, `length`, `hash`, `expiry`, or a file extension (`api_key_name`,
//!   `token_type`, `password_hash`, `PRIVATE_KEY_PATH`, `token.rs`); a first word such as `max`,
//!   `num`, `is`, `input` (`max_tokens`, `input_tokens`); any word `allow`, `empty`, `expired`
//!   (`MYSQL_ALLOW_EMPTY_PASSWORD`). `PWD` and `OLDPWD` are the shell's directories.
//!
//! Values:
//!
//! - Placeholders are never secrets: empty values, `${VAR}`, `$VAR`, `$(command)`, `%VAR%`,
//!   `{{ template }}`, `<your-token>`, format fields (`{}`, `{0}:{1}`, `%s`), masks (`xxx`,
//!   `****`, `...`) and anything already redacted. Weak but real values (`changeme`, `password`,
//!   `hunter2`) are redacted: they may well be the password.
//! - Quoted values are literals and are redacted, except constants (`"true"`, `"allow"`), paths,
//!   short numbers, colours, code paths (`"$serde::private::Value"`), a value naming its own field
//!   (`TOKEN_ATTR = "token"`) and a template being filled in (`"Basic " + x`, `"%s" % x`).
//! - Unquoted values of shell and env-file assignments (`KEY=value` with no blanks, to an
//!   upper-case variable, after `export`/`set`/`-e`, at the start of a line, or in a URL query)
//!   are literals, whatever they look like.
//! - Elsewhere an unquoted value is redacted unless it reads as code: a call, index, block or
//!   generic (`next_token()`, `Option<String>`); a reference, operator or comment (`&x`, `*ptr`,
//!   `$x`, `==`); a keyword or constant (`None`, `self`, `true`); a macro (`quote!`); a member path
//!   of names (`self.token`, `req.body.password`); the key passed along (`token=token`); a
//!   multi-word identifier (`next_token`, `accessToken`); a type (`token: String`); an element or
//!   statement end (`token: semi,`); anything after a declaration (`let token = …`); or, when it
//!   has no digit, a plain word assigned with blanks to a lower-case name (`token = Name`), after
//!   a colon mid-line (prose, JavaScript shorthands) or to a class-like key (`AnsiToken: A …`).
//!   Random secrets nearly always contain a digit, so a word with one is read as a literal.
//! - YAML values, HTTP headers and INI values (a key at the start of its line) run to the end of
//!   the line, so a passphrase with spaces goes whole; shell values stop at the first blank.

use serde_json::Value;

use crate::{PRIVATE_MARKER, REDACTED_PREFIX};

/// Words that make a key secret wherever they appear in it.
#[rustfmt::skip]
const SECRET_WORDS: &[&str] = &[
    "password", "passwords", "passwd", "pwd", "pw", "pass", "passphrase", "passcode", "secret",
    "secrets", "token", "apikey", "apikeys", "auth", "credential", "credentials", "creds",
    "privatekey", "accesskey", "secretkey", "authtoken", "accesstoken", "refreshtoken",
    "clientsecret", "sessiontoken", "pat",
];

/// Run-together spellings that make a key secret even inside a longer word (`PGPASSWORD`).
#[rustfmt::skip]
const SECRET_INFIXES: &[&str] = &[
    "password", "passwd", "passphrase", "secret", "apikey", "accesskey", "privatekey", "authtoken",
    "accesstoken", "credential",
];

/// Words that make a following `key` a secret key (`api_key`, `SIGNING_KEY`, `stripeKey`).
#[rustfmt::skip]
const KEY_QUALIFIERS: &[&str] = &[
    "api", "access", "secret", "private", "encryption", "encrypt", "signing", "sign", "master",
    "account", "shared", "storage", "hmac", "jwt", "session", "app", "client", "subscription",
    "license", "auth", "crypto", "cipher", "aes", "service", "admin", "root", "deploy", "ssh",
    "gpg", "pgp", "webhook", "consumer", "partner", "openai", "anthropic", "stripe", "github",
    "gitlab", "slack", "google", "gemini", "groq", "mistral", "cohere", "sendgrid", "twilio",
    "mailgun", "algolia", "firebase", "supabase", "aws", "azure", "gcp",
];

/// Last words that make a key describe a secret rather than hold one.
#[rustfmt::skip]
const META_LAST_WORDS: &[&str] = &[
    "name", "names", "id", "ids", "type", "types", "kind", "url", "uri", "urls", "endpoint", "path",
    "paths", "file", "files", "filename", "dir", "directory", "length", "len", "count", "counts",
    "size", "max", "min", "limit", "limits", "expiry", "expires", "expiration", "expire", "ttl",
    "timeout", "format", "header", "headers", "field", "fields", "env", "var", "vars", "prefix",
    "suffix", "hint", "policy", "enabled", "disabled", "required", "mode", "method", "methods",
    "algorithm", "alg", "algo", "hash", "hashed", "provider", "providers", "label", "description",
    "desc", "placeholder", "command", "cmd", "helper", "location", "source", "version", "index",
    "idx", "position", "usage", "budget", "rate", "regex", "pattern", "schema", "class", "flag",
    "flags", "stdin", "prompt", "valid", "validation", "validator", "strength", "rotation",
    "created", "updated", "at", "date", "time", "lifetime", "age", "scope", "scopes", "audience",
    "issuer", "ref", "sock", "socket", "domain", "host", "hostname", "server", "realm", "callback",
    "redirect", "user", "username", "login", "email", "port", "mechanism", "manager", "generator",
    "parser", "lexer", "stream", "style", "color", "icon", "button", "error", "errors", "status",
    "state", "result", "handler", "middleware", "config", "settings", "options", "module", "plugin",
    "test", "tests", "spec", "dialog", "form", "page", "view", "screen", "route", "estimate",
    "message", "messages", "msg", "range", "encryption", "hdr", "encoding",
    // A key ending in a file extension is a file name (`src/auth/token.rs:42:5`).
    "rs", "py", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "java", "kt", "rb", "php", "c", "h",
    "cc", "cpp", "hpp", "cs", "swift", "sh", "bash", "zsh", "json", "yaml", "yml", "toml", "ini",
    "cfg", "conf", "md", "txt", "lock", "log", "html", "css", "sql", "xml", "pem", "crt", "pub",
];

/// First words that make a key a switch or a count rather than a secret.
#[rustfmt::skip]
const META_FIRST_WORDS: &[&str] = &[
    "max", "min", "num", "total", "no", "is", "has", "use", "show", "enable", "enabled", "disable",
    "require", "required", "allow", "with", "without", "skip", "hide", "count", "input", "output",
    "prompt", "completion", "cached", "reasoning",
];

/// Words that, anywhere in a key, make it a setting about secrets (`MYSQL_ALLOW_EMPTY_PASSWORD`,
/// `Access-Control-Allow-Credentials`, `CAN_HANDLE_EXPIRED_PASSWORDS`).
#[rustfmt::skip]
const META_ANY_WORDS: &[&str] = &[
    "allow", "allowed", "empty", "expired", "control",
];

/// Words in a key that make a bare number a plausible secret (a PIN, a numeric password).
#[rustfmt::skip]
const PASSWORD_WORDS: &[&str] = &[
    "password", "passwords", "passwd", "pwd", "pw", "pass", "passphrase", "passcode", "pin",
];

/// Keywords that, before a key on the same line, make an assignment a declaration in code.
#[rustfmt::skip]
const DECLARATIONS: &[&str] = &[
    "let", "const", "var", "val", "mut", "auto", "final", "static", "readonly", "private", "public",
    "protected", "pub", "internal", "lateinit", "dim", "my",
];

/// Words that, before a key, make an assignment a shell one (`export`, `docker run -e`).
#[rustfmt::skip]
const SHELL_WORDS: &[&str] = &[
    "export", "set", "setx", "declare", "local", "readonly", "env", "e",
];

/// Unquoted values that are language constants, keywords, permission or lint levels: never secrets.
#[rustfmt::skip]
const CONSTANTS: &[&str] = &[
    "true", "false", "null", "none", "nil", "undefined", "yes", "no", "on", "off", "self", "this",
    "match", "if", "new", "await", "async", "move", "ref", "mut", "impl", "dyn", "fn", "function",
    "lambda", "super", "crate", "nullptr", "_", "read", "write", "allow", "warn", "deny", "forbid",
    "expect", "enabled", "disabled", "required", "optional", "always", "never", "auto", "bearer",
    "basic",
];

/// Operators after the first word of an INI-looking value that show it is an expression in code
/// (`Token = Ignore + PlainToken`, `ENDS = SPECIALS | WS`).
#[rustfmt::skip]
const EXPRESSION_OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "%", "|", "&", "^", "||", "&&", "or", "and", "if", "?",
];

/// Primitive type names, so `token: string` reads as an annotation.
#[rustfmt::skip]
const PRIMITIVE_TYPES: &[&str] = &[
    "str", "string", "number", "bool", "boolean", "int", "integer", "float", "double", "any",
    "unknown", "object", "bytes", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16",
    "i32", "i64", "i128", "isize", "f32", "f64", "void", "tuple", "list", "dict", "set",
    "frozenset", "bytearray", "callable",
];

/// Splits a key into lowercase words on `_`, `-`, `.`, `$`, spaces and camelCase humps
/// (`APIKey` → `api`, `key`; `dbPassword2` → `db`, `password2`).
pub(crate) fn words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in key
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
    {
        let chars: Vec<char> = part.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let hump = i > 0
                && c.is_ascii_uppercase()
                && (chars[i - 1].is_ascii_lowercase()
                    || chars[i - 1].is_ascii_digit()
                    || (chars[i - 1].is_ascii_uppercase()
                        && chars.get(i + 1).is_some_and(char::is_ascii_lowercase)));
            if hump && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            current.push(c.to_ascii_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    words
}

/// True when `key` names something whose value is a secret (see the module docs).
pub(crate) fn is_secret_key(key: &str) -> bool {
    let trimmed = key.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.eq_ignore_ascii_case("pwd") || trimmed.eq_ignore_ascii_case("oldpwd") {
        return false;
    }
    let words = words(trimmed);
    let (Some(first), Some(last)) = (words.first(), words.last()) else {
        return false;
    };
    if META_LAST_WORDS.contains(&last.as_str())
        || (words.len() > 1 && META_FIRST_WORDS.contains(&first.as_str()))
        || words
            .iter()
            .any(|word| META_ANY_WORDS.contains(&word.as_str()))
    {
        return false;
    }
    words.iter().enumerate().any(|(i, word)| {
        SECRET_WORDS.contains(&word.as_str())
            || SECRET_INFIXES.iter().any(|infix| word.contains(infix))
            || (matches!(word.as_str(), "key" | "keys")
                && i > 0
                && KEY_QUALIFIERS.contains(&words[i - 1].as_str()))
    })
}

/// True when `key` names a password or PIN, under which even a bare number is a secret.
fn is_password_key(key: &str) -> bool {
    words(key)
        .iter()
        .any(|word| PASSWORD_WORDS.contains(&word.as_str()) || word.contains("password"))
}

/// True when a number is a plausible secret: a password or PIN of at least four digits. Shorter
/// numbers and hex literals under such keys are flags and enum values (`UserPass = 0x02`).
fn is_secret_number(key: &str, number: &str) -> bool {
    is_password_key(key) && number.bytes().filter(u8::is_ascii_digit).count() >= 4
}

/// True for numbers, versions and dotted identifiers such as OIDs (digits with `.`, `_`, `-`,
/// `+`), and for C-style literals with a type suffix (`-1u`, `10UL`).
fn is_numeric(value: &str) -> bool {
    let digits = value.trim_end_matches(['u', 'U', 'l', 'L', 'f', 'F']);
    value.len() - digits.len() <= 3
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-' | b'+'))
        && digits.bytes().any(|b| b.is_ascii_digit())
}

/// Judges a quoted literal assigned to a secret key: true when it is worth redacting.
pub(crate) fn quoted_is_secret(key: &str, value: &str) -> bool {
    let value = value.trim();
    if is_placeholder(value)
        || (value.contains("::") && value.split(':').all(is_name_segment))
        || CONSTANTS
            .iter()
            .any(|constant| constant.eq_ignore_ascii_case(value))
        || is_path(value)
    {
        return false;
    }
    if is_numeric(value) {
        return is_secret_number(key, value);
    }
    // Colours in style tables (`Token: "#f8f8f2"`).
    if value.strip_prefix('#').is_some_and(|hex| {
        matches!(hex.len(), 3 | 4 | 6 | 8) && hex.bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        return false;
    }
    // `TOKEN_ATTR = "token"`, `CLIENT_AUTH: "clientAuth"`: the value names the field.
    let key_words = words(key);
    let value_words = words(value);
    let names_field = !value_words.is_empty()
        && value_words
            .iter()
            .all(|word| word.bytes().all(|b| b.is_ascii_alphabetic()) && key_words.contains(word));
    !(names_field && (key_words.len() > 1 || value_words.len() > 1))
}

/// True when a value is a stand-in for a secret rather than the secret itself.
pub(crate) fn is_placeholder(value: &str) -> bool {
    let value = value.trim();
    if value.is_empty() || value.contains(REDACTED_PREFIX) || value == PRIVATE_MARKER {
        return true;
    }
    let wrapped = |open: &str, close: &str| {
        value.len() > open.len() + close.len() && value.starts_with(open) && value.ends_with(close)
    };
    if wrapped("${", "}") || wrapped("$(", ")") || wrapped("{{", "}}") || wrapped("%", "%") {
        return true;
    }
    // Format strings: `{}`, `{0}:{1}`, `{password}`, `{self.password}`, `%s`, `%(password)s`.
    if is_format_template(value) {
        return true;
    }
    if wrapped("<", ">") && !value[1..value.len() - 1].contains(['<', '>']) {
        return true;
    }
    if let Some(name) = value.strip_prefix('$')
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return true;
    }
    // Masks such as `xxx`, `XXXX-XXXX`, `****` or `...` stand for a value someone left out.
    value
        .chars()
        .all(|c| matches!(c, 'x' | 'X' | '*' | '.' | '•' | '…' | '-' | '_'))
        && value
            .chars()
            .any(|c| matches!(c, 'x' | 'X' | '*' | '.' | '•' | '…'))
}

/// True for format templates with nothing but fields and punctuation: `{}`, `{0}:{1}`,
/// `{self.password}`, `%s`, `%s:%s`, `%(password)s`.
fn is_format_template(value: &str) -> bool {
    let mut rest = value;
    let mut fields = 0;
    let mut literal = String::new();
    while let Some(c) = rest.chars().next() {
        let field_end = if c == '{' {
            rest.find('}').filter(|&end| {
                rest[1..end]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':'))
            })
        } else if c == '%' && rest.starts_with("%(") {
            rest.find(")s").map(|end| end + 1)
        } else if c == '%' {
            rest[1..].starts_with(['s', 'd', 'v', 'r']).then_some(1)
        } else {
            None
        };
        match field_end {
            Some(end) => {
                fields += 1;
                rest = &rest[end + 1..];
            }
            None => {
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    fields > 0 && !literal.chars().any(char::is_alphanumeric)
}

/// True when the value has both a letter and a digit, as random tokens almost always do and
/// words, slugs and CSS class names almost never do.
pub(crate) fn looks_random(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_alphabetic()) && value.bytes().any(|b| b.is_ascii_digit())
}

/// How an assignment was written, which decides how to read an unquoted value.
pub(crate) struct Assignment<'t> {
    /// The whole text being cleaned.
    pub text: &'t str,
    /// The key as written (without its quotes).
    pub key: &'t str,
    /// Byte offset of the key in `text`.
    pub key_start: usize,
    /// The operator: `=`, `:`, `:=` or `=>`.
    pub op: &'t str,
    /// Whether the key was quoted (`"password": …`).
    pub key_quoted: bool,
    /// Whether whitespace separates the key from the operator (`token = x`, `Pass :meth:`).
    pub space_before: bool,
    /// Whether whitespace separates the operator from the value (`token: x`).
    pub space_after: bool,
    /// Byte range of the raw unquoted value (up to whitespace or a quote).
    pub value: std::ops::Range<usize>,
}

impl Assignment<'_> {
    /// Returns the byte range to redact for an unquoted value, or `None` when it reads as code,
    /// a placeholder or otherwise not a secret.
    pub(crate) fn unquoted_secret(&self) -> Option<std::ops::Range<usize>> {
        let raw = &self.text[self.value.clone()];
        let token = raw.trim_end_matches([',', ';', ':', ')', '}', ']', '|']);
        if token.is_empty() || is_placeholder(token) || self.reads_as_code(raw, token) {
            return None;
        }
        // YAML values, HTTP headers and INI/properties values run to the end of the line
        // (`password: correct horse battery staple`); shell assignments stop at whitespace.
        let yaml_or_header = self.op == ":" && !self.space_before;
        let ini = self.op == "=" && self.spaced();
        if self.at_line_start() && (yaml_or_header || ini) {
            let line_end = self.text[self.value.start..]
                .find('\n')
                .map_or(self.text.len(), |n| self.value.start + n);
            let rest = self.text[self.value.start..line_end].trim_end();
            let rest = rest.trim_end_matches([',', ';']);
            let after_token = rest[token.len().min(rest.len())..].trim_start();
            let operator = after_token.split_whitespace().next().unwrap_or("");
            if ini && EXPRESSION_OPERATORS.contains(&operator) {
                return None;
            }
            return Some(self.value.start..self.value.start + rest.len());
        }
        Some(self.value.start..self.value.start + token.len())
    }

    fn spaced(&self) -> bool {
        self.space_before || self.space_after
    }

    /// True when only indentation, a list dash, a comment sign or a quote precede the key on its line.
    fn at_line_start(&self) -> bool {
        // Walk back only over the allowed bytes, so a long line costs nothing.
        let before = &self.text.as_bytes()[..self.key_start];
        let allowed = before
            .iter()
            .rev()
            .take_while(|&&b| matches!(b, b' ' | b'\t' | b'-' | b'#' | b'"' | b'\'' | b'\r'))
            .count();
        allowed == before.len() || before[before.len() - allowed - 1] == b'\n'
    }

    /// True for shell and env-file assignments, where unquoted values are literal strings:
    /// `KEY=value` with no blanks, to an upper-case variable, after `export`/`set`/`-e`, or as a
    /// URL query parameter. (A lower-case key at the start of a line is as often a keyword
    /// argument on its own line, `password=password,`, so it gets no such pass.)
    fn shell_style(&self) -> bool {
        if self.op != "=" || self.spaced() {
            return false;
        }
        let query = self.text[..self.key_start].ends_with(['?', '&']);
        !self.key.bytes().any(|b| b.is_ascii_lowercase())
            || SHELL_WORDS.contains(&self.previous_word())
            || query
    }

    /// The word before the key on its line, if any (`let` in `let token = x`).
    fn previous_word(&self) -> &str {
        let before = self.text[..self.key_start].trim_end_matches([' ', '\t']);
        // Search bytes: the word is ASCII, and the byte before it ends whatever character it
        // belongs to, so the word always starts on a character boundary.
        let start = before
            .bytes()
            .rposition(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
            .map_or(0, |i| i + 1);
        &before[start..]
    }

    /// True when the key sits inside a call's argument list (`login(password=pw)`).
    fn in_call_arguments(&self) -> bool {
        let before = self.text[..self.key_start].trim_end_matches([' ', '\t']);
        before.ends_with('(') || before.ends_with(',')
    }

    fn reads_as_code(&self, raw: &str, token: &str) -> bool {
        let mut chars = token.chars();
        let Some(first) = chars.next() else {
            return true;
        };
        // A value starting like an expression, a reference, a comparison or a comment is code,
        // and so is a dereference or pointer type (`*secret_key`, `*const c_char`), a variable
        // expansion (`$dir/private/cakey.pem`) and a regex literal (`/^Unexpected token/`).
        if "([{&|<>=:.,;\\?#$".contains(first)
            || (first == '*'
                && chars
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_'))
            || token.starts_with("/^")
        {
            return true;
        }
        // `const auth = !headers || …`: after a declaration keyword, literals are quoted.
        if self.spaced() && DECLARATIONS.contains(&self.previous_word()) {
            return true;
        }
        // `token:tt` in a macro, `pass:example.com`: YAML and headers put a space after the
        // colon and none before it (`Pass :meth:` is prose).
        if self.op == ":" && !self.key_quoted && (!self.space_after || self.space_before) {
            return true;
        }
        // `Token.Name: …`, `KeyUsageOID.CLIENT_AUTH: …`: a dictionary keyed by code objects.
        if is_object_path(self.key, self.op) {
            return true;
        }
        // A string prefix glued to a quote (`b"…"`, `f"…"`) is a literal in code, not a value.
        if token.len() <= 2
            && token
                .bytes()
                .all(|b| matches!(b, b'b' | b'B' | b'r' | b'R' | b'f' | b'F' | b'u' | b'U'))
            && self.text[self.value.end..].starts_with(['"', '\''])
        {
            return true;
        }
        if CONSTANTS
            .iter()
            .any(|constant| constant.eq_ignore_ascii_case(token))
        {
            return true;
        }
        // Calls, indexing, blocks and generic types (`Option<String>`) are code.
        if token.contains(['(', ')', '[', '{', '<', '|']) {
            return true;
        }
        if is_numeric(token) {
            return !is_secret_number(self.key, token);
        }
        if token.starts_with("0x")
            && token.len() > 2
            && token[2..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b'_')
        {
            return true;
        }
        if is_path(token) {
            return true;
        }
        // Macro invocations: `quote! {`, `vec![`.
        if token.strip_suffix('!').is_some_and(is_identifier_path) {
            return true;
        }
        if !is_identifier_path(token) {
            return false;
        }
        let has_digit = token.bytes().any(|b| b.is_ascii_digit());
        // In a shell or env-file assignment (`DB_PASSWORD=hunter`, `export token=x`,
        // `docker run -e KEY=x`, a query string `?token=x`) every unquoted value is a literal.
        if self.shell_style() {
            return false;
        }
        // `AnsiToken: A named tuple`, `PseudoToken = Whitespace + …`: a class-like key (several
        // capitalised words run together) given a plain word is code or documentation.
        if is_class_like(self.key) && !has_digit {
            return true;
        }
        // `self.token`, `req.body.password`, `Token::new`: member access, when every segment
        // reads like a name (a random value with dots has digits inside its segments); except as
        // a YAML or header value, where a dotted word is just text.
        let after = &raw[token.len()..];
        let yaml_value = self.op == ":" && !self.space_before && self.at_line_start();
        if (token.contains(['.', ':']) || token.contains("->"))
            && token.split(['.', ':', '-', '>']).all(is_name_segment)
            && (!yaml_value || after.starts_with(','))
        {
            return true;
        }
        // Ruby and PHP hashes spell variables with a sigil, so a bare word after `=>` is code.
        if self.op == "=>" {
            return true;
        }
        // An identifier ending a statement or an element (`token: semi,`) is a variable.
        if (after.starts_with(';') && self.spaced()) || after.starts_with(',') {
            return true;
        }
        let key_words = words(self.key);
        let value_words = words(token);
        // `password=password`, `token: token`, `apiKey: apiKey` pass a variable along.
        if key_words.last() == value_words.last() && value_words.len() <= key_words.len() {
            return true;
        }
        // Multi-word identifiers (`next_token`, `accessToken`, `DB_PASSWORD`) are variable names.
        if value_words.len() >= 2
            && value_words
                .iter()
                .all(|word| word.len() >= 2 && word.bytes().all(|b| b.is_ascii_alphabetic()))
        {
            return true;
        }
        if self.op == ":" && is_type_name(token) {
            return true;
        }
        if self.in_call_arguments() && !has_digit {
            return true;
        }
        // `token = Name`, `self.credentials = authorizer`: a spaced assignment of a plain word to
        // a variable that is not upper-case (a constant or an environment variable) is code.
        if self.spaced()
            && matches!(self.op, "=" | ":=")
            && self.key.bytes().any(|b| b.is_ascii_lowercase())
            && !has_digit
        {
            return true;
        }
        // Mid-line, `password: it` is prose or a JavaScript shorthand, not YAML.
        if self.op == ":" && !self.at_line_start() && !has_digit {
            return true;
        }
        false
    }
}

/// True for absolute, home-relative or dot-relative paths made of ordinary path characters.
pub(crate) fn is_path(token: &str) -> bool {
    let rest = token
        .strip_prefix("~/")
        .or_else(|| token.strip_prefix("./"))
        .or_else(|| token.strip_prefix("../"));
    let rest = match rest {
        Some(rest) => rest,
        None => match token.strip_prefix('/') {
            Some(rest) => rest,
            None => return false,
        },
    };
    rest.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'))
}

/// True for a segment of a member path that reads like a name: words of letters, each possibly
/// ending in digits (`body`, `item2`, `SOCKS5_AUTH`, `sha256Hash`), where random tokens put
/// letters after digits (`p4UAiei7q`); also the empty segments between `::` or `->`.
fn is_name_segment(segment: &str) -> bool {
    segment.is_empty()
        || (segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
            && words(segment).iter().all(|word| {
                let letters = word.trim_end_matches(|c: char| c.is_ascii_digit());
                !letters.is_empty() && letters.bytes().all(|b| b.is_ascii_alphabetic())
            }))
}

/// True for `ident`, `a.b.c`, `a::b`, `a->b` made of identifier characters.
fn is_identifier_path(token: &str) -> bool {
    token
        .split(['.', ':'])
        .flat_map(|part| part.split("->"))
        .filter(|part| !part.is_empty())
        .all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        })
}

/// True for `Token.Name: …` and `KeyUsageOID.CLIENT_AUTH: …`: a dictionary keyed by a path into
/// code objects (its first segment capitalised), as in style tables and lookup maps.
pub(crate) fn is_object_path(key: &str, op: &str) -> bool {
    op == ":" && key.contains('.') && key.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

/// True for `AnsiToken`, `ClientSecret`: two or more capitalised words and nothing else.
fn is_class_like(key: &str) -> bool {
    key.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && key.bytes().all(|b| b.is_ascii_alphanumeric())
        && key.bytes().any(|b| b.is_ascii_lowercase())
        && words(key).len() >= 2
}

/// True for type names in annotations: primitives and CamelCase words without digits (`String`).
fn is_type_name(token: &str) -> bool {
    if PRIMITIVE_TYPES
        .iter()
        .any(|name| name.eq_ignore_ascii_case(token))
    {
        return true;
    }
    let mut chars = token.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && token.bytes().all(|b| b.is_ascii_alphabetic())
        && token.bytes().any(|b| b.is_ascii_lowercase())
}

/// Header names whose whole value is a credential; in JSON header maps (`{"Authorization":
/// "Basic …"}`) nothing else would show that the value is one.
#[rustfmt::skip]
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization", "proxy-authorization", "cookie", "set-cookie",
];

/// True when a JSON object key names a secret: a secret key, or a credential header.
pub(crate) fn is_secret_json_key(key: &str) -> bool {
    is_secret_key(key)
        || CREDENTIAL_HEADERS
            .iter()
            .any(|header| header.eq_ignore_ascii_case(key))
}

/// Redacts a JSON field stored under a secret key (see [`is_secret_json_key`]); returns whether
/// it changed anything. Strings are judged like quoted values, numbers like bare ones.
pub(crate) fn redact_json_field(key: &str, value: &mut Value) -> bool {
    let redact = match value {
        Value::String(text) => quoted_is_secret(key, text),
        Value::Number(number) => is_secret_number(key, &number.to_string()),
        _ => false,
    };
    if redact {
        *value = Value::String(format!("{REDACTED_PREFIX}assignment]"));
    }
    redact
}

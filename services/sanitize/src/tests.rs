use sanitize_corpus as corpus;
use serde_json::json;

use super::*;

fn sanitizer() -> Sanitizer {
    Sanitizer::new(&Config::default()).expect("the default config is valid")
}

/// Cleans `input`, compares with `expected`, and checks that cleaning again changes nothing.
#[track_caller]
fn check(input: &str, expected: &str) {
    let s = sanitizer();
    let (cleaned, report) = s.clean_text(input);
    assert_eq!(cleaned, expected, "cleaning {input:?}");
    assert_eq!(
        report.is_clean(),
        input == expected,
        "report {report:?} for {input:?}"
    );
    let (again, second) = s.clean_text(&cleaned);
    assert_eq!(again, cleaned, "cleaning is not idempotent for {input:?}");
    assert!(
        second.is_clean(),
        "second cleaning of {input:?} reported {second:?}"
    );
}

/// Checks many unchanged inputs.
#[track_caller]
fn unchanged(inputs: &[&str]) {
    for input in inputs {
        check(input, input);
    }
}

/// A token body of `len` letters and digits (with both), built at run time.
fn body(len: usize) -> String {
    "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0z"
        .chars()
        .cycle()
        .take(len)
        .collect()
}

#[test]
fn system_tags_are_stripped() {
    let cases = [
        (
            "before<system-reminder>be nice</system-reminder>after",
            "beforeafter",
            1,
        ),
        (
            "a<SYSTEM-REMINDER>\nmulti\nline\n</System-Reminder>b",
            "ab",
            1,
        ),
        (
            "<system>x</system> keep <system_instruction>y</system_instruction>",
            " keep ",
            2,
        ),
        (
            "x<system-instruction attr=\"1\">y</system-instruction>z",
            "xz",
            1,
        ),
        ("keep<system-reminder>unclosed\nrest of text", "keep", 1),
        (
            "a<system-reminder>outer<system-reminder>inner</system-reminder>still</system-reminder>b",
            "ab",
            1,
        ),
        ("a<system/>b", "ab", 1),
        (
            "<systemd>unit</systemd> and <system-info>x</system-info>",
            "<systemd>unit</systemd> and <system-info>x</system-info>",
            0,
        ),
        (
            "a stray </system-reminder> closing tag",
            "a stray </system-reminder> closing tag",
            0,
        ),
    ];
    let s = sanitizer();
    for (input, expected, count) in cases {
        check(input, expected);
        assert_eq!(
            s.clean_text(input).1.system_tags_stripped,
            count,
            "{input:?}"
        );
    }
}

#[test]
fn private_blocks_are_hidden() {
    let cases = [
        (
            "my <private>home address</private> is secret",
            "my [PRIVATE] is secret",
            1,
        ),
        (
            "<PRIVATE>\na\nb\n</Private> and <private>c</private>",
            "[PRIVATE] and [PRIVATE]",
            2,
        ),
        (
            "visible <private>everything after an unclosed tag\nis hidden",
            "visible [PRIVATE]",
            1,
        ),
        (
            "<private>outer <private>inner</private> tail</private>!",
            "[PRIVATE]!",
            1,
        ),
        (
            "<privateer>ahoy</privateer>",
            "<privateer>ahoy</privateer>",
            0,
        ),
    ];
    let s = sanitizer();
    for (input, expected, count) in cases {
        check(input, expected);
        assert_eq!(s.clean_text(input).1.private_blocks, count, "{input:?}");
    }
}

#[test]
fn order_is_system_then_private_then_secrets() {
    let token = format!("ghp_{}", body(36));
    let input = format!(
        "<system-reminder><private>x</private></system-reminder><private>{token}</private> {token}"
    );
    let (cleaned, report) = sanitizer().clean_text(&input);
    assert_eq!(cleaned, "[PRIVATE] [REDACTED:github-token]");
    assert_eq!(
        report,
        Report {
            secrets_redacted: 1,
            private_blocks: 1,
            system_tags_stripped: 1,
            truncated: false
        }
    );
}

#[test]
fn provider_tokens_are_redacted() {
    let cases = [
        (
            format!("export GITHUB_TOKEN=ghp_{}", body(36)),
            "export GITHUB_TOKEN=[REDACTED:github-token]",
        ),
        (
            format!("token: github_pat_{}_{}", body(22), body(59)),
            "token: [REDACTED:github-token]",
        ),
        (
            format!("glpat-{} and gldt-{}", body(20), body(20)),
            "[REDACTED:gitlab-token] and [REDACTED:gitlab-token]",
        ),
        (
            format!("key=AKIA{}", "Z".repeat(12) + "2345"),
            "key=[REDACTED:aws-access-key]",
        ),
        (format!("AIza{}", body(35)), "[REDACTED:gcp-api-key]"),
        (
            format!("sk-proj-{} end", body(60)),
            "[REDACTED:openai-key] end",
        ),
        (
            format!("sk-ant-api03-{}", body(90)),
            "[REDACTED:anthropic-key]",
        ),
        (
            format!("stripe sk_live_{}", body(24)),
            "stripe [REDACTED:stripe-key]",
        ),
        (
            format!("xoxb-{}-{}", "1234567890", body(24)),
            "[REDACTED:slack-token]",
        ),
        (
            format!("hf_{}", "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"),
            "[REDACTED:huggingface-token]",
        ),
        (format!("npm_{}", body(36)), "[REDACTED:npm-token]"),
        (
            format!("SG.{}.{}", body(22), body(43)),
            "[REDACTED:sendgrid-key]",
        ),
        (
            format!("SK{}", "0123456789abcdef".repeat(2)),
            "[REDACTED:twilio-api-key]",
        ),
        (
            format!("1234567890:AA{}", body(33)),
            "[REDACTED:telegram-bot-token]",
        ),
        (
            format!(
                "url: https://hooks.slack.com/services/T{}/B{}/{}",
                "ABCDEFGH",
                "ABCDEFGHIJ",
                body(24)
            ),
            "url: https://hooks.slack.com/services/[REDACTED:slack-webhook]",
        ),
    ];
    for (input, expected) in cases {
        check(&input, expected);
    }
}

#[test]
fn structured_secrets_keep_their_context() {
    let pw = format!("p4ss{}", "-word!");
    let cases = [
        (
            format!("postgres://app:{pw}@db:5432/app"),
            "postgres://app:[REDACTED:password-in-url]@db:5432/app".to_owned(),
        ),
        (
            format!("redis://:{pw}@cache:6379"),
            "redis://:[REDACTED:password-in-url]@cache:6379".to_owned(),
        ),
        (
            format!("Authorization: Bearer {}", body(40)),
            "Authorization: Bearer [REDACTED:authorization-header]".to_owned(),
        ),
        (
            format!("authorization: Basic {}==", body(20)),
            "authorization: Basic [REDACTED:authorization-header]".to_owned(),
        ),
        (
            format!("-H 'X-Token: {}'", body(30)),
            "-H 'X-Token: [REDACTED:assignment]'".to_owned(),
        ),
        (
            format!("export DB_PASSWORD={pw}"),
            "export DB_PASSWORD=[REDACTED:assignment]".to_owned(),
        ),
        (
            format!("DB_PASSWORD=\"{pw}\" ./run"),
            "DB_PASSWORD=\"[REDACTED:assignment]\" ./run".to_owned(),
        ),
        (
            format!("  password: {pw} # prod"),
            "  password: [REDACTED:assignment]".to_owned(),
        ),
        (
            format!(r#"{{"client_secret": "{pw}", "id": 1}}"#),
            r#"{"client_secret": "[REDACTED:assignment]", "id": 1}"#.to_owned(),
        ),
        (
            format!("apiKey: '{pw}',"),
            "apiKey: '[REDACTED:assignment]',".to_owned(),
        ),
        (
            format!("static SECRET: &str = \"{pw}\";"),
            "static SECRET: &str = \"[REDACTED:assignment]\";".to_owned(),
        ),
        (
            format!("tool --token {pw} --verbose"),
            "tool --token [REDACTED:secret-flag] --verbose".to_owned(),
        ),
        (
            format!("?a=1&access_token={pw}&b=2"),
            "?a=1&access_token=[REDACTED:assignment]&b=2".to_owned(),
        ),
        (
            format!("login(user, password=\"{pw}\")"),
            "login(user, password=\"[REDACTED:assignment]\")".to_owned(),
        ),
        (
            format!("login(user, password={pw}2)"),
            "login(user, password=[REDACTED:assignment])".to_owned(),
        ),
        (
            "PASSWORD=hunter".to_owned(),
            "PASSWORD=[REDACTED:assignment]".to_owned(),
        ),
        (
            "pin_password: 123456".to_owned(),
            "pin_password: [REDACTED:assignment]".to_owned(),
        ),
        (
            format!("machine h login u password {pw}"),
            "machine h login u password [REDACTED:netrc-password]".to_owned(),
        ),
        (
            format!("ALTER ROLE app WITH PASSWORD '{pw}';"),
            "ALTER ROLE app WITH PASSWORD '[REDACTED:sql-password]';".to_owned(),
        ),
        (
            format!("curl -u admin:{pw} https://x"),
            "curl -u admin:[REDACTED:curl-user-password] https://x".to_owned(),
        ),
        (
            format!("mysql -u root -p{pw} shop"),
            "mysql -u root -p[REDACTED:cli-password] shop".to_owned(),
        ),
        (
            format!("sshpass -p '{pw}' ssh deploy@host"),
            "sshpass -p '[REDACTED:cli-password]' ssh deploy@host".to_owned(),
        ),
        (
            format!("CREATE USER app IDENTIFIED BY \"{pw}\";"),
            "CREATE USER app IDENTIFIED BY \"[REDACTED:sql-password]\";".to_owned(),
        ),
        (
            format!("machine api.example.com\n  login alice\n  password {pw}\n"),
            "machine api.example.com\n  login alice\n  password [REDACTED:netrc-password]\n"
                .to_owned(),
        ),
        (
            format!("Authorization: {}", body(32)),
            "Authorization: [REDACTED:authorization-header]".to_owned(),
        ),
        (
            format!("Proxy-Authorization: Basic {}=", body(23)),
            "Proxy-Authorization: Basic [REDACTED:authorization-header]".to_owned(),
        ),
        (
            format!(
                "apiVersion: v1\nkind: Secret\ndata:\n  password: {}==\n",
                body(20)
            ),
            "apiVersion: v1\nkind: Secret\ndata:\n  password: [REDACTED:assignment]\n".to_owned(),
        ),
        (
            format!("kubectl create secret generic db --from-literal=password={pw}"),
            "kubectl create secret generic db --from-literal=password=[REDACTED:assignment]"
                .to_owned(),
        ),
        (
            format!(
                "https://api.telegram.org/bot1234567890:AA{}/getMe",
                body(33)
            ),
            "https://api.telegram.org/bot[REDACTED:telegram-bot-token]/getMe".to_owned(),
        ),
        (
            format!(
                "git clone https://oauth2:glpat-{}@gitlab.com/g/p.git",
                body(20)
            ),
            "git clone https://oauth2:[REDACTED:gitlab-token]@gitlab.com/g/p.git".to_owned(),
        ),
        (
            format!("GITHUB_TOKEN=ghp_{} DB_PASSWORD={pw}", body(36)),
            "GITHUB_TOKEN=[REDACTED:github-token] DB_PASSWORD=[REDACTED:assignment]".to_owned(),
        ),
    ];
    for (input, expected) in cases {
        check(&input, &expected);
    }
}

#[test]
fn private_keys_are_redacted_whole() {
    let dashes = "-----";
    let label = format!("{} {}", "RSA PRIVATE", "KEY");
    let block = format!(
        "{dashes}BEGIN {label}{dashes}\n{}\n{}\n{dashes}END {label}{dashes}",
        body(64),
        body(20)
    );
    check(
        &format!("before\n{block}\nafter"),
        "before\n[REDACTED:private-key]\nafter",
    );
    // Without an END line, the base64 that follows goes too, up to the first non-key text.
    let open = format!("{dashes}BEGIN {label}{dashes}\n{}\n{}", body(64), body(64));
    check(
        &format!("{open}\n[… cut …]"),
        "[REDACTED:private-key][… cut …]",
    );
    // Public material stays.
    let cert = format!(
        "{dashes}BEGIN CERTIFICATE{dashes}\n{}\n{dashes}END CERTIFICATE{dashes}",
        body(64)
    );
    unchanged(&[&cert]);
}

#[test]
fn lookalikes_in_code_and_prose_survive() {
    unchanged(&[
        "let token = next_token();",
        "token = self.lexer.next()",
        "fn password_hash(input: &str) -> String",
        "if token.kind == TokenKind::Ident {",
        "const { token } = useAuth();",
        "return Err(AuthError::InvalidPassword);",
        "password: Option<SecretString>,",
        "for token in tokens:",
        "headers = {'Authorization': f'Bearer {token}'}",
        "the password field is required",
        "Password must contain a digit: see the policy.",
        "TOKEN_EXPIRY=3600",
        "SECRET_NAME=prod/db",
        "cache_key = \"user:42\"",
        "monkey: banana",
        "keyboard: qwerty",
        "author: Alice",
        "OLDPWD=/tmp",
        "auth_method = \"oauth\"",
        "password_hash = \"$2b$12$\"",
        "let api_key = std::env::var(\"API_KEY\")?;",
        "token: Token,",
        "password = getpass.getpass()",
        "key: value",
        "sha: 3f786850e387550fdab836ed7c6dc881de23001b",
        "mysql -u root -p",
        "mysql -h db.internal -P 3306 -u app shop",
        "authorization = request.headers[1]",
        "Use Bearer authentication for every request.",
        "DATABASE_URL=mysql://root:@localhost/app",
        "Enter your login name and password below.",
        "token = Name",
        "self.credentials = authorizer",
        "const auth = !headers || !headers['www-authenticate'];",
        "Token.Keyword: \"bold #A3AAB2\",",
        "id-token: write",
        "needless_pass_by_value = \"allow\"",
        "pub const TOKEN: &str = \"$serde_json::private::RawValue\";",
        "credentials = '{0}:{1}'.format(user, passwd)",
        "random_device(const std::string& __token = \"/dev/urandom\")",
        "let tokens = quote! { #name };",
        "impl<'token: 'iter, I> Lexed<I> {",
        "ClientSecret => \"CLIENT_SECRET\",",
        "www.github.com and docs.github.com",
        "id: 550e8400-e29b-41d4-a716-446655440000",
    ]);
}

#[test]
fn clean_json_cleans_nested_strings_and_secret_fields() {
    let token = format!("ghp_{}", body(36));
    let mut value = json!({
        "tool_name": "Bash",
        "tool_input": {"command": format!("export GITHUB_TOKEN={token}"), "env": {"API_TOKEN": "hunter2", "TOKEN_NAME": "ci"}},
        "tool_response": [{"stdout": "<system-reminder>x</system-reminder>ok"}, 42, null, true],
        "password": "swordfish",
        "db_password": 1234,
        "input_tokens": 99,
        "prompt": "keep <private>this</private> out",
        "placeholder": {"password": "${DB_PASSWORD}"},
        "headers": {"Authorization": "Basic YWxpY2U6czNjcmV0", "Accept": "*/*"},
    });
    let report = sanitizer().clean_json(&mut value);
    assert_eq!(
        value,
        json!({
            "tool_name": "Bash",
            "tool_input": {"command": "export GITHUB_TOKEN=[REDACTED:github-token]", "env": {"API_TOKEN": "[REDACTED:assignment]", "TOKEN_NAME": "ci"}},
            "tool_response": [{"stdout": "ok"}, 42, null, true],
            "password": "[REDACTED:assignment]",
            "db_password": "[REDACTED:assignment]",
            "input_tokens": 99,
            "prompt": "keep [PRIVATE] out",
            "placeholder": {"password": "${DB_PASSWORD}"},
            "headers": {"Authorization": "[REDACTED:assignment]", "Accept": "*/*"},
        })
    );
    assert_eq!(
        report,
        Report {
            secrets_redacted: 5,
            private_blocks: 1,
            system_tags_stripped: 1,
            truncated: false
        }
    );
    let mut again = value.clone();
    assert!(sanitizer().clean_json(&mut again).is_clean());
    assert_eq!(again, value);
}

#[test]
fn truncation_keeps_head_and_tail() {
    let s = Sanitizer::new(&Config {
        max_output_chars: 100,
        preview_chars: 10,
        ..Config::default()
    })
    .expect("valid config");
    let short = "x".repeat(100);
    assert_eq!(s.truncate(&short), (short.clone(), None));

    let text: String = (0..50).map(|i| format!("line {i:02}\n")).collect();
    let (kept, truncation) = s.truncate(&text);
    assert_eq!(
        truncation,
        Some(Truncation {
            original_chars: 400,
            original_lines: 50
        })
    );
    assert_eq!(
        kept,
        "line 00\nli\n[… truncated: 400 chars, 50 lines in total; showing first 10 and last 10 chars …]\n8\nline 49\n"
    );

    // Multi-byte characters are never split, and the counts are in characters.
    let wide = "é😀中".repeat(60);
    let (kept, truncation) = s.truncate(&wide);
    assert_eq!(
        truncation,
        Some(Truncation {
            original_chars: 180,
            original_lines: 1
        })
    );
    assert!(kept.starts_with("é😀中é😀中é😀中é\n[…"));
    assert!(kept.ends_with("…]\n中é😀中é😀中é😀中"));

    // A preview larger than half the limit is clamped so truncation always shrinks the text.
    let greedy = Sanitizer::new(&Config {
        max_output_chars: 10,
        preview_chars: 100,
        ..Config::default()
    })
    .expect("valid config");
    let (kept, _) = greedy.truncate(&"y".repeat(1000));
    assert!(kept.starts_with("yyyyy\n[…") && kept.ends_with("…]\nyyyyy"));
}

#[test]
fn line_counts_follow_str_lines() {
    for text in ["", "a", "a\n", "a\nb", "a\nb\n", "\n\n", "a\r\nb"] {
        assert_eq!(
            truncate::count_lines(text),
            text.lines().count(),
            "{text:?}"
        );
    }
}

#[test]
fn clean_output_cleans_before_truncating() {
    let s = Sanitizer::new(&Config {
        max_output_chars: 60,
        preview_chars: 20,
        ..Config::default()
    })
    .expect("valid config");
    // The token straddles the head cut: truncating first would leave its first half behind.
    let token = format!("ghp_{}", body(36));
    let text = format!("012345678 {token} {}", "z".repeat(100));
    let (kept, report) = s.clean_output(&text);
    assert!(!kept.contains("ghp_"), "{kept}");
    assert!(report.truncated);
    assert_eq!(report.secrets_redacted, 1);
}

#[test]
fn exclude_globs_match_paths_and_names() {
    let s = sanitizer();
    let excluded = [
        ".env",
        "/home/alice/app/.env",
        "app/.env.local",
        "config/prod.env",
        "deploy/prod.env.bak",
        "certs/server.pem",
        "certs/SERVER.KEY",
        "/home/alice/.ssh/id_ed25519",
        "/home/alice/.ssh/config",
        ".ssh/known_hosts",
        "~/.aws/credentials",
        "/home/alice/.netrc",
        "C:\\Users\\alice\\.ssh\\id_rsa",
        "id_rsa.pub",
    ];
    let kept = [
        "src/env.rs",
        "src/environment/mod.rs",
        "docs/keys.md",
        "/home/alice/.aws/config",
        "netrc.rs",
        "monkey.keyboard",
        "src/secrets/mod.rs",
    ];
    for path in excluded {
        assert!(s.is_excluded_path(path), "{path} should be excluded");
    }
    for path in kept {
        assert!(!s.is_excluded_path(path), "{path} should be kept");
    }
    let custom = Sanitizer::new(&Config {
        exclude_globs: vec!["**/secrets/**".into()],
        ..Config::default()
    })
    .expect("valid glob");
    assert!(custom.is_excluded_path("src/secrets/mod.rs"));
    assert!(custom.is_excluded_path("/abs/secrets/a/b.txt"));
    assert!(!custom.is_excluded_path(".env"));
    let none = Sanitizer::new(&Config {
        exclude_globs: Vec::new(),
        ..Config::default()
    })
    .expect("valid config");
    assert!(!none.is_excluded_path(".env"));
}

#[test]
fn invalid_glob_is_an_error() {
    let error = Sanitizer::new(&Config {
        exclude_globs: vec!["a[".into()],
        ..Config::default()
    })
    .expect_err("invalid glob");
    assert_eq!(error.to_string(), "invalid exclude glob `a[`");
}

#[test]
fn report_merges_and_knows_when_clean() {
    let mut report = Report::default();
    assert!(report.is_clean());
    report.merge(Report {
        secrets_redacted: 2,
        private_blocks: 1,
        system_tags_stripped: 0,
        truncated: false,
    });
    report.merge(Report {
        secrets_redacted: u32::MAX,
        private_blocks: 0,
        system_tags_stripped: 3,
        truncated: true,
    });
    assert_eq!(
        report,
        Report {
            secrets_redacted: u32::MAX,
            private_blocks: 1,
            system_tags_stripped: 3,
            truncated: true
        }
    );
    assert!(!report.is_clean());
}

#[test]
fn content_hash_is_stable_and_unambiguous() {
    assert_eq!(
        content_hash(&[]),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(content_hash(&["ab", "c"]), content_hash(&["ab", "c"]));
    assert_ne!(content_hash(&["ab", "c"]), content_hash(&["a", "bc"]));
    assert_ne!(content_hash(&["", "a"]), content_hash(&["a", ""]));
    assert_eq!(content_hash(&["x"]).len(), 64);
}

#[test]
fn sanitizer_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Sanitizer>();
}

#[test]
fn corpus_secrets_are_redacted() {
    let s = sanitizer();
    let samples = corpus::secrets();
    assert!(samples.len() >= 25, "only {} secret samples", samples.len());
    for sample in &samples {
        let (cleaned, report) = s.clean_text(&sample.text);
        assert!(
            !cleaned.contains(&sample.secret),
            "{}: secret survived in {cleaned:?}",
            sample.name
        );
        let chars: Vec<char> = sample.secret.chars().collect();
        if chars.len() > 16 {
            let tail: String = chars[chars.len() - 12..].iter().collect();
            assert!(
                !cleaned.contains(&tail),
                "{}: secret tail survived in {cleaned:?}",
                sample.name
            );
        }
        assert!(
            report.secrets_redacted >= 1,
            "{}: nothing reported",
            sample.name
        );
        let (again, second) = s.clean_text(&cleaned);
        assert_eq!(again, cleaned, "{}: not idempotent", sample.name);
        assert!(
            second.is_clean(),
            "{}: second pass reported {second:?}",
            sample.name
        );
    }
    let mut names: Vec<_> = samples.iter().map(|sample| sample.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), samples.len(), "sample names must be unique");
}

#[test]
fn corpus_lookalikes_survive() {
    let s = sanitizer();
    let samples = corpus::lookalikes();
    assert!(
        samples.len() >= 25,
        "only {} look-alike samples",
        samples.len()
    );
    for sample in &samples {
        let (cleaned, report) = s.clean_text(&sample.text);
        assert_eq!(cleaned, sample.text, "{}: look-alike changed", sample.name);
        assert!(cleaned.contains(&sample.secret), "{}", sample.name);
        assert!(report.is_clean(), "{}: {report:?}", sample.name);
    }
}

#[test]
fn corpus_survives_json_round_trip() {
    // The hook and ingest clean parsed JSON, so a secret inside a JSON string must go too.
    let s = sanitizer();
    for sample in corpus::secrets() {
        let mut value = json!({"tool_response": {"stdout": sample.text}});
        s.clean_json(&mut value);
        let stored = value.to_string();
        assert!(
            !stored.contains(&sample.secret),
            "{}: {stored}",
            sample.name
        );
    }
}

/// A small xorshift generator for the property tests below.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn string(&mut self, alphabet: &str, len: usize) -> String {
        let bytes = alphabet.as_bytes();
        (0..len)
            .map(|_| char::from(bytes[(self.next() % bytes.len() as u64) as usize]))
            .collect()
    }
}

#[test]
fn assignment_values_never_survive() {
    // Random secret-looking values (a letter or digit first, punctuation inside, at least one
    // letter and digit) under secret keys, in every assignment syntax the rules know.
    let keys = [
        "password",
        "DB_PASSWORD",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "client_secret",
        "GITHUB_TOKEN",
        "auth_token",
        "secret",
        "PGPASSWORD",
        "access_token",
        "privateKey",
        "passphrase",
        "AWS_SECRET_ACCESS_KEY",
        "db.password",
        "SecretKey",
        "token",
    ];
    let forms = [
        "{k}={v}",
        "export {k}={v}",
        "{k}=\"{v}\"",
        "{k}='{v}'",
        "{k} = \"{v}\"",
        "{k} = {v}",
        "{k}: {v}",
        "  {k}: \"{v}\"",
        "\"{k}\": \"{v}\"",
        "{\"{k}\":\"{v}\"}",
        "{k} := \"{v}\"",
        "'{k}' => '{v}'",
        "cmd --{k} {v}",
        "cmd --{k}={v}",
        "GET /x?{k}={v}&y=1",
        "header {k}: {v}",
        "- {k}={v}",
        "{k}: {v} # note",
        "  - {k}: {v}\n",
        "[section]\n{k} = {v}\n",
        "env:\n  {k}: {v}\n",
        "{\\\"{k}\\\": \\\"{v}\\\"}",
        "set {k}={v}",
        "docker run -e {k}={v} img",
        "const {k}: &str = \"{v}\";",
        "{k}: '{v}',",
    ];
    let s = sanitizer();
    let mut rng = Xorshift(0xdead_beef_cafe_f00d);
    let mut failures = Vec::new();
    for _ in 0..20_000 {
        let len = 6 + (rng.next() % 30) as usize;
        let value = format!(
            "{}{}7q",
            rng.string(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                1
            ),
            rng.string(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!%^*+=~-_./@:?,;",
                len
            )
        );
        let text = rng
            .pick(&forms)
            .replace("{k}", rng.pick(&keys))
            .replace("{v}", &value);
        let (cleaned, _) = s.clean_text(&text);
        // Trailing punctuation may rightly be read as the end of a statement.
        let core = value.trim_end_matches([',', ';', ':', '.', '?']);
        if cleaned.contains(core) {
            failures.push(format!("{text:?} -> {cleaned:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn provider_tokens_are_redacted_in_any_context() {
    let contexts = [
        "{t}",
        "`{t}`",
        "({t})",
        "\"{t}\"",
        "'{t}'",
        "x={t}",
        "x: {t}",
        "<{t}>",
        "[{t}]",
        "{t}.",
        "{t},",
        "url?k={t}&z",
        "\n{t}\n",
        "é{t}é",
        "* {t} *",
        "{\"a\":\"{t}\"}",
        "--opt={t}",
        "echo {t} | tee",
        "→{t}←",
        "key={t};",
        "\t{t}\r\n",
    ];
    let s = sanitizer();
    let mut failures = Vec::new();
    // Samples whose secret is recognisable by its shape alone, without the line around it.
    let names = [
        "aws-access-key-id",
        "aws-session-key-id",
        "gcp-api-key",
        "github-classic-token",
        "github-oauth-token-in-url",
        "github-app-token",
        "github-fine-grained-pat",
        "gitlab-pat",
        "gitlab-deploy-token",
        "gitlab-runner-token",
        "slack-bot-token",
        "slack-user-token",
        "slack-app-token",
        "stripe-live-secret",
        "stripe-test-secret",
        "stripe-restricted",
        "stripe-webhook-secret",
        "openai-project-key",
        "openai-legacy-key",
        "anthropic-key",
        "huggingface-token",
        "npm-token",
        "pypi-token",
        "sendgrid-key",
        "twilio-api-key",
        "discord-bot-token",
        "telegram-bot-token",
        "jwt-bearer",
        "gcp-oauth-client-secret",
        "gcp-oauth-access-token",
        "shopify-token",
        "digitalocean-token",
        "databricks-token",
        "docker-hub-token",
        "vault-token",
        "grafana-service-account",
        "groq-key",
        "xai-key",
    ];
    let samples = corpus::secrets();
    let shaped = names.iter().map(|name| {
        samples
            .iter()
            .find(|sample| sample.name == *name)
            .unwrap_or_else(|| panic!("no sample {name}"))
    });
    for sample in shaped {
        for context in contexts {
            let text = context.replace("{t}", &sample.secret);
            let (cleaned, _) = s.clean_text(&text);
            if cleaned.contains(&sample.secret) {
                failures.push(format!("{}: {text:?} -> {cleaned:?}", sample.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_kind_is_exercised_by_the_corpus() {
    let expected = [
        "anthropic-key",
        "assignment",
        "authorization-header",
        "aws-access-key",
        "aws-secret-key",
        "azure-sas-token",
        "azure-storage-key",
        "bearer-token",
        "cli-password",
        "curl-user-password",
        "databricks-token",
        "digitalocean-token",
        "discord-token",
        "discord-webhook",
        "docker-token",
        "gcp-api-key",
        "gcp-oauth-secret",
        "gcp-oauth-token",
        "github-token",
        "gitlab-token",
        "grafana-token",
        "groq-key",
        "huggingface-token",
        "jwt",
        "netrc-password",
        "npm-token",
        "openai-key",
        "password-in-url",
        "private-key",
        "pypi-token",
        "secret-flag",
        "sendgrid-key",
        "shopify-token",
        "slack-token",
        "slack-webhook",
        "sql-password",
        "stripe-key",
        "telegram-bot-token",
        "twilio-api-key",
        "twilio-auth-token",
        "vault-token",
        "xai-key",
    ];
    let s = sanitizer();
    let mut seen = std::collections::BTreeSet::new();
    for sample in corpus::secrets() {
        let (cleaned, _) = s.clean_text(&sample.text);
        for (start, _) in cleaned.match_indices("[REDACTED:") {
            let kind = &cleaned[start + "[REDACTED:".len()..];
            seen.insert(kind[..kind.find(']').unwrap_or(kind.len())].to_owned());
        }
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|kind| !seen.contains(**kind))
        .collect();
    assert!(
        missing.is_empty(),
        "kinds without a corpus sample: {missing:?}"
    );
    let unknown: Vec<_> = seen
        .iter()
        .filter(|kind| !expected.contains(&kind.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "kinds missing from this list: {unknown:?}"
    );
}

#[test]
fn any_mix_of_syntax_and_multibyte_text_is_handled() {
    // Random mixes of the rules' syntax with multi-byte characters: nothing may panic, and
    // cleaning must stay idempotent.
    let pieces = [
        "token",
        "=",
        ":",
        " ",
        "→",
        "é",
        "中",
        "😀",
        "\"",
        "'",
        "`",
        "password",
        "let ",
        "(",
        ",",
        "\n",
        "--",
        " -p",
        "mysql",
        "sshpass",
        "://",
        "@",
        "Bearer ",
        "authorization: ",
        "Basic ",
        "<private>",
        "</private>",
        "<system-reminder>",
        "</system-reminder>",
        "eyJ",
        ".",
        "ghp_",
        "sk-",
        "x",
        "1",
        "Q9",
        "machine ",
        "login ",
        "identified by ",
        "with password ",
        ":AA",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "\\\"",
        "{",
        "}",
        "[",
        "]",
        "?",
        "&",
        "$",
        "#",
        "PASSWORD",
        "api_key",
        "self.",
        "secret",
        "key",
    ];
    let s = sanitizer();
    let mut rng = Xorshift(0x0bad_cafe_1234_5678);
    for _ in 0..20_000 {
        let n = 1 + (rng.next() % 24) as usize;
        let text: String = (0..n).map(|_| rng.pick(&pieces)).collect();
        let (once, _) = s.clean_text(&text);
        let (twice, report) = s.clean_text(&once);
        assert_eq!(twice, once, "not idempotent for {text:?}");
        assert!(
            report.is_clean(),
            "second pass reported {report:?} for {text:?}"
        );
        let _ = s.truncate(&text);
    }
}

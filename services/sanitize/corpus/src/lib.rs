//! Test corpus: realistic lines holding secrets that must be redacted, and look-alikes that must
//! come out unchanged.
//!
//! Everything is assembled at run time from prefixes and a seeded pseudo-random generator, so no
//! complete secret appears in the source and secret scanners have nothing to flag. The output is
//! deterministic: the same build produces the same samples.
//!
//! Used by the sanitiser's tests and by the end-to-end tests, which push the samples through
//! the whole pipeline and search the stored bytes for each `secret`. It is a crate of its own,
//! a dev-dependency only, so that no binary (the hook least of all) carries nine hundred lines of
//! test data.

/// One sample line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// What the sample exercises, unique within its list.
    pub name: &'static str,
    /// A realistic line (or few lines) containing `secret`.
    pub text: String,
    /// For [`secrets`], exactly the sensitive substring, which must not survive cleaning; for
    /// [`lookalikes`], the look-alike token, which must.
    pub secret: String,
}

/// A small deterministic generator (splitmix64); quality is irrelevant, reproducibility is not.
struct Rng(u64);

const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const DIGITS: &str = "0123456789";
const HEX: &str = "0123456789abcdef";

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `len` characters drawn from `alphabet`.
    fn pick(&mut self, alphabet: &str, len: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..len)
            .map(|_| chars[(self.next() % chars.len() as u64) as usize])
            .collect()
    }

    /// Random letters and digits that contain at least one upper-case letter, one lower-case
    /// letter and one digit, as real tokens do.
    fn alnum(&mut self, len: usize) -> String {
        let mut out = self.pick(&format!("{UPPER}{LOWER}{DIGITS}"), len.saturating_sub(3));
        for class in [UPPER, LOWER, DIGITS] {
            let at = (self.next() % (out.len() as u64 + 1)) as usize;
            out.insert_str(at, &self.pick(class, 1));
        }
        out.truncate(len);
        out
    }

    fn hex(&mut self, len: usize) -> String {
        let mut out = self.pick(HEX, len.saturating_sub(2));
        out.push_str(&self.pick("abcdef", 1));
        out.push_str(&self.pick(DIGITS, 1));
        out.truncate(len);
        out
    }

    fn base64(&mut self, len: usize) -> String {
        let mut out = self.alnum(len.saturating_sub(2));
        out.push_str(&self.pick("+/", 1));
        out.push_str(&self.pick(&format!("{UPPER}{DIGITS}"), 1));
        out.truncate(len);
        out
    }

    fn base64url(&mut self, len: usize) -> String {
        let mut out = self.alnum(len.saturating_sub(1));
        out.push_str(&self.pick("-_", 1));
        out
    }

    /// A password with punctuation, avoiding the characters that end a shell word or a URL's
    /// user-info (`&`, `@`, `/`, quotes, `#`, `$`).
    fn password(&mut self, len: usize) -> String {
        let mut out = self.alnum(len.saturating_sub(2));
        out.push_str(&self.pick("!%^*+=~", 1));
        out.push_str(&self.pick(DIGITS, 1));
        out
    }

    fn uuid(&mut self) -> String {
        format!(
            "{}-{}-4{}-a{}-{}",
            self.pick(HEX, 8),
            self.pick(HEX, 4),
            self.pick(HEX, 3),
            self.pick(HEX, 3),
            self.pick(HEX, 12)
        )
    }
}

/// A PEM block; the dashes are assembled here so that the source holds no complete header.
fn pem(label: &str, body: &str, newline: &str) -> String {
    let dashes = "-".repeat(5);
    format!("{dashes}BEGIN {label}{dashes}{newline}{body}{newline}{dashes}END {label}{dashes}")
}

/// Base64 lines of a PEM body, joined by `newline`; the first line is returned separately as
/// the sample's secret, since a grep for a multi-line secret would prove nothing.
fn pem_body(rng: &mut Rng, lines: usize, newline: &str) -> (String, String) {
    let body: Vec<String> = (0..lines)
        .map(|i| rng.base64(if i + 1 == lines { 28 } else { 64 }))
        .collect();
    (body.join(newline), body[0].clone())
}

/// Base64 of `bytes`: standard and padded, or URL-safe and unpadded; for Basic credentials,
/// JWT segments and Discord token ids.
fn encode_base64(bytes: &[u8], url_safe: bool) -> String {
    let alphabet: &[u8; 64] = if url_safe {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
        }
        if !url_safe {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

fn sample(name: &'static str, text: String, secret: String) -> Sample {
    assert!(
        text.contains(&secret),
        "sample {name} must contain its secret"
    );
    Sample { name, text, secret }
}

/// Lines holding secrets, one per shape; cleaning must remove every `secret`.
pub fn secrets() -> Vec<Sample> {
    let mut rng = Rng(0x6d6e_656d_6501);
    let r = &mut rng;
    let mut out = Vec::new();
    let mut add = |name: &'static str, secret: String, line: &dyn Fn(&str) -> String| {
        out.push(sample(name, line(&secret), secret));
    };

    let upper_alnum = format!("{UPPER}{DIGITS}");
    add(
        "aws-access-key-id",
        format!("AKIA{}", r.pick(&upper_alnum, 16)),
        &|s| format!("export AWS_ACCESS_KEY_ID={s}"),
    );
    add(
        "aws-session-key-id",
        format!("ASIA{}", r.pick(&upper_alnum, 16)),
        &|s| format!(r#"  "AccessKeyId": "{s}","#),
    );
    add("aws-secret-key-ini", r.base64(40), &|s| {
        format!("aws_secret_access_key = {s}")
    });
    add("aws-secret-key-json", r.base64(40), &|s| {
        format!(
            r#"{{"Credentials": {{"SecretAccessKey": "{s}", "Expiration": "2030-01-01T00:00:00Z"}}}}"#
        )
    });
    add("gcp-api-key", format!("AIza{}", r.base64url(35)), &|s| {
        format!(r#"curl "https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={s}""#)
    });
    let (body, first) = pem_body(r, 4, "\\n");
    let key_id = r.hex(40);
    let label = format!("{} {}", "PRIVATE", "KEY");
    add("gcp-service-account-json", first, &|_| {
        let block = pem(&label, &body, "\\n");
        format!(
            r#"{{"type": "service_account", "project_id": "demo-123", "private_key_id": "{key_id}", "private_key": "{block}\n", "client_email": "ci@demo-123.iam.gserviceaccount.com"}}"#
        )
    });
    for (name, kind) in [
        ("pem-rsa", "RSA"),
        ("pem-ec", "EC"),
        ("pem-openssh", "OPENSSH"),
        ("pem-encrypted", "ENCRYPTED"),
        ("pem-pkcs8", ""),
    ] {
        let (body, first) = pem_body(r, 5, "\n");
        let label = if kind.is_empty() {
            format!("{} {}", "PRIVATE", "KEY")
        } else {
            format!("{kind} {} {}", "PRIVATE", "KEY")
        };
        add(name, first, &|_| {
            format!("$ cat key.pem\n{}\n$ ", pem(&label, &body, "\n"))
        });
    }
    let (body, first) = pem_body(r, 6, "\n");
    add("pem-pgp", first, &|_| {
        let label = format!("PGP {} {} BLOCK", "PRIVATE", "KEY");
        pem(
            &label,
            &format!("Version: GnuPG v2\n\n{body}\n={PGP_CHECKSUM}"),
            "\n",
        )
    });
    add(
        "azure-storage-connection-string",
        format!("{}==", r.base64(86)),
        &|s| {
            format!(
                "AZURE_STORAGE_CONNECTION_STRING=\"DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={s};EndpointSuffix=core.windows.net\""
            )
        },
    );
    add("azure-sas-signature", r.base64(43), &|s| {
        format!(
            "https://demo.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig={s}%3D"
        )
    });
    add(
        "github-classic-token",
        format!("ghp_{}", r.alnum(36)),
        &|s| format!("export GITHUB_TOKEN={s}"),
    );
    add(
        "github-oauth-token-in-url",
        format!("gho_{}", r.alnum(36)),
        &|s| format!("git clone https://x-access-token:{s}@github.com/mneme/mneme.git"),
    );
    add("github-app-token", format!("ghs_{}", r.alnum(36)), &|s| {
        format!("Authorization: token {s}")
    });
    add(
        "github-fine-grained-pat",
        format!("github_pat_{}_{}", r.alnum(22), r.alnum(59)),
        &|s| format!("gh auth login --with-token <<< {s}"),
    );
    add("gitlab-pat", format!("glpat-{}", r.base64url(20)), &|s| {
        format!(r#"curl --header "PRIVATE-TOKEN: {s}" https://gitlab.com/api/v4/projects"#)
    });
    add(
        "gitlab-deploy-token",
        format!("gldt-{}", r.alnum(20)),
        &|s| format!("git clone https://deploy:{s}@gitlab.com/group/app.git"),
    );
    add(
        "gitlab-runner-token",
        format!("glrt-{}", r.alnum(20)),
        &|s| format!("  token = \"{s}\""),
    );
    add(
        "slack-bot-token",
        format!(
            "xoxb-{}-{}-{}",
            r.pick(DIGITS, 11),
            r.pick(DIGITS, 13),
            r.alnum(24)
        ),
        &|s| format!("SLACK_BOT_TOKEN={s}"),
    );
    add(
        "slack-user-token",
        format!(
            "xoxp-{}-{}-{}-{}",
            r.pick(DIGITS, 11),
            r.pick(DIGITS, 11),
            r.pick(DIGITS, 13),
            r.hex(32)
        ),
        &|s| format!("slack.WebClient(token='{s}')"),
    );
    add(
        "slack-app-token",
        format!(
            "xapp-1-A{}-{}-{}",
            r.pick(&upper_alnum, 10),
            r.pick(DIGITS, 13),
            r.hex(64)
        ),
        &|s| format!("SLACK_APP_TOKEN: {s}"),
    );
    add(
        "slack-webhook",
        format!(
            "T{}/B{}/{}",
            r.pick(&upper_alnum, 8),
            r.pick(&upper_alnum, 10),
            r.alnum(24)
        ),
        &|s| {
            format!(
                r#"curl -X POST -H 'Content-type: application/json' --data '{{"text":"deployed"}}' https://hooks.slack.com/services/{s}"#
            )
        },
    );
    add("discord-webhook", r.base64url(68), &|s| {
        format!(
            "https://discord.com/api/webhooks/{}/{s}",
            "112233445566778899"
        )
    });
    add(
        "stripe-live-secret",
        format!("sk_live_{}", r.alnum(24)),
        &|s| format!("stripe.api_key = \"{s}\""),
    );
    add(
        "stripe-test-secret",
        format!("sk_test_{}", r.alnum(24)),
        &|s| format!("curl https://api.stripe.com/v1/charges -u {s}:"),
    );
    add(
        "stripe-restricted",
        format!("rk_live_{}", r.alnum(24)),
        &|s| format!("STRIPE_KEY={s} node server.js"),
    );
    add(
        "stripe-webhook-secret",
        format!("whsec_{}", r.alnum(32)),
        &|s| format!("const endpointSecret = '{s}';"),
    );
    add(
        "openai-project-key",
        format!("sk-proj-{}", r.base64url(100)),
        &|s| format!("OPENAI_API_KEY={s}"),
    );
    add("openai-legacy-key", format!("sk-{}", r.alnum(48)), &|s| {
        format!("openai.api_key = '{s}'")
    });
    add(
        "anthropic-key",
        format!("sk-ant-api03-{}-{}AA", r.base64url(86), r.alnum(6)),
        &|s| format!(r#"curl https://api.anthropic.com/v1/messages -H "x-api-key: {s}""#),
    );
    add(
        "huggingface-token",
        format!(
            "hf_{}{}",
            r.pick(UPPER, 4),
            r.pick(&format!("{UPPER}{LOWER}"), 30)
        ),
        &|s| format!("huggingface-cli login --token {s}"),
    );
    add("npm-token", format!("npm_{}", r.alnum(36)), &|s| {
        format!("//registry.npmjs.org/:_authToken={s}")
    });
    add(
        "pypi-token",
        format!("pypi-AgEIcHlwaS5vcmc{}", r.base64url(120)),
        &|s| format!("[pypi]\n  username = __token__\n  password = {s}"),
    );
    add(
        "sendgrid-key",
        format!("SG.{}.{}", r.base64url(22), r.base64url(43)),
        &|s| format!("SENDGRID_API_KEY='{s}'"),
    );
    add("twilio-api-key", format!("SK{}", r.hex(32)), &|s| {
        format!("client = Client(\"{s}\", api_secret, account_sid)")
    });
    let account = format!("AC{}", r.hex(32));
    add("twilio-auth-token", r.hex(32), &|s| {
        format!(
            "curl -X POST https://api.twilio.com/2010-04-01/Accounts/{account}/Messages.json -u {account}:{s}"
        )
    });
    add("twilio-auth-token-env", r.hex(32), &|s| {
        format!("TWILIO_AUTH_TOKEN={s}")
    });
    let bot_id = format!("1{}", r.pick(DIGITS, 17));
    add(
        "discord-bot-token",
        format!(
            "{}.{}.{}",
            encode_base64(bot_id.as_bytes(), true),
            r.base64url(6),
            r.base64url(38)
        ),
        &|s| format!("bot.run('{s}')"),
    );
    add(
        "telegram-bot-token",
        format!("{}:AA{}", r.pick(DIGITS, 10), r.base64url(33)),
        &|s| format!("curl https://api.telegram.org/bot{s}/getMe"),
    );
    let jwt = format!(
        "{}.{}.{}",
        encode_base64(br#"{"alg":"HS256","typ":"JWT"}"#, true),
        encode_base64(
            format!(r#"{{"sub":"{}","exp":1900000000}}"#, r.pick(DIGITS, 8)).as_bytes(),
            true
        ),
        r.base64url(43)
    );
    add("jwt-bearer", jwt, &|s| {
        format!(r#"curl -H "Authorization: Bearer {s}" https://api.example.com/me"#)
    });
    add("bearer-in-log", r.base64url(40), &|s| {
        format!("DEBUG http: sending GET /v1/me with Bearer {s} (attempt 1)")
    });
    add("opaque-bearer", r.base64url(40), &|s| {
        format!("Authorization: Bearer {s}")
    });
    add(
        "basic-auth-header",
        encode_base64(format!("alice:{}", r.password(16)).as_bytes(), false),
        &|s| format!("GET /admin HTTP/1.1\nHost: example.com\nAuthorization: Basic {s}\n"),
    );
    add("password-in-postgres-url", r.password(20), &|s| {
        format!("DATABASE_URL=postgres://app:{s}@db.internal:5432/app")
    });
    add("password-in-redis-url", r.alnum(24), &|s| {
        format!("redis-cli -u redis://:{s}@cache.internal:6379/0 ping")
    });
    add("password-in-mongodb-url", r.alnum(18), &|s| {
        format!("mongodb+srv://admin:{s}@cluster0.abcde.mongodb.net/?retryWrites=true")
    });
    add("env-password", r.password(18), &|s| {
        format!("export DB_PASSWORD={s}")
    });
    add("env-secret-quoted", r.alnum(50), &|s| {
        format!("SECRET_KEY_BASE=\"{s}\"")
    });
    add("dotenv-spaced", r.password(16), &|s| {
        format!("MYSQL_ROOT_PASSWORD = {s}")
    });
    add("yaml-password", r.password(16), &|s| {
        format!("database:\n  host: db.internal\n  password: {s}\n")
    });
    add(
        "yaml-passphrase-with-spaces",
        format!(
            "{} {} {}",
            r.pick(LOWER, 7),
            r.pick(LOWER, 6),
            r.pick(LOWER, 8)
        ),
        &|s| format!("signing:\n  passphrase: {s}\n"),
    );
    add("json-client-secret", r.alnum(40), &|s| {
        format!(r#"{{"client_id": "web-app", "client_secret": "{s}"}}"#)
    });
    add("escaped-json-password", r.password(14), &|s| {
        format!(r#"{{"body": "{{\"user\": \"bob\", \"password\": \"{s}\"}}"}}"#)
    });
    add("python-api-key", r.alnum(32), &|s| {
        format!("API_KEY = '{s}'")
    });
    add("rust-typed-const", r.alnum(32), &|s| {
        format!("const API_TOKEN: &str = \"{s}\";")
    });
    add("go-short-decl", r.alnum(28), &|s| {
        format!("\tclientSecret := \"{s}\"")
    });
    add("compose-env-list", r.password(20), &|s| {
        format!("    environment:\n      - POSTGRES_PASSWORD={s}\n")
    });
    add("x-api-key-header", r.alnum(32), &|s| {
        format!("curl -H 'X-API-Key: {s}' https://api.example.com/v2/items")
    });
    add("query-access-token", r.base64url(40), &|s| {
        format!("GET https://graph.example.com/me?fields=id&access_token={s}&v=2")
    });
    add("netrc", r.password(16), &|s| {
        format!("machine api.example.com login alice password {s}")
    });
    add("cli-password-flag", r.password(16), &|s| {
        format!("docker login registry.example.com --username ci --password {s}")
    });
    add("cli-api-key-flag", r.alnum(32), &|s| {
        format!("./deploy --api-key={s} --region eu-west-1")
    });
    add("sql-identified-by", r.password(16), &|s| {
        format!("CREATE USER 'app'@'%' IDENTIFIED BY '{s}';")
    });
    add("mysql-dash-p", r.alnum(16), &|s| {
        format!("mysql -h db.internal -u root -p{s} shop < dump.sql")
    });
    add("sshpass", r.password(14), &|s| {
        format!("sshpass -p '{s}' ssh deploy@10.0.0.5 uptime")
    });
    add(
        "kubernetes-secret-yaml",
        format!("{}==", r.base64(22)),
        &|s| format!("apiVersion: v1\nkind: Secret\ntype: Opaque\ndata:\n  password: {s}\n"),
    );
    add(
        "gcp-oauth-client-secret",
        format!("GOCSPX-{}", r.base64url(28)),
        &|s| format!(r#""client_secret": "{s}","#),
    );
    add(
        "gcp-oauth-access-token",
        format!("ya29.{}", r.base64url(120)),
        &|s| format!("gcloud said: access token {s}"),
    );
    add("shopify-token", format!("shpat_{}", r.hex(32)), &|s| {
        format!("X-Shopify-Access-Token: {s}")
    });
    add(
        "digitalocean-token",
        format!("dop_v1_{}", r.hex(64)),
        &|s| format!("doctl auth init -t {s}"),
    );
    add("databricks-token", format!("dapi{}", r.hex(32)), &|s| {
        format!("databricks configure --host https://x.cloud.databricks.com --token-value {s}")
    });
    add(
        "docker-hub-token",
        format!("dckr_pat_{}", r.base64url(27)),
        &|s| format!("echo {s} | docker login -u alice --password-stdin"),
    );
    add("vault-token", format!("hvs.{}", r.alnum(90)), &|s| {
        format!("VAULT_TOKEN={s} vault kv get secret/app")
    });
    add(
        "grafana-service-account",
        format!("glsa_{}_{}", r.alnum(32), r.hex(8)),
        &|s| format!("grafana: {{ token: {s} }}"),
    );
    add("groq-key", format!("gsk_{}", r.alnum(52)), &|s| {
        format!("client = Groq(api_key=\"{s}\")")
    });
    add("xai-key", format!("xai-{}", r.alnum(80)), &|s| {
        format!("XAI_API_KEY={s}")
    });
    add("private-key-tail-after-cut", r.base64(64), &|s| {
        format!(
            "{}\n{}\n{}END {} {}-----",
            s, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "-----", "PRIVATE", "KEY"
        )
    });
    out
}

/// The checksum line of an armoured PGP block, after its `=`.
const PGP_CHECKSUM: &str = "Xy7q";

/// Lines that look secret-ish but are not; cleaning must leave every `text` unchanged.
pub fn lookalikes() -> Vec<Sample> {
    let mut rng = Rng(0x6c6f_6f6b_616c);
    let r = &mut rng;
    let mut out = Vec::new();
    let mut add = |name: &'static str, secret: String, line: &dyn Fn(&str) -> String| {
        out.push(sample(name, line(&secret), secret));
    };
    let fixed = |text: &str, secret: &str| (text.to_owned(), secret.to_owned());

    add("git-commit-sha", r.hex(40), &|s| {
        format!("commit {s}\nAuthor: Alice <alice@example.com>")
    });
    add("short-sha-in-log", r.hex(7), &|s| {
        format!("{s} Fix flaky test in the token parser")
    });
    add("uuid", r.uuid(), &|s| {
        format!(r#"{{"session_id": "{s}", "hook_event_name": "PostToolUse"}}"#)
    });
    add("docker-digest", r.hex(64), &|s| {
        format!("image: ghcr.io/mneme/ingest@sha256:{s}")
    });
    add("cargo-lock-checksum", r.hex(64), &|s| {
        format!("[[package]]\nname = \"serde\"\nversion = \"1.0.210\"\nchecksum = \"{s}\"")
    });
    add(
        "npm-integrity",
        format!("sha512-{}==", r.base64(86)),
        &|s| format!(r#"      "integrity": "{s}","#),
    );
    add("sha256sum-output", r.hex(64), &|s| {
        format!("{s}  target/release/mneme-hook")
    });
    add(
        "base64-image",
        format!("iVBORw0KGgoAAAANSUhEUgAA{}", r.base64(120)),
        &|s| format!("<img src=\"data:image/png;base64,{s}\">"),
    );
    add(
        "ssh-public-key",
        format!("AAAAC3NzaC1lZDI1NTE5AAAAI{}", r.base64(43)),
        &|s| format!("ssh-ed25519 {s} alice@laptop"),
    );
    let tail = r.base64(24);
    add("certificate", r.base64(64), &|s| {
        pem("CERTIFICATE", &format!("{s}\n{tail}"), "\n")
    });
    add("public-key", r.base64(64), &|s| pem("PUBLIC KEY", s, "\n"));
    let lines: &[(&'static str, (String, String))] = &[
        (
            "prose-password",
            fixed(
                "Please reset your password in settings before logging in.",
                "reset your password in settings",
            ),
        ),
        (
            "prose-token",
            fixed(
                "The lexer returns the next token to the parser.",
                "next token",
            ),
        ),
        (
            "prose-bearer",
            fixed(
                "Send the Bearer scheme in the Authorization header.",
                "Bearer scheme",
            ),
        ),
        (
            "prose-akia",
            fixed(
                "Access key ids start with AKIA followed by sixteen characters.",
                "AKIA",
            ),
        ),
        (
            "prose-ghp",
            fixed(
                "Classic GitHub tokens start with ghp and are 40 characters long.",
                "ghp",
            ),
        ),
        (
            "prose-sk-live",
            fixed("Never commit sk_live keys to git.", "sk_live"),
        ),
        (
            "sk-inside-words",
            fixed(
                "Move the task-list next to the desk-lamp-controller-settings panel.",
                "desk-lamp-controller-settings",
            ),
        ),
        (
            "css-class-with-sk",
            fixed(
                ".disk-usage-indicator-progress-bar { width: 40%; }",
                "disk-usage-indicator-progress-bar",
            ),
        ),
        (
            "code-next-token",
            fixed("    let token = next_token();", "next_token()"),
        ),
        (
            "code-password-hash-fn",
            fixed(
                "pub fn password_hash(input: &str) -> String {",
                "password_hash(input: &str)",
            ),
        ),
        (
            "code-self-token",
            fixed("        self.token = token", "self.token = token"),
        ),
        (
            "code-js-member",
            fixed("const password = req.body.password;", "req.body.password"),
        ),
        (
            "code-python-default",
            fixed("def login(username, password=None):", "password=None"),
        ),
        (
            "code-kwargs-passthrough",
            fixed(
                "client = Client(token=token, api_key=api_key)",
                "token=token",
            ),
        ),
        (
            "code-rust-field",
            fixed(
                "    pub api_key: Option<String>,",
                "api_key: Option<String>",
            ),
        ),
        (
            "code-ts-annotation",
            fixed("  password: string;", "password: string"),
        ),
        (
            "code-comparison",
            fixed(
                "if password == confirm_password {",
                "password == confirm_password",
            ),
        ),
        (
            "code-rust-use",
            fixed(
                "use crate::auth::token::TokenStore;",
                "auth::token::TokenStore",
            ),
        ),
        (
            "code-env-lookup",
            fixed(
                r#"token = os.environ["GITHUB_TOKEN"]"#,
                r#"os.environ["GITHUB_TOKEN"]"#,
            ),
        ),
        (
            "code-variable-copy",
            fixed("const secret = clientSecret;", "clientSecret"),
        ),
        (
            "compiler-output",
            fixed(
                "src/auth/token.rs:42:5: error[E0308]: mismatched types",
                "token.rs:42:5",
            ),
        ),
        (
            "npm-config",
            fixed(
                "npm_config_registry=https://registry.npmjs.org/",
                "npm_config_registry",
            ),
        ),
        (
            "jwt-header-only",
            fixed(
                "decoded header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 only",
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
            ),
        ),
        (
            "ssh-url-user-only",
            fixed(
                "git clone ssh://git@github.com/mneme/mneme.git",
                "ssh://git@github.com",
            ),
        ),
        (
            "https-url-user-only",
            fixed(
                "git remote add origin https://alice@example.com/repo.git",
                "https://alice@example.com",
            ),
        ),
        (
            "url-with-port",
            fixed(
                "curl http://localhost:8080/api/v1/tokens?limit=10",
                "localhost:8080",
            ),
        ),
        (
            "scp-style-remote",
            fixed("git@github.com:mneme/mneme.git", "git@github.com:mneme"),
        ),
        (
            "semver",
            fixed(
                r#"version = "1.2.3-beta.4+build.5""#,
                "1.2.3-beta.4+build.5",
            ),
        ),
        (
            "css-hex-colour",
            fixed("color: #ff00aa; background: #0a0b0c;", "#ff00aa"),
        ),
        (
            "phone-number",
            fixed(
                "Call +1 (555) 123-4567 or 555-987-6543.",
                "+1 (555) 123-4567",
            ),
        ),
        (
            "file-path",
            fixed(
                "/home/alice/projects/mneme/services/sanitize/src/secrets.rs",
                "sanitize/src/secrets.rs",
            ),
        ),
        (
            "ip-and-port",
            fixed("listening on 192.168.1.20:5432", "192.168.1.20:5432"),
        ),
        (
            "email",
            fixed(
                "Contact security@example.com for a new token.",
                "security@example.com",
            ),
        ),
        (
            "api-key-name",
            fixed(r#"api_key_name = "OPENAI_API_KEY""#, "OPENAI_API_KEY"),
        ),
        (
            "placeholder-braces",
            fixed("export GITHUB_TOKEN=${GH_TOKEN}", "${GH_TOKEN}"),
        ),
        (
            "placeholder-command",
            fixed(r#"export TOKEN="$(gh auth token)""#, "$(gh auth token)"),
        ),
        (
            "placeholder-angle",
            fixed("password: <your-password>", "<your-password>"),
        ),
        (
            "placeholder-mask",
            fixed("API_KEY=xxxxxxxxxxxx", "xxxxxxxxxxxx"),
        ),
        (
            "placeholder-actions",
            fixed(
                "  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
                "${{ secrets.GITHUB_TOKEN }}",
            ),
        ),
        (
            "placeholder-bearer",
            fixed(
                r#"curl -H "Authorization: Bearer $TOKEN" https://api.example.com"#,
                "Bearer $TOKEN",
            ),
        ),
        (
            "token-usage-counts",
            fixed(
                r#""usage": {"input_tokens": 1234, "output_tokens": 567}"#,
                r#""input_tokens": 1234"#,
            ),
        ),
        (
            "max-tokens",
            fixed("max_tokens = 4096", "max_tokens = 4096"),
        ),
        (
            "password-length-setting",
            fixed("password_min_length: 12", "password_min_length: 12"),
        ),
        (
            "token-type",
            fixed(r#""token_type": "Bearer""#, r#""token_type": "Bearer""#),
        ),
        (
            "credentials-path",
            fixed(
                "GOOGLE_APPLICATION_CREDENTIALS=/home/alice/keys/sa.json",
                "/home/alice/keys/sa.json",
            ),
        ),
        (
            "shell-pwd",
            fixed("PWD=/home/alice/project", "PWD=/home/alice/project"),
        ),
        (
            "ssh-auth-sock",
            fixed(
                "SSH_AUTH_SOCK=/tmp/ssh-XXXXabc/agent.1234",
                "/tmp/ssh-XXXXabc/agent.1234",
            ),
        ),
        (
            "tokenizers-flag",
            fixed(
                "TOKENIZERS_PARALLELISM=false",
                "TOKENIZERS_PARALLELISM=false",
            ),
        ),
        ("auth-disabled", fixed("auth: false", "auth: false")),
        (
            "password-stdin-flag",
            fixed(
                "docker login --password-stdin < token.txt",
                "--password-stdin",
            ),
        ),
        (
            "mysql-prompt",
            fixed("mysql -h db.internal -P 3306 -u root -p shop", "-p shop"),
        ),
        (
            "kwargs-on-own-line",
            fixed(
                "    password=password,\n    token=self.token,",
                "password=password",
            ),
        ),
        (
            "prose-authorization",
            fixed(
                "Authorization: see the section on tokens below.",
                "Authorization: see",
            ),
        ),
    ];
    for (name, (text, secret)) in lines {
        out.push(sample(name, text.clone(), secret.clone()));
    }
    out
}

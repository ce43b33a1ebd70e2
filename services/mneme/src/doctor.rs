//! `mneme doctor`: what protects this machine's memory, checked rather than assumed. File
//! modes of everything mneme keeps, whether NATS admits a client without credentials and which
//! identity the hook uses, the spool against its bounds, and how far the api can be reached and
//! with what protection. Each finding is `ok` or `warn` with what to do; the command exits
//! non-zero when something needs attention, so a script or a CI job can hold a box to it.

use common::CommonArgs;
use proto::access::Role;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    common: CommonArgs,

    #[command(flatten)]
    api: api::ApiArgs,

    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One finding: a topic, whether it is fine, and what was found (with what to do when not).
struct Finding {
    topic: &'static str,
    ok: bool,
    text: String,
}

fn ok(topic: &'static str, text: impl Into<String>) -> Finding {
    Finding {
        topic,
        ok: true,
        text: text.into(),
    }
}

fn warn(topic: &'static str, text: impl Into<String>) -> Finding {
    Finding {
        topic,
        ok: false,
        text: text.into(),
    }
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let mut findings = files(&args.common);
    findings.extend(nats(&args.common).await);
    findings.extend(spool());
    findings.extend(api(&args.common, &args.api).await);
    let problems = findings.iter().filter(|f| !f.ok).count();
    if args.json {
        let list: Vec<Value> = findings
            .iter()
            .map(|f| json!({"topic": f.topic, "ok": f.ok, "text": f.text}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"problems": problems, "findings": list}))?
        );
    } else {
        for f in &findings {
            println!(
                "{:<5} {:<6} {}",
                if f.ok { "ok" } else { "warn" },
                f.topic,
                f.text
            );
        }
        println!(
            "{}",
            match problems {
                0 => "nothing needs attention".to_owned(),
                1 => "1 finding needs attention".to_owned(),
                n => format!("{n} findings need attention"),
            }
        );
    }
    anyhow::ensure!(
        problems == 0,
        "{problems} finding(s) need attention (see above)"
    );
    Ok(())
}

/// The mode bits of `path`, when it exists.
fn mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// Everything mneme keeps that holds memory or a secret is readable by its owner only.
fn files(common: &CommonArgs) -> Vec<Finding> {
    let home = common.home_dir();
    let config = mneme_hook::config::HookConfig::from_env();
    let db = common.db_path();
    let with = |suffix: &str| {
        let mut path = db.clone().into_os_string();
        path.push(suffix);
        PathBuf::from(path)
    };
    let keys = common.nats_keys_dir();
    let mut paths = vec![
        home.clone(),
        db.clone(),
        with("-wal"),
        with("-shm"),
        common.api_token_path(),
        keys.clone(),
        config.spool_dir.clone(),
        home.join("hook.log"),
        home.join("export"),
        home.join("nats"),
    ];
    paths.extend(Role::ALL.iter().map(|role| keys.join(role.key_file())));
    if let Ok(entries) = std::fs::read_dir(&config.spool_dir) {
        paths.extend(entries.filter_map(Result::ok).map(|e| e.path()));
    }
    let mut checked = 0;
    let mut wide = Vec::new();
    for path in paths {
        let Some(mode) = mode(&path) else { continue };
        checked += 1;
        if mode & 0o077 != 0 {
            wide.push(format!("{} ({:o})", path.display(), mode));
        }
    }
    if wide.is_empty() {
        vec![ok(
            "files",
            format!(
                "{checked} files and directories under {} are readable by their owner only",
                home.display()
            ),
        )]
    } else {
        vec![warn(
            "files",
            format!(
                "readable by other users: {}; narrow them (chmod 600 for files, 700 for directories)",
                wide.join(", ")
            ),
        )]
    }
}

/// Whether NATS refuses a client without credentials, and which identity the hook uses.
async fn nats(common: &CommonArgs) -> Vec<Finding> {
    let url = common::nats::shown(&common.nats_url);
    let anonymous = async_nats::ConnectOptions::new()
        .name("mneme-doctor")
        .connection_timeout(Duration::from_secs(2))
        .connect(&common.nats_url);
    let mut findings = vec![
        match tokio::time::timeout(Duration::from_secs(3), anonymous).await {
            Ok(Ok(client)) => {
                drop(client);
                warn(
                    "nats",
                    format!(
                        "nats at {url} admits clients without credentials: whoever reaches it can read every event and delete memory; run it with mneme's identities (`mneme up` does; `mneme nats-key --users DIR` for a box)"
                    ),
                )
            }
            Ok(Err(error))
                if error.kind() == async_nats::ConnectErrorKind::AuthorizationViolation =>
            {
                ok(
                    "nats",
                    format!("nats at {url} refuses clients without credentials"),
                )
            }
            Ok(Err(error)) => warn("nats", format!("nats at {url} cannot be checked: {error}")),
            Err(_) => warn("nats", format!("nats at {url} did not answer within 3s")),
        },
    ];
    findings.push(hook_identity(common));
    findings
}

/// Which identity the hook on this machine connects with, as it would find it.
fn hook_identity(common: &CommonArgs) -> Finding {
    let config = mneme_hook::config::HookConfig::from_env();
    if config.nats_token.is_some() {
        return warn(
            "hook",
            "the hook uses a NATS token (MNEME_NATS_TOKEN): everyone holding it has every permission it gives; give hooks the hook identity (MNEME_NATS_NKEY=<keys>/hook.nk)",
        );
    }
    if let Some(creds) = &config.nats_creds {
        return ok(
            "hook",
            format!(
                "the hook uses the credentials file {} (its permissions are the server's to say)",
                creds.display()
            ),
        );
    }
    let Some(seed) = &config.nats_nkey else {
        return warn(
            "hook",
            "the hook has no NATS credentials: a server that requires them refuses it, and one that does not admits anyone",
        );
    };
    let Ok(public) = common::access::public_key(seed) else {
        return warn(
            "hook",
            format!(
                "the hook's seed {} cannot be read as an nkey seed",
                seed.display()
            ),
        );
    };
    let keys = common.nats_keys_dir();
    let role = Role::ALL.into_iter().find(|role| {
        common::access::public_key(&keys.join(role.key_file())).is_ok_and(|key| key == public)
    });
    match role {
        Some(Role::Hook) => ok(
            "hook",
            format!(
                "the hook uses the hook identity ({}): it may publish events and ask for context and search, nothing else",
                seed.display()
            ),
        ),
        Some(role) => warn(
            "hook",
            format!(
                "the hook uses the {} identity ({}), which may do far more than a hook needs; use {}",
                role.name(),
                seed.display(),
                keys.join(Role::Hook.key_file()).display()
            ),
        ),
        None => ok(
            "hook",
            format!(
                "the hook uses the nkey {public} from {} (not one of {}; its permissions are the server's to say)",
                seed.display(),
                keys.display()
            ),
        ),
    }
}

/// The spool against its bounds.
fn spool() -> Vec<Finding> {
    let config = mneme_hook::config::HookConfig::from_env();
    let bounds = config.spool_bounds;
    let stats = mneme_hook::spool::Spool::new(&config.spool_dir).stats();
    let mut findings = vec![ok(
        "spool",
        format!(
            "{} events waiting, {} of {} bytes; events older than {} days are dropped",
            stats.pending,
            stats.bytes,
            bounds.max_bytes,
            bounds.max_age.as_secs() / 86_400
        ),
    )];
    if stats.bytes > bounds.max_bytes / 10 * 8 {
        findings.push(warn(
            "spool",
            "the spool is over 80% of its size bound: NATS has not taken events for a while (`mneme status`)",
        ));
    }
    if stats.dropped > 0 {
        findings.push(warn(
            "spool",
            format!(
                "{} events were dropped over the spool's bounds (listed in {})",
                stats.dropped,
                config.spool_dir.join("dropped.log").display()
            ),
        ));
    }
    if stats.set_aside > 0 {
        findings.push(warn(
            "spool",
            format!(
                "{} events were set aside after NATS refused them again and again (*.failed, *.corrupt in {})",
                stats.set_aside,
                config.spool_dir.display()
            ),
        ));
    }
    findings
}

/// How far the api can be reached, and what protects it there.
async fn api(common: &CommonArgs, args: &api::ApiArgs) -> Vec<Finding> {
    let addr = args.addr;
    let mut findings = Vec::new();
    let token = if args.token.is_some() {
        "the token of MNEME_API_TOKEN".to_owned()
    } else if common.api_token_path().is_file() {
        format!("the token in {}", common.api_token_path().display())
    } else {
        "a token generated at its first start".to_owned()
    };
    if addr.ip().is_loopback() {
        findings.push(ok(
            "api",
            format!(
                "the api listens on {addr}, this machine only: reads need no token there, writes, deletes and MCP need {token}"
            ),
        ));
    } else {
        findings.push(warn(
            "api",
            format!(
                "the api listens on {addr}, beyond this machine: every request needs {token}, and mneme speaks plain HTTP, so put it behind a TLS proxy (and set MNEME_API_TRUSTED_PROXIES to it)"
            ),
        ));
    }
    if !args.trusted_proxies.is_empty() {
        findings.push(ok(
            "api",
            format!(
                "the client address is taken from X-Forwarded-For only from {:?}",
                args.trusted_proxies
            ),
        ));
    }
    let probe = std::net::SocketAddr::new(
        if addr.ip().is_unspecified() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            addr.ip()
        },
        addr.port(),
    );
    let reachable = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect(probe),
    )
    .await
    .is_ok_and(|c| c.is_ok());
    findings.push(ok(
        "api",
        if reachable {
            format!("something answers on {probe}")
        } else {
            format!("nothing answers on {probe} (the api is not running)")
        },
    ));
    findings
}

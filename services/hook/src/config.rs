//! Hook settings, read from the environment only: the hook must start in a few milliseconds and
//! cannot afford argument parsing frameworks or config files.

use std::path::PathBuf;
use std::time::Duration;

/// Everything the hook reads from its environment.
#[derive(Debug, Clone)]
pub struct HookConfig {
    /// `MNEME_NATS_URL`.
    pub nats_url: String,
    /// `MNEME_NATS_TOKEN`.
    pub nats_token: Option<String>,
    /// `MNEME_NATS_CREDS`.
    pub nats_creds: Option<PathBuf>,
    /// `MNEME_NATS_NKEY`: a file holding an NKey user seed; else, when no token or credentials
    /// are set, `hook.nk` in `MNEME_NATS_KEYS` (default `$MNEME_HOME/nats-keys`) if it exists.
    pub nats_nkey: Option<PathBuf>,
    /// `MNEME_SPOOL_DIR`, else `$MNEME_HOME/spool`.
    pub spool_dir: PathBuf,
    /// `MNEME_SPOOL_MAX_BYTES` (default 256 MiB) and `MNEME_SPOOL_MAX_AGE_DAYS` (default 30):
    /// beyond either, the oldest spooled events are dropped and counted.
    pub spool_bounds: crate::spool::Bounds,
    /// `MNEME_HOOK_CONNECT_TIMEOUT_MS` (default 300).
    pub connect_timeout: Duration,
    /// `MNEME_HOOK_ACK_TIMEOUT_MS` (default 500).
    pub ack_timeout: Duration,
    /// `MNEME_HOOK_CONTEXT_TIMEOUT_MS` (default 400).
    pub context_timeout: Duration,
    /// `MNEME_HOOK_REPLAY_BUDGET_MS` (default 2000): how long one run may spend replaying.
    pub replay_budget: Duration,
    /// `MNEME_HOOK_STDIN_TIMEOUT_MS` (default 2000): how long to wait for the host's payload.
    pub stdin_timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: where the hook sends its spans (OTLP/gRPC); none when unset.
    pub otel_endpoint: Option<String>,
    /// `MNEME_HOOK_OTLP_TIMEOUT_MS` (default 300): how long the export of the spans may take.
    pub otel_timeout: Duration,
    /// `MNEME_DISABLED=1` turns the hook into a no-op.
    pub disabled: bool,
    /// `MNEME_HOOK_DEBUG=1` reports failures on stderr as well as in the hook log.
    pub debug: bool,
    /// The data directory (`MNEME_HOME`), where the hook log lives.
    pub home: PathBuf,
}

impl HookConfig {
    /// Read the configuration from the process environment.
    pub fn from_env() -> HookConfig {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let millis = |name: &str, default: u64| {
            Duration::from_millis(var(name).and_then(|v| v.parse().ok()).unwrap_or(default))
        };
        let home = proto::defaults::home();
        HookConfig {
            nats_url: var("MNEME_NATS_URL").unwrap_or_else(|| proto::defaults::NATS_URL.to_owned()),
            nats_token: var("MNEME_NATS_TOKEN"),
            nats_creds: var("MNEME_NATS_CREDS").map(PathBuf::from),
            nats_nkey: var("MNEME_NATS_NKEY").map(PathBuf::from).or_else(|| {
                // With no credential configured, the hook's own key from the deployment's key
                // set (the one `mneme up` makes for its server), when there is one.
                let configured = ["MNEME_NATS_TOKEN", "MNEME_NATS_CREDS"]
                    .iter()
                    .any(|name| var(name).is_some());
                let dir = var("MNEME_NATS_KEYS")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| proto::defaults::nats_keys_dir(&home));
                let seed = dir.join(proto::access::Role::Hook.key_file());
                (!configured && seed.is_file()).then_some(seed)
            }),
            spool_dir: var("MNEME_SPOOL_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| proto::defaults::spool_dir(&home)),
            spool_bounds: {
                let default = crate::spool::Bounds::default();
                crate::spool::Bounds {
                    max_bytes: var("MNEME_SPOOL_MAX_BYTES")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(default.max_bytes),
                    max_age: var("MNEME_SPOOL_MAX_AGE_DAYS")
                        .and_then(|v| v.parse::<u64>().ok())
                        .map_or(default.max_age, |days| {
                            Duration::from_secs(days.saturating_mul(24 * 3600))
                        }),
                }
            },
            connect_timeout: millis("MNEME_HOOK_CONNECT_TIMEOUT_MS", 300),
            ack_timeout: millis("MNEME_HOOK_ACK_TIMEOUT_MS", 500),
            context_timeout: millis("MNEME_HOOK_CONTEXT_TIMEOUT_MS", 400),
            replay_budget: millis("MNEME_HOOK_REPLAY_BUDGET_MS", 2000),
            stdin_timeout: millis("MNEME_HOOK_STDIN_TIMEOUT_MS", 2000),
            otel_endpoint: var("OTEL_EXPORTER_OTLP_ENDPOINT"),
            otel_timeout: millis("MNEME_HOOK_OTLP_TIMEOUT_MS", 300),
            disabled: var("MNEME_DISABLED").is_some_and(|v| v != "0"),
            debug: var("MNEME_HOOK_DEBUG").is_some_and(|v| v != "0"),
            home,
        }
    }
}

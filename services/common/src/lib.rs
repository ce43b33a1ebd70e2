//! Plumbing every mneme service shares: configuration from the environment ([`CommonArgs`]),
//! telemetry ([`telemetry`]), NATS connection and W3C trace-context headers ([`nats`]), the
//! health probe every service answers ([`health`]) and shutdown on SIGINT/SIGTERM ([`shutdown`]).
//!
//! Architecture invariant: `common` knows nothing about any service's domain and holds no SQL.

pub mod health;
pub mod nats;
pub mod shutdown;
pub mod streams;
pub mod telemetry;

use std::path::PathBuf;

/// Settings every service reads, each from an environment variable.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// NATS server URL.
    #[arg(long, env = "MNEME_NATS_URL", default_value = proto::defaults::NATS_URL)]
    pub nats_url: String,

    /// Credentials file for NATS (NKey or JWT), when the server requires one.
    #[arg(long, env = "MNEME_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,

    /// Token for NATS, when the server requires one.
    #[arg(long, env = "MNEME_NATS_TOKEN", hide_env_values = true)]
    pub nats_token: Option<String>,

    /// Directory for mneme's data (store, spool, local nats-server state).
    #[arg(long, env = "MNEME_HOME")]
    pub home: Option<PathBuf>,

    /// SQLite database file; defaults to `$MNEME_HOME/mneme.db`.
    #[arg(long, env = "MNEME_DB")]
    pub db: Option<PathBuf>,

    /// Log format: `text` or `json`.
    #[arg(long, env = "MNEME_LOG_FORMAT", default_value = "text")]
    pub log_format: String,

    /// OTLP/gRPC endpoint; traces are exported only when it is set.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otel_endpoint: Option<String>,
}

impl CommonArgs {
    /// Arguments built from the environment alone, for embedding and tests.
    pub fn from_env() -> CommonArgs {
        #[derive(clap::Parser)]
        struct Only {
            #[command(flatten)]
            common: CommonArgs,
        }
        <Only as clap::Parser>::parse_from(["mneme"]).common
    }

    /// The data directory: `MNEME_HOME`, else `$XDG_DATA_HOME/mneme`, else `~/.local/share/mneme`.
    pub fn home_dir(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(proto::defaults::home)
    }

    /// The SQLite database path.
    pub fn db_path(&self) -> PathBuf {
        self.db
            .clone()
            .unwrap_or_else(|| self.home_dir().join("mneme.db"))
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

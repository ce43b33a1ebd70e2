//! Plumbing every mneme service shares: configuration from the environment ([`CommonArgs`]),
//! telemetry ([`telemetry`]), NATS connection and W3C trace-context headers ([`nats`]), the
//! health probe every service answers ([`health`]) and shutdown on SIGINT/SIGTERM ([`shutdown`]).
//!
//! Architecture invariant: `common` knows nothing about any service's domain and holds no SQL.

pub mod health;
pub mod keys;
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

    /// Credentials file for NATS (a user JWT with its NKey seed, as `nsc` writes it), when the
    /// server uses decentralised authentication.
    #[arg(long, env = "MNEME_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,

    /// File holding an NKey seed (`SU…`), when the server lists the matching public key among
    /// its users. A file, never the seed itself, so it stays out of process listings and logs.
    #[arg(long, env = "MNEME_NATS_NKEY")]
    pub nats_nkey: Option<PathBuf>,

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

/// A Unix-millisecond time as `YYYY-MM-DD` in UTC, computed without a date library.
pub fn utc_day(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's published algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

//! Plumbing every mneme service shares: configuration from the environment ([`CommonArgs`]),
//! telemetry ([`telemetry`]), NATS connection and W3C trace-context headers ([`nats`]), the
//! JetStream streams and durable consumers ([`streams`]), notices read in batches with dead
//! letters ([`notices`]), request/reply as a table of typed handlers ([`requests`]), start-up and
//! shut-down of a service ([`service`]), this machine's team ([`team`]), the health probe every service answers ([`health`]),
//! time and calendar dates ([`time`]) and shutdown on SIGINT/SIGTERM ([`shutdown`]).
//!
//! Architecture invariant: `common` knows nothing about any service's domain and holds no SQL.

pub mod access;
pub mod health;
pub mod nats;
pub mod notices;
pub mod requests;
pub mod service;
pub mod shutdown;
pub mod streams;
pub mod team;
pub mod telemetry;
pub mod time;

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

    /// Directory of a deployment's NATS identities, one NKey seed per role (`ingest.nk`,
    /// `retrieval.nk`, `api.nk`, `admin.nk`, …; see `mneme nats-key --users`): each service
    /// connects as its own role with only that role's permissions. Used when no token, seed or
    /// credentials file is given; `$MNEME_HOME/nats-keys` (made by `mneme up`) when unset.
    #[arg(long, env = "MNEME_NATS_KEYS")]
    pub nats_keys: Option<PathBuf>,

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

    /// Create the data directory owner-only (0700), or narrow it when other users may read it
    /// (saying so in the log): it holds the store, the spool and the local NATS server's
    /// streams, all of which hold what agents saw. A directory this user may not change (one it
    /// does not own) is said in the log and left as it is: the files inside are still created
    /// owner-only, and refusing to start would only take memory away.
    pub fn secure_home(&self) -> anyhow::Result<()> {
        let home = self.home_dir();
        if let Err(error) = store::private_dir(&home) {
            if !home.is_dir() {
                return Err(anyhow::Error::new(error).context(format!(
                    "cannot create the data directory {}",
                    home.display()
                )));
            }
            tracing::warn!(dir = %home.display(), %error, "cannot make the data directory owner-only");
        }
        Ok(())
    }

    /// The directory of NATS identities: `MNEME_NATS_KEYS`, else `nats-keys` in the data
    /// directory.
    pub fn nats_keys_dir(&self) -> PathBuf {
        self.nats_keys
            .clone()
            .unwrap_or_else(|| proto::defaults::nats_keys_dir(&self.home_dir()))
    }

    /// The SQLite database path.
    pub fn db_path(&self) -> PathBuf {
        self.db
            .clone()
            .unwrap_or_else(|| self.home_dir().join("mneme.db"))
    }

    /// The file holding the api's generated token, `$MNEME_HOME/api-token`: beside the store,
    /// so the api and `mneme token` find the same one (in a container, on the store volume).
    pub fn api_token_path(&self) -> PathBuf {
        self.home_dir().join("api-token")
    }
}

//! Start-up and shut-down every service that writes the store shares: open the store (applying
//! migrations) and hold the service's writer lock on it, connect to NATS (waiting for a server
//! that starts alongside), make sure every stream exists, answer health probes once the service
//! takes work; and, at the end, stop answering them, drain NATS and close the store.

use anyhow::Context as _;
use async_nats::jetstream;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::CommonArgs;
use crate::health::Counters;

/// How long a starting service waits for NATS to accept its first connection.
const CONNECT_DEADLINE: Duration = Duration::from_secs(30);

/// What a running service holds: its store, its NATS connection, JetStream with every stream
/// in place, and the counters its health probe reports.
pub struct Service {
    pub name: &'static str,
    pub store: store::Store,
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
    pub counters: Arc<Counters>,
    health: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    /// Held, not read: this service's claim on the store, until it stops.
    _writer: store::WriterLock,
}

impl Service {
    /// Open the store, connect to NATS as `name` and create the streams that do not exist yet.
    pub async fn start(common: &CommonArgs, name: &'static str) -> anyhow::Result<Service> {
        common.secure_home()?;
        let db_path = common.db_path();
        let store = store::Store::open(&db_path)
            .await
            .with_context(|| format!("opening store {}", db_path.display()))?;
        let writer = store.hold_writer(name)?;
        let client = crate::nats::connect(common, name, CONNECT_DEADLINE).await?;
        let jetstream = jetstream::new(client.clone());
        crate::streams::ensure(&jetstream).await?;
        Ok(Service {
            name,
            store,
            client,
            jetstream,
            counters: Arc::new(Counters::default()),
            health: None,
            _writer: writer,
        })
    }

    /// Answer health probes until `shutdown` is cancelled or the service stops. Called once the
    /// service takes work (its consumers and subscriptions exist), because `mneme up`, the
    /// containers and the tests take the first answer to mean the service is ready.
    pub fn answer_health(&mut self, shutdown: &CancellationToken) {
        if self.health.is_none() {
            self.health = Some(tokio::spawn(crate::health::serve(
                self.client.clone(),
                self.name,
                self.counters.clone(),
                shutdown.clone(),
            )));
        }
    }

    /// Stop answering health probes, drain NATS (what was published is delivered) and close
    /// the store.
    pub async fn stop(self) {
        if let Some(health) = self.health {
            health.abort();
        }
        if let Err(error) = self.client.drain().await {
            tracing::warn!(%error, "draining nats failed");
        }
        self.store.close().await;
    }
}

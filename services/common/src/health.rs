//! The health probe: every service answers `mneme.health.<service>` with a
//! [`proto::HealthReply`], so `mneme status` and the api can tell which services are alive.

use futures::StreamExt as _;
use proto::Message as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Counters a service updates and its health probe reports.
#[derive(Debug, Default)]
pub struct Counters {
    /// Messages handled since start.
    pub handled: AtomicU64,
    /// A short status line the probe reports (for example which search mode is active).
    detail: std::sync::Mutex<String>,
    /// Work accepted and not finished, reported with the detail.
    backlogs: std::sync::Mutex<Vec<proto::Backlog>>,
}

impl Counters {
    /// Count one handled message.
    pub fn handled(&self) {
        self.handled.fetch_add(1, Ordering::Relaxed);
    }

    /// Replace the status line the probe reports.
    pub fn set_detail(&self, detail: impl Into<String>) {
        *self.detail.lock().unwrap_or_else(|e| e.into_inner()) = detail.into();
    }

    /// Replace the backlogs the probe reports.
    pub fn set_backlogs(&self, backlogs: Vec<proto::Backlog>) {
        *self.backlogs.lock().unwrap_or_else(|e| e.into_inner()) = backlogs;
    }

    fn backlogs(&self) -> Vec<proto::Backlog> {
        self.backlogs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn detail(&self) -> String {
        let detail = self.detail.lock().unwrap_or_else(|e| e.into_inner());
        if detail.is_empty() {
            "running".to_owned()
        } else {
            detail.clone()
        }
    }
}

/// Answer health probes for `service` until `shutdown` is cancelled.
pub async fn serve(
    client: async_nats::Client,
    service: &'static str,
    counters: Arc<Counters>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut requests = client
        .subscribe(proto::subjects::health_subject(service))
        .await?;
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => break,
            message = requests.next() => match message {
                Some(message) => message,
                None => break,
            },
        };
        let Some(reply) = message.reply else { continue };
        let body = proto::HealthReply {
            service: service.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            ok: true,
            detail: counters.detail(),
            uptime_ms: started.elapsed().as_millis() as i64,
            handled: counters.handled.load(Ordering::Relaxed),
            backlogs: counters.backlogs(),
        };
        if let Err(error) = client.publish(reply, body.encode_to_vec().into()).await {
            tracing::debug!(%error, "health reply failed");
        }
    }
    Ok(())
}

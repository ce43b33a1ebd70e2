//! Reading notices from a durable consumer in batches, the loop every consumer downstream of
//! ingest shares: decode each message (dead-lettering what cannot be read), handle what the
//! batch says at once, then ack the batch, give it back for redelivery, or, when handling
//! failed, retry it (dead-lettering messages that failed too often, when the service says how
//! often is too often).
//!
//! What a notice means is the service's business ([`Handler`]); this module only knows
//! messages, batches and acknowledgements.

use async_nats::jetstream::{self, AckKind};
use futures::StreamExt as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::health::Counters;
use crate::streams::{Durable, dead_letter, pull_batches};

/// How long a message given back waits before JetStream delivers it again.
const REDELIVERY_DELAY: Duration = Duration::from_secs(1);

/// What became of a batch a [`Handler`] handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Its effects are committed (and announced): ack every message.
    Ack,
    /// Its effects are committed but could not be announced: give the messages back, so the
    /// redelivery announces them again (handling must make a redelivery change nothing).
    Redeliver,
}

/// What a service does with the notices it reads.
pub trait Handler: Send + Sync {
    /// One message, read.
    type Notice: Send + Sync;

    /// The work, for logs and dead letters: `"{WORK} failed"`.
    const WORK: &'static str;

    /// Read one message; `Err` says why it cannot be used, and the message is dead-lettered.
    fn decode(&self, message: &jetstream::Message) -> Result<Self::Notice, String>;

    /// Handle the notices of one batch, in order. An error leaves the batch to be retried.
    /// The notices (and the spans they hold) live until the batch is acked or given back.
    fn handle(
        &self,
        notices: &[Self::Notice],
    ) -> impl Future<Output = anyhow::Result<Handled>> + Send;
}

/// A durable consumer read in batches.
pub struct Reader {
    batches: Pin<Box<dyn futures::Stream<Item = Vec<jetstream::Message>> + Send>>,
    settle: Settle,
}

/// How a batch is settled. Apart from the stream of batches, so handling a batch borrows
/// nothing that is not `Sync`.
struct Settle {
    jetstream: jetstream::Context,
    service: &'static str,
    max_deliver: Option<i64>,
    counters: Option<Arc<Counters>>,
}

impl Reader {
    /// Open (or create) the durable consumer; messages `service` cannot use go to its dead
    /// letters.
    pub async fn open(
        jetstream: &jetstream::Context,
        service: &'static str,
        durable: Durable<'_>,
    ) -> anyhow::Result<Reader> {
        Ok(Reader {
            batches: Box::pin(pull_batches(jetstream, durable).await?),
            settle: Settle {
                jetstream: jetstream.clone(),
                service,
                max_deliver: None,
                counters: None,
            },
        })
    }

    /// Dead-letter a message whose batch failed `deliveries` times instead of retrying it once
    /// more; without this, a failing batch is retried until it succeeds.
    pub fn dead_letter_after(mut self, deliveries: i64) -> Reader {
        self.settle.max_deliver = Some(deliveries);
        self
    }

    /// Count every message acked in `counters`, for the health probe.
    pub fn counting(mut self, counters: Arc<Counters>) -> Reader {
        self.settle.counters = Some(counters);
        self
    }

    /// Read and handle batches until `shutdown` is cancelled or the consumer ends. A batch in
    /// progress is never interrupted: cancellation is only seen between batches.
    pub async fn run<H: Handler>(mut self, handler: &H, shutdown: &CancellationToken) {
        loop {
            let messages = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                batch = self.batches.next() => match batch {
                    Some(batch) => batch,
                    None => return,
                },
            };
            if !messages.is_empty() {
                self.settle.batch(handler, messages).await;
            }
        }
    }
}

impl Settle {
    async fn batch<H: Handler>(&self, handler: &H, messages: Vec<jetstream::Message>) {
        let mut good = Vec::with_capacity(messages.len());
        let mut notices = Vec::with_capacity(messages.len());
        for message in messages {
            match handler.decode(&message) {
                Ok(notice) => {
                    notices.push(notice);
                    good.push(message);
                }
                Err(reason) => dead_letter(&self.jetstream, self.service, &message, &reason).await,
            }
        }
        if good.is_empty() {
            return;
        }
        match handler.handle(&notices).await {
            Ok(Handled::Ack) => {
                for message in &good {
                    if let Err(error) = message.ack().await {
                        tracing::warn!(%error, "ack failed; the notice will be redelivered and change nothing");
                    }
                    if let Some(counters) = &self.counters {
                        counters.handled();
                    }
                }
            }
            Ok(Handled::Redeliver) => {
                for message in &good {
                    redeliver(message).await;
                }
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "{} failed; will retry", H::WORK);
                for message in &good {
                    let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
                    if self.max_deliver.is_some_and(|max| delivered >= max) {
                        let reason = format!("{} failed {delivered} times: {error:#}", H::WORK);
                        dead_letter(&self.jetstream, self.service, message, &reason).await;
                    } else {
                        redeliver(message).await;
                    }
                }
            }
        }
        // The notices' spans end here, once their messages are settled.
        drop(notices);
    }
}

/// Give a message back to JetStream, to be delivered again shortly.
async fn redeliver(message: &jetstream::Message) {
    if let Err(error) = message.ack_with(AckKind::Nak(Some(REDELIVERY_DELAY))).await {
        tracing::debug!(%error, "nak failed; the message is redelivered after its ack wait");
    }
}

//! Request/reply over NATS as a table: each subject a service answers is registered once, with
//! the protobuf request it takes, the handler that answers it, and the reply given to a payload
//! that is not that request.
//!
//! The table subscribes to exactly the subjects it holds, in the service's queue group, so a
//! request always reaches the handler registered for its subject; a subject the table does not
//! hold is answered with an error (the NATS service-error headers), never by guessing which
//! request it might be.

use futures::StreamExt as _;
use futures::future::BoxFuture;
use prost::Message;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::health::Counters;

/// Why a payload is not the request its subject takes, as handed to a table's `invalid` reply.
pub use prost::DecodeError;

/// The header NATS services use for the error of a request they could not answer.
pub const ERROR_HEADER: &str = "Nats-Service-Error";
/// The header NATS services use for the code of that error.
pub const ERROR_CODE_HEADER: &str = "Nats-Service-Error-Code";

/// A request on a subject the table has no handler for.
#[derive(Debug, thiserror::Error)]
#[error("no handler for subject {0}")]
pub struct UnknownSubject(pub String);

/// One registered subject: decodes the payload, answers it, encodes the reply.
type Route<S> = Box<dyn Fn(S, bytes::Bytes) -> BoxFuture<'static, Vec<u8>> + Send + Sync>;

/// How requests are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turns {
    /// Each request is answered in a task of its own, as soon as it arrives.
    Concurrent,
    /// Requests are answered one at a time, in the order they arrive.
    OneAtATime,
}

/// The subjects a service answers, each with its handler. `S` is the state every handler is
/// given (cheap to clone: an `Arc`, a pool).
pub struct Requests<S> {
    state: S,
    routes: BTreeMap<&'static str, Route<S>>,
    span: fn(&async_nats::Message) -> tracing::Span,
    counters: Option<Arc<Counters>>,
}

impl<S: Clone + Send + Sync + 'static> Requests<S> {
    /// An empty table. `span` makes the span each request is answered in (it continues the
    /// trace the request carries); it is a function because a span's name must be a constant
    /// of the service.
    pub fn new(state: S, span: fn(&async_nats::Message) -> tracing::Span) -> Requests<S> {
        Requests {
            state,
            routes: BTreeMap::new(),
            span,
            counters: None,
        }
    }

    /// Count every request answered in `counters`, for the health probe.
    pub fn counting(mut self, counters: Arc<Counters>) -> Requests<S> {
        self.counters = Some(counters);
        self
    }

    /// Answer `subject` with `handler`; a payload that does not decode as `Req` is answered
    /// with `invalid(error)`.
    ///
    /// # Panics
    ///
    /// When `subject` is registered twice: a table is built once at start, and a second
    /// handler for one subject is a mistake in that code.
    pub fn on<Req, Rep, H, F>(
        mut self,
        subject: &'static str,
        invalid: fn(DecodeError) -> Rep,
        handler: H,
    ) -> Requests<S>
    where
        Req: Message + Default + 'static,
        Rep: Message + 'static,
        H: Fn(S, Req) -> F + Send + Sync + 'static,
        F: Future<Output = Rep> + Send + 'static,
    {
        let route: Route<S> = Box::new(move |state, payload| match Req::decode(payload) {
            Ok(request) => {
                let answer = handler(state, request);
                Box::pin(async move { answer.await.encode_to_vec() })
            }
            Err(error) => {
                let reply = invalid(error).encode_to_vec();
                Box::pin(std::future::ready(reply))
            }
        });
        let previous = self.routes.insert(subject, route);
        assert!(previous.is_none(), "{subject} is registered twice");
        self
    }

    /// The encoded reply to `payload` on `subject`.
    pub fn answer(
        &self,
        subject: &str,
        payload: bytes::Bytes,
    ) -> Result<BoxFuture<'static, Vec<u8>>, UnknownSubject> {
        let route = self
            .routes
            .get(subject)
            .ok_or_else(|| UnknownSubject(subject.to_owned()))?;
        Ok(route(self.state.clone(), payload))
    }

    /// Subscribe to every subject of the table in `queue`: once this returns, requests are
    /// taken (they wait in the subscription until [`Listener::serve`] reads them).
    pub async fn listen(
        self,
        client: &async_nats::Client,
        queue: &str,
    ) -> anyhow::Result<Listener<S>> {
        let subscriptions = futures::future::try_join_all(
            self.routes
                .keys()
                .map(|subject| client.queue_subscribe(*subject, queue.to_owned())),
        )
        .await?;
        Ok(Listener {
            requests: Arc::new(self),
            client: client.clone(),
            messages: futures::stream::select_all(subscriptions),
        })
    }
}

/// A table subscribed to its subjects.
pub struct Listener<S> {
    requests: Arc<Requests<S>>,
    client: async_nats::Client,
    messages: futures::stream::SelectAll<async_nats::Subscriber>,
}

impl<S: Clone + Send + Sync + 'static> Listener<S> {
    /// The next request; `None` once the subscriptions ended. Cancel-safe, so a service can
    /// wait for it beside other work.
    pub async fn next(&mut self) -> Option<async_nats::Message> {
        self.messages.next().await
    }

    /// Answer requests until `shutdown` is cancelled; requests in progress are answered first.
    pub async fn serve(mut self, shutdown: &CancellationToken, turns: Turns) {
        let answering = TaskTracker::new();
        loop {
            let message = tokio::select! {
                _ = shutdown.cancelled() => break,
                message = self.next() => match message {
                    Some(message) => message,
                    None => break,
                },
            };
            let reply = self.respond(message);
            match turns {
                Turns::Concurrent => {
                    answering.spawn(reply);
                }
                Turns::OneAtATime => reply.await,
            }
        }
        answering.close();
        answering.wait().await;
    }

    /// Answer one request, in its span, and publish the reply; a message without a reply
    /// subject is not a request and is dropped.
    pub fn respond(
        &self,
        message: async_nats::Message,
    ) -> impl Future<Output = ()> + Send + use<S> {
        let (client, requests) = (self.client.clone(), self.requests.clone());
        let span = (requests.span)(&message);
        crate::nats::continue_trace(&span, message.headers.as_ref());
        async move {
            let Some(reply_to) = message.reply else {
                return;
            };
            let published = match requests.answer(&message.subject, message.payload) {
                Ok(answer) => client.publish(reply_to, answer.await.into()).await,
                Err(unknown) => {
                    tracing::warn!(error = %unknown, "request on an unknown subject");
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert(ERROR_HEADER, unknown.to_string().as_str());
                    headers.insert(ERROR_CODE_HEADER, "404");
                    client
                        .publish_with_headers(reply_to, headers, bytes::Bytes::new())
                        .await
                }
            };
            if let Err(error) = published {
                tracing::warn!(%error, "reply failed");
            }
            if let Some(counters) = &requests.counters {
                counters.handled();
            }
        }
        .instrument(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(_: &async_nats::Message) -> tracing::Span {
        tracing::Span::none()
    }

    /// A request and a reply of the wire contract with an error field: `SearchRequest` and
    /// `SearchReply` stand for any pair.
    fn table() -> Requests<u32> {
        Requests::new(7, span).on(
            "t.search",
            |error| proto::SearchReply {
                error: format!("request is not a search request: {error}"),
                ..Default::default()
            },
            |state: u32, request: proto::SearchRequest| async move {
                proto::SearchReply {
                    mode: format!("{state} {}", request.query),
                    ..Default::default()
                }
            },
        )
    }

    #[tokio::test]
    async fn a_registered_subject_is_decoded_answered_and_encoded() {
        let request = proto::SearchRequest {
            query: "parser".to_owned(),
            ..Default::default()
        };
        let reply = table()
            .answer("t.search", request.encode_to_vec().into())
            .unwrap()
            .await;
        let reply = proto::SearchReply::decode(reply.as_slice()).unwrap();
        assert_eq!(reply.mode, "7 parser");
        assert!(reply.error.is_empty());
    }

    #[tokio::test]
    async fn a_payload_that_is_not_the_request_gets_the_invalid_reply() {
        let reply = table()
            .answer("t.search", bytes::Bytes::from_static(&[0xff, 0xff, 0xff]))
            .unwrap()
            .await;
        let reply = proto::SearchReply::decode(reply.as_slice()).unwrap();
        assert!(
            reply.error.starts_with("request is not a search request"),
            "{reply:?}"
        );
    }

    #[test]
    fn an_unknown_subject_is_an_error() {
        let Err(error) = table().answer("t.context", bytes::Bytes::new()) else {
            panic!("an unknown subject was answered");
        };
        assert_eq!(error.to_string(), "no handler for subject t.context");
    }
}

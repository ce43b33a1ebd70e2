//! The JetStream streams of the write path, created idempotently by every service at start, so
//! services can start in any order and a publish never meets a missing stream.

use anyhow::Context as _;
use async_nats::jetstream::{self, stream};
use proto::subjects;
use std::time::Duration;

/// How long hook events stay in JetStream after capture, for replay and for late consumers.
const EVENTS_MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);

/// Window in which JetStream drops a second message with the same `Nats-Msg-Id`.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The configurations of every stream mneme uses.
pub fn configs() -> Vec<stream::Config> {
    let base = |name: &str, subject: &str, max_age: Duration| stream::Config {
        name: name.to_owned(),
        subjects: vec![subject.to_owned()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        max_age,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    };
    vec![
        base(
            subjects::EVENTS_STREAM,
            subjects::EVENTS_ALL,
            EVENTS_MAX_AGE,
        ),
        base(
            subjects::INGEST_STREAM,
            subjects::INGEST_ALL,
            EVENTS_MAX_AGE,
        ),
        base(
            subjects::COMPRESSOR_STREAM,
            subjects::COMPRESSOR_WRITTEN_ALL,
            EVENTS_MAX_AGE,
        ),
        base(
            subjects::PATTERN_STREAM,
            subjects::PATTERN_UPDATED,
            EVENTS_MAX_AGE,
        ),
        base(
            subjects::DLQ_STREAM,
            subjects::DLQ_ALL,
            Duration::from_secs(90 * 24 * 3600),
        ),
    ]
}

/// Create every stream that does not exist yet; existing streams are left as they are.
pub async fn ensure(js: &jetstream::Context) -> anyhow::Result<()> {
    for config in configs() {
        let name = config.name.clone();
        js.get_or_create_stream(config)
            .await
            .with_context(|| format!("creating stream {name}"))?;
    }
    Ok(())
}

//! Qdrant as the vector index: one collection per vector space, reached over gRPC.
//!
//! Points use the store's item ids as numeric Qdrant ids and carry the filter fields as payload,
//! with payload indexes on them so filtered searches stay inside the HNSW graph walk.

use super::{Point, Space, VectorFilter, VectorIndex};
use anyhow::{Context as _, bail};
use futures::future::BoxFuture;
use qdrant_client::QdrantError;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::{
    Condition, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder, DeleteCollectionBuilder,
    DeletePointsBuilder, Distance, FieldType, Filter, PointId, PointStruct, PointsIdsList, Query,
    QueryPointsBuilder, Range, RepeatedStrings, UpsertPointsBuilder, VectorParamsBuilder,
};
use std::time::Duration;

/// The gRPC status codes Qdrant answers with when a collection or index already exists, or
/// when a collection is missing. tonic is not a direct dependency, so the codes are compared
/// as the integers the gRPC specification fixes.
const GRPC_NOT_FOUND: i32 = 5;
const GRPC_ALREADY_EXISTS: i32 = 6;

/// The payload fields searches filter on, with the index type each one gets.
const PAYLOAD_INDEXES: [(&str, FieldType); 4] = [
    ("project", FieldType::Keyword),
    ("kind", FieldType::Keyword),
    ("session_id", FieldType::Keyword),
    ("occurred_at", FieldType::Integer),
];

/// A Qdrant server.
#[derive(Clone)]
pub struct Qdrant {
    client: qdrant_client::Qdrant,
}

impl std::fmt::Debug for Qdrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's configuration holds the API key, so it is kept out of debug output.
        f.debug_struct("Qdrant").finish_non_exhaustive()
    }
}

impl Qdrant {
    /// A client for the Qdrant gRPC endpoint at `url` (for example `http://127.0.0.1:6334`).
    ///
    /// Nothing is sent until the first request: connections are opened lazily, so a server that
    /// is down shows up as an error from the first operation rather than from here.
    pub fn connect(
        url: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> anyhow::Result<Qdrant> {
        let client = qdrant_client::Qdrant::from_url(url)
            .api_key(api_key)
            .timeout(timeout)
            .connect_timeout(timeout)
            // The version check blocks on a request to the server and println!s to stdout
            // when it fails, which would corrupt the stdio protocols the hook and MCP speak.
            .skip_compatibility_check()
            .build()
            .with_context(|| format!("configuring the qdrant client for {url}"))?;
        Ok(Qdrant { client })
    }
}

/// The gRPC status code of a server error, if the error came from the server.
fn status_code(err: &QdrantError) -> Option<i32> {
    match err {
        QdrantError::ResponseError { status }
        | QdrantError::ResourceExhaustedError { status, .. } => Some(i32::from(status.code())),
        _ => None,
    }
}

/// Whether the server refused to create something because it is already there. Older servers
/// report this as invalid input with an "already exists" message instead of the gRPC code.
fn already_exists(err: &QdrantError) -> bool {
    match err {
        QdrantError::ResponseError { status } => {
            i32::from(status.code()) == GRPC_ALREADY_EXISTS
                || status
                    .message()
                    .to_ascii_lowercase()
                    .contains("already exists")
        }
        _ => false,
    }
}

/// An exact match on a keyword field. `MatchValue::from(String)` is avoided on purpose: it turns
/// any value containing whitespace into a full-text match, which needs a text index and does
/// not compare the whole value.
fn keyword(field: &str, value: &str) -> Condition {
    Condition::matches(field, MatchValue::Keyword(value.to_owned()))
}

/// A match on any of several keyword values.
fn any_keyword(field: &str, values: &[String]) -> Condition {
    Condition::matches(
        field,
        MatchValue::Keywords(RepeatedStrings {
            strings: values.to_vec(),
        }),
    )
}

/// The Qdrant filter for a [`VectorFilter`], or `None` when it filters nothing.
fn to_filter(filter: &VectorFilter) -> Option<Filter> {
    let mut must = Vec::new();
    let mut must_not = Vec::new();
    if let Some(project) = &filter.project {
        must.push(keyword("project", project));
    }
    if !filter.kinds.is_empty() {
        must.push(any_keyword("kind", &filter.kinds));
    }
    if !filter.sessions.is_empty() {
        must.push(any_keyword("session_id", &filter.sessions));
    }
    // One "any of" condition under must_not excludes every listed session.
    if !filter.exclude_sessions.is_empty() {
        must_not.push(any_keyword("session_id", &filter.exclude_sessions));
    }
    if filter.since_ms.is_some() || filter.until_ms.is_some() {
        // Qdrant ranges are f64; millisecond timestamps are far below 2^53, so the conversion
        // is exact.
        must.push(Condition::range(
            "occurred_at",
            Range {
                gte: filter.since_ms.map(|ms| ms as f64),
                lt: filter.until_ms.map(|ms| ms as f64),
                ..Range::default()
            },
        ));
    }
    if must.is_empty() && must_not.is_empty() {
        return None;
    }
    Some(Filter {
        must,
        must_not,
        ..Filter::default()
    })
}

/// Item ids are SQLite rowids, so they are never negative and map one to one onto Qdrant's
/// unsigned numeric ids.
fn point_id(id: i64) -> PointId {
    PointId::from(id as u64)
}

fn to_point(point: &Point) -> PointStruct {
    let mut payload = qdrant_client::Payload::new();
    payload.insert("project", point.project.as_str());
    payload.insert("kind", point.kind.as_str());
    payload.insert("session_id", point.session_id.as_str());
    payload.insert("occurred_at", point.occurred_at);
    PointStruct::new(point_id(point.id), point.vector.clone(), payload)
}

impl VectorIndex for Qdrant {
    fn name(&self) -> &'static str {
        "qdrant"
    }

    fn ensure<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let exists = self
                .client
                .collection_exists(&space.table)
                .await
                .with_context(|| format!("checking for qdrant collection {}", space.table))?;
            if !exists {
                let dim = u64::try_from(space.dim).context("vector dimension out of range")?;
                // Vectors are unit length, so cosine and dot product agree; cosine keeps the
                // scores right even for a vector that was not normalised.
                let created = self
                    .client
                    .create_collection(
                        CreateCollectionBuilder::new(&space.table)
                            .vectors_config(VectorParamsBuilder::new(dim, Distance::Cosine)),
                    )
                    .await;
                match created {
                    Ok(_) => {}
                    // Another process created it between the check and the create.
                    Err(err) if already_exists(&err) => {}
                    Err(err) => {
                        return Err(err).with_context(|| {
                            format!("creating qdrant collection {}", space.table)
                        });
                    }
                }
            }
            // Creating an index that already exists with the same type is a no-op on the
            // server, so this also fills in indexes missing from a collection made elsewhere.
            for (field, field_type) in PAYLOAD_INDEXES {
                let created = self
                    .client
                    .create_field_index(
                        CreateFieldIndexCollectionBuilder::new(&space.table, field, field_type)
                            .wait(true),
                    )
                    .await;
                match created {
                    Ok(_) => {}
                    Err(err) if already_exists(&err) => {}
                    Err(err) => {
                        return Err(err).with_context(|| {
                            format!(
                                "creating the {field} index on qdrant collection {}",
                                space.table
                            )
                        });
                    }
                }
            }
            Ok(())
        })
    }

    fn upsert<'a>(
        &'a self,
        space: &'a Space,
        points: &'a [Point],
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            // The server rejects an upsert without points.
            if points.is_empty() {
                return Ok(());
            }
            let points: Vec<PointStruct> = points.iter().map(to_point).collect();
            // Waiting for the write makes the points visible to the next search, as they are
            // with sqlite-vec.
            self.client
                .upsert_points(UpsertPointsBuilder::new(&space.table, points).wait(true))
                .await
                .with_context(|| format!("upserting into qdrant collection {}", space.table))?;
            Ok(())
        })
    }

    fn knn<'a>(
        &'a self,
        space: &'a Space,
        query: &'a [f32],
        k: usize,
        filter: &'a VectorFilter,
    ) -> BoxFuture<'a, anyhow::Result<Vec<(i64, f32)>>> {
        Box::pin(async move {
            // The server rejects a zero limit, and the answer is known anyway.
            if k == 0 {
                return Ok(Vec::new());
            }
            let mut request = QueryPointsBuilder::new(&space.table)
                .query(Query::new_nearest(query.to_vec()))
                .limit(k as u64)
                .with_payload(false)
                .with_vectors(false);
            if let Some(filter) = to_filter(filter) {
                request = request.filter(filter);
            }
            let response = self
                .client
                .query(request)
                .await
                .with_context(|| format!("searching qdrant collection {}", space.table))?;
            // Qdrant returns hits best first, and for cosine the score is the similarity itself.
            response
                .result
                .into_iter()
                .map(|hit| match hit.id.and_then(|id| id.point_id_options) {
                    Some(PointIdOptions::Num(id)) => Ok((id as i64, hit.score)),
                    other => bail!("qdrant returned a point without a numeric id: {other:?}"),
                })
                .collect()
        })
    }

    fn delete<'a>(&'a self, space: &'a Space, ids: &'a [i64]) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            if ids.is_empty() {
                return Ok(());
            }
            let ids = PointsIdsList {
                ids: ids.iter().copied().map(point_id).collect(),
            };
            self.client
                .delete_points(
                    DeletePointsBuilder::new(&space.table)
                        .points(ids)
                        .wait(true),
                )
                .await
                .with_context(|| format!("deleting from qdrant collection {}", space.table))?;
            Ok(())
        })
    }

    fn drop_space<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            // Deleting a missing collection answers `false` rather than an error on current
            // servers; a not-found error is accepted too, so dropping stays idempotent.
            match self
                .client
                .delete_collection(DeleteCollectionBuilder::new(&space.table))
                .await
            {
                Ok(_) => Ok(()),
                Err(err) if status_code(&err) == Some(GRPC_NOT_FOUND) => Ok(()),
                Err(err) => {
                    Err(err).with_context(|| format!("deleting qdrant collection {}", space.table))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_filter_filters_nothing() {
        assert!(to_filter(&VectorFilter::default()).is_none());
        let filter = to_filter(&VectorFilter {
            project: Some("my project".into()),
            exclude_sessions: vec!["s1".into(), "s2".into()],
            since_ms: Some(5),
            ..VectorFilter::default()
        })
        .unwrap();
        assert_eq!(filter.must.len(), 2);
        assert_eq!(filter.must_not.len(), 1);
    }

    #[test]
    fn a_project_with_spaces_is_matched_as_a_keyword() {
        let condition = keyword("project", "my project");
        let Some(qdrant_client::qdrant::condition::ConditionOneOf::Field(field)) =
            condition.condition_one_of
        else {
            panic!("not a field condition");
        };
        assert_eq!(
            field.r#match.unwrap().match_value,
            Some(MatchValue::Keyword("my project".into()))
        );
    }

    #[tokio::test]
    async fn qdrant_backend_round_trips() {
        let Ok(url) = std::env::var("MNEME_QDRANT_URL") else {
            eprintln!("qdrant tests not run: MNEME_QDRANT_URL is not set");
            return;
        };
        let index = Qdrant::connect(&url, None, Duration::from_secs(10)).unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let space = Space {
            model: "test".into(),
            dim: 3,
            table: format!("mneme_test_{}_{nanos}", std::process::id()),
        };
        crate::vector::tests::round_trip(&index, &space).await;
        index.drop_space(&space).await.unwrap();
        // Dropping a space that is already gone is not an error.
        index.drop_space(&space).await.unwrap();
    }
}

//! Qdrant as the vector index: one collection per vector space, reached over gRPC.
//!
//! Points use the store's item ids as numeric Qdrant ids and carry the filter fields as payload,
//! with payload indexes on them so filtered searches stay inside the HNSW graph walk.
//!
//! Collections are named after their vector space, behind an optional prefix, so several stores
//! can share one server or cluster; on a cluster, new collections are laid out by [`Layout`].

use super::{Point, Space, VectorFilter, VectorIndex};
use anyhow::{Context as _, bail};
use futures::future::BoxFuture;
use qdrant_client::QdrantError;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::{
    CollectionStatus, Condition, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeleteCollectionBuilder, DeletePointsBuilder, Distance, FieldType, Filter,
    HnswConfigDiffBuilder, OptimizersConfigDiffBuilder, PointId, PointStruct, PointsIdsList,
    QuantizationSearchParamsBuilder, QuantizationType, Query, QueryPointsBuilder, Range,
    RepeatedStrings, ScalarQuantizationBuilder, SearchParamsBuilder, UpdateCollectionBuilder,
    UpsertPointsBuilder, VectorParamsBuilder,
};
use std::time::Duration;

/// The gRPC status codes Qdrant answers with when a collection or index already exists, or
/// when a collection is missing. tonic is not a direct dependency, so the codes are compared
/// as the integers the gRPC specification fixes.
const GRPC_NOT_FOUND: i32 = 5;
const GRPC_ALREADY_EXISTS: i32 = 6;

/// Qdrant's own indexing threshold when a collection does not set one: segments holding less
/// than this many kilobytes of vectors are scanned rather than given a search graph.
const DEFAULT_INDEXING_THRESHOLD_KB: u64 = 10_000;

/// The payload fields searches filter on, with the index type each one gets.
const PAYLOAD_INDEXES: [(&str, FieldType); 4] = [
    ("project", FieldType::Keyword),
    ("kind", FieldType::Keyword),
    ("session_id", FieldType::Keyword),
    ("occurred_at", FieldType::Integer),
];

/// How a new collection is spread over a Qdrant cluster. Each field left `None` takes the
/// server's default, which is what a single server wants: one shard (one per node on a cluster),
/// one copy of it, a write acknowledged by that copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// Shards of the collection (Qdrant's `shard_number`).
    pub shards: Option<u32>,
    /// Copies of each shard on different nodes (Qdrant's `replication_factor`).
    pub replicas: Option<u32>,
    /// Copies that must apply a write before it is acknowledged (Qdrant's
    /// `write_consistency_factor`).
    pub write_consistency: Option<u32>,
    /// Keep the full vectors on disk rather than in memory. With `quantize`, searches scan the
    /// eight-bit copy in memory and read only the best from disk: a quarter of the memory, for
    /// collections of many millions of items (384 dimensions: about 400 bytes an item in
    /// memory, not 1.5 KB).
    pub on_disk: bool,
    /// Keep an eight-bit copy of the vectors in memory, which searches scan before re-scoring
    /// the hits it offers (`Qdrant::with_oversampling` times those asked for) with the full
    /// vectors, so the order returned is the full vectors' order: a quarter of the bytes a
    /// search reads. (At 200,000 vectors it measured as fast as full vectors alone;
    /// docs/search.md.)
    pub quantize: bool,
    /// Candidates Qdrant weighs for each point's links while it builds a search graph (its
    /// `ef_construct`); unset takes the server's 100. Building the graphs is what limits a
    /// collection of many millions on few cores (about 1,100 vectors a second on two), and a
    /// smaller value builds faster for some recall (docs/search.md).
    pub ef_construct: Option<u64>,
    /// Largest segment Qdrant's optimizer makes, in kilobytes of vectors (its
    /// `max_segment_size`; a 384-dimension vector counts 1.5); unset takes the server's
    /// default, 256 MB a core. A search walks every segment's graph, so a collection of many
    /// millions answers faster in a few large segments than in dozens of small ones, for a
    /// longer graph build per segment (docs/search.md).
    pub max_segment_kb: Option<u64>,
}

impl Layout {
    /// Refuse a layout Qdrant would refuse only when the first collection is created, so the
    /// mistake shows at start with the settings' names rather than as a server error.
    pub fn check(&self) -> anyhow::Result<()> {
        if let (Some(write), Some(replicas)) = (self.write_consistency, self.replicas) {
            anyhow::ensure!(
                write <= replicas,
                "a write cannot wait for {write} copies of a shard kept {replicas} times (MNEME_QDRANT_WRITE_CONSISTENCY is more than MNEME_QDRANT_REPLICAS)"
            );
        }
        for (name, value) in [
            ("MNEME_QDRANT_SHARDS", self.shards),
            ("MNEME_QDRANT_REPLICAS", self.replicas),
            ("MNEME_QDRANT_WRITE_CONSISTENCY", self.write_consistency),
        ] {
            anyhow::ensure!(value != Some(0), "{name} must be at least 1");
        }
        if let Some(ef) = self.ef_construct {
            anyhow::ensure!(
                ef >= 4,
                "MNEME_QDRANT_EF_CONSTRUCT must be at least 4 (qdrant's own minimum)"
            );
        }
        anyhow::ensure!(
            self.max_segment_kb != Some(0),
            "MNEME_QDRANT_MAX_SEGMENT_KB must be at least 1"
        );
        Ok(())
    }
}

/// Hits the eight-bit copy offers for re-scoring, as a multiple of the hits asked for. One
/// re-scores exactly the hits returned: at a million items, twice as many made Qdrant walk
/// its graphs with a beam of 300 for the 150 points a hybrid search asks for, and hybrid
/// search through the service took p95 69–73 ms against 59–60 ms with one (docs/search.md).
pub const DEFAULT_OVERSAMPLING: f64 = 1.0;

/// A Qdrant server.
#[derive(Clone)]
pub struct Qdrant {
    client: qdrant_client::Qdrant,
    /// Put before every collection name.
    prefix: String,
    layout: Layout,
    /// Candidates a search keeps while it walks each segment's graph (Qdrant's `hnsw_ef`);
    /// `None` leaves it to the server (the collection's `ef_construct`, or the hits asked for
    /// when more).
    search_ef: Option<u64>,
    /// With the eight-bit copy, how many times the hits asked for its ranking offers for
    /// re-scoring with the full vectors (Qdrant's `oversampling`).
    oversampling: f64,
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
        Ok(Qdrant {
            client,
            prefix: String::new(),
            layout: Layout::default(),
            search_ef: None,
            oversampling: DEFAULT_OVERSAMPLING,
        })
    }

    /// Name this index's collections `<prefix><space table>`. Point ids are the store's item
    /// ids, so two stores writing one collection would overwrite each other's points: stores
    /// that share a server need different prefixes.
    pub fn with_prefix(mut self, prefix: &str) -> anyhow::Result<Qdrant> {
        // Qdrant refuses some characters in collection names, and the name also ends up in
        // its storage paths; letters, digits, `_` and `-` are safe everywhere.
        anyhow::ensure!(
            prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "the qdrant collection prefix {prefix:?} may hold only letters, digits, `_` and `-`"
        );
        self.prefix = prefix.to_owned();
        Ok(self)
    }

    /// Keep `ef` candidates while each search walks a segment's graph (`None`: the server's
    /// choice). More finds more of the true nearest in a collection of a few large segments
    /// built with a small `ef_construct`, for a slower search (docs/search.md).
    pub fn with_search_ef(mut self, ef: Option<u64>) -> anyhow::Result<Qdrant> {
        anyhow::ensure!(ef != Some(0), "MNEME_QDRANT_HNSW_EF must be at least 1");
        self.search_ef = ef;
        Ok(self)
    }

    /// Offer `times` the hits asked for from the eight-bit copy for re-scoring with the full
    /// vectors. A search walks each graph with a beam of at least that many, so more is
    /// slower; below 1 the copy's own order would decide which hits are returned.
    pub fn with_oversampling(mut self, times: f64) -> anyhow::Result<Qdrant> {
        anyhow::ensure!(
            times.is_finite() && times >= 1.0,
            "MNEME_QDRANT_OVERSAMPLING must be at least 1"
        );
        self.oversampling = times;
        Ok(self)
    }

    /// Lay out the collections this index creates with `layout`; collections that exist keep
    /// theirs.
    pub fn with_layout(mut self, layout: Layout) -> anyhow::Result<Qdrant> {
        layout.check()?;
        self.layout = layout;
        Ok(self)
    }

    /// The collection that holds `space`.
    pub fn collection(&self, space: &Space) -> String {
        format!("{}{}", self.prefix, space.table)
    }

    /// The points in `space`'s collection, or `None` when it has none (no collection).
    pub async fn points(&self, space: &Space) -> anyhow::Result<Option<u64>> {
        let collection = self.collection(space);
        match self.client.collection_info(&collection).await {
            Ok(info) => Ok(info.result.and_then(|i| i.points_count)),
            Err(err) if status_code(&err) == Some(GRPC_NOT_FOUND) => Ok(None),
            Err(err) => Err(err).with_context(|| format!("reading qdrant collection {collection}")),
        }
    }

    /// Stop building search graphs in `space`'s collection until [`Qdrant::resume_indexing`],
    /// answering the indexing threshold (kilobytes of vectors) it had. A bulk load of millions
    /// of vectors is far cheaper with each graph built once, after the vectors are in, as
    /// Qdrant advises, than with every small segment given a graph as it fills and a new one
    /// at every merge. Searches meanwhile scan, so this is for loads nobody searches during.
    pub async fn pause_indexing(&self, space: &Space) -> anyhow::Result<u64> {
        let collection = self.collection(space);
        let info = self
            .client
            .collection_info(&collection)
            .await
            .with_context(|| format!("reading qdrant collection {collection}"))?;
        let threshold = info
            .result
            .and_then(|i| i.config)
            .and_then(|c| c.optimizer_config)
            .and_then(|o| o.indexing_threshold)
            .filter(|&kb| kb > 0)
            .unwrap_or(DEFAULT_INDEXING_THRESHOLD_KB);
        // Qdrant reads a threshold of zero as "never index".
        self.set_indexing_threshold(&collection, 0).await?;
        Ok(threshold)
    }

    /// Build search graphs again in `space`'s collection from `threshold` kilobytes of vectors
    /// a segment, as [`Qdrant::pause_indexing`] answered.
    pub async fn resume_indexing(&self, space: &Space, threshold: u64) -> anyhow::Result<()> {
        self.set_indexing_threshold(&self.collection(space), threshold.max(1))
            .await
    }

    async fn set_indexing_threshold(&self, collection: &str, kb: u64) -> anyhow::Result<()> {
        self.client
            .update_collection(
                UpdateCollectionBuilder::new(collection).optimizers_config(
                    OptimizersConfigDiffBuilder::default().indexing_threshold(kb),
                ),
            )
            .await
            .with_context(|| format!("setting the indexing threshold of {collection}"))?;
        Ok(())
    }

    /// The `k` points nearest `query` that pass `filter`, found by comparing it with every one
    /// of them (full vectors, no graph), as a search graph's answers are judged against.
    pub async fn knn_exact(
        &self,
        space: &Space,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> anyhow::Result<Vec<(i64, f32)>> {
        self.nearest(space, query, k, filter, true).await
    }

    async fn nearest(
        &self,
        space: &Space,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
        exact: bool,
    ) -> anyhow::Result<Vec<(i64, f32)>> {
        // The server rejects a zero limit, and the answer is known anyway.
        if k == 0 {
            return Ok(Vec::new());
        }
        let collection = self.collection(space);
        let mut request = QueryPointsBuilder::new(&collection)
            .query(Query::new_nearest(query.to_vec()))
            .limit(k as u64)
            .with_payload(false)
            .with_vectors(false);
        if let Some(filter) = to_filter(filter) {
            request = request.filter(filter);
        }
        if exact {
            request = request.params(
                SearchParamsBuilder::default()
                    .exact(true)
                    .quantization(QuantizationSearchParamsBuilder::default().ignore(true)),
            );
        } else {
            let mut params = SearchParamsBuilder::default();
            if let Some(ef) = self.search_ef {
                params = params.hnsw_ef(ef);
            }
            if self.layout.quantize {
                // The eight-bit copy ranks; the hits it offers are re-scored with the full
                // vectors, so the order returned is the full vectors' order.
                params = params.quantization(
                    QuantizationSearchParamsBuilder::default()
                        .rescore(true)
                        .oversampling(self.oversampling),
                );
            }
            request = request.params(params);
        }
        let response = self
            .client
            .query(request)
            .await
            .with_context(|| format!("searching qdrant collection {collection}"))?;
        scored(response)
    }

    /// The request creating the collection of `space`, with the layout.
    fn create_request(&self, space: &Space) -> anyhow::Result<CreateCollectionBuilder> {
        let dim = u64::try_from(space.dim).context("vector dimension out of range")?;
        // Vectors are unit length, so cosine and dot product agree; cosine keeps the scores
        // right even for a vector that was not normalised.
        let mut vectors = VectorParamsBuilder::new(dim, Distance::Cosine);
        if self.layout.on_disk {
            vectors = vectors.on_disk(true);
        }
        if self.layout.quantize {
            vectors = vectors.quantization_config(
                ScalarQuantizationBuilder::default()
                    .r#type(QuantizationType::Int8.into())
                    .always_ram(true),
            );
        }
        let mut request =
            CreateCollectionBuilder::new(self.collection(space)).vectors_config(vectors);
        if let Some(ef) = self.layout.ef_construct {
            request = request.hnsw_config(HnswConfigDiffBuilder::default().ef_construct(ef));
        }
        if let Some(kb) = self.layout.max_segment_kb {
            request = request
                .optimizers_config(OptimizersConfigDiffBuilder::default().max_segment_size(kb));
        }
        if let Some(shards) = self.layout.shards {
            request = request.shard_number(shards);
        }
        if let Some(replicas) = self.layout.replicas {
            request = request.replication_factor(replicas);
        }
        if let Some(write) = self.layout.write_consistency {
            request = request.write_consistency_factor(write);
        }
        Ok(request)
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

/// A query's hits as (item id, cosine): Qdrant returns them best first, and for cosine the
/// score is the similarity itself.
fn scored(response: qdrant_client::qdrant::QueryResponse) -> anyhow::Result<Vec<(i64, f32)>> {
    response
        .result
        .into_iter()
        .map(|hit| match hit.id.and_then(|id| id.point_id_options) {
            Some(PointIdOptions::Num(id)) => Ok((id as i64, hit.score)),
            other => bail!("qdrant returned a point without a numeric id: {other:?}"),
        })
        .collect()
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
            let collection = self.collection(space);
            let exists = self
                .client
                .collection_exists(&collection)
                .await
                .with_context(|| format!("checking for qdrant collection {collection}"))?;
            if !exists {
                let created = self
                    .client
                    .create_collection(self.create_request(space)?)
                    .await;
                match created {
                    Ok(_) => {}
                    // Another process created it between the check and the create.
                    Err(err) if already_exists(&err) => {}
                    Err(err) => {
                        return Err(err)
                            .with_context(|| format!("creating qdrant collection {collection}"));
                    }
                }
            }
            // Creating an index that already exists with the same type is a no-op on the
            // server, so this also fills in indexes missing from a collection made elsewhere.
            for (field, field_type) in PAYLOAD_INDEXES {
                let created = self
                    .client
                    .create_field_index(
                        CreateFieldIndexCollectionBuilder::new(&collection, field, field_type)
                            .wait(true),
                    )
                    .await;
                match created {
                    Ok(_) => {}
                    Err(err) if already_exists(&err) => {}
                    Err(err) => {
                        return Err(err).with_context(|| {
                            format!("creating the {field} index on qdrant collection {collection}")
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
            let collection = self.collection(space);
            self.client
                .upsert_points(UpsertPointsBuilder::new(&collection, points).wait(true))
                .await
                .with_context(|| format!("upserting into qdrant collection {collection}"))?;
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
        Box::pin(async move { self.nearest(space, query, k, filter, false).await })
    }

    fn cosines<'a>(
        &'a self,
        space: &'a Space,
        query: &'a [f32],
        ids: &'a [i64],
    ) -> BoxFuture<'a, anyhow::Result<Vec<(i64, f32)>>> {
        Box::pin(async move {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            // One request scores exactly these points with their full vectors on the server,
            // rather than the caller reading each one's cached vector from the store: at 200,000
            // items those reads took most of a search's time.
            let collection = self.collection(space);
            let request = QueryPointsBuilder::new(&collection)
                .query(Query::new_nearest(query.to_vec()))
                .filter(Filter::must([Condition::has_id(
                    ids.iter().copied().map(point_id),
                )]))
                .limit(ids.len() as u64)
                .with_payload(false)
                .with_vectors(false)
                .params(
                    SearchParamsBuilder::default()
                        .exact(true)
                        .quantization(QuantizationSearchParamsBuilder::default().ignore(true)),
                );
            let response = self
                .client
                .query(request)
                .await
                .with_context(|| format!("scoring points of qdrant collection {collection}"))?;
            scored(response)
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
            let collection = self.collection(space);
            self.client
                .delete_points(DeletePointsBuilder::new(&collection).points(ids).wait(true))
                .await
                .with_context(|| format!("deleting from qdrant collection {collection}"))?;
            Ok(())
        })
    }

    fn loaded<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // After a bulk write Qdrant builds its search graph in the background, and until
            // it has a search scans. A million vectors took more than ten minutes on two busy
            // cores, so the wait is long: give up after three hours, or at once if the server
            // cannot say.
            let collection = self.collection(space);
            let deadline = std::time::Instant::now() + Duration::from_secs(3 * 3_600);
            while std::time::Instant::now() < deadline {
                match self.client.collection_info(&collection).await {
                    Ok(info) if info.result.as_ref().is_some_and(graph_built) => return,
                    Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                    Err(_) => return,
                }
            }
        })
    }

    fn drop_space<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            // Deleting a missing collection answers `false` rather than an error on current
            // servers; a not-found error is accepted too, so dropping stays idempotent.
            let collection = self.collection(space);
            match self
                .client
                .delete_collection(DeleteCollectionBuilder::new(&collection))
                .await
            {
                Ok(_) => Ok(()),
                Err(err) if status_code(&err) == Some(GRPC_NOT_FOUND) => Ok(()),
                Err(err) => {
                    Err(err).with_context(|| format!("deleting qdrant collection {collection}"))
                }
            }
        })
    }
}

/// Whether a collection's vectors are in search graphs. Green alone does not say so: right
/// after a bulk write the server can be green before its optimizer picks the new segments up,
/// and a search meanwhile scans their vectors rather than walking a graph. So the indexed
/// vectors must also cover the points, less what may stay in segments too small to be worth a
/// graph (below the indexing threshold, 10 MB of vectors by default), which keeps small
/// collections from waiting for a graph they will never get.
fn graph_built(info: &qdrant_client::qdrant::CollectionInfo) -> bool {
    if info.status != CollectionStatus::Green as i32 {
        return false;
    }
    let points = info.points_count.unwrap_or(0);
    let indexed = info.indexed_vectors_count.unwrap_or(0);
    let config = info.config.as_ref();
    let dim = config
        .and_then(|c| c.params.as_ref())
        .and_then(|p| p.vectors_config.as_ref())
        .and_then(|v| match &v.config {
            Some(qdrant_client::qdrant::vectors_config::Config::Params(p)) => Some(p.size),
            _ => None,
        })
        .unwrap_or(384)
        .max(1);
    let threshold_kb = config
        .and_then(|c| c.optimizer_config.as_ref())
        .and_then(|o| o.indexing_threshold)
        .unwrap_or(DEFAULT_INDEXING_THRESHOLD_KB);
    let below_threshold = threshold_kb * 1024 / (dim * 4);
    indexed + below_threshold * info.segments_count.max(1) >= points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_counts_as_indexed_only_once_its_graphs_cover_its_points() {
        use qdrant_client::qdrant::CollectionInfo;
        let info = |status: CollectionStatus, points: u64, indexed: u64| CollectionInfo {
            status: status as i32,
            segments_count: 2,
            points_count: Some(points),
            indexed_vectors_count: Some(indexed),
            ..CollectionInfo::default()
        };
        // Green straight after a bulk write, before the optimizer has started: still scanning.
        assert!(!graph_built(&info(CollectionStatus::Green, 200_000, 0)));
        assert!(!graph_built(&info(
            CollectionStatus::Yellow,
            200_000,
            200_000
        )));
        assert!(graph_built(&info(
            CollectionStatus::Green,
            200_000,
            200_000
        )));
        // Segments under the indexing threshold may stay plain for good.
        assert!(graph_built(&info(
            CollectionStatus::Green,
            200_000,
            195_000
        )));
        assert!(graph_built(&info(CollectionStatus::Green, 500, 0)));
    }

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

    #[test]
    fn a_layout_qdrant_would_refuse_is_refused_at_start() {
        assert!(Layout::default().check().is_ok());
        let layout = Layout {
            replicas: Some(2),
            write_consistency: Some(3),
            ..Layout::default()
        };
        assert!(layout.check().is_err());
        let layout = Layout {
            shards: Some(0),
            ..Layout::default()
        };
        assert!(layout.check().is_err());
        let layout = Layout {
            ef_construct: Some(3),
            ..Layout::default()
        };
        assert!(layout.check().is_err());
        let layout = Layout {
            max_segment_kb: Some(0),
            ..Layout::default()
        };
        assert!(layout.check().is_err());
        let index = Qdrant::connect("http://127.0.0.1:1", None, Duration::from_secs(1)).unwrap();
        assert!(index.clone().with_search_ef(Some(0)).is_err());
        // Below one, the eight-bit copy's order alone would decide which hits come back.
        assert!(index.clone().with_oversampling(0.5).is_err());
        assert!(index.clone().with_oversampling(f64::NAN).is_err());
        assert!(index.clone().with_oversampling(1.0).is_ok());
        assert!(index.clone().with_prefix("team_a-1_").is_ok());
        assert!(index.with_prefix("team/a").is_err());
    }

    #[tokio::test]
    async fn qdrant_backend_round_trips() {
        let Ok(url) = std::env::var("MNEME_QDRANT_URL") else {
            eprintln!("qdrant tests not run: MNEME_QDRANT_URL is not set");
            return;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        // A prefix of its own, so runs sharing the server never meet.
        let prefix = format!("mneme_test_{}_{nanos}_", std::process::id());
        let index = Qdrant::connect(&url, None, Duration::from_secs(10))
            .unwrap()
            .with_prefix(&prefix)
            .unwrap()
            .with_layout(Layout {
                shards: Some(2),
                replicas: Some(1),
                write_consistency: Some(1),
                on_disk: false,
                quantize: false,
                ef_construct: Some(32),
                max_segment_kb: Some(100_000),
            })
            .unwrap()
            .with_search_ef(Some(64))
            .unwrap();
        let space = Space {
            model: "test".into(),
            dim: 3,
            table: "vec_round_trip".into(),
        };
        crate::vector::tests::round_trip(&index, &space, true).await;

        // The collection is named with the prefix and laid out as asked.
        index.ensure(&space).await.unwrap();
        let collection = index.collection(&space);
        assert_eq!(collection, format!("{prefix}vec_round_trip"));
        let config = index
            .client
            .collection_info(&collection)
            .await
            .unwrap()
            .result
            .and_then(|info| info.config)
            .unwrap();
        assert_eq!(config.hnsw_config.and_then(|h| h.ef_construct), Some(32));
        assert_eq!(
            config.optimizer_config.and_then(|o| o.max_segment_size),
            Some(100_000)
        );
        let params = config.params.unwrap();
        assert_eq!(params.shard_number, 2);
        assert_eq!(params.replication_factor, Some(1));
        assert_eq!(params.write_consistency_factor, Some(1));

        // Vectors on disk with an eight-bit copy in memory answer the same contract.
        let on_disk = Qdrant::connect(&url, None, Duration::from_secs(10))
            .unwrap()
            .with_prefix(&prefix)
            .unwrap()
            .with_layout(Layout {
                on_disk: true,
                quantize: true,
                ..Layout::default()
            })
            .unwrap();
        let disk_space = Space {
            table: "vec_on_disk".into(),
            ..space.clone()
        };
        crate::vector::tests::round_trip(&on_disk, &disk_space, true).await;
        on_disk.ensure(&disk_space).await.unwrap();
        let vectors = on_disk
            .client
            .collection_info(on_disk.collection(&disk_space))
            .await
            .unwrap()
            .result
            .and_then(|info| info.config)
            .and_then(|config| config.params)
            .and_then(|params| params.vectors_config);
        let vectors = format!("{vectors:?}");
        assert!(vectors.contains("on_disk: Some(true)"), "{vectors}");
        assert!(vectors.contains("Scalar(ScalarQuantization"), "{vectors}");
        on_disk.drop_space(&disk_space).await.unwrap();
        // A project with a space is one keyword, matched whole.
        index
            .upsert(
                &space,
                &[Point {
                    id: 7,
                    vector: vec![1.0, 0.0, 0.0],
                    project: "my project".into(),
                    kind: "prompt".into(),
                    session_id: "s7".into(),
                    occurred_at: 1,
                }],
            )
            .await
            .unwrap();
        let query = [1.0, 0.0, 0.0];
        let knn = |project: &str| VectorFilter {
            project: Some(project.to_owned()),
            ..VectorFilter::default()
        };
        let whole = index.knn(&space, &query, 5, &knn("my project")).await;
        assert_eq!(whole.unwrap().len(), 1);
        let part = index.knn(&space, &query, 5, &knn("project")).await;
        assert!(part.unwrap().is_empty());

        index.drop_space(&space).await.unwrap();
        assert!(!index.client.collection_exists(&collection).await.unwrap());
        // Dropping a space that is already gone is not an error.
        index.drop_space(&space).await.unwrap();
    }
}

//! Collections: named sets of memory items, made from a search or a list of ids, read back
//! whole (for export) and asked questions. Retrieval owns `collections` and
//! `collection_items` because it owns the items they name: when `forget` drops the items of a
//! deleted session, they leave their collections in the same transaction.

use crate::search::{self, Searcher};
use crate::{items, text};
use proto::{
    AskCollectionReply, AskCollectionRequest, Collection, CollectionReply, CollectionRequest,
    CollectionsReply, CreateCollectionRequest, ListCollectionsRequest, SearchHit,
};
use sqlx::SqlitePool;
use std::collections::HashMap;

/// The most items one collection holds, so reading or asking one stays one quick request.
pub const MAX_ITEMS: usize = 1_000;
/// The longest collection name.
pub const MAX_NAME_CHARS: usize = 200;
/// Hits an ask returns when the request does not say.
pub const DEFAULT_ASK_LIMIT: u32 = 5;
/// The most hits one ask returns.
pub const MAX_ASK_LIMIT: u32 = 50;

/// Why a collection request was refused, as the caller branches on it.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl Refused {
    /// The error text and code of a reply; a failure of the service itself is logged here and
    /// answered without its details.
    pub fn reply_parts(&self, what: &str) -> (String, String) {
        let code = match self {
            Refused::NotFound(_) => "not_found",
            Refused::Invalid(_) => "invalid",
            Refused::Conflict(_) => "conflict",
            Refused::Failed(error) => {
                tracing::warn!(error = %format!("{error:#}"), "{what} failed");
                return (format!("{what} failed"), String::new());
            }
        };
        (self.to_string(), code.to_owned())
    }
}

impl From<sqlx::Error> for Refused {
    fn from(error: sqlx::Error) -> Refused {
        Refused::Failed(error.into())
    }
}

#[derive(sqlx::FromRow)]
struct CollectionRow {
    id: i64,
    name: String,
    description: String,
    query: String,
    items: i64,
    created_at: i64,
    updated_at: i64,
}

impl From<CollectionRow> for Collection {
    fn from(row: CollectionRow) -> Collection {
        Collection {
            id: row.id,
            name: row.name,
            description: row.description,
            query: row.query,
            items: row.items as u32,
            created_at_ms: row.created_at,
            updated_at_ms: row.updated_at,
        }
    }
}

const SELECT: &str = "SELECT c.id, c.name, c.description, c.query, c.created_at, c.updated_at,
        (SELECT count(*) FROM collection_items i WHERE i.collection_id = c.id) AS items
     FROM collections c";

async fn find(pool: &SqlitePool, id: i64) -> Result<Collection, Refused> {
    let sql = format!("{SELECT} WHERE c.id = ?");
    sqlx::query_as::<_, CollectionRow>(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?
        .map(Collection::from)
        .ok_or_else(|| Refused::NotFound(format!("no collection {id}")))
}

/// The ids of a collection's items, in the order they were added.
async fn item_ids(pool: &SqlitePool, id: i64) -> Result<Vec<i64>, Refused> {
    let rows: Vec<(i64,)> = sqlx::query_as(
        "SELECT item_id FROM collection_items WHERE collection_id = ? ORDER BY position",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Create a collection from a search or a list of item ids.
pub async fn create(
    searcher: &Searcher,
    request: &CreateCollectionRequest,
) -> Result<Collection, Refused> {
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(Refused::Invalid(format!(
            "a collection name is 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    let (ids, query) = match (&request.search, request.item_ids.is_empty()) {
        (Some(search), true) => {
            if search.query.trim().is_empty() {
                return Err(Refused::Invalid("the search has no query".to_owned()));
            }
            let (hits, _) = searcher.search(search).await?;
            (
                hits.into_iter().map(|h| h.id).collect::<Vec<_>>(),
                search.query.clone(),
            )
        }
        (None, false) => (request.item_ids.clone(), request.query.trim().to_owned()),
        _ => {
            return Err(Refused::Invalid(
                "give either a search or a list of item ids".to_owned(),
            ));
        }
    };
    let mut unique = Vec::with_capacity(ids.len());
    for id in ids {
        if !unique.contains(&id) {
            unique.push(id);
        }
    }
    if unique.len() > MAX_ITEMS {
        return Err(Refused::Invalid(format!(
            "a collection holds at most {MAX_ITEMS} items"
        )));
    }
    let pool = &searcher.pool;
    let mut tx = store::begin_write(pool).await?;
    // Ids are checked inside the write transaction, so an item forgotten meanwhile cannot slip
    // in.
    let mut missing = Vec::new();
    for id in &unique {
        let found: Option<(i64,)> = sqlx::query_as("SELECT id FROM memory_items WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        if found.is_none() {
            missing.push(id.to_string());
        }
    }
    if !missing.is_empty() {
        return Err(Refused::Invalid(format!(
            "no memory items {}",
            missing.join(", ")
        )));
    }
    let now = common::time::now_ms();
    // An import keeps when the collection was first made.
    let created_at = match request.created_at_ms {
        at if at > 0 && at <= now => at,
        _ => now,
    };
    let created: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO collections (name, description, query, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING id",
    )
    .bind(name)
    .bind(request.description.trim())
    .bind(&query)
    .bind(created_at)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((id,)) = created else {
        return Err(Refused::Conflict(format!(
            "a collection named {name:?} exists"
        )));
    };
    for (position, item) in unique.iter().enumerate() {
        sqlx::query(
            "INSERT INTO collection_items (collection_id, item_id, position) VALUES (?, ?, ?)",
        )
        .bind(id)
        .bind(item)
        .bind(position as i64)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    find(pool, id).await
}

/// Collections, most recently created first, with the total.
pub async fn list(
    pool: &SqlitePool,
    request: &ListCollectionsRequest,
) -> anyhow::Result<CollectionsReply> {
    let limit = match request.limit {
        0 => 50,
        n => n.min(500),
    };
    let sql = format!("{SELECT} ORDER BY c.created_at DESC, c.id DESC LIMIT ? OFFSET ?");
    let rows = sqlx::query_as::<_, CollectionRow>(sqlx::AssertSqlSafe(sql))
        .bind(i64::from(limit))
        .bind(i64::from(request.offset))
        .fetch_all(pool)
        .await?;
    let (total,): (i64,) = sqlx::query_as("SELECT count(*) FROM collections")
        .fetch_one(pool)
        .await?;
    Ok(CollectionsReply {
        collections: rows.into_iter().map(Collection::from).collect(),
        total: total as u32,
        error: String::new(),
    })
}

/// One collection with its whole items, in order.
pub async fn get(
    pool: &SqlitePool,
    request: &CollectionRequest,
) -> Result<CollectionReply, Refused> {
    let collection = find(pool, request.id).await?;
    let ids = item_ids(pool, request.id).await?;
    let mut items = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(items::MAX_GET) {
        items.extend(items::get(pool, chunk).await?);
    }
    Ok(CollectionReply {
        collection: Some(collection),
        items,
        ..Default::default()
    })
}

/// Delete a collection; its items stay in memory.
pub async fn delete(pool: &SqlitePool, request: &CollectionRequest) -> Result<Collection, Refused> {
    let collection = find(pool, request.id).await?;
    let mut tx = store::begin_write(pool).await?;
    sqlx::query("DELETE FROM collection_items WHERE collection_id = ?")
        .bind(request.id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM collections WHERE id = ?")
        .bind(request.id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(collection)
}

#[derive(sqlx::FromRow)]
struct AskRow {
    id: i64,
    session_id: String,
    project: String,
    kind: String,
    title: String,
    text: String,
    text_hash: String,
    occurred_at: i64,
}

/// How well one item of a collection answers a question. An item whose vector is not in the
/// cache yet (just added, embedding still behind) is judged by its words alone: counting its
/// unknown meaning as unrelated would put an older item that shares fewer of the question's
/// words ahead of it until the backfill catches up.
fn item_relevance(lexical: f64, cosine: Option<f32>, semantic_available: bool) -> f64 {
    search::relevance(lexical, cosine, semantic_available && cosine.is_some())
}

/// The items of a collection most relevant to a question. Every item of the collection is
/// scored (a collection is small), with the same relevance search reports: the share of the
/// question's words an item holds, and with a model its cosine similarity to the question.
pub async fn ask(
    searcher: &Searcher,
    request: &AskCollectionRequest,
) -> Result<AskCollectionReply, Refused> {
    let question = request.question.trim();
    if question.is_empty() {
        return Err(Refused::Invalid("the question is empty".to_owned()));
    }
    let limit = match request.limit {
        0 => DEFAULT_ASK_LIMIT,
        n => n.min(MAX_ASK_LIMIT),
    } as usize;
    let pool = &searcher.pool;
    let collection = find(pool, request.id).await?;
    let rows: Vec<AskRow> = sqlx::query_as(
        "SELECT m.id, m.session_id, m.project, m.kind, m.title, m.text, m.text_hash,
                m.occurred_at
         FROM collection_items i JOIN memory_items m ON m.id = i.item_id
         WHERE i.collection_id = ? ORDER BY i.position",
    )
    .bind(request.id)
    .fetch_all(pool)
    .await?;
    let terms = text::query_terms(question);
    let finder = text::Terms::new(&terms);
    let mut cosines: HashMap<i64, f32> = HashMap::new();
    let vectors = searcher.vectors.as_ref();
    if let Some(vectors) = vectors
        && !rows.is_empty()
    {
        let query = vectors.embed_query(question).await?;
        let items: Vec<(i64, &str, &str)> = rows
            .iter()
            .map(|r| (r.id, r.text_hash.as_str(), r.kind.as_str()))
            .collect();
        cosines = vectors.cached_cosines(pool, &query, &items).await?;
    }
    let mut hits: Vec<SearchHit> = rows
        .into_iter()
        .filter_map(|row| {
            let (_, lexical) = finder.find(&format!("{} {}", row.title, row.text));
            let cosine = cosines.get(&row.id).copied();
            let relevance = item_relevance(lexical, cosine, vectors.is_some());
            if relevance <= 0.0 {
                return None;
            }
            let mut found_by = Vec::new();
            if lexical > 0.0 {
                found_by.push("fts".to_owned());
            }
            if cosine.is_some() {
                found_by.push("vector".to_owned());
            }
            Some(SearchHit {
                id: row.id,
                session_id: row.session_id,
                project: row.project,
                kind: row.kind,
                title: text::snippet(&row.title, &[]).chars().take(120).collect(),
                snippet: text::snippet(&row.text, &terms),
                occurred_at_ms: row.occurred_at,
                score: relevance,
                relevance,
                found_by,
                ..SearchHit::default()
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then(a.occurred_at_ms.cmp(&b.occurred_at_ms))
            .then(a.id.cmp(&b.id))
    });
    hits.truncate(limit);
    Ok(AskCollectionReply {
        collection: Some(collection),
        hits,
        mode: if vectors.is_some() { "hybrid" } else { "fts" }.to_owned(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::item_relevance;

    #[test]
    fn an_item_not_yet_embedded_is_judged_by_its_words() {
        // Every word of the question, no vector yet: its words decide, in full.
        let waiting = item_relevance(1.0, None, true);
        // Two of three words and a close meaning.
        let embedded = item_relevance(2.0 / 3.0, Some(0.6), true);
        assert!(waiting > embedded, "{waiting} against {embedded}");
        assert_eq!(waiting, 1.0);
        // Neither words nor a vector: nothing to go on.
        assert_eq!(item_relevance(0.0, None, true), 0.0);
        // Without a model, words alone, as before.
        assert_eq!(item_relevance(0.5, None, false), 0.5);
        // A known vector still counts half.
        assert!((item_relevance(1.0, Some(0.25), true) - 0.5).abs() < 1e-9);
    }
}

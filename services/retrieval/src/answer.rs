//! Retrieval's answers over NATS request/reply, one handler per subject in a
//! [`common::requests::Requests`] table: search, context, timeline, get, forget, import and the
//! collections. A failure becomes an error in the reply; a context request that cannot be
//! answered gets an empty context, so the agent goes on without it.

use crate::capabilities::{self, Matching, Registry};
use crate::context::{self, ContextConfig};
use crate::search::Searcher;
use crate::{collections, index, items};
use common::health::Counters;
use common::requests::{DecodeError, Requests};
use proto::subjects;
use std::sync::Arc;

/// What every handler reads from.
pub(crate) struct Answers {
    /// Retrieval's own connection, to ask the compressor for other wordings of a query.
    pub client: async_nats::Client,
    pub searcher: Searcher,
    pub context: ContextConfig,
    pub capabilities: Registry,
}

/// The table of every subject retrieval answers.
pub(crate) fn requests(answers: Answers, counters: Arc<Counters>) -> Requests<Arc<Answers>> {
    Requests::new(Arc::new(answers), |message| {
        tracing::info_span!(
            "retrieval.request",
            subject = %message.subject,
            session_id = tracing::field::Empty,
        )
    })
    .counting(counters)
    .on(
        subjects::RETRIEVAL_SEARCH,
        |error| proto::SearchReply {
            error: format!("request is not a search request: {error}"),
            ..Default::default()
        },
        search,
    )
    .on(
        subjects::RETRIEVAL_CONTEXT,
        |_| proto::ContextReply::default(),
        assemble_context,
    )
    .on(
        subjects::RETRIEVAL_TIMELINE,
        |error| items_error(format!("request is not a timeline request: {error}")),
        timeline,
    )
    .on(
        subjects::RETRIEVAL_GET,
        |error| items_error(format!("request is not a get request: {error}")),
        get,
    )
    .on(
        subjects::RETRIEVAL_FORGET,
        |error| proto::ForgetReply {
            items: 0,
            error: format!("request is not a forget request: {error}"),
        },
        forget,
    )
    .on(
        subjects::RETRIEVAL_IMPORT,
        |error| proto::ImportItemsReply {
            error: format!("request is not an import request: {error}"),
            ..Default::default()
        },
        import,
    )
    .on(
        subjects::COLLECTIONS_CREATE,
        unreadable_collection,
        create_collection,
    )
    .on(
        subjects::COLLECTIONS_GET,
        unreadable_collection,
        get_collection,
    )
    .on(
        subjects::COLLECTIONS_DELETE,
        unreadable_collection,
        delete_collection,
    )
    .on(
        subjects::COLLECTIONS_LIST,
        |error| proto::CollectionsReply {
            error: format!("request is not a list request: {error}"),
            ..Default::default()
        },
        list_collections,
    )
    .on(
        subjects::COLLECTIONS_ASK,
        |error| proto::AskCollectionReply {
            error: format!("request is not an ask request: {error}"),
            error_code: "invalid".to_owned(),
            ..Default::default()
        },
        ask_collection,
    )
    .on(
        subjects::CAPABILITIES_SYNC,
        |error| proto::SyncCapabilitiesReply {
            error: format!("request is not a capabilities sync request: {error}"),
            ..Default::default()
        },
        sync_capabilities,
    )
    .on(
        subjects::CAPABILITIES_MATCH,
        |error| proto::MatchCapabilitiesReply {
            error: format!("request is not a capabilities match request: {error}"),
            ..Default::default()
        },
        match_capabilities,
    )
    .on(
        subjects::CAPABILITIES_LIST,
        |error| proto::ListCapabilitiesReply {
            error: format!("request is not a capabilities list request: {error}"),
            ..Default::default()
        },
        list_capabilities,
    )
}

async fn sync_capabilities(
    answers: Arc<Answers>,
    request: proto::SyncCapabilitiesRequest,
) -> proto::SyncCapabilitiesReply {
    let searcher = &answers.searcher;
    match answers
        .capabilities
        .sync(&searcher.pool, searcher.vectors.as_deref(), request)
        .await
    {
        Ok(reply) => {
            answers.capabilities.warm(searcher.vectors.as_deref()).await;
            reply
        }
        Err(error) => proto::SyncCapabilitiesReply {
            error: format!("capabilities sync failed: {error:#}"),
            ..Default::default()
        },
    }
}

/// How a request asks to match.
fn matching(request: &proto::MatchCapabilitiesRequest) -> Matching {
    Matching {
        two_stage: request.strategy == "two-stage",
        instruction: request.instruction,
        min_score: request.min_score,
        limit: match request.limit {
            0 => capabilities::LIMIT,
            n => n as usize,
        },
    }
}

async fn match_capabilities(
    answers: Arc<Answers>,
    request: proto::MatchCapabilitiesRequest,
) -> proto::MatchCapabilitiesReply {
    if !matches!(request.strategy.as_str(), "" | "flat" | "two-stage") {
        return proto::MatchCapabilitiesReply {
            error: format!("unknown strategy {:?}: flat or two-stage", request.strategy),
            ..Default::default()
        };
    }
    match answers
        .capabilities
        .matches(
            answers.searcher.vectors.as_deref(),
            &request.prompt,
            &request.project,
            matching(&request),
        )
        .await
    {
        Ok(found) => proto::MatchCapabilitiesReply {
            matches: found.matches,
            error: String::new(),
            ordinary: found.ordinary,
        },
        Err(error) => proto::MatchCapabilitiesReply {
            error: failed("capabilities match", &error),
            ..Default::default()
        },
    }
}

async fn list_capabilities(
    answers: Arc<Answers>,
    request: proto::ListCapabilitiesRequest,
) -> proto::ListCapabilitiesReply {
    proto::ListCapabilitiesReply {
        capabilities: answers
            .capabilities
            .list((!request.all).then_some(request.scope.as_str())),
        error: String::new(),
    }
}

/// Log a failure in full and say only what failed in the reply.
fn failed(what: &str, error: &anyhow::Error) -> String {
    tracing::warn!(error = %format!("{error:#}"), "{what} failed");
    format!("{what} failed")
}

fn items_error(error: String) -> proto::ItemsReply {
    proto::ItemsReply {
        error,
        ..Default::default()
    }
}

/// The longest wait for the compressor's other wordings of a query; its LLM call is bounded
/// a little below this.
const REWRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

async fn search(answers: Arc<Answers>, request: proto::SearchRequest) -> proto::SearchReply {
    let (rewrites, rewrite_error) = if request.rewrite {
        reworded(&answers.client, &request).await
    } else {
        (Vec::new(), String::new())
    };
    match answers.searcher.search_reworded(&request, &rewrites).await {
        Ok((hits, mode)) => proto::SearchReply {
            hits,
            error: String::new(),
            mode: mode.to_owned(),
            rewrites,
            rewrite_error,
        },
        Err(error) => proto::SearchReply {
            error: failed("search", &error),
            ..Default::default()
        },
    }
}

/// Other wordings of the query from the compressor's LLM, or none and why: the search then
/// runs on the query as asked.
async fn reworded(
    client: &async_nats::Client,
    request: &proto::SearchRequest,
) -> (Vec<String>, String) {
    let asked = proto::RewriteRequest {
        query: request.query.clone(),
        project: request.project.clone(),
    };
    let answered = common::nats::ask_service::<proto::RewriteReply>(
        client,
        "retrieval",
        "compressor",
        subjects::COMPRESSOR_REWRITE,
        &asked,
        REWRITE_WAIT,
    )
    .await;
    match answered {
        Ok(reply) if reply.error.is_empty() => (reply.queries, String::new()),
        Ok(reply) => (Vec::new(), reply.error),
        Err(common::nats::AskError::Request(error)) => (
            Vec::new(),
            common::nats::unanswered("the compressor", &error),
        ),
        Err(error) => (
            Vec::new(),
            format!("reading the compressor's reply: {error}"),
        ),
    }
}

async fn assemble_context(
    answers: Arc<Answers>,
    request: proto::ContextRequest,
) -> proto::ContextReply {
    tracing::Span::current().record("session_id", request.session_id.as_str());
    // With a prompt, the capabilities that fit come first, within the host's limit; memory
    // gets what they leave.
    let block = if request.moment() == proto::context_request::Moment::Prompt {
        let found = answers
            .capabilities
            .matches(
                answers.searcher.vectors.as_deref(),
                &request.prompt,
                &request.project,
                Matching::default(),
            )
            .await
            .map(|found| found.matches)
            .unwrap_or_else(|error| {
                failed("capabilities match", &error);
                Vec::new()
            });
        capabilities::render(&found, context::host_max_chars(&request) / 2)
    } else {
        String::new()
    };
    let mut rest = request.clone();
    if !block.is_empty() {
        rest.max_chars =
            (context::host_max_chars(&request).saturating_sub(block.chars().count())) as u32;
    }
    let mut reply = context::assemble(&answers.searcher, &answers.context, &rest)
        .await
        .unwrap_or_else(|error| {
            failed("context", &error);
            proto::ContextReply::default()
        });
    if !block.is_empty() {
        reply.text = format!("{block}{}", reply.text);
    }
    reply
}

async fn timeline(answers: Arc<Answers>, request: proto::TimelineRequest) -> proto::ItemsReply {
    match items::timeline(&answers.searcher.pool, request.id, request.radius).await {
        Ok(Some((items, anchor))) => proto::ItemsReply {
            items,
            anchor: anchor as u32,
            error: String::new(),
        },
        Ok(None) => items_error(format!("no memory item {}", request.id)),
        Err(error) => items_error(failed("timeline", &error)),
    }
}

async fn get(answers: Arc<Answers>, request: proto::GetRequest) -> proto::ItemsReply {
    match items::get(&answers.searcher.pool, &request.ids).await {
        Ok(items) => proto::ItemsReply {
            items,
            ..Default::default()
        },
        Err(error) => items_error(failed("get", &error)),
    }
}

async fn forget(answers: Arc<Answers>, request: proto::ForgetRequest) -> proto::ForgetReply {
    match forget_sessions(&answers.searcher, &request.session_ids).await {
        Ok(items) => proto::ForgetReply {
            items,
            error: String::new(),
        },
        Err(error) => proto::ForgetReply {
            items: 0,
            error: failed("forget", &error),
        },
    }
}

/// Drop the memory items of deleted sessions, then their vectors.
async fn forget_sessions(searcher: &Searcher, sessions: &[String]) -> anyhow::Result<u64> {
    let removed = index::forget_sessions(&searcher.pool, &searcher.lexical, sessions).await?;
    if let Some(vectors) = &searcher.vectors
        && !removed.is_empty()
    {
        vectors.delete(&searcher.pool, &removed).await?;
    }
    Ok(removed.len() as u64)
}

async fn import(
    answers: Arc<Answers>,
    request: proto::ImportItemsRequest,
) -> proto::ImportItemsReply {
    let searcher = &answers.searcher;
    match index::import_items(&searcher.pool, &searcher.lexical, &request.items).await {
        Ok(done) => {
            if let Some(vectors) = &searcher.vectors {
                vectors.notify();
            }
            proto::ImportItemsReply {
                imported: done.written as u32,
                skipped: done.skipped as u32,
                error: String::new(),
                ids: done
                    .ids
                    .into_iter()
                    .map(|(exported, local)| proto::ImportedItemId { exported, local })
                    .collect(),
            }
        }
        Err(error) => proto::ImportItemsReply {
            error: failed("import", &error),
            ..Default::default()
        },
    }
}

/// The reply to a collection request that cannot be read.
fn unreadable_collection(error: DecodeError) -> proto::CollectionReply {
    proto::CollectionReply {
        error: format!("request is not a collection request: {error}"),
        error_code: "invalid".to_owned(),
        ..Default::default()
    }
}

/// The reply to a collection request refused, with its code.
fn refused(what: &str, error: collections::Refused) -> proto::CollectionReply {
    let (error, error_code) = error.reply_parts(what);
    proto::CollectionReply {
        error,
        error_code,
        ..Default::default()
    }
}

async fn create_collection(
    answers: Arc<Answers>,
    request: proto::CreateCollectionRequest,
) -> proto::CollectionReply {
    match collections::create(&answers.searcher, &request).await {
        Ok(collection) => proto::CollectionReply {
            collection: Some(collection),
            ..Default::default()
        },
        Err(error) => refused("creating a collection", error),
    }
}

async fn get_collection(
    answers: Arc<Answers>,
    request: proto::CollectionRequest,
) -> proto::CollectionReply {
    collections::get(&answers.searcher.pool, &request)
        .await
        .unwrap_or_else(|error| refused("reading a collection", error))
}

async fn delete_collection(
    answers: Arc<Answers>,
    request: proto::CollectionRequest,
) -> proto::CollectionReply {
    match collections::delete(&answers.searcher.pool, &request).await {
        Ok(collection) => proto::CollectionReply {
            collection: Some(collection),
            ..Default::default()
        },
        Err(error) => refused("deleting a collection", error),
    }
}

async fn list_collections(
    answers: Arc<Answers>,
    request: proto::ListCollectionsRequest,
) -> proto::CollectionsReply {
    collections::list(&answers.searcher.pool, &request)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(error = %format!("{error:#}"), "listing collections failed");
            proto::CollectionsReply {
                error: "listing collections failed".to_owned(),
                ..Default::default()
            }
        })
}

async fn ask_collection(
    answers: Arc<Answers>,
    request: proto::AskCollectionRequest,
) -> proto::AskCollectionReply {
    collections::ask(&answers.searcher, &request)
        .await
        .unwrap_or_else(|error| {
            let (error, error_code) = error.reply_parts("asking a collection");
            proto::AskCollectionReply {
                error,
                error_code,
                ..Default::default()
            }
        })
}

//! The MCP server: mneme's memory as tools an agent calls, over stdio (`mneme mcp`) and over
//! Streamable HTTP (`/mcp` on the api). Every tool answers from the services, like the REST
//! endpoints, and `save_memory` writes through the pipeline (an event on the events stream, so
//! ingest stores it and retrieval indexes it).
//!
//! The tool descriptions teach the three-step pattern (search → timeline → get_observations), so
//! an agent spends tokens only on what is worth reading whole.

use crate::State;
use crate::error::ApiError;
use crate::rest::{self, SearchParams};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData as McpError, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::Arc;

/// The guide `how_to_use_memory` returns, and the server's instructions.
pub const GUIDE: &str = "mneme is your persistent memory of past sessions: prompts, tool calls, errors, edits, summaries, checkpoints and patterns that recur.

Use it in three steps, so you only pay for what is worth reading:
1. search(query) returns a compact index: one line per hit with its id, kind, date and a snippet (about 50-100 tokens a hit). Filter with project, kinds, file, concept, since_days.
2. timeline(id) shows what happened around one hit in its session (the question before it, what came after), in short lines.
3. get_observations(ids) returns whole items, only for the few ids that matter.

by_file(file) and by_concept(concept) are searches narrowed to a file path or a concept tag.
save_memory(text) keeps something on purpose (a decision, a convention, a fix worth remembering); it is searchable seconds later.
record_workflow(situation, steps, outcome) says how a sequence of steps went, so a workflow that worked is offered again and one that stopped working says so.
stats() says how much is remembered and where.
capabilities(project) lists the skills, commands, subagents, MCP servers and tasks this user and project offer; match_capabilities(prompt) says which fit a request and how to invoke them.
create_collection(name, query or item_ids) keeps the items of one topic together; ask_collection(id, question) finds the relevant ones among them, export_collection(id) gives them whole as markdown, json or text.

Search before re-deriving something a past session already worked out; save what a future session should not have to rediscover.";

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchArgs {
    /// What to look for, in words.
    pub query: String,
    /// Only this project (its git root path).
    pub project: Option<String>,
    /// Only these kinds: prompt, tool, error, reply, compaction, memory, summary, checkpoint,
    /// pattern, or a structured type (bugfix, feature, refactor, change, discovery, decision).
    pub kinds: Option<Vec<String>>,
    /// Only items touching a file whose path contains this.
    pub file: Option<String>,
    /// Only items tagged with this concept.
    pub concept: Option<String>,
    /// Only items from the last this many days.
    pub since_days: Option<u32>,
    /// At most this many hits (default 10, at most 50).
    pub limit: Option<u32>,
    /// "session" to find which past sessions dealt with this: sessions (at most `limit`)
    /// ranked by the evidence they hold, each with its best hits.
    pub group: Option<String>,
    /// Also search other wordings of the query from mneme's optional LLM (slower; spends its
    /// token budget; nothing changes when none is configured).
    pub rewrite: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TimelineArgs {
    /// The id of a hit from search.
    pub id: i64,
    /// Items before and after it (default 5, at most 20).
    pub radius: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GetArgs {
    /// Ids from search or timeline (at most 20).
    pub ids: Vec<i64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SaveArgs {
    /// What to remember, in full sentences.
    pub text: String,
    /// A short title.
    pub title: Option<String>,
    /// Concept tags (for example deploy, testing, auth).
    pub concepts: Option<Vec<String>>,
    /// Files it is about.
    pub files: Option<Vec<String>>,
    /// The project it belongs to (its git root path).
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkflowArgs {
    /// What was asked for, in the user's words: the situation the steps answer.
    pub situation: String,
    /// The steps in order, as they would be run again: command lines, `Edit path/to/file`,
    /// a slash command, an MCP tool call.
    pub steps: Vec<String>,
    /// `success` when the steps did what was asked, `failure` when they did not.
    pub outcome: String,
    /// Why it failed, or what made it work, in a sentence.
    pub reason: Option<String>,
    /// Files the steps changed.
    pub files: Option<Vec<String>>,
    /// The project it belongs to (its git root path).
    pub project: Option<String>,
    /// The session it happened in, when known.
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ByFileArgs {
    /// A file path, or part of one (for example src/socket.rs).
    pub file: String,
    /// What to look for in that file's history; the file name when absent.
    pub query: Option<String>,
    pub project: Option<String>,
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ByConceptArgs {
    /// A concept tag (for example rust, shell, error, deploy).
    pub concept: String,
    /// What to look for; the concept itself when absent.
    pub query: Option<String>,
    pub project: Option<String>,
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CreateCollectionArgs {
    /// A name for the collection (unique).
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Collect the hits of this search ...
    pub query: Option<String>,
    /// ... in this project only ...
    pub project: Option<String>,
    /// ... at most this many (default 20, at most 200).
    pub limit: Option<u32>,
    /// Or collect exactly these item ids (from search or timeline).
    pub item_ids: Option<Vec<i64>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListCollectionsArgs {
    /// At most this many (default 50).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExportCollectionArgs {
    /// The collection's id.
    pub id: i64,
    /// markdown (default), json or text.
    pub format: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AskCollectionArgs {
    /// The collection's id.
    pub id: i64,
    /// The question, in words.
    pub question: String,
    /// At most this many items (default 5, at most 50).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CapabilitiesArgs {
    /// The project's directory: its capabilities with the user's.
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MatchCapabilitiesArgs {
    /// The request, in the user's words.
    pub prompt: String,
    /// The project's directory: its registry and the user's are matched.
    pub project: Option<String>,
}

/// The MCP server over the api's state.
#[derive(Clone)]
pub struct Memory {
    state: Arc<State>,
    tool_router: ToolRouter<Memory>,
}

fn text(body: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(body.into())])
}

/// An error the agent can read and act on, as a tool result rather than a protocol error.
fn failed(error: ApiError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {}",
        error.code, error.message
    ))])
}

fn date(ms: i64) -> String {
    common::time::utc_day(ms)
}

/// One line per hit: what an agent reads to decide what to open.
fn index(found: &Value) -> String {
    let hits = found["hits"].as_array().cloned().unwrap_or_default();
    if hits.is_empty() {
        return "no matches".to_owned();
    }
    let mut out = String::new();
    for hit in hits {
        let snippet = hit["snippet"]
            .as_str()
            .unwrap_or_default()
            .replace('\n', " ");
        let origin = match hit["origin"].as_str() {
            Some(origin) if !origin.is_empty() => format!(" (from {origin})"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "#{} [{}] {} {}{origin} — {}",
            hit["id"],
            hit["kind"].as_str().unwrap_or_default(),
            date(hit["occurred_at_ms"].as_i64().unwrap_or_default()),
            hit["title"].as_str().unwrap_or_default(),
            snippet.trim(),
        );
    }
    out.push_str(
        "\nNext: timeline(id) for context around a hit, get_observations(ids) for whole items.",
    );
    out
}

fn clamp_limit(limit: Option<u32>, default: u32, max: u32) -> Option<u32> {
    Some(limit.unwrap_or(default).clamp(1, max))
}

#[tool_router]
impl Memory {
    pub fn new(state: Arc<State>) -> Memory {
        Memory {
            state,
            tool_router: Self::tool_router(),
        }
    }

    async fn find(&self, params: SearchParams) -> CallToolResult {
        let request = match rest::search_request(params) {
            Ok(request) => request,
            Err(error) => return failed(error),
        };
        match rest::run_search(&self.state, request).await {
            Ok(found) => text(index(&found)),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Step 1 of 3: search your memory of past sessions. Returns a compact index, one line per hit (#id [kind] date title — snippet), about 50-100 tokens a hit. Then call timeline(id) for the context of a promising hit and get_observations(ids) only for the items worth reading whole."
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, McpError> {
        let since = args
            .since_days
            .map(|days| common::time::now_ms() - i64::from(days) * 86_400_000);
        let params = SearchParams {
            q: args.query,
            project: args.project.unwrap_or_default(),
            kinds: args.kinds.unwrap_or_default(),
            file: args.file.unwrap_or_default(),
            concept: args.concept.unwrap_or_default(),
            since,
            limit: clamp_limit(args.limit, 10, 50),
            group: args.group.clone(),
            rewrite: args.rewrite.unwrap_or(false),
            ..Default::default()
        };
        if args.group.is_none() {
            return Ok(self.find(params).await);
        }
        // Grouped: one line a session, then its best hits in the usual index form.
        let found = match rest::search_request(params) {
            Ok(request) => rest::run_search(&self.state, request).await,
            Err(error) => Err(error),
        };
        let found = match found {
            Ok(found) => found,
            Err(error) => return Ok(failed(error)),
        };
        let sessions = found["sessions"].as_array().cloned().unwrap_or_default();
        if sessions.is_empty() {
            return Ok(text("no matches".to_owned()));
        }
        let mut out = String::new();
        for session in &sessions {
            let _ = writeln!(
                out,
                "session {} ({}) score {:.3}",
                session["session_id"].as_str().unwrap_or_default(),
                session["project"].as_str().unwrap_or_default(),
                session["score"].as_f64().unwrap_or_default(),
            );
            let hits = index(&serde_json::json!({"hits": session["hits"]}));
            for line in hits.lines().take_while(|line| !line.is_empty()) {
                let _ = writeln!(out, "  {line}");
            }
        }
        Ok(text(out))
    }

    #[tool(
        description = "Step 2 of 3: what happened around one search hit in its session (the request before it, what followed), one short line per item, the hit marked with >. Use it to judge a hit before fetching it whole with get_observations."
    )]
    async fn timeline(
        &self,
        Parameters(args): Parameters<TimelineArgs>,
    ) -> Result<CallToolResult, McpError> {
        let radius = args.radius.unwrap_or(5).min(20);
        let found = match rest::run_timeline(&self.state, args.id, radius).await {
            Ok(found) => found,
            Err(error) => return Ok(failed(error)),
        };
        let anchor = found["anchor"].as_u64().unwrap_or_default() as usize;
        let mut out = String::new();
        for (i, item) in found["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let first = item["text"]
                .as_str()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default();
            let first: String = first.chars().take(160).collect();
            let _ = writeln!(
                out,
                "{} #{} [{}] {} {}: {}",
                if i == anchor { ">" } else { " " },
                item["id"],
                item["kind"].as_str().unwrap_or_default(),
                date(item["occurred_at_ms"].as_i64().unwrap_or_default()),
                item["title"].as_str().unwrap_or_default(),
                first,
            );
        }
        out.push_str("\nNext: get_observations(ids) for the items worth reading whole.");
        Ok(text(out))
    }

    #[tool(
        description = "Step 3 of 3: whole memory items by id (from search or timeline): full text, files, concepts, and for tool calls their input and output. Ask only for the few ids that matter; each can be long."
    )]
    async fn get_observations(
        &self,
        Parameters(args): Parameters<GetArgs>,
    ) -> Result<CallToolResult, McpError> {
        if args.ids.is_empty() || args.ids.len() > 20 {
            return Ok(failed(ApiError::invalid(
                "invalid_parameter",
                "give between 1 and 20 ids",
            )));
        }
        match rest::run_get(&self.state, args.ids).await {
            Ok(items) => {
                let items: Vec<Value> = items.iter().map(rest::item_json).collect();
                Ok(text(
                    serde_json::to_string_pretty(&items).unwrap_or_default(),
                ))
            }
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "Remember something on purpose: a decision, a convention, a fix or a fact a future session should not have to rediscover. Write it in full sentences; add concepts and files so by_concept and by_file find it. It is searchable a few seconds later."
    )]
    async fn save_memory(
        &self,
        Parameters(args): Parameters<SaveArgs>,
    ) -> Result<CallToolResult, McpError> {
        let project = args.project.unwrap_or_default();
        let session = if project.is_empty() {
            "memories".to_owned()
        } else {
            format!("memories:{project}")
        };
        let input = serde_json::json!({
            "session_id": session,
            "kind": "memory",
            "project": project,
            "host_event": "save_memory",
            "text": args.text,
            "title": args.title,
            "concepts": args.concepts,
            "files": args.files,
        });
        match crate::events::accept(&self.state, input).await {
            Ok(events) => Ok(text(format!(
                "saved (event {}); search finds it in a few seconds",
                events.first().map(|e| e.id.as_str()).unwrap_or_default()
            ))),
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "Record how a workflow went: the situation, the steps as they would be run again, and whether they worked (success) or not (failure, with the reason). mneme counts it with the workflows it found in sessions, offers a workflow that worked when a similar request comes back, and says when one stopped working."
    )]
    async fn record_workflow(
        &self,
        Parameters(args): Parameters<WorkflowArgs>,
    ) -> Result<CallToolResult, McpError> {
        let project = args.project.unwrap_or_default();
        let session = match args.session_id {
            Some(session) if !session.trim().is_empty() => session,
            _ if project.is_empty() => "workflows".to_owned(),
            _ => format!("workflows:{project}"),
        };
        let input = serde_json::json!({
            "session_id": session,
            "kind": "workflow",
            "project": project,
            "host_event": "record_workflow",
            "text": args.situation,
            "steps": args.steps,
            "outcome": args.outcome,
            "reason": args.reason,
            "files": args.files,
        });
        match crate::events::accept(&self.state, input).await {
            Ok(events) => Ok(text(format!(
                "recorded (event {}); the workflow's counts change in a few seconds",
                events.first().map(|e| e.id.as_str()).unwrap_or_default()
            ))),
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "Search the history of one file: edits, reads, errors and memories that touch a path containing `file`. Returns the same compact index as search; follow up with timeline and get_observations."
    )]
    async fn by_file(
        &self,
        Parameters(args): Parameters<ByFileArgs>,
    ) -> Result<CallToolResult, McpError> {
        let name = args
            .file
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(&args.file)
            .to_owned();
        Ok(self
            .find(SearchParams {
                q: args.query.unwrap_or(name),
                file: args.file,
                project: args.project.unwrap_or_default(),
                limit: clamp_limit(args.limit, 10, 50),
                ..Default::default()
            })
            .await)
    }

    #[tool(
        description = "Search items tagged with one concept (for example rust, shell, error, deploy, testing). Returns the same compact index as search; follow up with timeline and get_observations."
    )]
    async fn by_concept(
        &self,
        Parameters(args): Parameters<ByConceptArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .find(SearchParams {
                q: args.query.unwrap_or_else(|| args.concept.clone()),
                concept: args.concept,
                project: args.project.unwrap_or_default(),
                limit: clamp_limit(args.limit, 10, 50),
                ..Default::default()
            })
            .await)
    }

    #[tool(
        description = "How much is remembered: counts of sessions, observations and memory items by kind, the busiest projects, and tokens saved by compression."
    )]
    async fn stats(&self) -> Result<CallToolResult, McpError> {
        let pool = match self.state.pool().await {
            Ok(pool) => pool,
            Err(error) => return Ok(failed(error)),
        };
        let stats = archive::stats(&pool, 30)
            .await
            .map_err(ApiError::from)
            .and_then(|stats| crate::rest::as_json(&stats));
        match stats {
            Ok(mut stats) => {
                // Per-day rows are for charts; an agent needs the totals.
                if let Some(object) = stats.as_object_mut() {
                    object.remove("per_day");
                }
                Ok(text(
                    serde_json::to_string_pretty(&stats).unwrap_or_default(),
                ))
            }
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "Gather memory items into a named collection, from the hits of a search (query, optionally project and limit) or from exact item ids. Use it to keep the evidence of one topic together (a migration, an incident) so it can be exported or asked later."
    )]
    async fn create_collection(
        &self,
        Parameters(args): Parameters<CreateCollectionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let input = crate::collections::CreateIn {
            name: args.name,
            description: args.description,
            query: args.query,
            project: args.project,
            limit: args.limit,
            item_ids: args.item_ids,
            ..Default::default()
        };
        match crate::collections::run_create(&self.state, input).await {
            Ok(c) => Ok(text(format!(
                "collection #{} {:?} holds {} items. Next: ask_collection(id, question) or export_collection(id).",
                c.id, c.name, c.items
            ))),
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "The skills, slash commands, subagents, MCP servers and project tasks this user (and project) offer, one line each: id (kind, category): how to invoke it — what it does."
    )]
    async fn capabilities(
        &self,
        Parameters(args): Parameters<CapabilitiesArgs>,
    ) -> Result<CallToolResult, McpError> {
        let project = args.project.unwrap_or_default();
        match crate::capabilities::run_list(&self.state, &project).await {
            Ok(found) => {
                let mut out = String::new();
                for c in found["capabilities"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                {
                    let _ = writeln!(
                        out,
                        "{} ({}, {}): `{}` — {}",
                        c["id"].as_str().unwrap_or_default(),
                        c["kind"].as_str().unwrap_or_default(),
                        c["category"].as_str().unwrap_or_default(),
                        c["invoke"].as_str().unwrap_or_default(),
                        c["description"].as_str().unwrap_or_default(),
                    );
                }
                if out.is_empty() {
                    out.push_str("no capabilities: `mneme capabilities scan` finds them");
                }
                Ok(text(out))
            }
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "Which capabilities fit a request, best first, with how to invoke each and its score; nothing when none fits well enough."
    )]
    async fn match_capabilities(
        &self,
        Parameters(args): Parameters<MatchCapabilitiesArgs>,
    ) -> Result<CallToolResult, McpError> {
        let project = args.project.unwrap_or_default();
        match crate::capabilities::run_match(&self.state, &args.prompt, &project, "").await {
            Ok(found) => {
                let mut out = String::new();
                for m in found["matches"].as_array().cloned().unwrap_or_default() {
                    let _ = writeln!(
                        out,
                        "{} ({:.2}): `{}` — {}",
                        m["id"].as_str().unwrap_or_default(),
                        m["score"].as_f64().unwrap_or_default(),
                        m["invoke"].as_str().unwrap_or_default(),
                        m["description"].as_str().unwrap_or_default(),
                    );
                }
                if out.is_empty() {
                    out.push_str("no capability fits this request");
                }
                Ok(text(out))
            }
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "The collections that exist, one line each: #id name (items) and the search that made it."
    )]
    async fn list_collections(
        &self,
        Parameters(args): Parameters<ListCollectionsArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = args.limit.unwrap_or(50).clamp(1, 500);
        match crate::collections::run_list(&self.state, limit, 0).await {
            Ok(found) => {
                let mut out = String::new();
                for c in found["collections"].as_array().cloned().unwrap_or_default() {
                    let _ = writeln!(
                        out,
                        "#{} {} ({} items){}",
                        c["id"],
                        c["name"].as_str().unwrap_or_default(),
                        c["items"],
                        match c["query"].as_str() {
                            Some(q) if !q.is_empty() => format!(" from search {q:?}"),
                            _ => String::new(),
                        }
                    );
                }
                if out.is_empty() {
                    out.push_str("no collections");
                }
                Ok(text(out))
            }
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "A whole collection in one document: markdown (default), json or text, every item in full. It can be long; prefer ask_collection for a question."
    )]
    async fn export_collection(
        &self,
        Parameters(args): Parameters<ExportCollectionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let format = match crate::collections::Format::parse(args.format.as_deref()) {
            Ok(format) => format,
            Err(error) => return Ok(failed(error)),
        };
        match crate::collections::run_get(&self.state, args.id).await {
            Ok((collection, items)) => Ok(text(crate::collections::render(
                &collection,
                &items,
                format,
            ))),
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "Ask a question over one collection: its items most relevant to the question, in the compact index form of search (#id [kind] date title — snippet). Follow up with get_observations for whole items."
    )]
    async fn ask_collection(
        &self,
        Parameters(args): Parameters<AskCollectionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = args.limit.unwrap_or(5).clamp(1, 50);
        match crate::collections::run_ask(&self.state, args.id, &args.question, limit).await {
            Ok(found) => Ok(text(index(&found))),
            Err(error) => Ok(failed(error)),
        }
    }

    #[tool(
        description = "How to use this memory well: the three-step search pattern and when to save. Read it once at the start."
    )]
    async fn how_to_use_memory(&self) -> Result<CallToolResult, McpError> {
        Ok(text(GUIDE))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Memory {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mneme", env!("CARGO_PKG_VERSION")))
            .with_instructions(GUIDE.to_owned())
    }
}

/// The Streamable HTTP service mounted at `/mcp`, stopped with the api.
pub fn http_service(
    state: Arc<State>,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    Memory,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    // The api's guard has checked the Host of every request already, against the names this
    // api is reached by (a team box's too); rmcp's own list knows only loopback names.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(state.shutdown.child_token());
    StreamableHttpService::new(
        move || Ok(Memory::new(state.clone())),
        LocalSessionManager::default().into(),
        config,
    )
}

/// Serve MCP over stdin and stdout until the client closes them (`mneme mcp`).
pub async fn stdio(common: common::CommonArgs) -> anyhow::Result<()> {
    use rmcp::ServiceExt as _;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let client = common::nats::connect(&common, "mcp", std::time::Duration::from_secs(5)).await?;
    let addr = "127.0.0.1:0".parse().expect("a loopback address parses");
    let state = crate::state(
        client.clone(),
        &common,
        &crate::ApiArgs::default(),
        addr,
        shutdown,
    )?;
    let server = Memory::new(state)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("starting mcp over stdio: {e}"))?;
    let _ = server.waiting().await;
    let _ = client.drain().await;
    Ok(())
}

//! The OpenAPI 3.1 document of the REST API, written by hand beside the handlers it describes
//! (`/v1/openapi.json`). The schema fuzzing test (`tests/fuzz_api.sh`) checks the api against it.

use serde_json::{Value, json};

fn error_responses(codes: &[&str]) -> serde_json::Map<String, Value> {
    let mut responses = serde_json::Map::new();
    for code in codes {
        let description = match *code {
            "400" => "A parameter is missing, malformed or out of range.",
            "401" => "The api token is missing or wrong.",
            "403" => "Not allowed: no token configured for a write, or a foreign origin.",
            "404" => "Nothing with that id.",
            "409" => "Something with that name exists.",
            "413" => "The body is larger than the api accepts.",
            "415" => "The body is not sent as application/json.",
            "422" => "The body is JSON but does not describe something valid.",
            "429" => "Too many requests from this address; see Retry-After.",
            "503" => "NATS, the store or the service behind the endpoint cannot answer now.",
            _ => "Error.",
        };
        responses.insert(
            (*code).to_owned(),
            json!({
                "description": description,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
            }),
        );
    }
    responses
}

/// The error answers and one success answer of an operation.
fn responses(errors: &[&str], status: &str, success: Value) -> Value {
    let mut responses = error_responses(errors);
    responses.insert(status.to_owned(), success);
    Value::Object(responses)
}

fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn operation(
    id: &str,
    summary: &str,
    parameters: Value,
    success: (&str, Value),
    errors: &[&str],
    secured: bool,
) -> Value {
    let mut responses = error_responses(errors);
    responses.insert(success.0.to_owned(), success.1);
    let mut op = json!({
        "operationId": id,
        "summary": summary,
        "parameters": parameters,
        "responses": responses,
    });
    if secured {
        op["security"] = json!([{"bearer": []}]);
    }
    op
}

fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
}

fn path_id(name: &str, schema: Value) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": schema})
}

fn paging(default_limit: u32, max_limit: u32) -> Vec<Value> {
    vec![
        query(
            "limit",
            "Page size.",
            json!({"type": "integer", "minimum": 1, "maximum": max_limit, "default": default_limit}),
        ),
        query(
            "offset",
            "Rows to skip.",
            json!({"type": "integer", "minimum": 0, "maximum": 1_000_000, "default": 0}),
        ),
    ]
}

fn object() -> Value {
    json!({"type": "object"})
}

/// The whole document.
pub fn document() -> Value {
    let read_errors = ["400", "401", "429", "503"];
    let write_errors = [
        "400", "401", "403", "404", "413", "415", "422", "429", "503",
    ];
    let session_id = json!({"type": "string", "minLength": 1, "maxLength": 256});
    let item_id = json!({"type": "integer", "format": "int64", "minimum": 1});
    let text = |max: u32| json!({"type": "string", "maxLength": max});
    let mut search_params = vec![
        json!({"name": "q", "in": "query", "required": true, "description": "What to look for.",
               "schema": {"type": "string", "minLength": 1, "maxLength": 1000}}),
        query(
            "project",
            "Only this project (its git root path).",
            text(4096),
        ),
        query(
            "session",
            "Only these sessions (comma-separated).",
            text(4096),
        ),
        query(
            "exclude_session",
            "Never these sessions (comma-separated).",
            text(4096),
        ),
        query(
            "kind",
            "Only these kinds, comma-separated: prompt, tool, error, reply, compaction, memory, summary, checkpoint, pattern, or a structured type (bugfix, feature, refactor, change, discovery, decision).",
            text(1000),
        ),
        query(
            "file",
            "Only items touching a file whose path contains this.",
            text(4096),
        ),
        query("concept", "Only items tagged with this concept.", text(200)),
        query(
            "since",
            "Only items at or after this time (Unix ms).",
            json!({"type": "integer", "format": "int64", "minimum": 0}),
        ),
        query(
            "until",
            "Only items before this time (Unix ms).",
            json!({"type": "integer", "format": "int64", "minimum": 0}),
        ),
        query(
            "mode",
            "How to search.",
            json!({"type": "string", "enum": ["hybrid", "fts", "vector"], "default": "hybrid"}),
        ),
        query(
            "limit",
            "At most this many hits.",
            json!({"type": "integer", "minimum": 1, "maximum": 200, "default": 20}),
        ),
        query(
            "min_relevance",
            "Drop hits below this relevance.",
            json!({"type": "number", "minimum": 0, "maximum": 1}),
        ),
        query(
            "boost_project",
            "Prefer `project` instead of requiring it.",
            json!({"type": "boolean"}),
        ),
        query(
            "group",
            "session: answer with sessions (`limit` of them), ranked by the best few hits each holds, each with its best hits (`sessions`); `hits` then lists those hits session by session, each scored with its session's score.",
            json!({"type": "string", "enum": ["session"]}),
        ),
        query(
            "as_of",
            "When the question is asked (Unix ms; default now): time words in `q` (yesterday, two weeks ago, in May) are resolved against it.",
            json!({"type": "integer", "format": "int64", "minimum": 0}),
        ),
        query(
            "rewrite",
            "true: also search other wordings of `q` from the optional LLM (MNEME_COMPRESS_LLM_URL), within its token budgets, fused with the ranking of `q` itself; the answer then lists them in `rewrites`, or says in `rewrite_error` why there are none (no LLM, budget spent, no answer in time), and the search of `q` alone stands.",
            json!({"type": "boolean", "default": false}),
        ),
    ];
    search_params.shrink_to_fit();
    let mut session_list = vec![
        query("project", "Only this project.", text(4096)),
        query(
            "archived",
            "false (default): hide archived sessions; true: only archived; all: both.",
            json!({"type": "string", "enum": ["false", "true", "all"]}),
        ),
        query(
            "summaries",
            "true: each session also carries its summary (`summary`, null before the compressor wrote one).",
            json!({"type": "boolean", "default": false}),
        ),
    ];
    session_list.extend(paging(50, 500));
    let mut one_session = vec![path_id("id", session_id.clone())];
    one_session.extend(paging(200, 1000));
    let mut pattern_params = vec![
        query("project", "Only patterns seen in this project.", text(4096)),
        query(
            "kind",
            "Only this kind.",
            json!({"type": "string", "enum": crate::rest::PATTERN_KINDS}),
        ),
        query(
            "min_occurrences",
            "Only patterns seen at least this often.",
            json!({"type": "integer", "minimum": 0}),
        ),
    ];
    pattern_params.extend(paging(50, 500));
    let mut checkpoint_params = vec![
        query("project", "Only this project.", text(4096)),
        query("session", "Only this session.", text(256)),
    ];
    checkpoint_params.extend(paging(50, 500));

    let event_schema = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["session_id", "kind"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9a-f]{32}$", "description": "Event id; a retry with the same id is stored once. Made when absent."},
            "agent": {"type": "string", "enum": ["claude-code", "kimi", "codex", "cursor", "kiro", "gemini", "unknown"]},
            "agent_version": text(100),
            "session_id": {"type": "string", "minLength": 1, "maxLength": 256},
            "project": text(4096),
            "cwd": text(4096),
            "user": text(200),
            "host": text(200),
            "model": text(200),
            "occurred_at_ms": {"type": "integer", "format": "int64", "minimum": 1},
            "kind": {"type": "string", "enum": crate::events::KINDS},
            "host_event": text(100),
            "text": {"type": "string", "description": "Prompt, memory, notification or reply text, or a workflow's situation; required for prompt, memory, notification and workflow."},
            "title": text(500),
            "tool_name": {"type": "string", "maxLength": 200, "description": "Required for pre_tool, post_tool and tool_failure."},
            "tool_use_id": {"type": "string"},
            "input": {"description": "The tool input (any JSON)."},
            "output": {"description": "The tool output (any JSON)."},
            "error": {"type": "string"},
            "source": {"type": "string"},
            "reason": {"type": "string"},
            "trigger": {"type": "string"},
            "concepts": {"type": "array", "maxItems": 50, "items": text(500)},
            "files": {"type": "array", "maxItems": 50, "items": text(500)},
            "steps": {"type": "array", "maxItems": 50, "items": text(500), "description": "A workflow's steps in order, as they would be run again; required for workflow."},
            "outcome": {"type": "string", "enum": ["success", "failure"], "description": "A workflow's outcome; required for workflow."},
        }
    });

    let mut event_responses = error_responses(&write_errors);
    event_responses.insert(
        "202".to_owned(),
        ok("Published; ingest stores them shortly.", object()),
    );

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "mneme API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Persistent memory for AI coding agents. Search in three steps: /v1/search (a compact index), /v1/timeline/{id} (what happened around a hit), /v1/items?ids= (whole items). Errors are {\"error\": {\"code\", \"message\"}} with a stable code.",
        },
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "MNEME_API_TOKEN"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                    }},
                },
                "Event": event_schema,
                "SearchHit": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"}, "session_id": {"type": "string"}, "project": {"type": "string"},
                        "kind": {"type": "string"}, "title": {"type": "string"}, "snippet": {"type": "string"},
                        "occurred_at_ms": {"type": "integer"}, "score": {"type": "number"},
                        "relevance": {"type": "number"}, "found_by": {"type": "array", "items": {"type": "string"}},
                        "origin": {"type": "string", "description": "the team member whose memory it is; empty for this machine's own"},
                    },
                },
                "Collection": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"}, "name": {"type": "string"}, "description": {"type": "string"},
                        "query": {"type": "string"}, "items": {"type": "integer"},
                        "created_at_ms": {"type": "integer"}, "updated_at_ms": {"type": "integer"},
                        "item_list": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}},
                    },
                },
                "Retention": {
                    "type": "object",
                    "properties": {
                        "archive_after_days": {"type": "integer"}, "delete_archived_after_days": {"type": "integer"},
                        "updated_at_ms": {"type": "integer"},
                        "last_run": {"type": "object", "properties": {"at_ms": {"type": "integer"}, "archived": {"type": "integer"}, "deleted": {"type": "integer"}, "error": {"type": "string"}}},
                        "applied": {"type": "object", "properties": {"archived": {"type": "integer"}, "deleted": {"type": "integer"}}},
                    },
                },
                "Backlog": {
                    "type": "object",
                    "description": "Work a service has accepted and not finished, such as retrieval's items waiting for a vector.",
                    "required": ["name", "done", "total", "rate_per_s", "eta_ms"],
                    "properties": {
                        "name": {"type": "string", "description": "What is behind, in a word (embedding)."},
                        "done": {"type": "integer"}, "total": {"type": "integer"},
                        "rate_per_s": {"type": "number", "description": "Items finished per second lately; 0 when nothing moved."},
                        "eta_ms": {"type": "integer", "description": "Milliseconds until done at that rate; 0 when done, -1 when unknown."},
                    },
                },
                "Ready": {
                    "type": "object",
                    "required": ["status", "nats", "services"],
                    "properties": {
                        "status": {"type": "string", "enum": ["ready", "degraded", "unavailable"]},
                        "nats": {"type": "object", "properties": {"connected": {"type": "boolean"}}},
                        "services": {"type": "object", "additionalProperties": {
                            "type": "object",
                            "required": ["ok", "detail", "backlogs"],
                            "properties": {
                                "ok": {"type": "boolean"}, "detail": {"type": "string"}, "uptime_ms": {"type": "integer"},
                                "backlogs": {"type": "array", "items": {"$ref": "#/components/schemas/Backlog"}},
                            },
                        }},
                    },
                },
                "Item": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"}, "kind": {"type": "string"}, "session_id": {"type": "string"},
                        "project": {"type": "string"}, "title": {"type": "string"}, "text": {"type": "string"},
                        "files": {"type": "array", "items": {"type": "string"}},
                        "concepts": {"type": "array", "items": {"type": "string"}},
                        "occurred_at_ms": {"type": "integer"},
                    },
                },
            },
        },
        "paths": {
            "/healthz": {"get": operation("healthz", "Liveness: the api process answers.", json!([]), ("200", ok("Alive.", object())), &[], false)},
            "/readyz": {"get": {
                "operationId": "readyz",
                "summary": "Readiness: NATS and the services behind the api, with each service's backlogs.",
                "parameters": [],
                "responses": {
                    "200": ok("Ready (status ready or degraded).", json!({"$ref": "#/components/schemas/Ready"})),
                    "503": ok("Not ready: NATS or a service the api needs does not answer.", json!({"$ref": "#/components/schemas/Ready"})),
                },
            }},
            "/metrics": {"get": {
                "operationId": "metrics", "summary": "Prometheus metrics.",
                "responses": {"200": {"description": "Prometheus text format.", "content": {"text/plain": {"schema": {"type": "string"}}}}},
            }},
            "/v1/openapi.json": {"get": operation("openapi", "This document.", json!([]), ("200", ok("OpenAPI 3.1.", object())), &[], false)},
            "/v1/search": {"get": operation("search", "Step 1 of 3: a compact index of matching memory items.", json!(search_params),
                ("200", ok("Hits, best first; with group=session, the sessions too; with rewrite=true, the other wordings searched (`rewrites`) or why there are none (`rewrite_error`).", json!({"type": "object", "properties": {"mode": {"type": "string"}, "hits": {"type": "array", "items": {"$ref": "#/components/schemas/SearchHit"}},
                    "rewrites": {"type": "array", "items": {"type": "string"}}, "rewrite_error": {"type": "string"},
                    "sessions": {"type": "array", "items": {"type": "object", "properties": {"session_id": {"type": "string"}, "project": {"type": "string"}, "score": {"type": "number"}, "hits": {"type": "array", "items": {"$ref": "#/components/schemas/SearchHit"}}}}}}}))), &read_errors, false)},
            "/v1/timeline/{id}": {"get": operation("timeline", "Step 2 of 3: the items around one item in its session.",
                json!([path_id("id", item_id.clone()), query("radius", "Items before and after.", json!({"type": "integer", "minimum": 0, "maximum": 50, "default": 5}))]),
                ("200", ok("Items in order; `anchor` is the index of the one asked about.", json!({"type": "object", "properties": {"anchor": {"type": "integer"}, "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}}))),
                &["400", "401", "404", "429", "503"], false)},
            "/v1/items": {"get": operation("items", "Step 3 of 3: whole items by id.",
                json!([{"name": "ids", "in": "query", "required": true, "description": "Item ids, comma-separated (at most 100).", "schema": {"type": "string", "pattern": "^[0-9]{1,18}(,[0-9]{1,18}){0,99}$"}}]),
                ("200", ok("The items that exist.", json!({"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}}))), &read_errors, false)},
            "/v1/items/{id}": {"get": operation("item", "One whole item.", json!([path_id("id", item_id.clone())]),
                ("200", ok("The item.", json!({"$ref": "#/components/schemas/Item"}))), &["400", "401", "404", "429", "503"], false)},
            "/v1/sessions": {"get": operation("sessions", "Sessions, most recent first.", json!(session_list),
                ("200", ok("A page of sessions and the total.", object())), &read_errors, false)},
            "/v1/sessions/{id}": {
                "get": operation("session", "One session: a page of its observations, its summary, its checkpoints.", json!(one_session),
                    ("200", ok("The session.", object())), &["400", "401", "404", "429", "503"], false),
                "delete": operation("deleteSession", "Delete a session, its observations and the memory made of them.", json!([path_id("id", session_id.clone())]),
                    ("200", ok("Deleted.", object())), &write_errors, true),
            },
            "/v1/sessions/{id}/archive": {"post": operation("archiveSession", "Archive a session (it stays searchable; lists hide it).", json!([path_id("id", session_id.clone())]),
                ("200", ok("Archived.", object())), &write_errors, true)},
            "/v1/sessions/{id}/unarchive": {"post": operation("unarchiveSession", "Bring an archived session back.", json!([path_id("id", session_id)]),
                ("200", ok("Unarchived.", object())), &write_errors, true)},
            "/v1/patterns": {"get": operation("patterns", "What recurs across sessions.", json!(pattern_params),
                ("200", ok("A page of patterns.", object())), &read_errors, false)},
            "/v1/checkpoints": {"get": operation("checkpoints", "Resume points made at compactions.", json!(checkpoint_params),
                ("200", ok("A page of checkpoints.", object())), &read_errors, false)},
            "/v1/stats": {"get": operation("stats", "Counts, storage, activity per project and per day, tokens saved.",
                json!([query("days", "Days of per-day activity (`per_day`, every day listed), ending on the day of the newest event (by when events happened, not when they were stored; never after today, and today when there is none).", json!({"type": "integer", "minimum": 1, "maximum": 3650, "default": 30}))]),
                ("200", ok("Statistics.", object())), &read_errors, false)},
            "/v1/stream": {"get": {
                "operationId": "stream",
                "summary": "Live stream (server-sent events) of observations, structured observations, summaries, checkpoints and patterns as they are written. The first event is `ready`. A browser passes the token as access_token.",
                "parameters": [
                    query("kinds", "Comma-separated event names: observation, structured, summary, checkpoint, pattern.", text(200)),
                    query("project", "Only notices of this project.", text(4096)),
                    query("access_token", "The api token, for clients that cannot send headers.", text(200)),
                ],
                "responses": {
                    "200": {"description": "An endless event stream.", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    "400": error_responses(&["400"])["400"].clone(),
                    "401": error_responses(&["401"])["401"].clone(),
                    "503": error_responses(&["503"])["503"].clone(),
                },
            }},
            "/v1/capabilities": {"get": operation("capabilities", "The capability registry retrieval holds (from the files `mneme capabilities` keeps): the user's, and a project's when named.",
                json!([query("project", "A project's directory: its capabilities too.", text(4096))]),
                ("200", ok("The capabilities.", json!({"type": "object", "properties": {"capabilities": {"type": "array", "items": {"type": "object"}}}}))), &read_errors, false)},
            "/v1/capabilities/match": {"get": operation("matchCapabilities", "What would be injected with a prompt: the capabilities that fit, best first, with their scores; an empty list when none clears the threshold.",
                json!([
                    query("prompt", "The prompt (required).", text(4000)),
                    query("project", "The project's directory: its registry and the user's are matched.", text(4096)),
                    query("strategy", "flat (every capability, the default) or two-stage (categories first).", json!({"type": "string", "enum": ["flat", "two-stage"]})),
                ]),
                ("200", ok("The matches.", json!({"type": "object", "properties": {"matches": {"type": "array", "items": {"type": "object"}}, "ordinary": {"type": "number"}}}))), &read_errors, false)},
            "/v1/collections": {
                "get": operation("collections", "Collections, most recent first.", json!(paging(50, 500)),
                    ("200", ok("A page of collections and the total.", json!({"type": "object", "properties": {"total": {"type": "integer"}, "collections": {"type": "array", "items": {"$ref": "#/components/schemas/Collection"}}}}))), &read_errors, false),
                "post": {
                    "operationId": "createCollection",
                    "summary": "Create a collection from the hits of a search (query and its filters) or from item ids, exactly one of the two.",
                    "security": [{"bearer": []}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false, "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1, "maxLength": 200},
                            "description": text(4000),
                            "query": {"type": "string", "minLength": 1, "maxLength": 1000},
                            "project": text(4096),
                            "kinds": {"type": "array", "items": {"type": "string"}},
                            "file": text(4096), "concept": text(200),
                            "since": {"type": "integer", "minimum": 0}, "until": {"type": "integer", "minimum": 0},
                            "mode": {"type": "string", "enum": ["hybrid", "fts", "vector"]},
                            "limit": {"type": "integer", "minimum": 1, "maximum": 200},
                            "min_relevance": {"type": "number", "minimum": 0, "maximum": 1},
                            "item_ids": {"type": "array", "minItems": 1, "maxItems": 1000, "items": item_id.clone()},
                        },
                    }}}},
                    "responses": responses(&["400", "401", "403", "409", "413", "415", "422", "429", "503"], "201", ok("Created.", json!({"$ref": "#/components/schemas/Collection"}))),
                },
            },
            "/v1/collections/{id}": {
                "get": operation("collection", "One collection with its whole items (`item_list`).", json!([path_id("id", item_id.clone())]),
                    ("200", ok("The collection.", json!({"$ref": "#/components/schemas/Collection"}))), &["400", "401", "404", "429", "503"], false),
                "delete": operation("deleteCollection", "Delete a collection (its items stay in memory).", json!([path_id("id", item_id.clone())]),
                    ("200", ok("Deleted.", object())), &write_errors, true),
            },
            "/v1/collections/{id}/export": {"get": {
                "operationId": "exportCollection",
                "summary": "A collection and its whole items as Markdown, JSON or plain text.",
                "parameters": [path_id("id", item_id.clone()), query("format", "The format.", json!({"type": "string", "enum": ["markdown", "json", "text"], "default": "markdown"}))],
                "responses": responses(&["400", "401", "404", "429", "503"], "200", json!({"description": "The document.", "content": {
                        "text/markdown": {"schema": {"type": "string"}},
                        "application/json": {"schema": object()},
                        "text/plain": {"schema": {"type": "string"}},
                    }})),
            }},
            "/v1/collections/{id}/ask": {"get": operation("askCollection", "The items of one collection most relevant to a question.",
                json!([path_id("id", item_id.clone()),
                       {"name": "q", "in": "query", "required": true, "description": "The question.", "schema": {"type": "string", "minLength": 1, "maxLength": 1000}},
                       query("limit", "At most this many hits.", json!({"type": "integer", "minimum": 1, "maximum": 50, "default": 5}))]),
                ("200", ok("Hits, most relevant first.", json!({"type": "object", "properties": {"mode": {"type": "string"}, "hits": {"type": "array", "items": {"$ref": "#/components/schemas/SearchHit"}}}}))),
                &["400", "401", "404", "429", "503"], false)},
            "/v1/export": {"get": {
                "operationId": "export",
                "summary": "All memory as JSON lines: a `mneme` header, every `session`, `observation`, `memory_item` and `collection`, then an `end` line with the counts.",
                "responses": responses(&["401", "429", "503"], "200", json!({"description": "JSON lines.", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}})),
            }},
            "/v1/import": {"post": {
                "operationId": "import",
                "summary": "Import an export (JSON lines). Idempotent: what the store holds already is left alone.",
                "security": [{"bearer": []}],
                "requestBody": {"required": true, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                "responses": responses(&["400", "401", "403", "413", "422", "429", "503"], "200", ok("What was imported and what was there already.", json!({"type": "object", "properties": {
                        "lines": {"type": "integer"}, "sessions": {"type": "integer"}, "observations": {"type": "integer"},
                        "memory_items": {"type": "integer"}, "collections": {"type": "integer"}, "skipped": {"type": "integer"}}}))),
            }},
            "/v1/retention": {
                "get": operation("retention", "The retention policy and what its last run did.", json!([]),
                    ("200", ok("The policy.", json!({"$ref": "#/components/schemas/Retention"}))), &["401", "429", "503"], false),
                "put": {
                    "operationId": "setRetention",
                    "summary": "Set the retention policy (0 days = never; a field left out keeps its value), then apply it at once.",
                    "security": [{"bearer": []}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "properties": {
                            "archive_after_days": {"type": "integer", "minimum": 0, "maximum": 36500},
                            "delete_archived_after_days": {"type": "integer", "minimum": 0, "maximum": 36500},
                        },
                    }}}},
                    "responses": responses(&["400", "401", "403", "413", "415", "422", "429", "503"], "200", ok("The policy, and what applying it did.", json!({"$ref": "#/components/schemas/Retention"}))),
                },
            },
            "/v1/retention/apply": {"post": operation("applyRetention", "Apply the retention policy now.", json!([]),
                ("200", ok("The policy, and what applying it did.", json!({"$ref": "#/components/schemas/Retention"}))), &["401", "403", "429", "503"], true)},
            "/v1/events": {"post": {
                "operationId": "postEvents",
                "summary": "HTTP ingest: publish events to the write path, as the hook does.",
                "security": [{"bearer": []}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"oneOf": [
                    {"$ref": "#/components/schemas/Event"},
                    {"type": "array", "minItems": 1, "maxItems": 100, "items": {"$ref": "#/components/schemas/Event"}},
                ]}}}},
                "responses": event_responses,
            }},
        },
    })
}

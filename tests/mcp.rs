//! The MCP server with rmcp's own client, over stdio (`mneme mcp` spawned as an agent host
//! would) and over Streamable HTTP (`/mcp` on the api): initialise, list the tools, the
//! three-step search, save a memory and find it.

use crate::api::{Http, seed};
use crate::harness::{App, binary};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TOKEN: &str = "mcp-token-0123456789";

type Client = RunningService<RoleClient, ()>;

/// Call a tool and return its text, and whether it reported an error.
async fn call(client: &Client, tool: &str, arguments: Value) -> (String, bool) {
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .unwrap_or_else(|e| panic!("calling {tool}: {e}"));
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    (text, result.is_error == Some(true))
}

/// The first `#id` in a compact index.
fn first_id(index: &str) -> i64 {
    let start = index
        .find('#')
        .unwrap_or_else(|| panic!("no hit in {index}"))
        + 1;
    index[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

async fn exercise(client: &Client, secret_word: &str) {
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("mneme")
    );
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or_default()
            .contains("three steps")
    );

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for wanted in [
        "search",
        "timeline",
        "get_observations",
        "save_memory",
        "by_file",
        "by_concept",
        "stats",
        "how_to_use_memory",
        "create_collection",
        "list_collections",
        "export_collection",
        "ask_collection",
        "capabilities",
        "match_capabilities",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    // No registry was synced here: the tools say so, through retrieval.
    let (none, error) = call(
        client,
        "match_capabilities",
        json!({"prompt": "deploy this to staging"}),
    )
    .await;
    assert!(!error && none.contains("no capability fits"), "{none}");
    let (listed, error) = call(client, "capabilities", json!({})).await;
    assert!(
        !error && listed.contains("mneme capabilities scan"),
        "{listed}"
    );
    let search = tools.iter().find(|t| t.name == "search").unwrap();
    let description = search.description.as_deref().unwrap_or_default();
    assert!(
        description.contains("timeline") && description.contains("get_observations"),
        "search does not teach the three steps: {description}"
    );
    assert!(search.input_schema.get("properties").is_some());

    // The three steps.
    let (index, error) = call(
        client,
        "search",
        json!({"query": "websocket backoff", "limit": 5}),
    )
    .await;
    assert!(!error, "{index}");
    assert!(index.contains("websocket"), "{index}");
    let id = first_id(&index);
    let (timeline, error) = call(client, "timeline", json!({"id": id, "radius": 2})).await;
    assert!(!error, "{timeline}");
    assert!(timeline.contains(&format!("> #{id}")), "{timeline}");
    let (items, error) = call(client, "get_observations", json!({"ids": [id]})).await;
    assert!(!error, "{items}");
    let items: Value = serde_json::from_str(&items).unwrap();
    assert_eq!(items[0]["id"], id);

    // Mistakes come back as readable tool errors, not broken sessions.
    let (message, error) = call(client, "get_observations", json!({"ids": []})).await;
    assert!(error, "{message}");
    let (message, error) = call(client, "timeline", json!({"id": 99_999_999})).await;
    assert!(error && message.contains("not_found"), "{message}");

    // Save a memory through the pipeline, then find it by search, concept and file.
    let (saved, error) = call(
        client,
        "save_memory",
        json!({
            "text": format!("the staging database is called {secret_word} and lives in eu-west"),
            "title": "staging database name",
            "concepts": ["infrastructure"],
            "files": ["deploy/staging.toml"],
            "project": "/work/web",
        }),
    )
    .await;
    assert!(!error && saved.starts_with("saved"), "{saved}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let (found, _) = call(
            client,
            "search",
            json!({"query": secret_word, "kinds": ["memory"]}),
        )
        .await;
        if found.contains("staging database name") {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "the saved memory was never found: {found}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(found.contains("[memory]"), "{found}");
    let (by_concept, _) = call(
        client,
        "by_concept",
        json!({"concept": "infrastructure", "query": secret_word}),
    )
    .await;
    assert!(by_concept.contains("staging database name"), "{by_concept}");
    let (by_file, _) = call(client, "by_file", json!({"file": "staging.toml"})).await;
    assert!(by_file.contains("staging database name"), "{by_file}");

    let (stats, error) = call(client, "stats", json!({})).await;
    assert!(!error && stats.contains("\"sessions\""), "{stats}");
    // Collections: from a search, listed, asked, exported; mistakes are readable errors.
    let name = format!("backoff {secret_word}");
    let (made, error) = call(
        client,
        "create_collection",
        json!({"name": name, "query": "websocket reconnect backoff", "project": "/work/web"}),
    )
    .await;
    assert!(!error && made.starts_with("collection #"), "{made}");
    let collection = first_id(&made);
    let (again, error) = call(
        client,
        "create_collection",
        json!({"name": name, "item_ids": [id]}),
    )
    .await;
    assert!(error && again.contains("collection_exists"), "{again}");
    let (listed, error) = call(client, "list_collections", json!({})).await;
    assert!(!error && listed.contains(&name), "{listed}");
    let (answer, error) = call(
        client,
        "ask_collection",
        json!({"id": collection, "question": "what is the reconnect backoff capped at", "limit": 1}),
    )
    .await;
    assert!(!error && answer.contains("reconnect policy"), "{answer}");
    let (document, error) = call(client, "export_collection", json!({"id": collection})).await;
    assert!(
        !error && document.starts_with(&format!("# {name}")),
        "{document}"
    );
    assert!(document.contains("capped at thirty seconds"), "{document}");
    let (text, error) = call(
        client,
        "export_collection",
        json!({"id": collection, "format": "text"}),
    )
    .await;
    assert!(!error && text.contains("[memory]"), "{text}");
    let (missing, error) = call(
        client,
        "ask_collection",
        json!({"id": 99_999_999, "question": "anything"}),
    )
    .await;
    assert!(error && missing.contains("not_found"), "{missing}");

    let (guide, _) = call(client, "how_to_use_memory", json!({})).await;
    assert!(guide.contains("get_observations"), "{guide}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_and_streamable_http_searches_in_three_steps_and_saves_memories() {
    let mut app = App::start().await;
    let base = app
        .start_api(api::ApiArgs {
            token: Some(TOKEN.to_owned()),
            ..Default::default()
        })
        .await;
    let mut http = Http::new(&base);
    http.token = TOKEN.to_owned();
    seed(&app, &http, "mcp-1").await;

    // stdio: `mneme mcp` as a child process, as Claude Code runs it.
    let mut command = tokio::process::Command::new(binary("mneme"));
    command.arg("mcp").envs(app.env());
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ().serve(transport).await.expect("initialise over stdio");
    exercise(&client, "heron").await;
    client.cancel().await.unwrap();

    // Streamable HTTP: refused without the token, served with it.
    let refused = http
        .client
        .post(format!("{base}/mcp"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::UNAUTHORIZED);
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(TOKEN),
    );
    let client = ().serve(transport).await.expect("initialise over http");
    exercise(&client, "kestrel").await;
    client.cancel().await.unwrap();
}

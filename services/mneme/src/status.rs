//! `mneme status`.

use common::CommonArgs;
use common::nats::AskError;
use serde_json::{Value, json};
use std::time::Duration;

/// Services whose health `status` reports.
pub const SERVICES: [&str; 5] = ["ingest", "retrieval", "compressor", "pattern", "api"];

pub async fn status(common: &CommonArgs, as_json: bool) -> anyhow::Result<()> {
    let report = collect(common).await;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "nats      {} ({})",
        common::nats::shown(&common.nats_url),
        if report["nats"]["reachable"] == true {
            "reachable"
        } else {
            "unreachable"
        }
    );
    for service in SERVICES {
        let health = &report["services"][service];
        if health["ok"] == true {
            println!(
                "{service:<9} up {}s, {} messages handled; {}",
                health["uptime_ms"].as_i64().unwrap_or(0) / 1000,
                health["handled"],
                health["detail"].as_str().unwrap_or("")
            );
        } else {
            println!("{service:<10} not answering");
        }
    }
    if let Some(reading) = report
        .get("pipeline")
        .and_then(|p| serde_json::from_value::<crate::progress::Reading>(p.clone()).ok())
    {
        println!("pipeline  {}", crate::progress::line(&reading));
        if let Some(b) = &reading.embedding
            && b.done < b.total
        {
            println!(
                "          semantic search does not cover {} items yet (full-text does); {}",
                b.total - b.done,
                if b.rate_per_s > 0.0 {
                    format!("{} left", crate::progress::about(b.eta_ms))
                } else {
                    "embedding is starting".to_owned()
                }
            );
        }
        if let Some((ahead, eta)) = reading.refining() {
            println!(
                "          {ahead} items are searched by static vectors until the model reaches them ({} left)",
                crate::progress::about(eta)
            );
        }
    }
    println!(
        "store     {} ({} bytes)",
        report["store"]["path"].as_str().unwrap_or(""),
        report["store"]["size_bytes"]
    );
    for key in [
        "sessions",
        "observations",
        "memory_items",
        "structured_observations",
        "session_summaries",
        "checkpoints",
        "patterns",
        "dead_letters",
    ] {
        println!("{key:<23} {}", report[key]);
    }
    let team = &report["team"];
    if let Some(error) = team["error"].as_str() {
        println!("team      {error}");
    } else if !team.is_null() {
        let shared: Vec<&str> = team["shared"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        println!(
            "team      member {} of the hub at {}; sharing {} (`mneme team status` shows the link)",
            team["member"],
            team["hub"]
                .as_array()
                .map(|a| a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
            if shared.is_empty() {
                "nothing".to_owned()
            } else {
                shared.join(", ")
            }
        );
    }
    let spool = &report["spool"];
    println!(
        "{:<23} {} ({} of {} bytes; {} dropped over the bounds, {} set aside)",
        "spooled",
        report["spooled"],
        spool["bytes"],
        spool["max_bytes"],
        spool["dropped"],
        spool["set_aside"]
    );
    Ok(())
}

/// Probe one service only, quickly and without touching the store, so a container health check
/// costs one NATS round trip; an error (and so a non-zero exit) says why it is not healthy.
pub async fn check(common: &CommonArgs, service: &str) -> anyhow::Result<()> {
    let client = tokio::time::timeout(Duration::from_secs(2), connect(common))
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "nats at {} unreachable",
                common::nats::shown(&common.nats_url)
            )
        })?;
    let health = probe(&client, service).await;
    if health["ok"] != true {
        anyhow::bail!(
            "{service} is not healthy: {}",
            health["detail"].as_str().unwrap_or("no detail")
        );
    }
    println!("{service} ok: {}", health["detail"].as_str().unwrap_or(""));
    Ok(())
}

async fn collect(common: &CommonArgs) -> Value {
    // This machine's hook spool, found where the hook itself would put it.
    let config = mneme_hook::config::HookConfig::from_env();
    let spool = mneme_hook::spool::Spool::new(&config.spool_dir).stats();
    let mut report = json!({
        "nats": {"url": common::nats::shown(&common.nats_url), "reachable": false},
        "services": {},
        "sessions": 0, "observations": 0, "memory_items": 0, "dead_letters": 0,
        "structured_observations": 0, "session_summaries": 0, "checkpoints": 0, "patterns": 0,
        "spooled": spool.pending,
        "spool": {
            "dir": config.spool_dir.display().to_string(),
            "bytes": spool.bytes,
            "max_bytes": config.spool_bounds.max_bytes,
            "oldest_ms": spool.oldest_ms,
            "max_age_days": config.spool_bounds.max_age.as_secs() / 86_400,
            "dropped": spool.dropped,
            "set_aside": spool.set_aside,
        },
        "store": {"path": common.db_path().display().to_string(), "exists": false, "size_bytes": 0},
    });
    // The team this machine is in, from its file; the link itself is `mneme team status`'s.
    report["team"] = match common::team::Team::load(&common.home_dir()) {
        Ok(Some(team)) => json!({
            "member": team.member,
            "hub": team.hub,
            "shared": team.shared.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        }),
        Ok(None) => Value::Null,
        Err(error) => json!({"error": format!("{error:#}")}),
    };
    let client = tokio::time::timeout(Duration::from_secs(2), connect(common))
        .await
        .ok()
        .and_then(Result::ok);
    if let Some(client) = &client {
        report["nats"]["reachable"] = json!(true);
        for service in SERVICES {
            report["services"][service] = probe(client, service).await;
        }
        report["pipeline"] =
            serde_json::to_value(crate::progress::read(client).await).unwrap_or_default();
    } else {
        for service in SERVICES {
            report["services"][service] = json!({"ok": false, "detail": "nats unreachable"});
        }
    }
    if let Ok(store) = store::Store::open_read_only(&common.db_path()).await {
        report["store"]["exists"] = json!(true);
        report["store"]["size_bytes"] = json!(store.size_bytes());
        if let Ok(counts) = archive::counts(store.pool()).await {
            for (table, n) in counts.tables() {
                report[table] = json!(n);
            }
        }
        store.close().await;
    }
    report
}

async fn connect(common: &CommonArgs) -> anyhow::Result<async_nats::Client> {
    let options = common::nats::options(common, "cli").await?;
    Ok(options.connect(&common.nats_url).await?)
}

async fn probe(client: &async_nats::Client, service: &str) -> Value {
    let answer = common::nats::request::<proto::HealthReply>(
        client,
        &proto::subjects::health_subject(service),
        &proto::HealthRequest {},
        Duration::from_millis(1000),
    )
    .await;
    match answer {
        Ok(h) => {
            let backlogs: Vec<Value> = h
                .backlogs
                .iter()
                .map(|b| json!({"name": b.name, "done": b.done, "total": b.total, "rate_per_s": b.rate_per_s, "eta_ms": b.eta_ms}))
                .collect();
            json!({"ok": h.ok, "version": h.version, "detail": h.detail, "uptime_ms": h.uptime_ms, "handled": h.handled, "backlogs": backlogs})
        }
        Err(AskError::Request(error)) if error.kind() == async_nats::RequestErrorKind::TimedOut => {
            json!({"ok": false, "detail": "no answer within 1s"})
        }
        Err(AskError::Request(_)) => json!({"ok": false, "detail": "not running"}),
        Err(AskError::Unreadable(_)) => json!({"ok": false, "detail": "unreadable health reply"}),
    }
}

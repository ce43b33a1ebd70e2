//! One hook run: read the payload, normalise, deliver (publish, or spool and replay), and print
//! context when the host can take it.

use crate::config::HookConfig;
use crate::spool::Spool;
use crate::trace::HookTrace;
use hosts::adapter::{self, Want};
use opentelemetry::trace::SpanKind;
use proto::context_request::Moment;
use proto::event::Payload;
use proto::{Event, Message as _};
use std::io::{Read as _, Write};
use std::time::{Duration, Instant};

/// The largest payload read from stdin; larger input is recorded as invalid, not parsed.
const MAX_INPUT_BYTES: u64 = 32 * 1024 * 1024;

/// What happened to the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Published and acknowledged by JetStream; `replayed` spooled events went first.
    Published { replayed: usize },
    /// Written to the spool, with the reason it could not be published now.
    Spooled { reason: String },
    /// `MNEME_DISABLED` is set.
    Disabled,
    /// Not sent: another of mneme's hooks captures the same action (Cursor running Claude
    /// Code's hooks while mneme's Cursor hooks are installed).
    Duplicate,
    /// Neither published nor spooled: the event is lost and the reason was logged.
    Failed { reason: String },
}

/// Run the hook for `host` with the process's stdin and stdout. Never fails: every problem is
/// logged to the hook log and the function returns normally, so the process exits 0.
pub fn main(host: &str) {
    let config = HookConfig::from_env();
    if config.disabled {
        return;
    }
    let input = read_stdin(config.stdin_timeout);
    let mut stdout = std::io::stdout().lock();
    let outcome = run(&config, host, input, &mut stdout);
    let _ = stdout.flush();
    match outcome {
        Outcome::Spooled { reason } => log(&config, &format!("spooled: {reason}")),
        Outcome::Failed { reason } => log(&config, &format!("lost: {reason}")),
        Outcome::Published { .. } | Outcome::Disabled | Outcome::Duplicate => {}
    }
}

/// Run the hook on `input`, writing the host's output (if any) to `out`.
pub fn run(
    config: &HookConfig,
    host: &str,
    input: Result<Vec<u8>, String>,
    out: &mut impl Write,
) -> Outcome {
    if config.disabled {
        return Outcome::Disabled;
    }
    let sanitizer = match sanitize::Sanitizer::new(&sanitize::Config::default()) {
        Ok(sanitizer) => sanitizer,
        Err(error) => {
            return Outcome::Failed {
                reason: format!("sanitizer: {error}"),
            };
        }
    };
    let Some(found) = hosts::find(host) else {
        // A wrong host name is a broken installation: the payload is kept for a human, with
        // the reason, through the dead-letter path, and nothing is printed.
        let mut event = adapter::envelope(proto::Agent::Unspecified);
        let input = input.unwrap_or_default();
        let reason = format!(
            "unknown host {host:?}; known hosts: {}",
            hosts::names().join(", ")
        );
        adapter::invalid(&mut event, &input, reason, &sanitizer);
        let trace = HookTrace::start(&event);
        return deliver_only(config, &event, trace);
    };
    let mut event = match input {
        Ok(input) => adapter::normalise(found, &input, &sanitizer),
        Err(reason) => {
            let mut event = adapter::envelope(found.agent);
            adapter::invalid(&mut event, &[], reason, &sanitizer);
            event
        }
    };
    adapter::fit(&mut event, &sanitizer);
    let host = &found.adapter;

    if found.agent == proto::Agent::ClaudeCode
        && event.agent() == proto::Agent::Cursor
        && cursor_hooks_installed(&event)
    {
        // Cursor ran Claude Code's hooks for an action its own mneme hook captures too.
        if let Some(text) = (host.render)(&event, None) {
            let _ = writeln!(out, "{text}");
        }
        return Outcome::Duplicate;
    }

    let trace = HookTrace::start(&event);
    let state = config.home.join("hook-state");
    let want = (host.wants)(&event, &state);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            if let Some(text) = (host.render)(&event, None) {
                let _ = writeln!(out, "{text}");
            }
            return spool_or_fail(config, &event, &format!("tokio: {error}"));
        }
    };
    let (outcome, context) = runtime.block_on(deliver(
        config,
        &event,
        want,
        host.max_context_chars,
        &trace,
    ));
    if let Some(text) = (host.render)(&event, context.as_deref()) {
        let _ = writeln!(out, "{text}");
    }
    // The host has its answer before the spans leave.
    let _ = out.flush();
    export_trace(config, &runtime, trace, &outcome);
    outcome
}

/// Publish (or spool) an event that takes no context.
fn deliver_only(config: &HookConfig, event: &Event, trace: HookTrace) -> Outcome {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let outcome = runtime
                .block_on(deliver(config, event, Want::Nothing, 0, &trace))
                .0;
            export_trace(config, &runtime, trace, &outcome);
            outcome
        }
        Err(error) => spool_or_fail(config, event, &format!("tokio: {error}")),
    }
}

/// Send the run's spans when an OTLP endpoint is configured. The export is bounded by
/// `MNEME_HOOK_OTLP_TIMEOUT_MS`, and without an endpoint nothing is built at all, so tracing
/// costs the agent nothing unless it was asked for.
fn export_trace(
    config: &HookConfig,
    runtime: &tokio::runtime::Runtime,
    trace: HookTrace,
    outcome: &Outcome,
) {
    let Some(endpoint) = &config.otel_endpoint else {
        return;
    };
    let outcome = match outcome {
        Outcome::Published { .. } => "published",
        Outcome::Spooled { .. } => "spooled",
        Outcome::Disabled => "disabled",
        Outcome::Duplicate => "duplicate",
        Outcome::Failed { .. } => "failed",
    };
    if let Err(reason) = runtime.block_on(trace.export(endpoint, config.otel_timeout, outcome)) {
        log(config, &format!("traces not exported: {reason}"));
    }
}

/// Whether mneme's Cursor hooks are installed for this event's project or user, read cheaply
/// as text: the command line `…mneme-hook cursor` in a Cursor `hooks.json`.
fn cursor_hooks_installed(event: &Event) -> bool {
    let mut files = Vec::new();
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        files.push(std::path::PathBuf::from(home).join(".cursor/hooks.json"));
    }
    for dir in [
        std::env::var("CURSOR_PROJECT_DIR").unwrap_or_default(),
        event.project.clone(),
        event.cwd.clone(),
    ] {
        if !dir.is_empty() {
            files.push(std::path::Path::new(&dir).join(".cursor/hooks.json"));
        }
    }
    files.iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|text| {
            text.lines()
                .any(|line| line.contains("mneme-hook") && line.contains(" cursor"))
        })
    })
}

/// Publish (or spool) the event and, when the host can take it, fetch context at the same time.
async fn deliver(
    config: &HookConfig,
    event: &Event,
    want: Want,
    max_chars: usize,
    trace: &HookTrace,
) -> (Outcome, Option<String>) {
    let client = match connect(config).await {
        Ok(client) => client,
        Err(reason) => return (spool_or_fail(config, event, &reason), None),
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    let spool = Spool::new(&config.spool_dir);
    let publish = async {
        let span = trace.child("hook.publish", SpanKind::Producer, &event.subject());
        let parent = trace.traceparent(span.id());
        let outcome = if spool.has_pending() {
            // Older events are waiting: queue behind them so each session stays in order.
            if let Err(error) = spool.write(&event.id, &event.encode_to_vec()) {
                return Outcome::Failed {
                    reason: format!("spool write: {error}"),
                };
            }
            keep_bounds(config, &spool);
            match replay(config, &jetstream, &spool, Some((&event.id, &parent))).await {
                // Published once its own file is gone, even while an event refused for
                // itself still waits before it.
                Ok(replayed) if !spool.holds(&event.id) => Outcome::Published { replayed },
                Ok(_) => Outcome::Spooled {
                    reason: "replay budget spent or another replay running".to_owned(),
                },
                Err(reason) => Outcome::Spooled { reason },
            }
        } else {
            match publish(config, &jetstream, event, &parent).await {
                Ok(()) => Outcome::Published { replayed: 0 },
                Err(reason) => spool_or_fail(config, event, &reason),
            }
        };
        let error = match &outcome {
            Outcome::Published { .. } | Outcome::Disabled | Outcome::Duplicate => None,
            Outcome::Spooled { reason } | Outcome::Failed { reason } => Some(reason.as_str()),
        };
        trace.end(span, error);
        outcome
    };
    let context = async {
        let ask = |moment| fetch_context(config, &client, event, moment, max_chars, trace);
        match want {
            Want::Nothing => None,
            Want::SessionStart => ask(Moment::SessionStart).await,
            Want::Prompt => ask(Moment::Prompt).await,
            Want::StartAndPrompt => {
                let (start, prompt) = tokio::join!(ask(Moment::SessionStart), ask(Moment::Prompt));
                let both: Vec<String> = start.into_iter().chain(prompt).collect();
                (!both.is_empty()).then(|| both.join("\n\n"))
            }
        }
    };
    tokio::join!(publish, context)
}

async fn connect(config: &HookConfig) -> Result<async_nats::Client, String> {
    let mut options = async_nats::ConnectOptions::new()
        .name("mneme-hook")
        // The only inbox a hook identity may read, so no other identity's replies reach it.
        .custom_inbox_prefix(proto::access::Role::Hook.inbox_prefix())
        .connection_timeout(config.connect_timeout)
        .max_reconnects(1);
    if let Some(token) = &config.nats_token {
        options = options.token(token.clone());
    }
    if let Some(path) = &config.nats_nkey {
        let seed = std::fs::read_to_string(path)
            .map_err(|e| format!("nats nkey seed {}: {e}", path.display()))?;
        options = options.nkey(seed.trim().to_owned());
    }
    if let Some(creds) = &config.nats_creds {
        options = options
            .credentials_file(creds)
            .await
            .map_err(|e| format!("nats credentials {}: {e}", creds.display()))?;
    }
    // The hook's log may be read by whoever debugs a host: the URL goes there without its
    // password or token.
    let shown = sanitize::url::without_credentials(&config.nats_url);
    match tokio::time::timeout(config.connect_timeout, options.connect(&config.nats_url)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(format!("connect {shown}: {error}")),
        Err(_) => Err(format!(
            "connect {shown}: no answer within {:?}",
            config.connect_timeout
        )),
    }
}

/// Publish one event with its id as `Nats-Msg-Id` and wait, bounded, for the ack.
async fn publish(
    config: &HookConfig,
    jetstream: &async_nats::jetstream::Context,
    event: &Event,
    traceparent: &str,
) -> Result<(), String> {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
    headers.insert(proto::subjects::TRACEPARENT_HEADER, traceparent);
    let send = async {
        jetstream
            .publish_with_headers(event.subject(), headers, event.encode_to_vec().into())
            .await
            .map_err(|e| format!("publish: {e}"))?
            .await
            .map_err(|e| format!("publish ack: {e}"))
    };
    match tokio::time::timeout(config.ack_timeout, send).await {
        Ok(Ok(_ack)) => Ok(()),
        Ok(Err(reason)) => Err(reason),
        Err(_) => Err(format!("no publish ack within {:?}", config.ack_timeout)),
    }
}

/// Replay spooled events in order, each acked before its file is removed. Returns how many were
/// replayed; stops at the first failure or when the budget is spent. `current` is this run's
/// event id and `traceparent`, so the event that queued behind the spool keeps its trace.
async fn replay(
    config: &HookConfig,
    jetstream: &async_nats::jetstream::Context,
    spool: &Spool,
    current: Option<(&str, &str)>,
) -> Result<usize, String> {
    let lock = spool.try_lock().map_err(|e| format!("spool lock: {e}"))?;
    let Some(_lock) = lock else { return Ok(0) };
    let deadline = Instant::now() + config.replay_budget;
    let mut replayed = 0;
    // An event NATS refused while the one after it went through is refused for itself (too
    // big, a subject it may not use), not for the connection: it is skipped for this replay,
    // and set aside after `MAX_FAILURES` replays, so it cannot block every later event. Two
    // refusals in a row mean NATS is not taking anything: the replay stops there.
    let mut skipped = std::collections::HashSet::new();
    let mut suspect: Option<(std::path::PathBuf, String)> = None;
    loop {
        let pending: Vec<_> = spool
            .pending()
            .map_err(|e| format!("spool list: {e}"))?
            .into_iter()
            .filter(|path| !skipped.contains(path))
            .collect();
        if pending.is_empty() {
            return match suspect {
                Some((_, reason)) => Err(reason),
                None => Ok(replayed),
            };
        }
        for path in pending {
            if Instant::now() > deadline {
                return Ok(replayed);
            }
            let bytes = std::fs::read(&path).map_err(|e| format!("spool read: {e}"))?;
            match Event::decode(bytes.as_slice()) {
                Ok(event) => {
                    let parent = match current {
                        Some((id, parent)) if id == event.id => parent.to_owned(),
                        _ => traceparent(&event),
                    };
                    if let Err(reason) = publish(config, jetstream, &event, &parent).await {
                        if suspect.is_some() {
                            return Err(reason);
                        }
                        skipped.insert(path.clone());
                        suspect = Some((path, reason));
                        continue;
                    }
                }
                Err(error) => {
                    // A damaged file must not block every later event; keep it aside for a human.
                    let _ = spool.set_aside(&path, true);
                    log(
                        config,
                        &format!(
                            "spool file {} is damaged ({error}); moved aside",
                            path.display()
                        ),
                    );
                    continue;
                }
            }
            std::fs::remove_file(&path).map_err(|e| format!("spool remove: {e}"))?;
            spool.clear_failures(&path);
            replayed += 1;
            if let Some((refused, reason)) = suspect.take() {
                set_aside_when_refused_again(config, spool, &refused, &reason);
            }
        }
    }
}

/// Count one more refusal of a spooled event whose successor went through, and set it aside
/// once it has been refused `MAX_FAILURES` times.
fn set_aside_when_refused_again(
    config: &HookConfig,
    spool: &Spool,
    path: &std::path::Path,
    reason: &str,
) {
    match spool.count_failure(path) {
        Ok(count) if count >= crate::spool::MAX_FAILURES => match spool.set_aside(path, false) {
            Ok(aside) => log(
                config,
                &format!(
                    "spooled event {} refused {count} times while later events went through ({reason}); set aside as {}",
                    path.display(),
                    aside.display()
                ),
            ),
            Err(error) => log(
                config,
                &format!("cannot set aside {}: {error}", path.display()),
            ),
        },
        Ok(_) => {}
        Err(error) => log(
            config,
            &format!("cannot count a refusal of {}: {error}", path.display()),
        ),
    }
}

/// Keep the spool within its bounds after a write, saying in the hook log what was dropped.
fn keep_bounds(config: &HookConfig, spool: &Spool) {
    let now = hosts::adapter::now_ms();
    match spool.enforce(config.spool_bounds, now) {
        Ok(0) => {}
        Ok(dropped) => log(
            config,
            &format!(
                "spool over its bounds ({} bytes, {} days): dropped the {dropped} oldest events (listed in {})",
                config.spool_bounds.max_bytes,
                config.spool_bounds.max_age.as_secs() / 86_400,
                spool.dir().join("dropped.log").display()
            ),
        ),
        Err(error) => log(config, &format!("spool bounds: {error}")),
    }
}

/// Replay this machine's spool now, if anything waits in it; returns how many events went out.
/// `mneme up` calls this periodically, so events spooled by the last hook runs of a day do not
/// wait for the next hook run.
pub async fn drain_spool(config: &HookConfig) -> Result<usize, String> {
    let spool = Spool::new(&config.spool_dir);
    if !spool.has_pending() {
        return Ok(0);
    }
    let client = connect(config).await?;
    let jetstream = async_nats::jetstream::new(client);
    replay(config, &jetstream, &spool, None).await
}

/// Ask retrieval for context within the budget; `None` on any failure or silence.
async fn fetch_context(
    config: &HookConfig,
    client: &async_nats::Client,
    event: &Event,
    moment: Moment,
    max_chars: usize,
    trace: &HookTrace,
) -> Option<String> {
    let prompt = match (&event.payload, moment) {
        (Some(Payload::Prompt(p)), Moment::Prompt) => p.text.clone(),
        (_, Moment::Prompt) => return None,
        _ => String::new(),
    };
    let span = trace.child(
        "hook.context",
        SpanKind::Client,
        proto::subjects::RETRIEVAL_CONTEXT,
    );
    let parent = trace.traceparent(span.id());
    let answer = ask_context(config, client, event, moment, max_chars, prompt, &parent).await;
    trace.end(span, answer.as_ref().err().map(String::as_str));
    answer.ok().flatten()
}

/// One context request with `traceparent` in its headers; silence and errors are `Err`.
async fn ask_context(
    config: &HookConfig,
    client: &async_nats::Client,
    event: &Event,
    moment: Moment,
    max_chars: usize,
    prompt: String,
    traceparent: &str,
) -> Result<Option<String>, String> {
    let request = proto::ContextRequest {
        moment: moment as i32,
        agent: event.agent,
        project: event.project.clone(),
        session_id: event.session_id.clone(),
        prompt,
        max_chars: max_chars as u32,
        // The service default applies.
        budget_tokens: 0,
    };
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(proto::subjects::TRACEPARENT_HEADER, traceparent);
    let ask = client.request_with_headers(
        proto::subjects::RETRIEVAL_CONTEXT,
        headers,
        request.encode_to_vec().into(),
    );
    let reply = tokio::time::timeout(config.context_timeout, ask)
        .await
        .map_err(|_| format!("no context within {:?}", config.context_timeout))?
        .map_err(|e| format!("context request: {e}"))?;
    let reply =
        proto::ContextReply::decode(reply.payload).map_err(|e| format!("context reply: {e}"))?;
    Ok(Some(reply.text).filter(|t| !t.trim().is_empty()))
}

/// A W3C traceparent whose trace id is the event id, for events replayed from the spool by a
/// later run (whose own spans belong to another event).
fn traceparent(event: &Event) -> String {
    let span = proto::new_event_id();
    format!("00-{}-{}-01", event.id, &span[16..])
}

fn spool_or_fail(config: &HookConfig, event: &Event, reason: &str) -> Outcome {
    let spool = Spool::new(&config.spool_dir);
    match spool.write(&event.id, &event.encode_to_vec()) {
        Ok(_) => {
            keep_bounds(config, &spool);
            Outcome::Spooled {
                reason: reason.to_owned(),
            }
        }
        Err(error) => Outcome::Failed {
            reason: format!("{reason}; spool write failed: {error}"),
        },
    }
}

/// Read the whole of stdin, bounded in size and in time: a host that never closes stdin must
/// not hang the hook.
fn read_stdin(timeout: Duration) -> Result<Vec<u8>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut input = Vec::new();
        let result = std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut input)
            .map(|_| input);
        let _ = tx.send(result);
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(input)) if input.len() as u64 > MAX_INPUT_BYTES => {
            Err(format!("payload larger than {MAX_INPUT_BYTES} bytes"))
        }
        Ok(Ok(input)) => Ok(input),
        Ok(Err(error)) => Err(format!("reading stdin: {error}")),
        Err(_) => Err(format!("no payload on stdin within {timeout:?}")),
    }
}

/// Append one line to the hook log of the configured data directory.
pub fn log_line(line: &str) {
    log(&HookConfig::from_env(), line);
}

/// Append one line to `$MNEME_HOME/hook.log`; the hook has no other place to complain.
fn log(config: &HookConfig, line: &str) {
    if config.debug {
        eprintln!("mneme-hook: {line}");
    }
    let _ = crate::spool::private_dir(&config.home);
    if let Ok(mut file) = crate::spool::private_options()
        .create(true)
        .append(true)
        .open(config.home.join("hook.log"))
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let _ = writeln!(file, "{now} {line}");
    }
}

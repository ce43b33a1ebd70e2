//! The optional LLM compressor: rewrites a heuristic summary or checkpoint through any
//! OpenAI-compatible `/chat/completions` endpoint (Ollama, Kimi/Moonshot, OpenAI, vLLM).
//!
//! It only ever runs after the heuristic row is committed, so a failure loses nothing: on an
//! error, a timeout, an answer that does not match the schema, or an exhausted budget, the
//! heuristic row simply stands. Budgets are hard: before each call the worst case (every byte
//! of the prompt as a token, plus the answer's `max_tokens`) is reserved in
//! `compressor_llm_usage`, and the call is not made when the reservation would pass the daily or
//! the per-session budget. What the model sees has been sanitised twice: ingest stored it
//! sanitised, and it goes through `sanitize` again here.

use crate::db::CheckpointRow;
use crate::heuristic::{self, CheckpointFields, SessionError, SummaryFields};
use crate::walk::Written;
use anyhow::Context as _;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::Duration;

/// Settings of the LLM compressor.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// Base URL, up to and including `/v1`.
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub daily_tokens: i64,
    pub session_tokens: i64,
    pub timeout: Duration,
    pub max_tokens: i64,
}

/// Why the LLM result was not used.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("token budget exhausted: {0}")]
    Budget(String),
    #[error("llm request timed out after {0:?}")]
    Timeout(Duration),
    #[error("llm request failed: {0}")]
    Http(String),
    #[error("llm answer does not match the schema: {0}")]
    Malformed(String),
    #[error("store: {0}")]
    Store(#[from] sqlx::Error),
}

/// Tokens added per call for the chat framing (roles, separators), on top of the text.
const FRAMING_TOKENS: i64 = 32;
/// How much of the session the model is shown.
const MAX_PROMPTS: usize = 12;
const MAX_STEPS: usize = 60;

pub struct Llm {
    config: LlmConfig,
    http: reqwest::Client,
    pool: sqlx::SqlitePool,
    sanitizer: sanitize::Sanitizer,
}

impl Llm {
    pub fn new(config: LlmConfig, pool: sqlx::SqlitePool) -> anyhow::Result<Llm> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .context("building the http client")?;
        let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())
            .context("building the sanitiser")?;
        Ok(Llm {
            config,
            http,
            pool,
            sanitizer,
        })
    }

    /// Rewrite the summary or checkpoint `written` announced; `None` when the heuristic row
    /// stands (the reason is logged).
    pub async fn refine(&self, written: &Written) -> anyhow::Result<Option<Written>> {
        let result = match written.kind {
            "summary" => self.refine_summary(written).await,
            "checkpoint" => self.refine_checkpoint(written).await,
            _ => return Ok(None),
        };
        match result {
            Ok(better) => Ok(better),
            Err(LlmError::Store(error)) => Err(error.into()),
            Err(reason) => {
                tracing::info!(%reason, kind = written.kind, id = written.id, "keeping the heuristic result");
                Ok(None)
            }
        }
    }

    async fn refine_summary(&self, written: &Written) -> Result<Option<Written>, LlmError> {
        type Row = (
            String,
            String,
            String,
            String,
            String,
            String,
            String,
            i64,
            String,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT status, request, done, decisions, errors, open_items, files_modified,
                     revision, project
                 FROM session_summaries WHERE id = ?",
        )
        .bind(written.id)
        .fetch_optional(&self.pool)
        .await?;
        let Some((status, request, done, decisions, errors, open_items, files, revision, project)) =
            row
        else {
            return Ok(None);
        };
        if revision != written.revision {
            return Ok(None);
        }
        let draft = SummaryFields {
            request,
            done: from_json(&done),
            decisions: from_json(&decisions),
            errors: from_json(&errors),
            open_items: from_json(&open_items),
        };
        let files: Vec<String> = from_json(&files);
        let system = "You summarise a coding agent's session for its future self. Answer with \
             one JSON object and nothing else, with exactly these keys: \"request\" (string: what \
             the user asked), \"done\" (array of strings: what was done), \"decisions\" (array of \
             strings), \"errors\" (array of objects {\"error\": string, \"resolved\": boolean}), \
             \"open_items\" (array of strings: what remains). Be short and factual; keep file \
             names exact.";
        let user = format!(
            "{}\nDraft summary (JSON):\n{}\nFiles changed: {}",
            self.session_record(&written.session_id).await?,
            serde_json::to_string(&draft).unwrap_or_default(),
            files.join(", ")
        );
        let fields: SummaryFields = self.complete(&written.session_id, system, &user).await?;
        validate_summary(&fields)?;
        let text = heuristic::render_summary(&fields, &files, &project, &status);
        let updated: Option<(i64,)> = sqlx::query_as(
            "UPDATE session_summaries SET request = ?, done = ?, decisions = ?, errors = ?,
                 open_items = ?, text = ?, compressor = 'llm', revision = revision + 1,
                 updated_at = ?
             WHERE id = ? AND revision = ? RETURNING revision",
        )
        .bind(&fields.request)
        .bind(to_json(&fields.done))
        .bind(to_json(&fields.decisions))
        .bind(serde_json::to_string(&fields.errors).unwrap_or_default())
        .bind(to_json(&fields.open_items))
        .bind(&text)
        .bind(common::time::now_ms())
        .bind(written.id)
        .bind(revision)
        .fetch_optional(&self.pool)
        .await?;
        Ok(updated.map(|(revision,)| Written {
            revision,
            compressor: "llm".to_owned(),
            trigger: written.trigger.clone(),
            ..written.clone()
        }))
    }

    async fn refine_checkpoint(&self, written: &Written) -> Result<Option<Written>, LlmError> {
        let row: Option<CheckpointRow> = sqlx::query_as(
            "SELECT id, session_id, project, trigger, summary, decisions, open_tasks,
                 host_summary, tokens_before, tokens_after, text, revision, occurred_at
             FROM checkpoints WHERE id = ?",
        )
        .bind(written.id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        if row.revision != written.revision {
            return Ok(None);
        }
        let system = "You write a resume point for a coding agent whose context is about to be \
             cleared. Answer with one JSON object and nothing else, with exactly these keys: \
             \"summary\" (string: where the work stands), \"decisions\" (array of strings: key \
             decisions), \"open_tasks\" (array of strings: what remains to do). Be short and \
             factual; keep file names exact.";
        let user = format!(
            "{}\nDraft checkpoint (JSON):\n{}",
            self.session_record(&row.session_id).await?,
            serde_json::to_string(&row.fields()).unwrap_or_default()
        );
        let fields: CheckpointFields = self.complete(&row.session_id, system, &user).await?;
        validate_checkpoint(&fields)?;
        let text = heuristic::render_checkpoint(&fields, &row.host_summary);
        let updated: Option<(i64,)> = sqlx::query_as(
            "UPDATE checkpoints SET summary = ?, decisions = ?, open_tasks = ?, text = ?,
                 compressor = 'llm', revision = revision + 1, updated_at = ?
             WHERE id = ? AND revision = ? RETURNING revision",
        )
        .bind(&fields.summary)
        .bind(to_json(&fields.decisions))
        .bind(to_json(&fields.open_tasks))
        .bind(&text)
        .bind(common::time::now_ms())
        .bind(row.id)
        .bind(row.revision)
        .fetch_optional(&self.pool)
        .await?;
        Ok(updated.map(|(revision,)| Written {
            revision,
            compressor: "llm".to_owned(),
            ..written.clone()
        }))
    }

    /// Up to [`MAX_REWRITES`] other wordings of a search query: the words an answer to it
    /// would use, which the person asking may not. Spent from today's budget, and from a
    /// per-day budget of searches as large as one session's (`search:<day>`), so rewriting can
    /// never take what summaries need on a day of many searches.
    pub async fn rewrite_query(&self, query: &str, project: &str) -> Result<Vec<String>, LlmError> {
        let system = "You help search a developer's memory of past sessions with a coding \
             assistant (prompts, the assistant's answers, commands and their output). Given a \
             question, write up to three search queries that would find the answer: the words \
             and names the answer itself would likely contain, a paraphrase, and the likely \
             tools, files or terms. Keep each under twelve words; do not answer the question. \
             Answer with one JSON object and nothing else: {\"queries\": [string, ...]}.";
        let user = if project.is_empty() {
            format!("Question: {}", heuristic::cut(query, MAX_QUERY_CHARS))
        } else {
            format!(
                "Project: {project}\nQuestion: {}",
                heuristic::cut(query, MAX_QUERY_CHARS)
            )
        };
        let day = common::time::utc_day(common::time::now_ms());
        let rewrites: Rewrites = self
            .complete_within(
                &format!("search:{day}"),
                system,
                &user,
                self.config.max_tokens.min(REWRITE_TOKENS),
                self.config.timeout.min(REWRITE_TIMEOUT),
            )
            .await?;
        let queries = rewrites
            .queries
            .into_iter()
            .map(|q| q.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|q| !q.is_empty() && q.chars().count() <= MAX_QUERY_CHARS)
            .filter(|q| !q.eq_ignore_ascii_case(query.trim()))
            .take(MAX_REWRITES)
            .collect::<Vec<_>>();
        if queries.is_empty() {
            return Err(LlmError::Malformed(
                "no usable query in the answer".to_owned(),
            ));
        }
        Ok(queries)
    }

    /// The session as the model sees it: its prompts and the titles of its structured
    /// observations, sanitised.
    async fn session_record(&self, session_id: &str) -> Result<String, LlmError> {
        let prompts: Vec<(String,)> = sqlx::query_as(
            "SELECT substr(body, 1, 300) FROM observations
             WHERE session_id = ? AND kind = 'prompt' ORDER BY id LIMIT ?",
        )
        .bind(session_id)
        .bind(MAX_PROMPTS as i64)
        .fetch_all(&self.pool)
        .await?;
        let steps: Vec<(String,)> = sqlx::query_as(
            "SELECT title FROM (SELECT id, title FROM structured_observations
                 WHERE session_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
        )
        .bind(session_id)
        .bind(MAX_STEPS as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut out = String::from("User prompts:\n");
        for (p,) in prompts {
            out.push_str("- ");
            out.push_str(&heuristic::gist(&p, 300));
            out.push('\n');
        }
        out.push_str("Steps taken:\n");
        for (s,) in steps {
            out.push_str("- ");
            out.push_str(&s);
            out.push('\n');
        }
        Ok(out)
    }

    /// One chat completion whose answer must parse as `T`, within the budgets.
    pub async fn complete<T: DeserializeOwned>(
        &self,
        session_id: &str,
        system: &str,
        user: &str,
    ) -> Result<T, LlmError> {
        self.complete_within(
            session_id,
            system,
            user,
            self.config.max_tokens,
            self.config.timeout,
        )
        .await
    }

    /// [`Llm::complete`] with an answer of at most `max_tokens` and a wait of at most
    /// `timeout`.
    async fn complete_within<T: DeserializeOwned>(
        &self,
        session_id: &str,
        system: &str,
        user: &str,
        max_tokens: i64,
        timeout: Duration,
    ) -> Result<T, LlmError> {
        let (system, _) = self.sanitizer.clean_text(system);
        let (user, _) = self.sanitizer.clean_text(user);
        // No tokenizer makes more tokens than the text has bytes, so this bounds the prompt.
        let reserve = (system.len() + user.len()) as i64 + max_tokens + FRAMING_TOKENS;
        self.reserve(session_id, reserve).await?;
        let body = json!({
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "max_tokens": max_tokens,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        });
        let url = format!("{}/chat/completions", self.config.url.trim_end_matches('/'));
        let mut request = self.http.post(url).timeout(timeout).json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let answer = async {
            let response = request.send().await?;
            let status = response.status();
            let text = response.text().await?;
            Ok::<_, reqwest::Error>((status, text))
        }
        .await;
        let (status, text) = match answer {
            Ok(answer) => answer,
            Err(error) if error.is_timeout() => {
                return Err(LlmError::Timeout(timeout));
            }
            Err(error) => return Err(LlmError::Http(error.to_string())),
        };
        if !status.is_success() {
            return Err(LlmError::Http(format!(
                "status {status}: {}",
                heuristic::cut(&text, 200)
            )));
        }
        let envelope: Value = serde_json::from_str(&text)
            .map_err(|e| LlmError::Malformed(format!("response is not json: {e}")))?;
        if let Some(used) = envelope
            .pointer("/usage/total_tokens")
            .and_then(Value::as_i64)
        {
            // Settle the reservation at what was really spent (never more than reserved:
            // max_tokens bounds the answer and the byte count bounds the prompt).
            self.settle(session_id, reserve, used.min(reserve)).await?;
        }
        let content = envelope
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| LlmError::Malformed("no choices[0].message.content".to_owned()))?;
        serde_json::from_str(strip_fences(content)).map_err(|e| LlmError::Malformed(e.to_string()))
    }

    /// Reserve `tokens` for a call in today's and the session's budgets, or refuse.
    async fn reserve(&self, session_id: &str, tokens: i64) -> Result<(), LlmError> {
        let day = common::time::utc_day(common::time::now_ms());
        let mut tx = store::begin_write(&self.pool).await?;
        let (spent_today,): (i64,) = sqlx::query_as(
            "SELECT coalesce(sum(tokens), 0) FROM compressor_llm_usage WHERE day = ?",
        )
        .bind(&day)
        .fetch_one(&mut *tx)
        .await?;
        let (spent_session,): (i64,) = sqlx::query_as(
            "SELECT coalesce(sum(tokens), 0) FROM compressor_llm_usage WHERE session_id = ?",
        )
        .bind(session_id)
        .fetch_one(&mut *tx)
        .await?;
        if spent_today + tokens > self.config.daily_tokens {
            return Err(LlmError::Budget(format!(
                "{spent_today} of {} tokens spent today, this call may need {tokens}",
                self.config.daily_tokens
            )));
        }
        if spent_session + tokens > self.config.session_tokens {
            return Err(LlmError::Budget(format!(
                "{spent_session} of {} tokens spent on this session, this call may need {tokens}",
                self.config.session_tokens
            )));
        }
        sqlx::query(
            "INSERT INTO compressor_llm_usage (day, session_id, tokens, calls) VALUES (?, ?, ?, 1)
             ON CONFLICT (day, session_id) DO UPDATE SET
                 tokens = tokens + excluded.tokens, calls = calls + 1",
        )
        .bind(&day)
        .bind(session_id)
        .bind(tokens)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn settle(&self, session_id: &str, reserved: i64, used: i64) -> Result<(), LlmError> {
        let day = common::time::utc_day(common::time::now_ms());
        let mut tx = store::begin_write(&self.pool).await?;
        sqlx::query(
            "UPDATE compressor_llm_usage SET tokens = max(0, tokens - ? + ?)
             WHERE day = ? AND session_id = ?",
        )
        .bind(reserved)
        .bind(used)
        .bind(&day)
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Other wordings of a search query kept from one answer, at most.
pub const MAX_REWRITES: usize = 3;
/// The longest query sent to the model, and the longest wording kept from its answer.
const MAX_QUERY_CHARS: usize = 300;
/// The largest answer asked for a rewrite: three short queries in JSON.
const REWRITE_TOKENS: i64 = 200;
/// The longest wait for a rewrite: someone is waiting for the search.
const REWRITE_TIMEOUT: Duration = Duration::from_secs(8);

/// What the model answers to a rewrite.
#[derive(serde::Deserialize)]
struct Rewrites {
    queries: Vec<String>,
}

/// Models often wrap JSON in a Markdown fence even when asked not to.
fn strip_fences(content: &str) -> &str {
    let trimmed = content.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

const MAX_ITEMS: usize = 40;
const MAX_ITEM_CHARS: usize = 600;

fn check_list(name: &str, items: &[String]) -> Result<(), LlmError> {
    if items.len() > MAX_ITEMS {
        return Err(LlmError::Malformed(format!(
            "{name} has {} items",
            items.len()
        )));
    }
    if let Some(bad) = items
        .iter()
        .find(|i| i.trim().is_empty() || i.chars().count() > MAX_ITEM_CHARS)
    {
        return Err(LlmError::Malformed(format!(
            "{name} has an empty or overlong item ({} chars)",
            bad.chars().count()
        )));
    }
    Ok(())
}

/// The checks a summary must pass beyond its JSON shape.
pub fn validate_summary(fields: &SummaryFields) -> Result<(), LlmError> {
    if fields.request.trim().is_empty() || fields.request.chars().count() > 2_000 {
        return Err(LlmError::Malformed(
            "request is empty or overlong".to_owned(),
        ));
    }
    check_list("done", &fields.done)?;
    check_list("decisions", &fields.decisions)?;
    check_list("open_items", &fields.open_items)?;
    let errors: Vec<String> = fields
        .errors
        .iter()
        .map(|e: &SessionError| e.error.clone())
        .collect();
    check_list("errors", &errors)
}

/// The checks a checkpoint must pass beyond its JSON shape.
pub fn validate_checkpoint(fields: &CheckpointFields) -> Result<(), LlmError> {
    if fields.summary.trim().is_empty() || fields.summary.chars().count() > 4_000 {
        return Err(LlmError::Malformed(
            "summary is empty or overlong".to_owned(),
        ));
    }
    check_list("decisions", &fields.decisions)?;
    check_list("open_tasks", &fields.open_tasks)
}

fn from_json<T: DeserializeOwned + Default>(text: &str) -> T {
    serde_json::from_str(text).unwrap_or_default()
}

fn to_json(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

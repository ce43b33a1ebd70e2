//! The walk of a session: its observations after the pattern service's cursor, in id order,
//! and the patterns they show (errors, fixes, procedures, statements, reflections). Everything
//! runs inside the caller's write transaction, through the statements of [`crate::db`].

use crate::db::{self, Occurrence, Pattern, Updates};
use crate::detect;
use crate::workflow::{self, Outcome, Run};
use observation::identity::relative;
use observation::row::Observation;
use serde_json::json;
use sqlx::SqliteConnection;
use std::collections::BTreeSet;

/// The longest list of steps a procedure keeps.
const MAX_STEPS: usize = 12;

/// Read the session's observations after its cursor, up to `upto`, and record the patterns
/// they show. A redelivered notice finds the cursor past it and changes nothing.
pub async fn walk_session(
    tx: &mut SqliteConnection,
    session_id: &str,
    upto: i64,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let cursor = db::cursor(tx, session_id).await?;
    if cursor >= upto {
        return Ok(());
    }
    let raws = db::observations_after(tx, session_id, cursor, upto).await?;
    for raw in &raws {
        match raw.kind.as_str() {
            "tool_failure" if detect::is_not_a_failure(raw.output.as_deref().unwrap_or("")) => {}
            "tool_failure" => failure(tx, raw, now, updates).await?,
            "post_tool" => success(tx, raw, now, updates).await?,
            "prompt" => {
                turn(tx, raw, now, updates).await?;
                prompt(tx, raw, now, updates).await?;
            }
            "stop" => turn(tx, raw, now, updates).await?,
            "session_end" => {
                turn(tx, raw, now, updates).await?;
                reflect(tx, raw, now, updates).await?;
            }
            "workflow" => reported(tx, raw, now, updates).await?,
            _ => {}
        }
    }
    let read_to = upto.min(raws.last().map_or(upto, |r| r.id).max(cursor));
    db::save_cursor(tx, session_id, read_to, now).await
}

/// A failure: remember it for fixes, and make it an error pattern once its signature was seen
/// twice.
async fn failure(
    tx: &mut SqliteConnection,
    raw: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let sig = detect::signature(raw);
    let hash = sig.hash();
    db::insert_failure(tx, raw, &hash, &sig).await?;
    let seen = db::failures_of(tx, &hash).await?;
    if seen.len() < 2 {
        return Ok(());
    }
    let occurrences: Vec<Occurrence<'_>> = seen
        .iter()
        .map(|(id, session, project, at)| Occurrence {
            observation_id: *id,
            role: "error",
            session_id: session,
            project,
            occurred_at: *at,
        })
        .collect();
    let pattern = Pattern {
        hash,
        kind: "error",
        title: format!("Recurring error: {}", sig.describe()),
        text: format!(
            "{} (tool {}). Seen in earlier sessions; check how it was fixed before retrying.",
            sig.describe(),
            sig.tool
        ),
        signature: json!(sig),
        files: (!sig.file.is_empty())
            .then(|| sig.file.clone())
            .into_iter()
            .collect(),
    };
    updates.push(db::record(tx, &pattern, &occurrences, raw, now).await?);
    Ok(())
}

/// A success: it fixes the session's open failures on the same command or file, which makes a
/// fix pattern and a procedure (the steps between).
async fn success(
    tx: &mut SqliteConnection,
    raw: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let subject = detect::success_subject(raw);
    if subject.is_empty() {
        return Ok(());
    }
    let open = db::open_failures(tx, &raw.session_id, &subject).await?;
    let Some((first_failure, ..)) = open.first().cloned() else {
        return Ok(());
    };
    db::mark_fixed(tx, &raw.session_id, &subject, raw.id).await?;
    let (_, signature_hash, error_class, tool, _) = open.last().cloned().expect("not empty");
    let steps = steps_between(tx, &raw.session_id, first_failure, raw.id, &raw.project).await?;
    let (command, file) = detect::command_and_file(raw);
    let what = if command.is_empty() {
        format!("{tool} on {file}")
    } else {
        format!("`{command}`")
    };
    let fix_line = detect::command_line(raw);
    let how = if fix_line.is_empty() {
        String::new()
    } else {
        format!(" Working command: `{}`.", cut(&fix_line, 200))
    };
    let step_text = if steps.names.is_empty() {
        "when retried".to_owned()
    } else {
        format!("after {}", steps.names.join(" → "))
    };
    let mut links: Vec<Occurrence<'_>> = open
        .iter()
        .map(|(id, _, _, _, at)| Occurrence {
            observation_id: *id,
            role: "error",
            session_id: &raw.session_id,
            project: &raw.project,
            occurred_at: *at,
        })
        .collect();
    links.push(Occurrence {
        observation_id: raw.id,
        role: "fix",
        session_id: &raw.session_id,
        project: &raw.project,
        occurred_at: raw.occurred_at,
    });
    let mut files = steps.files.clone();
    if !file.is_empty() && !files.contains(&file) {
        files.insert(0, file.clone());
    }
    let fix = Pattern {
        hash: detect::pattern_hash(&["fix", &signature_hash, &subject]),
        kind: "fix",
        title: format!("Fix: {what} failing with {error_class}"),
        text: format!("{what} failed ({error_class}) and succeeded {step_text}.{how}",),
        signature: json!({"error": signature_hash, "subject": subject, "error_class": error_class}),
        files: files.clone(),
    };
    updates.push(db::record(tx, &fix, &links, raw, now).await?);
    if !steps.names.is_empty() {
        let sequence = steps.names.join(" → ");
        let procedure = Pattern {
            hash: detect::pattern_hash(&["procedure", &subject, &steps.shape.join(" → ")]),
            kind: "procedure",
            title: format!("Procedure: getting {what} to pass"),
            text: format!("When {what} fails ({error_class}): {sequence}, then run it again.{how}"),
            signature: json!({"subject": subject, "steps": steps.names}),
            files,
        };
        let occurrence = [Occurrence {
            observation_id: raw.id,
            role: "success",
            session_id: &raw.session_id,
            project: &raw.project,
            occurred_at: raw.occurred_at,
        }];
        updates.push(db::record(tx, &procedure, &occurrence, raw, now).await?);
    }
    Ok(())
}

struct Steps {
    names: Vec<String>,
    /// The steps without their files, consecutive repeats folded: what makes two procedures
    /// the same procedure.
    shape: Vec<String>,
    files: Vec<String>,
}

/// The tool steps between a failure and its fix, consecutive repeats folded.
async fn steps_between(
    tx: &mut SqliteConnection,
    session_id: &str,
    after: i64,
    before: i64,
    project: &str,
) -> sqlx::Result<Steps> {
    let rows = db::turn_calls(tx, session_id, after, before).await?;
    let mut names: Vec<String> = Vec::new();
    let mut shape: Vec<String> = Vec::new();
    let mut files = BTreeSet::new();
    for row in rows
        .iter()
        .filter(|row| row.kind == "post_tool" && !workflow::only_looks(row))
    {
        let (command, file) = detect::command_and_file(row);
        let (name, kind) = if !command.is_empty() {
            let name = format!("{}({command})", row.tool_name);
            (name.clone(), name)
        } else if !file.is_empty()
            && matches!(row.tool_name.as_str(), "Edit" | "Write" | "MultiEdit")
        {
            files.insert(relative(&file, project));
            (format!("{}({file})", row.tool_name), row.tool_name.clone())
        } else {
            (row.tool_name.clone(), row.tool_name.clone())
        };
        if names.last() != Some(&name) {
            names.push(name);
        }
        if shape.last() != Some(&kind) {
            shape.push(kind);
        }
    }
    if names.len() > MAX_STEPS {
        let dropped = names.len() - MAX_STEPS;
        names.drain(..dropped);
        names.insert(0, format!("… {dropped} steps"));
    }
    Ok(Steps {
        names,
        shape,
        files: files.into_iter().collect(),
    })
}

/// Decisions, preferences and architecture choices stated in a prompt.
async fn prompt(
    tx: &mut SqliteConnection,
    raw: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    for (kind, sentence) in detect::statements(&raw.body) {
        let key = detect::statement_key(&sentence);
        let label = match kind {
            detect::StatementKind::Decision => "Decision",
            detect::StatementKind::Preference => "Preference",
            detect::StatementKind::Architecture => "Architecture",
        };
        let pattern = Pattern {
            hash: detect::pattern_hash(&[kind.as_str(), &key]),
            kind: kind.as_str(),
            title: format!("{label}: {}", cut(&sentence, 120)),
            text: sentence.clone(),
            signature: json!({"statement": key}),
            files: Vec::new(),
        };
        let occurrence = [Occurrence {
            observation_id: raw.id,
            role: "statement",
            session_id: &raw.session_id,
            project: &raw.project,
            occurred_at: raw.occurred_at,
        }];
        updates.push(db::record(tx, &pattern, &occurrence, raw, now).await?);
    }
    Ok(())
}

/// At session end, what kept failing and was never fixed becomes a reflection.
async fn reflect(
    tx: &mut SqliteConnection,
    raw: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    for (hash, subject, tool, error_class) in db::unfixed_signatures(tx, &raw.session_id).await? {
        let failures = db::unfixed_failures(tx, &raw.session_id, &hash).await?;
        let what = subject
            .split_once(':')
            .map_or(subject.clone(), |(_, s)| s.to_owned());
        let what = if what.is_empty() { tool.clone() } else { what };
        let times = failures.len();
        let situation = match failures.first() {
            Some((first, _)) => situation_before(tx, &raw.session_id, *first).await?,
            None => None,
        };
        let context = situation.map_or(String::new(), |s| format!("While working on \"{s}\": "));
        let pattern = Pattern {
            hash: detect::pattern_hash(&["reflection", &hash]),
            kind: "reflection",
            title: format!("Unresolved: `{what}` failed with {error_class}"),
            text: format!(
                "{context}`{what}` failed {times} time{} with {error_class} and was not made to \
                 work before the session ended; try another approach next time.",
                if times == 1 { "" } else { "s" }
            ),
            signature: json!({"error": hash, "subject": subject}),
            files: Vec::new(),
        };
        let occurrences: Vec<Occurrence<'_>> = failures
            .iter()
            .map(|(id, at)| Occurrence {
                observation_id: *id,
                role: "reflection",
                session_id: &raw.session_id,
                project: &raw.project,
                occurred_at: *at,
            })
            .collect();
        updates.push(db::record(tx, &pattern, &occurrences, raw, now).await?);
    }
    Ok(())
}

/// The request being worked on before an observation: the latest prompt that says what the
/// work is (not "continue" or a host's notice), among the few before it.
async fn situation_before(
    tx: &mut SqliteConnection,
    session_id: &str,
    before: i64,
) -> sqlx::Result<Option<String>> {
    let prompts = db::prompts_before(tx, session_id, before, 6).await?;
    Ok(prompts
        .iter()
        .find(|p| workflow::is_situation(&p.body))
        .map(|p| workflow::situation_text(&p.body)))
}

/// A turn ended (the next prompt, the end of the turn or of the session): the run of its tool
/// calls, when it did something worth repeating, counts for its workflow. A turn closed twice
/// (at its end, then by the next prompt) counts once: the occurrence is its prompt.
async fn turn(
    tx: &mut SqliteConnection,
    closer: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let prompts = db::prompts_before(tx, &closer.session_id, closer.id, 1).await?;
    let Some(asked) = prompts.first() else {
        return Ok(());
    };
    let calls = db::turn_calls(tx, &closer.session_id, asked.id, closer.id).await?;
    let Some(run) = workflow::run_of(&calls) else {
        return Ok(());
    };
    let Some(situation) = situation_before(tx, &closer.session_id, asked.id + 1).await? else {
        return Ok(());
    };
    let at = calls.last().map_or(closer.occurred_at, |c| c.occurred_at);
    record_run(tx, &run, &situation, asked.id, at, closer, now, updates).await
}

/// A run reported on purpose (`record_workflow`): its steps, outcome and reason are in the
/// observation's input, its situation in the body.
async fn reported(
    tx: &mut SqliteConnection,
    raw: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let input: serde_json::Value = raw
        .input
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or_default();
    let strings = |key: &str| -> Vec<String> {
        input
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let failed = input.get("outcome").and_then(serde_json::Value::as_str) == Some("failure");
    let reason = input
        .get("reason")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let Some(run) = workflow::reported_run(&strings("steps"), &strings("files"), failed, reason)
    else {
        return Ok(());
    };
    let situation = workflow::situation_text(&raw.body);
    record_run(
        tx,
        &run,
        &situation,
        raw.id,
        raw.occurred_at,
        raw,
        now,
        updates,
    )
    .await
}

/// Count a run for its workflow (one per shape and files), keeping the steps and the
/// situation of the last run that worked, and the last failure, in the workflow's signature.
#[allow(clippy::too_many_arguments)]
async fn record_run(
    tx: &mut SqliteConnection,
    run: &Run,
    situation: &str,
    observation_id: i64,
    at: i64,
    raw: &Observation,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let shape = run.shape();
    // Like every pattern's, the hash leaves out the project: the same steps on the same
    // (project-relative) files in two checkouts of one repository are one workflow.
    let hash = detect::pattern_hash(&["workflow", &shape.join(" → "), &run.files.join(",")]);
    let role = match run.outcome {
        Outcome::Success => "success",
        Outcome::Failure { .. } => "failure",
    };
    let so_far = db::workflow_so_far(tx, &hash, observation_id, role).await?;
    let (mut signature, mut worked, mut failed, counted) = match so_far {
        Some((signature, worked, failed, counted)) => (
            serde_json::from_str::<serde_json::Value>(&signature).unwrap_or_else(|_| json!({})),
            worked,
            failed,
            counted,
        ),
        None => (json!({}), 0, 0, false),
    };
    let steps = run.step_texts();
    match &run.outcome {
        Outcome::Success => {
            worked += i64::from(!counted);
            signature["steps"] = json!(steps);
            signature["situation"] = json!(situation);
        }
        Outcome::Failure { step, reason } => {
            failed += i64::from(!counted);
            signature["last_failure"] = json!({"at": at, "step": step, "reason": reason});
            if signature.get("steps").is_none() {
                signature["steps"] = json!(steps);
                signature["situation"] = json!(situation);
            }
        }
    }
    signature["shape"] = json!(shape);
    signature["files"] = json!(run.files);
    let shown_situation = signature["situation"]
        .as_str()
        .unwrap_or(situation)
        .to_owned();
    let pattern = Pattern {
        hash,
        kind: "workflow",
        title: format!("Workflow: {}", cut(&shown_situation, 120)),
        text: workflow_text(&signature, &shown_situation, worked, failed),
        signature: signature.clone(),
        files: run.files.clone(),
    };
    let occurrence = [Occurrence {
        observation_id,
        role,
        session_id: &raw.session_id,
        project: &raw.project,
        occurred_at: at,
    }];
    let updated = db::record(tx, &pattern, &occurrence, raw, now).await?;
    if let Some(updated) = &updated {
        db::set_signature(tx, updated.id, &signature).await?;
    }
    updates.push(updated);
    Ok(())
}

/// How a workflow reads, in search and in the context injected with a prompt: the situation,
/// the steps, and how often they worked and failed.
fn workflow_text(
    signature: &serde_json::Value,
    situation: &str,
    worked: i64,
    failed: i64,
) -> String {
    let steps: Vec<&str> = signature["steps"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let times = |n: i64| match n {
        1 => "once".to_owned(),
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    };
    let mut record = if worked > 0 {
        format!("Worked {}", times(worked))
    } else {
        "Never worked yet".to_owned()
    };
    if failed > 0 {
        let last = &signature["last_failure"];
        let day = common::time::utc_day(last["at"].as_i64().unwrap_or(0));
        record.push_str(&format!(
            "; failed {}, last on {day} at {}: {}",
            times(failed),
            last["step"].as_str().unwrap_or("a step"),
            last["reason"].as_str().unwrap_or("it did not work")
        ));
    }
    format!(
        "When asked: {situation}\nSteps: {}\n{record}.",
        steps.join(" → ")
    )
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

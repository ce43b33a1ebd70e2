//! `mneme-bench histories`: session-level recall on generated long multi-session histories of
//! a developer working with a coding assistant (issue 15).
//!
//! Each history is a project with 32 to 44 sessions over about six months (see [`SESSIONS`]
//! for why not more), each session 6 or 8 turns, the assistant's turns long (800 to 3,000
//! characters of prose and code). Most
//! sessions are filler on varied coding work; some carry planted facts in a user turn (and
//! sometimes an assistant turn confirming them), and every history asks questions whose
//! evidence is one or more of its sessions, in seven categories: single-session facts,
//! preferences stated in passing, aggregation over 2 to 4 sessions, temporal reasoning (dates,
//! months, "first", "most recently", "N weeks before an event"), knowledge updates (the
//! evidence is the latest statement; whether it outranks the older ones is reported too), what
//! only the assistant said deep in a long answer, and two dated events set against each other
//! in one question (both sessions are the evidence).
//! Filler sessions share the questions' vocabulary on purpose, and questions often paraphrase
//! the statement, so full-text search alone cannot simply match words.
//!
//! The generator is deterministic (a small LCG seeded by the history's index). Histories with
//! an even index are the development half, odd ones the test half; `MNEME_BENCH_HISTORIES`
//! sets how many (12 by default), and `MNEME_BENCH_HALF=dev` or `test` runs one half only.
//! `MNEME_BENCH_MISSES=hybrid` (or another mode) prints every question that mode misses.
//! `MNEME_BENCH_AS_OF=none` asks the questions without a time (so today, long after the
//! history), as a user asks about a history imported later; an RFC 3339 time asks as of it.
//!
//! Each history goes through the real entry points: its sessions are written as Claude Code
//! transcripts (one JSONL file a session, one project) and loaded by the release
//! `mneme import claude-code`, with ingest, retrieval, the compressor and the pattern service
//! running in process over a real NATS server, as `mneme up` runs them. Once everything is
//! stored, indexed and embedded by the model, every question is asked on the search subject
//! with `as_of_ms` one day after the last session, in fts, vector and hybrid mode, and in
//! hybrid mode grouped by session.

use super::{Bed, percentile, sorted};
use anyhow::Context as _;
use clap::Parser as _;
use proto::Message as _;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const DAY_MS: i64 = common::time::DAY_MS;

// ---------------------------------------------------------------------------------------------
// Randomness: a 64-bit LCG, so the histories are the same on every machine and every run.

struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        let mut rng = Lcg(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D);
        // The first outputs of an LCG from a small seed are poorly mixed: skip a few.
        for _ in 0..8 {
            rng.next();
        }
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn range(&mut self, low: usize, high_inclusive: usize) -> usize {
        low + self.below(high_inclusive - low + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() as f64 / (1u64 << 31) as f64) < p
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// `n` distinct indices below `len`, in random order.
    fn distinct(&mut self, len: usize, n: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..len).collect();
        self.shuffle(&mut all);
        all.truncate(n);
        all
    }

    fn hex(&mut self, digits: usize) -> String {
        (0..digits)
            .map(|_| char::from_digit(self.below(16) as u32, 16).unwrap_or('0'))
            .collect()
    }

    /// Replace each `{name}` whose name is in `vars` or is a vocabulary pool; anything else
    /// (code braces, format strings) is kept as it is. A pool named twice in one template gives
    /// the same word both times, so a paragraph keeps talking about the same function.
    fn fill(&mut self, template: &str, vars: &[(&str, &str)]) -> String {
        let mut chosen: Vec<(&str, &'static str)> = Vec::new();
        let mut out = String::with_capacity(template.len() + 64);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let name = &after[..len];
            if !name.is_empty() && after[len..].starts_with('}') {
                if let Some((_, value)) = vars.iter().find(|(k, _)| *k == name) {
                    out.push_str(value);
                    rest = &after[len + 1..];
                    continue;
                }
                if let Some(pool) = pool(name) {
                    let word = match chosen.iter().find(|(k, _)| *k == name) {
                        Some(&(_, word)) => word,
                        None => {
                            let word = self.pick(pool);
                            chosen.push((name, word));
                            word
                        }
                    };
                    out.push_str(word);
                    rest = &after[len + 1..];
                    continue;
                }
            }
            out.push('{');
            rest = after;
        }
        out.push_str(rest);
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Vocabulary shared by every template.

fn pool(name: &str) -> Option<&'static [&'static str]> {
    let items: &'static [&'static str] = match name {
        "svc" => &[
            "billing service",
            "auth service",
            "search indexer",
            "notification worker",
            "ingest pipeline",
            "report generator",
            "API gateway",
            "job scheduler",
            "image resizer",
            "export job",
            "webhook dispatcher",
            "user profile API",
        ],
        "file" => &[
            "src/handlers/orders.rs",
            "src/db/pool.rs",
            "api/routes/users.py",
            "web/src/components/Cart.tsx",
            "internal/queue/consumer.go",
            "src/config.rs",
            "scripts/deploy.sh",
            "tests/integration/test_checkout.py",
            "lib/cache/client.ts",
            "migrations/0042_add_invoices.sql",
            "src/search/ranker.rs",
            "cmd/server/main.go",
            ".github/workflows/ci.yml",
            "docker/Dockerfile",
            "src/metrics.rs",
            "app/services/invoice_builder.py",
        ],
        "func" => &[
            "parse_invoice",
            "retry_with_backoff",
            "load_config",
            "handle_webhook",
            "build_query",
            "flush_batch",
            "resolve_user",
            "render_report",
            "compute_totals",
            "schedule_job",
            "normalize_address",
            "open_connection",
        ],
        "err" => &[
            "connection reset by peer",
            "context deadline exceeded",
            "duplicate key value violates unique constraint \"orders_external_id_key\"",
            "TypeError: Cannot read properties of undefined (reading 'id')",
            "thread 'main' panicked at 'index out of bounds: the len is 0 but the index is 0'",
            "ECONNREFUSED 127.0.0.1:5432",
            "container exited with OOMKilled",
            "assertion `left == right` failed",
            "429 Too Many Requests",
            "SSL: CERTIFICATE_VERIFY_FAILED",
            "deadlock detected",
            "ModuleNotFoundError: No module named 'yaml'",
        ],
        "mate" => &[
            "Priya", "Tomasz", "Aiko", "Diego", "Fatima", "Lukas", "Mei", "Jonas", "Amara", "Sven",
        ],
        "tool" => &[
            "ripgrep",
            "jq",
            "hyperfine",
            "cargo-nextest",
            "pytest",
            "k6",
            "pgbench",
            "tokio-console",
            "perf",
            "strace",
        ],
        "num" => &[
            "3", "5", "8", "12", "20", "32", "64", "128", "250", "500", "40", "17",
        ],
        "table" => &[
            "orders",
            "invoices",
            "users",
            "events",
            "sessions",
            "line_items",
            "audit_log",
            "payments",
        ],
        "route" => &[
            "/api/v2/orders",
            "/healthz",
            "/api/users/:id",
            "/webhooks/stripe",
            "/reports/export",
            "/search",
            "/api/v1/invoices",
        ],
        _ => return None,
    };
    Some(items)
}

// ---------------------------------------------------------------------------------------------
// Filler sessions: topics of everyday coding work, each with openers, follow-ups and the
// paragraphs the assistant answers with.

struct Topic {
    openers: &'static [&'static str],
    follow: &'static [&'static str],
    paras: &'static [&'static str],
}

const TOPICS: &[Topic] = &[
    // Debugging.
    Topic {
        openers: &[
            "The {svc} keeps failing with `{err}` when I run it locally. Can you help me figure out why?",
            "I'm seeing `{err}` in the logs of the {svc} since this morning, mostly around {route}. Where would you start?",
            "Tests in {file} started failing after my last change, the error is `{err}`. Can you take a look?",
            "Something is off in {func}: it returns the wrong totals for some customers. I suspect rounding, but I'm not sure.",
            "Getting intermittent `{err}` from the {svc} under load. It only shows up with more than {num} requests in flight.",
            "Can you help me debug why {func} hangs forever when the {table} table is empty?",
        ],
        follow: &[
            "I added the logging you suggested, and the failing call is the one in {file}. What next?",
            "That didn't fix it, the error still shows up roughly once every {num} runs.",
            "Looks like the connection is closed before {func} returns. How do I keep it alive?",
            "Can you write a regression test for this case?",
            "The stack trace points at line {num} of {file}, the message is `{err}`.",
            "Good catch. Can you check whether the same bug exists in the {svc}?",
            "Makes sense. Let's add a guard and a clear error message instead of panicking.",
            "I ran it under {tool} and the time goes into {func}, not the database.",
        ],
        paras: &[
            "The error `{err}` usually means the other side gave up before we finished, so the first thing to check is which side closes the connection. In the {svc} the client keeps a pool of connections, and when a connection sits idle longer than the server's timeout, the next request on it fails exactly like this. The fix is not to retry blindly but to make the pool discard idle connections before the server does.",
            "Looking at {file}, the problem is in how {func} handles the empty case: it assumes there is at least one row and indexes into the result without checking. When the {table} table is empty, the iterator yields nothing and the code waits on a channel nobody writes to. That explains both the hang and why it only happens on a fresh database.",
            "I would approach this in three steps. First, reproduce it reliably: run the failing test in a loop with a fixed seed until it fails, and keep the log of that run. Second, narrow it down: add a span around {func} and the calls it makes, so the log shows which one is slow or fails. Third, fix the cause and keep the loop running for a while, to be sure the failure is gone rather than just rarer.",
            "There is a subtle ordering issue here. The handler for {route} spawns the write and returns before it completes, so a read that follows immediately can see the old state. Under light load the write almost always wins the race, which is why it looked fine locally; under load the read overtakes it.",
            "The stack trace is a bit misleading: the panic is reported in {func}, but the bad value is produced earlier, when the request is parsed. The parser accepts an empty list and the code downstream assumes it never is. I'd validate at the boundary and return a 400 with a message naming the field that was empty.",
            "Here is what I changed: the retry loop now backs off exponentially with jitter, starting at 50 ms and capped at 2 seconds, and it gives up after five attempts with an error that names the operation. I also made the timeout configurable, because the right value for the {svc} is not the right one for a batch job.",
            "To confirm the theory, run the test with debug logging and look for the line where the pool hands out a connection created before the server restarted. If that line shows up right before the failure, we have the culprit; if not, the next suspect is the DNS cache, which can keep pointing at the old address for a minute.",
        ],
    },
    // Refactoring.
    Topic {
        openers: &[
            "{func} has grown to about 300 lines. Can you help me split it into something readable?",
            "I want to pull the database access out of the handlers in {file} into a repository layer. How would you structure it?",
            "The {svc} has three copies of the same retry logic. Let's consolidate them.",
            "Can we replace the stringly-typed status fields in {file} with an enum?",
            "I'd like to make {func} testable without a real database. What's the least invasive way?",
        ],
        follow: &[
            "I like the second option. Can you do the first step and leave the rest for later?",
            "What about the callers in {file}? Do they need to change?",
            "Can you keep the public signature the same so we don't break the {svc}?",
            "Please also rename the module, the old name makes no sense anymore.",
            "The tests pass, but the diff is big. Can we split it into two commits?",
            "Should the new trait live next to the handlers or in its own crate?",
            "Let's not introduce generics here, a plain function is enough.",
        ],
        paras: &[
            "The function mixes three concerns: parsing the input, deciding what to do, and performing the side effects. Splitting along those lines gives three pieces that are each easy to test: a pure parser, a pure decision function that takes the parsed input and the current state and returns a plan, and a thin shell that executes the plan. Most of the bugs we have had in {func} were in the decision part, which becomes a plain unit test.",
            "I'd introduce the repository as a small trait with exactly the queries the handlers use today, nothing more. Resist the temptation to design a generic CRUD interface: it tends to leak the database's shape into every caller and makes the one query that needs a join awkward. The production implementation wraps the existing SQL unchanged, so the refactor moves code without changing behaviour.",
            "Moving the retry logic into one place is worth it, but be careful about the differences between the copies: the one in the {svc} retries on timeouts only, while the others also retry on `{err}`. I kept that difference as a parameter rather than silently unifying it, because retrying a non-idempotent call after a timeout can double-charge a customer.",
            "An enum makes the invalid states unrepresentable, which is the real win here. The database column can stay a text column; the conversion happens at the edge, in one `FromStr` implementation, and an unknown value becomes an error with the value in the message instead of a silent default. That last point matters because the current code maps anything unknown to `pending`.",
            "I kept the public signature of {func} as it is and made it a thin wrapper around the new internals, so the callers in {file} do not change in this commit. Once everything is moved we can inline the wrapper in a follow-up; doing both at once would make the diff hard to review.",
            "The cleanest seam for testing is the clock and the database handle: pass them in rather than reaching for globals. In the tests you hand in a fixed clock and an in-memory store; in production the binary wires the real ones once, in main. That keeps the test setup to a couple of lines and makes the time-dependent branches deterministic.",
        ],
    },
    // Code review.
    Topic {
        openers: &[
            "Can you review this change to {file} before I open the PR? It touches the {svc}'s error handling.",
            "{mate} asked me to review their PR that rewrites {func}. Can you help me spot problems?",
            "Here's my diff for the {table} cleanup job. Anything you'd push back on?",
            "Could you do a quick security review of the new {route} endpoint?",
            "I'm about to merge the pagination change. Second pair of eyes?",
        ],
        follow: &[
            "Fair point about the error handling. What would you write instead?",
            "Is the lock really needed there, or is it defensive?",
            "I disagree about the naming, but I'll change it. Anything else blocking?",
            "How would you test the timeout path?",
            "Can you suggest a better commit message for this?",
            "What about the migration, is it safe to run while the {svc} is live?",
            "OK, I addressed the comments. Can you look at the new version?",
        ],
        paras: &[
            "Overall the change is in good shape, and the structure is easier to follow than before. I have three comments, in order of importance. The first is a correctness issue, the other two are about readability and can be left for later if you are in a hurry.",
            "The correctness issue: the new code catches every error from {func} and logs it, then continues as if the call succeeded. For a timeout that is arguably fine, but for `{err}` it means we silently drop the record. I would match on the error kind and propagate everything that is not a known transient failure, so the caller can decide.",
            "The endpoint takes an id from the path and uses it directly in the query, which is fine because it is bound as a parameter, but it does not check that the record belongs to the caller's account. Any authenticated user could read another account's data by guessing ids. Add the account to the WHERE clause rather than checking after the fetch, so a missing row and a foreign row look the same from outside.",
            "Small things: the variable `data` could say what it holds, the comment above the loop describes what the code did two versions ago, and the magic number {num} deserves a named constant with a sentence saying where it comes from. None of these block the merge.",
            "The migration adds a column with a default, which on older Postgres versions rewrites the whole table and holds a lock for the duration. On the {table} table that could be minutes. Adding the column as nullable, backfilling in batches, then setting the default is slower to write but never blocks the {svc}.",
            "The tests cover the happy path well, but nothing exercises the branch where the upstream call times out. A test with a fake client that never answers, and a short timeout, would cover it in a few lines and would have caught the missing cleanup in the error path.",
        ],
    },
    // CI and build.
    Topic {
        openers: &[
            "CI has been taking almost 25 minutes lately. Can we speed up the pipeline in .github/workflows/ci.yml?",
            "The build fails on CI but not locally: `{err}`. Any idea what differs?",
            "I want the CI to run the integration tests against a real Postgres service container. How do I set that up?",
            "Can you add a job that checks formatting and lints before the tests run?",
            "The Docker build for the {svc} rebuilds all dependencies on every change. Can we cache better?",
        ],
        follow: &[
            "The cache key you suggested never hits. What am I doing wrong?",
            "Can we run the slow tests only on the main branch?",
            "How do I make the job fail if a migration is missing?",
            "The runner ran out of disk space halfway through. Can we clean up between steps?",
            "Can you pin the action versions by SHA?",
            "Good, CI is down to about {num} minutes now. What else could we trim?",
        ],
        paras: &[
            "Most of the time goes into compiling dependencies that have not changed. Caching the build directory keyed on the lock file fixes the bulk of it: the key changes only when dependencies change, and a restore-key prefix lets a new lock file start from the previous cache instead of from nothing. With that in place the typical run should drop by more than half.",
            "The difference between CI and your machine is almost always one of three things: a tool version, an environment variable, or state left over locally. Here the runner uses a newer compiler than your toolchain file pins, because the workflow installs `stable` rather than reading the file. Making the workflow read the toolchain file removes the whole class of problem.",
            "For a real database in CI, a service container is the simplest route: the job declares a Postgres service with a health check, waits for it, runs the migrations, then the tests. The tests read the connection string from an environment variable, which the workflow sets, so nothing in the code knows it is running in CI.",
            "Splitting lint and format into their own job that runs first gives faster feedback: a formatting mistake fails in a minute instead of after the whole test suite. Make the test job depend on it only if you want to save runner minutes; otherwise run them in parallel and let either fail the pipeline.",
            "For the Docker build, copy only the manifests first, build the dependencies in their own layer, then copy the sources. Docker then reuses the dependency layer as long as the manifests are unchanged. Combined with a build cache mount for the package registry, rebuilds after a source change take seconds instead of minutes.",
            "Pinning actions by commit SHA protects against a tag being moved to a malicious commit. The trade-off is that updates become manual, which a bot can handle: it opens a PR with the new SHA and the release notes, and CI runs on it like on any other change.",
        ],
    },
    // Documentation.
    Topic {
        openers: &[
            "Can you help me write the README section on configuring the {svc}?",
            "I need an architecture doc for the ingest path, one page, for new people on the team.",
            "The API docs for {route} are wrong since the last change. Can you update them?",
            "Please write docstrings for the public functions in {file}.",
            "I want a runbook for when the {svc} falls behind. What should it contain?",
        ],
        follow: &[
            "Shorter, please. Nobody reads more than a screen.",
            "Can you add an example request and response?",
            "Should the troubleshooting part be a table?",
            "Mention the environment variables too, people always ask about them.",
            "Good. Can you also write the changelog entry?",
            "Make the tone less formal, it's for the team wiki.",
        ],
        paras: &[
            "A good runbook answers three questions quickly: how do I know this is the problem, what do I do right now to limit the damage, and how do I fix it properly. I would structure it in that order, with the commands to run written out in full, because the person reading it may have been woken up at three in the morning and should not have to assemble a command from prose.",
            "I kept the README section to what a new user needs on day one: the two settings that must be set, the three that people most often change, and a pointer to the full reference. Everything else goes into the reference page, generated from the same definitions the code uses, so it cannot drift.",
            "For the architecture page, a diagram of the data flow with one sentence per box is more useful than a long narrative. Below it, a short list of the rules that are not obvious from the code, such as which component is allowed to write which table, and why. Those rules are what people break by accident.",
            "The example for {route} now shows the request with every optional field, and the response with a realistic body rather than placeholder values. I also documented the error responses, since the client team asked what a 409 means here: it is returned when the idempotency key was already used with a different body.",
            "Docstrings should say what the function promises, not how it works: what it returns, when it fails, and anything surprising, such as {func} returning an empty list rather than an error when the account does not exist. The how belongs in comments next to the code that needs explaining.",
        ],
    },
    // Data work.
    Topic {
        openers: &[
            "I need to backfill the `region` column of the {table} table from the addresses. About 4 million rows. How would you do it safely?",
            "Can you write a query for monthly active users from the {table} table, grouped by plan?",
            "The CSV export from the {svc} has duplicated rows. Can you help me find where they come from?",
            "I want to load last year's events into a pandas DataFrame and plot signups per week.",
            "We need to deduplicate customers that signed up twice with different capitalisation of the email.",
        ],
        follow: &[
            "The query is slow, it does a sequential scan. Which index would help?",
            "Can you make the backfill resumable if it crashes halfway?",
            "The plot looks odd around the holidays. Is that real or a bug in the grouping?",
            "How do I handle the rows where the address is missing?",
            "Can we do this in SQL instead of Python?",
            "Let's write the results to a new table instead of updating in place.",
        ],
        paras: &[
            "For a backfill of that size, work in batches by primary key: select the next {num} thousand ids above the last one processed, update them in one transaction, record the last id, repeat. Each transaction stays short, so it never holds locks long enough to bother the {svc}, and if the job dies you restart from the recorded id instead of from the beginning.",
            "The duplicates come from the join: an order with two shipments appears once per shipment, because the export joins {table} to shipments and then selects order fields only. Either aggregate the shipments first, or select distinct on the order id, depending on whether the export should show shipment information at all.",
            "For monthly active users, count distinct user ids per calendar month of the event time, truncated in UTC so the months line up with billing. Joining to the plans table at the end, rather than first, keeps the distinct count cheap: the expensive part runs on the narrow events table only.",
            "The dip around the holidays is real, the same dip is there in the raw counts. What is not real is the spike in the first week of January: the weekly grouping starts weeks on Sunday, so the first partial week of the year is merged with the last one of the previous year. Grouping by ISO week fixes it.",
            "Lower-casing emails before comparing them catches most duplicates, but not all: some providers ignore dots in the local part, and plus-addressing creates variants that are the same mailbox. I would merge only the exact case-insensitive matches automatically and produce a report of the fuzzier candidates for a human to confirm.",
        ],
    },
    // Performance.
    Topic {
        openers: &[
            "The {route} endpoint takes over a second at p95. Can you help me find out why?",
            "Memory usage of the {svc} grows slowly over a day. How do I find out what holds it?",
            "I profiled {func} with {tool} and half the time is in allocation. Ideas?",
            "Our search page feels sluggish. Where would you start measuring?",
            "Can you look at this query plan? The {table} lookup is slower than I'd expect.",
        ],
        follow: &[
            "I added the index and p95 went down a bit, but not as much as I hoped.",
            "Can you show me how to benchmark this properly instead of eyeballing it?",
            "Would a cache in front of this help, or just hide the problem?",
            "The flame graph shows a lot of time in serialization. Is that expected?",
            "What about batching the calls to the {svc}?",
            "Numbers after the change: p50 {num} ms, p95 roughly half of what it was.",
        ],
        paras: &[
            "Before changing anything, measure where the time goes for one slow request end to end. The slow requests here spend most of their time waiting for the {svc}, which is called once per item in a loop: an N+1 pattern. Fetching all items in one call turns {num} round trips into one, and that alone should bring the p95 under the budget.",
            "For slow memory growth, a heap profile taken an hour apart and diffed shows what is accumulating. In my experience the usual suspects are caches without a bound, listeners that are registered per request and never removed, and buffers that grow to the largest message ever seen and never shrink.",
            "Allocation in a hot loop is often a string built piece by piece or a vector that grows one element at a time. Reserving the capacity up front, reusing a buffer across iterations, or avoiding the intermediate string altogether by writing straight into the output usually cuts that time substantially.",
            "The plan shows a sequential scan on {table} because the filter uses a function on the column, and the index is on the bare column. Either index the expression, or rewrite the filter so it compares the bare column against a computed range; the second is usually simpler and helps other queries too.",
            "A cache helps when the same expensive answer is requested often and can be a little stale. It does not help when each request is unique, and it adds invalidation problems everywhere the underlying data changes. I would fix the query first and only add a cache if the measurements still say so.",
            "For a reliable benchmark, run each variant many times, discard the warm-up runs, and compare medians and a high percentile rather than a single run. {tool} does this for command-line programs; for code inside the service, a small harness that calls the function in a loop with realistic input is enough.",
        ],
    },
    // Testing.
    Topic {
        openers: &[
            "I want to add integration tests for the {svc}. What's a good setup that doesn't take forever?",
            "The tests in {file} mock everything and still break on every refactor. How can I make them less brittle?",
            "Can you write property tests for {func}?",
            "How should I test code that depends on the current time?",
            "Coverage says {func} is tested but the bug slipped through anyway. What are we missing?",
        ],
        follow: &[
            "Can you show me the fixture for the database?",
            "How do I run just this one test in watch mode?",
            "The property test found a counterexample with an empty string. Is that a real bug?",
            "Should these tests run in parallel?",
            "Can we share the setup between the test files without a global?",
            "OK, write the test for the retry path too.",
        ],
        paras: &[
            "Tests that mock every collaborator end up testing the mocks: they assert which methods were called in which order, so any refactor that keeps behaviour but changes the calls breaks them. Testing through the public interface against a real, fast dependency (an in-memory database, a local server on a random port) gives tests that break when behaviour breaks and not otherwise.",
            "For integration tests, start the dependencies once per test run, not per test, and give each test its own namespace inside them: a schema, a key prefix, a fresh account. That keeps tests independent while paying the start-up cost once. Most suites that take forever are starting a container per test.",
            "A property test for {func} states what must hold for every input, for example that formatting and parsing round-trip, or that the total never goes negative. The framework then generates inputs, including the awkward ones people forget: empty strings, very long strings, unicode, zero and negative numbers. When it finds a failure it shrinks it to the smallest input that still fails.",
            "Code that reads the clock directly cannot be tested deterministically. Pass a clock in, or a function that returns the current time, and in tests hand in a fixed or steppable one. The code under test becomes a pure function of its inputs, and the tricky cases, midnight, month ends, daylight saving changes, become one-line tests.",
            "Coverage only says a line was executed, not that its result was checked. The bug slipped through because the test calls {func} and asserts that it does not fail, but never looks at the value it returns. Asserting on the actual output for a few representative inputs would have caught it.",
        ],
    },
    // Deployment and infrastructure.
    Topic {
        openers: &[
            "Deploying the {svc} takes the service down for about thirty seconds. How do we get to zero downtime?",
            "I want to move our secrets out of the environment files into a proper secret store. Where do I start?",
            "The Kubernetes pods of the {svc} restart every few hours with `{err}`. What's going on?",
            "Can you write a systemd unit for the {svc} with sensible restart settings?",
            "We need a staging environment that mirrors production more closely. What would you include?",
        ],
        follow: &[
            "How do I make sure the old version finishes its in-flight requests?",
            "The readiness probe passes before the cache is warm. Is that a problem?",
            "Can we roll back automatically if the error rate spikes?",
            "What resource limits would you set for it?",
            "Should the migrations run as a separate job before the deploy?",
            "The rollout worked. Can you write down the steps for the wiki?",
        ],
        paras: &[
            "Zero-downtime deploys need two things from the service: it must stop accepting new connections and finish the ones in flight when it receives SIGTERM, and it must only report ready once it can actually serve. With both in place, a rolling update starts the new instance, waits for it to be ready, shifts traffic, and only then stops the old one, which drains cleanly.",
            "Restarts every few hours with that message usually mean the container hits its memory limit: the kernel kills it and the orchestrator restarts it. The limit may simply be too low for the peak, or there may be a leak; the pod's memory graph tells you which, a sawtooth that climbs steadily between restarts points to a leak.",
            "Running migrations as a separate job before the rollout keeps the deploy simple, but only works if every migration is backwards compatible with the version still running. The rule that keeps this safe is expand, then contract: add the new column or table first, deploy code that uses it, and remove the old one in a later release.",
            "For the unit, restart on failure with a short delay and a start limit, so a service that crashes at start does not spin forever; run it as a dedicated user with a private temp directory and a read-only view of the system; and send its output to the journal so the logs are in one place.",
            "A staging environment is only useful if it fails the way production fails. That means the same images and configuration shape, a realistic amount of data (an anonymised snapshot rather than an empty database), and the same external integrations pointed at their sandboxes. It does not need production's scale, but it needs production's topology.",
        ],
    },
    // API design.
    Topic {
        openers: &[
            "I'm designing the API for bulk updates of {table}. Should it be one endpoint with a list or a batch job?",
            "How should {route} report partial failures?",
            "We need to version the public API. URL prefix or header?",
            "Can you help me design idempotency keys for the payment endpoints?",
            "What's a sensible pagination scheme for the events feed?",
        ],
        follow: &[
            "What status code should a validation error return here?",
            "Cursor pagination sounds right. How do I encode the cursor?",
            "Should the client or the server generate the idempotency key?",
            "How long should we keep the keys around?",
            "Can you write the OpenAPI snippet for it?",
            "What happens if two requests with the same key arrive at the same time?",
        ],
        paras: &[
            "For bulk updates of a few hundred records, a single endpoint that takes a list and answers with one result per item works well and keeps the client simple. Beyond a few thousand, or when each update is slow, an asynchronous job is better: the endpoint validates and enqueues, answers with a job id, and the client polls or gets a webhook when it is done.",
            "Cursor pagination stays correct while new events arrive, which offset pagination does not: with offsets, an insert at the head shifts every page and the client sees duplicates. The cursor can simply be the last seen (time, id) pair, encoded opaquely so clients do not start constructing their own.",
            "Idempotency keys should be generated by the client, since only the client knows whether two requests are the same intent. The server stores the key with a hash of the request body and the response; a repeat with the same body gets the stored response, a repeat with a different body gets a 409, and keys expire after a day or so.",
            "URL versioning is easier to see in logs, to route at the load balancer and to try in a browser; header versioning keeps URLs stable. For a public API used by partners with varying sophistication, I would pick the URL prefix and commit to keeping each version alive for a published period.",
            "Partial failures are best reported per item: the response lists each input with either its result or an error object with a code and a message. The overall status is 200 when the request itself was valid, even if some items failed, because the alternative, a 4xx for a request that half succeeded, leaves the client unsure what was applied.",
        ],
    },
];

/// Paragraphs that fit any session, to give the assistant's answers their length.
const GENERIC: &[&str] = &[
    "One more thing worth mentioning: none of this changes the public behaviour, so it can ship on its own. If anything looks off after the deploy, reverting this single commit brings back the previous state without touching the data.",
    "If you want, I can also add a short note to the changelog and a comment above the function explaining why it looks the way it does; the reasoning is not obvious from the code, and the next person to touch it will want to know.",
    "A quick summary of the trade-offs: the simple option is easy to read and good enough for the volumes we have today; the more elaborate one scales further but adds a moving part we would have to operate. I would start simple and keep the measurement in place, so we notice when it stops being enough.",
    "I ran the whole test suite after the change and everything passes, including the slow integration tests. The only warning is a deprecation notice from a dependency, unrelated to this work, which we can deal with when we next upgrade.",
    "Let me know if you want me to go further. The natural next step would be to apply the same treatment to the {svc}, which has a very similar structure, but it is a separate change and easier to review on its own.",
    "For context, I looked at how the rest of the codebase handles the same situation, and the closest precedent is in {file}. I followed its conventions for naming and error handling, so the two read alike.",
    "A caveat: I could not test the path where the upstream service is unavailable, since it needs a fault injected in the network. The code handles it by returning an error that the caller already knows how to retry, but it would be worth a manual check in a staging environment.",
    "On naming, I went with the vocabulary the product team uses in the tickets rather than the older names in the database, so the code matches the conversations. The column names stay as they are; renaming them is not worth a migration.",
    "The change is small in lines but touches a hot path, so I measured before and after with {tool}: the difference is within noise for the common case and a little faster when the input is large, because we no longer copy it.",
    "If {mate} is reviewing this, it may help to point out that the second commit is purely mechanical: it moves code without changing it. Reviewing the commits one at a time is much easier than the combined diff.",
];

/// Code the assistant shows, with the vocabulary pools filled in.
const CODE: &[&str] = &[
    "```rust\npub async fn {func}(pool: &PgPool, id: i64) -> anyhow::Result<Option<Order>> {\n    let row = sqlx::query_as::<_, Order>(\"SELECT * FROM {table} WHERE id = $1\")\n        .bind(id)\n        .fetch_optional(pool)\n        .await\n        .context(\"reading the order\")?;\n    Ok(row)\n}\n```",
    "```python\ndef {func}(rows, *, batch_size=500):\n    \"\"\"Yield the rows in batches, so the caller never holds all of them.\"\"\"\n    batch = []\n    for row in rows:\n        batch.append(row)\n        if len(batch) >= batch_size:\n            yield batch\n            batch = []\n    if batch:\n        yield batch\n```",
    "```yaml\njobs:\n  test:\n    runs-on: ubuntu-latest\n    services:\n      postgres:\n        image: postgres:16\n        env:\n          POSTGRES_PASSWORD: postgres\n        options: --health-cmd pg_isready --health-interval 5s\n    steps:\n      - uses: actions/checkout@v4\n      - run: make test\n```",
    "```sql\nSELECT date_trunc('month', created_at) AS month,\n       plan,\n       count(DISTINCT user_id) AS active_users\nFROM {table}\nJOIN plans USING (account_id)\nWHERE created_at >= now() - interval '12 months'\nGROUP BY 1, 2\nORDER BY 1, 2;\n```",
    "```typescript\nexport async function {func}(client: ApiClient, ids: string[]): Promise<Result[]> {\n  const chunks = chunk(ids, 100);\n  const results: Result[] = [];\n  for (const part of chunks) {\n    results.push(...(await client.post('{route}', { ids: part })));\n  }\n  return results;\n}\n```",
    "```go\nfunc {func}(ctx context.Context, q *Queue) error {\n\tctx, cancel := context.WithTimeout(ctx, 5*time.Second)\n\tdefer cancel()\n\tmsg, err := q.Next(ctx)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"waiting for the next message: %w\", err)\n\t}\n\treturn handle(ctx, msg)\n}\n```",
    "```bash\nset -euo pipefail\nfor attempt in 1 2 3 4 5; do\n  if curl -fsS \"http://localhost:8080{route}\" > /dev/null; then\n    echo \"ready after $attempt attempts\"\n    exit 0\n  fi\n  sleep $((attempt * 2))\ndone\necho \"service did not become ready\" >&2\nexit 1\n```",
    "```rust\n#[test]\nfn {func}_handles_the_empty_case() {\n    let store = MemoryStore::default();\n    let result = {func}(&store, &[]).unwrap();\n    assert!(result.is_empty(), \"expected nothing, got {result:?}\");\n}\n```",
    "```dockerfile\nFROM rust:1.83 AS build\nWORKDIR /app\nCOPY Cargo.toml Cargo.lock ./\nRUN mkdir src && echo 'fn main() {}' > src/main.rs && cargo build --release\nCOPY src ./src\nRUN touch src/main.rs && cargo build --release\n\nFROM gcr.io/distroless/cc\nCOPY --from=build /app/target/release/app /app\nENTRYPOINT [\"/app\"]\n```",
    "```python\n@pytest.fixture(scope=\"session\")\ndef database():\n    url = os.environ[\"DATABASE_URL\"]\n    engine = create_engine(url)\n    run_migrations(engine)\n    yield engine\n    engine.dispose()\n```",
];

/// Short user acknowledgements that close a session or bridge turns.
const ACKS: &[&str] = &[
    "Thanks, that works. Let's leave it there for today.",
    "Perfect, merged. One last thing: can you summarise what we changed?",
    "Great, that's all I needed for now.",
    "Nice. Can you double-check the edge cases before I push?",
    "OK, I'll try that and report back tomorrow.",
];

// ---------------------------------------------------------------------------------------------
// Planted facts.

/// A fact with one value, stated in one session (single facts and preferences), or with
/// several values stated in several sessions (aggregation: all of them; updates: in order).
struct Kind {
    values: &'static [&'static str],
    /// How the user states a value (`{v}`).
    state: &'static [&'static str],
    /// For updates: how the user states a change from `{old}` to `{v}`.
    change: &'static [&'static str],
    /// How the assistant may confirm it, deep in its answer.
    confirm: &'static [&'static str],
    ask: &'static [&'static str],
    /// Sentences sharing the fact's vocabulary without stating it, spread over other sessions.
    noise: &'static [&'static str],
}

const SINGLE: &[Kind] = &[
    Kind {
        values: &["8443", "9090", "8081", "7000", "3001", "5050"],
        state: &[
            "I set the staging server to port {v} so it doesn't clash with the metrics exporter.",
            "Staging now listens on port {v}; I changed it in the compose file yesterday.",
            "FYI the staging box runs on port {v} now, the old one was taken by the VPN client.",
        ],
        change: &[],
        confirm: &[
            "Since staging listens on port {v} now, the health check URL in the deploy script has to change as well, otherwise the rollout waits for a probe on the old port until it times out.",
        ],
        ask: &[
            "What port did I set the staging server to?",
            "Which port does the staging environment listen on?",
            "On what port is our pre-production box reachable?",
        ],
        noise: &[
            "The staging server was slow to come back after the deploy.",
            "Is the port of the metrics exporter still the default one?",
            "Staging logs are full of health check noise again.",
            "Two dev servers were fighting over the same port on my laptop.",
        ],
    },
    Kind {
        values: &["16", "24", "40", "64", "12"],
        state: &[
            "I set the Postgres connection pool to {v} connections in the {svc} config.",
            "The database pool is capped at {v} connections now; above that the primary starts swapping.",
            "We limited the pool size to {v} after the last load test.",
        ],
        change: &[],
        confirm: &[
            "With the pool capped at {v} connections, a burst of slow queries can exhaust it, so the acquire timeout matters: a request should fail fast with a clear error rather than queue behind a full pool.",
        ],
        ask: &[
            "How many connections did I configure for the database pool?",
            "What size is the Postgres connection pool?",
            "What's the maximum number of DB connections the service opens?",
        ],
        noise: &[
            "The connection pool metrics look noisy on the dashboard.",
            "Postgres autovacuum ran for an hour last night.",
            "We should document how the pool behaves when the database restarts.",
        ],
    },
    Kind {
        values: &["02:30 UTC", "04:00 UTC", "23:15 UTC", "01:45 UTC"],
        state: &[
            "The nightly backup cron now runs at {v}, after the batch import finishes.",
            "I moved the database backup job to {v} so it stops overlapping with the reports.",
            "Backups kick off at {v} every night now.",
        ],
        change: &[],
        confirm: &[
            "With the backup starting at {v}, the dump no longer competes with the report queries for I/O, which should also make the reports' run time more predictable.",
        ],
        ask: &[
            "When does the nightly backup run?",
            "At what time is the database dumped every night?",
            "What time did I schedule the backup job for?",
        ],
        noise: &[
            "The cron container restarted twice this week.",
            "Someone asked whether backups are encrypted at rest.",
            "The nightly report job is taking longer than usual.",
        ],
    },
    Kind {
        values: &[
            "checkout_v2_enabled",
            "new_checkout_flow",
            "fast_checkout_rollout",
            "checkout_redesign",
            "beta_checkout",
        ],
        state: &[
            "I called the feature flag for the new checkout flow `{v}`.",
            "The checkout rewrite is behind a flag named `{v}`, off by default.",
            "Flag name is `{v}`; the checkout redesign stays dark until QA signs off.",
        ],
        change: &[],
        confirm: &[
            "While `{v}` is off, the old checkout path stays the default, so both paths need to keep working; the test matrix runs the suite once with the flag on and once with it off.",
        ],
        ask: &[
            "What did I name the feature flag for the checkout redesign?",
            "Which flag hides the new checkout flow?",
            "What's the toggle called that gates the checkout rewrite?",
        ],
        noise: &[
            "We have too many stale feature flags in the config.",
            "The checkout page has a layout bug on mobile.",
            "The flag service's audit log is hard to read.",
        ],
    },
    Kind {
        values: &["120", "300", "600", "1000", "60"],
        state: &[
            "I limited the public API to {v} requests per minute per token.",
            "The rate limiter allows {v} requests a minute per client now.",
            "Public endpoints are throttled at {v} req/min; partners asked for more but let's see.",
        ],
        change: &[],
        confirm: &[
            "At {v} requests per minute per token, a partner syncing a large account will hit the limit, so the 429 response should carry a Retry-After header that tells them when to come back.",
        ],
        ask: &[
            "What rate limit did I put on the public API?",
            "How many requests per minute can a client make against our public endpoints?",
            "What's the throttling threshold for API consumers?",
        ],
        noise: &[
            "We got a few 429s from the payment provider yesterday.",
            "The API gateway config is getting hard to follow.",
            "A partner complained that the public API docs are out of date.",
        ],
    },
    Kind {
        values: &[
            "acme-build-artifacts-eu",
            "ci-artifacts-prod",
            "releases-blobstore",
            "team-ci-outputs",
        ],
        state: &[
            "Build artifacts get uploaded to the S3 bucket `{v}` now.",
            "CI pushes the release tarballs into `{v}`.",
            "I pointed the artifact upload step at the bucket `{v}`.",
        ],
        change: &[],
        confirm: &[
            "Uploading to `{v}` needs the runner's role to have write access to that bucket only; I scoped the policy to its prefix rather than granting access to every bucket in the account.",
        ],
        ask: &[
            "Which bucket stores our build artifacts?",
            "Where does CI upload the release tarballs?",
            "What is the name of the S3 bucket for artifacts?",
        ],
        noise: &[
            "The S3 bill went up this month.",
            "CI artifacts expire after a while, I think.",
            "Uploading artifacts is the slowest step of the pipeline.",
        ],
    },
    Kind {
        values: &[
            "an unbounded LRU cache in the image resizer",
            "a listener that was never removed in the websocket handler",
            "a goroutine per request that never exited on timeout",
            "holding the whole CSV export in memory before streaming it",
        ],
        state: &[
            "Found it: the memory leak was caused by {v}.",
            "The memory growth turned out to be {v}.",
            "Root cause of the leak: {v}.",
        ],
        change: &[],
        confirm: &[
            "Now that we know the growth came from {v}, the fix is to bound it and add a gauge for its size, so a regression shows up on the dashboard long before the container is killed.",
        ],
        ask: &[
            "What turned out to cause the memory leak?",
            "What was the root cause of the memory growth we chased?",
            "Why was the process's RSS climbing until it got killed?",
        ],
        noise: &[
            "Memory usage on the worker nodes looks fine today.",
            "The heap profiler output is hard to read.",
            "We should add a memory limit to the container.",
        ],
    },
    Kind {
        values: &["14", "30", "45", "90"],
        state: &[
            "We keep application logs for {v} days now, compliance signed off on it.",
            "Log retention is set to {v} days in Loki.",
            "I configured logs to be deleted after {v} days.",
        ],
        change: &[],
        confirm: &[
            "With {v} days of retention, an incident investigated late in the month can still be traced, but anything older has to come from the metrics or the audit log, which we keep longer.",
        ],
        ask: &[
            "How long do we retain logs?",
            "After how many days are our application logs deleted?",
            "What's our log retention period?",
        ],
        noise: &[
            "Loki queries time out when the range is too wide.",
            "The log volume doubled after the debug flag was left on.",
            "Compliance wants a list of everything we store.",
        ],
    },
    Kind {
        values: &["Priya", "Tomasz", "Aiko", "Diego", "Fatima", "Lukas"],
        state: &[
            "{v} reviews all the database migrations from now on.",
            "Migrations need a sign-off from {v} before they get merged.",
            "I asked {v} to be the reviewer for every schema change.",
        ],
        change: &[],
        confirm: &[
            "Since {v} signs off on schema changes, I added them as the code owner of the migrations directory, so the review request is automatic.",
        ],
        ask: &[
            "Who reviews database migrations?",
            "Whose approval do schema changes need?",
            "Which colleague signs off on migrations?",
        ],
        noise: &[
            "The migration for the invoices table took ten minutes on staging.",
            "Code review is slow this week, half the team is on holiday.",
            "I need someone to review the docs change.",
        ],
    },
    Kind {
        values: &["32 GB", "64 GB", "16 GB", "48 GB"],
        state: &[
            "My work laptop has {v} of RAM, so running the whole stack locally is fine.",
            "I'm on a machine with {v} of memory.",
            "The new laptop came with {v} RAM.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "How much memory does my laptop have?",
            "How much RAM is in my work machine?",
        ],
        noise: &[
            "Docker Desktop eats a lot of memory on my machine.",
            "The laptop fans spin up whenever the Rust build runs.",
            "Running the full stack locally is getting heavy.",
        ],
    },
    Kind {
        values: &[
            "Acme Logistics",
            "Globex",
            "Initech",
            "Umbrella Health",
            "Stark Freight",
        ],
        state: &[
            "The demo next week is for {v}, so the reporting page has to be presentable.",
            "We're showing the dashboard to {v} on Thursday.",
            "Sales booked a demo with {v}.",
        ],
        change: &[],
        confirm: &[
            "For the {v} demo, a seeded account with a few months of realistic data will make the reporting page look far better than the empty states, and it avoids showing anything from a real customer.",
        ],
        ask: &[
            "Which customer is the demo for?",
            "Who are we giving the dashboard demo to?",
            "For which client did sales book the demo?",
        ],
        noise: &[
            "The reporting page still has placeholder charts.",
            "Sales wants a sandbox account for demos.",
            "The dashboard loads slowly for a large account.",
        ],
    },
    Kind {
        values: &[
            "2.5 seconds",
            "800 milliseconds",
            "5 seconds",
            "1.2 seconds",
        ],
        state: &[
            "I set the upstream timeout for the geocoding API to {v}.",
            "Calls to the geocoder now give up after {v}.",
            "The geocoding client has a {v} timeout now.",
        ],
        change: &[],
        confirm: &[
            "With a {v} timeout on the geocoder, a slow provider no longer holds a worker for half a minute; the address is stored unnormalised and a background job retries it later.",
        ],
        ask: &[
            "What timeout did I set for the geocoding API?",
            "How long do we wait for the geocoder before giving up?",
            "What's the deadline on calls to the address lookup service?",
        ],
        noise: &[
            "The geocoding provider changed their pricing.",
            "Timeouts are scattered across the config files.",
            "Address normalisation fails for some Dutch postcodes.",
        ],
    },
];

const PREFERENCES: &[Kind] = &[
    Kind {
        values: &["Neovim", "Helix", "Zed", "Emacs", "VS Code", "Sublime Text"],
        state: &[
            "btw I use {v}, so a config snippet for it would help",
            "I switched my editor to {v} last week, still getting used to it",
            "(I'm in {v}, if that matters for the LSP setup)",
            "I've been living in {v} lately",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Which editor do I use?",
            "Which text editor am I on these days?",
            "What do I write code in?",
        ],
        noise: &[
            "The LSP keeps restarting when I open the monorepo.",
            "Format-on-save reformatted half the file.",
            "The editor config in the repo is outdated.",
        ],
    },
    Kind {
        values: &["tabs", "four spaces", "two-space indentation"],
        state: &[
            "I prefer {v}, by the way, please keep that in snippets",
            "for what it's worth I like {v}",
            "small thing: I always use {v}",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Do I prefer tabs or spaces?",
            "How do I like my code indented?",
            "What indentation style do I want in code you write?",
        ],
        noise: &[
            "The formatter changed the whitespace in every file.",
            "The linter complains about mixed indentation in the YAML.",
            "editorconfig is missing from the new repo.",
        ],
    },
    Kind {
        values: &["fish", "zsh", "nushell", "bash"],
        state: &[
            "I use {v} as my shell, so adjust the commands",
            "my shell is {v}, the export syntax might differ",
            "(running {v} here)",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What shell do I use?",
            "Which command-line shell is my daily driver?",
            "What's my interactive shell?",
        ],
        noise: &[
            "The deploy script assumes a POSIX shell.",
            "My prompt got slow in large git repos.",
            "The shell completion for the CLI is broken.",
        ],
    },
    Kind {
        values: &[
            "conventional commits",
            "small commits with imperative subject lines",
            "one squashed commit per pull request",
            "gitmoji prefixes",
        ],
        state: &[
            "I like {v}, so please phrase the commit message that way",
            "we do {v} here",
            "I stick to {v} for history",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "How do I like commit messages written?",
            "What commit style do I follow?",
            "What's my convention for git history?",
        ],
        noise: &[
            "The git history of that module is a mess.",
            "Someone force-pushed to the release branch.",
            "Let's rebase before merging.",
        ],
    },
    Kind {
        values: &["WezTerm", "kitty", "Alacritty", "Ghostty", "iTerm2"],
        state: &[
            "I run everything in {v}",
            "my terminal is {v}, so true colour works",
            "I moved to {v} as my terminal",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Which terminal emulator do I use?",
            "What terminal app am I running?",
        ],
        noise: &[
            "The colours in the test output look off.",
            "tmux scrolling is weird over ssh.",
            "The terminal output of the CLI is too wide.",
        ],
    },
    Kind {
        values: &[
            "Arch Linux",
            "Fedora",
            "macOS",
            "NixOS",
            "Ubuntu 24.04",
            "Debian",
        ],
        state: &[
            "I'm on {v}",
            "my dev machine runs {v}",
            "this is on {v}, in case the package names differ",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What operating system am I on?",
            "Which Linux distribution or OS does my dev machine run?",
        ],
        noise: &[
            "The install script needs a package that is named differently on every distro.",
            "Homebrew and apt disagree about the version.",
            "The Docker image is based on Alpine.",
        ],
    },
    Kind {
        values: &[
            "a dark theme",
            "light themes",
            "Solarized Light",
            "Gruvbox Dark",
        ],
        state: &[
            "I prefer {v} for screenshots and in the editor",
            "I use {v} everywhere",
            "I like {v}, so match that in the dashboard mockup",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Do I prefer light or dark themes?",
            "What colour scheme do I like?",
        ],
        noise: &[
            "The dashboard contrast is poor.",
            "The chart colours are hard to tell apart.",
            "The design team wants a new palette.",
        ],
    },
    Kind {
        values: &[
            "under 400 lines",
            "under 200 changed lines",
            "small and stacked",
            "to a single concern",
        ],
        state: &[
            "I like to keep pull requests {v}",
            "I want PRs kept {v}, easier to review",
            "rule of thumb for me: PRs {v}",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "How big do I like pull requests to be?",
            "What's my preference for PR size?",
        ],
        noise: &[
            "This PR grew too large to review in one sitting.",
            "The review queue is long.",
            "GitHub's diff view chokes on the generated files.",
        ],
    },
    Kind {
        values: &[
            "table-driven tests",
            "property-based tests",
            "plain asserts over mocks",
            "snapshot tests",
        ],
        state: &[
            "I prefer {v} where possible",
            "I tend to write {v}",
            "I'm a fan of {v}",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What kind of tests do I prefer writing?",
            "What testing style do I like?",
        ],
        noise: &[
            "Test coverage dropped a bit.",
            "The mocks in this module are painful.",
            "CI runs the slow tests only nightly.",
        ],
    },
    Kind {
        values: &["Python", "Bash", "Deno", "Go"],
        state: &[
            "I write small tooling scripts in {v}",
            "for one-off scripts I reach for {v}",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What do I use for small helper scripts?",
            "Which language do I reach for when writing one-off tooling?",
        ],
        noise: &[
            "The scripts folder is a graveyard.",
            "Nobody knows what this script does anymore.",
        ],
    },
];

const AGGREGATIONS: &[Kind] = &[
    Kind {
        values: &["Redis", "Memcached", "KeyDB", "Dragonfly", "Valkey"],
        state: &[
            "Today I tried {v} as the backend for the session cache; the load test numbers are below.",
            "I gave {v} a shot for the cache layer this morning.",
            "Swapped the cache over to {v} on my branch to compare latency.",
        ],
        change: &[],
        confirm: &[
            "With {v} behind the session cache, the p99 of cache reads in your load test is in the same range as before, so the decision should rest on operations: memory overhead, persistence options and how it behaves on failover.",
        ],
        ask: &[
            "Which databases have I tried for the cache?",
            "What cache backends have I experimented with?",
            "List the stores I evaluated for caching.",
        ],
        noise: &[
            "Cache hit rate dropped after the deploy.",
            "The cache keys need a version prefix.",
            "Invalidation in the cache layer is still a mess.",
        ],
    },
    Kind {
        values: &["Chart.js", "ECharts", "Recharts", "Vega-Lite", "uPlot"],
        state: &[
            "I evaluated {v} for the dashboard charts today.",
            "Prototyped the revenue chart with {v}.",
            "Tried rendering the usage graphs with {v}.",
        ],
        change: &[],
        confirm: &[
            "{v} handles the revenue chart fine at our data sizes; the question is mostly bundle size and how much styling it lets us override to match the design system.",
        ],
        ask: &[
            "Which charting libraries did I evaluate?",
            "What chart libraries have I prototyped the dashboard with?",
        ],
        noise: &[
            "The dashboard charts flicker on resize.",
            "The design team sent new chart mockups.",
            "We render too many data points on the usage graph.",
        ],
    },
    Kind {
        values: &[
            "billing service",
            "auth service",
            "search indexer",
            "notification worker",
            "webhook dispatcher",
        ],
        state: &[
            "I added a proper health check endpoint to the {v}.",
            "The {v} now has readiness and liveness probes.",
            "Wired up a health check for the {v} today.",
        ],
        change: &[],
        confirm: &[
            "The {v}'s readiness probe now checks its database and queue connections, while liveness only checks that the process answers, so a database outage does not make the orchestrator restart it in a loop.",
        ],
        ask: &[
            "Which services did I add health checks to?",
            "Where have I set up readiness probes?",
        ],
        noise: &[
            "Kubernetes restarted a pod because a probe timed out.",
            "Health checks are noisy in the access log.",
            "Readiness and liveness mean different things, remember.",
        ],
    },
    Kind {
        values: &[
            "test_refund_partial",
            "test_export_large_csv",
            "test_login_rate_limit",
            "test_webhook_retry",
            "test_search_pagination",
        ],
        state: &[
            "I quarantined {v} because it fails randomly on CI.",
            "Marked {v} as flaky and skipped it for now.",
            "{v} is in the quarantine list now.",
        ],
        change: &[],
        confirm: &[
            "Quarantining {v} keeps CI green, but it also means the behaviour it covers is untested until it comes back, so I opened a ticket with the failure log attached.",
        ],
        ask: &[
            "Which tests have I quarantined as flaky?",
            "What tests did I mark as flaky and skip?",
        ],
        noise: &[
            "CI was red twice today for unrelated reasons.",
            "The test suite takes twenty minutes now.",
            "Retrying failed tests hides real bugs.",
        ],
    },
    Kind {
        values: &["Priya", "Tomasz", "Aiko", "Diego", "Mei", "Jonas"],
        state: &[
            "Paired with {v} on the {svc} this afternoon.",
            "{v} and I pair-programmed the retry logic today.",
            "Did a pairing session with {v}.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Which teammates have I paired with?",
            "Who have I done pair programming with?",
        ],
        noise: &[
            "Pairing sessions are hard to schedule across time zones.",
            "{mate} is out this week.",
        ],
    },
    Kind {
        values: &[
            "eu-west-1",
            "us-east-2",
            "ap-southeast-1",
            "eu-central-1",
            "us-west-2",
        ],
        state: &[
            "We deployed the {svc} to {v} today.",
            "The service is now also running in {v}.",
            "Rolled out to a new region: {v}.",
        ],
        change: &[],
        confirm: &[
            "Running in {v} as well means the database replica there serves reads only; writes still go to the primary region, so the write path's latency for users near {v} is unchanged.",
        ],
        ask: &[
            "Which cloud regions have we deployed to?",
            "In which AWS regions do we run now?",
        ],
        noise: &[
            "Cross-region latency is worse than expected.",
            "The AWS bill has a line for data transfer I don't understand.",
        ],
    },
];

const UPDATES: &[Kind] = &[
    Kind {
        values: &["1.10", "2.4", "2.7", "2.9"],
        state: &[
            "I pinned pydantic to {v} in requirements.txt because the newer one breaks our validators.",
            "We're on pydantic {v} for now, pinned.",
        ],
        change: &[
            "I bumped pydantic from {old} to {v} and fixed the validators.",
            "pydantic is now pinned at {v} instead of {old}.",
        ],
        confirm: &[
            "With pydantic at {v}, the validators that used the old decorator need the new signature; I updated the three in the models module.",
        ],
        ask: &[
            "Which version of pydantic do we use now?",
            "What pydantic version are we pinned to currently?",
            "What's the current version of the validation library in our requirements?",
        ],
        noise: &[
            "requirements.txt has a few unpinned packages.",
            "The validation errors from the models are hard to read.",
            "Dependabot opened a dozen PRs again.",
        ],
    },
    Kind {
        values: &["18", "20", "22"],
        state: &[
            "The project runs on Node {v}; that's what .nvmrc says.",
            "We're on Node {v} in CI and locally.",
        ],
        change: &[
            "Upgraded Node from {old} to {v} across CI and the Dockerfile.",
            "We moved to Node {v}; {old} is gone from the images.",
        ],
        confirm: &[
            "On Node {v} the built-in fetch is available, so the polyfill can go; I removed it from the bundle.",
        ],
        ask: &[
            "Which Node version are we on now?",
            "What Node.js release does the project run on today?",
        ],
        noise: &[
            "npm install is slow on CI.",
            "The frontend build prints deprecation warnings.",
            "node_modules is 900 MB again.",
        ],
    },
    Kind {
        values: &[
            "Heroku",
            "Fly.io",
            "a Kubernetes cluster on GKE",
            "Render",
            "plain EC2 instances with systemd",
        ],
        state: &["We deploy to {v} for now.", "Production runs on {v}."],
        change: &[
            "We moved deploys from {old} to {v} this week.",
            "Production is on {v} now, we left {old} behind.",
        ],
        confirm: &[
            "Now that production runs on {v}, the deploy docs and the rollback steps need to describe the new commands; I rewrote that section.",
        ],
        ask: &[
            "Where do we deploy now?",
            "What hosting does production run on currently?",
            "Where does the app live in production these days?",
        ],
        noise: &[
            "The deploy took twenty minutes today.",
            "Production had a brief blip during the rollout.",
            "Hosting costs are up this quarter.",
        ],
    },
    Kind {
        values: &[
            "Travis CI",
            "GitHub Actions",
            "GitLab CI",
            "Buildkite",
            "CircleCI",
        ],
        state: &["Our CI runs on {v}.", "CI is {v} for this repo."],
        change: &[
            "I migrated CI from {old} to {v}.",
            "CI moved to {v}; the {old} config is deleted.",
        ],
        confirm: &[
            "On {v} the cache and the secrets are configured differently, so I ported both and checked that a pull request from a fork cannot read the secrets.",
        ],
        ask: &[
            "Which CI service do we use now?",
            "What runs our continuous integration at the moment?",
        ],
        noise: &[
            "CI minutes ran out early this month.",
            "The CI config has a lot of copy-paste.",
            "A CI job hung for an hour yesterday.",
        ],
    },
    Kind {
        values: &["9:30", "10:00", "11:15", "14:00"],
        state: &[
            "Standup is at {v} every day.",
            "Daily standup happens at {v}.",
        ],
        change: &[
            "Standup moved from {old} to {v}.",
            "We shifted the daily standup to {v}, {old} didn't work for the people in other time zones.",
        ],
        confirm: &[],
        ask: &[
            "What time is standup now?",
            "When is the daily sync these days?",
        ],
        noise: &[
            "Standup ran long again today.",
            "We should write standup updates async.",
            "Meetings ate the whole morning.",
        ],
    },
    Kind {
        values: &["13", "14", "15", "16"],
        state: &[
            "Our database is Postgres {v}.",
            "Production runs PostgreSQL {v}.",
        ],
        change: &[
            "Upgraded Postgres from {old} to {v} over the weekend.",
            "We're on PostgreSQL {v} now after the upgrade from {old}.",
        ],
        confirm: &[
            "On Postgres {v} the query planner picks the new index for the report query without a hint, so I removed the workaround.",
        ],
        ask: &[
            "Which Postgres version are we on now?",
            "What major version of the database do we run currently?",
        ],
        noise: &[
            "The database CPU spiked during the report run.",
            "We need a maintenance window for the database.",
            "pg_dump took longer than usual.",
        ],
    },
    Kind {
        values: &["the stdlib logging module", "structlog", "loguru"],
        state: &[
            "The {svc} logs through {v}.",
            "Our Python services use {v} for logs.",
        ],
        change: &[
            "Replaced {old} with {v} for logging in the Python services.",
            "Logging goes through {v} now, {old} is gone.",
        ],
        confirm: &[
            "With {v}, the request id is bound once per request and appears on every line, which makes following one request through the logs much easier.",
        ],
        ask: &[
            "Which logging library do we use now?",
            "What do our Python services log with these days?",
        ],
        noise: &[
            "The logs are too verbose at info level.",
            "Log lines from the workers have no request id.",
        ],
    },
    Kind {
        values: &["master", "main", "trunk", "develop"],
        state: &["Our default branch is `{v}`.", "PRs target `{v}`."],
        change: &[
            "Renamed the default branch from `{old}` to `{v}`.",
            "PRs now go to `{v}` instead of `{old}`.",
        ],
        confirm: &[
            "With `{v}` as the default branch, the branch protection rules and the deploy trigger had to move too; both point at `{v}` now.",
        ],
        ask: &[
            "What's our default branch now?",
            "Which branch do pull requests target currently?",
        ],
        noise: &[
            "A stale branch broke the nightly build.",
            "Branch protection blocked my hotfix.",
        ],
    },
];

/// A problem worked on in several sessions, one attempt each (temporal: first, latest, month).
struct Series {
    /// How the user names it.
    subject: &'static str,
    /// How the questions name it.
    alias: &'static str,
    attempts: &'static [&'static str],
}

const SERIES: &[Series] = &[
    Series {
        subject: "the checkout integration test that keeps flaking",
        alias: "the flaky checkout test",
        attempts: &[
            "adding a retry around the payment mock",
            "pinning the random seed",
            "raising the wait timeout to ten seconds",
            "giving each test its own database",
            "replacing the sleep with an explicit poll for the order status",
        ],
    },
    Series {
        subject: "the monthly revenue report query that takes minutes",
        alias: "the slow revenue report",
        attempts: &[
            "an index on invoices.created_at",
            "a materialized view refreshed hourly",
            "caching the result in Redis",
            "rewriting the join as a CTE",
            "partitioning the invoices table by month",
        ],
    },
    Series {
        subject: "the export worker whose memory keeps growing",
        alias: "the export worker's memory problem",
        attempts: &[
            "lowering the batch size",
            "switching to a streaming JSON writer",
            "capping the worker's concurrency",
            "switching the allocator to jemalloc",
        ],
    },
    Series {
        subject: "the API container that takes forever to start",
        alias: "the slow cold start of the API",
        attempts: &[
            "trimming the Docker image",
            "lazy-loading the ML model",
            "moving the migrations out of startup",
            "switching to a distroless base image",
        ],
    },
];

const SERIES_FIRST: &[&str] = &[
    "Looking into {subject} today. First attempt: {v}.",
    "I started working on {subject}; the first thing I tried was {v}.",
    "Spent the morning on {subject}. Tried {v} to begin with.",
];
const SERIES_AGAIN: &[&str] = &[
    "Back to {subject}. This time I tried {v}.",
    "{subject} again. Today's attempt: {v}.",
    "Another round on {subject}: I went with {v}.",
];
const SERIES_ASK_FIRST: &[&str] = &[
    "What was the first thing I tried for {alias}?",
    "How did I first try to fix {alias}?",
];
const SERIES_ASK_LATEST: &[&str] = &[
    "What did I most recently try for {alias}?",
    "What was my latest attempt at {alias}?",
];
const SERIES_ASK_MONTH: &[&str] = &[
    "What did I try for {alias} in {month}?",
    "In {month}, what was my approach to {alias}?",
];

const FEATURES: &[&str] = &[
    "CSV export",
    "the new onboarding flow",
    "dark mode for the dashboard",
    "SAML login",
    "bulk invoice editing",
    "webhook retries",
    "usage-based billing",
    "audit log search",
    "multi-currency support",
    "the mobile layout for reports",
];
const RELEASE_STATE: &[&str] = &[
    "Cut release v{v} today, it ships {feature}.",
    "Tagged v{v} and deployed it; the headline is {feature}.",
    "v{v} is out: {feature} plus a handful of bug fixes.",
];
const RELEASE_ASK: &[&str] = &[
    "What did I ship in {month}?",
    "Which release went out in {month}, and what was in it?",
    "What feature did the {month} release contain?",
];
const RELEASE_NOISE: &[&str] = &[
    "The changelog needs cleaning up before the next release.",
    "Release notes always get written at the last minute.",
    "Tagging a release still involves too many manual steps.",
];

const INCIDENTS: &[&str] = &[
    "the payment webhooks were dropped for an hour because the queue filled up",
    "the login page returned 502s after a bad nginx config was deployed",
    "the search index got corrupted and every search came back empty",
    "a runaway migration locked the orders table",
    "the certificate on the API domain expired",
];
const INCIDENT_STATE: &[&str] = &[
    "We had a production incident today: {v}.",
    "Rough day, {v}. Writing the postmortem now.",
    "Incident this morning: {v}.",
];
const INCIDENT_ASK: &[&str] = &[
    "What was the production incident about {ago}?",
    "Which outage did I deal with {ago}?",
    "What broke in production roughly {ago}?",
];
const INCIDENT_NOISE: &[&str] = &[
    "The incident runbook is out of date.",
    "Pager alerts are too noisy at night.",
    "We should practice the failover drill.",
];

/// Life events the temporal questions are anchored to: what the user says, and how the
/// question names it.
const ANCHORS: &[(&str, &str)] = &[
    (
        "I moved to Berlin last weekend, so my hours might be weird this week.",
        "I moved to Berlin",
    ),
    (
        "Just got back from two weeks of vacation in Portugal, catching up on things.",
        "I came back from Portugal",
    ),
    (
        "First day on the platform team today, new codebase for me.",
        "I joined the platform team",
    ),
    (
        "My new laptop arrived, setting everything up from scratch today.",
        "I got my new laptop",
    ),
    (
        "Back from the conference in Lisbon, lots of ideas.",
        "the Lisbon conference",
    ),
];
const ANCHOR_ASK: &[&str] = &[
    "What was I working on about {gap} before {event}?",
    "What did I work on {gap} before {event}?",
    "Roughly {gap} before {event}, what was I doing?",
];
const GAPS: &[(i64, &str)] = &[(7, "a week"), (14, "two weeks"), (21, "three weeks")];

/// Sessions in a history, and user/assistant pairs in a session. MiniLM embeds about three of
/// these items a second on two cores, so the sizes are what lets twelve histories run in
/// about twenty minutes: 32 to 44 sessions of 6 or 8 turns, rather than 40 to 60 sessions of 6
/// to 14 turns, with the assistant's turns as long as ever.
const SESSIONS: (usize, usize) = (32, 44);
const PAIRS: (usize, usize) = (3, 4);

const PROJECTS: &[&str] = &[
    "ledger",
    "tidepool",
    "orbit-api",
    "quill",
    "harbor",
    "lumen",
    "cartwheel",
    "fernweh",
    "kestrel",
    "sable",
    "meridian",
    "puffin",
];

/// Facts only the assistant states: a recommendation, a setting, a diagnosis, somewhere in one
/// long answer (3,000 to 9,000 characters), asked about later ("Which retry library did you
/// recommend?"). Nothing the user says names them, so only the answer's own text can be found;
/// the answers are long so that the fact often sits past what an embedding model reads of
/// one piece. Written with their own generator stream (see [`said_by_the_assistant`]), so the
/// rest of a history is what it was before this category existed, but for the answers that
/// carry these facts and the remarks sharing their vocabulary.
const ASSISTANT: &[Kind] = &[
    Kind {
        values: &["backon", "tokio-retry", "tenacity", "p-retry", "retry-go"],
        state: &[
            "For the retries themselves I would not hand-roll the loop again: the {v} library gives you exponential backoff with jitter and a cap on attempts, and it composes with the timeout you already have around the call.",
            "Rather than maintaining our own backoff loop in {func}, pull in {v}; it handles jitter, a maximum number of attempts and a predicate for which errors are worth another try.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Which retry library did you recommend to me?",
            "What did you suggest using for backoff with jitter instead of writing the loop by hand?",
            "You pointed me at a package for retrying failed calls. Which one was it?",
        ],
        noise: &[
            "Retries are only safe here because the handler is idempotent; without that, a second attempt could charge a customer twice.",
            "A burst of retries right after an outage is exactly what the circuit breaker is meant to absorb.",
        ],
    },
    Kind {
        values: &[
            "pg_blocking_pids() against pg_stat_activity",
            "pg_locks joined with pg_stat_activity",
            "pg_stat_activity filtered on wait_event_type = 'Lock'",
        ],
        state: &[
            "Next time the {table} updates pile up, look at {v} while it is happening: it shows the waiting statement next to the one holding the lock, which is usually all you need to find the culprit.",
            "To see who is blocking whom in the database, the quickest view is {v}; run it during the stall and the session at the head of the chain is the one to look at, often an open transaction someone forgot in a console.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "How did you tell me to find out which query is holding a lock in Postgres?",
            "What did you suggest querying to see which session blocks the others?",
            "You explained how to spot the query at the head of a lock chain. What was it?",
        ],
        noise: &[
            "Long transactions also keep autovacuum from cleaning up, which is a second reason to keep them short.",
            "The migration takes a brief lock on {table}, so it should run outside the busiest hour.",
        ],
    },
    Kind {
        values: &[
            "heaptrack",
            "valgrind's massif",
            "bytehound",
            "memray",
            "pprof heap profiles",
        ],
        state: &[
            "Before guessing at the leak any further, I'd take a profile with {v}: run the {svc} under it for ten minutes of normal traffic and look at which call sites keep allocations alive; it usually points at a cache that never evicts.",
            "The growth you see in the container's memory is steady rather than spiky, which smells like something retained forever. {v} will tell you which allocation sites own the memory after an hour; that is faster than reading the code for it.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Which memory profiler did you suggest for tracking down the leak?",
            "What tool did you tell me to use to find where the memory keeps growing?",
            "You recommended something to profile the memory growth of the service. What was it?",
        ],
        noise: &[
            "Memory usage on the dashboard includes the page cache, so it always looks higher than what the process itself holds.",
            "The OOM kills last month were the batch job, not this service.",
        ],
    },
    Kind {
        values: &[
            "2.5 seconds",
            "800 milliseconds",
            "4 seconds",
            "1.5 seconds",
        ],
        state: &[
            "I'd set the HTTP client timeout to {v} for calls to the {svc}: its p99 is well below that, so anything slower is almost certainly stuck, and failing fast leaves room for one retry inside the caller's own deadline.",
            "The client has no timeout at all at the moment, which is how one slow dependency ties up every worker. Give it {v}; that is about three times the dependency's p99, generous for a healthy call and short enough to fail fast.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What client timeout did you recommend for the calls between our services?",
            "How long did you say the HTTP client should wait before giving up on the other service?",
            "What value did you propose for the outbound request timeout?",
        ],
        noise: &[
            "Timeouts should be set by whoever knows the latency budget of the whole request, not by each library separately.",
            "The load balancer has its own idle timeout, which is unrelated to the client's.",
        ],
    },
    Kind {
        values: &[
            "a partial index on status WHERE status = 'pending'",
            "a BRIN index on created_at",
            "a covering index on (customer_id, created_at) INCLUDE (total)",
            "a GIN index on the tags column",
        ],
        state: &[
            "The slow part of that report is the sequential scan of {table}; {v} should turn it into an index scan, and it can be built concurrently, so it goes out without a maintenance window.",
            "Looking at the plan, the report reads every row of {table} to keep a handful. I'd add {v}; build it with CREATE INDEX CONCURRENTLY and compare the plan before and after.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What kind of index did you propose to speed up the slow report?",
            "Which index did you suggest adding for the report query?",
            "You suggested an index for the report that scanned the whole table. Which one?",
        ],
        noise: &[
            "Every extra index slows down the writes a little, so it is worth dropping the ones nothing uses.",
            "The query planner's estimates for {table} were off because the statistics were stale.",
        ],
    },
    Kind {
        values: &[
            "git bisect run with the failing test as the script",
            "git bisect between last month's release tag and main",
            "git log -S with the name of the changed constant",
        ],
        state: &[
            "To find which commit introduced the regression without reading them all, use {v}; it narrows a few hundred commits down in a handful of steps, and you can leave it running while you do something else.",
            "Since nobody remembers when this started, let the history tell you: {v} will point at the commit that changed the behaviour, and then the diff usually explains itself.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "How did you suggest finding the commit that introduced the regression?",
            "What git technique did you recommend for tracking down when the bug appeared?",
        ],
        noise: &[
            "Small commits make any later search through the history much easier.",
            "The regression test should go in before the fix, so it is seen failing first.",
        ],
    },
    Kind {
        values: &[
            "clippy::unwrap_used",
            "clippy::large_enum_variant",
            "@typescript-eslint/no-floating-promises",
            "ruff's B006 rule",
            "staticcheck's SA1019 check",
        ],
        state: &[
            "To stop this class of bug from coming back, I'd turn on {v} in CI: it flags exactly the pattern that caused it, and the handful of existing hits are easy to fix in one go.",
            "It would be worth enabling {v} in the lint step, so the next occurrence fails the build instead of reaching production; I checked, and only a few places would need changes today.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "Which lint did you suggest enabling so the bug doesn't come back?",
            "What linter rule did you recommend turning on in CI?",
            "You told me about a lint check that would have caught that bug. What was it called?",
        ],
        noise: &[
            "The lint step is the fastest part of the pipeline, so adding checks there costs almost nothing.",
            "A linter warning that everybody ignores is worse than no warning at all.",
        ],
    },
    Kind {
        values: &[
            "Designing Data-Intensive Applications",
            "the Google SRE book",
            "Release It!",
            "Database Internals",
        ],
        state: &[
            "If you want the background on why this fails the way it does, the chapter on replication in {v} explains it better than I can here; it is worth an evening.",
            "For a deeper treatment of these failure modes, I'd recommend reading {v}: it covers timeouts, replication lag and cascading failures with examples very close to what happened here.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What book did you recommend for understanding replication and failures?",
            "Which book did you say I should read about these failure modes?",
        ],
        noise: &[
            "The replica lag alert fires every night during the batch import and nobody looks at it any more.",
            "Write-ups of other companies' outages are a cheap way to learn these lessons.",
        ],
    },
    Kind {
        values: &[
            "k6 with a ramping-arrival-rate scenario",
            "vegeta at a constant request rate",
            "wrk2 with a fixed throughput",
            "locust with a step load shape",
        ],
        state: &[
            "To know whether the fix holds, load-test the {svc} with {v}: a fixed arrival rate shows queueing that a closed loop of virtual users hides, because slow responses slow the test down instead of piling up.",
            "For the load test I'd use {v} rather than the ad-hoc script; it keeps sending at the target rate even when responses slow down, which is what real users do and what exposes the queue.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "How did you suggest load-testing the service to check the fix?",
            "What load-testing tool and setup did you recommend?",
            "You described a better way to load test than my script. What was it?",
        ],
        noise: &[
            "The staging cluster has fewer nodes than production, so its numbers only compare with each other.",
            "Load tests against a shared environment annoy everyone else using it.",
        ],
    },
    Kind {
        values: &[
            "clock skew between the two hosts",
            "a stale DNS entry cached by the client",
            "the load balancer closing idle keep-alive connections",
            "the connection pool being shared across forked workers",
        ],
        state: &[
            "My best guess at the root cause of the intermittent failures is {v}: it explains why they only show up after a quiet period and never in the tests, which run on one machine.",
            "Putting the timings together, I think the intermittent errors come from {v}. That would explain why a retry always succeeds and why the errors cluster after deploys and quiet nights.",
        ],
        change: &[],
        confirm: &[],
        ask: &[
            "What did you think was the root cause of the intermittent errors?",
            "What was your explanation for the errors that only appeared after a quiet period?",
            "You had a theory about why the failures were intermittent. What was it?",
        ],
        noise: &[
            "Intermittent failures are the most expensive kind to debug, so the logs should say more when one happens.",
            "The errors in the dashboard last night were from the deploy itself, not from users.",
        ],
    },
];

// ---------------------------------------------------------------------------------------------
// A generated history.

const CATEGORIES: [&str; 7] = [
    "single",
    "preference",
    "aggregation",
    "temporal",
    "update",
    "assistant",
    "two events",
];

struct Turn {
    user: bool,
    text: String,
    at_ms: i64,
}

struct Session {
    id: String,
    start_ms: i64,
    turns: Vec<Turn>,
}

struct Question {
    text: String,
    /// 1 to 7, the index into [`CATEGORIES`] plus one.
    category: u8,
    /// Indices of the evidence sessions.
    evidence: Vec<usize>,
    /// For updates: the sessions with the older statements.
    older: Vec<usize>,
}

struct History {
    index: usize,
    cwd: String,
    sessions: Vec<Session>,
    questions: Vec<Question>,
    as_of_ms: i64,
}

/// What one session says on purpose: a user sentence, and an assistant confirmation.
#[derive(Default, Clone)]
struct Plant {
    user: String,
    confirm: Option<String>,
    /// Said in passing: appended to a turn about something else.
    aside: bool,
}

fn month_name(ms: i64) -> &'static str {
    let (_, month, _) = common::time::civil_from_days(ms.div_euclid(DAY_MS));
    common::time::MONTH_NAMES[(month - 1) as usize]
}

fn month_key(ms: i64) -> (i64, i64) {
    let (year, month, _) = common::time::civil_from_days(ms.div_euclid(DAY_MS));
    (year, month)
}

fn rfc3339(ms: i64) -> String {
    let in_day = ms.rem_euclid(DAY_MS);
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        common::time::utc_day(ms),
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Chooses sessions for plants, spreading them so that few sessions carry more than one.
struct Slots {
    load: Vec<usize>,
}

impl Slots {
    /// A session allowed by `ok`, unloaded if possible.
    fn take(&mut self, rng: &mut Lcg, ok: &dyn Fn(usize) -> bool) -> usize {
        let n = self.load.len();
        for limit in [0, 1, usize::MAX] {
            for _ in 0..400 {
                let i = rng.below(n);
                if self.load[i] <= limit && ok(i) {
                    self.load[i] += 1;
                    return i;
                }
            }
        }
        let i = (0..n).find(|&i| ok(i)).unwrap_or(0);
        self.load[i] += 1;
        i
    }

    /// `k` sessions in time order, each allowed by `ok` given the ones before it.
    fn ordered(
        &mut self,
        rng: &mut Lcg,
        k: usize,
        ok: &dyn Fn(&[usize], usize) -> bool,
    ) -> Vec<usize> {
        let n = self.load.len();
        for attempt in 0..2000 {
            let mut picked: Vec<usize> = (0..k).map(|_| rng.below(n)).collect();
            picked.sort_unstable();
            let loaded = picked
                .iter()
                .any(|&i| self.load[i] > usize::from(attempt > 1000));
            let fits = (0..k).all(|j| ok(&picked[..j], picked[j]));
            if !loaded && fits {
                for &i in &picked {
                    self.load[i] += 1;
                }
                return picked;
            }
        }
        // Evenly spread, whatever the load, when nothing random fits.
        let picked: Vec<usize> = (0..k).map(|j| (j * 2 + 1) * n / (2 * k)).collect();
        for &i in &picked {
            self.load[i] += 1;
        }
        picked
    }
}

fn generate(index: usize) -> History {
    let mut rng = Lcg::new(index as u64 + 1);
    let project = PROJECTS[index % PROJECTS.len()];
    let cwd = format!("/home/dev/{project}");
    let count = rng.range(SESSIONS.0, SESSIONS.1);
    // About six months, starting somewhere in the first half of 2025.
    let first_day = common::time::days_from_civil(2025, 1, 6) + rng.below(150) as i64;
    let span_days = rng.range(175, 185) as i64;
    let mut starts: Vec<i64> = (0..count)
        .map(|_| {
            let day = first_day + rng.below(span_days as usize) as i64;
            let minute = rng.range(8 * 60, 19 * 60) as i64;
            day * DAY_MS + minute * 60_000 + rng.below(60) as i64 * 1000
        })
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let count = starts.len();
    let as_of_ms = starts[count - 1] + DAY_MS;

    let mut plants: Vec<Vec<Plant>> = vec![Vec::new(); count];
    let mut questions = Vec::new();
    let mut slots = Slots {
        load: vec![0; count],
    };
    let mut noise: Vec<&'static str> = Vec::new();
    let confirm = |rng: &mut Lcg, kind: &Kind, vars: &[(&str, &str)]| -> Option<String> {
        if kind.confirm.is_empty() || !rng.chance(0.5) {
            return None;
        }
        let template = rng.pick(kind.confirm);
        Some(rng.fill(template, vars))
    };

    // Knowledge updates: two or three statements in order, the latest is the evidence.
    for &k in &rng.distinct(UPDATES.len(), 3) {
        let kind = &UPDATES[k];
        let steps = (if rng.chance(0.3) { 3 } else { 2 }).min(kind.values.len());
        let mut values = rng.distinct(kind.values.len(), steps);
        if rng.chance(0.7) {
            // Most updates move forward (a version going up), some do not (a revert).
            values.sort_unstable();
        }
        let sessions = slots.ordered(&mut rng, steps, &|before, i| {
            before.last().is_none_or(|&p| i >= p + 4)
        });
        for (step, &session) in sessions.iter().enumerate() {
            let v = kind.values[values[step]];
            let user = if step == 0 {
                let template = rng.pick(kind.state);
                rng.fill(template, &[("v", v)])
            } else {
                let old = kind.values[values[step - 1]];
                let template = rng.pick(kind.change);
                rng.fill(template, &[("v", v), ("old", old)])
            };
            let confirm = confirm(&mut rng, kind, &[("v", v)]);
            plants[session].push(Plant {
                user,
                confirm,
                aside: false,
            });
        }
        let ask = rng.pick(kind.ask).to_owned();
        questions.push(Question {
            text: ask,
            category: 5,
            evidence: vec![sessions[steps - 1]],
            older: sessions[..steps - 1].to_vec(),
        });
        noise.extend(kind.noise);
    }

    // Single-session facts.
    for &k in &rng.distinct(SINGLE.len(), 5) {
        let kind = &SINGLE[k];
        let v = rng.pick(kind.values);
        let session = slots.take(&mut rng, &|_| true);
        let template = rng.pick(kind.state);
        let user = rng.fill(template, &[("v", v)]);
        let confirm = confirm(&mut rng, kind, &[("v", v)]);
        plants[session].push(Plant {
            user,
            confirm,
            aside: false,
        });
        questions.push(Question {
            text: rng.pick(kind.ask).to_owned(),
            category: 1,
            evidence: vec![session],
            older: Vec::new(),
        });
        noise.extend(kind.noise);
    }

    // Preferences, said in passing.
    for &k in &rng.distinct(PREFERENCES.len(), 4) {
        let kind = &PREFERENCES[k];
        let v = rng.pick(kind.values);
        let session = slots.take(&mut rng, &|_| true);
        let template = rng.pick(kind.state);
        let user = rng.fill(template, &[("v", v)]);
        plants[session].push(Plant {
            user,
            confirm: None,
            aside: true,
        });
        questions.push(Question {
            text: rng.pick(kind.ask).to_owned(),
            category: 2,
            evidence: vec![session],
            older: Vec::new(),
        });
        noise.extend(kind.noise);
    }

    // Aggregation: two to four sessions, one value each.
    for &k in &rng.distinct(AGGREGATIONS.len(), 3) {
        let kind = &AGGREGATIONS[k];
        let n = rng.range(2, 4);
        let values = rng.distinct(kind.values.len(), n);
        let mut evidence = Vec::new();
        for &value in &values {
            let v = kind.values[value];
            let session = slots.take(&mut rng, &|i| !evidence.contains(&i));
            let template = rng.pick(kind.state);
            let user = rng.fill(template, &[("v", v)]);
            let confirm = confirm(&mut rng, kind, &[("v", v)]);
            plants[session].push(Plant {
                user,
                confirm,
                aside: false,
            });
            evidence.push(session);
        }
        evidence.sort_unstable();
        questions.push(Question {
            text: rng.pick(kind.ask).to_owned(),
            category: 3,
            evidence,
            older: Vec::new(),
        });
        noise.extend(kind.noise);
    }

    // Temporal: a problem attacked three times in three different months.
    let series = &SERIES[rng.below(SERIES.len())];
    let attempts = rng.distinct(series.attempts.len(), 3);
    let months: Vec<(i64, i64)> = starts.iter().map(|&s| month_key(s)).collect();
    let trio = slots.ordered(&mut rng, 3, &|before, i| {
        before.iter().all(|&p| months[p] != months[i])
    });
    for (step, &session) in trio.iter().enumerate() {
        let template = if step == 0 {
            rng.pick(SERIES_FIRST)
        } else {
            rng.pick(SERIES_AGAIN)
        };
        let v = series.attempts[attempts[step]];
        let user = rng.fill(template, &[("subject", series.subject), ("v", v)]);
        plants[session].push(Plant {
            user,
            confirm: None,
            aside: false,
        });
    }
    let alias = [("alias", series.alias)];
    for (template, session) in [
        (rng.pick(SERIES_ASK_FIRST), trio[0]),
        (rng.pick(SERIES_ASK_LATEST), trio[2]),
    ] {
        questions.push(Question {
            text: rng.fill(template, &alias),
            category: 4,
            evidence: vec![session],
            older: Vec::new(),
        });
    }
    let template = rng.pick(SERIES_ASK_MONTH);
    questions.push(Question {
        text: rng.fill(
            template,
            &[
                ("alias", series.alias),
                ("month", month_name(starts[trio[1]])),
            ],
        ),
        category: 4,
        evidence: vec![trio[1]],
        older: Vec::new(),
    });

    // Temporal: four releases in four months; two are asked about by month.
    let releases = slots.ordered(&mut rng, 4, &|before, i| {
        before.iter().all(|&p| months[p] != months[i])
    });
    let features = rng.distinct(FEATURES.len(), 4);
    let major = rng.range(1, 3);
    let mut minor = rng.range(0, 6);
    for (step, &session) in releases.iter().enumerate() {
        minor += rng.range(1, 2);
        let version = format!("{major}.{minor}.0");
        let template = rng.pick(RELEASE_STATE);
        let user = rng.fill(
            template,
            &[("v", &version), ("feature", FEATURES[features[step]])],
        );
        plants[session].push(Plant {
            user,
            confirm: None,
            aside: false,
        });
    }
    for &r in &rng.distinct(4, 2) {
        let template = rng.pick(RELEASE_ASK);
        questions.push(Question {
            text: rng.fill(template, &[("month", month_name(starts[releases[r]]))]),
            category: 4,
            evidence: vec![releases[r]],
            older: Vec::new(),
        });
    }
    noise.extend(RELEASE_NOISE);

    // Temporal: an incident N weeks before the question, and two others at other times.
    let (weeks, ago) = [
        (2, "two weeks ago"),
        (3, "three weeks ago"),
        (4, "four weeks ago"),
    ][rng.below(3)];
    let target_ms = as_of_ms - weeks * 7 * DAY_MS;
    let incident = (0..count)
        .min_by_key(|&i| (starts[i] - target_ms).abs())
        .unwrap_or(0);
    slots.load[incident] += 1;
    let kinds = rng.distinct(INCIDENTS.len(), 3);
    let mut incident_sessions = vec![incident];
    for (n, &k) in kinds.iter().enumerate() {
        let session = if n == 0 {
            incident
        } else {
            let taken = incident_sessions.clone();
            let s = slots.take(&mut rng, &|i| {
                (starts[i] - starts[incident]).abs() > 10 * DAY_MS && !taken.contains(&i)
            });
            incident_sessions.push(s);
            s
        };
        let template = rng.pick(INCIDENT_STATE);
        let user = rng.fill(template, &[("v", INCIDENTS[k])]);
        plants[session].push(Plant {
            user,
            confirm: None,
            aside: false,
        });
    }
    let template = rng.pick(INCIDENT_ASK);
    questions.push(Question {
        text: rng.fill(template, &[("ago", ago)]),
        category: 4,
        evidence: vec![incident],
        older: Vec::new(),
    });
    noise.extend(INCIDENT_NOISE);

    // Temporal: what happened some time before a life event.
    let (gap_days, gap) = GAPS[rng.below(GAPS.len())];
    let (event_said, event_named) = ANCHORS[rng.below(ANCHORS.len())];
    let anchor = slots.take(&mut rng, &|i| {
        i >= count / 3 && starts[i] - gap_days * DAY_MS > starts[0] + 2 * DAY_MS
    });
    plants[anchor].push(Plant {
        user: event_said.to_owned(),
        confirm: None,
        aside: false,
    });
    let then = starts[anchor] - gap_days * DAY_MS;
    let nearest = (0..count)
        .filter(|&i| i != anchor)
        .min_by_key(|&i| (starts[i] - then).abs())
        .unwrap_or(0);
    // Every session within a day of that time is evidence; the nearest always is.
    let mut evidence: Vec<usize> = (0..count)
        .filter(|&i| i != anchor && (starts[i] - then).abs() <= DAY_MS)
        .collect();
    if !evidence.contains(&nearest) {
        evidence.push(nearest);
    }
    evidence.sort_unstable();
    let template = rng.pick(ANCHOR_ASK);
    questions.push(Question {
        text: rng.fill(template, &[("gap", gap), ("event", event_named)]),
        category: 4,
        evidence,
        older: Vec::new(),
    });

    let mut sessions: Vec<Session> = (0..count)
        .map(|i| session(&mut rng, index, starts[i], &plants[i], &noise))
        .collect();
    said_by_the_assistant(index, &mut sessions, &mut questions);
    let events = Events {
        releases: releases
            .iter()
            .zip(&features)
            .map(|(&session, &feature)| (session, feature))
            .collect(),
        incidents: incident_sessions.iter().copied().zip(kinds).collect(),
        moment: (anchor, event_named),
    };
    two_events(index, &events, &mut questions);
    History {
        index,
        cwd,
        sessions,
        questions,
        as_of_ms,
    }
}

/// The dated events a history plants, for questions that name two of them: each release's
/// session and feature (an index into [`FEATURES`]), each incident's session and kind (into
/// [`INCIDENTS`]), and the life event's session with how a question names it.
struct Events {
    releases: Vec<(usize, usize)>,
    incidents: Vec<(usize, usize)>,
    moment: (usize, &'static str),
}

/// How a question names a release's feature: other words than the release note's, as someone
/// recalls a feature rather than quotes it. Parallel to [`FEATURES`].
const FEATURES_RECALLED: &[&str] = &[
    "exporting to CSV",
    "the reworked onboarding",
    "the dashboard's dark theme",
    "single sign-on with SAML",
    "editing many invoices at once",
    "retrying failed webhooks",
    "billing by usage",
    "searching the audit log",
    "paying in several currencies",
    "reports on phones",
];

/// How a question names an incident. Parallel to [`INCIDENTS`].
const INCIDENTS_RECALLED: &[&str] = &[
    "the lost payment webhooks",
    "the 502s on the login page",
    "the broken search index",
    "the locked orders table",
    "the expired API certificate",
];

const TWO_RELEASES_ASK: &[&str] = &[
    "Which did I ship first, {a} or {b}?",
    "Did {a} go out before or after {b}?",
    "How many weeks passed between the release with {a} and the one with {b}?",
];
const TWO_INCIDENTS_ASK: &[&str] = &[
    "Which outage came first, {a} or {b}?",
    "How long was it between {a} and {b}?",
    "Did {a} happen before {b}?",
];
const RELEASE_AND_MOMENT_ASK: &[&str] = &[
    "Did the release with {a} come before or after {b}?",
    "How many weeks before or after {b} did {a} ship?",
];

/// Three questions naming two dated events each (which came first, how long between them),
/// whose evidence is both events' sessions: two releases, two incidents, and a release against
/// the life event. Drawn from a generator of their own, so the history's text is what it was
/// before this category existed, and the events are named as someone recalls them.
fn two_events(index: usize, events: &Events, questions: &mut Vec<Question>) {
    let mut rng = Lcg::new(0x7e0_e7e4_7500 + index as u64);
    let mut ask = |rng: &mut Lcg, templates: &[&str], a: &str, b: &str, sessions: [usize; 2]| {
        let template = rng.pick(templates);
        let mut evidence = sessions.to_vec();
        evidence.sort_unstable();
        evidence.dedup();
        questions.push(Question {
            text: rng.fill(template, &[("a", a), ("b", b)]),
            category: 7,
            evidence,
            older: Vec::new(),
        });
    };
    for (planted, names, templates) in [
        (&events.releases, FEATURES_RECALLED, TWO_RELEASES_ASK),
        (&events.incidents, INCIDENTS_RECALLED, TWO_INCIDENTS_ASK),
    ] {
        let pair = rng.distinct(planted.len(), 2);
        let (first, second) = (planted[pair[0]], planted[pair[1]]);
        ask(
            &mut rng,
            templates,
            names[first.1],
            names[second.1],
            [first.0, second.0],
        );
    }
    let release = events.releases[rng.below(events.releases.len())];
    let (moment, named) = events.moment;
    ask(
        &mut rng,
        RELEASE_AND_MOMENT_ASK,
        FEATURES_RECALLED[release.1],
        named,
        [release.0, moment],
    );
}

/// Three facts only the assistant states ([`ASSISTANT`]), each in one long answer of its own
/// session, and their kinds' remarks in answers of other sessions. This draws from a generator
/// of its own, seeded apart from the history's, so everything else the history says is what it
/// was before this category existed.
fn said_by_the_assistant(index: usize, sessions: &mut [Session], questions: &mut Vec<Question>) {
    let mut rng = Lcg::new(0xa551_57a4_7000 + index as u64);
    let kinds = rng.distinct(ASSISTANT.len(), 3);
    let chosen = rng.distinct(sessions.len(), 3);
    let replies = |session: &Session| -> Vec<usize> {
        (0..session.turns.len())
            .filter(|&n| !session.turns[n].user)
            .collect()
    };
    for (&k, &s) in kinds.iter().zip(&chosen) {
        let kind = &ASSISTANT[k];
        let v = rng.pick(kind.values);
        let template = rng.pick(kind.state);
        let fact = rng.fill(template, &[("v", v)]);
        let answers = replies(&sessions[s]);
        let at = answers[rng.below(answers.len())];
        let turn = &mut sessions[s].turns[at];
        turn.text = lengthened(&mut rng, &turn.text, &fact);
        questions.push(Question {
            text: rng.pick(kind.ask).to_owned(),
            category: 6,
            evidence: vec![s],
            older: Vec::new(),
        });
        for template in kind.noise {
            let other = rng.below(sessions.len());
            if other == s {
                continue;
            }
            let answers = replies(&sessions[other]);
            let at = answers[rng.below(answers.len())];
            let remark = rng.fill(template, &[]);
            let turn = &mut sessions[other].turns[at];
            turn.text = format!("{}\n\n{remark}", turn.text);
        }
    }
}

/// An answer made long (3,000 to 9,000 characters) with more of the paragraphs answers are
/// made of, and `fact` as one of its paragraphs, at any place but the first.
fn lengthened(rng: &mut Lcg, answer: &str, fact: &str) -> String {
    let mut paras: Vec<String> = answer.split("\n\n").map(str::to_owned).collect();
    let target = rng.range(3_000, 9_000);
    let mut length = answer.len() + fact.len() + 2;
    while length < target {
        let template = if rng.chance(0.5) {
            rng.pick(GENERIC)
        } else {
            let topic = &TOPICS[rng.below(TOPICS.len())];
            rng.pick(topic.paras)
        };
        let para = rng.fill(template, &[]);
        if length + para.len() + 2 > 9_000 {
            break;
        }
        length += para.len() + 2;
        paras.push(para);
    }
    let at = rng.range(1, paras.len());
    paras.insert(at, fact.to_owned());
    paras.join("\n\n")
}

/// One session: a topic, user turns (with the plants and some noise), long assistant answers.
fn session(
    rng: &mut Lcg,
    history: usize,
    start_ms: i64,
    plants: &[Plant],
    noise: &[&'static str],
) -> Session {
    let id = format!(
        "{}-{}-4{}-{}-{:04x}{}",
        rng.hex(8),
        rng.hex(4),
        rng.hex(3),
        rng.hex(4),
        history,
        rng.hex(8)
    );
    let topic = &TOPICS[rng.below(TOPICS.len())];
    // The session's paragraphs, dealt in turn to its answers so that they seldom repeat: its
    // topic's, a neighbouring topic's and the general ones, shuffled.
    let other = &TOPICS[rng.below(TOPICS.len())];
    let mut deck = Deck {
        cards: topic
            .paras
            .iter()
            .chain(GENERIC)
            .chain(other.paras.iter().take(3))
            .copied()
            .collect(),
        next: 0,
    };
    rng.shuffle(&mut deck.cards);
    let pairs = rng.range(PAIRS.0, PAIRS.1);
    let mut follow: Vec<usize> = (0..topic.follow.len()).collect();
    rng.shuffle(&mut follow);
    let mut users: Vec<String> = (0..pairs)
        .map(|p| {
            if p == 0 {
                let template = rng.pick(topic.openers);
                rng.fill(template, &[])
            } else if p == pairs - 1 && rng.chance(0.4) {
                rng.pick(ACKS).to_owned()
            } else {
                rng.fill(topic.follow[follow[(p - 1) % follow.len()]], &[])
            }
        })
        .collect();
    let mut confirms: Vec<Option<String>> = vec![None; pairs];
    let mut planted = vec![false; pairs];
    for plant in plants {
        let at = rng.below(pairs);
        planted[at] = true;
        users[at] = if plant.aside {
            format!("{} {}.", users[at], plant.user)
        } else if rng.chance(0.5) {
            format!("{} {}", plant.user, users[at])
        } else {
            format!("{} {}", users[at], plant.user)
        };
        if plant.confirm.is_some() {
            confirms[at] = plant.confirm.clone();
        }
    }
    for (at, user) in users.iter_mut().enumerate() {
        if !planted[at] && !noise.is_empty() && rng.chance(0.3) {
            let template = rng.pick(noise);
            let sentence = rng.fill(template, &[]);
            *user = format!("{sentence} {user}");
        }
    }
    let mut turns = Vec::with_capacity(pairs * 2);
    let mut at_ms = start_ms;
    for (p, user) in users.into_iter().enumerate() {
        turns.push(Turn {
            user: true,
            text: user,
            at_ms,
        });
        at_ms += rng.range(20, 90) as i64 * 1000;
        let reply = reply(rng, &mut deck, confirms[p].as_deref(), noise);
        turns.push(Turn {
            user: false,
            text: reply,
            at_ms,
        });
        at_ms += rng.range(60, 420) as i64 * 1000;
    }
    Session {
        id,
        start_ms,
        turns,
    }
}

/// A long assistant answer: paragraphs of the topic, general ones and code, 800 to 3,000
/// characters, with the confirmation (if any) and a remark sharing a fact's vocabulary (now
/// and then) somewhere in the middle.
fn reply(rng: &mut Lcg, deck: &mut Deck, confirm: Option<&str>, noise: &[&str]) -> String {
    let mut extras: Vec<String> = confirm.map(str::to_owned).into_iter().collect();
    if !noise.is_empty() && rng.chance(0.25) {
        let template = rng.pick(noise);
        let sentence = rng.fill(template, &[]);
        extras.push(format!(
            "You mentioned something related before, so for completeness: \"{sentence}\""
        ));
    }
    let reserved: usize = extras.iter().map(|e| e.len() + 2).sum();
    let cap = 3_000 - reserved;
    let target = rng.range(800, cap - 200);
    let mut paras: Vec<String> = Vec::new();
    let mut code_shown = false;
    let mut length = 0;
    let mut tries = 0;
    while length < target && tries < 40 {
        tries += 1;
        let text = if !code_shown && !paras.is_empty() && rng.chance(0.45) {
            code_shown = true;
            let template = rng.pick(CODE);
            rng.fill(template, &[])
        } else {
            let template = deck.deal(rng);
            rng.fill(template, &[])
        };
        if length + text.len() > cap {
            if length >= 800 {
                break;
            }
            // Too long to fit whole: try another paragraph.
            continue;
        }
        length += text.len() + 2;
        paras.push(text);
    }
    for extra in extras {
        let at = if paras.len() > 2 {
            rng.range(1, paras.len() - 1)
        } else {
            paras.len()
        };
        paras.insert(at, extra);
    }
    paras.join("\n\n")
}

/// Paragraph templates dealt in order, reshuffled when they run out.
struct Deck {
    cards: Vec<&'static str>,
    next: usize,
}

impl Deck {
    fn deal(&mut self, rng: &mut Lcg) -> &'static str {
        if self.next == self.cards.len() {
            rng.shuffle(&mut self.cards);
            self.next = 0;
        }
        self.next += 1;
        self.cards[self.next - 1]
    }
}

/// The session as Claude Code writes it: one JSON record a line, the user's prompts as plain
/// strings and the assistant's answers as text blocks.
fn transcript(history: &History, session: &Session) -> String {
    let mut out = String::new();
    let mut parent = serde_json::Value::Null;
    for (n, turn) in session.turns.iter().enumerate() {
        let uuid = format!("{}-{:012x}", &session.id[..23], n);
        let base = json!({
            "parentUuid": parent,
            "isSidechain": false,
            "userType": "external",
            "cwd": history.cwd,
            "sessionId": session.id,
            "version": "2.1.38",
            "gitBranch": "main",
            "uuid": uuid,
            "timestamp": rfc3339(turn.at_ms),
        });
        let mut record = base;
        if turn.user {
            record["type"] = "user".into();
            record["message"] = json!({"role": "user", "content": turn.text});
            record["permissionMode"] = "default".into();
        } else {
            record["type"] = "assistant".into();
            record["requestId"] = format!("req_{}{n:04}", &session.id[..8]).into();
            record["message"] = json!({
                "model": "claude-sonnet-4-5",
                "id": format!("msg_{}{n:04}", &session.id[..8]),
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": turn.text}],
                "stop_reason": "end_turn",
                "stop_sequence": null,
                "usage": {"input_tokens": 1200, "output_tokens": turn.text.len() / 4},
            });
        }
        out.push_str(&record.to_string());
        out.push('\n');
        parent = uuid.into();
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The bench.

const MODES: [&str; 4] = ["fts", "vector", "hybrid", "hybrid/session"];

/// Sums of one (half, mode, category).
#[derive(Default, Clone, Copy)]
struct Sums {
    all5: f64,
    all10: f64,
    any5: f64,
    n: usize,
}

#[derive(Default)]
struct Tally {
    sums: HashMap<(usize, &'static str, u8), Sums>,
    /// For updates: (latest above every older statement, questions).
    order: HashMap<(usize, &'static str), (usize, usize)>,
    latency: HashMap<(usize, &'static str), Vec<f64>>,
}

impl Tally {
    fn get(&self, half: usize, mode: &'static str, category: u8) -> Sums {
        self.sums
            .get(&(half, mode, category))
            .copied()
            .unwrap_or_default()
    }
}

/// The first `k` distinct sessions, in the order the hits name them.
fn distinct_sessions(hits: &[String], k: usize) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for hit in hits {
        if !out.contains(&hit.as_str()) {
            out.push(hit);
            if out.len() == k {
                break;
            }
        }
    }
    out
}

pub async fn histories() -> anyhow::Result<()> {
    let count: usize = match std::env::var("MNEME_BENCH_HISTORIES") {
        Ok(v) => v.parse().context("MNEME_BENCH_HISTORIES takes a number")?,
        Err(_) => 12,
    };
    let mneme = std::env::current_exe()?
        .parent()
        .context("the bench binary has no directory")?
        .join("mneme");
    anyhow::ensure!(
        mneme.is_file(),
        "{} is missing: build it with cargo build --release --workspace",
        mneme.display()
    );
    let retrieval_args = retrieval::RetrievalArgs {
        // The figures should be the model's: the static tier is left out, and the bench waits
        // until the model has embedded every item.
        static_vectors: false,
        ..super::retrieval_bench::retrieval_args()?
    };
    let compressor_args = compressor::Args::try_parse_from(["mneme-compressor"])
        .context("default compressor settings")?
        .compressor;
    if let Some(dir) = std::env::var_os("MNEME_BENCH_HISTORIES_DUMP") {
        return dump(Path::new(&dir), count);
    }
    println!(
        "histories: {count} generated histories; even indices are the development half, odd ones the test half"
    );
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut questions_total = 0;
    let sweep = super::fusion_sweep();
    let modes: Vec<&'static str> = MODES
        .iter()
        .copied()
        .chain(sweep.iter().map(|(label, _)| *label))
        .collect();
    // `MNEME_BENCH_HALF=dev` (or `test`) measures one half only: a sweep of constants is run
    // on the development half, and that half alone takes half the time.
    let halves: &[usize] = match std::env::var("MNEME_BENCH_HALF").as_deref() {
        Err(_) => &[0, 1],
        Ok("dev") => &[0],
        Ok("test") => &[1],
        Ok(other) => anyhow::bail!("MNEME_BENCH_HALF={other:?}: dev or test"),
    };
    // By default a question is asked one day after the history's last session.
    // `MNEME_BENCH_AS_OF=none` asks without a time, as someone asks today about a history
    // imported long after it happened; an RFC 3339 time asks as of that time.
    let asked = match std::env::var("MNEME_BENCH_AS_OF").as_deref() {
        Err(_) | Ok("history") => None,
        Ok("none") => Some(0),
        Ok(time) => Some(common::time::parse_rfc3339_ms(time).with_context(|| {
            format!("MNEME_BENCH_AS_OF={time:?}: history, none or an RFC 3339 time")
        })?),
    };
    for index in (0..count).filter(|i| halves.contains(&(i % 2))) {
        let mut history = generate(index);
        if let Some(asked) = asked {
            history.as_of_ms = asked;
        }
        let half = index % 2;
        let took = Instant::now();
        let report =
            run_history(&history, &mneme, &retrieval_args, &compressor_args, &sweep).await?;
        questions_total += history.questions.len();
        // `MNEME_BENCH_MISSES=hybrid` (or another mode) prints each question that mode misses,
        // with where its evidence sessions and, for an update, the older statements' ranked.
        let misses = std::env::var("MNEME_BENCH_MISSES").ok();
        for (q, question) in history.questions.iter().enumerate() {
            for (m, &mode) in modes.iter().enumerate() {
                let (hits, ms) = &report[q][m];
                tally.latency.entry((half, mode)).or_default().push(*ms);
                let evidence: Vec<&str> = question
                    .evidence
                    .iter()
                    .map(|&i| history.sessions[i].id.as_str())
                    .collect();
                let top5 = distinct_sessions(hits, 5);
                let top10 = distinct_sessions(hits, 10);
                let all = |top: &[&str]| evidence.iter().all(|e| top.contains(e));
                let s = Sums {
                    all5: f64::from(u8::from(all(&top5))),
                    all10: f64::from(u8::from(all(&top10))),
                    any5: f64::from(u8::from(evidence.iter().any(|e| top5.contains(e)))),
                    n: 1,
                };
                for category in [question.category, 0] {
                    let e = tally.sums.entry((half, mode, category)).or_default();
                    e.all5 += s.all5;
                    e.all10 += s.all10;
                    e.any5 += s.any5;
                    e.n += 1;
                }
                let ranked = distinct_sessions(hits, usize::MAX);
                let place = |i: usize| {
                    ranked
                        .iter()
                        .position(|s| *s == history.sessions[i].id)
                        .unwrap_or(usize::MAX)
                };
                // For an update: the latest statement's session is found, above every older one.
                let latest = place(question.evidence[0]);
                let above =
                    latest != usize::MAX && question.older.iter().all(|&o| latest < place(o));
                if misses.as_deref() == Some(mode) && (s.all5 == 0.0 || !above) {
                    let places = |sessions: &[usize]| {
                        sessions
                            .iter()
                            .map(|&i| match place(i) {
                                usize::MAX => "-".to_owned(),
                                p => (p + 1).to_string(),
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    };
                    println!(
                        "  miss {mode} history {} {}: evidence at {} older at [{}]: {}",
                        history.index,
                        CATEGORIES[question.category as usize - 1],
                        places(&question.evidence),
                        places(&question.older),
                        question.text
                    );
                }
                if question.category == 5 {
                    let e = tally.order.entry((half, mode)).or_default();
                    e.0 += usize::from(above);
                    e.1 += 1;
                }
            }
        }
        println!(
            "history {} ({}): {} sessions, {} turns, {} questions, {:.0}s (total {:.0}s)",
            history.index,
            if half == 0 { "dev" } else { "test" },
            history.sessions.len(),
            history
                .sessions
                .iter()
                .map(|s| s.turns.len())
                .sum::<usize>(),
            history.questions.len(),
            took.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }

    for (half, name) in [(0, "development"), (1, "test")] {
        if !halves.contains(&half) {
            continue;
        }
        println!(
            "\n{name} half (histories with {} index): session recall, %",
            if half == 0 { "even" } else { "odd" }
        );
        println!(
            "{:<15} {:<12} {:>4} {:>8} {:>9} {:>8}",
            "mode", "category", "n", "all@5", "all@10", "any@5"
        );
        for &mode in &modes {
            for category in 0..=CATEGORIES.len() as u8 {
                let s = tally.get(half, mode, category);
                if s.n == 0 {
                    continue;
                }
                let label = if category == 0 {
                    "overall"
                } else {
                    CATEGORIES[category as usize - 1]
                };
                let pct = |x: f64| 100.0 * x / s.n as f64;
                println!(
                    "{mode:<15} {label:<12} {:>4} {:>8.1} {:>9.1} {:>8.1}",
                    s.n,
                    pct(s.all5),
                    pct(s.all10),
                    pct(s.any5)
                );
            }
        }
        for &mode in &modes {
            let (above, n) = tally.order.get(&(half, mode)).copied().unwrap_or_default();
            let latency = sorted(
                tally
                    .latency
                    .get(&(half, mode))
                    .cloned()
                    .unwrap_or_default(),
            );
            println!(
                "{mode:<15} updates: latest above older {:.1}% ({above}/{n}); search p95 {:.1} ms",
                100.0 * above as f64 / n.max(1) as f64,
                percentile(&latency, 95.0)
            );
        }
    }
    let pct = |half: usize, mode: &'static str, any: bool| {
        let s = tally.get(half, mode, 0);
        100.0 * if any { s.any5 } else { s.all5 } / s.n.max(1) as f64
    };
    println!(
        "\nhistories: {count} histories in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "histories: test_hybrid_all5={:.1} test_fts_all5={:.1} test_vector_all5={:.1} test_hybrid_any5={:.1} dev_hybrid_all5={:.1} questions={questions_total}",
        pct(1, "hybrid", false),
        pct(1, "fts", false),
        pct(1, "vector", false),
        pct(1, "hybrid", true),
        pct(0, "hybrid", false),
    );
    Ok(())
}

/// Write the histories (`MNEME_BENCH_HISTORIES_DUMP=DIR`) as the bench feeds them, with their
/// questions and evidence, to read them without running anything.
fn dump(dir: &Path, count: usize) -> anyhow::Result<()> {
    for index in 0..count {
        let history = generate(index);
        let out = dir.join(format!("history-{index}"));
        std::fs::create_dir_all(&out)?;
        for session in &history.sessions {
            std::fs::write(
                out.join(format!("{}.jsonl", session.id)),
                transcript(&history, session),
            )?;
        }
        let questions: Vec<serde_json::Value> = history
            .questions
            .iter()
            .map(|q| {
                let day = |i: &usize| {
                    json!({
                        "session": history.sessions[*i].id,
                        "at": rfc3339(history.sessions[*i].start_ms),
                    })
                };
                json!({
                    "question": q.text,
                    "category": CATEGORIES[q.category as usize - 1],
                    "evidence": q.evidence.iter().map(day).collect::<Vec<_>>(),
                    "older": q.older.iter().map(day).collect::<Vec<_>>(),
                })
            })
            .collect();
        std::fs::write(
            out.join("questions.json"),
            serde_json::to_string_pretty(&json!({
                "as_of": rfc3339(history.as_of_ms),
                "questions": questions,
            }))?,
        )?;
    }
    println!("histories: {count} histories written to {}", dir.display());
    Ok(())
}

/// One history through the real pipeline: its sessions' ids ranked for every question and
/// mode (in [`MODES`] order), with each search's time in milliseconds.
async fn run_history(
    history: &History,
    mneme: &Path,
    retrieval_args: &retrieval::RetrievalArgs,
    compressor_args: &compressor::CompressorArgs,
    sweep: &[(&'static str, retrieval::search::Tuning)],
) -> anyhow::Result<Vec<Vec<(Vec<String>, f64)>>> {
    let bed = Bed::start(true).await?;
    let services = [
        tokio::spawn(retrieval::run(
            bed.common.clone(),
            retrieval_args.clone(),
            bed.shutdown.clone(),
        )),
        tokio::spawn(compressor::run(
            bed.common.clone(),
            compressor_args.clone(),
            bed.shutdown.clone(),
        )),
        tokio::spawn(pattern::run(
            bed.common.clone(),
            pattern::PatternArgs::default(),
            bed.shutdown.clone(),
        )),
    ];
    let result = ask_history(&bed, history, mneme, retrieval_args, sweep).await;
    bed.stop().await;
    for service in services {
        let _ = service.await;
    }
    result
}

async fn ask_history(
    bed: &Bed,
    history: &History,
    mneme: &Path,
    retrieval_args: &retrieval::RetrievalArgs,
    sweep: &[(&'static str, retrieval::search::Tuning)],
) -> anyhow::Result<Vec<Vec<(Vec<String>, f64)>>> {
    let started = Instant::now();
    // Where Claude Code keeps a project's sessions: the cwd with '/' as '-'.
    let dir: PathBuf = bed
        .home
        .path()
        .join("claude-projects")
        .join(history.cwd.replace('/', "-"));
    std::fs::create_dir_all(&dir)?;
    for session in &history.sessions {
        std::fs::write(
            dir.join(format!("{}.jsonl", session.id)),
            transcript(history, session),
        )?;
    }
    let summary = super::import_claude_code(mneme, &dir, bed).context("running mneme import")?;
    anyhow::ensure!(
        summary["sessions"].as_u64() == Some(history.sessions.len() as u64),
        "mneme import read {} sessions of {}",
        summary["sessions"],
        history.sessions.len()
    );
    let imported = started.elapsed().as_secs_f64();
    let store = store::Store::open(&bed.common.db_path()).await?;
    let client = async_nats::connect(&bed.common.nats_url).await?;
    wait_settled(&store, &client).await?;
    let (items,): (i64,) = sqlx::query_as("SELECT count(*) FROM memory_items")
        .fetch_one(store.pool())
        .await?;
    println!(
        "  imported in {imported:.0}s; {items} items indexed and embedded after {:.0}s",
        started.elapsed().as_secs_f64()
    );
    let (project,): (String,) =
        sqlx::query_as("SELECT project FROM observations ORDER BY id LIMIT 1")
            .fetch_one(store.pool())
            .await
            .context("nothing was stored")?;
    let mut answers = Vec::with_capacity(history.questions.len());
    for question in &history.questions {
        let mut per_mode = Vec::with_capacity(MODES.len());
        for mode in MODES {
            let (mode, group, limit) = match mode.split_once('/') {
                Some((mode, group)) => (mode, group, 10),
                None => (mode, "", 50),
            };
            let request = proto::SearchRequest {
                query: question.text.clone(),
                project: project.clone(),
                limit,
                mode: mode.to_owned(),
                group: group.to_owned(),
                as_of_ms: history.as_of_ms,
                ..Default::default()
            };
            let asked = Instant::now();
            let reply = client
                .request(
                    proto::subjects::RETRIEVAL_SEARCH,
                    request.encode_to_vec().into(),
                )
                .await?;
            let ms = asked.elapsed().as_secs_f64() * 1000.0;
            let reply = proto::SearchReply::decode(reply.payload)?;
            anyhow::ensure!(reply.error.is_empty(), "search failed: {}", reply.error);
            anyhow::ensure!(reply.mode == mode, "asked {mode}, ran {}", reply.mode);
            let sessions = reply
                .hits
                .into_iter()
                .map(|h| h.session_id)
                .filter(|s| !s.is_empty())
                .collect();
            per_mode.push((sessions, ms));
        }
        answers.push(per_mode);
    }
    if !sweep.is_empty() {
        let searchers = super::sweep_searchers(
            &bed.common,
            retrieval_args,
            &store,
            sweep.iter().map(|(_, tuning)| *tuning),
        )
        .await?;
        for (question, per_mode) in history.questions.iter().zip(&mut answers) {
            for searcher in &searchers {
                let request = proto::SearchRequest {
                    query: question.text.clone(),
                    project: project.clone(),
                    limit: 50,
                    as_of_ms: history.as_of_ms,
                    ..Default::default()
                };
                let asked = Instant::now();
                let (hits, _) = searcher.search(&request).await?;
                let ms = asked.elapsed().as_secs_f64() * 1000.0;
                let sessions = hits
                    .into_iter()
                    .map(|h| h.session_id)
                    .filter(|s| !s.is_empty())
                    .collect();
                per_mode.push((sessions, ms));
            }
        }
    }
    store.close().await;
    Ok(answers)
}

/// Wait until every event is stored, every notice is handled by every service (the compressor's
/// and the pattern service's rows indexed too), and the model has embedded every item; settled
/// means that held on three checks in a row with no new item.
async fn wait_settled(store: &store::Store, client: &async_nats::Client) -> anyhow::Result<()> {
    let js = async_nats::jetstream::new(client.clone());
    let consumers = proto::subjects::WRITE_PATH_CONSUMERS;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut settled = 0;
    let mut last_max = -1;
    loop {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(3_600),
            "the history was not indexed and embedded within an hour"
        );
        let mut pending = 0u64;
        for (stream, consumer) in consumers {
            let waiting = match js.get_stream(stream).await {
                Ok(stream) => match stream.consumer_info(consumer).await {
                    Ok(info) => info.num_pending + info.num_ack_pending as u64,
                    Err(_) => 1,
                },
                Err(_) => 1,
            };
            pending += waiting;
        }
        let (_, max, embedded) = crate::retrieval_bench::embedding_progress(store.pool()).await?;
        if pending == 0 && max > 0 && embedded >= max && max == last_max {
            settled += 1;
            if settled >= 3 {
                return Ok(());
            }
        } else {
            settled = 0;
        }
        last_max = max;
        if last_report.elapsed() > Duration::from_secs(30) {
            println!(
                "  waiting: {pending} notices pending, {embedded} of {max} items embedded, {:.0}s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histories_are_deterministic_and_shaped_as_asked() {
        let a = generate(3);
        let b = generate(3);
        assert_eq!(a.sessions.len(), b.sessions.len());
        assert_eq!(a.sessions[0].turns[1].text, b.sessions[0].turns[1].text);
        for history in [a, generate(0), generate(7)] {
            assert!((SESSIONS.0..=SESSIONS.1).contains(&history.sessions.len()));
            assert!((15..=28).contains(&history.questions.len()));
            for session in &history.sessions {
                assert!((PAIRS.0 * 2..=PAIRS.1 * 2).contains(&session.turns.len()));
                for (n, turn) in session.turns.iter().enumerate() {
                    assert_eq!(turn.user, n % 2 == 0);
                    if !turn.user {
                        // Up to 3,000 characters, with a remark or two more, or up to 9,000
                        // for an answer carrying a fact only the assistant states.
                        assert!(turn.text.len() >= 800, "short reply: {}", turn.text);
                        assert!(turn.text.len() <= 9_500, "long reply: {}", turn.text.len());
                    }
                }
            }
            for question in &history.questions {
                assert!(!question.evidence.is_empty());
                assert!(!question.text.contains('{'), "{}", question.text);
                for &o in &question.older {
                    assert!(
                        history.sessions[o].start_ms
                            < history.sessions[question.evidence[0]].start_ms
                    );
                }
            }
            let two: Vec<&Question> = history
                .questions
                .iter()
                .filter(|q| q.category == 7)
                .collect();
            assert_eq!(two.len(), 3);
            // Two events each, in two sessions unless both were planted in one.
            assert!(two.iter().all(|q| (1..=2).contains(&q.evidence.len())));
            assert!(two.iter().any(|q| q.evidence.len() == 2));
            let first = history.sessions[0].start_ms;
            let last = history.sessions[history.sessions.len() - 1].start_ms;
            assert!(last - first > 150 * DAY_MS);
        }
    }

    #[test]
    fn what_only_the_assistant_said_is_in_one_long_answer_and_nowhere_else() {
        for index in [0, 5] {
            let history = generate(index);
            let asked: Vec<&Question> = history
                .questions
                .iter()
                .filter(|q| q.category == 6)
                .collect();
            assert_eq!(asked.len(), 3);
            for question in asked {
                let session = &history.sessions[question.evidence[0]];
                // The value the question asks after, found by the kind whose question it is.
                let kind = ASSISTANT
                    .iter()
                    .find(|k| k.ask.contains(&question.text.as_str()))
                    .expect("a question of an assistant kind");
                let holding: Vec<&Turn> = history
                    .sessions
                    .iter()
                    .flat_map(|s| &s.turns)
                    .filter(|t| kind.values.iter().any(|v| t.text.contains(v)))
                    .collect();
                assert_eq!(holding.len(), 1, "{}", question.text);
                assert!(!holding[0].user);
                assert!(holding[0].text.len() >= 3_000);
                assert!(session.turns.iter().any(|t| std::ptr::eq(t, holding[0])));
            }
        }
    }

    #[test]
    fn transcripts_replay_as_prompts_and_replies() {
        let history = generate(1);
        let dir = tempfile::tempdir().unwrap();
        let session = &history.sessions[0];
        let path = dir.path().join(format!("{}.jsonl", session.id));
        std::fs::write(&path, transcript(&history, session)).unwrap();
        let replay = hosts::claude_code::transcript::claude_code_replay(&path).unwrap();
        assert_eq!(replay.session_id, session.id);
        assert_eq!(replay.expected.prompts, session.turns.len() / 2);
        let stops = replay
            .payloads
            .iter()
            .filter(|p| p["hook_event_name"] == "Stop")
            .count();
        assert_eq!(stops, session.turns.len() / 2);
    }
}

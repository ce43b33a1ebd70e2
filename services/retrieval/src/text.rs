//! Small text helpers shared by search and context: query terms, snippets, dates.

/// English words too common to say what a query is about (contractions included), and a few
/// words prompts are padded with.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "can't",
    "cannot",
    "could",
    "couldn't",
    "d",
    "did",
    "didn't",
    "do",
    "does",
    "doesn't",
    "doing",
    "don't",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn't",
    "has",
    "hasn't",
    "have",
    "haven't",
    "having",
    "he",
    "he'd",
    "he'll",
    "he's",
    "her",
    "here",
    "here's",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "how's",
    "i",
    "i'd",
    "i'll",
    "i'm",
    "i've",
    "if",
    "in",
    "into",
    "is",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "let's",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "mustn't",
    "my",
    "myself",
    "need",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "re",
    "s",
    "same",
    "shan't",
    "she",
    "she'd",
    "she'll",
    "she's",
    "should",
    "shouldn't",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "that's",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "there's",
    "these",
    "they",
    "they'd",
    "they'll",
    "they're",
    "they've",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "want",
    "was",
    "wasn't",
    "we",
    "we'd",
    "we'll",
    "we're",
    "we've",
    "were",
    "weren't",
    "what",
    "what's",
    "when",
    "when's",
    "where",
    "where's",
    "which",
    "while",
    "who",
    "who's",
    "whom",
    "why",
    "why's",
    "with",
    "won't",
    "would",
    "wouldn't",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` (lowercase) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// The lowercased words of `text` that carry meaning, in order, without repeats: words that
/// are not stopwords (a possessive `'s` dropped), and CJK runs. When every word is a stopword,
/// all words are kept, so a query is never emptied by filtering.
pub fn query_terms(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    // Words keep an inner apostrophe ("don't", "caroline's") so contractions can be recognised.
    let mut words: Vec<&str> = Vec::new();
    let mut start = None;
    let chars: Vec<(usize, char)> = lower.char_indices().collect();
    for (n, &(at, c)) in chars.iter().enumerate() {
        let inner_apostrophe = (c == '\'' || c == '’')
            && n > 0
            && chars[n - 1].1.is_alphanumeric()
            && chars.get(n + 1).is_some_and(|(_, d)| d.is_alphabetic());
        if c.is_alphanumeric() || c == '_' || inner_apostrophe {
            start.get_or_insert(at);
        } else if let Some(s) = start.take() {
            words.push(&lower[s..at]);
        }
    }
    if let Some(s) = start {
        words.push(&lower[s..]);
    }
    let mut kept = Vec::new();
    let mut all = Vec::new();
    for word in words {
        let word = word.replace('’', "'");
        let base = word
            .strip_suffix("'s")
            .map(str::to_owned)
            .unwrap_or_else(|| word.clone());
        let parts: Vec<String> = base
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        all.extend(parts.iter().cloned());
        if is_stopword(&word) || is_stopword(&base) {
            continue;
        }
        kept.extend(
            parts
                .into_iter()
                .filter(|p| p.chars().any(store::fts::is_cjk) || !is_stopword(p)),
        );
    }
    if kept.is_empty() {
        kept = all;
    }
    let mut seen = std::collections::HashSet::new();
    kept.retain(|w| seen.insert(w.clone()));
    kept
}

/// Short forms developers write for longer names, with the longer name's words: a question
/// says "pull requests" or "continuous integration" where a note says "PRs" or "CI", and full
/// text matches neither to the other. Only forms whose meaning in a developer's notes is
/// nearly always this one are listed: "cd", a shell command as often as continuous delivery,
/// is not.
const SHORT_FORMS: &[(&str, &[&str])] = &[
    ("a11y", &["accessibility"]),
    ("auth", &["authentication"]),
    ("ci", &["continuous", "integration"]),
    ("config", &["configuration"]),
    ("db", &["database"]),
    ("deps", &["dependencies"]),
    ("env", &["environment"]),
    ("gc", &["garbage", "collection"]),
    ("i18n", &["internationalization"]),
    ("infra", &["infrastructure"]),
    ("k8s", &["kubernetes"]),
    ("l10n", &["localization"]),
    ("lb", &["load", "balancer"]),
    ("mr", &["merge", "request"]),
    ("o11y", &["observability"]),
    ("perf", &["performance"]),
    ("pr", &["pull", "request"]),
    ("prod", &["production"]),
    ("repo", &["repository"]),
    ("vm", &["virtual", "machine"]),
];

/// The other form of each short form or long name among a query's `terms`
/// ([`query_terms`]), to be searched beside them: "pull requests" adds "pr", "PRs" adds
/// "pull" and "request". Plurals count ("prs", "dbs", "repositories"), and a term already in
/// the query is not added again.
pub fn other_forms(terms: &[String]) -> Vec<String> {
    // Plurals and the index's own stemming agree on these: "requests" is "request".
    let singular = |word: &str| -> String {
        if let Some(stem) = word.strip_suffix("ies") {
            format!("{stem}y")
        } else if is_plural(word) {
            word[..word.len() - 1].to_owned()
        } else {
            word.to_owned()
        }
    };
    let words: Vec<String> = terms.iter().map(|t| singular(t)).collect();
    let mut added: Vec<String> = Vec::new();
    let add = |word: &str, added: &mut Vec<String>| {
        if !terms.iter().any(|t| t == word) && !added.iter().any(|a| a == word) {
            added.push(word.to_owned());
        }
    };
    for (short, long) in SHORT_FORMS {
        let short_found = terms
            .iter()
            .any(|t| t == short || t.strip_suffix('s') == Some(short));
        if short_found {
            for word in long.iter() {
                add(word, &mut added);
            }
        }
        let long: Vec<String> = long.iter().map(|w| singular(w)).collect();
        if words.windows(long.len()).any(|w| w == long.as_slice()) {
            add(short, &mut added);
        }
    }
    added
}

/// The words of a lowercased question as the question readers below take them: runs of
/// letters and digits, an apostrophe kept inside ("don't", "i've").
fn words_of(lower: &str) -> Vec<&str> {
    lower
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether a question asks for several answers spread over the memory ("how many", "in
/// total", "list …", or "which"/"what" with a plural noun before its verb: "which databases
/// have I tried"), rather than for one fact. Such questions are answered by items that each
/// hold one of the answers, often in words of their own, so search looks for more of them.
pub fn asks_for_several(question: &str) -> bool {
    let lower = question.to_lowercase();
    let words = words_of(&lower);
    let has = |phrase: &[&str]| words.windows(phrase.len()).any(|w| w == phrase);
    if has(&["how", "many"]) || has(&["in", "total"]) || has(&["all", "the"]) {
        return true;
    }
    if matches!(words.first(), Some(&("list" | "name" | "enumerate"))) {
        return true;
    }
    // "which" or "what", up to three words, then a verb that asks about them: the last of those
    // words names what is asked for, and in the plural it asks for several.
    const AUXILIARIES: &[&str] = &[
        "are", "were", "have", "has", "had", "did", "do", "does", "can", "could", "should", "will",
        "would",
    ];
    let Some(start) = words.iter().position(|w| matches!(*w, "which" | "what")) else {
        return false;
    };
    let rest = &words[start + 1..];
    let Some(verb) = rest.iter().take(4).position(|w| AUXILIARIES.contains(w)) else {
        return false;
    };
    verb > 0 && is_plural(rest[verb - 1])
}

/// The two events a question sets against each other, when it asks for their order or the time
/// between them: "which did I ship first, the SAML login or the CSV export?", "how long was it
/// between the broken index and the locked table?", "did the release come before or after the
/// conference?", "did the outage happen before the migration?", "how many weeks before the
/// move did I ship it?". Each event has a session of its own, and the question as a whole is
/// often worded more like one than the other, whose session then ranks out of sight. The
/// events come back lowercased, without the auxiliary a yes-or-no question starts with.
pub fn two_events(question: &str) -> Option<(String, String)> {
    let lower = question
        .trim()
        .trim_end_matches(['?', '.', '!'])
        .to_lowercase();
    let lower = lower.trim();
    // Parts of a dozen words or more are clauses, not names of events.
    let part = |text: &str| {
        let text = text.trim().trim_matches([',', ':', ';', '-']).trim();
        let mut words: Vec<&str> = text.split_whitespace().collect();
        if words.first().is_some_and(|w| YES_OR_NO.contains(w)) {
            words.remove(0);
        }
        let named = words.iter().any(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            !w.is_empty() && !is_stopword(w)
        });
        (named && words.len() < 12).then(|| words.join(" "))
    };
    let pair = |a: &str, b: &str| Some((part(a)?, part(b)?));
    let words: Vec<&str> = lower.split_whitespace().collect();
    let asks_how_long = matches!(words.as_slice(), ["how", "long" | "many" | "much", ..]);
    // "how long was it between A and B": not "the difference between A and B", nor "where was
    // I between May and June".
    if asks_how_long
        && let Some(at) = lower.rfind(" between ")
        && let Some((a, b)) = lower[at + " between ".len()..].split_once(" and ")
    {
        return pair(a, b);
    }
    // "which came first, A or B": a question of which, with a word of order, before a comma or
    // colon, the events after it; not "after the first run, did it stop or go on?".
    if let Some(at) = lower.find([',', ':']) {
        let (head, tail) = lower.split_at(at);
        let mut head = head.split_whitespace();
        if head
            .next()
            .is_some_and(|w| matches!(w, "which" | "what" | "who"))
            && head.any(|w| ORDER_WORDS.contains(&w.trim_matches(|c: char| !c.is_alphanumeric())))
            && let Some((a, b)) = tail[1..].split_once(" or ")
        {
            return pair(a, b);
        }
    }
    for joint in [" before or after ", " before ", " after "] {
        let Some((head, tail)) = lower.split_once(joint) else {
            continue;
        };
        // "how many weeks before the move did I ship it": the first event runs to the
        // question's auxiliary, the other follows it.
        if asks_how_long {
            let Some((a, b)) = YES_OR_NO
                .iter()
                .find_map(|aux| tail.split_once(&format!(" {aux} ")))
            else {
                continue;
            };
            return pair(a, b);
        }
        // "did A come before or after B", "was A before B"
        if words.first().is_some_and(|w| YES_OR_NO.contains(w)) {
            return pair(head, tail);
        }
    }
    None
}

/// What a yes-or-no question about the past starts with, and what follows the event a "how
/// long before" question counts from ("how many weeks before the move did I ship it"). In the
/// present tense ("is the cache before or after the load balancer?") such a question is as
/// often about places as about times.
const YES_OR_NO: &[&str] = &["did", "was", "were", "had"];

/// Words asking which of two things came first or last.
const ORDER_WORDS: &[&str] = &[
    "first", "earlier", "earliest", "sooner", "later", "latest", "last", "recently", "before",
    "after", "older", "newer",
];

/// What "you" did in an answer, in the past tense (sorted for binary search).
const SAID_DONE: &[&str] = &[
    "advised",
    "chose",
    "described",
    "explained",
    "gave",
    "had",
    "listed",
    "mentioned",
    "named",
    "noted",
    "offered",
    "picked",
    "pointed",
    "proposed",
    "provided",
    "recommended",
    "said",
    "shared",
    "showed",
    "suggested",
    "told",
    "wrote",
];
/// The base form of [`SAID_DONE`] that follows "did you" / "have you" (sorted).
const SAID_DO: &[&str] = &[
    "advise",
    "choose",
    "describe",
    "explain",
    "give",
    "list",
    "mention",
    "name",
    "note",
    "offer",
    "pick",
    "point",
    "propose",
    "provide",
    "recommend",
    "say",
    "share",
    "show",
    "suggest",
    "tell",
    "write",
];

/// The words of a question that frame it rather than name what it asks after: in a question
/// after what the assistant said, the verbs of what it did in its answers ("which profiler did
/// you *recommend*?", "you *pointed* me at a package"), and anywhere a request to remember
/// ("can you *remind* me", "do you *remember*", "I *recall* you said"). Full text matching such
/// a word finds every answer that recommends or points at anything. A verb of remembering that
/// is what the question asks about ("what does she do to remember her dog?") is kept.
pub fn framing_words(question: &str) -> Vec<String> {
    let lower = question.to_lowercase();
    let words = words_of(&lower);
    let said = asks_what_the_assistant_said(question);
    let mut framing: Vec<String> = words
        .iter()
        .enumerate()
        .filter(|&(at, word)| {
            let before = at.checked_sub(1).map(|b| words[b]);
            let after = words.get(at + 1).copied();
            match *word {
                "remind" => matches!(after, Some("me" | "us")),
                "remember" | "recall" => matches!(before, Some("you" | "i" | "we")),
                _ => {
                    said && (SAID_DONE.binary_search(word).is_ok()
                        || SAID_DO.binary_search(word).is_ok())
                }
            }
        })
        .map(|(_, word)| (*word).to_owned())
        .collect();
    framing.sort_unstable();
    framing.dedup();
    framing
}

/// Whether a question asks after what the assistant said ("which lint did you suggest?", "you
/// recommended a profiler, which one?", "what was your theory?"): "you" doing something the
/// assistant does in its answers (suggest, explain, recommend, point at), in the past, or
/// "your" before what an answer holds. A request addressed to it ("can you remind me where I
/// put the keys?") is not one: its answer is in what the person said.
pub fn asks_what_the_assistant_said(question: &str) -> bool {
    const ANSWERS: &[&str] = &[
        "advice",
        "answer",
        "explanation",
        "idea",
        "proposal",
        "recommendation",
        "suggestion",
        "theory",
    ];
    // Words that may stand between "you" and its verb ("you once suggested").
    const BETWEEN: &[&str] = &["also", "earlier", "ever", "just", "once", "previously"];
    let lower = question.to_lowercase();
    let words = words_of(&lower);
    words.iter().enumerate().any(|(at, word)| match *word {
        "you" => {
            let verb = words[at + 1..]
                .iter()
                .find(|w| BETWEEN.binary_search(w).is_err());
            let asked = at > 0 && matches!(words[at - 1], "did" | "have" | "had");
            verb.is_some_and(|verb| {
                SAID_DONE.binary_search(verb).is_ok()
                    || (asked && SAID_DO.binary_search(verb).is_ok())
            })
        }
        "your" => words.get(at + 1).is_some_and(|w| {
            let one = w.strip_suffix('s').unwrap_or(w);
            ANSWERS.binary_search(&one).is_ok()
        }),
        _ => false,
    })
}

/// Words that ask what went on without saying about what ("what was I working on", "what did I
/// get up to", "roughly"), beside the stopwords. Sorted for binary search.
const ACTIVITY: &[&str] = &[
    "anything",
    "approximately",
    "around",
    "busy",
    "exactly",
    "focus",
    "focused",
    "focusing",
    "get",
    "going",
    "got",
    "happen",
    "happened",
    "happening",
    "mostly",
    "roughly",
    "something",
    "spend",
    "spending",
    "spent",
    "stuff",
    "time",
    "work",
    "worked",
    "working",
];

/// Whether what is left of a question once its time words are taken out ([`crate::when`])
/// names no subject: "what was I working on", "what did I do", or nothing at all. Such a
/// question asks what happened at the time it names, and whatever was recorded then answers
/// it, while its few words match items of any time.
pub fn asks_only_when(rest: &str) -> bool {
    rest.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .map(|w| w.trim_matches(|c| c == '\'' || c == '’').replace('’', "'"))
        .filter(|w| !w.is_empty())
        .all(|w| is_stopword(&w) || ACTIVITY.binary_search(&w.as_str()).is_ok())
}

/// Whether an English noun looks plural: it ends in one "s" that is not part of "-ss", "-us"
/// or "-is" ("databases", "libraries", but not "process", "status", "analysis").
fn is_plural(word: &str) -> bool {
    word.len() > 3
        && word.ends_with('s')
        && !["ss", "us", "is"].iter().any(|end| word.ends_with(end))
}

/// A crude stem for matching a query term against text without the index: the first six
/// characters, enough to match "reconnecting" with "reconnect".
pub fn stem(word: &str) -> String {
    word.chars().take(6).collect()
}

/// Query terms as they are looked for in a text without the index: by [`stem`], in the text
/// lowercased. Made once for a query, so that each candidate's text is lowercased once, however
/// many things are asked of it.
pub struct Terms {
    stems: Vec<String>,
}

impl Terms {
    pub fn new(terms: &[String]) -> Terms {
        Terms {
            stems: terms.iter().map(|t| stem(t)).collect(),
        }
    }

    /// Which of the terms `text` holds, one bit for each of the first 64 (two texts holding
    /// the same query words are, as far as the query can tell, about one subject), and the
    /// share of all of them it holds (0..1).
    pub fn find(&self, text: &str) -> (u64, f64) {
        if self.stems.is_empty() {
            return (0, 0.0);
        }
        let lower = text.to_lowercase();
        let (mut bits, mut found) = (0u64, 0usize);
        for (n, stem) in self.stems.iter().enumerate() {
            if lower.contains(stem.as_str()) {
                found += 1;
                if n < 64 {
                    bits |= 1 << n;
                }
            }
        }
        (bits, found as f64 / self.stems.len() as f64)
    }
}

/// About 200 characters of `body` around the first of `terms` found in it.
pub fn snippet(body: &str, terms: &[String]) -> String {
    const BEFORE: usize = 60;
    const LENGTH: usize = 200;
    let lower = body.to_lowercase();
    // Lowercasing can change byte lengths; only trust the position when it did not.
    let at = if lower.len() == body.len() {
        terms
            .iter()
            .filter_map(|t| lower.find(stem(t).as_str()))
            .min()
            .unwrap_or(0)
    } else {
        0
    };
    let chars_before = body[..at].chars().count();
    let start = chars_before.saturating_sub(BEFORE);
    let text: String = body.chars().skip(start).take(LENGTH).collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let prefix = if start > 0 { "…" } else { "" };
    let suffix = if body.chars().count() > start + LENGTH {
        "…"
    } else {
        ""
    };
    format!("{prefix}{text}{suffix}")
}

/// A Unix-millisecond time in words, as people write it in a conversation: `1:56 pm on 8 May,
/// 2023` (UTC). Indexed with every item, so a question that names a month or a year can match.
pub fn date_words(ms: i64) -> String {
    let (year, month, date) = common::time::civil_from_days(ms.div_euclid(common::time::DAY_MS));
    let minutes = ms.rem_euclid(common::time::DAY_MS) / 60_000;
    let (hour, minute) = (minutes / 60, minutes % 60);
    let (h12, half) = match hour {
        0 => (12, "am"),
        1..=11 => (hour, "am"),
        12 => (12, "pm"),
        _ => (hour - 12, "pm"),
    };
    format!(
        "{h12}:{minute:02} {half} on {date} {}, {year}",
        common::time::MONTH_NAMES[(month - 1) as usize]
    )
}

/// An estimate of the tokens `text` costs a model: about four characters each.
pub fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_events_are_read_from_a_question_of_order_or_interval() {
        let cases = [
            (
                "Which did I ship first, single sign-on with SAML or the dashboard's dark theme?",
                ("single sign-on with saml", "the dashboard's dark theme"),
            ),
            (
                "Which came first: the move to Berlin or the Postgres upgrade?",
                ("the move to berlin", "the postgres upgrade"),
            ),
            (
                "How long was it between the broken search index and the locked orders table?",
                ("the broken search index", "the locked orders table"),
            ),
            (
                "How many days passed between my trip to Lisbon and the release of v2?",
                ("my trip to lisbon", "the release of v2"),
            ),
            (
                "Did the release with billing by usage come before or after the Lisbon conference?",
                (
                    "the release with billing by usage come",
                    "the lisbon conference",
                ),
            ),
            (
                "Did the cache outage happen before the schema migration?",
                ("the cache outage happen", "the schema migration"),
            ),
            (
                "How many weeks before or after the conference did CSV export ship?",
                ("the conference", "csv export ship"),
            ),
        ];
        for (question, (a, b)) in cases {
            assert_eq!(
                super::two_events(question),
                Some((a.to_owned(), b.to_owned())),
                "{question}"
            );
        }
        for one in [
            "What did I work on two weeks before I moved to Berlin?",
            "Which editor do I use, Vim or Emacs?",
            "What did I ship in May?",
            "Which databases have I tried for the cache?",
            "What was the first thing I fixed after the outage?",
            "Should I use Redis or Memcached for sessions?",
            "How long does the test suite take?",
            "Is the cache before or after the load balancer?",
            "What's the difference between trace_id and hex_trace_id?",
            "Where was John between August 11 and August 15 2023?",
            "How did we settle the fight between credo and the compiler?",
            "After the first sync task, did the user want us to stop or keep going?",
        ] {
            assert_eq!(super::two_events(one), None, "{one}");
        }
    }

    #[test]
    fn a_question_after_what_the_assistant_said_is_told_from_a_request() {
        for asked in [
            "Which lint did you suggest enabling so the bug doesn't come back?",
            "You recommended something to profile the memory growth. What was it?",
            "You pointed me at a package for retrying failed calls. Which one was it?",
            "How did you tell me to find out which query is holding a lock?",
            "You once suggested an index for the slow report, which one?",
            "What was your theory about the intermittent failures?",
            "Remind me of your suggestions for the load test",
            "what have you said about the retry budget",
        ] {
            assert!(super::asks_what_the_assistant_said(asked), "{asked}");
        }
        for not in [
            "Can you remind me which editor I use?",
            "Could you tell me what port staging listens on?",
            "What indentation style do I want in code you write?",
            "Which databases have I tried for the cache?",
            "what did I suggest to the team about retries",
            "you know the flaky test, when did I quarantine it?",
        ] {
            assert!(!super::asks_what_the_assistant_said(not), "{not}");
        }
    }

    #[test]
    fn the_words_that_frame_a_question_are_told_from_what_it_asks_after() {
        let framing = |q: &str| super::framing_words(q);
        assert_eq!(
            framing("You pointed me at a package for retrying failed calls. Which one was it?"),
            ["pointed"]
        );
        assert_eq!(
            framing("Which memory profiler did you recommend?"),
            ["recommend"]
        );
        assert_eq!(
            framing("Can you remind me what you suggested for the retry budget?"),
            ["remind", "suggested"]
        );
        assert_eq!(
            framing("Do you remember which port staging uses?"),
            ["remember"]
        );
        // A request to the assistant is not a question after what it said: its verbs stay.
        assert!(framing("Could you tell me what port staging listens on?").is_empty());
        assert!(framing("what did I suggest to the team about retries").is_empty());
        // Remembering as what the question asks about (LoCoMo's wording) stays.
        for asked in [
            "What did Maria make for her home to remind her of a trip to England?",
            "What does Joanna do to remember happy memories?",
            "What does the photo on Joanna's cork board remind her of?",
        ] {
            assert!(framing(asked).is_empty(), "{asked}");
        }
    }

    use super::*;

    #[test]
    fn a_short_form_and_its_long_name_find_each_other() {
        let forms = |q: &str| other_forms(&query_terms(q));
        assert_eq!(forms("Which branch do pull requests target?"), ["pr"]);
        assert_eq!(forms("where do PRs go now"), ["pull", "request"]);
        assert_eq!(forms("What runs our continuous integration?"), ["ci"]);
        assert_eq!(forms("is CI green"), ["continuous", "integration"]);
        assert_eq!(forms("which repositories use k8s"), ["kubernetes", "repo"]);
        assert_eq!(forms("the prod DB is slow"), ["database", "production"]);
        // Words that merely contain a short form, or a long name's words apart, add nothing.
        assert!(forms("the price of the dbt model").is_empty());
        assert!(forms("pull the latest request logs").is_empty());
        assert!(forms("continuous deployment of the integration branch").is_empty());
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn questions_asking_for_several_answers_are_told_from_questions_asking_for_one() {
        for several in [
            "How many times did the deploy fail?",
            "Which databases have I tried for the cache?",
            "What chart libraries did I prototype the dashboard with?",
            "List the stores I evaluated for caching.",
            "what activities does Melanie do?",
            "How much did I spend in total on hosting?",
        ] {
            assert!(asks_for_several(several), "{several}");
        }
        for one in [
            "Which version of pydantic do we use now?",
            "Which editor do I use?",
            "What did I ship in May?",
            "What status was the migration in?",
            "Which process has the lock?",
            "Where does the config live?",
            "What were the results of the load test?",
            "Which tests flake",
        ] {
            assert!(!asks_for_several(one), "{one}");
        }
    }

    #[test]
    fn activity_words_are_sorted_for_binary_search() {
        assert!(ACTIVITY.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn questions_naming_only_a_time_are_told_from_questions_about_a_subject() {
        // What is left once `when` has taken the time words out.
        for open in [
            "What was I working on about?",
            "What did I work on?",
            ", what was I doing?",
            "what did I get up to",
            "What happened?",
            "",
        ] {
            assert!(asks_only_when(open), "{open:?}");
        }
        for subject in [
            "What did I ship?",
            "what did I do on the invoice exporter?",
            "Which release went out, and what was in it?",
            "What broke?",
            "What was I working on in the billing service?",
        ] {
            assert!(!asks_only_when(subject), "{subject:?}");
        }
    }

    #[test]
    fn query_terms_drop_stopwords_unless_nothing_is_left() {
        assert_eq!(
            query_terms("Why is the websocket reconnect flaky again?"),
            ["websocket", "reconnect", "flaky"]
        );
        assert_eq!(query_terms("修复 it"), ["修复"]);
        assert_eq!(query_terms("what is it"), ["what", "is", "it"]);
        assert_eq!(
            query_terms("What was Caroline's dog's name? Don't guess"),
            ["caroline", "dog", "name", "guess"]
        );
    }

    #[test]
    fn snippets_centre_on_the_match() {
        let body = format!(
            "{} the nats consumer failed {}",
            "a ".repeat(200),
            "b ".repeat(200)
        );
        let s = snippet(&body, &["consumer".to_owned()]);
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert!(s.contains("nats consumer failed"));
        assert_eq!(snippet("short", &[]), "short");
    }

    #[test]
    fn found_terms_name_each_word_found() {
        let terms = Terms::new(&query_terms("database version postgres"));
        assert_eq!(terms.find("We run Postgres 14"), (0b100, 1.0 / 3.0));
        assert_eq!(
            terms.find("the database: Postgres, version 16"),
            (0b111, 1.0)
        );
        assert_eq!(terms.find("nothing here"), (0, 0.0));
        assert_eq!(Terms::new(&[]).find("anything"), (0, 0.0));
    }

    #[test]
    fn coverage_counts_stems() {
        let terms = Terms::new(&query_terms("reconnecting websocket timeout"));
        assert!((terms.find("the websocket reconnects").1 - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn dates_in_words() {
        assert_eq!(date_words(1_683_554_160_000), "1:56 pm on 8 May, 2023");
        assert_eq!(date_words(0), "12:00 am on 1 January, 1970");
    }
}

//! Time in questions: the relative and absolute time expressions of an English query ("yesterday",
//! "two weeks ago", "in May 2025", "on 2026-02-12", "the first time"), resolved against the
//! time the question is asked. A span placed against an event rather than a date ("two weeks
//! before the Lisbon conference") is resolved by search, which finds when the event happened.
//!
//! Search uses what this finds to rank by the items' own times, never to filter: a misread
//! expression may move an answer down, but cannot hide it. The expressions are taken out of the
//! text that is matched, because "last week" says when, not what, and its words would otherwise
//! match every item that happens to contain them.

use common::time::{DAY_MS, civil_from_days, days_from_civil, midnight_ms};

/// Which end of time a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// "the first time", "originally": the earliest of the matching items.
    Earliest,
    /// "most recently", "the last time", "now": the latest of the matching items.
    Latest,
}

/// What a query says about time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct When {
    /// The query with its time expressions taken out (the query itself when none were found, or
    /// when nothing but time and stopwords would be left).
    pub text: String,
    /// The query with its time expressions taken out, even when nothing but stopwords is left
    /// ("what did I do"): whether the question names anything besides a time.
    pub rest: String,
    /// The span the question points at, `[from, until)` in Unix milliseconds.
    pub window: Option<(i64, i64)>,
    pub order: Option<Order>,
    /// A span placed against an event the query names instead of a date, when no window was
    /// named: search finds the event's time and takes [`Anchor::window`] of it.
    pub anchor: Option<Anchor>,
}

/// "Two weeks before the Lisbon conference", "the week after I moved": a span whose day is that
/// of an event the query names, which only the memory can date.
#[derive(Debug, Clone, PartialEq)]
pub struct Anchor {
    /// The words naming the event, lowercase: what search looks for to date it.
    pub event: String,
    span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Span {
    /// `n` units before the event (negative: after), as wide as the unit is uncertain.
    Around(i64, Unit),
    /// The whole unit right before the event (`true`) or right after it.
    Next(Unit, bool),
}

impl Anchor {
    /// The window, `[from, until)` in Unix milliseconds, once the event is dated at `at_ms`.
    pub fn window(&self, at_ms: i64) -> (i64, i64) {
        let day = day_of(at_ms);
        match self.span {
            Span::Around(n, unit) => around(day, n, unit),
            Span::Next(unit, before) => next_to(day, unit, before),
        }
    }
}

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Words that introduce a time expression; taken out with it.
const LEADING: &[&str] = &[
    "in", "on", "during", "since", "from", "around", "about", "at", "of",
];

/// One word of the query, lowercase, with its byte span in the original text.
#[derive(Debug)]
struct Word {
    text: String,
    start: usize,
    end: usize,
    /// Punctuation that ends a clause (`,` `.` `;` `:` `?` `!`) follows the word.
    ends_clause: bool,
}

fn words(query: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    for (at, c) in query.char_indices().chain([(query.len(), ' ')]) {
        // A hyphen between digits belongs to the word, so `2026-02-12` stays whole.
        let hyphen = c == '-'
            && start.is_some()
            && query[..at].ends_with(|d: char| d.is_ascii_digit())
            && query[at + 1..].starts_with(|d: char| d.is_ascii_digit());
        if c.is_alphanumeric() || hyphen {
            start.get_or_insert(at);
        } else if let Some(s) = start.take() {
            out.push(Word {
                text: query[s..at].to_lowercase(),
                start: s,
                end: at,
                ends_clause: false,
            });
        }
    }
    let ends = |between: &str| between.contains([',', '.', ';', ':', '?', '!']);
    for k in 0..out.len() {
        let until = out.get(k + 1).map_or(query.len(), |next| next.start);
        out[k].ends_clause = ends(&query[out[k].end..until]);
    }
    out
}

fn month(word: &str) -> Option<i64> {
    // Full names only: abbreviations such as "mar", "jan" or "dec" are words and names too.
    let word = if word == "sept" { "september" } else { word };
    common::time::MONTH_NAMES
        .iter()
        .position(|m| m.eq_ignore_ascii_case(word))
        .map(|n| n as i64 + 1)
}

fn weekday(word: &str) -> Option<i64> {
    let word = word.strip_suffix('s').unwrap_or(word);
    WEEKDAYS.iter().position(|d| *d == word).map(|n| n as i64)
}

/// A day of the month: `3`, `23rd`, `1st`.
fn day_number(word: &str) -> Option<i64> {
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| word.strip_suffix(s))
        .unwrap_or(word);
    let n: i64 = digits.parse().ok()?;
    (digits.len() <= 2 && (1..=31).contains(&n)).then_some(n)
}

fn year_number(word: &str) -> Option<i64> {
    let n: i64 = word.parse().ok()?;
    (word.len() == 4 && (1970..=2200).contains(&n)).then_some(n)
}

/// A count: digits, or a number word up to twelve.
fn count(word: &str) -> Option<i64> {
    const WORDS: [&str; 13] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    match word {
        "a" | "an" => Some(1),
        "few" | "several" => Some(3),
        _ => WORDS
            .iter()
            .position(|w| *w == word)
            .map(|n| n as i64)
            .or_else(|| word.parse().ok().filter(|n| (1..=1000).contains(n))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Day,
    Week,
    Month,
    Year,
}

fn unit(word: &str) -> Option<Unit> {
    match word.strip_suffix('s').unwrap_or(word) {
        "day" => Some(Unit::Day),
        "week" => Some(Unit::Week),
        "month" => Some(Unit::Month),
        "year" => Some(Unit::Year),
        _ => None,
    }
}

/// The day (days since the epoch) of a time.
fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

fn day_window(day: i64) -> (i64, i64) {
    (day * DAY_MS, (day + 1) * DAY_MS)
}

fn month_window(year: i64, month: i64) -> (i64, i64) {
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    (
        midnight_ms(year, month, 1),
        midnight_ms(next_year, next_month, 1),
    )
}

fn year_window(year: i64) -> (i64, i64) {
    (midnight_ms(year, 1, 1), midnight_ms(year + 1, 1, 1))
}

/// The Monday starting the week of a day (1970-01-01 was a Thursday).
fn week_start(day: i64) -> i64 {
    day - (day + 3).rem_euclid(7)
}

/// A month counted back from another: `(year, month)` minus `n` months.
fn months_back(year: i64, month: i64, n: i64) -> (i64, i64) {
    let index = year * 12 + (month - 1) - n;
    (index.div_euclid(12), index.rem_euclid(12) + 1)
}

/// The length of one unit in days, roughly, for spans around a point.
fn unit_days(unit: Unit) -> i64 {
    match unit {
        Unit::Day => 1,
        Unit::Week => 7,
        Unit::Month => 30,
        Unit::Year => 365,
    }
}

/// A span `n` units before (negative `n`: after) a day, as wide as the uncertainty of the unit:
/// "two weeks ago" is about a week either side of fourteen days back rather than one day.
fn around(day: i64, n: i64, unit: Unit) -> (i64, i64) {
    let centre = day - n * unit_days(unit);
    let half = match unit {
        Unit::Day => 0,
        Unit::Week => 3,
        Unit::Month => 15,
        Unit::Year => 182,
    };
    ((centre - half) * DAY_MS, (centre + half + 1) * DAY_MS)
}

/// A calendar date named in the words at `i`, with how many words it took: `2026-02-12`,
/// `May 23, 2023`, `23 May 2023`, `May 23` and `23 May` (the latest such day not after `today`).
fn date_at(w: &[Word], i: usize, today: i64) -> Option<(i64, usize)> {
    let text = |k: usize| w.get(i + k).map(|w| w.text.as_str()).unwrap_or("");
    let iso = text(0);
    if iso.len() == 10 && iso.as_bytes()[4] == b'-' && iso.as_bytes()[7] == b'-' {
        let (y, m, d) = (
            iso[..4].parse::<i64>().ok()?,
            iso[5..7].parse::<i64>().ok()?,
            iso[8..].parse::<i64>().ok()?,
        );
        return ((1..=12).contains(&m) && (1..=31).contains(&d))
            .then(|| (days_from_civil(y, m, d), 1));
    }
    let (m, d) = if let (Some(m), Some(d)) = (month(text(0)), day_number(text(1))) {
        (m, d)
    } else if let (Some(d), Some(m)) = (day_number(text(0)), month(text(1))) {
        (m, d)
    } else if let (Some(d), "of", Some(m)) = (day_number(text(0)), text(1), month(text(2))) {
        // "the 3rd of May": the same as "3 May" with one word more.
        return with_year(w, i + 3, today, m, d).map(|(day, n)| (day, n + 3));
    } else {
        return None;
    };
    with_year(w, i + 2, today, m, d).map(|(day, n)| (day, n + 2))
}

/// A month and day with the year that follows at `i` (taking one word), or else the latest
/// such day not after `today` (taking none).
fn with_year(w: &[Word], i: usize, today: i64, m: i64, d: i64) -> Option<(i64, usize)> {
    if let Some(y) = w.get(i).and_then(|w| year_number(&w.text)) {
        return Some((days_from_civil(y, m, d), 1));
    }
    let (year, _, _) = civil_from_days(today);
    let day = days_from_civil(year, m, d);
    Some((
        if day > today {
            days_from_civil(year - 1, m, d)
        } else {
            day
        },
        0,
    ))
}

/// The whole unit right before `day` (`before`), or right after it: "the week before" a day.
fn next_to(day: i64, unit: Unit, before: bool) -> (i64, i64) {
    let span = unit_days(unit);
    if before {
        ((day - span) * DAY_MS, day * DAY_MS)
    } else {
        ((day + 1) * DAY_MS, (day + 1 + span) * DAY_MS)
    }
}

/// Most words an event's name is taken to have: a longer clause is more likely to go on with
/// what the question asks than to be naming the event.
const EVENT_WORDS: usize = 6;

/// The event named at `i`, when "before" or "after" is followed by words rather than a date:
/// the words up to the end of the clause (at most [`EVENT_WORDS`]), with how many they are.
/// Nothing when they are all stopwords ("a week before it"): there is nothing to date.
fn event_at(w: &[Word], i: usize) -> Option<(String, usize)> {
    let mut len = 0;
    while i + len < w.len() && len < EVENT_WORDS {
        len += 1;
        if w[i + len - 1].ends_clause {
            break;
        }
    }
    let words: Vec<&str> = w[i..i + len].iter().map(|w| w.text.as_str()).collect();
    let event = words.join(" ");
    says_something(&event).then_some((event, len))
}

/// Whether `text` holds a word to match that is not a stopword.
fn says_something(text: &str) -> bool {
    crate::text::query_terms(text)
        .iter()
        .any(|t| !crate::text::is_stopword(t))
}

/// One expression found: the words it spans and what it means.
struct Found {
    from: usize,
    to: usize,
    window: Option<(i64, i64)>,
    order: Option<Order>,
    anchor: Option<Anchor>,
}

/// The expression starting at word `i`, if any, with `as_of` the time the question is asked.
fn expression_at(w: &[Word], i: usize, as_of: i64) -> Option<Found> {
    let today = day_of(as_of);
    let (this_year, this_month, _) = civil_from_days(today);
    let text = |k: usize| w.get(i + k).map(|w| w.text.as_str()).unwrap_or("");
    let previous = i.checked_sub(1).map(|p| w[p].text.as_str()).unwrap_or("");
    let anchored = |len: usize, event: String, span: Span| {
        Some(Found {
            from: i,
            to: i + len,
            window: None,
            order: None,
            anchor: Some(Anchor { event, span }),
        })
    };
    let found = |len: usize, window: (i64, i64)| {
        Some(Found {
            from: i,
            to: i + len,
            window: Some(window),
            order: None,
            anchor: None,
        })
    };
    let ordered = |len: usize, order: Order| {
        Some(Found {
            from: i,
            to: i + len,
            window: None,
            order: Some(order),
            anchor: None,
        })
    };

    // Which end of time.
    match (text(0), text(1), text(2)) {
        ("first", "time", _) | ("earliest", _, _) | ("originally", _, _) => {
            return ordered(if text(0) == "first" { 2 } else { 1 }, Order::Earliest);
        }
        ("the", "first", "time") => return ordered(3, Order::Earliest),
        ("most", "recently" | "recent", _) => return ordered(2, Order::Latest),
        ("last", "time", _) => return ordered(2, Order::Latest),
        ("the", "last", "time") => return ordered(3, Order::Latest),
        ("latest", _, _)
        | ("currently", _, _)
        | ("current", _, _)
        | ("presently", _, _)
        | ("nowadays", _, _) => {
            return ordered(1, Order::Latest);
        }
        ("these", "days", _) | ("right", "now", _) | ("at", "present", _) => {
            return ordered(2, Order::Latest);
        }
        ("at", "the", "moment") => return ordered(3, Order::Latest),
        ("now", _, _) => return ordered(1, Order::Latest),
        _ => {}
    }

    // Days named relative to today.
    match (text(0), text(1), text(2), text(3)) {
        ("today", ..) | ("tonight", ..) => return found(1, day_window(today)),
        ("this", "morning" | "afternoon" | "evening", ..) => return found(2, day_window(today)),
        ("yesterday", ..) => return found(1, day_window(today - 1)),
        ("last", "night", ..) => return found(2, day_window(today - 1)),
        ("the", "day", "before", "yesterday") => return found(4, day_window(today - 2)),
        _ => {}
    }

    // "last week", "this month", "past year", "last weekend".
    if let ("last" | "past" | "previous" | "this", span) = (text(0), text(1)) {
        let monday = week_start(today);
        let window = match (text(0), span) {
            ("this", "week") => Some((monday * DAY_MS, (today + 1) * DAY_MS)),
            ("past", "week") => Some(((today - 7) * DAY_MS, (today + 1) * DAY_MS)),
            (_, "week") => Some(((monday - 7) * DAY_MS, monday * DAY_MS)),
            ("this", "weekend") => Some(((monday + 5) * DAY_MS, (monday + 7) * DAY_MS)),
            (_, "weekend") => {
                // The weekend before today; on a weekend, the one before this one.
                let saturday = if today >= monday + 5 {
                    monday - 2
                } else {
                    monday + 5 - 7
                };
                Some((saturday * DAY_MS, (saturday + 2) * DAY_MS))
            }
            ("this", "month") => Some(month_window(this_year, this_month)),
            ("past", "month") => Some(((today - 30) * DAY_MS, (today + 1) * DAY_MS)),
            (_, "month") => {
                let (y, m) = months_back(this_year, this_month, 1);
                Some(month_window(y, m))
            }
            ("this", "year") => Some(year_window(this_year)),
            ("past", "year") => Some(((today - 365) * DAY_MS, (today + 1) * DAY_MS)),
            (_, "year") => Some(year_window(this_year - 1)),
            _ => None,
        };
        if let Some(window) = window {
            return found(2, window);
        }
        // "last May": the latest May before this month.
        if let Some(m) = month(span) {
            let year = if m < this_month || text(0) == "this" {
                this_year
            } else {
                this_year - 1
            };
            return found(2, month_window(year, m));
        }
        // "last Friday": the latest Friday before today.
        if let Some(d) = weekday(span) {
            let back = (today - (week_start(today) + d)).rem_euclid(7);
            let back = if back == 0 { 7 } else { back };
            return found(2, day_window(today - back));
        }
    }
    // "the past three weeks", "the last 10 days".
    if let ("past" | "last", Some(n), Some(u)) = (text(0), count(text(1)), unit(text(2))) {
        return found(
            3,
            ((today - n * unit_days(u)) * DAY_MS, (today + 1) * DAY_MS),
        );
    }

    // "two weeks ago", "a couple of months ago", "3 days ago".
    let (n, skip) = match (text(0), text(1), text(2)) {
        ("a", "couple", "of") => (Some(2), 3),
        ("couple", "of", _) => (Some(2), 2),
        ("a", "few", _) => (Some(3), 2),
        (first, ..) => (count(first), 1),
    };
    if let Some(n) = n {
        let u = unit(text(skip));
        match (u, text(skip + 1)) {
            (Some(u), "ago") => return found(skip + 2, around(today, n, u)),
            // "two weeks before 11 August 2023", "three days after 2026-02-12"; or before an
            // event, "two weeks before the Lisbon conference", which search dates.
            (Some(u), word @ ("before" | "after")) => {
                let n = if word == "before" { n } else { -n };
                if let Some((anchor, len)) = date_at(w, i + skip + 2, today) {
                    return found(skip + 2 + len, around(anchor, n, u));
                }
                if let Some((event, len)) = event_at(w, i + skip + 2) {
                    return anchored(skip + 2 + len, event, Span::Around(n, u));
                }
            }
            _ => {}
        }
    }
    // "the week before 3 August 2023": the span of one unit up to the date; "the week after I
    // moved": up to an event, which search dates.
    if let ("the", Some(u), word @ ("before" | "after")) = (text(0), unit(text(1)), text(2)) {
        let before = word == "before";
        if let Some((anchor, len)) = date_at(w, i + 3, today) {
            return found(3 + len, next_to(anchor, u, before));
        }
        if let Some((event, len)) = event_at(w, i + 3) {
            return anchored(3 + len, event, Span::Next(u, before));
        }
    }

    // Calendar dates and months.
    if let Some((day, len)) = date_at(w, i, today) {
        return found(len, day_window(day));
    }
    if let Some(m) = month(text(0)) {
        if let Some(y) = year_number(text(1)) {
            return found(2, month_window(y, m));
        }
        // A month alone only after a word that makes it one: "may" is more often a verb, and
        // "march" can be one.
        let introduced = matches!(
            previous,
            "in" | "during" | "since" | "early" | "late" | "mid" | "of" | "until" | "through"
        );
        if introduced {
            let year = if m <= this_month {
                this_year
            } else {
                this_year - 1
            };
            return found(1, month_window(year, m));
        }
    }
    if matches!(previous, "in" | "during" | "since")
        && let Some(y) = year_number(text(0))
    {
        return found(1, year_window(y));
    }
    None
}

/// The time expressions of `query`, resolved against `as_of` (Unix ms, the time the question is
/// asked). When several windows are named, the first wins; the others are still taken out of
/// the text.
pub fn parse(query: &str, as_of: i64) -> When {
    let w = words(query);
    let mut when = When {
        text: query.to_owned(),
        rest: query.to_owned(),
        ..When::default()
    };
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < w.len() {
        let Some(found) = expression_at(&w, i, as_of) else {
            i += 1;
            continue;
        };
        // A preposition or article right before the expression goes with it.
        let mut from = found.from;
        while from > 0
            && (LEADING.contains(&w[from - 1].text.as_str()) || w[from - 1].text == "the")
        {
            from -= 1;
        }
        cut.push((w[from].start, w[found.to - 1].end));
        if when.window.is_none() {
            when.window = found.window;
        }
        if when.order.is_none() {
            when.order = found.order;
        }
        if when.window.is_none() && when.anchor.is_none() {
            when.anchor = found.anchor;
        }
        i = found.to;
    }
    if cut.is_empty() {
        return when;
    }
    let mut text = String::new();
    let mut at = 0;
    for (start, end) in cut {
        text.push_str(&query[at..start]);
        text.push(' ');
        at = end;
    }
    text.push_str(&query[at..]);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // A question that is only about time ("what happened yesterday?") keeps its words: with
    // nothing else to match, matching them is better than matching nothing.
    if says_something(&text) {
        when.text.clone_from(&text);
    }
    when.rest = text;
    when
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thursday 12 February 2026, 15:00 UTC.
    const AS_OF: i64 = 1_770_908_400_000;

    fn day(y: i64, m: i64, d: i64) -> i64 {
        days_from_civil(y, m, d)
    }

    fn window(query: &str) -> Option<(String, String)> {
        let (from, until) = parse(query, AS_OF).window?;
        Some((
            common::time::utc_day(from),
            common::time::utc_day(until - 1),
        ))
    }

    fn span(from: &str, to: &str) -> Option<(String, String)> {
        Some((from.to_owned(), to.to_owned()))
    }

    #[test]
    fn as_of_is_the_thursday_the_tests_assume() {
        assert_eq!(common::time::utc_day(AS_OF), "2026-02-12");
        assert_eq!(week_start(day(2026, 2, 12)), day(2026, 2, 9));
    }

    #[test]
    fn relative_days_weeks_and_months() {
        assert_eq!(
            window("what did we fix yesterday"),
            span("2026-02-11", "2026-02-11")
        );
        assert_eq!(window("the bug today"), span("2026-02-12", "2026-02-12"));
        assert_eq!(
            window("deploys last week"),
            span("2026-02-02", "2026-02-08")
        );
        assert_eq!(
            window("the parser two weeks ago"),
            span("2026-01-26", "2026-02-01")
        );
        assert_eq!(
            window("a couple of days ago"),
            span("2026-02-10", "2026-02-10")
        );
        assert_eq!(
            window("what broke last month"),
            span("2026-01-01", "2026-01-31")
        );
        assert_eq!(
            window("releases last year"),
            span("2025-01-01", "2025-12-31")
        );
        assert_eq!(
            window("the migration last Friday"),
            span("2026-02-06", "2026-02-06")
        );
        assert_eq!(
            window("hikes last weekend"),
            span("2026-02-07", "2026-02-08")
        );
        assert_eq!(
            window("errors in the past 3 days"),
            span("2026-02-09", "2026-02-12")
        );
    }

    #[test]
    fn absolute_dates_months_and_years() {
        assert_eq!(
            window("the outage on 2026-02-03"),
            span("2026-02-03", "2026-02-03")
        );
        assert_eq!(
            window("who had dinner on May 3, 2023"),
            span("2023-05-03", "2023-05-03")
        );
        assert_eq!(
            window("what was found on 1 February, 2023"),
            span("2023-02-01", "2023-02-01")
        );
        assert_eq!(
            window("what happened in May 2025"),
            span("2025-05-01", "2025-05-31")
        );
        // A month without a year is the latest one not after the question.
        assert_eq!(window("the trip in May"), span("2025-05-01", "2025-05-31"));
        assert_eq!(
            window("what we did in January"),
            span("2026-01-01", "2026-01-31")
        );
        assert_eq!(
            window("the talk on March 3rd"),
            span("2025-03-03", "2025-03-03")
        );
        assert_eq!(window("hires in 2024"), span("2024-01-01", "2024-12-31"));
        assert_eq!(
            window("the puppy two weeks before August 11, 2023"),
            span("2023-07-25", "2023-07-31")
        );
        assert_eq!(
            window("what the kids did the week before August 3, 2023"),
            span("2023-07-27", "2023-08-02")
        );
    }

    /// The event's name, and the window once the event is dated at `event_day`.
    fn anchored(query: &str, event_day: i64) -> Option<(String, String, String, String)> {
        let when = parse(query, AS_OF);
        assert_eq!(when.window, None, "{query}");
        let anchor = when.anchor?;
        let (from, until) = anchor.window(event_day * DAY_MS + 10 * 3_600_000);
        Some((
            anchor.event,
            common::time::utc_day(from),
            common::time::utc_day(until - 1),
            when.text,
        ))
    }

    #[test]
    fn spans_placed_against_an_event_wait_for_search_to_date_it() {
        let lisbon = day(2025, 10, 20);
        let owned = |a: &str, b: &str, c: &str, d: &str| {
            Some((a.to_owned(), b.to_owned(), c.to_owned(), d.to_owned()))
        };
        assert_eq!(
            anchored(
                "What did I work on two weeks before the Lisbon conference?",
                lisbon
            ),
            owned(
                "the lisbon conference",
                "2025-10-03",
                "2025-10-09",
                // A preposition before a time expression goes with it, as it does elsewhere.
                "What did I work ?"
            )
        );
        // The event's name ends with its clause, and "after" counts forward.
        assert_eq!(
            anchored(
                "three days after I moved to Berlin, which bug did we fix",
                lisbon
            ),
            owned(
                "i moved to berlin",
                "2025-10-23",
                "2025-10-23",
                ", which bug did we fix"
            )
        );
        assert_eq!(
            anchored("the flaky test the week after the release", lisbon),
            owned("the release", "2025-10-21", "2025-10-27", "the flaky test")
        );
        assert_eq!(
            anchored("deploys the month before the migration", lisbon),
            owned("the migration", "2025-09-20", "2025-10-19", "deploys")
        );
        // A date is still a date; and "it" names nothing that can be dated.
        assert!(
            parse("the puppy two weeks before August 11, 2023", AS_OF)
                .anchor
                .is_none()
        );
        let it = parse("what broke a day after it", AS_OF);
        assert_eq!((it.window, it.anchor), (None, None));
        assert_eq!(it.text, "what broke a day after it");
    }

    #[test]
    fn words_that_only_look_like_time_are_left_alone() {
        for query in [
            "may the parser panic on empty input",
            "what may cause a flaky reconnect",
            "the march of the migrations",
            "bump the version to 2024",
            "the first test that failed",
            "a day in the life of the indexer",
        ] {
            let when = parse(query, AS_OF);
            assert_eq!(when.window, None, "{query}");
            assert_eq!(when.order, None, "{query}");
            assert_eq!(when.text, query, "{query}");
        }
    }

    #[test]
    fn time_words_leave_the_matched_text() {
        assert_eq!(
            parse("what did we decide about the cache yesterday?", AS_OF).text,
            "what did we decide about the cache ?"
        );
        assert_eq!(
            parse("When did Melanie go camping in June?", AS_OF).text,
            "When did Melanie go camping ?"
        );
        assert_eq!(
            parse("Who did Maria have dinner with on May 3, 2023?", AS_OF).text,
            "Who did Maria have dinner with ?"
        );
        // Nothing but time and stopwords: the words stay, so something can still match.
        let only = parse("what happened yesterday", AS_OF);
        assert_eq!(only.text, "what happened");
        let bare = parse("what did I do yesterday", AS_OF);
        assert_eq!(bare.text, "what did I do yesterday");
        assert!(bare.window.is_some());
        // What is left, said plainly, tells search the question names nothing else.
        assert_eq!(bare.rest, "what did I do");
        assert_eq!(
            parse(
                "Roughly three weeks before I moved to Berlin, what was I doing?",
                AS_OF
            )
            .rest,
            "Roughly , what was I doing?"
        );
    }

    #[test]
    fn first_and_latest() {
        let first = parse("when did the first time the deploy failed happen", AS_OF);
        assert_eq!(first.order, Some(Order::Earliest));
        assert!(!first.text.contains("first"));
        let latest = parse("which database version do we use now", AS_OF);
        assert_eq!(latest.order, Some(Order::Latest));
        assert_eq!(latest.text, "which database version do we use");
        assert_eq!(
            parse("what did we change most recently in the parser", AS_OF).order,
            Some(Order::Latest)
        );
        assert_eq!(
            parse("the last time the build broke", AS_OF).order,
            Some(Order::Latest)
        );
        for (query, text) in [
            (
                "What runs our continuous integration at the moment?",
                "What runs our continuous integration ?",
            ),
            (
                "What's the current version of the validation library?",
                "What's version of the validation library?",
            ),
            ("which editor do I use at present", "which editor do I use"),
        ] {
            let when = parse(query, AS_OF);
            assert_eq!(when.order, Some(Order::Latest), "{query}");
            assert_eq!(when.text, text, "{query}");
        }
    }
}

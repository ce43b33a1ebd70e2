//! An in-memory copy of the full-text index that ranks exactly as FTS5's `bm25()` does, but
//! scores only what it must.
//!
//! FTS5 computes `bm25()` for every row a query matches before it can sort them, and an OR of
//! a few common words matches most of a large store: at 100k items that alone is well over
//! 50 ms. This copy keeps each term's postings (item slot and per-column counts, compactly
//! encoded) in memory, scores a query term at a time into one accumulator per item, and keeps
//! only the best. It tokenises as the `memory_fts` table does (`unicode61` with diacritics
//! removed, then the Porter stemmer), and computes the same formula from the same statistics,
//! so the scores it returns are the scores FTS5 would return.
//!
//! The copy is filled from `memory_items` in the background at start; until it is complete,
//! and for queries it cannot answer exactly (a phrase of several tokens, a file or concept
//! filter), search asks FTS5. Every write reaches SQLite first and this copy after its commit.

use crate::vector::VectorFilter;
use std::collections::{HashMap, HashSet};
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// BM25 constants, as FTS5 fixes them.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// The full-text columns of `memory_fts`, in order.
pub const COLUMNS: usize = 5;
/// FTS5's porter tokenizer leaves longer tokens alone.
const PORTER_MAX_BYTES: usize = 64;

/// What a full-text row of one item holds, column by column (title, text, prev, prev2, date).
#[derive(Debug, Clone)]
pub struct LexDoc {
    pub id: i64,
    pub project: String,
    pub kind: String,
    pub session_id: String,
    pub occurred_at: i64,
    pub columns: [String; COLUMNS],
}

/// The in-memory full-text index; `search` answers `None` until it is loaded.
#[derive(Default)]
pub struct Lexical {
    index: RwLock<Index>,
    ready: AtomicBool,
    /// Items removed while the loader runs, so it does not bring them back.
    removed_while_loading: RwLock<HashSet<i64>>,
}

#[derive(Default)]
struct Index {
    terms: HashMap<Box<str>, u32>,
    lists: Vec<Postings>,
    docs: Vec<Doc>,
    slots: HashMap<i64, u32>,
    live_docs: u64,
    /// Rows and tokens as FTS5 counts them for BM25: every row ever added, deleted or not
    /// (`contentless_delete` tables never subtract), plus what was added before this copy was
    /// loaded and is gone since (`offset_*`, set by the loader).
    rows: u64,
    tokens: u64,
    offset_rows: i64,
    offset_tokens: i64,
    projects: Interner,
    kinds: Interner,
    sessions: Interner,
}

/// One term's postings: for each item slot (ascending), the gap from the previous slot as a
/// varint, then a byte whose high bit is clear when every column holds the term at most once
/// (the low five bits say which), or set and followed by one count byte per column.
#[derive(Default)]
struct Postings {
    bytes: Vec<u8>,
    last: u32,
}

struct Doc {
    id: i64,
    tokens: u32,
    project: u32,
    kind: u32,
    session: u32,
    occurred_at: i64,
    live: bool,
}

#[derive(Default)]
struct Interner(HashMap<Box<str>, u32>);

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        let next = self.0.len() as u32;
        *self.0.entry(s.into()).or_insert(next)
    }

    fn get(&self, s: &str) -> Option<u32> {
        self.0.get(s).copied()
    }
}

impl Lexical {
    pub fn new() -> Lexical {
        Lexical::default()
    }

    /// Whether searches are answered from memory yet.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Mark the copy complete: from now on it answers searches.
    pub fn set_ready(&self) {
        self.removed_while_loading
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.ready.store(true, Ordering::Release);
    }

    /// Add items; one already present is left alone, so the loader and the writers can both
    /// add an item without counting it twice.
    pub fn add(&self, docs: &[LexDoc]) {
        self.load(docs);
    }

    /// Add items as [`Lexical::add`] does; returns how many of them the copy now holds, and
    /// their tokens (items removed meanwhile are not brought back, and not counted).
    pub fn load(&self, docs: &[LexDoc]) -> (u64, u64) {
        let skip = if self.is_ready() {
            HashSet::new()
        } else {
            self.removed_while_loading
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        let (mut held, mut tokens) = (0, 0);
        for doc in docs.iter().filter(|d| !skip.contains(&d.id)) {
            held += 1;
            tokens += u64::from(index.add(doc));
        }
        (held, tokens)
    }

    /// Complete a load: FTS5 counted `fts_rows` rows and `fts_tokens` tokens (when its totals
    /// could be read) where the loader found `held` items of `tokens` tokens; the difference is
    /// rows deleted before the load, which FTS5 still counts. Searches are answered from now on.
    pub fn finish_load(&self, fts: Option<(u64, u64)>, held: u64, tokens: u64) {
        if let Some((fts_rows, fts_tokens)) = fts {
            let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
            index.offset_rows = fts_rows as i64 - held as i64;
            index.offset_tokens = fts_tokens as i64 - tokens as i64;
        }
        self.set_ready();
    }

    /// Remove items by id; unknown ids are ignored.
    pub fn remove(&self, ids: &[i64]) {
        if !self.is_ready() {
            self.removed_while_loading
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .extend(ids);
        }
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        for id in ids {
            index.remove(*id);
        }
    }

    /// How many items the copy holds, and roughly how many bytes.
    pub fn size(&self) -> (u64, usize) {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        let postings: usize = index.lists.iter().map(|l| l.bytes.capacity()).sum();
        let bytes = postings
            + index.lists.capacity() * std::mem::size_of::<Postings>()
            + index.docs.capacity() * std::mem::size_of::<Doc>()
            + index.terms.keys().map(|k| k.len() + 24).sum::<usize>()
            + index.slots.capacity() * 16;
        (index.live_docs, bytes)
    }

    /// The best `limit` items for an OR of `words` (each one FTS5 phrase), scored as FTS5's
    /// `bm25()` with these column weights would score them (higher is better here). `None` when
    /// the copy is not loaded, or a word is several tokens (a phrase needs positions).
    pub fn search(
        &self,
        words: &[String],
        weights: &[f64; COLUMNS],
        filter: &VectorFilter,
        limit: usize,
    ) -> Option<Vec<(i64, f64)>> {
        if !self.is_ready() {
            return None;
        }
        let mut phrase_tokens = Vec::with_capacity(words.len());
        for word in words {
            let mut tokens = Vec::new();
            tokenize(word, |t| tokens.push(t.to_owned()));
            match tokens.len() {
                0 => {}
                1 => phrase_tokens.push(tokens.pop().unwrap_or_default()),
                _ => return None,
            }
        }
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        Some(index.search(&phrase_tokens, weights, filter, limit))
    }
}

impl Index {
    /// Add one item; returns its token count.
    fn add(&mut self, doc: &LexDoc) -> u32 {
        if let Some(slot) = self.slots.get(&doc.id) {
            return self.docs[*slot as usize].tokens;
        }
        let slot = self.docs.len() as u32;
        // Per term, how often it occurs in each column.
        let mut counts: HashMap<u32, [u32; COLUMNS]> = HashMap::new();
        let mut tokens = 0u32;
        for (column, text) in doc.columns.iter().enumerate() {
            tokenize(text, |token| {
                tokens += 1;
                let term = match self.terms.get(token) {
                    Some(term) => *term,
                    None => {
                        let term = self.terms.len() as u32;
                        self.terms.insert(token.into(), term);
                        self.lists.push(Postings::default());
                        term
                    }
                };
                counts.entry(term).or_default()[column] += 1;
            });
        }
        for (term, counts) in counts {
            self.lists[term as usize].push(slot, &counts);
        }
        let doc = Doc {
            id: doc.id,
            tokens,
            project: self.projects.intern(&doc.project),
            kind: self.kinds.intern(&doc.kind),
            session: self.sessions.intern(&doc.session_id),
            occurred_at: doc.occurred_at,
            live: true,
        };
        self.slots.insert(doc.id, slot);
        self.live_docs += 1;
        self.rows += 1;
        self.tokens += u64::from(tokens);
        self.docs.push(doc);
        tokens
    }

    fn remove(&mut self, id: i64) {
        // A removed item keeps its postings, skipped by every search; they are few, since only
        // rewritten summaries and patterns are ever removed, and a restart drops them.
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        self.docs[slot as usize].live = false;
        self.live_docs -= 1;
    }

    fn search(
        &self,
        phrases: &[String],
        weights: &[f64; COLUMNS],
        filter: &VectorFilter,
        limit: usize,
    ) -> Vec<(i64, f64)> {
        if self.live_docs == 0 || phrases.is_empty() || limit == 0 {
            return Vec::new();
        }
        let Some(allowed) = self.allowed(filter) else {
            return Vec::new();
        };
        let n = (self.rows as i64 + self.offset_rows).max(1) as f64;
        let average = ((self.tokens as i64 + self.offset_tokens).max(1) as f64) / n;
        // A matched item's score may be zero (a term only in a column weighted zero) and it is
        // still a match, as in FTS5: NaN marks "not matched".
        let mut scores = vec![f64::NAN; self.docs.len()];
        let mut postings: Vec<(u32, [u8; COLUMNS])> = Vec::new();
        for phrase in phrases {
            let Some(&term) = self.terms.get(phrase.as_str()) else {
                continue;
            };
            postings.clear();
            self.lists[term as usize].decode(&mut postings);
            // FTS5's document frequency counts every live row holding the term, filtered or
            // not, so the scores do not depend on the filter.
            let hits = postings
                .iter()
                .filter(|(slot, _)| self.docs[*slot as usize].live)
                .count() as f64;
            let mut idf = ((n - hits + 0.5) / (hits + 0.5)).ln();
            if idf <= 0.0 {
                idf = 1e-6;
            }
            for (slot, counts) in &postings {
                let doc = &self.docs[*slot as usize];
                if !doc.live || !allowed(doc) {
                    continue;
                }
                let freq: f64 = counts
                    .iter()
                    .zip(weights)
                    .map(|(c, w)| f64::from(*c) * w)
                    .sum();
                let length = f64::from(doc.tokens);
                let part =
                    idf * (freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * length / average));
                let score = &mut scores[*slot as usize];
                *score = if score.is_nan() { part } else { *score + part };
            }
        }
        let mut found: Vec<(f64, u32)> = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_nan())
            .map(|(slot, s)| (*s, slot as u32))
            .collect();
        // Best first; ties to the older item, as FTS5's rowid order breaks them.
        let id = |slot: u32| self.docs[slot as usize].id;
        let order =
            |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(id(a.1).cmp(&id(b.1)));
        if found.len() > limit {
            found.select_nth_unstable_by(limit - 1, order);
            found.truncate(limit);
        }
        found.sort_unstable_by(order);
        found
            .into_iter()
            .map(|(score, slot)| (self.docs[slot as usize].id, score))
            .collect()
    }

    /// The filter as a check on one item; `None` when nothing can pass it.
    fn allowed<'a>(&'a self, filter: &'a VectorFilter) -> Option<impl Fn(&Doc) -> bool + 'a> {
        let project = match &filter.project {
            Some(p) => Some(self.projects.get(p)?),
            None => None,
        };
        let kinds: Vec<u32> = filter
            .kinds
            .iter()
            .filter_map(|k| self.kinds.get(k))
            .collect();
        if !filter.kinds.is_empty() && kinds.is_empty() {
            return None;
        }
        let sessions: Vec<u32> = filter
            .sessions
            .iter()
            .filter_map(|s| self.sessions.get(s))
            .collect();
        if !filter.sessions.is_empty() && sessions.is_empty() {
            return None;
        }
        let excluded: Vec<u32> = filter
            .exclude_sessions
            .iter()
            .filter_map(|s| self.sessions.get(s))
            .collect();
        Some(move |doc: &Doc| {
            project.is_none_or(|p| doc.project == p)
                && (kinds.is_empty() || kinds.contains(&doc.kind))
                && (sessions.is_empty() || sessions.contains(&doc.session))
                && !excluded.contains(&doc.session)
                && filter.since_ms.is_none_or(|t| doc.occurred_at >= t)
                && filter.until_ms.is_none_or(|t| doc.occurred_at < t)
        })
    }
}

impl Postings {
    fn push(&mut self, slot: u32, counts: &[u32; COLUMNS]) {
        let gap = if self.bytes.is_empty() {
            slot
        } else {
            slot - self.last
        };
        self.last = slot;
        let mut gap = gap;
        while gap >= 0x80 {
            self.bytes.push((gap as u8 & 0x7f) | 0x80);
            gap >>= 7;
        }
        self.bytes.push(gap as u8);
        if counts.iter().all(|c| *c <= 1) {
            let mask = counts
                .iter()
                .enumerate()
                .fold(0u8, |m, (i, c)| m | (u8::from(*c == 1) << i));
            self.bytes.push(mask);
        } else {
            self.bytes.push(0x80);
            // Counts above 255 in one column of one item are saturated: such a term's score is
            // already at its ceiling long before that.
            self.bytes
                .extend(counts.iter().map(|c| u8::try_from(*c).unwrap_or(u8::MAX)));
        }
    }

    fn decode(&self, out: &mut Vec<(u32, [u8; COLUMNS])>) {
        let bytes = &self.bytes;
        let (mut at, mut slot) = (0, 0u32);
        while at < bytes.len() {
            let (mut gap, mut shift) = (0u32, 0);
            loop {
                let b = bytes[at];
                at += 1;
                gap |= u32::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            slot += gap;
            let flag = bytes[at];
            at += 1;
            let mut counts = [0u8; COLUMNS];
            if flag & 0x80 == 0 {
                for (i, c) in counts.iter_mut().enumerate() {
                    *c = (flag >> i) & 1;
                }
            } else {
                counts.copy_from_slice(&bytes[at..at + COLUMNS]);
                at += COLUMNS;
            }
            out.push((slot, counts));
        }
    }
}

/// Split text into tokens as `memory_fts`'s tokenizer does (`porter unicode61
/// remove_diacritics 2`): runs of letters and digits, lower-cased, without diacritics, stemmed.
pub fn tokenize(text: &str, mut emit: impl FnMut(&str)) {
    let mut word = String::new();
    let mut flush = |word: &mut String| {
        if word.is_empty() {
            return;
        }
        // Like FTS5's porter tokenizer, the length bounds are in bytes and any token within
        // them is stemmed, whatever its script (suffixes are ASCII, so others pass unchanged).
        if (3..=PORTER_MAX_BYTES).contains(&word.len()) {
            emit(&stem(word));
        } else {
            emit(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_ascii() {
                word.push(c.to_ascii_lowercase());
            } else {
                for lower in c.to_lowercase() {
                    fold_diacritics(lower, &mut word);
                }
            }
        } else if !word.is_empty() && store::fts::is_combining_mark(c) {
            // A combining accent is part of the letter before it, and is removed with it.
        } else {
            flush(&mut word);
        }
    }
    flush(&mut word);
}

/// Martin Porter's stemmer, as FTS5's porter tokenizer applies it.
fn stem(word: &str) -> String {
    thread_local! {
        static STEMMER: nltk_porter::PorterStemmer =
            nltk_porter::PorterStemmer::new(nltk_porter::Mode::Martin);
    }
    thread_local! {
        // Stemming allocates at every step, and a store's vocabulary is small next to its
        // token count, so loading a large store mostly hits this cache.
        static STEMS: std::cell::RefCell<HashMap<Box<str>, Box<str>>> = Default::default();
    }
    const CACHED: usize = 200_000;
    if let Some(stem) = STEMS.with(|c| c.borrow().get(word).map(|s| s.to_string())) {
        return stem;
    }
    let stem = stem_uncached(word, &STEMMER);
    STEMS.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CACHED {
            cache.clear();
        }
        cache.insert(word.into(), stem.as_str().into());
    });
    stem
}

fn stem_uncached(
    word: &str,
    stemmer: &'static std::thread::LocalKey<nltk_porter::PorterStemmer>,
) -> String {
    if word.is_ascii() {
        return stemmer.with(|s| s.stem(word));
    }
    // FTS5 stems bytes, so each byte of a non-ASCII character is a consonant of its own (which
    // decides, for instance, whether a final "e" goes). Spelling each such byte as one caseless
    // character makes the character-based stemmer see the same word.
    const SPELLING: u32 = 0x2800;
    let spelled: String = word
        .bytes()
        .map(|b| {
            char::from_u32(if b.is_ascii() {
                b.into()
            } else {
                SPELLING + u32::from(b)
            })
        })
        .collect::<Option<_>>()
        .unwrap_or_default();
    let stemmed = stemmer.with(|s| s.stem(&spelled));
    let bytes: Vec<u8> = stemmed
        .chars()
        .map(|c| u8::try_from(u32::from(c).checked_sub(SPELLING).unwrap_or(u32::from(c))))
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_else(|_| word.to_owned())
}

/// Push `c` without its diacritics: its canonical decomposition minus combining marks.
fn fold_diacritics(c: char, out: &mut String) {
    use unicode_normalization::char::decompose_canonical;
    decompose_canonical(c, |part| {
        if !store::fts::is_combining_mark(part) {
            out.push(part);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        tokenize(text, |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn tokens_are_folded_and_stemmed() {
        assert_eq!(
            tokens("Running the TESTS, café-naïve x2 a"),
            ["run", "the", "test", "cafe", "naiv", "x2", "a"]
        );
        // As in FTS5, "ß" is two consonant bytes, so the final "e" is removed.
        assert_eq!(tokens("Straße"), ["straß"]);
        assert_eq!(tokens("中 文"), ["中", "文"]);
    }

    #[test]
    fn postings_round_trip() {
        let mut list = Postings::default();
        list.push(3, &[1, 0, 1, 0, 0]);
        list.push(300, &[2, 0, 0, 0, 700]);
        list.push(70_000, &[0, 0, 0, 0, 1]);
        let mut out = Vec::new();
        list.decode(&mut out);
        assert_eq!(
            out,
            [
                (3, [1, 0, 1, 0, 0]),
                (300, [2, 0, 0, 0, 255]),
                (70_000, [0, 0, 0, 0, 1])
            ]
        );
    }

    fn doc(id: i64, project: &str, text: &str) -> LexDoc {
        LexDoc {
            id,
            project: project.into(),
            kind: "prompt".into(),
            session_id: format!("s{}", id % 2),
            occurred_at: id,
            columns: [
                String::new(),
                text.into(),
                String::new(),
                String::new(),
                String::new(),
            ],
        }
    }

    #[test]
    fn search_filters_ranks_and_forgets_removed_items() {
        let lexical = Lexical::new();
        lexical.add(&[
            doc(1, "/a", "the websocket reconnect test is flaky"),
            doc(2, "/a", "websocket"),
            doc(3, "/b", "reconnect reconnect reconnect"),
            doc(4, "/b", "nothing to see"),
        ]);
        let weights = [1.0; COLUMNS];
        let words = ["websocket".to_owned(), "reconnecting".to_owned()];
        assert!(
            lexical
                .search(&words, &weights, &VectorFilter::default(), 10)
                .is_none(),
            "not answered before it is loaded"
        );
        lexical.set_ready();
        let all = lexical
            .search(&words, &weights, &VectorFilter::default(), 10)
            .unwrap();
        let ids: Vec<i64> = all.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), 3);
        assert!(!ids.contains(&4));
        let only_b = VectorFilter {
            project: Some("/b".into()),
            ..Default::default()
        };
        let b = lexical.search(&words, &weights, &only_b, 10).unwrap();
        assert_eq!(b.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [3]);
        lexical.remove(&[3]);
        assert!(
            lexical
                .search(&words, &weights, &only_b, 10)
                .unwrap()
                .is_empty()
        );
        let phrase = ["web_socket".to_owned()];
        assert!(
            lexical
                .search(&phrase, &weights, &VectorFilter::default(), 10)
                .is_none(),
            "a several-token phrase is left to FTS5"
        );
    }
}

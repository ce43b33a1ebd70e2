//! An in-memory copy of the full-text index that ranks exactly as FTS5's `bm25()` does, but
//! scores only what it must.
//!
//! FTS5 computes `bm25()` for every row a query matches before it can sort them, and an OR of
//! a few common words matches most of a large store: at 100k items that alone is well over
//! 50 ms. This copy keeps each term's postings (item slot and per-column counts, compactly
//! encoded, with a skip entry every [`BLOCK`] postings that bounds their scores) in memory,
//! and walks the query's lists together an item at a time, keeping the best in a heap. Once
//! the heap is full, a term whose best possible part cannot lift an item into it on its own
//! only completes the scores of items the other terms bring (MaxScore), and an item that can
//! no longer make it is left half-scored; so a common word's long list is mostly skipped, not
//! read. A query of common words only (each held by at least one item in 64) leaves the walk
//! nothing to skip, so its lists are instead read whole, one after the other, into a score per
//! item, and the scored items offered to the heap.
//!
//! It tokenises as the `memory_fts` table does (`unicode61` with diacritics removed, then the
//! Porter stemmer), and computes the same formula from the same statistics, summing each item's
//! parts in the query's order, so the scores it returns are the scores FTS5 would return, and
//! the items the exhaustive ranking would return.
//!
//! The copy is filled from `memory_items` in the background at start; until it is complete,
//! and for queries it cannot answer exactly (a phrase of several tokens, a file or concept
//! filter), search asks FTS5. Every write reaches SQLite first and this copy after its commit.

use crate::vector::VectorFilter;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// BM25 constants, as FTS5 fixes them.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// The full-text columns of `memory_fts`, in order.
pub const COLUMNS: usize = 5;
/// FTS5's porter tokenizer leaves longer tokens alone.
const PORTER_MAX_BYTES: usize = 64;
/// Postings per skip entry of a list.
const BLOCK: usize = 128;
/// The slot a cursor stands on once its list is exhausted; no item has it.
const END: u32 = u32::MAX;
/// A term is common when at least one item in this many holds it; a query of common terms
/// only is read whole ([`Reading`]).
const COMMON: u64 = 64;
/// How much score bounds are widened: a bound and the score it bounds are summed in different
/// orders, and rounding must never make a bound prune an item that belongs in the results.
const SLACK: f64 = 1.0 + 1e-9;

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

/// Items tokenised and counted, ready to be added under the index's lock: tokenising is most of
/// the cost of adding an item, and this way it runs beforehand, on any thread.
pub struct Prepared {
    /// The batch's distinct tokens, in the order they first occur.
    vocabulary: Vec<Box<str>>,
    docs: Vec<PreparedDoc>,
}

struct PreparedDoc {
    id: i64,
    project: String,
    kind: String,
    session_id: String,
    occurred_at: i64,
    tokens: u32,
    /// Each distinct token (its place in the batch's vocabulary) with its count per column,
    /// in the order the item first uses them.
    terms: Vec<(u32, [u32; COLUMNS])>,
}

/// Tokenise items for [`Lexical::load_prepared`].
pub fn prepare(docs: &[LexDoc]) -> Prepared {
    let mut known: HashMap<Box<str>, u32> = HashMap::new();
    // Per token of the vocabulary, its place in the current item's `terms` plus one (zero when
    // the item has not used it yet), reset after each item: cheaper than a map per item.
    let mut place: Vec<u32> = Vec::new();
    let mut prepared = Vec::with_capacity(docs.len());
    for doc in docs {
        let mut terms: Vec<(u32, [u32; COLUMNS])> = Vec::new();
        let mut tokens = 0u32;
        for (column, text) in doc.columns.iter().enumerate() {
            tokenize(text, |token| {
                tokens += 1;
                let local = match known.get(token) {
                    Some(local) => *local,
                    None => {
                        let local = known.len() as u32;
                        known.insert(token.into(), local);
                        place.push(0);
                        local
                    }
                };
                let at = &mut place[local as usize];
                if *at == 0 {
                    terms.push((local, [0; COLUMNS]));
                    *at = terms.len() as u32;
                }
                terms[*at as usize - 1].1[column] += 1;
            });
        }
        for (local, _) in &terms {
            place[*local as usize] = 0;
        }
        prepared.push(PreparedDoc {
            id: doc.id,
            project: doc.project.clone(),
            kind: doc.kind.clone(),
            session_id: doc.session_id.clone(),
            occurred_at: doc.occurred_at,
            tokens,
            terms,
        });
    }
    let mut vocabulary: Vec<Box<str>> = vec![Box::default(); known.len()];
    for (token, local) in known {
        vocabulary[local as usize] = token;
    }
    Prepared {
        vocabulary,
        docs: prepared,
    }
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
    /// Each slot's token count, apart from `docs`: a query read whole looks up the length of
    /// every item its lists hold, and packed they are a tenth of the memory `docs` would stream
    /// through.
    lengths: Vec<u32>,
    /// The most tokens an item has.
    longest: u32,
    /// The latest `occurred_at` of any item ever added (a removal leaves it).
    newest: Option<i64>,
    slots: HashMap<i64, u32>,
    live_docs: u64,
    /// The slots of removed items, whose postings stay: a term's document frequency is its
    /// postings less those of these slots (none, usually, so nothing to count).
    removed: BTreeSet<u32>,
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
/// (the low five bits say which), or set and followed by one count byte per column. Every
/// [`BLOCK`] postings start a [`Block`], so a reader can skip to a slot without decoding what
/// lies before it.
#[derive(Default)]
struct Postings {
    bytes: Vec<u8>,
    last: u32,
    len: u32,
    blocks: Vec<Block>,
}

/// A run of [`BLOCK`] postings (fewer in a list's last): where it starts, its last slot, and
/// what bounds the score of any of its items, the most each column holds the term and the
/// fewest tokens an item has.
#[derive(Clone, Copy)]
struct Block {
    offset: u32,
    last: u32,
    most: [u8; COLUMNS],
    shortest: u32,
}

struct Doc {
    id: i64,
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
        if let Some(id) = self.0.get(s) {
            return *id;
        }
        let next = self.0.len() as u32;
        self.0.insert(s.into(), next);
        next
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
        self.load_prepared(prepare(docs))
    }

    /// [`Lexical::load`] of items tokenised beforehand by [`prepare`].
    pub fn load_prepared(&self, batch: Prepared) -> (u64, u64) {
        let skip = if self.is_ready() {
            HashSet::new()
        } else {
            self.removed_while_loading
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        index.add(batch, &skip)
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

    /// The time of the newest item the copy was given, once it is loaded; removing an item does
    /// not move it back, so it may be later than any item still held.
    pub fn newest(&self) -> Option<i64> {
        if !self.is_ready() {
            return None;
        }
        self.index.read().unwrap_or_else(|e| e.into_inner()).newest
    }

    /// How many items the copy holds, and roughly how many bytes.
    pub fn size(&self) -> (u64, usize) {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        let postings: usize = index
            .lists
            .iter()
            .map(|l| l.bytes.capacity() + l.blocks.capacity() * std::mem::size_of::<Block>())
            .sum();
        let bytes = postings
            + index.lists.capacity() * std::mem::size_of::<Postings>()
            + index.docs.capacity() * std::mem::size_of::<Doc>()
            + index.lengths.capacity() * 4
            + index.terms.keys().map(|k| k.len() + 24).sum::<usize>()
            + index.slots.capacity() * 16
            + index.removed.len() * 8;
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
        Some(index.search(&phrase_tokens, weights, filter, limit, None))
    }

    /// The live items holding a word of `words` that at most `max_items` live items hold: a
    /// rare word (a folder's name, an error's) names what the asker wants more surely than any
    /// likeness of meaning. Empty when the copy is not loaded or `max_items` is 0.
    pub fn rare_holders(&self, words: &[String], max_items: u64) -> HashSet<i64> {
        let mut holders = HashSet::new();
        if max_items == 0 || !self.is_ready() {
            return holders;
        }
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        for word in words {
            let mut tokens = Vec::new();
            tokenize(word, |t| tokens.push(t.to_owned()));
            for token in tokens {
                let Some(&term) = index.terms.get(token.as_str()) else {
                    continue;
                };
                let list = &index.lists[term as usize];
                // A common word is passed over without counting its live postings, which walks
                // the removed slots: no removal can bring it down to `max_items`.
                if u64::from(list.len) > max_items + index.removed.len() as u64
                    || index.live_postings(list) > max_items
                {
                    continue;
                }
                let mut cursor = Cursor::new(list);
                cursor.next();
                while cursor.slot != END {
                    let doc = &index.docs[cursor.slot as usize];
                    if doc.live {
                        holders.insert(doc.id);
                    }
                    cursor.next();
                }
            }
        }
        holders
    }
}

/// Put `found` among the `limit` best when it belongs there; once they are `limit`, the score
/// the worst of them has, which is what an item must reach to enter.
fn offer(best: &mut BinaryHeap<Found>, limit: usize, found: Found) -> Option<f64> {
    if best.len() < limit {
        best.push(found);
    } else if let Some(mut worst) = best.peek_mut()
        && found < *worst
    {
        *worst = found;
    }
    (best.len() == limit)
        .then(|| best.peek().map(|w| w.score))
        .flatten()
}

/// A score per slot and which slots hold one, reused by every query a thread reads whole: at
/// a million items that is 8 MB, which allocating afresh each time would fault in page by page.
#[derive(Default)]
struct Dense {
    scores: Vec<f64>,
    touched: Vec<u64>,
}

thread_local! {
    static DENSE: std::cell::RefCell<Dense> = std::cell::RefCell::new(Dense::default());
}

/// How a query's lists are read: walked together an item at a time, skipping what cannot
/// matter (MaxScore), or each read whole into a score per item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    Walk,
    Whole,
}

impl Reading {
    /// The walk wins by what it skips, and it skips only when some term is rare enough that
    /// its holders fill the results and the common terms' lists need only be looked into. When
    /// every term is common it decodes nearly every posting anyway, and visiting each item
    /// once per list costs it more than twice the whole reading (at a million items of the
    /// search bench, ranking alone: p50 22 against 14 ms, p95 41 against 20).
    fn of(terms: &[Term<'_>], slots: usize) -> Reading {
        let rarest = terms.iter().map(|t| t.cursor.list.len).min().unwrap_or(0);
        if u64::from(rarest) * COMMON >= slots as u64 {
            Reading::Whole
        } else {
            Reading::Walk
        }
    }
}

/// One query term's BM25 part for an item of `length` tokens holding it `counts` times in each
/// column: the one expression every score and every bound is computed with, in three steps
/// that a query reading lists whole computes once per count pattern and per length.
fn part(
    idf: f64,
    counts: &[u8; COLUMNS],
    weights: &[f64; COLUMNS],
    length: f64,
    average: f64,
) -> f64 {
    bm25(idf, frequency(counts, weights), norm(length, average))
}

/// A term's weighted frequency in an item: its count in each column times the column's weight.
fn frequency(counts: &[u8; COLUMNS], weights: &[f64; COLUMNS]) -> f64 {
    counts
        .iter()
        .zip(weights)
        .map(|(c, w)| f64::from(*c) * w)
        .sum()
}

/// What an item's length adds to the denominator.
fn norm(length: f64, average: f64) -> f64 {
    K1 * (1.0 - B + B * length / average)
}

fn bm25(idf: f64, frequency: f64, norm: f64) -> f64 {
    idf * (frequency * (K1 + 1.0)) / (frequency + norm)
}

/// A query's [`frequency`] and [`norm`] for the common cases, computed once: each posting then
/// costs one division. Every value is computed by the same expression as [`part`] computes it,
/// so the scores are the same to the last bit.
struct Scoring<'w> {
    weights: &'w [f64; COLUMNS],
    average: f64,
    /// The frequency of a posting whose columns hold the term at most once, by its mask.
    masks: [f64; 1 << COLUMNS],
    /// The norm of each length below [`NORMS`].
    norms: Vec<f64>,
}

/// Lengths whose norm a query computes beforehand; longer items are rare.
const NORMS: usize = 4096;

impl<'w> Scoring<'w> {
    fn new(weights: &'w [f64; COLUMNS], average: f64, longest: u32) -> Scoring<'w> {
        let masks = std::array::from_fn(|mask| {
            frequency(&std::array::from_fn(|c| ((mask >> c) & 1) as u8), weights)
        });
        let norms = (0..(longest as usize + 1).min(NORMS))
            .map(|length| norm(length as f64, average))
            .collect();
        Scoring {
            weights,
            average,
            masks,
            norms,
        }
    }

    fn norm(&self, length: u32) -> f64 {
        match self.norms.get(length as usize) {
            Some(n) => *n,
            None => norm(f64::from(length), self.average),
        }
    }

    fn frequency(&self, counts: Counts<'_>) -> f64 {
        match counts {
            Counts::Mask(mask) => self.masks[usize::from(mask)],
            Counts::Each(each) => frequency(each, self.weights),
        }
    }
}

/// A term of the query, walked through its postings.
struct Term<'a> {
    /// Which word of the query it is: an item's parts are summed in the query's order.
    word: usize,
    idf: f64,
    /// No item's part for this term exceeds it (infinite when the weights allow no bound), nor
    /// `blocks[b]` for an item of block `b` of its postings.
    bound: f64,
    blocks: Vec<f64>,
    cursor: Cursor<'a>,
}

/// A found item, ordered best first: higher score, then the older item, as FTS5's rowid order
/// breaks ties.
#[derive(Clone, Copy)]
struct Found {
    score: f64,
    id: i64,
}

impl Ord for Found {
    fn cmp(&self, other: &Found) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.id.cmp(&other.id))
    }
}

impl PartialOrd for Found {
    fn partial_cmp(&self, other: &Found) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Found {
    fn eq(&self, other: &Found) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Found {}

impl Index {
    /// Add a tokenised batch, but the items in `skip`; returns how many of the others the copy
    /// holds, and their tokens.
    fn add(&mut self, batch: Prepared, skip: &HashSet<i64>) -> (u64, u64) {
        // The batch's tokens as terms of the index, looked up when first used, so terms are
        // numbered in the order the items use them, as adding them one by one would.
        let mut terms: Vec<Option<u32>> = vec![None; batch.vocabulary.len()];
        let (mut held, mut tokens) = (0, 0);
        for doc in batch.docs {
            if skip.contains(&doc.id) {
                continue;
            }
            held += 1;
            if let Some(slot) = self.slots.get(&doc.id) {
                tokens += u64::from(self.lengths[*slot as usize]);
                continue;
            }
            let slot = self.docs.len() as u32;
            for (local, counts) in &doc.terms {
                let term = match terms[*local as usize] {
                    Some(term) => term,
                    None => {
                        let token = &batch.vocabulary[*local as usize];
                        let term = match self.terms.get(token) {
                            Some(term) => *term,
                            None => {
                                let term = self.terms.len() as u32;
                                self.terms.insert(token.clone(), term);
                                self.lists.push(Postings::default());
                                term
                            }
                        };
                        terms[*local as usize] = Some(term);
                        term
                    }
                };
                self.lists[term as usize].push(slot, counts, doc.tokens);
            }
            self.slots.insert(doc.id, slot);
            self.live_docs += 1;
            self.rows += 1;
            self.tokens += u64::from(doc.tokens);
            tokens += u64::from(doc.tokens);
            self.lengths.push(doc.tokens);
            self.longest = self.longest.max(doc.tokens);
            self.newest = self.newest.max(Some(doc.occurred_at));
            self.docs.push(Doc {
                id: doc.id,
                project: self.projects.intern(&doc.project),
                kind: self.kinds.intern(&doc.kind),
                session: self.sessions.intern(&doc.session_id),
                occurred_at: doc.occurred_at,
                live: true,
            });
        }
        (held, tokens)
    }

    fn remove(&mut self, id: i64) {
        // A removed item keeps its postings, skipped by every search; they are few, since only
        // rewritten summaries and patterns are ever removed, and a restart drops them.
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        self.docs[slot as usize].live = false;
        self.removed.insert(slot);
        self.live_docs -= 1;
    }

    /// How many live items hold the term of `list`: FTS5's document frequency, which counts
    /// every live row holding the term, filtered or not, so scores do not depend on the filter.
    fn live_postings(&self, list: &Postings) -> u64 {
        let mut cursor = Cursor::new(list);
        if self.removed.is_empty() {
            u64::from(list.len)
        } else if self.removed.len() < list.len as usize {
            let mut gone = 0;
            for &slot in &self.removed {
                cursor.seek(slot);
                if cursor.slot == END {
                    break;
                }
                gone += u64::from(cursor.slot == slot);
            }
            u64::from(list.len) - gone
        } else {
            let mut live = 0;
            loop {
                cursor.next();
                if cursor.slot == END {
                    return live;
                }
                live += u64::from(self.docs[cursor.slot as usize].live);
            }
        }
    }

    /// The best `limit` items, the lists read as `reading` says, or as [`Reading::of`] chooses.
    fn search(
        &self,
        phrases: &[String],
        weights: &[f64; COLUMNS],
        filter: &VectorFilter,
        limit: usize,
        reading: Option<Reading>,
    ) -> Vec<(i64, f64)> {
        if self.live_docs == 0 || phrases.is_empty() || limit == 0 {
            return Vec::new();
        }
        let Some(allowed) = self.allowed(filter) else {
            return Vec::new();
        };
        let n = (self.rows as i64 + self.offset_rows).max(1) as f64;
        let average = ((self.tokens as i64 + self.offset_tokens).max(1) as f64) / n;
        // A part grows with a term's counts and shrinks with an item's length only when no
        // weight is negative (or not a number); other weights get no bounds, and every match
        // is scored.
        let bounded = weights
            .iter()
            .all(|w| w.is_finite() && w.is_sign_positive());
        let mut terms = Vec::with_capacity(phrases.len());
        for (word, phrase) in phrases.iter().enumerate() {
            let Some(&term) = self.terms.get(phrase.as_str()) else {
                continue;
            };
            let list = &self.lists[term as usize];
            let hits = self.live_postings(list) as f64;
            let mut idf = ((n - hits + 0.5) / (hits + 0.5)).ln();
            if idf <= 0.0 {
                idf = 1e-6;
            }
            let blocks: Vec<f64> = if bounded {
                list.blocks
                    .iter()
                    .map(|b| part(idf, &b.most, weights, f64::from(b.shortest), average) * SLACK)
                    .collect()
            } else {
                vec![f64::INFINITY; list.blocks.len()]
            };
            let bound = blocks.iter().copied().fold(0.0, f64::max);
            let mut cursor = Cursor::new(list);
            cursor.next();
            terms.push(Term {
                word,
                idf,
                bound,
                blocks,
                cursor,
            });
        }
        if reading.unwrap_or_else(|| Reading::of(&terms, self.docs.len())) == Reading::Whole {
            return self.read_whole(&terms, weights, average, &allowed, limit);
        }
        // The terms from the least a term can add to the most; `reach[i]` is the most the
        // first `i + 1` of them can add together.
        terms.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        let reach: Vec<f64> = terms
            .iter()
            .scan(0.0, |sum, t| {
                *sum += t.bound;
                Some(*sum)
            })
            .collect();
        let mut best: BinaryHeap<Found> = BinaryHeap::with_capacity(limit.min(self.docs.len()));
        // The score an item must reach to enter `best` once it is full.
        let mut threshold = f64::NEG_INFINITY;
        // `terms[..optional]` together cannot reach the threshold, so an item none of the
        // other terms holds cannot enter: only the other terms' postings propose items.
        let mut optional = 0;
        let mut parts: Vec<Option<f64>> = vec![None; phrases.len()];
        while let Some(slot) = terms[optional..].iter().map(|t| t.cursor.slot).min() {
            if slot == END {
                break;
            }
            // Up to the end of the first of the current blocks to end, no item can get more
            // than those blocks allow from the terms that propose items, and what the others
            // can add: when that is not enough, the whole stretch is skipped, undecoded.
            let rest = optional.checked_sub(1).map_or(0.0, |i| reach[i]);
            let (mut most, mut until) = (rest, END);
            for term in &terms[optional..] {
                if let Some(block) = term.cursor.block() {
                    most += term.blocks[block];
                    until = until.min(term.cursor.list.blocks[block].last);
                }
            }
            if most * SLACK < threshold {
                for term in &mut terms[optional..] {
                    term.cursor.seek(until.saturating_add(1));
                }
                continue;
            }
            let doc = &self.docs[slot as usize];
            if !doc.live || !allowed(doc) {
                for term in &mut terms[optional..] {
                    if term.cursor.slot == slot {
                        term.cursor.next();
                    }
                }
                continue;
            }
            let length = f64::from(self.lengths[slot as usize]);
            let mut sum = 0.0;
            for term in &mut terms[optional..] {
                if term.cursor.slot == slot {
                    let p = part(term.idf, &term.cursor.counts, weights, length, average);
                    parts[term.word] = Some(p);
                    sum += p;
                    term.cursor.next();
                }
            }
            // The optional terms, the one that can add most first, while the item can still
            // reach the threshold.
            let mut hopeless = false;
            for i in (0..optional).rev() {
                if (sum + reach[i]) * SLACK < threshold {
                    hopeless = true;
                    break;
                }
                let term = &mut terms[i];
                term.cursor.seek(slot);
                if term.cursor.slot == slot {
                    let p = part(term.idf, &term.cursor.counts, weights, length, average);
                    parts[term.word] = Some(p);
                    sum += p;
                }
            }
            if !hopeless {
                // Summed in the query's order, as the exhaustive ranking summed them, so the
                // score is the same to the last bit.
                let score = parts
                    .iter()
                    .flatten()
                    .fold(None, |s: Option<f64>, p| Some(s.map_or(*p, |s| s + p)));
                if let Some(score) = score
                    && let Some(worst) = offer(&mut best, limit, Found { score, id: doc.id })
                {
                    threshold = worst;
                    while optional < terms.len() && reach[optional] * SLACK < threshold {
                        optional += 1;
                    }
                }
            }
            parts.fill(None);
        }
        best.into_sorted_vec()
            .into_iter()
            .map(|f| (f.id, f.score))
            .collect()
    }

    /// The best `limit` items for `terms`, each list read whole into a score per slot, term by
    /// term in the query's order (so each item's parts are summed in the order the walk sums
    /// them), then the scored slots offered to the heap, the filter checked only for those that
    /// would enter it. See [`Reading`] for when this beats the walk.
    fn read_whole(
        &self,
        terms: &[Term<'_>],
        weights: &[f64; COLUMNS],
        average: f64,
        allowed: &impl Fn(&Doc) -> bool,
        limit: usize,
    ) -> Vec<(i64, f64)> {
        DENSE.with_borrow_mut(|dense| {
            let Dense { scores, touched } = dense;
            // Scores are written before they are read (the bit says which are), so the buffer
            // is only grown, never cleared.
            if scores.len() < self.docs.len() {
                scores.resize(self.docs.len(), 0.0);
            }
            touched.clear();
            touched.resize(self.docs.len().div_ceil(64), 0);
            let mut order: Vec<&Term<'_>> = terms.iter().collect();
            order.sort_by_key(|t| t.word);
            let scoring = Scoring::new(weights, average, self.longest);
            for term in order {
                let bytes = &term.cursor.list.bytes;
                let (mut at, mut slot) = (0, 0u32);
                while at < bytes.len() {
                    let (gap, counts) = read_posting(bytes, &mut at);
                    slot += gap;
                    let s = slot as usize;
                    let norm = scoring.norm(self.lengths[s]);
                    let p = bm25(term.idf, scoring.frequency(counts), norm);
                    let (word, bit) = (&mut touched[s / 64], 1u64 << (s % 64));
                    if *word & bit == 0 {
                        *word |= bit;
                        scores[s] = p;
                    } else {
                        scores[s] += p;
                    }
                }
            }
            let mut best: BinaryHeap<Found> = BinaryHeap::with_capacity(limit);
            let mut threshold = f64::NEG_INFINITY;
            for (at, word) in touched.iter().enumerate() {
                let mut bits = *word;
                while bits != 0 {
                    let slot = at * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let score = scores[slot];
                    // A lower score cannot enter a full heap; an equal one might, on its id.
                    if score < threshold {
                        continue;
                    }
                    let doc = &self.docs[slot];
                    if !doc.live || !allowed(doc) {
                        continue;
                    }
                    if let Some(worst) = offer(&mut best, limit, Found { score, id: doc.id }) {
                        threshold = worst;
                    }
                }
            }
            best.into_sorted_vec()
                .into_iter()
                .map(|f| (f.id, f.score))
                .collect()
        })
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
    fn push(&mut self, slot: u32, counts: &[u32; COLUMNS], tokens: u32) {
        let mut gap = if self.len == 0 {
            slot
        } else {
            slot - self.last
        };
        if (self.len as usize).is_multiple_of(BLOCK) {
            self.blocks.push(Block {
                offset: self.bytes.len() as u32,
                last: slot,
                most: [0; COLUMNS],
                shortest: tokens,
            });
        }
        self.last = slot;
        self.len += 1;
        while gap >= 0x80 {
            self.bytes.push((gap as u8 & 0x7f) | 0x80);
            gap >>= 7;
        }
        self.bytes.push(gap as u8);
        // Counts above 255 in one column of one item are saturated: such a term's score is
        // already at its ceiling long before that.
        let saturated = counts.map(|c| u8::try_from(c).unwrap_or(u8::MAX));
        if saturated.iter().all(|c| *c <= 1) {
            let mask = saturated
                .iter()
                .enumerate()
                .fold(0u8, |m, (i, c)| m | (c << i));
            self.bytes.push(mask);
        } else {
            self.bytes.push(0x80);
            self.bytes.extend(saturated);
        }
        if let Some(block) = self.blocks.last_mut() {
            block.last = slot;
            block.shortest = block.shortest.min(tokens);
            for (most, c) in block.most.iter_mut().zip(saturated) {
                *most = (*most).max(c);
            }
        }
    }

    #[cfg(test)]
    fn decode(&self, out: &mut Vec<(u32, [u8; COLUMNS])>) {
        let mut cursor = Cursor::new(self);
        loop {
            cursor.next();
            if cursor.slot == END {
                return;
            }
            out.push((cursor.slot, cursor.counts));
        }
    }
}

/// How a posting's counts are written (see [`Postings`]).
#[derive(Clone, Copy)]
enum Counts<'a> {
    /// Every column holds the term at most once; bit `c` says whether column `c` does.
    Mask(u8),
    /// One count a column.
    Each(&'a [u8; COLUMNS]),
}

/// The posting at `at` of a list's bytes: its gap from the one before and its counts. `at`
/// moves past it.
#[inline(always)]
fn read_posting<'a>(bytes: &'a [u8], at: &mut usize) -> (u32, Counts<'a>) {
    let (mut gap, mut shift) = (0u32, 0);
    loop {
        let b = bytes[*at];
        *at += 1;
        gap |= u32::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let flag = bytes[*at];
    *at += 1;
    if flag & 0x80 == 0 {
        (gap, Counts::Mask(flag))
    } else {
        let each = bytes[*at..]
            .first_chunk::<COLUMNS>()
            .expect("a posting's flag is followed by its counts");
        *at += COLUMNS;
        (gap, Counts::Each(each))
    }
}

/// A place in a postings list, read forward.
struct Cursor<'a> {
    list: &'a Postings,
    /// Where the next posting starts, and how many postings were read to get there.
    at: usize,
    read: usize,
    /// The current posting: its slot ([`END`] past the last; meaningless before the first) and
    /// counts.
    slot: u32,
    counts: [u8; COLUMNS],
    /// The block a seek looks from, never behind the current posting's.
    block: usize,
}

impl<'a> Cursor<'a> {
    fn new(list: &'a Postings) -> Cursor<'a> {
        Cursor {
            list,
            at: 0,
            read: 0,
            slot: 0,
            counts: [0; COLUMNS],
            block: 0,
        }
    }

    /// Move to the next posting.
    fn next(&mut self) {
        let bytes = &self.list.bytes;
        if self.at >= bytes.len() {
            self.slot = END;
            return;
        }
        let (gap, counts) = read_posting(bytes, &mut self.at);
        self.slot += gap;
        match counts {
            Counts::Mask(mask) => {
                for (i, c) in self.counts.iter_mut().enumerate() {
                    *c = (mask >> i) & 1;
                }
            }
            Counts::Each(each) => self.counts = *each,
        }
        self.read += 1;
    }

    /// The block of the current posting; `None` past the last.
    fn block(&self) -> Option<usize> {
        (self.slot != END && self.read > 0).then(|| (self.read - 1) / BLOCK)
    }

    /// Move to the first posting at or after `target`, skipping whole blocks below it.
    fn seek(&mut self, target: u32) {
        if self.slot == END || (self.read > 0 && self.slot >= target) {
            return;
        }
        let blocks = &self.list.blocks;
        if self.read > 0 {
            self.block = self.block.max((self.read - 1) / BLOCK);
        }
        while self.block < blocks.len() && blocks[self.block].last < target {
            self.block += 1;
        }
        let Some(block) = blocks.get(self.block) else {
            self.slot = END;
            return;
        };
        // Unless the cursor is in this block already, or just before it, jump to its start:
        // the previous block's last slot is what its first gap counts from.
        let first = self.block * BLOCK;
        if self.read < first {
            self.at = block.offset as usize;
            self.slot = blocks[self.block - 1].last;
            self.read = first;
        }
        // The block's last slot is not below the target, so this stops within it.
        loop {
            self.next();
            if self.slot >= target {
                return;
            }
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
fn stem(word: &str) -> Rc<str> {
    thread_local! {
        static STEMMER: nltk_porter::PorterStemmer =
            nltk_porter::PorterStemmer::new(nltk_porter::Mode::Martin);
    }
    thread_local! {
        // Stemming allocates at every step, and a store's vocabulary is small next to its
        // token count, so loading a large store mostly hits this cache; a hit is shared, not
        // copied.
        static STEMS: std::cell::RefCell<HashMap<Box<str>, Rc<str>>> = Default::default();
    }
    const CACHED: usize = 200_000;
    if let Some(stem) = STEMS.with(|c| c.borrow().get(word).cloned()) {
        return stem;
    }
    let stem: Rc<str> = stem_uncached(word, &STEMMER).into();
    STEMS.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CACHED {
            cache.clear();
        }
        cache.insert(word.into(), Rc::clone(&stem));
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
        list.push(3, &[1, 0, 1, 0, 0], 9);
        list.push(300, &[2, 0, 0, 0, 700], 800);
        list.push(70_000, &[0, 0, 0, 0, 1], 4);
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
        assert_eq!(list.blocks.len(), 1);
        assert_eq!(list.blocks[0].most, [2, 0, 1, 0, 255]);
        assert_eq!(list.blocks[0].shortest, 4);
    }

    #[test]
    fn a_cursor_seeks_across_blocks() {
        let mut list = Postings::default();
        let slots: Vec<u32> = (0..1_000).map(|i| i * 8 + i % 7).collect();
        for (i, slot) in slots.iter().enumerate() {
            list.push(*slot, &[(i % 3) as u32, 0, 0, 0, 1], 10 + i as u32 % 5);
        }
        assert_eq!(list.blocks.len(), 1_000usize.div_ceil(BLOCK));
        for start in [0, 1, 127, 128, 129, 500, 999] {
            for target in [slots[start], slots[start] + 1] {
                let mut cursor = Cursor::new(&list);
                if start % 2 == 1 {
                    // Part of the way first, so seeks from inside a block are covered too.
                    cursor.seek(slots[start / 2]);
                }
                cursor.seek(target);
                let expected = slots.iter().copied().find(|s| *s >= target).unwrap_or(END);
                assert_eq!(cursor.slot, expected, "seek to {target}");
                if expected != END {
                    let i = slots.iter().position(|s| *s == expected).unwrap();
                    assert_eq!(cursor.counts, [(i % 3) as u8, 0, 0, 0, 1]);
                }
            }
        }
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
    fn newest_is_the_latest_item_given_once_loaded() {
        let lexical = Lexical::new();
        lexical.add(&[doc(7, "/a", "one"), doc(3, "/b", "two")]);
        assert_eq!(lexical.newest(), None, "not before it is loaded");
        lexical.set_ready();
        assert_eq!(lexical.newest(), Some(7));
        lexical.add(&[doc(5, "/a", "three")]);
        assert_eq!(lexical.newest(), Some(7), "an older item leaves it");
        lexical.add(&[doc(9, "/a", "four")]);
        assert_eq!(lexical.newest(), Some(9));
    }

    #[test]
    fn rare_holders_are_the_items_of_the_words_few_items_hold() {
        let lexical = Lexical::new();
        lexical.add(&[
            doc(1, "/a", "the websocket reconnect test is flaky"),
            doc(2, "/a", "websocket handshake"),
            doc(3, "/b", "websocket again"),
            doc(4, "/b", "the kestrel folder"),
        ]);
        let words = [
            "websocket".to_owned(),
            "kestrel".to_owned(),
            "nowhere".to_owned(),
        ];
        assert!(
            lexical.rare_holders(&words, 2).is_empty(),
            "not before it is loaded"
        );
        lexical.set_ready();
        let ids = |max: u64| {
            let mut ids: Vec<i64> = lexical.rare_holders(&words, max).into_iter().collect();
            ids.sort_unstable();
            ids
        };
        // Three items hold "websocket": rare only when three are few enough.
        assert_eq!(ids(2), vec![4]);
        assert_eq!(ids(3), vec![1, 2, 3, 4]);
        assert!(ids(0).is_empty(), "0 turns it off");
        lexical.remove(&[4]);
        assert!(ids(2).is_empty(), "a removed item is no holder");
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

    /// The ranking as it was before bounds: every match scored into a slot-sized array, all of
    /// them sorted; what the bounded walk must reproduce exactly.
    fn exhaustive(
        index: &Index,
        phrases: &[String],
        weights: &[f64; COLUMNS],
        filter: &VectorFilter,
        limit: usize,
    ) -> Vec<(i64, f64)> {
        if index.live_docs == 0 || phrases.is_empty() || limit == 0 {
            return Vec::new();
        }
        let Some(allowed) = index.allowed(filter) else {
            return Vec::new();
        };
        let n = (index.rows as i64 + index.offset_rows).max(1) as f64;
        let average = ((index.tokens as i64 + index.offset_tokens).max(1) as f64) / n;
        let mut scores = vec![f64::NAN; index.docs.len()];
        for phrase in phrases {
            let Some(&term) = index.terms.get(phrase.as_str()) else {
                continue;
            };
            let mut postings = Vec::new();
            index.lists[term as usize].decode(&mut postings);
            let hits = postings
                .iter()
                .filter(|(slot, _)| index.docs[*slot as usize].live)
                .count() as f64;
            let mut idf = ((n - hits + 0.5) / (hits + 0.5)).ln();
            if idf <= 0.0 {
                idf = 1e-6;
            }
            for (slot, counts) in &postings {
                let doc = &index.docs[*slot as usize];
                if !doc.live || !allowed(doc) {
                    continue;
                }
                let freq: f64 = counts
                    .iter()
                    .zip(weights)
                    .map(|(c, w)| f64::from(*c) * w)
                    .sum();
                let length = f64::from(index.lengths[*slot as usize]);
                let part =
                    idf * (freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * length / average));
                let score = &mut scores[*slot as usize];
                *score = if score.is_nan() { part } else { *score + part };
            }
        }
        let mut found: Vec<(f64, i64)> = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_nan())
            .map(|(slot, s)| (*s, index.docs[slot].id))
            .collect();
        found.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        found.truncate(limit);
        found.into_iter().map(|(s, id)| (id, s)).collect()
    }

    /// A small deterministic generator, so a failure can be replayed.
    struct Random(u64);

    impl Random {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % n as u64) as usize
        }

        /// Skewed towards small values, as word use is.
        fn skewed(&mut self, n: usize) -> usize {
            self.below(n).min(self.below(n))
        }
    }

    const VOCABULARY: usize = 80;

    fn word(i: usize) -> String {
        format!("word{i}")
    }

    fn random_text(random: &mut Random) -> String {
        let n = random.below(14);
        let mut words: Vec<String> = (0..n).map(|_| word(random.skewed(VOCABULARY))).collect();
        if random.below(40) == 0 {
            // Now and then a word many times over, past what a count byte holds.
            let w = word(random.below(VOCABULARY));
            words.extend(std::iter::repeat_n(w, 1 + random.below(300)));
        }
        words.join(" ")
    }

    #[test]
    fn both_readings_return_exactly_what_scoring_every_match_would() {
        let mut random = Random(7);
        let lexical = Lexical::new();
        // Ids added out of order, so slot order is not id order; every tenth item a copy of an
        // earlier one, so equal scores are broken by id.
        let mut ids: Vec<i64> = (1..=4_000).collect();
        for i in (1..ids.len()).rev() {
            ids.swap(i, random.below(i + 1));
        }
        let mut docs: Vec<LexDoc> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let columns = if i % 10 == 9 {
                docs[random.below(docs.len())].columns.clone()
            } else {
                std::array::from_fn(|c| {
                    if c > 0 && random.below(3) == 0 {
                        String::new()
                    } else {
                        random_text(&mut random)
                    }
                })
            };
            docs.push(LexDoc {
                id: *id,
                project: format!("/p{}", random.below(3)),
                kind: ["prompt", "tool", "error"][random.below(3)].to_owned(),
                session_id: format!("s{}", random.below(12)),
                occurred_at: random.below(10_000) as i64,
                columns,
            });
        }
        let (mut held, mut total) = (0, 0);
        for batch in docs.chunks(333) {
            let (h, t) = lexical.load(batch);
            (held, total) = (held + h, total + t);
        }
        // FTS5 counting rows deleted before the load, as the loader finds it.
        lexical.finish_load(Some((held + 40, total + 900)), held, total);
        let weights = [
            [1.0; COLUMNS],
            [10.0, 5.0, 0.5, 0.25, 0.0],
            [0.0; COLUMNS],
            [2.0, -1.0, 1.0, 0.5, 1.0],
        ];
        let filters = [
            VectorFilter::default(),
            VectorFilter {
                project: Some("/p1".into()),
                ..Default::default()
            },
            VectorFilter {
                project: Some("/p2".into()),
                kinds: vec!["tool".into(), "error".into()],
                since_ms: Some(2_500),
                ..Default::default()
            },
            VectorFilter {
                sessions: vec!["s3".into(), "s4".into()],
                until_ms: Some(8_000),
                ..Default::default()
            },
            VectorFilter {
                exclude_sessions: vec!["s0".into(), "s1".into(), "s2".into()],
                ..Default::default()
            },
            VectorFilter {
                project: Some("/nowhere".into()),
                ..Default::default()
            },
        ];
        let mut compared = 0;
        for round in 0..3 {
            if round == 1 {
                // A few removed: document frequencies are recounted without them.
                let gone: Vec<i64> = (0..60).map(|_| 1 + random.below(4_000) as i64).collect();
                lexical.remove(&gone);
            }
            if round == 2 {
                // Most removed: more removed items than some terms have postings.
                let gone: Vec<i64> = (1..=4_000).filter(|id| id % 4 != 0).collect();
                lexical.remove(&gone);
            }
            let index = lexical.index.read().unwrap();
            for q in 0..150 {
                let mut words: Vec<String> = (0..1 + random.below(7))
                    .map(|_| {
                        if random.below(2) == 0 {
                            word(random.skewed(VOCABULARY))
                        } else {
                            word(VOCABULARY - 1 - random.skewed(VOCABULARY))
                        }
                    })
                    .collect();
                if q % 5 == 0 {
                    words.push("absent".to_owned());
                    words.push(words[0].clone());
                }
                let phrases: Vec<String> = words.iter().flat_map(|w| tokens(w)).collect();
                let weights = &weights[q % weights.len()];
                let filter = &filters[(q / weights.len()) % filters.len()];
                for limit in [1, 5, 100, 10_000] {
                    let bits = |found: Vec<(i64, f64)>| -> Vec<(i64, u64)> {
                        found.into_iter().map(|(id, s)| (id, s.to_bits())).collect()
                    };
                    let expected = bits(exhaustive(&index, &phrases, weights, filter, limit));
                    for reading in [Reading::Walk, Reading::Whole] {
                        let got =
                            bits(index.search(&phrases, weights, filter, limit, Some(reading)));
                        assert_eq!(
                            got, expected,
                            "{reading:?}: {words:?} {weights:?} {filter:?} limit {limit}"
                        );
                    }
                    compared += usize::from(!expected.is_empty());
                }
            }
        }
        assert!(
            compared > 1_000,
            "only {compared} comparisons found anything"
        );
    }
}

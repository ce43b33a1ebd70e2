//! An in-memory copy of one vector space, quantised to eight bits and scanned exhaustively.
//!
//! sqlite-vec's `vec0` reads full-precision vectors chunk by chunk through SQLite pages, with no
//! SIMD in the build the crate ships: at 100k items a search took about 200 ms. Eight-bit codes
//! are a quarter of the size, stay in memory (about 400 bytes an item for MiniLM), and a plain
//! loop the compiler vectorises scans 100k of them in a few milliseconds. An exhaustive scan
//! keeps results exact up to the quantisation error (well under 0.01 in cosine), with no graph
//! to build, tune or persist: `vec0` stays the durable copy this one is loaded from.
//!
//! Past about a hundred thousand items the eight-bit scan is bound by memory (384 MB a query at
//! a million), so large copies also hold one bit per dimension: where the vector lies against
//! the copy's centre. A search first ranks every item by the Hamming distance of those bits
//! (48 bytes an item), then re-scores only the nearest fraction by the eight-bit codes. The
//! fraction is generous (one item in 64, and never fewer than 32 for each result asked for),
//! so the bits only decide which items are worth scoring, not the order.

use super::{Point, VectorFilter};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// Items below which one thread scans alone: splitting costs more than it saves.
const PARALLEL_FROM: usize = 16_384;

/// Items from which a search ranks by the one-bit codes first and re-scores the best of them.
/// Below it the exact eight-bit scan takes a few milliseconds, so nothing is gained.
const PREFILTER_FROM: usize = 65_536;

/// Vectors held when the centre the bits are taken against is fixed: enough to estimate each
/// dimension's mean, early enough that re-deriving the bits already held is cheap.
const CENTRE_FROM: usize = 4_096;

/// Candidates re-scored: at least this many for each result asked for...
const RESCORE_PER_RESULT: usize = 32;
/// ...and at least this fraction (one in so many) of the items that pass the filter.
const RESCORE_SHARE: usize = 64;

/// One vector space in memory: a struct of arrays indexed by slot.
#[derive(Debug, Default)]
pub struct Flat {
    dim: usize,
    ids: Vec<i64>,
    /// `dim` codes per slot.
    codes: Vec<i8>,
    /// What one code step is worth in each vector.
    scales: Vec<f32>,
    projects: Vec<u32>,
    kinds: Vec<u32>,
    sessions: Vec<u32>,
    times: Vec<i64>,
    slots: HashMap<i64, usize>,
    /// Project, kind and session names as small numbers, so filters compare integers.
    names: HashMap<String, u32>,
    /// `words` 64-bit words per slot: bit `i` is set when dimension `i` lies above the centre's.
    bits: Vec<u64>,
    words: usize,
    /// Each dimension's mean over the first [`CENTRE_FROM`] vectors; empty until then, when
    /// the bits are taken against zero. Signs against the centre split the items evenly in
    /// every dimension, which raw signs do not (sentence embeddings share a common direction).
    centre: Vec<f32>,
    /// Items from which searches use the bits; [`PREFILTER_FROM`] unless a test lowers it.
    prefilter_from: usize,
}

/// A filter with its names turned into the numbers the arrays hold.
struct Resolved {
    project: Option<u32>,
    kinds: Option<Vec<u32>>,
    sessions: Option<Vec<u32>>,
    exclude: Vec<u32>,
    since: i64,
    until: i64,
}

/// A candidate in the top-k heap, ordered by score (then slot, for a total order).
#[derive(Clone, Copy, PartialEq)]
struct Scored(f32, usize);

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    // Reversed, so the standard max-heap keeps the weakest of the best k on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

impl Flat {
    pub fn new(dim: usize) -> Flat {
        Flat {
            dim,
            words: dim.div_ceil(64),
            prefilter_from: PREFILTER_FROM,
            ..Flat::default()
        }
    }

    /// Use the one-bit ranking from `items` held on, rather than from [`PREFILTER_FROM`]: for
    /// measuring what it costs in recall against the exact scan on smaller copies.
    pub fn prefilter_from(mut self, items: usize) -> Flat {
        self.prefilter_from = items;
        self
    }

    /// The bits of `vector` against the centre.
    fn binarise(&self, vector: &[f32]) -> Vec<u64> {
        let mut bits = vec![0u64; self.words];
        for (i, x) in vector.iter().enumerate() {
            let centre = self.centre.get(i).copied().unwrap_or(0.0);
            if *x > centre {
                bits[i / 64] |= 1 << (i % 64);
            }
        }
        bits
    }

    /// The vector a slot's codes stand for.
    fn decoded(&self, slot: usize) -> Vec<f32> {
        let scale = self.scales[slot];
        self.codes[slot * self.dim..(slot + 1) * self.dim]
            .iter()
            .map(|c| f32::from(*c) * scale)
            .collect()
    }

    /// Fix the centre as the mean of the vectors held, and take every slot's bits against it.
    fn fix_centre(&mut self) {
        let mut sum = vec![0f64; self.dim];
        for slot in 0..self.len() {
            for (s, x) in sum.iter_mut().zip(self.decoded(slot)) {
                *s += f64::from(x);
            }
        }
        let n = self.len().max(1) as f64;
        self.centre = sum.into_iter().map(|s| (s / n) as f32).collect();
        for slot in 0..self.len() {
            let bits = self.binarise(&self.decoded(slot));
            self.bits[slot * self.words..(slot + 1) * self.words].copy_from_slice(&bits);
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids held, in no particular order.
    pub fn ids(&self) -> &[i64] {
        &self.ids
    }

    fn name(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.names.get(name) {
            return n;
        }
        let n = self.names.len() as u32;
        self.names.insert(name.to_owned(), n);
        n
    }

    /// Insert or replace one vector; a vector of the wrong length is ignored, as `vec0` would
    /// have refused it.
    pub fn upsert(&mut self, point: &Point) {
        if point.vector.len() != self.dim {
            return;
        }
        let (codes, scale) = quantise(&point.vector);
        let bits = self.binarise(&point.vector);
        let project = self.name(&point.project);
        let kind = self.name(&point.kind);
        let session = self.name(&point.session_id);
        if let Some(&slot) = self.slots.get(&point.id) {
            self.codes[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(&codes);
            self.bits[slot * self.words..(slot + 1) * self.words].copy_from_slice(&bits);
            self.scales[slot] = scale;
            self.projects[slot] = project;
            self.kinds[slot] = kind;
            self.sessions[slot] = session;
            self.times[slot] = point.occurred_at;
            return;
        }
        self.slots.insert(point.id, self.ids.len());
        self.ids.push(point.id);
        self.codes.extend_from_slice(&codes);
        self.bits.extend_from_slice(&bits);
        self.scales.push(scale);
        self.projects.push(project);
        self.kinds.push(kind);
        self.sessions.push(session);
        self.times.push(point.occurred_at);
        if self.centre.is_empty() && self.len() >= CENTRE_FROM.min(self.prefilter_from) {
            self.fix_centre();
        }
    }

    /// Remove one vector: the last slot moves into its place.
    pub fn delete(&mut self, id: i64) {
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        let last = self.ids.len() - 1;
        if slot != last {
            let moved = self.ids[last];
            self.ids[slot] = moved;
            self.slots.insert(moved, slot);
            self.codes
                .copy_within(last * self.dim..(last + 1) * self.dim, slot * self.dim);
            self.bits.copy_within(
                last * self.words..(last + 1) * self.words,
                slot * self.words,
            );
            self.scales[slot] = self.scales[last];
            self.projects[slot] = self.projects[last];
            self.kinds[slot] = self.kinds[last];
            self.sessions[slot] = self.sessions[last];
            self.times[slot] = self.times[last];
        }
        self.ids.truncate(last);
        self.codes.truncate(last * self.dim);
        self.bits.truncate(last * self.words);
        self.scales.truncate(last);
        self.projects.truncate(last);
        self.kinds.truncate(last);
        self.sessions.truncate(last);
        self.times.truncate(last);
    }

    /// Turn names into numbers; `None` when the filter cannot match anything here.
    fn resolve(&self, filter: &VectorFilter) -> Option<Resolved> {
        let known = |names: &[String]| -> Vec<u32> {
            names
                .iter()
                .filter_map(|n| self.names.get(n).copied())
                .collect()
        };
        let project = match &filter.project {
            Some(p) => Some(*self.names.get(p)?),
            None => None,
        };
        let kinds = match filter.kinds.is_empty() {
            true => None,
            false => Some(known(&filter.kinds)).filter(|k| !k.is_empty()),
        };
        let sessions = match filter.sessions.is_empty() {
            true => None,
            false => Some(known(&filter.sessions)).filter(|s| !s.is_empty()),
        };
        if kinds.is_none() && !filter.kinds.is_empty()
            || sessions.is_none() && !filter.sessions.is_empty()
        {
            return None;
        }
        Some(Resolved {
            project,
            kinds,
            sessions,
            exclude: known(&filter.exclude_sessions),
            since: filter.since_ms.unwrap_or(i64::MIN),
            until: filter.until_ms.unwrap_or(i64::MAX),
        })
    }

    fn passes(&self, slot: usize, filter: &Resolved) -> bool {
        filter.project.is_none_or(|p| self.projects[slot] == p)
            && filter
                .kinds
                .as_ref()
                .is_none_or(|k| k.contains(&self.kinds[slot]))
            && filter
                .sessions
                .as_ref()
                .is_none_or(|s| s.contains(&self.sessions[slot]))
            && !filter.exclude.contains(&self.sessions[slot])
            && self.times[slot] >= filter.since
            && self.times[slot] < filter.until
    }

    /// The `k` vectors most similar to `query` that pass `filter`, as (id, cosine), best first.
    pub fn knn(&self, query: &[f32], k: usize, filter: &VectorFilter) -> Vec<(i64, f32)> {
        let prefilter = self.len() >= self.prefilter_from && !self.centre.is_empty();
        self.search(query, k, filter, prefilter)
    }

    /// The same as [`Flat::knn`] by scoring every item: the answer the one-bit ranking is
    /// measured against.
    pub fn knn_exact(&self, query: &[f32], k: usize, filter: &VectorFilter) -> Vec<(i64, f32)> {
        self.search(query, k, filter, false)
    }

    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
        prefilter: bool,
    ) -> Vec<(i64, f32)> {
        if k == 0 || query.len() != self.dim || self.is_empty() {
            return Vec::new();
        }
        let Some(filter) = self.resolve(filter) else {
            return Vec::new();
        };
        let (query_codes, query_scale) = quantise(query);
        // The best `k` of the slots `keep` lets through, by their eight-bit scores.
        let rescore = |range: std::ops::Range<usize>, keep: &dyn Fn(usize) -> bool| {
            let mut heap = BinaryHeap::with_capacity(k + 1);
            for slot in range {
                if !keep(slot) {
                    continue;
                }
                let codes = &self.codes[slot * self.dim..(slot + 1) * self.dim];
                let score = dot_i8(&query_codes, codes) as f32 * self.scales[slot];
                if heap.len() < k {
                    heap.push(Scored(score, slot));
                } else if heap.peek().is_some_and(|weakest| score > weakest.0) {
                    heap.pop();
                    heap.push(Scored(score, slot));
                }
            }
            heap.into_vec()
        };
        let mut best: Vec<Scored> = if prefilter {
            // First pass: each slot's Hamming distance (or `u16::MAX` when the filter turns it
            // away) and how many slots lie at each distance.
            let query_bits = self.binarise(query);
            let parts = self.in_parts(|_, range| {
                let mut histogram = vec![0usize; self.dim + 1];
                let distances: Vec<u16> = range
                    .map(|slot| {
                        if !self.passes(slot, &filter) {
                            return u16::MAX;
                        }
                        let bits = &self.bits[slot * self.words..(slot + 1) * self.words];
                        let d = hamming(&query_bits, bits);
                        histogram[d as usize] += 1;
                        d
                    })
                    .collect();
                (distances, histogram)
            });
            let passing: usize = parts.iter().flat_map(|(_, h)| h).sum();
            let wanted = (k * RESCORE_PER_RESULT).max(passing / RESCORE_SHARE);
            // The smallest distance within which `wanted` slots lie: every slot up to it is
            // re-scored (ties included, so the choice does not depend on slot order).
            let mut within = 0;
            let mut cutoff = self.dim as u16;
            for d in 0..=self.dim {
                within += parts.iter().map(|(_, h)| h[d]).sum::<usize>();
                if within >= wanted {
                    cutoff = d as u16;
                    break;
                }
            }
            // Second pass, over the same parts: the eight-bit scores of the slots within it.
            self.in_parts(|part, range| {
                let (distances, start) = (&parts[part].0, range.start);
                rescore(range, &|slot| distances[slot - start] <= cutoff)
            })
            .into_iter()
            .flatten()
            .collect()
        } else {
            self.in_parts(|_, range| rescore(range, &|slot| self.passes(slot, &filter)))
                .into_iter()
                .flatten()
                .collect()
        };
        // `Scored` orders best first when sorted ascending.
        best.sort_unstable();
        best.truncate(k);
        best.into_iter()
            .map(|Scored(score, slot)| (self.ids[slot], (score * query_scale).clamp(-1.0, 1.0)))
            .collect()
    }

    /// How many threads a scan uses: asking the system reads cgroup files on Linux, so once
    /// per process, not per search.
    fn threads(&self) -> usize {
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let threads = *THREADS
            .get_or_init(|| std::thread::available_parallelism().map_or(1, |t| t.get().min(4)));
        if self.len() < PARALLEL_FROM {
            1
        } else {
            threads
        }
    }

    /// `work` over the slots in consecutive parts, one thread each, given each part's number
    /// and slots; the results in part order. The parts are the same for every call while the
    /// copy is unchanged, so a second pass can read what the first left for its part.
    fn in_parts<T: Send>(
        &self,
        work: impl Fn(usize, std::ops::Range<usize>) -> T + Sync,
    ) -> Vec<T> {
        let n = self.len();
        if self.threads() == 1 {
            return vec![work(0, 0..n)];
        }
        let step = n.div_ceil(self.threads()).max(1);
        let work = &work;
        std::thread::scope(|scope| {
            let parts: Vec<_> = (0..n)
                .step_by(step)
                .enumerate()
                .map(|(part, start)| scope.spawn(move || work(part, start..(start + step).min(n))))
                .collect();
            parts
                .into_iter()
                .map(|part| part.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }

    /// Cosine similarity of `query` with each of `ids` held here, as (id, cosine); ids not
    /// held are left out.
    pub fn cosines(&self, query: &[f32], ids: &[i64]) -> Vec<(i64, f32)> {
        if query.len() != self.dim {
            return Vec::new();
        }
        let (query_codes, query_scale) = quantise(query);
        ids.iter()
            .filter_map(|id| {
                let slot = *self.slots.get(id)?;
                let codes = &self.codes[slot * self.dim..(slot + 1) * self.dim];
                let score = dot_i8(&query_codes, codes) as f32 * self.scales[slot] * query_scale;
                Some((*id, score.clamp(-1.0, 1.0)))
            })
            .collect()
    }
}

/// Bits that differ between two codes of the same length.
fn hamming(a: &[u64], b: &[u64]) -> u16 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x ^ y).count_ones())
        .sum::<u32>() as u16
}

/// Symmetric eight-bit quantisation: codes in -127..=127 and what one step is worth.
fn quantise(vector: &[f32]) -> (Vec<i8>, f32) {
    let max = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = max / 127.0;
    let codes = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (codes, scale)
}

/// Integer dot product. With AVX2 (checked at run time, so one binary runs on any x86-64) the
/// same loop compiles to 256-bit instructions and scans about twice as fast.
// The one unsafe call in the workspace: a function compiled for AVX2 may only be called once
// the CPU is known to have it, which the line before the call checks.
#[allow(unsafe_code)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: `dot_i8_avx2` needs nothing but AVX2, which this CPU was just found to have.
            return unsafe { dot_i8_avx2(a, b) };
        }
    }
    dot_i8_blocks(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_blocks(a, b)
}

/// The dot product in fixed-width blocks, so the compiler vectorises it for whatever
/// instructions the caller was compiled with.
#[inline(always)]
fn dot_i8_blocks(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 32;
    let mut lanes = [0i32; LANES];
    let blocks = a.len() / LANES * LANES;
    for (x, y) in a[..blocks]
        .chunks_exact(LANES)
        .zip(b[..blocks].chunks_exact(LANES))
    {
        for i in 0..LANES {
            // Codes are within -127..=127, so each product fits in sixteen bits.
            lanes[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    let tail: i32 = a[blocks..]
        .iter()
        .zip(&b[blocks..])
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    lanes.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models;

    /// Deterministic pseudo-random unit vectors.
    fn vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                let v = (0..dim)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                    })
                    .collect();
                models::normalise(v)
            })
            .collect()
    }

    fn point(id: i64, vector: Vec<f32>, project: &str) -> Point {
        Point {
            id,
            vector,
            project: project.into(),
            kind: if id % 2 == 0 { "prompt" } else { "tool" }.into(),
            session_id: format!("s{}", id % 7),
            occurred_at: id * 10,
        }
    }

    /// The exact answer, by full-precision cosine over every point passing `keep`.
    fn exact(
        points: &[Point],
        query: &[f32],
        k: usize,
        keep: impl Fn(&Point) -> bool,
    ) -> Vec<(i64, f32)> {
        let mut all: Vec<(i64, f32)> = points
            .iter()
            .filter(|p| keep(p))
            .map(|p| (p.id, models::dot(query, &p.vector)))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(k);
        all
    }

    #[test]
    fn cosines_of_held_ids_match_exact_and_others_are_left_out() {
        let dim = 384;
        let points: Vec<Point> = vectors(300, dim, 3)
            .into_iter()
            .enumerate()
            .map(|(i, v)| point(i as i64, v, "a"))
            .collect();
        let mut flat = Flat::new(dim);
        for p in &points {
            flat.upsert(p);
        }
        let query = vectors(1, dim, 42).remove(0);
        let got = flat.cosines(&query, &[5, 999, 17, 250]);
        let ids: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![5, 17, 250]);
        for (id, cosine) in got {
            let want = models::dot(&query, &points[id as usize].vector);
            assert!(
                (cosine - want).abs() < 0.01,
                "cosine {cosine} against exact {want}"
            );
        }
        // The AVX2 path and the portable one agree exactly on integer codes.
        let (a, _) = quantise(&query);
        let (b, _) = quantise(&points[7].vector);
        assert_eq!(dot_i8(&a, &b), dot_i8_blocks(&a, &b));
        let naive: i32 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        assert_eq!(dot_i8(&a, &b), naive);
    }

    #[test]
    fn scan_matches_exact_cosine_within_quantisation_error() {
        let dim = 384;
        // Enough points that the scan is split across threads.
        let points: Vec<Point> = vectors(PARALLEL_FROM + 500, dim, 1)
            .into_iter()
            .enumerate()
            .map(|(i, v)| point(i as i64, v, if i % 3 == 0 { "a" } else { "b" }))
            .collect();
        let mut flat = Flat::new(dim);
        for p in &points {
            flat.upsert(p);
        }
        assert_eq!(flat.len(), points.len());
        for query in vectors(5, dim, 99) {
            let got = flat.knn(&query, 50, &VectorFilter::default());
            let want = exact(&points, &query, 50, |_| true);
            assert_eq!(got.len(), 50);
            for ((_, g), (_, w)) in got.iter().zip(&want) {
                assert!((g - w).abs() < 0.01, "cosine {g} against exact {w}");
            }
            // Quantisation may swap near-ties, never lose the clear winners.
            let got_ids: Vec<i64> = got.iter().map(|h| h.0).collect();
            let overlap = want.iter().filter(|(id, _)| got_ids.contains(id)).count();
            assert!(overlap >= 45, "only {overlap} of the exact top 50 found");
            assert_eq!(got[0].0, want[0].0);
        }
    }

    /// Points around `clusters` centres, as sentence embeddings gather around topics, all
    /// sharing one common direction, as sentence embeddings do. The noise is as large as the
    /// spread of the centres, so neighbours are not trivially one cluster: exact recall of the
    /// one-bit ranking is about 0.985 here (0.97 without the centre, 0.73 on noise alone).
    fn clustered(n: usize, clusters: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let common = vectors(1, dim, seed + 1).remove(0);
        let centres = vectors(clusters, dim, seed + 2);
        let noise = vectors(n, dim, seed + 3);
        (0..n)
            .map(|i| {
                let centre = &centres[i % clusters];
                models::normalise(
                    (0..dim)
                        .map(|d| common[d] + centre[d] + 1.5 * noise[i][d])
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_one_bit_ranking_finds_what_the_exact_scan_finds() {
        let dim = 384;
        let points: Vec<Point> = clustered(20_000, 200, dim, 7)
            .into_iter()
            .enumerate()
            .map(|(i, v)| point(i as i64, v, if i % 5 == 0 { "a" } else { "b" }))
            .collect();
        let mut flat = Flat::new(dim).prefilter_from(2_000);
        for p in &points {
            flat.upsert(p);
        }
        assert!(
            !flat.centre.is_empty(),
            "the centre is fixed once enough vectors are held"
        );
        let queries = clustered(40, 200, dim, 7);
        let (mut found, mut asked) = (0, 0);
        for query in &queries {
            let got = flat.knn(query, 10, &VectorFilter::default());
            let want = flat.knn_exact(query, 10, &VectorFilter::default());
            assert_eq!(got.len(), 10);
            let got_ids: Vec<i64> = got.iter().map(|h| h.0).collect();
            found += want.iter().filter(|(id, _)| got_ids.contains(id)).count();
            asked += want.len();
            // Whatever is returned is scored exactly as the exact scan scores it.
            for (id, cosine) in &got {
                let exact = flat.cosines(query, &[*id])[0].1;
                assert!((cosine - exact).abs() < 1e-6);
            }
        }
        let recall = found as f64 / asked as f64;
        assert!(
            recall >= 0.97,
            "recall@10 against the exact scan {recall:.3}"
        );
        // Filters apply in the first pass: every answer keeps to them, and there are enough.
        let filter = VectorFilter {
            project: Some("a".into()),
            ..VectorFilter::default()
        };
        for query in queries.iter().take(5) {
            let got = flat.knn(query, 20, &filter);
            assert!(got.iter().all(|(id, _)| id % 5 == 0));
            assert_eq!(got.len(), 20);
        }
        // A filter that lets fewer items through than would be re-scored is answered exactly.
        let narrow = VectorFilter {
            sessions: vec!["s3".into()],
            since_ms: Some(190_000),
            ..VectorFilter::default()
        };
        for query in queries.iter().take(5) {
            assert_eq!(
                flat.knn(query, 10, &narrow),
                flat.knn_exact(query, 10, &narrow)
            );
        }
        // Deleting and replacing after the centre is fixed keeps bits and codes together.
        for id in 0..500 {
            flat.delete(id);
        }
        flat.upsert(&point(19_999, points[7].vector.clone(), "b"));
        let best = flat.knn(&points[7].vector, 2, &VectorFilter::default());
        let ids: Vec<i64> = best.iter().map(|h| h.0).collect();
        assert!(ids.contains(&19_999), "{ids:?}");
        assert!(!ids.contains(&7));
    }

    #[test]
    fn filters_apply_inside_the_scan() {
        let dim = 16;
        let points: Vec<Point> = vectors(200, dim, 5)
            .into_iter()
            .enumerate()
            .map(|(i, v)| point(i as i64, v, if i % 4 == 0 { "a" } else { "b" }))
            .collect();
        let mut flat = Flat::new(dim);
        for p in &points {
            flat.upsert(p);
        }
        let query = &points[16].vector;
        let filter = VectorFilter {
            project: Some("a".into()),
            kinds: vec!["prompt".into()],
            exclude_sessions: vec!["s1".into()],
            since_ms: Some(100),
            until_ms: Some(1_500),
            ..VectorFilter::default()
        };
        let got: Vec<i64> = flat.knn(query, 500, &filter).iter().map(|h| h.0).collect();
        let keep = |p: &Point| {
            p.project == "a"
                && p.kind == "prompt"
                && p.session_id != "s1"
                && (100..1_500).contains(&p.occurred_at)
        };
        let mut want: Vec<i64> = points.iter().filter(|p| keep(p)).map(|p| p.id).collect();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        want.sort_unstable();
        assert_eq!(sorted, want);
        assert_eq!(got[0], 16, "the query's own vector comes first");
        // Names never seen match nothing, rather than everything.
        let unknown = VectorFilter {
            project: Some("nowhere".into()),
            ..VectorFilter::default()
        };
        assert!(flat.knn(query, 10, &unknown).is_empty());
        let unknown_kind = VectorFilter {
            kinds: vec!["pattern".into()],
            ..VectorFilter::default()
        };
        assert!(flat.knn(query, 10, &unknown_kind).is_empty());
    }

    #[test]
    fn upsert_replaces_and_delete_keeps_the_rest_findable() {
        let dim = 8;
        let vs = vectors(50, dim, 3);
        let mut flat = Flat::new(dim);
        for (i, v) in vs.iter().enumerate() {
            flat.upsert(&point(i as i64, v.clone(), "a"));
        }
        // Replacing id 0 with id 1's vector makes both equally close to it.
        flat.upsert(&point(0, vs[1].clone(), "a"));
        assert_eq!(flat.len(), 50);
        let top: Vec<i64> = flat
            .knn(&vs[1], 2, &VectorFilter::default())
            .iter()
            .map(|h| h.0)
            .collect();
        assert!(top.contains(&0) && top.contains(&1), "{top:?}");
        // Deleting moves the last slot; every remaining id must still be its own best match.
        for id in [0, 10, 49, 25] {
            flat.delete(id);
        }
        flat.delete(1_000);
        assert_eq!(flat.len(), 46);
        for (i, v) in vs.iter().enumerate().skip(2) {
            let best = flat.knn(v, 1, &VectorFilter::default());
            if [10, 25, 49].contains(&i) {
                assert_ne!(best[0].0, i as i64);
            } else {
                assert_eq!(best[0].0, i as i64);
            }
        }
        // A vector of the wrong length is refused.
        flat.upsert(&point(500, vec![1.0; 3], "a"));
        assert_eq!(flat.len(), 46);
    }
}

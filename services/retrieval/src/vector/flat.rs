//! An in-memory copy of one vector space, quantised to eight bits and scanned exhaustively.
//!
//! sqlite-vec's `vec0` reads full-precision vectors chunk by chunk through SQLite pages, with no
//! SIMD in the build the crate ships: at 100k items a search took about 200 ms. Eight-bit codes
//! are a quarter of the size, stay in memory (about 400 bytes an item for MiniLM), and a plain
//! loop the compiler vectorises scans 100k of them in a few milliseconds. An exhaustive scan
//! keeps results exact up to the quantisation error (well under 0.01 in cosine), with no graph
//! to build, tune or persist: `vec0` stays the durable copy this one is loaded from.

use super::{Point, VectorFilter};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// Items below which one thread scans alone: splitting costs more than it saves.
const PARALLEL_FROM: usize = 16_384;

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
            ..Flat::default()
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
        let project = self.name(&point.project);
        let kind = self.name(&point.kind);
        let session = self.name(&point.session_id);
        if let Some(&slot) = self.slots.get(&point.id) {
            self.codes[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(&codes);
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
        self.scales.push(scale);
        self.projects.push(project);
        self.kinds.push(kind);
        self.sessions.push(session);
        self.times.push(point.occurred_at);
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
            self.scales[slot] = self.scales[last];
            self.projects[slot] = self.projects[last];
            self.kinds[slot] = self.kinds[last];
            self.sessions[slot] = self.sessions[last];
            self.times[slot] = self.times[last];
        }
        self.ids.truncate(last);
        self.codes.truncate(last * self.dim);
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
        if k == 0 || query.len() != self.dim || self.is_empty() {
            return Vec::new();
        }
        let Some(filter) = self.resolve(filter) else {
            return Vec::new();
        };
        let (query_codes, query_scale) = quantise(query);
        let scan = |range: std::ops::Range<usize>| {
            let mut heap = BinaryHeap::with_capacity(k + 1);
            for slot in range {
                if !self.passes(slot, &filter) {
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
        let n = self.len();
        // Asking the system reads cgroup files on Linux: once per process, not per search.
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let threads = *THREADS
            .get_or_init(|| std::thread::available_parallelism().map_or(1, |t| t.get().min(4)));
        let mut best: Vec<Scored> = if n < PARALLEL_FROM || threads == 1 {
            scan(0..n)
        } else {
            let step = n.div_ceil(threads);
            std::thread::scope(|scope| {
                let parts: Vec<_> = (0..threads)
                    .map(|t| {
                        let range = t * step..((t + 1) * step).min(n);
                        scope.spawn(move || scan(range))
                    })
                    .collect();
                parts
                    .into_iter()
                    .flat_map(|part| part.join().unwrap_or_default())
                    .collect()
            })
        };
        // `Scored` orders best first when sorted ascending.
        best.sort_unstable();
        best.truncate(k);
        best.into_iter()
            .map(|Scored(score, slot)| (self.ids[slot], (score * query_scale).clamp(-1.0, 1.0)))
            .collect()
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

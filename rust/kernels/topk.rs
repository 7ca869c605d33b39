//! Exact top-k over row-major f32 rows, by the plain f32 scan ([`exact`],
//! [`exact_subset`]: the reference) or through the int8 copy ([`screened`]).
//! Each function takes one query or a batch (`queries.len() = m * dim`).
//!
//! The screen: every row gets an int8 score `a` and an interval `a ± slack`
//! that provably holds its f32 score (quant.rs). Per query it keeps the k best
//! lower bounds; their smallest, `t`, is a score that k live rows reach, so a
//! row whose upper bound is below `t` cannot be in the top k. The rows left
//! are rescored with the same f32 kernel as the scan and ranked the same way,
//! so the result is the scan's: same rows, same scores, same order (tested
//! against it on random and adversarial data). With more threads each keeps
//! its own bounds; the final `t` is the k-th best over all of them.
//!
//! Order is total and deterministic: a higher score first, and on equal scores
//! the lower row first. Rows whose score is NaN (only possible with a corrupt
//! file; inputs are validated) are never returned. `live(row)` is asked only of
//! rows that would enter the result, so masking costs nothing on the rows that
//! lose anyway.
use super::quant::{self, QuantQuery};
use super::simd::{self, Elem, Isa};

/// One result: a row and its score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub score: f32,
    pub row: u32,
}

/// `a` ranks before `b`.
#[inline]
pub fn better(a: Hit, b: Hit) -> bool {
    a.score > b.score || (a.score == b.score && a.row < b.row)
}

/// Search's order: the better first (higher score, then the lower row).
pub(crate) fn order(a: &Hit, b: &Hit) -> std::cmp::Ordering {
    b.score.total_cmp(&a.score).then(a.row.cmp(&b.row))
}

/// The best `k` hits seen so far: a binary heap whose root is the worst kept.
pub struct TopK {
    k: usize,
    heap: Vec<Hit>,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: Vec::with_capacity(k.min(1 << 16)),
        }
    }

    /// Would `h` enter?
    #[inline]
    pub fn admits(&self, h: Hit) -> bool {
        self.k > 0 && (self.heap.len() < self.k || better(h, self.heap[0]))
    }

    /// Offer `h`; call only when `admits(h)` is true.
    pub fn push(&mut self, h: Hit) {
        if self.heap.len() < self.k {
            self.heap.push(h);
            let mut i = self.heap.len() - 1;
            while i > 0 {
                let p = (i - 1) / 2;
                if better(self.heap[p], self.heap[i]) {
                    self.heap.swap(p, i);
                    i = p;
                } else {
                    break;
                }
            }
        } else {
            self.heap[0] = h;
            let n = self.heap.len();
            let mut i = 0;
            loop {
                let (l, r) = (2 * i + 1, 2 * i + 2);
                let mut w = i;
                if l < n && better(self.heap[w], self.heap[l]) {
                    w = l;
                }
                if r < n && better(self.heap[w], self.heap[r]) {
                    w = r;
                }
                if w == i {
                    break;
                }
                self.heap.swap(w, i);
                i = w;
            }
        }
    }

    #[inline]
    fn offer(&mut self, h: Hit, live: &(dyn Fn(u32) -> bool + Sync)) {
        if !h.score.is_nan() && self.admits(h) && live(h.row) {
            self.push(h);
        }
    }

    /// The worst kept score once `k` hits are kept: a hit scoring below it
    /// cannot enter.
    #[inline]
    fn floor(&self) -> Option<f32> {
        (self.k > 0 && self.heap.len() == self.k).then(|| self.heap[0].score)
    }

    /// Best first.
    pub fn into_sorted(mut self) -> Vec<Hit> {
        self.heap.sort_unstable_by(order);
        self.heap
    }
}

/// Merge per-thread results into the best `k`, best first.
pub fn merge(parts: Vec<Vec<Hit>>, k: usize) -> Vec<Hit> {
    let mut all: Vec<Hit> = parts.into_iter().flatten().collect();
    all.sort_unstable_by(order);
    all.truncate(k);
    all
}

/// Rows per scoring block: small enough for the scores to stay in L1.
const BLOCK: usize = 256;
/// Records per block of the one-query int8 screen (scores and half-widths:
/// 8 KiB). Its kernel prefetches up to 64 records ahead inside the block (the
/// prefetch stays inside the records it is given), so the last 64 of each
/// block are read unprefetched: 1 in 16 here, 1 in 4 with blocks of BLOCK
/// (BENCHMARKS.md, "The int8 screen on AVX2, second pass": 1.04-1.07x the
/// read floor's CPU against 1.09-1.11x).
const SCREEN_BLOCK: usize = 1024;
/// Below this many rows per thread, one thread is faster than spawning.
const MIN_ROWS_PER_THREAD: usize = 16_384;

/// Run `f(start, end)` on up to `threads` contiguous parts of `0..n`.
pub(crate) fn par_ranges<T: Send>(
    n: usize,
    threads: usize,
    min_per_thread: usize,
    f: impl Fn(usize, usize) -> T + Sync,
) -> Vec<T> {
    let t = threads.max(1).min(n.div_ceil(min_per_thread.max(1))).max(1);
    if t == 1 {
        return vec![f(0, n)];
    }
    let per = n.div_ceil(t);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..t)
            .map(|i| {
                let f = &f;
                let (a, b) = ((i * per).min(n), ((i + 1) * per).min(n));
                s.spawn(move || f(a, b))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("scan thread panicked"))
            .collect()
    })
}

/// Rows per batch block: 16 rows of 384 f32 (24 KiB) stay in L1 while every
/// query passes over them.
const BATCH_BLOCK: usize = 16;
/// Records per block of the int8 batch scan: 64 records of 416 bytes (26 KiB)
/// stay in L1 while the queries pass over them.
const QUANT_BLOCK: usize = 64;

/// Exact f32 top-k of each of `m` queries (`queries.len() == m * dim`) over
/// every row: the plain scan, the reference of every other path. With more
/// than one query the matrix is read once per batch (register tiles), not once
/// per query; the scores are bit-identical either way.
pub fn exact<E: Elem>(
    isa: Isa,
    rows: &[E],
    queries: &[f32],
    dim: usize,
    k: usize,
    live: &(dyn Fn(u32) -> bool + Sync),
    threads: usize,
) -> Vec<Vec<Hit>> {
    let n = rows.len() / dim;
    let m = queries.len() / dim;
    if m == 0 {
        return Vec::new();
    }
    let block = if m == 1 { BLOCK } else { BATCH_BLOCK };
    let parts = par_ranges(n, threads, (MIN_ROWS_PER_THREAD / m).max(block), |a, b| {
        let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(k)).collect();
        let mut buf = vec![0.0f32; block * m];
        let mut start = a;
        while start < b {
            let end = (start + block).min(b);
            let out = &mut buf[..(end - start) * m];
            let r = &rows[start * dim..end * dim];
            if m == 1 {
                simd::scores(isa, queries, r, out);
            } else {
                simd::scores_tile(isa, dim, r, queries, out);
            }
            for (i, scores) in out.chunks_exact(m).enumerate() {
                let row = (start + i) as u32;
                for (top, s) in tops.iter_mut().zip(scores) {
                    top.offer(Hit { score: *s, row }, live);
                }
            }
            start = end;
        }
        tops.into_iter().map(TopK::into_sorted).collect::<Vec<_>>()
    });
    transpose_merge(parts, m, k)
}

/// Exact top-k over the listed rows only (ascending, in range): the cost
/// follows `subset.len()`, not the number of rows.
pub fn exact_subset<E: Elem>(
    isa: Isa,
    rows: &[E],
    q: &[f32],
    k: usize,
    subset: &[u32],
    live: &(dyn Fn(u32) -> bool + Sync),
    threads: usize,
) -> Vec<Hit> {
    let dim = q.len();
    let parts = par_ranges(subset.len(), threads, MIN_ROWS_PER_THREAD / 4, |a, b| {
        let mut top = TopK::new(k);
        let part = &subset[a..b];
        for (j, &r) in part.iter().enumerate() {
            // Scattered rows defeat the hardware prefetcher: ask for the row
            // four places ahead while this one is scored.
            if let Some(&next) = part.get(j + 4) {
                let n0 = next as usize * dim;
                simd::prefetch(&rows[n0..n0 + dim]);
            }
            let r0 = r as usize * dim;
            let s = simd::dot(isa, q, &rows[r0..r0 + dim]);
            top.offer(Hit { score: s, row: r }, live);
        }
        top.into_sorted()
    });
    merge(parts, k)
}

/// What the int8 scan hands to the f32 rescoring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Every row the error bound cannot rule out: the result is exactly the
    /// f32 scan's (same rows, same scores, same order).
    Bound,
    /// The best `c` rows by int8 score (the older heuristic; kept to measure
    /// it against the bound). Recall can fall below 1.
    Candidates(usize),
}

/// A screen's result: (its lower bounds, (upper bound, row) of its candidates).
type Screened = (Vec<f32>, Vec<(f32, u32)>);

/// Can a row whose upper bound is `u` still enter when the threshold is `t`?
/// Yes unless `u < t`; a NaN bound (damaged record) is kept, to be rescored.
#[inline]
pub(crate) fn kept(u: f32, t: f32) -> bool {
    u.partial_cmp(&t) != Some(std::cmp::Ordering::Less)
}

/// An f32 lower bound in a min-heap (total order; NaN never enters).
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Low(f32);
impl Eq for Low {}
impl PartialOrd for Low {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Low {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.0.total_cmp(&self.0) // reversed: BinaryHeap's top is the smallest
    }
}

/// The int8 screen of one query over part of the rows.
pub(crate) enum Screen {
    /// `lows`: the k best lower bounds of live rows so far; `t` the smallest of
    /// them once there are k (else -inf); `cand`: (upper bound, row) of every
    /// live row whose upper bound reached `t` when it was seen.
    Bound {
        k: usize,
        lows: std::collections::BinaryHeap<Low>,
        t: f32,
        cand: Vec<(f32, u32)>,
        cap: usize,
    },
    Fixed(TopK),
}

impl Screen {
    pub(crate) fn new(keep: Keep, k: usize) -> Screen {
        match keep {
            Keep::Bound => Screen::Bound {
                k,
                lows: std::collections::BinaryHeap::with_capacity(k.min(1 << 16)),
                t: f32::NEG_INFINITY,
                cand: Vec::new(),
                cap: 4096,
            },
            Keep::Candidates(c) => Screen::Fixed(TopK::new(c.max(k))),
        }
    }

    /// Row `row` has int8 score `a` and the exact score lies in `a ± slack`.
    #[inline]
    pub(crate) fn offer(
        &mut self,
        row: u32,
        a: f32,
        slack: f32,
        live: &(dyn Fn(u32) -> bool + Sync),
    ) {
        match self {
            Screen::Bound {
                k,
                lows,
                t,
                cand,
                cap,
            } => {
                let u = a + slack;
                // `u < t` is false for NaN: a damaged record is rescored.
                if u < *t {
                    return;
                }
                // Only a live row's lower bound may raise the threshold (k rows
                // must score at least it); a masked candidate is dropped by the
                // rescoring's own live check. Asking `live` only here reads the
                // flags of the rows entering the k best lower bounds, not of
                // every row offered (most of them, at k=132 on 1M rows: each a
                // cache miss in the ids file).
                let l = a - slack;
                if lows.len() < *k {
                    if !l.is_nan() && live(row) {
                        lows.push(Low(l));
                        if lows.len() == *k {
                            *t = lows.peek().map_or(f32::NEG_INFINITY, |x| x.0);
                        }
                    }
                } else if l > *t && live(row) {
                    // The smallest of the k replaced in place: one sift down
                    // (a pop and a push would sift twice).
                    if let Some(mut least) = lows.peek_mut() {
                        *least = Low(l);
                    }
                    *t = lows.peek().map_or(f32::NEG_INFINITY, |x| x.0);
                }
                cand.push((u, row));
                if cand.len() >= *cap {
                    let t = *t;
                    cand.retain(|c| kept(c.0, t));
                    *cap = (2 * cand.len()).max(4096);
                }
            }
            Screen::Fixed(top) => top.offer(Hit { score: a, row }, live),
        }
    }

    /// Rows whose upper bound is below this cannot enter (-inf: any can).
    pub(crate) fn threshold(&self) -> f32 {
        match self {
            Screen::Bound { t, .. } => *t,
            Screen::Fixed(_) => f32::NEG_INFINITY,
        }
    }

    pub(crate) fn finish(self) -> Screened {
        match self {
            Screen::Bound { lows, cand, .. } => (lows.into_iter().map(|l| l.0).collect(), cand),
            Screen::Fixed(top) => (
                Vec::new(),
                top.into_sorted()
                    .into_iter()
                    .map(|h| (h.score, h.row))
                    .collect(),
            ),
        }
    }
}

/// Rows of the parts' screens that the global threshold cannot rule out, as
/// (upper bound, row): with `Keep::Bound` the highest bound first (a NaN bound,
/// a damaged record, counts as +inf), so that the rescoring can stop at the
/// first bound below its k-th exact score; with `Keep::Candidates` ascending
/// rows, every bound +inf (all are rescored).
fn survivors(keep: Keep, k: usize, parts: Vec<Screened>) -> Vec<(f32, u32)> {
    match keep {
        Keep::Bound => {
            let mut lows: Vec<f32> = parts.iter().flat_map(|p| p.0.iter().copied()).collect();
            // The k-th best lower bound over all rows: k rows score at least it.
            let t = if k > 0 && lows.len() >= k {
                let (_, kth, _) = lows.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
                *kth
            } else {
                f32::NEG_INFINITY
            };
            let mut rows: Vec<(f32, u32)> = parts
                .into_iter()
                .flat_map(|p| p.1)
                .filter(|c| kept(c.0, t))
                .map(|(u, r)| (if u.is_nan() { f32::INFINITY } else { u }, r))
                .collect();
            rows.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            rows
        }
        Keep::Candidates(c) => {
            let hits = parts
                .into_iter()
                .map(|p| {
                    p.1.into_iter()
                        .map(|(score, row)| Hit { score, row })
                        .collect()
                })
                .collect();
            let mut rows: Vec<(f32, u32)> = merge(hits, c.max(k))
                .into_iter()
                .map(|h| (f32::INFINITY, h.row))
                .collect();
            rows.sort_unstable_by_key(|c| c.1);
            rows
        }
    }
}

/// Top-k through the int8 copy: the copy (`q8`, covering rows `0..q8_rows`)
/// is scanned for each query, the surviving rows (see [`Keep`]) are rescored
/// in f32 from `rows`, and rows not covered by the copy are scored in f32.
/// With `Keep::Bound` the result equals [`exact`] (or [`exact_subset`] with
/// `subset`): returned scores are always the f32 scan's scores.
///
/// `subset`: only these rows (ascending, in range); for filtered searches the
/// scattered int8 records (416 B at 384-d) are read instead of f32 rows (1.5 KiB).
#[allow(clippy::too_many_arguments)]
pub fn screened<E: Elem>(
    isa: Isa,
    rows: &[E],
    q8: &[u8],
    queries: &[f32],
    dim: usize,
    k: usize,
    subset: Option<&[u32]>,
    keep: Keep,
    live: &(dyn Fn(u32) -> bool + Sync),
    threads: usize,
) -> Vec<Vec<Hit>> {
    let n = rows.len() / dim;
    let m = queries.len() / dim;
    if m == 0 {
        return Vec::new();
    }
    let stride = quant::record_len(dim);
    let q8_rows = (q8.len() / stride).min(n);
    // One query runs the single-query kernel (the widest levels it takes);
    // several, the tile kernel (16-bit sums).
    let qqs: Vec<QuantQuery> = queries
        .chunks_exact(dim)
        .map(|q| {
            if m == 1 {
                QuantQuery::single(isa, q)
            } else {
                QuantQuery::new(q)
            }
        })
        .collect();
    // Split the rows: covered by the copy (screened) and past it (f32).
    let (covered, tail): (Option<&[u32]>, Option<&[u32]>) = match subset {
        Some(s) => {
            let cut = s.partition_point(|r| (*r as usize) < q8_rows);
            (Some(&s[..cut]), Some(&s[cut..]))
        }
        None => (None, None),
    };
    let len = covered.map_or(q8_rows, <[u32]>::len);
    let min_part = if subset.is_some() {
        MIN_ROWS_PER_THREAD / 4
    } else {
        (MIN_ROWS_PER_THREAD / m).max(QUANT_BLOCK)
    };
    let parts = par_ranges(len, threads, min_part, |a, b| {
        let mut screens: Vec<Screen> = (0..m).map(|_| Screen::new(keep, k)).collect();
        // Each screen's threshold, contiguous: most pairs stop at one compare.
        let mut ts = vec![f32::NEG_INFINITY; m];
        // One query scans blocks of SCREEN_BLOCK records (its prefetch stays inside
        // one), several a tile of QUANT_BLOCK each.
        let block = if m == 1 { SCREEN_BLOCK } else { QUANT_BLOCK };
        let mut buf = vec![0.0f32; block * m];
        let mut halves = vec![0.0f32; block * m];
        // Offer rows `0..nb` of a block (`row(i)` = row number of the i-th) to
        // every screen: `scores[j * nb + i]` as `scores_tile` lays them out,
        // `halves` beside them (the half-width of each score's interval).
        let offer_block = |screens: &mut [Screen],
                           ts: &mut [f32],
                           scores: &[f32],
                           halves: &[f32],
                           row: &dyn Fn(usize) -> u32| {
            let nb = scores.len() / m;
            for (j, (s, h)) in scores
                .chunks_exact(nb)
                .zip(halves.chunks_exact(nb))
                .enumerate()
            {
                // Which rows may enter, 32 at a time, without branches (the
                // compiler vectorises this loop); then only those are offered.
                for i0 in (0..nb).step_by(32) {
                    let i1 = (i0 + 32).min(nb);
                    let t = ts[j];
                    let mut mask = 0u32;
                    for i in i0..i1 {
                        let u = s[i] + h[i];
                        // Set for NaN too: a damaged record goes to the screen
                        // (and is rescored).
                        mask |= ((u >= t || u.is_nan()) as u32) << (i - i0);
                    }
                    while mask != 0 {
                        let i = i0 + mask.trailing_zeros() as usize;
                        mask &= mask - 1;
                        let slack = if h[i] >= 0.0 { h[i] } else { f32::INFINITY };
                        screens[j].offer(row(i), s[i], slack, live);
                        ts[j] = screens[j].threshold();
                    }
                }
            }
        };
        // Every query's half-widths of records `recs` (the tile and the
        // filtered paths; one query's come from its kernel).
        let halves_of = |recs: &[u8], halves: &mut [f32]| {
            let nb = recs.len() / stride;
            for (j, qq) in qqs.iter().enumerate() {
                for (h, rec) in halves[j * nb..(j + 1) * nb]
                    .iter_mut()
                    .zip(recs.chunks_exact(stride))
                {
                    *h = qq.half_width(rec);
                }
            }
        };
        match covered {
            None => {
                let mut start = a;
                while start < b {
                    let end = (start + block).min(b);
                    let recs = &q8[start * stride..end * stride];
                    let out = &mut buf[..(end - start) * m];
                    let half = &mut halves[..(end - start) * m];
                    if m == 1 {
                        quant::scores_bounded(isa, &qqs[0], recs, out, half);
                    } else {
                        quant::scores_tile(isa, &qqs, recs, out);
                        halves_of(recs, half);
                    }
                    offer_block(&mut screens, &mut ts, out, half, &|i| (start + i) as u32);
                    start = end;
                }
            }
            Some(list) => {
                let part = &list[a..b];
                for (j, &r) in part.iter().enumerate() {
                    // Scattered records: ask for the one eight places ahead.
                    if let Some(&next) = part.get(j + 8) {
                        let at = next as usize * stride;
                        prefetch_bytes(&q8[at..at + stride]);
                    }
                    let rec = &q8[r as usize * stride..(r as usize + 1) * stride];
                    let out = &mut buf[..m];
                    let half = &mut halves[..m];
                    if m == 1 {
                        quant::scores_bounded(isa, &qqs[0], rec, out, half);
                    } else {
                        quant::scores_tile(isa, &qqs, rec, out);
                        halves_of(rec, half);
                    }
                    offer_block(&mut screens, &mut ts, out, half, &|_| r);
                }
            }
        }
        screens.into_iter().map(Screen::finish).collect::<Vec<_>>()
    });
    // Per query: the parts' screens, merged.
    let mut per_query: Vec<Vec<Screened>> = (0..m).map(|_| Vec::new()).collect();
    for part in parts {
        for (j, s) in part.into_iter().enumerate() {
            per_query[j].push(s);
        }
    }
    let cands: Vec<Vec<(f32, u32)>> = per_query
        .into_iter()
        .map(|p| survivors(keep, k, p))
        .collect();
    // Rows past the copy: scored in f32.
    let tail_hits: Option<Vec<Vec<Hit>>> = match tail {
        Some(t) if !t.is_empty() => Some(
            queries
                .chunks_exact(dim)
                .map(|q| exact_subset(isa, rows, q, k, t, live, threads))
                .collect(),
        ),
        Some(_) => None,
        None if q8_rows < n => Some(
            exact(
                isa,
                &rows[q8_rows * dim..],
                queries,
                dim,
                k,
                &|r| live(r + q8_rows as u32),
                threads,
            )
            .into_iter()
            .map(|hits| {
                hits.into_iter()
                    .map(|h| Hit {
                        score: h.score,
                        row: h.row + q8_rows as u32,
                    })
                    .collect()
            })
            .collect(),
        ),
        None => None,
    };
    // Rescore the survivors in f32, queries in parallel.
    let rescored = par_ranges(m, threads, 8, |a, b| {
        (a..b)
            .map(|j| {
                let q = &queries[j * dim..(j + 1) * dim];
                rescore::<E, RESCORE_AHEAD>(isa, rows, q, &cands[j], k, live)
            })
            .collect::<Vec<_>>()
    });
    rescored
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(j, hits)| match &tail_hits {
            Some(t) => merge(vec![hits, t[j].clone()], k),
            None => hits,
        })
        .collect()
}

/// Survivors ahead of the one being rescored whose f32 rows are prefetched
/// (4, 8 and 16 measured the same: `probe_screen_file`).
const RESCORE_AHEAD: usize = 4;

/// The exact top-`k` of the candidates `cand` ((upper bound, row), highest
/// bound first) for query `q`: their rows rescored in f32, four at a time (four
/// FMA chains: a lone row's chain is latency-bound), the rows `AHEAD`
/// candidates on prefetched meanwhile (scattered rows: each is a memory latency).
fn rescore<E: Elem, const AHEAD: usize>(
    isa: Isa,
    rows: &[E],
    q: &[f32],
    cand: &[(f32, u32)],
    k: usize,
    live: &(dyn Fn(u32) -> bool + Sync),
) -> Vec<Hit> {
    let dim = q.len();
    let mut top = TopK::new(k);
    let row = |r: u32| &rows[r as usize * dim..(r as usize + 1) * dim];
    for &(_, r) in cand.iter().take(AHEAD) {
        simd::prefetch(row(r));
    }
    for (g, four) in cand.chunks(4).enumerate() {
        // Highest upper bound first: once k rows are kept, a row whose bound is
        // below the k-th exact score cannot enter (its exact score is at most
        // its bound), and neither can any after it (nor the rest of this group,
        // which is offered anyway).
        if top.floor().is_some_and(|f| four[0].0 < f) {
            break;
        }
        for &(_, next) in cand.iter().skip(4 * g + AHEAD).take(4) {
            simd::prefetch(row(next));
        }
        if let [a, b, c, d] = four {
            let s = simd::dot4(isa, q, [row(a.1), row(b.1), row(c.1), row(d.1)]);
            for (&(_, r), score) in four.iter().zip(s) {
                top.offer(Hit { score, row: r }, live);
            }
        } else {
            for &(_, r) in four {
                let score = simd::dot(isa, q, row(r));
                top.offer(Hit { score, row: r }, live);
            }
        }
    }
    top.into_sorted()
}

/// Hint the CPU to bring `data` into cache (no effect where unsupported).
#[inline]
fn prefetch_bytes(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = data.as_ptr() as *const i8;
        let mut off = 0;
        while off < data.len() {
            // SAFETY: prefetch is a hint that never faults; the address is inside
            // `data` (SSE is part of the x86-64 baseline).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

fn transpose_merge(parts: Vec<Vec<Vec<Hit>>>, m: usize, k: usize) -> Vec<Vec<Hit>> {
    let mut per_query: Vec<Vec<Vec<Hit>>> = (0..m).map(|_| Vec::new()).collect();
    for part in parts {
        for (j, hits) in part.into_iter().enumerate() {
            per_query[j].push(hits);
        }
    }
    per_query.into_iter().map(|p| merge(p, k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::quant::{quantize_row, record_len};
    use proptest::prelude::*;

    pub(super) fn unit_rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut v: Vec<f32> = (0..n * dim)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        normalise(&mut v, dim);
        v
    }

    fn normalise(v: &mut [f32], dim: usize) {
        for row in v.chunks_exact_mut(dim) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            }
        }
    }

    fn quantize(rows: &[f32], dim: usize, covered: usize) -> Vec<u8> {
        let stride = record_len(dim);
        let mut q8 = vec![0u8; covered * stride];
        for (r, out) in rows.chunks_exact(dim).zip(q8.chunks_exact_mut(stride)) {
            quantize_row(r, out);
        }
        q8
    }

    /// The reference: score everything in f64, sort, take k.
    fn brute(rows: &[f32], q: &[f32], k: usize, live: impl Fn(u32) -> bool) -> Vec<u32> {
        let dim = q.len();
        let mut all: Vec<(f64, u32)> = rows
            .chunks_exact(dim)
            .enumerate()
            .filter(|(i, _)| live(*i as u32))
            .map(|(i, r)| {
                (
                    r.iter().zip(q).map(|(a, b)| *a as f64 * *b as f64).sum(),
                    i as u32,
                )
            })
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        all.into_iter().take(k).map(|x| x.1).collect()
    }

    fn ids(h: &[Hit]) -> Vec<u32> {
        h.iter().map(|h| h.row).collect()
    }

    #[test]
    fn exact_matches_brute_force_for_every_isa_and_thread_count() {
        let (n, dim) = (40_000, 48);
        let rows = unit_rows(n, dim, 1);
        let q = unit_rows(1, dim, 2);
        let live = |r: u32| r % 7 != 3;
        let want = brute(&rows, &q, 25, live);
        for isa in Isa::available() {
            for threads in [1, 2, 3] {
                let got = exact(isa, &rows, &q, dim, 25, &live, threads);
                assert_eq!(ids(&got[0]), want, "{isa:?} threads {threads}");
            }
        }
    }

    #[test]
    fn the_screen_never_answers_masked_rows_even_the_best() {
        // The screen asks `live` only of rows entering its k best lower bounds:
        // masked rows that outscore every live one still reach the candidates and
        // must be dropped there, and must never raise the threshold.
        let (n, dim) = (6_000, 32);
        let mut rows = unit_rows(n, dim, 11);
        let q = unit_rows(1, dim, 12);
        // the first 300 rows are near copies of the query, and masked
        for r in 0..300 {
            for (x, y) in rows[r * dim..(r + 1) * dim].iter_mut().zip(&q) {
                *x = 0.9 * y + 0.1 * *x;
            }
        }
        let q8 = quantize(&rows, dim, n);
        let live = |r: u32| r >= 300 && r % 5 != 2;
        for isa in Isa::available() {
            for k in [1, 10, 132] {
                for threads in [1, 2] {
                    let want = exact(isa, &rows, &q, dim, k, &live, threads);
                    assert!(want[0].iter().all(|h| live(h.row)));
                    let got = screened(
                        isa,
                        &rows,
                        &q8,
                        &q,
                        dim,
                        k,
                        None,
                        Keep::Bound,
                        &live,
                        threads,
                    );
                    assert_eq!(got, want, "{isa:?} k={k} threads={threads}");
                }
            }
        }
    }

    #[test]
    fn ties_go_to_the_lower_row_and_k_can_exceed_n() {
        let dim = 8;
        let mut rows = vec![0.0f32; 6 * dim];
        for r in 0..6 {
            rows[r * dim + (r % 2)] = 1.0; // rows 0,2,4 equal; rows 1,3,5 equal
        }
        let mut q = vec![0.0f32; dim];
        q[0] = 1.0;
        let q8 = quantize(&rows, dim, 6);
        for isa in Isa::available() {
            let hits = exact(isa, &rows, &q, dim, 100, &|_| true, 2);
            assert_eq!(ids(&hits[0]), vec![0, 2, 4, 1, 3, 5]);
            let s = screened(
                isa,
                &rows,
                &q8,
                &q,
                dim,
                100,
                None,
                Keep::Bound,
                &|_| true,
                2,
            );
            assert_eq!(s, hits);
            let sub = exact_subset(isa, &rows, &q, 2, &[1, 2, 4, 5], &|_| true, 1);
            assert_eq!(ids(&sub), vec![2, 4]);
            let s = screened(
                isa,
                &rows,
                &q8,
                &q,
                dim,
                2,
                Some(&[1, 2, 4, 5]),
                Keep::Bound,
                &|_| true,
                1,
            );
            assert_eq!(s, vec![sub]);
        }
    }

    #[test]
    fn subset_and_batch_match_brute_force() {
        let (n, dim) = (5_000, 40);
        let rows = unit_rows(n, dim, 3);
        let qs = unit_rows(7, dim, 4);
        let subset: Vec<u32> = (0..n as u32).filter(|r| r % 3 == 0).collect();
        for isa in Isa::available() {
            let batch = exact(isa, &rows, &qs, dim, 10, &|r| r != 17, 2);
            for (j, q) in qs.chunks_exact(dim).enumerate() {
                assert_eq!(ids(&batch[j]), brute(&rows, q, 10, |r| r != 17));
                assert_eq!(batch[j], exact(isa, &rows, q, dim, 10, &|r| r != 17, 1)[0]);
                let sub = exact_subset(isa, &rows, q, 10, &subset, &|_| true, 2);
                assert_eq!(ids(&sub), brute(&rows, q, 10, |r| r % 3 == 0));
            }
        }
    }

    #[test]
    fn f16_rows_screen_and_scan_to_the_same_answer_as_their_widening() {
        use crate::kernels::simd::F16;
        let (n, dim) = (6_000, 384);
        let half: Vec<F16> = unit_rows(n, dim, 9)
            .iter()
            .map(|v| F16::from_f32(*v))
            .collect();
        let wide: Vec<f32> = half.iter().map(|h| h.to_f32()).collect();
        let q8 = quantize(&wide, dim, 5_000); // records of the widened rows; tail scanned
        let qs = unit_rows(4, dim, 10);
        let subset: Vec<u32> = (0..n as u32).filter(|r| r % 4 != 1).collect();
        let live = |r: u32| !r.is_multiple_of(11);
        for isa in Isa::available() {
            let want = exact(isa, &wide, &qs, dim, 10, &live, 2);
            assert_eq!(exact(isa, &half, &qs, dim, 10, &live, 2), want, "{isa:?}");
            let got = screened(isa, &half, &q8, &qs, dim, 10, None, Keep::Bound, &live, 2);
            assert_eq!(got, want, "{isa:?} screened");
            for (j, q) in qs.chunks_exact(dim).enumerate() {
                assert_eq!(ids(&want[j]), brute(&wide, q, 10, live));
                let sub = exact_subset(isa, &half, q, 10, &subset, &live, 2);
                assert_eq!(sub, exact_subset(isa, &wide, q, 10, &subset, &live, 2));
                let s = screened(
                    isa,
                    &half,
                    &q8,
                    q,
                    dim,
                    10,
                    Some(&subset),
                    Keep::Bound,
                    &live,
                    1,
                );
                assert_eq!(s, vec![sub]);
            }
        }
    }

    #[test]
    fn the_bound_prunes_at_384_dimensions_and_stays_exact() {
        let (n, dim) = (20_000, 384);
        let rows = unit_rows(n, dim, 5);
        let q8 = quantize(&rows, dim, 15_000); // the tail is scored in f32
        let qs = unit_rows(5, dim, 6);
        let isa = Isa::detect();
        for q in qs.chunks_exact(dim) {
            let qq = QuantQuery::new(q);
            let mut s = Screen::new(Keep::Bound, 10);
            let mut a = vec![0.0f32; 15_000];
            quant::scores(isa, &qq, &q8, &mut a);
            for (r, rec) in q8.chunks_exact(record_len(dim)).enumerate() {
                s.offer(r as u32, a[r], qq.slack(rec), &|_| true);
            }
            let kept = survivors(Keep::Bound, 10, vec![s.finish()]);
            assert!(kept.len() < 1_000, "{} of 15000 rows rescored", kept.len());
        }
        for threads in [1, 2] {
            let want = exact(isa, &rows, &qs, dim, 10, &|r| r % 5 != 0, threads);
            let got = screened(
                isa,
                &rows,
                &q8,
                &qs,
                dim,
                10,
                None,
                Keep::Bound,
                &|r| r % 5 != 0,
                threads,
            );
            assert_eq!(got, want);
            for (j, q) in qs.chunks_exact(dim).enumerate() {
                let one = screened(
                    isa,
                    &rows,
                    &q8,
                    q,
                    dim,
                    10,
                    None,
                    Keep::Bound,
                    &|r| r % 5 != 0,
                    threads,
                );
                assert_eq!(one[0], want[j]);
                let heur = screened(
                    isa,
                    &rows,
                    &q8,
                    q,
                    dim,
                    10,
                    None,
                    Keep::Candidates(200),
                    &|r| r % 5 != 0,
                    threads,
                );
                assert_eq!(heur[0], want[j], "200 candidates of random 384-d rows");
            }
        }
    }

    /// Rows for the property tests: random, near-ties around one direction,
    /// exact duplicates, or a few distinct values (massive ties).
    fn adversarial(kind: u8, n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut v = unit_rows(n, dim, seed);
        let base = unit_rows(1, dim, seed ^ 0xabc);
        match kind % 4 {
            0 => {}
            1 => {
                let eps = [1e-2f32, 1e-4, 1e-6][(seed % 3) as usize];
                for row in v.chunks_exact_mut(dim) {
                    for (x, b) in row.iter_mut().zip(&base) {
                        *x = b + eps * *x;
                    }
                }
            }
            2 => {
                for r in 0..n {
                    let src = (r * 7 % 5).min(n - 1);
                    let copy = v[src * dim..(src + 1) * dim].to_vec();
                    v[r * dim..(r + 1) * dim].copy_from_slice(&copy);
                }
            }
            _ => {
                for (i, x) in v.iter_mut().enumerate() {
                    *x = ((i % dim) % 3) as f32 - 1.0 + ((i / dim) % 2) as f32;
                }
            }
        }
        normalise(&mut v, dim);
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// The bounded int8 screen returns exactly the f32 scan's answer: same
        /// rows, same scores, same order, whatever the data, k, mask, subset,
        /// coverage of the copy or thread count.
        #[test]
        fn bounded_screen_equals_the_f32_scan(
            kind in 0u8..4,
            n in 1usize..300,
            dim in prop::sample::select(vec![1usize, 3, 8, 31, 33, 64, 384]),
            k in 1usize..40,
            k_all in any::<bool>(),
            mask in 0u32..4,
            covered_frac in 0usize..=4,
            m in 1usize..5,
            seed in any::<u64>(),
            subset_mod in 0u32..4,
        ) {
            let rows = adversarial(kind, n, dim, seed);
            let covered = n * covered_frac / 4;
            let q8 = quantize(&rows, dim, covered);
            let mut qs = unit_rows(m, dim, seed.wrapping_add(1));
            if kind == 1 && m > 1 {
                // A query equal to a row: its score ties its duplicates.
                let row0 = rows[..dim].to_vec();
                qs[dim..2 * dim].copy_from_slice(&row0);
            }
            let k = if k_all { n + 5 } else { k };
            let live = move |r: u32| mask == 0 || !r.is_multiple_of(mask + 1);
            let subset: Vec<u32> = (0..n as u32).filter(|r| subset_mod == 0 || r % (subset_mod + 1) == 1).collect();
            for isa in Isa::available() {
                for threads in [1usize, 2] {
                    let want = exact(isa, &rows, &qs, dim, k, &live, threads);
                    let got = screened(isa, &rows, &q8, &qs, dim, k, None, Keep::Bound, &live, threads);
                    prop_assert_eq!(&got, &want);
                    for (j, q) in qs.chunks_exact(dim).enumerate() {
                        let want = exact_subset(isa, &rows, q, k, &subset, &live, threads);
                        let got = screened(isa, &rows, &q8, q, dim, k, Some(&subset), Keep::Bound, &live, threads);
                        prop_assert_eq!(&got[0], &want, "subset, query {}", j);
                    }
                }
            }
        }
    }
}

/// Timing probe, not a test: `cargo test --release -- --ignored --nocapture probe`.
#[cfg(test)]
mod probe {
    use super::*;
    use crate::kernels::quant::{quantize_row, record_len};
    use std::time::Instant;

    /// The int8 records of `rows`.
    fn quantize_all(rows: &[f32], dim: usize) -> Vec<u8> {
        let stride = record_len(dim);
        let mut q8 = vec![0u8; rows.len() / dim * stride];
        for (r, out) in rows.chunks_exact(dim).zip(q8.chunks_exact_mut(stride)) {
            quantize_row(r, out);
        }
        q8
    }

    /// Runs `f` once to warm up, then prints the mean of 10 runs.
    fn time(name: &str, f: &dyn Fn()) {
        f();
        let t = Instant::now();
        for _ in 0..10 {
            f();
        }
        eprintln!("{name}: {:.2} ms", t.elapsed().as_secs_f64() * 100.0);
    }

    /// The exact int8 screen, top-10, every row live, one thread.
    fn bound(
        isa: Isa,
        rows: &[f32],
        q8: &[u8],
        queries: &[f32],
        dim: usize,
        subset: Option<&[u32]>,
    ) -> Vec<Vec<Hit>> {
        screened(
            isa,
            rows,
            q8,
            queries,
            dim,
            10,
            subset,
            Keep::Bound,
            &|_| true,
            1,
        )
    }

    #[test]
    #[ignore]
    fn probe_kernel_speed() {
        let (n, dim) = (100_000usize, 384usize);
        let rows = super::tests::unit_rows(n, dim, 11);
        let stride = record_len(dim);
        let q8 = quantize_all(&rows, dim);
        let q: Vec<f32> = rows[..dim].to_vec();
        let isa = Isa::detect();
        let mut out = vec![0.0f32; n];
        time("f32 scores only", &|| {
            let mut o = vec![0.0f32; n];
            simd::scores(isa, &q, &rows, &mut o);
            std::hint::black_box(&o);
        });
        time("f32 exact top-10", &|| {
            std::hint::black_box(exact(isa, &rows, &q, dim, 10, &|_| true, 1));
        });
        let qq = QuantQuery::new(&q);
        time("int8 scores only", &|| {
            let mut o = vec![0.0f32; n];
            quant::scores(isa, &qq, &q8, &mut o);
            std::hint::black_box(&o);
        });
        time("int8 top-10", &|| {
            std::hint::black_box(bound(isa, &rows, &q8, &q, dim, None));
        });
        // Compute rate: the same 1000 rows (in L2) scanned 100 times.
        let small = 1000;
        time("int8 scores, 100x1000 rows in cache", &|| {
            let mut o = vec![0.0f32; small];
            for _ in 0..100 {
                quant::scores(isa, &qq, &q8[..small * stride], &mut o);
                std::hint::black_box(&o);
            }
        });
        time("f32 scores, 100x1000 rows (L3)", &|| {
            let mut o = vec![0.0f32; small];
            for _ in 0..100 {
                simd::scores(isa, &q, &rows[..small * dim], &mut o);
                std::hint::black_box(&o);
            }
        });
        // Batch compute rate: 64 queries over 4096 records (in L2), tile vs per query.
        let qqs: Vec<QuantQuery> = rows[..64 * dim]
            .chunks_exact(dim)
            .map(QuantQuery::new)
            .collect();
        let nr = 4096;
        time("int8 tile 4096 rows x 64 queries", &|| {
            let mut o = vec![0.0f32; 64 * 64];
            for b in 0..nr / 64 {
                quant::scores_tile(
                    isa,
                    &qqs,
                    &q8[b * 64 * stride..(b + 1) * 64 * stride],
                    &mut o,
                );
                std::hint::black_box(&o);
            }
        });
        time("int8 per query 4096 rows x 64 queries", &|| {
            let mut o = vec![0.0f32; 64];
            for b in 0..nr / 64 {
                for qq in &qqs {
                    quant::scores(isa, qq, &q8[b * 64 * stride..(b + 1) * 64 * stride], &mut o);
                    std::hint::black_box(&o);
                }
            }
        });
        let qs = &rows[..64 * dim];
        time("f32 tile 4096 rows x 64 queries", &|| {
            let mut o = vec![0.0f32; 16 * 64];
            for b in 0..nr / 16 {
                simd::scores_tile(
                    isa,
                    dim,
                    &rows[b * 16 * dim..(b + 1) * 16 * dim],
                    qs,
                    &mut o,
                );
                std::hint::black_box(&o);
            }
        });
        time("screened batch 64 queries, 100k rows", &|| {
            std::hint::black_box(bound(isa, &rows, &q8, qs, dim, None));
        });
        time("exact batch 64 queries, 100k rows", &|| {
            std::hint::black_box(exact(isa, &rows, qs, dim, 10, &|_| true, 1));
        });
        out[0] = 1.0;
        std::hint::black_box(&out);
    }

    /// The bench file a probe reads: `PROBE_FILE` (.cvx: f16 rows of 384 dimensions
    /// from byte 4096; its .q8 beside it: int8 records from byte 64), `PROBE_ROWS`
    /// of them, mapped as cortex maps them.
    struct ProbeFile {
        n: usize,
        rows: memmap2::Mmap,
        q8: Option<memmap2::Mmap>,
    }

    impl ProbeFile {
        const DIM: usize = 384;

        fn open(with_q8: bool) -> ProbeFile {
            let path = std::env::var("PROBE_FILE").expect("PROBE_FILE");
            let n = std::env::var("PROBE_ROWS").unwrap().parse().unwrap();
            let map = |p: &str| {
                let file = std::fs::File::open(p).unwrap();
                // SAFETY: a bench file nobody writes while the probe runs.
                unsafe { memmap2::Mmap::map(&file) }.unwrap()
            };
            let q8 = with_q8.then(|| map(&format!("{path}.q8")));
            let file = ProbeFile {
                n,
                rows: map(&path),
                q8,
            };
            // Every page of both mapped before timing, as in a process that has
            // searched before (the Python bench's f16 scans map all of the rows):
            // else the first case to rescore a row pays its page fault.
            std::hint::black_box(simd::read_floor(Isa::detect(), file.row_bytes(), false));
            if file.q8.is_some() {
                std::hint::black_box(simd::read_floor(Isa::detect(), file.q8(), false));
            }
            file
        }

        fn row_bytes(&self) -> &[u8] {
            &self.rows[4096..4096 + self.n * Self::DIM * 2]
        }

        fn rows(&self) -> &[crate::kernels::simd::F16] {
            let data = self.row_bytes();
            // SAFETY: the mapping is page-aligned + 4096 and F16 is a u16.
            unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), data.len() / 2) }
        }

        fn q8(&self) -> &[u8] {
            &self.q8.as_ref().expect("opened with its .q8")[64..64 + self.n * record_len(Self::DIM)]
        }
    }

    /// A probe's case: a name and what it runs in a round (given the round's number).
    type Case<'a> = (&'a str, Box<dyn Fn(usize) + 'a>);

    /// Runs every case once per round, the cases interleaved round by round, and
    /// answers each case's (median, min) in ms, the first two rounds left out.
    fn interleaved(cases: &[Case], rounds: usize) -> Vec<(f64, f64)> {
        let (wall, _) = timed(cases, rounds, || 0.0);
        wall
    }

    /// [`interleaved`] with each case's thread CPU time as well: ((wall median, min),
    /// (CPU median, min)) in ms.
    #[cfg(target_arch = "x86_64")]
    fn interleaved_cpu(cases: &[Case], rounds: usize) -> Vec<((f64, f64), (f64, f64))> {
        let cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec to fill.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
        };
        let (wall, cpu) = timed(cases, rounds, cpu);
        wall.into_iter().zip(cpu).collect()
    }

    /// A case's (median, min) in ms.
    type Stat = (f64, f64);

    /// Each case's wall and `clock` (ms) times, (median, min) of the rounds after
    /// the first two.
    fn timed(cases: &[Case], rounds: usize, clock: impl Fn() -> f64) -> (Vec<Stat>, Vec<Stat>) {
        let (mut wall, mut other) = (vec![Vec::new(); cases.len()], vec![Vec::new(); cases.len()]);
        for round in 0..rounds {
            for (i, (_, f)) in cases.iter().enumerate() {
                let (t0, c0) = (Instant::now(), clock());
                f(round);
                wall[i].push(t0.elapsed().as_secs_f64() * 1e3);
                other[i].push(clock() - c0);
            }
        }
        let stat = |mut v: Vec<f64>| {
            let mut v = v.split_off(2.min(v.len()));
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0])
        };
        (
            wall.into_iter().map(stat).collect(),
            other.into_iter().map(stat).collect(),
        )
    }

    /// `kernel` over the int8 records `q8` in blocks of BLOCK, as the screen runs it
    /// (scores and half-widths into buffers reused block after block).
    fn by_blocks(q8: &[u8], stride: usize, mut kernel: impl FnMut(&[u8], &mut [f32], &mut [f32])) {
        let (mut o, mut h) = (vec![0.0f32; BLOCK], vec![0.0f32; BLOCK]);
        for c in q8.chunks(BLOCK * stride) {
            let nb = c.len() / stride;
            kernel(c, &mut o[..nb], &mut h[..nb]);
            std::hint::black_box((&o, &h));
        }
    }

    /// `kernel` over the first 512 records of `q8` (in cache), `rows / 512` times.
    fn in_cache(q8: &[u8], stride: usize, rows: usize, kernel: impl Fn(&[u8], &mut [f32])) {
        let mut o = vec![0.0f32; 512];
        for _ in 0..rows / 512 {
            kernel(&q8[..512 * stride], &mut o);
            std::hint::black_box(&o);
        }
    }

    /// The exact int8 screen of one query, top-`k`, every row live.
    #[allow(clippy::too_many_arguments)]
    fn screen(isa: Isa, rows: &[f32], q8: &[u8], q: &[f32], dim: usize, k: usize, threads: usize) {
        std::hint::black_box(screened(
            isa,
            rows,
            q8,
            q,
            dim,
            k,
            None,
            Keep::Bound,
            &|_| true,
            threads,
        ));
    }

    /// Where the exact int8 screen's time goes, beside its read floor: the
    /// pieces of the pass timed alone, interleaved round by round, medians.
    /// `PROBE_N` rows (default 1M), one thread.
    /// `cargo test --release --lib probe_screen_split -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn probe_screen_split() {
        let n: usize = std::env::var("PROBE_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        let dim = 384usize;
        let rows = super::tests::unit_rows(n, dim, 11);
        let stride = record_len(dim);
        let q8 = quantize_all(&rows, dim);
        let isa = Isa::detect();
        let qs = super::tests::unit_rows(32, dim, 99);
        let query = |round: usize| &qs[round * dim..(round + 1) * dim];
        let cases: Vec<Case> = vec![
            (
                "read floor q8",
                Box::new(|_| {
                    std::hint::black_box(simd::read_floor(isa, &q8, false));
                }),
            ),
            (
                "int8 kernel only (blocks of 256)",
                Box::new(|r| {
                    let qq = QuantQuery::new(query(r));
                    by_blocks(&q8, stride, |c, o, _| quant::scores(isa, &qq, c, o));
                }),
            ),
            (
                "int8 kernel, 512 records in cache",
                Box::new(|r| {
                    let qq = QuantQuery::new(query(r));
                    in_cache(&q8, stride, n, |c, o| quant::scores(isa, &qq, c, o));
                }),
            ),
            (
                "kernel + errs",
                Box::new(|r| {
                    let qq = QuantQuery::new(query(r));
                    let mut e = Vec::with_capacity(BLOCK);
                    let mut acc = 0.0f32;
                    by_blocks(&q8, stride, |c, o, _| {
                        quant::scores(isa, &qq, c, o);
                        e.clear();
                        e.extend(c.chunks_exact(stride).map(|r| quant::record_errs(r, dim)));
                        acc += e[0].0 + o[0];
                    });
                    std::hint::black_box(acc);
                }),
            ),
            (
                "kernel with half-widths (fused)",
                Box::new(|r| {
                    let qq = QuantQuery::new(query(r));
                    by_blocks(&q8, stride, |c, o, h| {
                        quant::scores_bounded(isa, &qq, c, o, h)
                    });
                }),
            ),
            (
                "screen k=10",
                Box::new(|r| screen(isa, &rows, &q8, query(r), dim, 10, 1)),
            ),
            (
                "screen k=132",
                Box::new(|r| screen(isa, &rows, &q8, query(r), dim, 132, 1)),
            ),
            (
                "screen k=10, 2 threads",
                Box::new(|r| screen(isa, &rows, &q8, query(r), dim, 10, 2)),
            ),
        ];
        let times = interleaved(&cases, qs.len() / dim);
        let floor = times[0].0;
        for ((name, _), (med, min)) in cases.iter().zip(&times) {
            eprintln!(
                "{name:<36} {med:8.2} ms  {:.2}x floor (min {min:.2} ms)",
                med / floor
            );
        }
        // How many rows the pass offers (upper bound >= running threshold) and
        // how many survive the final one, k = 10 and 132.
        let q = &qs[..dim];
        let qq = QuantQuery::new(q);
        let mut a = vec![0.0f32; n];
        quant::scores(isa, &qq, &q8, &mut a);
        for k in [10usize, 132] {
            let mut lows = std::collections::BinaryHeap::new();
            let (mut t, mut offered) = (f32::NEG_INFINITY, 0usize);
            let mut us = Vec::with_capacity(n);
            for (r, rec) in q8.chunks_exact(stride).enumerate() {
                let s = qq.slack(rec);
                let (u, l) = (a[r] + s, a[r] - s);
                us.push(u);
                if u < t {
                    continue;
                }
                offered += 1;
                if lows.len() < k {
                    lows.push(Low(l));
                } else if l > t {
                    lows.pop();
                    lows.push(Low(l));
                }
                if lows.len() == k {
                    t = lows.peek().unwrap().0;
                }
            }
            let left = us.iter().filter(|u| **u >= t).count();
            eprintln!("k={k}: offered {offered}, survive the final threshold {left}");
        }
    }

    /// Read floors of a real vector file (`PROBE_FILE`, its rows from byte 4096,
    /// `PROBE_ROWS` f16 rows of 384) beside the f16 scan kernel alone: which
    /// bare read is the floor. `cargo test --release --lib probe_floor_variants
    /// -- --ignored --nocapture`
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn probe_floor_variants() {
        use quant::x86::{scores_avx2, scores_vnni};
        use std::arch::x86_64::{_MM_HINT_T0 as T0, _MM_HINT_T1 as T1};
        use std::hint::black_box;

        let file = ProbeFile::open(true);
        let (rows, half, q8, data) = (file.n, file.rows(), file.q8(), file.row_bytes());
        let q = super::tests::unit_rows(1, 384, 5);
        let isa = Isa::detect();
        assert_eq!(isa, Isa::Avx2);
        let stride = record_len(384);
        let qq = QuantQuery::new(&q);
        // SAFETY (every unsafe below): AVX2 was detected above; the VNNI cases run only
        // where the CPU has it (the probe is run by hand on such a machine).
        let cases: Vec<Case> = vec![
            (
                "floor, prefetch 6 KiB ahead (today)",
                Box::new(|_| {
                    black_box(unsafe { simd::x86::read_floor_ahead::<6144>(data) });
                }),
            ),
            (
                "floor, no software prefetch",
                Box::new(|_| {
                    black_box(unsafe { simd::x86::read_floor_ahead::<0>(data) });
                }),
            ),
            (
                "floor, prefetch 1 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { simd::x86::read_floor_ahead::<1024>(data) });
                }),
            ),
            (
                "floor, prefetch 24 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { simd::x86::read_floor_ahead::<24576>(data) });
                }),
            ),
            (
                "int8 kernel+bounds, prefetch (today)",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_avx2::<4, 8, T0>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 kernel+bounds, no prefetch",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_avx2::<4, 0, T0>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 VNNI kernel+bounds, prefetch",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_vnni::<4, 8, T0>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 VNNI kernel+bounds, no prefetch",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_vnni::<4, 0, T0>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 VNNI, prefetch 16 ahead T0",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_vnni::<4, 16, T0>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 VNNI, prefetch 8 ahead T1",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_vnni::<4, 8, T1>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 VNNI, prefetch 24 ahead T1",
                Box::new(|_| {
                    by_blocks(q8, stride, |c, o, h| unsafe {
                        scores_vnni::<4, 24, T1>(&qq, c, o, Some(h))
                    })
                }),
            ),
            (
                "int8 VNNI kernel, 512 records in cache x",
                Box::new(|_| {
                    in_cache(q8, stride, rows, |c, o| unsafe {
                        scores_vnni::<4, 8, T0>(&qq, c, o, None)
                    })
                }),
            ),
            (
                "int8 AVX2 kernel, 512 records in cache x",
                Box::new(|_| {
                    in_cache(q8, stride, rows, |c, o| unsafe {
                        scores_avx2::<4, 8, T0>(&qq, c, o, None)
                    })
                }),
            ),
            (
                "q8 floor, prefetch 6 KiB ahead (today)",
                Box::new(|_| {
                    black_box(unsafe { simd::x86::read_floor_ahead::<6144>(q8) });
                }),
            ),
            (
                "q8 floor, no software prefetch",
                Box::new(|_| {
                    black_box(unsafe { simd::x86::read_floor_ahead::<0>(q8) });
                }),
            ),
            (
                "f16 scan kernel (blocks of 256 rows)",
                Box::new(|_| {
                    let mut o = vec![0.0f32; BLOCK];
                    for c in half.chunks(BLOCK * 384) {
                        let o = &mut o[..c.len() / 384];
                        simd::scores(isa, &q, c, o);
                        black_box(&o);
                    }
                }),
            ),
        ];
        for ((name, _), (med, min)) in cases.iter().zip(interleaved(&cases, 22)) {
            eprintln!("{name:<40} median {med:8.2} ms  min {min:8.2} ms");
        }
    }

    #[test]
    #[ignore]
    fn probe_filtered_1m() {
        let (n, dim) = (1_000_000usize, 384usize);
        let rows = super::tests::unit_rows(n, dim, 3);
        let stride = record_len(dim);
        let q8 = quantize_all(&rows, dim);
        let subset: Vec<u32> = (0..n as u32)
            .filter(|r| r.wrapping_mul(2654435761) % 100 == 0)
            .collect();
        let q = super::tests::unit_rows(1, dim, 99);
        let isa = Isa::detect();
        let qs = super::tests::unit_rows(256, dim, 98);
        let t0 = Instant::now();
        std::hint::black_box(bound(
            isa,
            &rows[..200_000 * dim],
            &q8[..200_000 * stride],
            &qs,
            dim,
            None,
        ));
        eprintln!(
            "batch 256 x 200k int8 bound: {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        let t0 = Instant::now();
        std::hint::black_box(exact(
            isa,
            &rows[..200_000 * dim],
            &qs,
            dim,
            10,
            &|_| true,
            1,
        ));
        eprintln!(
            "batch 256 x 200k f32: {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        let qqs: Vec<QuantQuery> = qs.chunks_exact(dim).map(QuantQuery::new).collect();
        let t0 = Instant::now();
        let mut o = vec![0.0f32; 64 * 256];
        for b in 0..200_000 / 64 {
            quant::scores_tile(
                isa,
                &qqs,
                &q8[b * 64 * stride..(b + 1) * 64 * stride],
                &mut o,
            );
            std::hint::black_box(&o);
        }
        eprintln!(
            "batch 256 x 200k int8 kernel only: {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        time("subset f32", &|| {
            std::hint::black_box(exact_subset(isa, &rows, &q, 10, &subset, &|_| true, 1));
        });
        time("subset int8 bound", &|| {
            std::hint::black_box(bound(isa, &rows, &q8, &q, dim, Some(&subset)));
        });
        time("full int8 bound", &|| {
            std::hint::black_box(bound(isa, &rows, &q8, &q, dim, None));
        });
        time("full f32", &|| {
            std::hint::black_box(exact(isa, &rows, &q, dim, 10, &|_| true, 1));
        });
    }

    /// The screen's pass alone (kernel, bounds, threshold test, heap), one thread.
    fn pass(isa: Isa, q8: &[u8], qq: &QuantQuery, k: usize, offer: bool) -> Screened {
        let stride = record_len(qq.dim);
        let n = q8.len() / stride;
        let mut screen = Screen::new(Keep::Bound, k);
        let mut t = f32::NEG_INFINITY;
        let (mut s, mut h) = (vec![0.0f32; SCREEN_BLOCK], vec![0.0f32; SCREEN_BLOCK]);
        let mut start = 0;
        while start < n {
            let end = (start + SCREEN_BLOCK).min(n);
            let nb = end - start;
            quant::scores_bounded(
                isa,
                qq,
                &q8[start * stride..end * stride],
                &mut s[..nb],
                &mut h[..nb],
            );
            if offer {
                for i0 in (0..nb).step_by(32) {
                    let i1 = (i0 + 32).min(nb);
                    let mut mask = 0u32;
                    for i in i0..i1 {
                        let u = s[i] + h[i];
                        mask |= ((u >= t || u.is_nan()) as u32) << (i - i0);
                    }
                    while mask != 0 {
                        let i = i0 + mask.trailing_zeros() as usize;
                        mask &= mask - 1;
                        screen.offer((start + i) as u32, s[i], h[i], &|_| true);
                        t = screen.threshold();
                    }
                }
            } else {
                std::hint::black_box((&s, &h));
            }
            start = end;
        }
        screen.finish()
    }

    /// Where the exact int8 screen's time goes on a real index (BENCHMARKS.md,
    /// "Exact scans beside their read floor, second pass"): the read floors, the
    /// kernel, the pass (kernel, threshold test, heap), the whole screen, the
    /// rescoring alone, and how many rows survive at 43 and 127 query levels.
    /// `PROBE_FILE` (.cvx, f16 rows from byte 4096, its .q8 beside it), `PROBE_ROWS`
    /// rows of 384 dimensions, `PROBE_THREADS` for the whole screens (default 1).
    /// `cargo test --release --lib probe_screen_file -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn probe_screen_file() {
        use crate::kernels::simd::F16;
        use std::hint::black_box;
        let threads: usize = std::env::var("PROBE_THREADS").map_or(1, |v| v.parse().unwrap());
        let dim = ProbeFile::DIM;
        let file = ProbeFile::open(true);
        let (rows, q8) = (file.rows(), file.q8());
        let stride = record_len(dim);
        let isa = Isa::detect();
        let qs = super::tests::unit_rows(40, dim, 7);
        let query = |r: usize| &qs[r * dim..(r + 1) * dim];
        let full = |r: usize, k: usize| {
            black_box(screened(
                isa,
                rows,
                q8,
                query(r),
                dim,
                k,
                None,
                Keep::Bound,
                &|_| true,
                threads,
            ));
        };
        let cases: Vec<Case> = vec![
            (
                "floor q8, no prefetch",
                Box::new(|_| {
                    black_box(simd::read_floor(isa, q8, false));
                }),
            ),
            (
                "floor q8, prefetch",
                Box::new(|_| {
                    black_box(simd::read_floor(isa, q8, true));
                }),
            ),
            (
                "kernel + bounds (blocks of 256)",
                Box::new(|r| {
                    let qq = QuantQuery::single(isa, query(r));
                    black_box(pass(isa, q8, &qq, 10, false));
                }),
            ),
            (
                "kernel, no half-widths",
                Box::new(|r| {
                    let qq = QuantQuery::single(isa, query(r));
                    let mut o = vec![0.0f32; BLOCK];
                    for c in q8.chunks(BLOCK * stride) {
                        quant::scores(isa, &qq, c, &mut o[..c.len() / stride]);
                        black_box(&o);
                    }
                }),
            ),
            (
                "pass k=10 (kernel, test, heap)",
                Box::new(|r| {
                    let qq = QuantQuery::single(isa, query(r));
                    black_box(pass(isa, q8, &qq, 10, true));
                }),
            ),
            (
                "pass k=132",
                Box::new(|r| {
                    let qq = QuantQuery::single(isa, query(r));
                    black_box(pass(isa, q8, &qq, 132, true));
                }),
            ),
            ("screen k=10", Box::new(|r| full(r, 10))),
            ("screen k=132", Box::new(|r| full(r, 132))),
        ];
        let times = interleaved(&cases, 40);
        let floor = times[0].0.min(times[1].0);
        for ((name, _), (med, min)) in cases.iter().zip(&times) {
            eprintln!(
                "{name:<36} {med:8.2} ms  {:.2}x floor (min {min:.2} ms)",
                med / floor
            );
        }
        // The rescoring alone, candidates of k=132, prefetch 4 / 8 / 16 ahead:
        // each case of each round rescoring a query of its own (cold rows).
        {
            let qs3 = super::tests::unit_rows(120, dim, 8);
            let q3 = |i: usize| &qs3[i * dim..(i + 1) * dim];
            let cands: Vec<Vec<(f32, u32)>> = (0..120)
                .map(|i| {
                    let qq = QuantQuery::with_levels(q3(i), quant::single_levels(isa));
                    survivors(Keep::Bound, 132, vec![pass(isa, q8, &qq, 132, true)])
                })
                .collect();
            let go = |i: usize, ahead: usize| {
                let (q, c) = (q3(i), &cands[i]);
                let live = |_| true;
                match ahead {
                    4 => black_box(rescore::<F16, 4>(isa, rows, q, c, 132, &live)),
                    8 => black_box(rescore::<F16, 8>(isa, rows, q, c, 132, &live)),
                    _ => black_box(rescore::<F16, 16>(isa, rows, q, c, 132, &live)),
                };
            };
            let cases: Vec<Case> = vec![
                ("rescore k=132, 4 ahead", Box::new(|r| go(3 * r, 4))),
                ("rescore k=132, 8 ahead", Box::new(|r| go(3 * r + 1, 8))),
                ("rescore k=132, 16 ahead", Box::new(|r| go(3 * r + 2, 16))),
            ];
            for ((name, _), (med, min)) in cases.iter().zip(interleaved(&cases, 40)) {
                eprintln!("{name:<36} {med:8.3} ms (min {min:.3} ms)");
            }
        }
        for k in [10usize, 132] {
            for levels in [quant::Q_MAX, 127] {
                let (mut sv, mut rs) = (0, 0);
                for r in 0..4 {
                    let qq = QuantQuery::with_levels(query(r), levels);
                    let p = pass(Isa::Scalar, q8, &qq, k, true);
                    let surv = survivors(Keep::Bound, k, vec![p]);
                    let want = screened(
                        isa,
                        rows,
                        q8,
                        query(r),
                        dim,
                        k,
                        None,
                        Keep::Bound,
                        &|_| true,
                        1,
                    );
                    let f = want[0].last().unwrap().score;
                    sv += surv.len();
                    rs += surv.iter().filter(|c| c.0 >= f).count();
                }
                eprintln!("k={k} query levels {levels}: survivors {} rescored at most {} (mean of 4 queries)", sv / 4, rs / 4);
            }
        }
    }

    /// Normal unit queries (Box-Muller, seeded), as the Python bench's and real
    /// embeddings are shaped (uniform ones get fewer levels with plain AVX2).
    fn gauss_queries(nq: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut u = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let mut v: Vec<f32> = (0..nq * dim)
            .map(|_| ((-2.0 * u().ln()).sqrt() * (std::f64::consts::TAU * u()).cos()) as f32)
            .collect();
        for q in v.chunks_exact_mut(dim) {
            let n = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            q.iter_mut().for_each(|x| *x /= n);
        }
        v
    }

    /// [`pass`] over rows `a..b` of `q8` (row numbers kept), counting the offers.
    fn pass_part(
        isa: Isa,
        q8: &[u8],
        qq: &QuantQuery,
        k: usize,
        a: usize,
        b: usize,
    ) -> (Screened, usize) {
        let stride = record_len(qq.dim);
        let mut screen = Screen::new(Keep::Bound, k);
        let mut t = f32::NEG_INFINITY;
        let (mut s, mut h) = (vec![0.0f32; SCREEN_BLOCK], vec![0.0f32; SCREEN_BLOCK]);
        let mut offers = 0;
        let mut start = a;
        while start < b {
            let end = (start + SCREEN_BLOCK).min(b);
            let nb = end - start;
            quant::scores_bounded(
                isa,
                qq,
                &q8[start * stride..end * stride],
                &mut s[..nb],
                &mut h[..nb],
            );
            for i0 in (0..nb).step_by(32) {
                let i1 = (i0 + 32).min(nb);
                let mut mask = 0u32;
                for i in i0..i1 {
                    let u = s[i] + h[i];
                    mask |= ((u >= t || u.is_nan()) as u32) << (i - i0);
                }
                while mask != 0 {
                    let i = i0 + mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    offers += 1;
                    screen.offer((start + i) as u32, s[i], h[i], &|_| true);
                    t = screen.threshold();
                }
            }
            start = end;
        }
        (screen.finish(), offers)
    }

    /// Where k=132 loses against k=10 (issue 16, "second pass"): per query, the
    /// read floor, the whole screen at 1 and `PROBE_THREADS` threads, and its parts
    /// timed one after the other on one thread (pass, survivors, rescoring), with
    /// the counts (offers, candidates kept by the pass, survivors, rescored rows).
    /// Normal queries. `PROBE_FILE`, `PROBE_ROWS` as [`probe_screen_file`].
    #[test]
    #[ignore]
    fn probe_screen_parts() {
        use crate::kernels::simd::F16;
        use std::hint::black_box;
        let rounds: usize = std::env::var("PROBE_ROUNDS").map_or(30, |v| v.parse().unwrap());
        let threads: usize = std::env::var("PROBE_THREADS").map_or(2, |v| v.parse().unwrap());
        let dim = ProbeFile::DIM;
        let file = ProbeFile::open(true);
        let (rows, q8) = (file.rows(), file.q8());
        let n = file.n;
        let isa = Isa::detect();
        eprintln!(
            "int8 kernel {}, intel {}",
            quant::kernel_name(isa),
            quant::x86::intel()
        );
        let qs = gauss_queries(rounds, dim, 12345);
        let query = |r: usize| &qs[(r % rounds) * dim..(r % rounds + 1) * dim];
        let full = |r: usize, k: usize, t: usize| {
            black_box(screened(
                isa,
                rows,
                q8,
                query(r),
                dim,
                k,
                None,
                Keep::Bound,
                &|_| true,
                t,
            ));
        };
        // The parts, one thread, timed inside one case: (pass, survivors, rescore) ms.
        let parts = std::cell::RefCell::new(vec![Vec::<[f64; 3]>::new(); 2]);
        let counts = std::cell::RefCell::new(vec![Vec::<[usize; 5]>::new(); 2]);
        let split = |r: usize, ki: usize, k: usize| {
            let q = query(r);
            let t0 = Instant::now();
            let qq = QuantQuery::single(isa, q);
            let (p, offers) = pass_part(isa, q8, &qq, k, 0, n);
            let t1 = Instant::now();
            let kept = p.1.len();
            let c = survivors(Keep::Bound, k, vec![p]);
            let t2 = Instant::now();
            let hits = rescore::<F16, RESCORE_AHEAD>(isa, rows, q, &c, k, &|_| true);
            let t3 = Instant::now();
            let f = hits.last().unwrap().score;
            let rescored = c.iter().filter(|x| x.0 >= f).count();
            black_box(hits);
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            parts.borrow_mut()[ki].push([ms(t0, t1), ms(t1, t2), ms(t2, t3)]);
            counts.borrow_mut()[ki].push([offers, kept, c.len(), rescored, qq.levels as usize]);
        };
        // The same on `threads` threads: (passes, survivors, rescore) ms, and the
        // offers of each thread.
        let parts_t = std::cell::RefCell::new(vec![Vec::<[f64; 3]>::new(); 2]);
        let offers_t = std::cell::RefCell::new(vec![Vec::<usize>::new(); 2]);
        let split_t = |r: usize, ki: usize, k: usize| {
            let q = query(r);
            let t0 = Instant::now();
            let qq = QuantQuery::single(isa, q);
            let ps = par_ranges(n, threads, 1, |a, b| pass_part(isa, q8, &qq, k, a, b));
            let t1 = Instant::now();
            offers_t.borrow_mut()[ki].extend(ps.iter().map(|p| p.1));
            let c = survivors(Keep::Bound, k, ps.into_iter().map(|p| p.0).collect());
            let t2 = Instant::now();
            black_box(rescore::<F16, RESCORE_AHEAD>(isa, rows, q, &c, k, &|_| {
                true
            }));
            let t3 = Instant::now();
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            parts_t.borrow_mut()[ki].push([ms(t0, t1), ms(t1, t2), ms(t2, t3)]);
        };
        let cases: Vec<Case> = vec![
            (
                "floor q8, no prefetch",
                Box::new(|_| {
                    black_box(simd::read_floor(isa, q8, false));
                }),
            ),
            ("screen k=10, 1 thread", Box::new(|r| full(r, 10, 1))),
            ("screen k=132, 1 thread", Box::new(|r| full(r, 132, 1))),
            ("parts k=10", Box::new(|r| split(r, 0, 10))),
            ("parts k=132", Box::new(|r| split(r, 1, 132))),
            (
                "floor q8, T threads",
                Box::new(|_| {
                    // As NativeIndex.read_floor runs it: a scoped thread a part.
                    let per = q8.len().div_ceil(threads).div_ceil(128) * 128;
                    black_box(std::thread::scope(|s| {
                        let parts: Vec<_> = q8
                            .chunks(per)
                            .map(|c| s.spawn(move || simd::read_floor(isa, c, false)))
                            .collect();
                        parts
                            .into_iter()
                            .map(|h| h.join().unwrap())
                            .fold(0, |a, b| a ^ b)
                    }));
                }),
            ),
            ("screen k=10, T threads", Box::new(|r| full(r, 10, threads))),
            (
                "screen k=132, T threads",
                Box::new(|r| full(r, 132, threads)),
            ),
            ("parts k=10, T threads", Box::new(|r| split_t(r, 0, 10))),
            ("parts k=132, T threads", Box::new(|r| split_t(r, 1, 132))),
        ];
        // PROBE_CASES: only these cases (their indices; the floor is always run).
        let cases: Vec<Case> = match std::env::var("PROBE_CASES") {
            Ok(v) => {
                let keep: Vec<usize> = v.split(',').map(|x| x.parse().unwrap()).collect();
                cases
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| *i == 0 || keep.contains(i))
                    .map(|(_, c)| c)
                    .collect()
            }
            Err(_) => cases,
        };
        let times = interleaved_cpu(&cases, rounds);
        let floor = times[0].0 .0;
        for ((name, _), ((wm, wmin), (cm, _))) in cases.iter().zip(&times) {
            eprintln!(
                "{name:<28} {wm:8.2} ms {:.3}x floor (min {wmin:.2}) cpu {cm:8.2}",
                wm / floor
            );
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        for (ki, k) in [10usize, 132].into_iter().enumerate() {
            if parts.borrow()[ki].len() > 2 {
                let p = &parts.borrow()[ki][2..];
                let c = &counts.borrow()[ki];
                let col = |i: usize| med(p.iter().map(|x| x[i]).collect());
                let cnt = |i: usize| med(c.iter().map(|x| x[i] as f64).collect());
                eprintln!(
                    "k={k}: pass {:.3} ms, survivors {:.3} ms, rescore {:.3} ms; offers {:.0}, kept {:.0}, survivors {:.0}, rescored {:.0}, levels {:.0} (medians)",
                    col(0), col(1), col(2), cnt(0), cnt(1), cnt(2), cnt(3), cnt(4)
                );
            }
            if parts_t.borrow()[ki].len() > 2 {
                let p = &parts_t.borrow()[ki][2..];
                let col = |i: usize| med(p.iter().map(|x| x[i]).collect());
                let o = &offers_t.borrow()[ki];
                eprintln!(
                    "k={k}, {threads} threads: passes {:.3} ms, survivors {:.3} ms, rescore {:.3} ms; offers a thread {:.0}",
                    col(0), col(1), col(2), med(o.iter().map(|x| *x as f64).collect())
                );
            }
        }
    }

    /// The int8 records' read floor with the software prefetch into L2
    /// (`_MM_HINT_T1`) at several distances, beside the bare read (no prefetch:
    /// the bench's floor) and the T0 prefetch the bench also tries, and the
    /// screen's kernel with its prefetch: is a T1 read a lower floor?
    /// `PROBE_FILE`, `PROBE_ROWS` as [`probe_screen_file`].
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn probe_floor_hints() {
        use simd::x86::read_floor_hint;
        use std::arch::x86_64::{_MM_HINT_T0 as T0, _MM_HINT_T1 as T1};
        use std::hint::black_box;
        let rounds: usize = std::env::var("PROBE_ROUNDS").map_or(30, |v| v.parse().unwrap());
        let file = ProbeFile::open(true);
        let q8 = file.q8();
        assert_eq!(Isa::best(), Isa::Avx2);
        let isa = Isa::detect();
        let qs = gauss_queries(8, ProbeFile::DIM, 99);
        let stride = record_len(ProbeFile::DIM);
        // SAFETY (all): AVX2 detected (asserted above).
        let cases: Vec<Case> = vec![
            (
                "floor, no prefetch",
                Box::new(|_| {
                    black_box(unsafe { read_floor_hint::<0, T0>(q8) });
                }),
            ),
            (
                "floor, T0 6 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { read_floor_hint::<6144, T0>(q8) });
                }),
            ),
            (
                "floor, T1 3 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { read_floor_hint::<3072, T1>(q8) });
                }),
            ),
            (
                "floor, T1 6 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { read_floor_hint::<6144, T1>(q8) });
                }),
            ),
            (
                "floor, T1 13 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { read_floor_hint::<13312, T1>(q8) });
                }),
            ),
            (
                "floor, T1 26 KiB ahead",
                Box::new(|_| {
                    black_box(unsafe { read_floor_hint::<26624, T1>(q8) });
                }),
            ),
            (
                "kernel + bounds (scores_bounded)",
                Box::new(|r| {
                    let qq = QuantQuery::single(
                        isa,
                        &qs[(r % 8) * ProbeFile::DIM..(r % 8 + 1) * ProbeFile::DIM],
                    );
                    by_blocks(q8, stride, |c, o, h| {
                        quant::scores_bounded(isa, &qq, c, o, h)
                    });
                }),
            ),
        ];
        let times = interleaved_cpu(&cases, rounds);
        let floor = times[0].0 .0;
        for ((name, _), ((wm, wmin), (cm, _))) in cases.iter().zip(&times) {
            eprintln!(
                "{name:<34} {wm:8.2} ms {:.3}x (min {wmin:.2}) cpu {cm:8.2}",
                wm / floor
            );
        }
    }

    /// One scoring kernel of the AVX2 variants probe: (query, records, scores, half-widths).
    type Kern<'a> = &'a dyn Fn(&QuantQuery, &[u8], &mut [f32], &mut [f32]);

    /// [`pass`] with `kernel` in place of `quant::scores_bounded`.
    /// Records a block (`PROBE_BLOCK`, default SCREEN_BLOCK as the screen).
    fn pass_with(kernel: Kern, q8: &[u8], qq: &QuantQuery, k: usize) -> Screened {
        static B: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let block = *B.get_or_init(|| {
            std::env::var("PROBE_BLOCK").map_or(SCREEN_BLOCK, |v| v.parse().unwrap())
        });
        let stride = record_len(qq.dim);
        let n = q8.len() / stride;
        let mut screen = Screen::new(Keep::Bound, k);
        let mut t = f32::NEG_INFINITY;
        let (mut s, mut h) = (vec![0.0f32; block], vec![0.0f32; block]);
        let mut start = 0;
        while start < n {
            let end = (start + block).min(n);
            let nb = end - start;
            kernel(
                qq,
                &q8[start * stride..end * stride],
                &mut s[..nb],
                &mut h[..nb],
            );
            for i0 in (0..nb).step_by(32) {
                let i1 = (i0 + 32).min(nb);
                let mut mask = 0u32;
                for i in i0..i1 {
                    let u = s[i] + h[i];
                    mask |= ((u >= t || u.is_nan()) as u32) << (i - i0);
                }
                while mask != 0 {
                    let i = i0 + mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    screen.offer((start + i) as u32, s[i], h[i], &|_| true);
                    t = screen.threshold();
                }
            }
            start = end;
        }
        screen.finish()
    }

    /// The plain-AVX2 screen's variants (issue 16, "The int8 screen on AVX2"):
    /// 16-bit sums of 3 chunks (43 levels), 2 (64 levels), 1 (127 levels), and
    /// per-query levels (the most that fit the lanes of 3 or 2 chunks), each as
    /// a whole one-thread screen (pass, survivors, rescoring), interleaved with
    /// the read floor on the mmap'd file; then survivors and rescored rows.
    /// `PROBE_FILE`, `PROBE_ROWS` as [`probe_screen_file`].
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn probe_avx2_levels() {
        use crate::kernels::quant::x86::scores_avx2g;
        use crate::kernels::simd::F16;
        use std::arch::x86_64::_MM_HINT_T0 as T0;
        use std::hint::black_box;
        let rounds: usize = std::env::var("PROBE_ROUNDS").map_or(30, |v| v.parse().unwrap());
        let dim = ProbeFile::DIM;
        let file = ProbeFile::open(true);
        let (rows, q8) = (file.rows(), file.q8());
        let isa = Isa::Avx2;
        let nq = 40;
        // Uniform unit queries (the probe's rows), or with PROBE_GAUSS=1 normal
        // ones (Box-Muller), as the Python bench and real embeddings are shaped.
        let qs = if std::env::var("PROBE_GAUSS").is_ok() {
            let mut s = 12345u64;
            let mut u = || {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
            };
            let mut v: Vec<f32> = (0..nq * dim)
                .map(|_| ((-2.0 * u().ln()).sqrt() * (std::f64::consts::TAU * u()).cos()) as f32)
                .collect();
            for q in v.chunks_exact_mut(dim) {
                let n = q.iter().map(|x| x * x).sum::<f32>().sqrt();
                q.iter_mut().for_each(|x| *x /= n);
            }
            v
        } else {
            super::tests::unit_rows(nq, dim, 7)
        };
        let query = |r: usize| &qs[(r % nq) * dim..(r % nq + 1) * dim];
        // SAFETY (all kernels): AVX2 is present (Isa::Avx2 only runs where
        // detected: checked below); shapes are the screen's.
        assert_eq!(Isa::best(), Isa::Avx2);
        let g3: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<4, 8, T0, 3>(qq, c, o, Some(h)) };
        let g2: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<4, 8, T0, 2>(qq, c, o, Some(h)) };
        let g1: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<4, 8, T0, 1>(qq, c, o, Some(h)) };
        type Quant<'a> = &'a dyn Fn(&[f32]) -> QuantQuery;
        let g1r8: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 16, T0, 1>(qq, c, o, Some(h)) };
        let g1r4a16: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<4, 16, T0, 1>(qq, c, o, Some(h)) };
        let g1r8a8: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 8, T0, 1>(qq, c, o, Some(h)) };
        let g3r8: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 16, T0, 3>(qq, c, o, Some(h)) };
        let g2r8: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 16, T0, 2>(qq, c, o, Some(h)) };
        let g3r8a8: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 8, T0, 3>(qq, c, o, Some(h)) };
        let g2r8a8: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 8, T0, 2>(qq, c, o, Some(h)) };
        use std::arch::x86_64::{_MM_HINT_T1 as T1, _MM_HINT_T2 as T2};
        let g3r8a16t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 16, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a32t2: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 32, T2, 3>(qq, c, o, Some(h)) };
        let g3r8a8t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 8, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a16t2: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 16, T2, 3>(qq, c, o, Some(h)) };
        let g3r8a0: Kern = &|qq, c, o, h| unsafe { scores_avx2g::<8, 0, T0, 3>(qq, c, o, Some(h)) };
        let g3r8a32t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 32, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a24t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 24, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a48t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 48, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a64t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 64, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a96t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 96, T1, 3>(qq, c, o, Some(h)) };
        let g3r8a128t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<8, 128, T1, 3>(qq, c, o, Some(h)) };
        let g3r4a64t1: Kern =
            &|qq, c, o, h| unsafe { scores_avx2g::<4, 64, T1, 3>(qq, c, o, Some(h)) };
        let vn16t1: Kern = &|qq, c, o, h| unsafe {
            crate::kernels::quant::x86::scores_vnni::<8, 16, T1>(qq, c, o, Some(h))
        };
        let vn32t1: Kern = &|qq, c, o, h| unsafe {
            crate::kernels::quant::x86::scores_vnni::<8, 32, T1>(qq, c, o, Some(h))
        };
        let vn8t1: Kern = &|qq, c, o, h| unsafe {
            crate::kernels::quant::x86::scores_vnni::<8, 8, T1>(qq, c, o, Some(h))
        };
        let vn8: Kern = &|qq, c, o, h| unsafe {
            crate::kernels::quant::x86::scores_vnni::<8, 8, T0>(qq, c, o, Some(h))
        };
        let vn24: Kern = &|qq, c, o, h| unsafe {
            crate::kernels::quant::x86::scores_vnni::<8, 24, T0>(qq, c, o, Some(h))
        };
        let vn: Kern = &|qq, c, o, h| unsafe {
            crate::kernels::quant::x86::scores_vnni::<8, 16, T0>(qq, c, o, Some(h))
        };
        let all: Vec<(&str, Kern, Quant)> = vec![
            ("3 chunks, 43 levels", g3, &|q| {
                QuantQuery::with_levels(q, 43)
            }),
            ("2 chunks, 64 levels", g2, &|q| {
                QuantQuery::with_levels(q, 64)
            }),
            ("1 chunk, 127 levels", g1, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("3 chunks, per-query levels", g3, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("2 chunks, per-query levels", g2, &|q| {
                QuantQuery::widest(q, 2)
            }),
            ("1 chunk, 127, R8 A16", g1r8, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("1 chunk, 127, R4 A16", g1r4a16, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("1 chunk, 127, R8 A8", g1r8a8, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("3 chunks, 43, R8 A16", g3r8, &|q| {
                QuantQuery::with_levels(q, 43)
            }),
            ("vnni 127 R8 A16", vn, &|q| QuantQuery::with_levels(q, 127)),
            ("3 chunks, per-query, R8 A16", g3r8, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("2 chunks, per-query, R8 A16", g2r8, &|q| {
                QuantQuery::widest(q, 2)
            }),
            ("2 chunks, 64, R8 A16", g2r8, &|q| {
                QuantQuery::with_levels(q, 64)
            }),
            ("3 chunks, 43, R8 A8", g3r8a8, &|q| {
                QuantQuery::with_levels(q, 43)
            }),
            ("3 chunks, per-query, R8 A8", g3r8a8, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("2 chunks, per-query, R8 A8", g2r8a8, &|q| {
                QuantQuery::widest(q, 2)
            }),
            ("1 chunk, 127, R8 A8 (again)", g1r8a8, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("vnni 127 R8 A8", vn8, &|q| QuantQuery::with_levels(q, 127)),
            ("vnni 127 R8 A24", vn24, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("3 chunks, per-query, R8 A16 T1", g3r8a16t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A32 T2", g3r8a32t2, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A8 T1", g3r8a8t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A16 T2", g3r8a16t2, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 none", g3r8a0, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A32 T1", g3r8a32t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A24 T1", g3r8a24t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A48 T1", g3r8a48t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A64 T1", g3r8a64t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A96 T1", g3r8a96t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R8 A128 T1", g3r8a128t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("3 chunks, per-query, R4 A64 T1", g3r4a64t1, &|q| {
                QuantQuery::widest(q, 3)
            }),
            ("vnni 127 R8 A16 T1", vn16t1, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("vnni 127 R8 A32 T1", vn32t1, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
            ("vnni 127 R8 A8 T1", vn8t1, &|q| {
                QuantQuery::with_levels(q, 127)
            }),
        ];
        let pick: Vec<usize> = std::env::var("PROBE_VARIANTS")
            .map_or((0..all.len()).collect(), |v| {
                v.split(',').map(|x| x.parse().unwrap()).collect()
            });
        let variants: Vec<(&str, Kern, Quant)> = pick.iter().map(|&i| all[i]).collect();
        let whole = |kern: Kern, quant: Quant, q: &[f32], k: usize| -> Vec<Hit> {
            let qq = quant(q);
            let p = pass_with(kern, q8, &qq, k);
            let c = survivors(Keep::Bound, k, vec![p]);
            rescore::<F16, RESCORE_AHEAD>(isa, rows, q, &c, k, &|_| true)
        };
        // Same answers as the production screen, every variant.
        for r in 0..4 {
            for k in [10usize, 132] {
                let want = screened(
                    isa,
                    rows,
                    q8,
                    query(r),
                    dim,
                    k,
                    None,
                    Keep::Bound,
                    &|_| true,
                    1,
                );
                for (name, kern, quant) in &variants {
                    let got = whole(*kern, *quant, query(r), k);
                    assert!(got == want[0], "{name} k={k} query {r}");
                }
            }
        }
        let names: Vec<String> = [10usize, 132]
            .iter()
            .flat_map(|k| variants.iter().map(move |v| format!("k={k} {}", v.0)))
            .collect();
        let mut cases: Vec<Case> = vec![(
            "floor q8, no prefetch",
            Box::new(|_| {
                black_box(simd::read_floor(isa, q8, false));
            }),
        )];
        for (i, k) in [10usize, 132].into_iter().enumerate() {
            for (j, (_, kern, quant)) in variants.iter().enumerate() {
                let (kern, quant) = (*kern, *quant);
                cases.push((
                    names[i * variants.len() + j].as_str(),
                    Box::new(move |r| {
                        black_box(whole(kern, quant, query(r), k));
                    }),
                ));
            }
        }
        // Wall and thread CPU time of each case, interleaved round by round.
        let times = interleaved_cpu(&cases, rounds);
        let (floor, floor_cpu) = (times[0].0 .0, times[0].1 .0);
        for ((name, _), ((wm, wmin), (cm, _))) in cases.iter().zip(&times) {
            eprintln!(
                "{name:<40} {wm:8.2} ms {:.3}x floor (min {wmin:.2}) cpu {cm:8.2} ms {:.3}x",
                wm / floor,
                cm / floor_cpu
            );
        }
        for k in [10usize, 132] {
            for (name, _, quant) in &variants {
                let (mut sv, mut rs, mut lv) = (0, 0, 0);
                let m = 8;
                for r in 0..m {
                    let qq = quant(query(r));
                    lv += qq.levels;
                    let p = pass(Isa::Scalar, q8, &qq, k, true);
                    let surv = survivors(Keep::Bound, k, vec![p]);
                    let want = screened(
                        isa,
                        rows,
                        q8,
                        query(r),
                        dim,
                        k,
                        None,
                        Keep::Bound,
                        &|_| true,
                        1,
                    );
                    let f = want[0].last().unwrap().score;
                    sv += surv.len();
                    rs += surv.iter().filter(|c| c.0 >= f).count();
                }
                eprintln!(
                    "k={k} {name:<28} levels {:5.1} survivors {:6} rescored at most {:5} (means of {m} queries)",
                    lv as f64 / m as f64,
                    sv / m,
                    rs / m
                );
            }
        }
    }

    /// The exact f16 scan's kernel shapes (rows an iteration, rows prefetched
    /// ahead), each as the whole one-thread scan `exact` runs (blocks of BLOCK,
    /// top-k offers), interleaved with the f16 rows' read floors on the mmap'd
    /// file, wall and thread CPU. `PROBE_FILE`, `PROBE_ROWS` as [`probe_screen_file`].
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn probe_f16_scan() {
        use crate::kernels::simd::x86::scores_rows;
        use crate::kernels::simd::F16;
        use std::arch::x86_64::{_MM_HINT_T0 as T0, _MM_HINT_T1 as T1};
        use std::hint::black_box;
        let rounds: usize = std::env::var("PROBE_ROUNDS").map_or(30, |v| v.parse().unwrap());
        let dim = ProbeFile::DIM;
        let file = ProbeFile::open(false);
        let (n, rows, data) = (file.n, file.rows(), file.row_bytes());
        assert_eq!(Isa::best(), Isa::Avx2);
        let isa = Isa::Avx2;
        let nq = 40;
        let qs = super::tests::unit_rows(nq, dim, 7);
        let query = |r: usize| &qs[(r % nq) * dim..(r % nq + 1) * dim];
        type K<'a> = &'a dyn Fn(&[f32], &[F16], &mut [f32]);
        // SAFETY (all): AVX2+FMA+F16C detected (Isa::Avx2); shapes as `exact`'s.
        let all: Vec<(&str, K)> = vec![
            ("4 rows, 8 ahead (main)", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 8, T0>(q, r, o)
            }),
            ("4 rows, none", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 0, T0>(q, r, o)
            }),
            ("4 rows, 16 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 16, T0>(q, r, o)
            }),
            ("8 rows, 8 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 8, 8, T0>(q, r, o)
            }),
            ("8 rows, 16 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 8, 16, T0>(q, r, o)
            }),
            ("8 rows, none", &|q, r, o| unsafe {
                scores_rows::<F16, 8, 0, T0>(q, r, o)
            }),
            ("4 rows, 4 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 4, T0>(q, r, o)
            }),
            ("8 rows, 24 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 8, 24, T0>(q, r, o)
            }),
            ("4 rows, 12 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 12, T0>(q, r, o)
            }),
            ("4 rows, 24 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 24, T0>(q, r, o)
            }),
            ("4 rows, 32 ahead", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 32, T0>(q, r, o)
            }),
            ("4 rows, 8 ahead T1", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 8, T1>(q, r, o)
            }),
            ("4 rows, 16 ahead T1", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 16, T1>(q, r, o)
            }),
            ("4 rows, 32 ahead T1", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 32, T1>(q, r, o)
            }),
            ("8 rows, 32 ahead T1", &|q, r, o| unsafe {
                scores_rows::<F16, 8, 32, T1>(q, r, o)
            }),
            ("4 rows, 4 ahead T1", &|q, r, o| unsafe {
                scores_rows::<F16, 4, 4, T1>(q, r, o)
            }),
        ];
        let pick: Vec<usize> = std::env::var("PROBE_VARIANTS")
            .map_or((0..all.len()).collect(), |v| {
                v.split(',').map(|x| x.parse().unwrap()).collect()
            });
        let scan = |kern: K, q: &[f32], k: usize| -> Vec<Hit> {
            let mut top = TopK::new(k);
            let mut buf = vec![0.0f32; BLOCK];
            let mut start = 0;
            while start < n {
                let end = (start + BLOCK).min(n);
                let out = &mut buf[..end - start];
                kern(q, &rows[start * dim..end * dim], out);
                for (i, s) in out.iter().enumerate() {
                    top.offer(
                        Hit {
                            score: *s,
                            row: (start + i) as u32,
                        },
                        &|_| true,
                    );
                }
                start = end;
            }
            top.into_sorted()
        };
        for r in 0..3 {
            let want = exact(isa, rows, query(r), dim, 10, &|_| true, 1);
            for &i in &pick {
                assert!(scan(all[i].1, query(r), 10) == want[0], "{}", all[i].0);
            }
        }
        let mut cases: Vec<Case> = vec![
            (
                "floor f16, no prefetch",
                Box::new(|_| {
                    black_box(simd::read_floor(isa, data, false));
                }),
            ),
            (
                "floor f16, prefetch",
                Box::new(|_| {
                    black_box(simd::read_floor(isa, data, true));
                }),
            ),
        ];
        for &i in &pick {
            let kern = all[i].1;
            cases.push((
                all[i].0,
                Box::new(move |r| {
                    black_box(scan(kern, query(r), 10));
                }),
            ));
        }
        let times = interleaved_cpu(&cases, rounds);
        let w: Vec<f64> = times.iter().map(|t| t.0 .0).collect();
        let c: Vec<f64> = times.iter().map(|t| t.1 .0).collect();
        let (fw, fc) = (w[0].min(w[1]), if w[0] <= w[1] { c[0] } else { c[1] });
        for (i, (name, _)) in cases.iter().enumerate() {
            eprintln!(
                "{name:<28} {:8.2} ms {:.3}x floor  cpu {:8.2} ms {:.3}x",
                w[i],
                w[i] / fw,
                c[i],
                c[i] / fc
            );
        }
    }
}

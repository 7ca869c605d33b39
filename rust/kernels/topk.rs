//! Exact and quantized top-k over row-major f32 rows.
//!
//! Order is total and deterministic: a higher score first, and on equal scores
//! the lower row first. Rows whose score is NaN (only possible with a corrupt
//! file; inputs are validated) are never returned. `live(row)` is asked only of
//! rows that would enter the result, so masking costs nothing on the rows that
//! lose anyway.
use super::quant::{self, QuantQuery};
use super::simd::{self, Isa};

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

fn order(a: &Hit, b: &Hit) -> std::cmp::Ordering {
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
/// Below this many rows per thread, one thread is faster than spawning.
const MIN_ROWS_PER_THREAD: usize = 16_384;

/// Run `f(start, end)` on up to `threads` contiguous parts of `0..n`.
fn par_ranges<T: Send>(
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

/// Exact top-k of `q` over every row of `rows` (`n * dim` values).
pub fn exact(
    isa: Isa,
    rows: &[f32],
    q: &[f32],
    k: usize,
    live: &(dyn Fn(u32) -> bool + Sync),
    threads: usize,
) -> Vec<Hit> {
    let dim = q.len();
    let n = rows.len() / dim;
    let parts = par_ranges(n, threads, MIN_ROWS_PER_THREAD, |a, b| {
        let mut top = TopK::new(k);
        let mut buf = [0.0f32; BLOCK];
        let mut start = a;
        while start < b {
            let end = (start + BLOCK).min(b);
            let out = &mut buf[..end - start];
            simd::scores(isa, q, &rows[start * dim..end * dim], out);
            for (i, s) in out.iter().enumerate() {
                top.offer(
                    Hit {
                        score: *s,
                        row: (start + i) as u32,
                    },
                    live,
                );
            }
            start = end;
        }
        top.into_sorted()
    });
    merge(parts, k)
}

/// Exact top-k over the listed rows only (ascending, in range): the cost
/// follows `subset.len()`, not the number of rows.
pub fn exact_subset(
    isa: Isa,
    rows: &[f32],
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

/// How many candidates the int8 scan hands to the f32 rescoring for a given k.
/// Chosen by measurement on all-MiniLM-L6-v2 vectors (see benches/vectors.md).
pub fn default_candidates(k: usize) -> usize {
    k.saturating_mul(4).max(k.saturating_add(96))
}

/// Quantized top-k: the int8 copy (`q8`, covering rows `0..q8_rows`) is
/// scanned for the best `candidates` rows by approximate score; those are
/// rescored in f32 from `rows`, and rows not covered by the copy are scored
/// exactly. The returned scores are exact f32 scores.
#[allow(clippy::too_many_arguments)]
pub fn quantized(
    isa: Isa,
    rows: &[f32],
    q8: &[u8],
    q: &[f32],
    k: usize,
    candidates: usize,
    live: &(dyn Fn(u32) -> bool + Sync),
    threads: usize,
) -> Vec<Hit> {
    let dim = q.len();
    let n = rows.len() / dim;
    let stride = quant::record_len(dim);
    let q8_rows = (q8.len() / stride).min(n);
    let c = candidates.max(k);
    let qq = QuantQuery::new(q);
    let parts = par_ranges(q8_rows, threads, MIN_ROWS_PER_THREAD, |a, b| {
        let mut top = TopK::new(c);
        let mut buf = [0.0f32; BLOCK];
        let mut start = a;
        while start < b {
            let end = (start + BLOCK).min(b);
            let out = &mut buf[..end - start];
            quant::scores(isa, &qq, &q8[start * stride..end * stride], out);
            for (i, s) in out.iter().enumerate() {
                top.offer(
                    Hit {
                        score: *s,
                        row: (start + i) as u32,
                    },
                    live,
                );
            }
            start = end;
        }
        top.into_sorted()
    });
    let mut cand: Vec<u32> = merge(parts, c).into_iter().map(|h| h.row).collect();
    cand.sort_unstable();
    let mut top = TopK::new(k);
    for r in cand {
        let r0 = r as usize * dim;
        top.offer(
            Hit {
                score: simd::dot(isa, q, &rows[r0..r0 + dim]),
                row: r,
            },
            live,
        );
    }
    let mut parts = vec![top.into_sorted()];
    if q8_rows < n {
        let tail = exact(
            isa,
            &rows[q8_rows * dim..],
            q,
            k,
            &|r| live(r + q8_rows as u32),
            threads,
        );
        parts.push(
            tail.into_iter()
                .map(|h| Hit {
                    score: h.score,
                    row: h.row + q8_rows as u32,
                })
                .collect(),
        );
    }
    merge(parts, k)
}

/// Rows per batch block: 16 rows of 384 f32 (24 KiB) stay in L1 while every
/// query passes over them.
const BATCH_BLOCK: usize = 16;

/// Exact top-k of each of `m` queries (`queries.len() == m * dim`); the matrix
/// is read once per batch, not once per query.
pub fn exact_batch(
    isa: Isa,
    rows: &[f32],
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
    let parts = par_ranges(
        n,
        threads,
        (MIN_ROWS_PER_THREAD / m).max(BATCH_BLOCK),
        |a, b| {
            let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(k)).collect();
            let mut buf = vec![0.0f32; BATCH_BLOCK * m];
            let mut start = a;
            while start < b {
                let end = (start + BATCH_BLOCK).min(b);
                let out = &mut buf[..(end - start) * m];
                simd::scores_tile(isa, dim, &rows[start * dim..end * dim], queries, out);
                for (i, scores) in out.chunks_exact(m).enumerate() {
                    let row = (start + i) as u32;
                    for (top, s) in tops.iter_mut().zip(scores) {
                        top.offer(Hit { score: *s, row }, live);
                    }
                }
                start = end;
            }
            tops.into_iter().map(TopK::into_sorted).collect::<Vec<_>>()
        },
    );
    transpose_merge(parts, m, k)
}

/// Quantized top-k for a batch: int8 scan per query for candidates, f32 rescoring.
#[allow(clippy::too_many_arguments)]
pub fn quantized_batch(
    isa: Isa,
    rows: &[f32],
    q8: &[u8],
    queries: &[f32],
    dim: usize,
    k: usize,
    candidates: usize,
    live: &(dyn Fn(u32) -> bool + Sync),
    threads: usize,
) -> Vec<Vec<Hit>> {
    let n = rows.len() / dim;
    let m = queries.len() / dim;
    let stride = quant::record_len(dim);
    let q8_rows = (q8.len() / stride).min(n);
    let c = candidates.max(k);
    let qqs: Vec<QuantQuery> = queries.chunks_exact(dim).map(QuantQuery::new).collect();
    let parts = par_ranges(
        q8_rows,
        threads,
        (MIN_ROWS_PER_THREAD / m.max(1)).max(64),
        |a, b| {
            let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(c)).collect();
            // 64 int8 rows (25 KiB at 384-d) stay in L1 while the queries pass over them.
            const QB: usize = 64;
            let mut buf = [0.0f32; QB];
            let mut start = a;
            while start < b {
                let end = (start + QB).min(b);
                let recs = &q8[start * stride..end * stride];
                for (qq, top) in qqs.iter().zip(tops.iter_mut()) {
                    let out = &mut buf[..end - start];
                    quant::scores(isa, qq, recs, out);
                    for (i, s) in out.iter().enumerate() {
                        top.offer(
                            Hit {
                                score: *s,
                                row: (start + i) as u32,
                            },
                            live,
                        );
                    }
                }
                start = end;
            }
            tops.into_iter().map(TopK::into_sorted).collect::<Vec<_>>()
        },
    );
    let cands = transpose_merge(parts, m, c);
    let tail = if q8_rows < n {
        let t = exact_batch(
            isa,
            &rows[q8_rows * dim..],
            queries,
            dim,
            k,
            &|r| live(r + q8_rows as u32),
            threads,
        );
        Some(t)
    } else {
        None
    };
    cands
        .into_iter()
        .enumerate()
        .map(|(j, cand)| {
            let q = &queries[j * dim..(j + 1) * dim];
            let mut rs: Vec<u32> = cand.into_iter().map(|h| h.row).collect();
            rs.sort_unstable();
            let mut top = TopK::new(k);
            for r in rs {
                let r0 = r as usize * dim;
                top.offer(
                    Hit {
                        score: simd::dot(isa, q, &rows[r0..r0 + dim]),
                        row: r,
                    },
                    live,
                );
            }
            let mut parts = vec![top.into_sorted()];
            if let Some(t) = &tail {
                parts.push(
                    t[j].iter()
                        .map(|h| Hit {
                            score: h.score,
                            row: h.row + q8_rows as u32,
                        })
                        .collect(),
                );
            }
            merge(parts, k)
        })
        .collect()
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

    fn unit_rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut v: Vec<f32> = (0..n * dim)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        for row in v.chunks_exact_mut(dim) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            row.iter_mut().for_each(|x| *x /= norm);
        }
        v
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

    #[test]
    fn exact_matches_brute_force_for_every_isa_and_thread_count() {
        let (n, dim) = (40_000, 48);
        let rows = unit_rows(n, dim, 1);
        let q = unit_rows(1, dim, 2);
        let live = |r: u32| r % 7 != 3;
        let want = brute(&rows, &q, 25, live);
        for isa in Isa::available() {
            for threads in [1, 2, 3] {
                let got: Vec<u32> = exact(isa, &rows, &q, 25, &live, threads)
                    .iter()
                    .map(|h| h.row)
                    .collect();
                assert_eq!(got, want, "{isa:?} threads {threads}");
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
        for isa in Isa::available() {
            let hits = exact(isa, &rows, &q, 100, &|_| true, 2);
            let got: Vec<u32> = hits.iter().map(|h| h.row).collect();
            assert_eq!(got, vec![0, 2, 4, 1, 3, 5]);
            let sub = exact_subset(isa, &rows, &q, 2, &[1, 2, 4, 5], &|_| true, 1);
            assert_eq!(sub.iter().map(|h| h.row).collect::<Vec<_>>(), vec![2, 4]);
        }
    }

    #[test]
    fn subset_and_batch_match_exact() {
        let (n, dim) = (5_000, 40);
        let rows = unit_rows(n, dim, 3);
        let qs = unit_rows(7, dim, 4);
        let subset: Vec<u32> = (0..n as u32).filter(|r| r % 3 == 0).collect();
        for isa in Isa::available() {
            let batch = exact_batch(isa, &rows, &qs, dim, 10, &|r| r != 17, 2);
            for (j, q) in qs.chunks_exact(dim).enumerate() {
                let want = brute(&rows, q, 10, |r| r != 17);
                assert_eq!(batch[j].iter().map(|h| h.row).collect::<Vec<_>>(), want);
                let sub = exact_subset(isa, &rows, q, 10, &subset, &|_| true, 2);
                assert_eq!(
                    sub.iter().map(|h| h.row).collect::<Vec<_>>(),
                    brute(&rows, q, 10, |r| r % 3 == 0)
                );
            }
        }
    }

    #[test]
    fn quantized_returns_the_exact_top_k_on_random_data() {
        let (n, dim) = (20_000, 64);
        let rows = unit_rows(n, dim, 5);
        let stride = record_len(dim);
        // The copy covers only part of the rows: the tail is scored exactly.
        let covered = 15_000;
        let mut q8 = vec![0u8; covered * stride];
        for r in 0..covered {
            quantize_row(
                &rows[r * dim..(r + 1) * dim],
                &mut q8[r * stride..(r + 1) * stride],
            );
        }
        let qs = unit_rows(5, dim, 6);
        for isa in Isa::available() {
            let batch = quantized_batch(isa, &rows, &q8, &qs, dim, 10, 200, &|_| true, 2);
            for (j, q) in qs.chunks_exact(dim).enumerate() {
                let want = exact(isa, &rows, q, 10, &|_| true, 1);
                let got = quantized(isa, &rows, &q8, q, 10, 200, &|_| true, 2);
                assert_eq!(got, want, "{isa:?} query {j}");
                assert_eq!(batch[j], want, "{isa:?} batch query {j}");
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

    #[test]
    #[ignore]
    fn probe_kernel_speed() {
        let (n, dim) = (100_000usize, 384usize);
        let rows: Vec<f32> = (0..n * dim)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let stride = record_len(dim);
        let mut q8 = vec![0u8; n * stride];
        for r in 0..n {
            quantize_row(
                &rows[r * dim..(r + 1) * dim],
                &mut q8[r * stride..(r + 1) * stride],
            );
        }
        let q: Vec<f32> = rows[..dim].to_vec();
        let isa = Isa::detect();
        let time = |name: &str, f: &dyn Fn()| {
            f();
            let t = Instant::now();
            for _ in 0..10 {
                f();
            }
            eprintln!("{name}: {:.2} ms", t.elapsed().as_secs_f64() * 100.0);
        };
        let mut out = vec![0.0f32; n];
        time("f32 scores only", &|| {
            let mut o = vec![0.0f32; n];
            simd::scores(isa, &q, &rows, &mut o);
            std::hint::black_box(&o);
        });
        time("f32 exact top-10", &|| {
            std::hint::black_box(exact(isa, &rows, &q, 10, &|_| true, 1));
        });
        let qq = QuantQuery::new(&q);
        time("int8 scores only", &|| {
            let mut o = vec![0.0f32; n];
            quant::scores(isa, &qq, &q8, &mut o);
            std::hint::black_box(&o);
        });
        time("int8 top-10", &|| {
            std::hint::black_box(quantized(isa, &rows, &q8, &q, 10, 106, &|_| true, 1));
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
        out[0] = 1.0;
        std::hint::black_box(&out);
    }
}

//! An opt-in approximate index over the vector file: IVF (inverted file).
//!
//! A spherical k-means coarse quantizer (trained on a seeded sample of the f16
//! rows) splits the rows into `nlist` lists; each row belongs to the list of
//! its nearest centroid. A search scores the query against every centroid,
//! probes the `nprobe` best lists, and returns the exact top-k *of the rows in
//! those lists* (plus every row appended after the build, the "tail"):
//!
//! - the lists hold a copy of the rows' int8 records (quant.rs), stored list
//!   after list, so that a probe reads contiguous bytes (a scattered gather of
//!   rows from the scan file costs ~5x more per row: TLB and cache misses);
//! - every int8 score carries its proven bound (quant.rs), and each row the
//!   bound cannot rule out is rescored from its f16 row in the scan file, so
//!   the returned scores are exactly the exact scan's scores, and with
//!   `nprobe = nlist` the result is the exact scan's (same rows, same order).
//!
//! So the only approximation is which lists are probed: a true neighbour in a
//! list that is not probed is missed. Recall@10 against exact is measured by
//! benches/bench_ann.py at each `nprobe`.
//!
//! ```text
//! path.ivf   header (4096 bytes), then the body:
//!   0  8  magic b"CTXIVF\0\x01"
//!   8  4  version u32 (IVF_VERSION)
//!  12  4  dim u32
//!  16  4  nlist u32
//!  20  4  record_len u32 (quant::record_len(dim))
//!  24  8  rows u64: rows of the scan file covered (0..rows)
//!  32 16  uuid of the scan file it was built from
//!  48  8  seed u64 (of the sample and the initial centroids)
//!  56  8  body length u64
//!  64  8  checksum u64 of the body (row_hash of each 1 MiB chunk, folded)
//! 504  8  FNV-1a 64 of bytes 0..504
//! body: centroids nlist x dim f32 LE | offsets (nlist + 1) u64 LE |
//!       row numbers (rows) u32 LE, list after list, ascending in a list |
//!       zero padding to a multiple of 64 | records (rows x record_len), in
//!       the order of the row numbers
//! ```
//!
//! The file is derived data: Python (cortex.ann) builds it on request, checks
//! it against the scan file's uuid and row count, and rebuilds or ignores it
//! when stale. Opening verifies the checksum, the offsets and that the row
//! numbers are a permutation of `0..rows`: a damaged file is a format error,
//! never a silently wrong answer. Rows masked after the build (deleted or
//! superseded) are skipped through the scan file's live flags, as in the
//! exact scan.
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::files::{self, Open};
use super::quant::{self, QuantQuery};
use super::simd::{self, widen, Isa, F16};
use super::topk::{self, Hit, Keep, Screen};
use super::vecfile::{fnv1a, row_hash};
use crate::errors::{Error, Result};

pub const IVF_MAGIC: &[u8; 8] = b"CTXIVF\0\x01";
pub const IVF_VERSION: u32 = 1;
const HEADER_LEN: usize = 4096;
const CHECKSUM_AT: usize = 504;
const CHUNK: usize = 1 << 20;

/// How to build.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub nlist: usize,
    /// Rows sampled to train the centroids.
    pub sample: usize,
    /// k-means iterations.
    pub iters: usize,
    pub seed: u64,
    pub threads: usize,
}

/// A built index, in memory (what the file holds).
pub struct Built {
    pub dim: usize,
    pub centroids: Vec<f32>,
    pub offsets: Vec<u64>,
    pub order: Vec<u32>,
    pub records: Vec<u8>,
}

/// splitmix64: a seeded stream for the sample (no dependency needed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Fewest rows per thread of the build (k-means assignment).
const MIN_ROWS_PER_THREAD: usize = 1024;

/// Rows per block of the assignment: the block's widened rows stay in L1/L2
/// while the centroids stream past.
const ASSIGN_BLOCK: usize = 32;

/// The nearest centroid (by inner product) of each of the `n` f32 vectors
/// `vecs` (n x dim), with `threads` threads.
fn nearest(isa: Isa, dim: usize, centroids: &[f32], vecs: &[f32], threads: usize) -> Vec<u32> {
    let n = vecs.len() / dim;
    let nlist = centroids.len() / dim;
    topk::par_ranges(n, threads, MIN_ROWS_PER_THREAD, |a, b| {
        let mut out = Vec::with_capacity(b - a);
        let mut s = vec![0.0f32; nlist * ASSIGN_BLOCK];
        let mut i = a;
        while i < b {
            let e = (i + ASSIGN_BLOCK).min(b);
            let nq = e - i;
            let qs = &vecs[i * dim..e * dim];
            let s = &mut s[..nlist * nq];
            simd::scores_tile(isa, dim, centroids, qs, s);
            for j in 0..nq {
                let (mut best, mut bs) = (0u32, f32::NEG_INFINITY);
                for c in 0..nlist {
                    let v = s[c * nq + j];
                    if v > bs {
                        bs = v;
                        best = c as u32;
                    }
                }
                out.push(best);
            }
            i = e;
        }
        out
    })
    .into_iter()
    .flatten()
    .collect()
}

fn widen_rows(rows: &[F16], dim: usize, which: impl Iterator<Item = usize>) -> Vec<f32> {
    let mut out = Vec::new();
    let mut buf = vec![0.0f32; dim];
    for r in which {
        widen(&rows[r * dim..(r + 1) * dim], &mut buf);
        out.extend_from_slice(&buf);
    }
    out
}

/// Train the centroids and assign rows `0..count` of `rows` (f16, count x dim).
pub fn build(isa: Isa, rows: &[F16], dim: usize, count: usize, p: &Params) -> Result<Built> {
    if count == 0 {
        return Err(Error::Invalid(
            "the vector index is empty: nothing to build an approximate index of".into(),
        ));
    }
    if p.nlist == 0 || p.iters == 0 || p.sample == 0 {
        return Err(Error::Invalid(
            "nlist, sample and iters must be >= 1".into(),
        ));
    }
    let mut rng = Rng(p.seed);
    // A seeded sample of distinct rows (partial Fisher-Yates).
    let s = p.sample.min(count);
    let mut pick: Vec<u32> = (0..count as u32).collect();
    for i in 0..s {
        let j = i + rng.below(count - i);
        pick.swap(i, j);
    }
    pick.truncate(s);
    pick.sort_unstable();
    let sample = widen_rows(rows, dim, pick.iter().map(|&r| r as usize));
    let nlist = p.nlist.min(s);
    // Initial centroids: nlist distinct sample vectors, seeded.
    let mut idx: Vec<usize> = (0..s).collect();
    for i in 0..nlist {
        let j = i + rng.below(s - i);
        idx.swap(i, j);
    }
    let mut cent: Vec<f32> = idx[..nlist]
        .iter()
        .flat_map(|&i| sample[i * dim..(i + 1) * dim].iter().copied())
        .collect();
    for it in 0..p.iters {
        let assign = nearest(isa, dim, &cent, &sample, p.threads);
        let mut sums = vec![0.0f64; nlist * dim];
        let mut counts = vec![0usize; nlist];
        for (i, &c) in assign.iter().enumerate() {
            let c = c as usize;
            counts[c] += 1;
            for (acc, v) in sums[c * dim..(c + 1) * dim]
                .iter_mut()
                .zip(&sample[i * dim..(i + 1) * dim])
            {
                *acc += *v as f64;
            }
        }
        for c in 0..nlist {
            let dst = &mut cent[c * dim..(c + 1) * dim];
            let src = &sums[c * dim..(c + 1) * dim];
            let norm = src.iter().map(|v| v * v).sum::<f64>().sqrt();
            if counts[c] == 0 || norm == 0.0 || !norm.is_finite() {
                // An empty list: restart it at a seeded sample vector.
                let i = Rng(p.seed ^ ((it * nlist + c) as u64)).below(s);
                dst.copy_from_slice(&sample[i * dim..(i + 1) * dim]);
            } else {
                for (d, v) in dst.iter_mut().zip(src) {
                    *d = (v / norm) as f32;
                }
            }
        }
    }
    drop(sample);
    // Assign every row, a block at a time (widened on the fly).
    let assign: Vec<u32> = topk::par_ranges(count, p.threads, MIN_ROWS_PER_THREAD, |a, b| {
        let mut out = Vec::with_capacity(b - a);
        let step = 4096;
        let mut i = a;
        while i < b {
            let e = (i + step).min(b);
            let block = widen_rows(rows, dim, i..e);
            out.extend(nearest(isa, dim, &cent, &block, 1));
            i = e;
        }
        out
    })
    .into_iter()
    .flatten()
    .collect();
    // Group by list (counting sort keeps rows ascending within a list).
    let mut offsets = vec![0u64; nlist + 1];
    for &c in &assign {
        offsets[c as usize + 1] += 1;
    }
    for c in 0..nlist {
        offsets[c + 1] += offsets[c];
    }
    let mut next: Vec<u64> = offsets[..nlist].to_vec();
    let mut order = vec![0u32; count];
    for (r, &c) in assign.iter().enumerate() {
        order[next[c as usize] as usize] = r as u32;
        next[c as usize] += 1;
    }
    // The int8 records in list order, each of its widened f16 row (as the scan
    // file's int8 copy: vecfile.rs).
    let rl = quant::record_len(dim);
    let mut records = vec![0u8; count * rl];
    {
        let chunks: Vec<(usize, &mut [u8])> = records
            .chunks_mut(rl * 8192)
            .enumerate()
            .map(|(i, c)| (i * 8192, c))
            .collect();
        let per = chunks.len().div_ceil(p.threads.max(1)).max(1);
        let mut groups: Vec<Vec<(usize, &mut [u8])>> = Vec::new();
        let mut it = chunks.into_iter().peekable();
        while it.peek().is_some() {
            groups.push(it.by_ref().take(per).collect());
        }
        let order = &order;
        std::thread::scope(|sc| {
            for g in groups {
                sc.spawn(move || {
                    let mut buf = vec![0.0f32; dim];
                    for (start, chunk) in g {
                        for (j, rec) in chunk.chunks_exact_mut(rl).enumerate() {
                            let r = order[start + j] as usize;
                            widen(&rows[r * dim..(r + 1) * dim], &mut buf);
                            quant::quantize_row(&buf, rec);
                        }
                    }
                });
            }
        });
    }
    Ok(Built {
        dim,
        centroids: cent,
        offsets,
        order,
        records,
    })
}

fn body_checksum(body: &[u8]) -> u64 {
    body.chunks(CHUNK).enumerate().fold(0u64, |h, (i, c)| {
        (h ^ row_hash(c).wrapping_add(i as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    })
}

fn pad64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

/// Write `b` (built from the scan file of `uuid`) at `path`: under a
/// temporary name, synced, then renamed into place.
pub fn write(path: &Path, b: &Built, uuid: [u8; 16], seed: u64) -> Result<()> {
    let nlist = b.offsets.len() - 1;
    let rows = b.order.len();
    let mut body: Vec<u8> =
        Vec::with_capacity(nlist * b.dim * 4 + (nlist + 1) * 8 + rows * 4 + 64 + b.records.len());
    for v in &b.centroids {
        body.extend_from_slice(&v.to_le_bytes());
    }
    for v in &b.offsets {
        body.extend_from_slice(&v.to_le_bytes());
    }
    for v in &b.order {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.resize(pad64(body.len()), 0);
    body.extend_from_slice(&b.records);
    let mut h = vec![0u8; HEADER_LEN];
    h[..8].copy_from_slice(IVF_MAGIC);
    h[8..12].copy_from_slice(&IVF_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(b.dim as u32).to_le_bytes());
    h[16..20].copy_from_slice(&(nlist as u32).to_le_bytes());
    h[20..24].copy_from_slice(&(quant::record_len(b.dim) as u32).to_le_bytes());
    h[24..32].copy_from_slice(&(rows as u64).to_le_bytes());
    h[32..48].copy_from_slice(&uuid);
    h[48..56].copy_from_slice(&seed.to_le_bytes());
    h[56..64].copy_from_slice(&(body.len() as u64).to_le_bytes());
    h[64..72].copy_from_slice(&body_checksum(&body).to_le_bytes());
    let sum = fnv1a(&h[..CHECKSUM_AT]);
    h[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    {
        let mut f = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(&h).map_err(|e| Error::io("write", &tmp, e))?;
        f.write_all(&body)
            .map_err(|e| Error::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
    }
    files::replace_file(&tmp, path).map_err(|e| Error::io("rename into", path, e))
}

/// An open `.ivf` file.
pub struct Ivf {
    pub dim: usize,
    pub nlist: usize,
    pub rows: usize,
    pub uuid: [u8; 16],
    pub seed: u64,
    centroids: Vec<f32>,
    offsets: Vec<u64>,
    order: Vec<u32>,
    map: Mmap,
    records_at: usize,
    rl: usize,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Ivf {
    /// Open and check `path` (checksum, offsets, row numbers): any damage is
    /// an `Error::Format`.
    pub fn open(path: &Path) -> Result<Ivf> {
        let fix = "rebuild it (`cortex index build --approximate`) or delete it";
        let bad = |what: &str| Error::Format(format!("{}: {what}; {fix}", path.display()));
        let f = files::open_regular(path, Open::default()).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Storage(format!(
                "no approximate index at {}; build it with `cortex index build --approximate`",
                path.display()
            )),
            _ => Error::io("open", path, e),
        })?;
        let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len() as usize;
        if len < HEADER_LEN {
            return Err(bad("truncated header"));
        }
        // SAFETY: read-only shared mapping of a regular file that cortex only
        // ever replaces by rename, never truncates in place.
        let map = unsafe { Mmap::map(&f) }.map_err(|e| Error::io("map", path, e))?;
        let h = &map[..HEADER_LEN];
        if &h[..8] != IVF_MAGIC {
            return Err(bad("not a cortex approximate index (wrong magic)"));
        }
        if u64_at(h, CHECKSUM_AT) != fnv1a(&h[..CHECKSUM_AT]) {
            return Err(bad("header checksum mismatch"));
        }
        let version = u32_at(h, 8);
        if version != IVF_VERSION {
            return Err(bad(&format!(
                "format version {version}, this cortex reads {IVF_VERSION}"
            )));
        }
        let dim = u32_at(h, 12) as usize;
        let nlist = u32_at(h, 16) as usize;
        let rl = u32_at(h, 20) as usize;
        let rows = u64_at(h, 24) as usize;
        let body_len = u64_at(h, 56) as usize;
        if dim == 0 || nlist == 0 || rl != quant::record_len(dim) || rows > u32::MAX as usize {
            return Err(bad("impossible header values"));
        }
        let head = nlist * dim * 4 + (nlist + 1) * 8 + rows * 4;
        let records_at = HEADER_LEN + pad64(head);
        if body_len != pad64(head) + rows * rl || len != HEADER_LEN + body_len {
            return Err(bad(
                "the file's length does not match its header (truncated?)",
            ));
        }
        let body = &map[HEADER_LEN..];
        if body_checksum(body) != u64_at(h, 64) {
            return Err(bad("checksum mismatch (a damaged byte)"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&h[32..48]);
        let seed = u64_at(h, 48);
        let centroids: Vec<f32> = body[..nlist * dim * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
            .collect();
        let at = nlist * dim * 4;
        let offsets: Vec<u64> = body[at..at + (nlist + 1) * 8]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
            .collect();
        let at = at + (nlist + 1) * 8;
        let order: Vec<u32> = body[at..at + rows * 4]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
            .collect();
        if offsets[0] != 0
            || offsets[nlist] != rows as u64
            || offsets.windows(2).any(|w| w[0] > w[1])
        {
            return Err(bad("list offsets out of order"));
        }
        let mut seen = vec![0u64; rows.div_ceil(64)];
        for &r in &order {
            let r = r as usize;
            if r >= rows || seen[r / 64] & (1 << (r % 64)) != 0 {
                return Err(bad("row numbers are not each row once"));
            }
            seen[r / 64] |= 1 << (r % 64);
        }
        if centroids.iter().any(|v| !v.is_finite()) {
            return Err(bad("a centroid is not finite"));
        }
        Ok(Ivf {
            dim,
            nlist,
            rows,
            uuid,
            seed,
            centroids,
            offsets,
            order,
            map,
            records_at,
            rl,
        })
    }

    fn records(&self, a: usize, b: usize) -> &[u8] {
        &self.map[self.records_at + a * self.rl..self.records_at + b * self.rl]
    }

    /// Rows in list `l`.
    pub fn list_len(&self, l: usize) -> usize {
        (self.offsets[l + 1] - self.offsets[l]) as usize
    }

    /// Every list, its centroid's score against `q` best first (ties: the
    /// lower list first): a search probes a prefix of it.
    pub fn ranked(&self, isa: Isa, q: &[f32]) -> Vec<u32> {
        let mut s = vec![0.0f32; self.nlist];
        simd::scores(isa, q, &self.centroids, &mut s);
        let mut idx: Vec<u32> = (0..self.nlist as u32).collect();
        idx.sort_unstable_by(|a, b| s[*b as usize].total_cmp(&s[*a as usize]).then(a.cmp(b)));
        idx
    }

    /// Rows the lists `probes` hold.
    pub fn probed_rows(&self, probes: &[u32]) -> usize {
        probes.iter().map(|&l| self.list_len(l as usize)).sum()
    }

    /// The exact top-k (scores from the f16 `rows`, `count` of them) of the
    /// rows in the `nprobe` first lists of `ranked` (`self.ranked(isa, q)`)
    /// plus rows `self.rows..count` (the tail appended after the build).
    /// `allowed(row)`: rows the result may hold; `live(row)`: not masked.
    /// Returns (hits, rows probed).
    ///
    /// The int8 screen is the exact scan's (topk.rs): each row's interval
    /// `a ± slack` holds its f32 score, and the rows the final threshold cannot
    /// rule out are rescored from their f16 rows, as the scan does.
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        isa: Isa,
        rows: &[F16],
        count: usize,
        q: &[f32],
        k: usize,
        ranked: &[u32],
        nprobe: usize,
        allowed: Option<&dyn Fn(u32) -> bool>,
        live: &dyn Fn(u32) -> bool,
    ) -> (Vec<Hit>, usize) {
        let dim = self.dim;
        let qq = QuantQuery::single(isa, q);
        let ok = |r: u32| allowed.is_none_or(|a| a(r)) && live(r);
        let mut screen = Screen::new(Keep::Bound, k);
        // Offer a row; true when it counts as an admitted, live row. A row whose upper
        // bound is below the threshold is dropped before its flags are read (a
        // scattered read of the id file per row otherwise): the threshold is finite
        // only once k admitted live rows were seen, so the count that decides whether
        // to probe further is complete until then.
        let mut offer = |row: u32, a: f32, slack: f32| -> bool {
            if a + slack < screen.threshold() || !ok(row) {
                return false;
            }
            screen.offer(row, a, slack, &|_| true);
            true
        };
        let mut eligible = 0usize;
        // The tail first (rows appended after the build, scored exactly): its rows
        // count towards the k eligible ones.
        for r in self.rows..count {
            let s = simd::dot(isa, q, &rows[r * dim..(r + 1) * dim]);
            eligible += usize::from(offer(r as u32, s, 0.0));
        }
        let mut probed = count.saturating_sub(self.rows);
        let mut buf: Vec<f32> = Vec::new();
        // Every list in centroid order: the first `nprobe`, then more only while fewer
        // than k rows the filter admits (and live) were seen (a narrow filter or many
        // masked rows would otherwise leave the answer short).
        for (n, &l) in ranked.iter().enumerate() {
            if n >= nprobe && eligible >= k {
                break;
            }
            let (a, b) = (
                self.offsets[l as usize] as usize,
                self.offsets[l as usize + 1] as usize,
            );
            if a == b {
                continue;
            }
            probed += b - a;
            let recs = self.records(a, b);
            buf.resize(b - a, 0.0);
            quant::scores(isa, &qq, recs, &mut buf);
            for (j, rec) in recs.chunks_exact(self.rl).enumerate() {
                eligible += usize::from(offer(self.order[a + j], buf[j], qq.slack(rec)));
            }
        }
        // Rescore what the final threshold cannot rule out, from the f16 rows, in
        // row order (the rows are scattered: ascending reads them forward).
        let t = screen.threshold();
        let mut keep: Vec<u32> = (screen.finish().1.into_iter())
            .filter(|c| topk::kept(c.0, t))
            .map(|c| c.1)
            .collect();
        keep.sort_unstable();
        keep.dedup();
        let hits = topk::exact_subset(isa, rows, q, k, &keep, &|_| true, 1);
        (hits, probed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::topk::TopK;

    fn unit_rows(n: usize, dim: usize, seed: u64) -> Vec<F16> {
        let mut rng = Rng(seed);
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let v: Vec<f32> = (0..dim)
                .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            out.extend(v.iter().map(|x| F16::from_f32(x / norm)));
        }
        out
    }

    #[test]
    fn all_lists_give_the_exact_answer() {
        let (n, dim, k) = (3000, 48, 10);
        let rows = unit_rows(n, dim, 7);
        let p = Params {
            nlist: 16,
            sample: 1000,
            iters: 4,
            seed: 1,
            threads: 2,
        };
        let isa = Isa::detect();
        let b = build(isa, &rows, dim, n - 100, &p).unwrap();
        let dir = std::env::temp_dir().join(format!("ann-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.ivf");
        write(&path, &b, [3; 16], 1).unwrap();
        let ivf = Ivf::open(&path).unwrap();
        let live = |r: u32| !r.is_multiple_of(17);
        for qi in 0..20 {
            let q: Vec<f32> = rows[qi * dim..(qi + 1) * dim]
                .iter()
                .map(|v| v.to_f32())
                .collect();
            let ranked = ivf.ranked(isa, &q);
            let (hits, probed) = ivf.search(isa, &rows, n, &q, k, &ranked, 16, None, &live);
            assert_eq!(probed, n);
            let mut top = TopK::new(k);
            for r in 0..n as u32 {
                let s = simd::dot(isa, &q, &rows[r as usize * dim..(r as usize + 1) * dim]);
                let h = Hit { score: s, row: r };
                if live(r) && top.admits(h) {
                    top.push(h);
                }
            }
            assert_eq!(hits, top.into_sorted());
        }
        // A flipped byte of the body is caught at open.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 5;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(Ivf::open(&path), Err(Error::Format(_))));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

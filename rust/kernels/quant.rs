//! The int8 copy of the matrix and the error bound that makes it exact.
//!
//! One record per row, padded to a multiple of 32 bytes:
//!
//! ```text
//! [u8; dim]   u = round(x / scale) + 64 in [1, 127], scale = max|x| / 63
//! scale  f32 LE
//! err    f32 LE   ||x - x̂|| (x̂ = (u - 64) * scale), computed in f64, rounded up
//! norm   f32 LE   ||x||, computed in f64, rounded up
//! zeros  to the next multiple of 32
//! ```
//!
//! The padding keeps every 32-byte load inside one cache line (the records
//! start 64-byte aligned in the file) and lets the kernels load whole 32-byte
//! chunks past `dim`: the query is zero there, so the bytes of the scale and
//! the norms add nothing.
//!
//! Rows are quantized to 7 bits (`[-63, 63]`, stored with an offset of 64) and
//! queries to `[-Q_MAX, Q_MAX]` = `[-43, 43]`. The unsigned-by-signed byte
//! multiply of AVX2 (`vpmaddubsw`) gives pair sums of at most
//! `2 * 127 * 43 = 10922`, so three of them still fit an i16 (`32766 < 32767`):
//! the kernels add the products of GROUP = 3 32-byte chunks in 16 bits before
//! widening them to 32 bits (`vpmaddwd`). On Zen 1 both multiplies run on one
//! pipe only, so fewer widenings is what makes the int8 scan faster than f32
//! FMA at all. Measured (tile kernel, 256 queries x 200k rows, one thread):
//! 8-bit rows with one widening per chunk were 1.17x the f32 tile; 7-bit rows
//! and queries with GROUP = 2, 1.8x; GROUP = 3 (queries 43 levels) 1.9x, and
//! on real MiniLM vectors the whole exact search 1.52x the f32 scan against
//! 1.42x with GROUP = 2 (the coarser query widens the bound, so a few more
//! rows are rescored; GROUP = 4 needs 31 levels and rescored more still).
//! With AVX-VNNI (`vpdpbusd`, 32-bit sums) one query is quantized to all 127
//! levels instead ([`single_levels`]): a ~3x smaller query error, so a ~2.5x
//! narrower screen. `Q_MAX` is the worst case, any query and any bytes; the
//! 16-bit sums are exact whenever the query's own [`lane_bound`] (127 times
//! the |values| sharing a lane of a group) fits, so plain AVX2 quantizes one
//! query to the most levels that keep it so ([`QuantQuery::widest`]: median 92
//! for real MiniLM queries and normal random ones, ~56 for uniform ones, at 384
//! dimensions; 1.4-4.5x fewer rows survive the screen than at 43). The tile kernel
//! keeps `Q_MAX`.
//! The offset is removed once per query: `sum(u * q) - 64 * sum(q) = sum(r * q)`.
//! The integer dot product is exact, so every instruction set returns the same bits.
//!
//! **The bound.** With q̂ the quantized query, e_q = q - q̂, and e_x = x - x̂,
//! `<q, x> - <q̂, x̂> = <q̂, e_x> + <e_q, x>`, so by Cauchy–Schwarz the exact
//! score lies within `||q̂||·||e_x|| + ||e_q||·||x||` of the int8 score. To cover
//! the f32 rounding of both the int8 score and the f32 score the exact scan
//! computes, [`margin`] is added (see its doc). A row whose upper bound is
//! below the k-th best lower bound cannot be in the exact top-k; `topk` uses
//! this to return exactly the f32 scan's answer while rescoring only the rows
//! the bound cannot rule out.
use super::simd::Isa;

/// Largest query value: queries are quantized to `[-Q_MAX, Q_MAX]`.
pub const Q_MAX: i32 = 43;
/// 32-byte chunks whose byte products the kernels sum in i16 before widening:
/// `GROUP * 2 * 127 * Q_MAX` must stay below 32768.
const GROUP: usize = 3;
const _: () = assert!(GROUP as i32 * 2 * 127 * Q_MAX < 32768);

/// Bytes of one record of the int8 copy for `dim` dimensions.
pub fn record_len(dim: usize) -> usize {
    (dim + 12).div_ceil(32) * 32
}

/// Query bytes (and record bytes scanned): `dim` rounded up to whole 32-byte chunks.
fn padded(dim: usize) -> usize {
    dim.div_ceil(32) * 32
}

/// `v` (>= 0, computed in f64) as an f32 that is not smaller.
fn round_up(v: f64) -> f32 {
    let f = v as f32;
    if (f as f64) < v {
        // The next f32 up (positive finite values: the bit pattern is monotone).
        f32::from_bits(f.to_bits() + 1)
    } else {
        f
    }
}

/// Slack for f32 rounding, added to each side of the bound, for unit-norm rows
/// and queries of `dim` dimensions. It covers (1) the f32 scan's own rounding:
/// a dot product of n terms summed in f32 is within `n·u·Σ|q_i x_i| <= n·u`
/// of the real value (u = 2^-24, |q|, |x| <= 1 + dim·u); (2) the int8 score
/// `d as f32 * scale * qscale` (three roundings, |score| <~ 1.1); (3) adding up
/// the bound itself in f32. `(dim + 32)·2u` is twice (1) plus room for (2) and (3).
pub fn margin(dim: usize) -> f32 {
    (dim as f32 + 32.0) * f32::EPSILON
}

/// Quantize one f32 row into `out` (`record_len(dim)` bytes).
pub fn quantize_row(x: &[f32], out: &mut [u8]) {
    debug_assert_eq!(out.len(), record_len(x.len()));
    let m = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = if m > 0.0 && m.is_finite() {
        m / 63.0
    } else {
        0.0
    };
    let dim = x.len();
    for (o, v) in out[..dim].iter_mut().zip(x) {
        let r = if scale > 0.0 {
            (v / scale).round().clamp(-63.0, 63.0)
        } else {
            0.0
        };
        *o = (r as i32 + 64) as u8;
    }
    let (err, norm) = record_norms(x, &out[..dim], scale);
    out[dim..dim + 4].copy_from_slice(&scale.to_le_bytes());
    out[dim + 4..dim + 8].copy_from_slice(&err.to_le_bytes());
    out[dim + 8..dim + 12].copy_from_slice(&norm.to_le_bytes());
    out[dim + 12..].fill(0);
}

/// (||x - x̂||, ||x||) of row `x` quantized to bytes `u` with `scale`, each
/// summed in f64 and rounded up to an f32. The sums run in 8 fixed lanes
/// combined in a fixed order: the compiler vectorizes them and the result is
/// the same bits on every machine, so [`check_record`] can recompute a
/// record's norms exactly and cheaply (no division, no rounding to bytes).
fn record_norms(x: &[f32], u: &[u8], scale: f32) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if Isa::best() == Isa::Avx2 {
        // SAFETY: the CPU has AVX2 (checked just above). The body is the same
        // Rust code: IEEE f64 arithmetic without contraction, so the same bits.
        return unsafe { record_norms_avx2(x, u, scale) };
    }
    record_norms_body(x, u, scale)
}

/// [`record_norms`] with AVX2: lanes 0-3 and 4-7 are two 4-wide f64 vectors
/// holding exactly the scalar lanes (same operations in the same order, no
/// fused multiply-add), so the bits are the scalar body's. The compiler does
/// not vectorize the scalar body well (u8 -> f64 conversions), and this check
/// runs over every row of an index when a process opens it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn record_norms_avx2(x: &[f32], u: &[u8], scale: f32) -> (f32, f32) {
    use std::arch::x86_64::*;
    let main = x.len().min(u.len()) / 8 * 8;
    let s = _mm256_set1_pd(scale as f64);
    let off = _mm_set1_epi32(64);
    let (mut e0, mut e1) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let (mut n0, mut n1) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut i = 0;
    while i < main {
        // SAFETY: i + 8 <= main <= x.len(), u.len(): 32 bytes of x and 8 of u
        // are in bounds; unaligned loads.
        let xv = _mm256_loadu_ps(x.as_ptr().add(i));
        let ub = _mm_loadl_epi64(u.as_ptr().add(i) as *const __m128i);
        let ui = _mm256_cvtepu8_epi32(ub);
        let r0 = _mm256_cvtepi32_pd(_mm_sub_epi32(_mm256_castsi256_si128(ui), off));
        let r1 = _mm256_cvtepi32_pd(_mm_sub_epi32(_mm256_extracti128_si256::<1>(ui), off));
        let v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(xv));
        let v1 = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(xv));
        let d0 = _mm256_sub_pd(v0, _mm256_mul_pd(r0, s));
        let d1 = _mm256_sub_pd(v1, _mm256_mul_pd(r1, s));
        e0 = _mm256_add_pd(e0, _mm256_mul_pd(d0, d0));
        e1 = _mm256_add_pd(e1, _mm256_mul_pd(d1, d1));
        n0 = _mm256_add_pd(n0, _mm256_mul_pd(v0, v0));
        n1 = _mm256_add_pd(n1, _mm256_mul_pd(v1, v1));
        i += 8;
    }
    let (mut e, mut n) = ([0.0f64; 8], [0.0f64; 8]);
    _mm256_storeu_pd(e.as_mut_ptr(), e0);
    _mm256_storeu_pd(e.as_mut_ptr().add(4), e1);
    _mm256_storeu_pd(n.as_mut_ptr(), n0);
    _mm256_storeu_pd(n.as_mut_ptr().add(4), n1);
    finish_norms(&x[main..], &u[main..], scale as f64, e, n)
}

#[inline(always)]
fn record_norms_body(x: &[f32], u: &[u8], scale: f32) -> (f32, f32) {
    const L: usize = 8;
    let s = scale as f64;
    let (mut e, mut n) = ([0.0f64; L], [0.0f64; L]);
    let mut xc = x.chunks_exact(L);
    let mut uc = u.chunks_exact(L);
    for (xs, us) in (&mut xc).zip(&mut uc) {
        for l in 0..L {
            let v = xs[l] as f64;
            let d = v - (us[l] as i32 - 64) as f64 * s;
            e[l] += d * d;
            n[l] += v * v;
        }
    }
    finish_norms(xc.remainder(), uc.remainder(), s, e, n)
}

/// The last `dim % 8` values into lanes 0.., then the lanes combined in a fixed
/// order and rounded up (shared by both versions of [`record_norms`]).
#[inline(always)]
fn finish_norms(x: &[f32], u: &[u8], s: f64, mut e: [f64; 8], mut n: [f64; 8]) -> (f32, f32) {
    const L: usize = 8;
    for (l, (v, b)) in x.iter().zip(u).enumerate() {
        let v = *v as f64;
        let d = v - (*b as i32 - 64) as f64 * s;
        e[l] += d * d;
        n[l] += v * v;
    }
    let sum = |a: [f64; L]| ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    let (err, norm) = (sum(e), sum(n));
    // A row with NaN/inf (refused at append; only a damaged file has one)
    // gets an infinite bound: it is always rescored, never ruled out.
    if err.is_finite() && norm.is_finite() {
        (round_up(err.sqrt()), round_up(norm.sqrt()))
    } else {
        (f32::INFINITY, f32::INFINITY)
    }
}

/// Is `rec` a record the int8 screen can trust for row `x`? Its bytes must be
/// in the range the kernels' 16-bit sums assume (<= 127), its scale finite, and
/// its two norms exactly those of `x` and its bytes ([`record_norms`]): the
/// bound is then true for these bytes whatever they are, so the screen cannot
/// rule out a row it should keep. A changed byte or scale changes the residual
/// norm, so damage is also noticed, not only damage that would mislead.
pub fn check_record(x: &[f32], rec: &[u8]) -> bool {
    let dim = x.len();
    let u = &rec[..dim];
    let scale = record_scale(rec, dim);
    if !scale.is_finite() || scale < 0.0 || u.iter().fold(0u8, |m, b| m.max(*b)) > 127 {
        return false;
    }
    let (err, norm) = record_norms(x, u, scale);
    record_errs(rec, dim) == (err, norm)
}

fn f32_at(rec: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([rec[at], rec[at + 1], rec[at + 2], rec[at + 3]])
}

/// The scale of a record.
#[inline]
pub fn record_scale(rec: &[u8], dim: usize) -> f32 {
    f32_at(rec, dim)
}

/// (||e_x||, ||x||) of a record.
#[inline]
pub fn record_errs(rec: &[u8], dim: usize) -> (f32, f32) {
    (f32_at(rec, dim + 4), f32_at(rec, dim + 8))
}

/// A query prepared for the int8 scan.
pub struct QuantQuery {
    /// Values in `[-levels, levels]`, padded with zeros to a multiple of 32.
    pub q: Vec<i8>,
    pub scale: f32,
    /// `64 * sum(q)`: removes the storage offset.
    pub offset: i32,
    pub dim: usize,
    /// ||q̂|| (rounded up).
    pub qnorm: f32,
    /// ||q - q̂|| (rounded up).
    pub err: f32,
    /// [`margin`] of `dim`.
    pub margin: f32,
    /// Largest |value| of `q` allowed: [`Q_MAX`], or up to 127 (AVX-VNNI,
    /// and plain AVX2 where [`QuantQuery::lanes`] still fits 16 bits).
    pub levels: i32,
    /// [`lane_bound`] of `q` for the AVX2 kernels' GROUP: their 16-bit sums
    /// are exact for this query when it is at most `i16::MAX`.
    pub lanes: i32,
}

/// The largest |value| a 16-bit lane of the AVX2 kernels can reach for query
/// bytes `q` when `group` 32-byte chunks are summed before widening, whatever
/// the stored bytes (each in `[0, 127]`): `127 * sum(|q|)` over the two bytes
/// of the lane in each chunk of the group. `vpmaddubsw` never saturates for
/// queries within `[-127, 127]` (`2 * 127 * 127 < 32767`) and `vpaddw` wraps,
/// so the lane's final sum is exact when this is at most `i16::MAX`.
pub fn lane_bound(q: &[i8], group: usize) -> i32 {
    let mut worst = 0;
    for g in q.chunks(32 * group) {
        let mut lane = [0i32; 16];
        for chunk in g.chunks(32) {
            for (b, v) in chunk.iter().enumerate() {
                lane[b / 2] += v.unsigned_abs() as i32;
            }
        }
        worst = lane.iter().fold(worst, |m, l| m.max(127 * l));
    }
    worst
}

/// The largest |value| of `x`.
fn max_abs(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

/// `x` (whose largest |value| is `m`) rounded to `[-levels, levels]` into `q`;
/// answers the scale (0 for a zero or non-finite `m`: every value 0).
fn quantize(x: &[f32], m: f32, levels: i32, q: &mut [i8]) -> f32 {
    let scale = if m > 0.0 && m.is_finite() {
        m / levels as f32
    } else {
        0.0
    };
    for (o, v) in q.iter_mut().zip(x) {
        *o = if scale > 0.0 {
            (v / scale).round().clamp(-levels as f32, levels as f32) as i8
        } else {
            0
        };
    }
    scale
}

impl QuantQuery {
    /// `x` quantized to `[-Q_MAX, Q_MAX]`, the levels every kernel can take.
    pub fn new(x: &[f32]) -> QuantQuery {
        QuantQuery::with_levels(x, Q_MAX)
    }

    /// `x` quantized for the single-query kernel of `isa`: [`single_levels`],
    /// or with plain AVX2 the most levels whose 16-bit lanes fit
    /// ([`QuantQuery::widest`]: 43 to 127 by query; median 92 for real
    /// MiniLM queries at 384 dimensions).
    pub fn single(isa: Isa, x: &[f32]) -> QuantQuery {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 if !x86::vnni() => QuantQuery::widest(x, GROUP),
            _ => QuantQuery::with_levels(x, single_levels(isa)),
        }
    }

    /// `x` quantized to `[-levels, levels]` (`Q_MAX` for the AVX2 kernels'
    /// 16-bit sums; up to 127 for AVX-VNNI's and the scalar kernel's 32-bit sums).
    pub fn with_levels(x: &[f32], levels: i32) -> QuantQuery {
        assert!((1..=127).contains(&levels), "quant: levels out of range");
        let dim = x.len();
        let mut q = vec![0i8; padded(dim)];
        let scale = quantize(x, max_abs(x), levels, &mut q);
        let (mut qn, mut err) = (0.0f64, 0.0f64);
        for (o, v) in q.iter().zip(x) {
            let h = *o as f64 * scale as f64;
            qn += h * h;
            err += (*v as f64 - h) * (*v as f64 - h);
        }
        let sum: i32 = q.iter().map(|v| *v as i32).sum();
        let lanes = lane_bound(&q, GROUP);
        let (qnorm, err) = if err.is_finite() {
            (round_up(qn.sqrt()), round_up(err.sqrt()))
        } else {
            (f32::INFINITY, f32::INFINITY)
        };
        QuantQuery {
            q,
            scale,
            offset: 64 * sum,
            dim,
            qnorm,
            err,
            margin: margin(dim),
            levels,
            lanes,
        }
    }

    /// `x` quantized to the most levels (at most 127; at least [`Q_MAX`] for
    /// `group <= 3`, which fits any query) whose [`lane_bound`] with `group`
    /// chunks fits 16 bits, so that the AVX2 kernel summing `group` chunks
    /// before widening is exact for it.
    pub fn widest(x: &[f32], group: usize) -> QuantQuery {
        // The values `with_levels` gives, into `q`, and their lane bound.
        let m = max_abs(x);
        let mut q = vec![0i8; padded(x.len())];
        let mut lanes = |levels: i32| {
            quantize(x, m, levels, &mut q);
            lane_bound(&q, group)
        };
        let fits = |l: i32| l <= i16::MAX as i32;
        let top = lanes(127);
        let mut levels = 127;
        if !fits(top) {
            // The lane sums grow about linearly with the levels (not exactly:
            // rounding): from the proportional guess, step down until they fit,
            // or up while the next level still fits.
            levels = (127 * i16::MAX as i64 / top as i64).clamp(1, 126) as i32;
            if fits(lanes(levels)) {
                while levels < 126 && fits(lanes(levels + 1)) {
                    levels += 1;
                }
            } else {
                while levels > 1 && !fits(lanes(levels - 1)) {
                    levels -= 1;
                }
                levels -= 1;
            }
        }
        QuantQuery::with_levels(x, levels.max(1))
    }

    /// Half-width of the interval around the int8 score of `rec` that holds
    /// the exact f32 score (see the module doc). Never NaN: a damaged record
    /// gives +inf, so the row is rescored.
    #[inline]
    pub fn slack(&self, rec: &[u8]) -> f32 {
        let (ex, xn) = record_errs(rec, self.dim);
        let s = self.qnorm * ex + self.err * xn + self.margin;
        if s >= 0.0 {
            s
        } else {
            f32::INFINITY
        }
    }

    /// `qnorm·||e_x|| + (err·||x|| + margin)` of `rec`: [`QuantQuery::slack`]
    /// in the screen's order of additions, NaN where a record is damaged.
    #[inline]
    pub fn half_width(&self, rec: &[u8]) -> f32 {
        let (ex, xn) = record_errs(rec, self.dim);
        self.qnorm * ex + (self.err * xn + self.margin)
    }

    /// The int8 score from the integer dot product with a record of `scale`.
    #[inline]
    fn score(&self, dot: i32, scale: f32) -> f32 {
        (dot - self.offset) as f32 * scale * self.scale
    }
}

/// Query levels every query gets with the single-query kernel of `isa`
/// ([`scores`]): 127 with AVX-VNNI, whose `vpdpbusd` sums the byte products in
/// 32 bits, so a query can use every i8 level (its quantization error, half of
/// each score's interval, is then ~3x smaller: 2.2-2.6x fewer rows survive the
/// screen at 384 dimensions); [`Q_MAX`] elsewhere (the scalar loop, and plain
/// AVX2, where [`QuantQuery::single`] goes further for each query whose 16-bit
/// lanes allow it). The final answer is the f32 scan's either way.
pub fn single_levels(isa: Isa) -> i32 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if x86::vnni() => 127,
        _ => Q_MAX,
    }
}

/// The single-query int8 kernel [`scores`] runs with `isa`: "avx-vnni" where
/// AVX-VNNI was detected (and not ruled out by `CORTEX_SIMD=avx2`), else the
/// instruction set's name.
pub fn kernel_name(isa: Isa) -> &'static str {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if x86::vnni() => "avx-vnni",
        _ => isa.name(),
    }
}

/// Scalar reference of the integer dot product of a stored record and a query.
pub fn dot_u8_i8_scalar(u: &[u8], q: &[i8]) -> i32 {
    u.iter().zip(q).map(|(a, b)| *a as i32 * *b as i32).sum()
}

/// Approximate scores of `n = out.len()` consecutive records against `qq`.
pub fn scores(isa: Isa, qq: &QuantQuery, records: &[u8], out: &mut [f32]) {
    scores_with(isa, qq, records, out, None);
}

/// [`scores`] and, beside each score, the half-width of the interval that holds
/// the record's exact f32 score, `qnorm·||e_x|| + (err·||x|| + margin)` (the
/// order the screen adds it up in; NaN for a damaged record), read while the
/// record is still in L1 instead of in a second pass over the block. The
/// scores are bit-identical to [`scores`]', the half-widths to that sum done
/// in scalar f32.
pub fn scores_bounded(
    isa: Isa,
    qq: &QuantQuery,
    records: &[u8],
    out: &mut [f32],
    half: &mut [f32],
) {
    assert_eq!(
        out.len(),
        half.len(),
        "quant::scores_bounded: shape mismatch"
    );
    scores_with(isa, qq, records, out, Some(half));
}

/// [`scores`], and [`scores_bounded`]'s half-widths when `half` is given.
fn scores_with(
    isa: Isa,
    qq: &QuantQuery,
    records: &[u8],
    out: &mut [f32],
    half: Option<&mut [f32]>,
) {
    let dim = qq.dim;
    let stride = record_len(dim);
    assert_eq!(
        records.len(),
        out.len() * stride,
        "quant::scores: shape mismatch"
    );
    assert_eq!(qq.q.len(), padded(dim), "quant::scores: query not padded");
    // Plain AVX2 sums in 16 bits (its kernel refuses a query whose lanes do
    // not fit them); AVX-VNNI and the scalar loop in 32.
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` exists only once AVX2 was detected; shapes checked above.
        // 8 records an iteration, prefetched 32 ahead into L2 (T1: every AVX-VNNI
        // CPU takes it so; BENCHMARKS.md, "The int8 screen on AVX2, second
        // pass": 1.10-1.12x the read floor against 1.16-1.20x with T0 16 ahead).
        Isa::Avx2 if x86::vnni() => unsafe {
            x86::scores_vnni::<8, 32, { std::arch::x86_64::_MM_HINT_T1 }>(qq, records, out, half)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx2 => unsafe { x86::scores_into(qq, records, out, half) },
        _ => {
            for (o, rec) in out.iter_mut().zip(records.chunks_exact(stride)) {
                let d = dot_u8_i8_scalar(&rec[..dim], &qq.q[..dim]);
                *o = qq.score(d, record_scale(rec, dim));
            }
            if let Some(half) = half {
                for (h, rec) in half.iter_mut().zip(records.chunks_exact(stride)) {
                    *h = qq.half_width(rec);
                }
            }
        }
    }
}

/// Approximate scores of a tile: `nr` consecutive records against every query
/// of `qqs` (same `dim`); `out[j * nr + r]` (query-major, so that each query's
/// scores are contiguous for the screen) is bit-identical to what [`scores`]
/// gives record `r` and query `j`. This is the batch kernel: a block
/// of records stays in L1 while the queries pass over it.
pub fn scores_tile(isa: Isa, qqs: &[QuantQuery], records: &[u8], out: &mut [f32]) {
    let Some(first) = qqs.first() else {
        return;
    };
    let dim = first.dim;
    let stride = record_len(dim);
    assert!(
        qqs.iter().all(|q| q.dim == dim && q.q.len() == padded(dim)),
        "quant::scores_tile: queries of different dims"
    );
    assert!(
        qqs.iter().all(|q| q.lanes <= i16::MAX as i32),
        "quant::scores_tile: query levels too wide for 16-bit sums"
    );
    assert_eq!(
        records.len() % stride,
        0,
        "quant::scores_tile: ragged records"
    );
    let nr = records.len() / stride;
    assert_eq!(
        out.len(),
        nr * qqs.len(),
        "quant::scores_tile: output shape mismatch"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` exists only once AVX2 was detected; shapes checked above.
        Isa::Avx2 => unsafe { x86::scores_tile(qqs, records, out) },
        _ => {
            for (r, rec) in records.chunks_exact(stride).enumerate() {
                let scale = record_scale(rec, dim);
                for (j, qq) in qqs.iter().enumerate() {
                    let d = dot_u8_i8_scalar(&rec[..dim], &qq.q[..dim]);
                    out[j * nr + r] = qq.score(d, scale);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{padded, record_len, record_scale, QuantQuery, GROUP};
    use std::arch::x86_64::*;

    /// Whether the single-query kernels use AVX-VNNI (detected at run time;
    /// `CORTEX_SIMD=avx2` keeps them on plain AVX2, as on CPUs without it).
    pub fn vnni() -> bool {
        static VNNI: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *VNNI.get_or_init(|| {
            is_x86_feature_detected!("avxvnni")
                && !std::env::var("CORTEX_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("avx2"))
        })
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum4v(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m128i {
        let ab = _mm256_hadd_epi32(a, b);
        let cd = _mm256_hadd_epi32(c, d);
        let abcd = _mm256_hadd_epi32(ab, cd);
        _mm_add_epi32(
            _mm256_castsi256_si128(abcd),
            _mm256_extracti128_si256::<1>(abcd),
        )
    }

    /// The four sums of [`hsum4v`] as integers.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> [i32; 4] {
        let s = hsum4v(a, b, c, d);
        let mut out = [0i32; 4];
        // SAFETY: `out` holds four i32; storeu has no alignment need.
        unsafe { _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, s) };
        out
    }

    /// 32 bytes at `p + at`.
    ///
    /// # Safety
    /// AVX2; `p + at .. p + at + 32` is readable.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn ld<T>(p: *const T, at: usize) -> __m256i {
        // SAFETY: the caller guarantees the 32 bytes are in bounds.
        unsafe { _mm256_loadu_si256((p as *const u8).add(at) as *const __m256i) }
    }

    /// The i16 sum of the byte products of `n` (<= GROUP) chunks of `pu` and
    /// `pq` from byte `at`, widened and added to `acc` (exact: see the module doc).
    ///
    /// # Safety
    /// AVX2; the `n` chunks are readable at both pointers.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mac(acc: __m256i, pu: *const u8, pq: *const i8, at: usize, n: usize) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for c in 0..n {
            let o = at + 32 * c;
            // SAFETY: the caller guarantees the chunks are in bounds.
            s = _mm256_add_epi16(s, unsafe { _mm256_maddubs_epi16(ld(pu, o), ld(pq, o)) });
        }
        _mm256_add_epi32(acc, _mm256_madd_epi16(s, _mm256_set1_epi16(1)))
    }

    /// [`mac`] of exactly `N` chunks (a loop the compiler unrolls).
    ///
    /// # Safety
    /// As [`mac`].
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mac_n<const N: usize>(
        acc: __m256i,
        pu: *const u8,
        pq: *const i8,
        at: usize,
    ) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for c in 0..N {
            let o = at + 32 * c;
            // SAFETY: the caller guarantees the chunks are in bounds.
            s = _mm256_add_epi16(s, unsafe { _mm256_maddubs_epi16(ld(pu, o), ld(pq, o)) });
        }
        _mm256_add_epi32(acc, _mm256_madd_epi16(s, _mm256_set1_epi16(1)))
    }

    /// One record against one query: integer dot product.
    ///
    /// # Safety
    /// AVX2; `p` points to a record of `record_len(dim)` bytes and `pq` to
    /// `padded(dim) = 32 * chunks` query bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn dot1<const G: usize>(p: *const u8, pq: *const i8, chunks: usize) -> i32 {
        let mut acc = _mm256_setzero_si256();
        let mut c = 0;
        while c < chunks {
            let g = (chunks - c).min(G);
            // SAFETY: (c + g) * 32 <= padded(dim) <= record_len(dim).
            acc = unsafe { mac(acc, p, pq, c * 32, g) };
            c += g;
        }
        hsum4(acc, acc, acc, acc)[0]
    }

    /// [`super::scores`] with plain AVX2 (CPUs without AVX-VNNI, Zen 1 among
    /// them); with `half`, also [`super::scores_bounded`]'s half-widths. Eight
    /// records an iteration (BENCHMARKS.md, "The int8 screen on AVX2": with
    /// the groups of chunks unrolled ([`mac_n`]), 1.15x the read floor against
    /// 1.21-1.25x for four records), prefetched with the T1 hint: into L2 on
    /// Intel, 64 records (26 KiB) ahead; elsewhere 8 ahead ("second pass": on
    /// the Xeon the T0 hint into L1 held its line-fill buffers, 1.19-1.21x the
    /// floor against 1.12-1.14x for T1 8 ahead and 1.05-1.07x for 64 ahead in
    /// the screen's blocks of 1024 records; AMD before Zen 4 fills L1 on every
    /// hint, so it keeps the 8 ahead its kernel was tuned with).
    ///
    /// # Safety
    /// AVX2; `records.len() == out.len() * record_len(qq.dim)`, `qq.q.len() == padded(dim)`,
    /// `half.len() == out.len()`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn scores_into(
        qq: &QuantQuery,
        records: &[u8],
        out: &mut [f32],
        half: Option<&mut [f32]>,
    ) {
        // SAFETY: the caller's guarantees.
        unsafe {
            if intel() {
                scores_avx2::<8, 64, { _MM_HINT_T1 }>(qq, records, out, half)
            } else {
                scores_avx2::<8, 8, { _MM_HINT_T1 }>(qq, records, out, half)
            }
        }
    }

    /// Whether the CPU is Intel's ("GenuineIntel"), where the T1 prefetch hint
    /// fills L2 and not L1 (on AMD only from Zen 4 on).
    pub fn intel() -> bool {
        static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *INTEL.get_or_init(|| {
            // SAFETY: CPUID leaf 0 exists on every x86-64 CPU (`__cpuid` is an
            // unsafe fn before Rust 1.94, a safe one after).
            #[allow(unused_unsafe)]
            let v = unsafe { __cpuid(0) };
            // "Genu" "ineI" "ntel" in EBX, EDX, ECX.
            (v.ebx, v.edx, v.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e)
        })
    }

    /// [`scores_into`] with `R` records an iteration (a multiple of 4) and the
    /// software prefetch `AHEAD` records ahead (0: none), hint `HINT`.
    ///
    /// # Safety
    /// As [`scores_into`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn scores_avx2<const R: usize, const AHEAD: usize, const HINT: i32>(
        qq: &QuantQuery,
        records: &[u8],
        out: &mut [f32],
        half: Option<&mut [f32]>,
    ) {
        // 16-bit sums of GROUP chunks: exact only if the query's lanes fit.
        assert!(
            qq.lanes <= i16::MAX as i32,
            "quant::scores: query levels too wide for 16-bit sums"
        );
        // SAFETY: the caller's guarantees; AVX2 is enabled here.
        unsafe { scores_body::<R, AHEAD, HINT, false, GROUP>(qq, records, out, half) }
    }

    /// [`scores_avx2`] summing `G` chunks in 16 bits before each widening
    /// (the probe of the variants; exact only for queries whose lanes fit:
    /// [`super::lane_bound`] with `G`, not checked).
    ///
    /// # Safety
    /// As [`scores_into`].
    #[cfg(test)]
    #[target_feature(enable = "avx2")]
    pub unsafe fn scores_avx2g<
        const R: usize,
        const AHEAD: usize,
        const HINT: i32,
        const G: usize,
    >(
        qq: &QuantQuery,
        records: &[u8],
        out: &mut [f32],
        half: Option<&mut [f32]>,
    ) {
        // SAFETY: the caller's guarantees; AVX2 is enabled here.
        unsafe { scores_body::<R, AHEAD, HINT, false, G>(qq, records, out, half) }
    }

    /// [`scores_avx2`] with AVX-VNNI's `vpdpbusd` (one instruction for the
    /// byte products of a chunk, summed into i32: no i16 stage, no widening).
    /// The integer dot products are exact either way: same bits.
    ///
    /// # Safety
    /// As [`scores_into`], and the CPU must support AVX-VNNI.
    #[target_feature(enable = "avx2,avxvnni")]
    pub unsafe fn scores_vnni<const R: usize, const AHEAD: usize, const HINT: i32>(
        qq: &QuantQuery,
        records: &[u8],
        out: &mut [f32],
        half: Option<&mut [f32]>,
    ) {
        // SAFETY: the caller's guarantees; AVX2 and AVX-VNNI are enabled here.
        unsafe { scores_body::<R, AHEAD, HINT, true, GROUP>(qq, records, out, half) }
    }

    /// The body of [`scores_avx2`] and [`scores_vnni`], inlined into each (and
    /// compiled with its target features): `R` records an iteration, chunk by
    /// chunk (each query chunk loaded once for the `R` records), and every
    /// cache line of the group `AHEAD` records on prefetched, spread over the
    /// chunks. Measured on the mmap'd 1M-record file (BENCHMARKS.md, "second
    /// pass"): the kernel that read each record's scale and norms through
    /// bounds-checked slices, loaded the query chunk once per record and left
    /// the last two lines of each group to the hardware prefetcher took 1.4x
    /// the bare read of the same bytes; this one 1.03-1.10x.
    ///
    /// # Safety
    /// As [`scores_into`]; with `VNNI`, called only from an `avxvnni` function.
    #[inline(always)]
    unsafe fn scores_body<
        const R: usize,
        const AHEAD: usize,
        const HINT: i32,
        const VNNI: bool,
        const G: usize,
    >(
        qq: &QuantQuery,
        records: &[u8],
        out: &mut [f32],
        mut half: Option<&mut [f32]>,
    ) {
        const { assert!(R > 0 && R.is_multiple_of(4)) };
        // SAFETY: (the whole body) the intrinsics need AVX2 (and AVX-VNNI when
        // `VNNI`), which the calling function enables; memory safety as noted.
        unsafe {
            let dim = qq.dim;
            let stride = record_len(dim);
            let chunks = padded(dim) / 32;
            let n = out.len();
            let pq = qq.q.as_ptr();
            // Lines of a group of R records, and how many to prefetch per chunk.
            let lines = (R * stride).div_ceil(64);
            let per_chunk = lines.div_ceil(chunks);
            let mut r = 0;
            while r + R <= n {
                // Rows r..r+R exist: r * stride + R * stride <= records.len().
                let p = records.as_ptr().add(r * stride);
                let mut a = [_mm256_setzero_si256(); R];
                let ahead = AHEAD > 0 && r + R + AHEAD <= n;
                let mut c = 0;
                while c < chunks {
                    let g = (chunks - c).min(G);
                    if ahead {
                        // Hints (never fault), inside rows r+AHEAD..r+AHEAD+R.
                        for cc in c..c + g {
                            for l in cc * per_chunk..((cc + 1) * per_chunk).min(lines) {
                                _mm_prefetch::<HINT>(p.add(AHEAD * stride + l * 64) as *const i8);
                            }
                        }
                    }
                    // (c + g) * 32 <= padded(dim) <= stride: each load stays
                    // inside its record; `qq.q` holds `chunks * 32` bytes.
                    if VNNI {
                        for cc in c..c + g {
                            let qv = ld(pq, cc * 32);
                            for (k, ak) in a.iter_mut().enumerate() {
                                *ak = _mm256_dpbusd_avx_epi32(
                                    *ak,
                                    ld(p.add(k * stride), cc * 32),
                                    qv,
                                );
                            }
                        }
                    } else if g == G {
                        for (k, ak) in a.iter_mut().enumerate() {
                            *ak = mac_n::<G>(*ak, p.add(k * stride), pq, c * 32);
                        }
                    } else {
                        for (k, ak) in a.iter_mut().enumerate() {
                            *ak = mac(*ak, p.add(k * stride), pq, c * 32, g);
                        }
                    }
                    c += g;
                }
                for q4 in 0..R / 4 {
                    let o = r + 4 * q4;
                    // The f32 at byte `dim + off` of record `o + k` (scale, err,
                    // norm: dim + 12 <= stride).
                    let at = |k: usize, off: usize| {
                        (p.add((4 * q4 + k) * stride + dim + off) as *const f32).read_unaligned()
                    };
                    let f4 =
                        |off: usize| _mm_setr_ps(at(0, off), at(1, off), at(2, off), at(3, off));
                    // Four scores at once, in the order of `QuantQuery::score`
                    // ((d - offset) as f32 * scale * qscale): the scalar bits.
                    let d = hsum4v(a[4 * q4], a[4 * q4 + 1], a[4 * q4 + 2], a[4 * q4 + 3]);
                    let d = _mm_cvtepi32_ps(_mm_sub_epi32(d, _mm_set1_epi32(qq.offset)));
                    let f = _mm_mul_ps(_mm_mul_ps(d, f4(0)), _mm_set1_ps(qq.scale));
                    // o + 4 <= r + R <= n = out.len(); storeu has no alignment need.
                    _mm_storeu_ps(out.as_mut_ptr().add(o), f);
                    if let Some(h) = half.as_deref_mut() {
                        // No FMA: the bits of the scalar sum.
                        let w = _mm_add_ps(
                            _mm_mul_ps(_mm_set1_ps(qq.qnorm), f4(4)),
                            _mm_add_ps(
                                _mm_mul_ps(_mm_set1_ps(qq.err), f4(8)),
                                _mm_set1_ps(qq.margin),
                            ),
                        );
                        // half.len() == out.len() >= o + 4.
                        _mm_storeu_ps(h.as_mut_ptr().add(o), w);
                    }
                }
                r += R;
            }
            while r < n {
                let rec = &records[r * stride..(r + 1) * stride];
                // `rec` is one whole record; the query is padded.
                let d = if VNNI {
                    // 32-bit sums: any query levels (see `single_levels`).
                    let mut acc = _mm256_setzero_si256();
                    for c in 0..chunks {
                        acc =
                            _mm256_dpbusd_avx_epi32(acc, ld(rec.as_ptr(), c * 32), ld(pq, c * 32));
                    }
                    hsum4(acc, acc, acc, acc)[0]
                } else {
                    dot1::<G>(rec.as_ptr(), pq, chunks)
                };
                out[r] = qq.score(d, record_scale(rec, dim));
                if let Some(h) = half.as_deref_mut() {
                    h[r] = qq.half_width(rec);
                }
                r += 1;
            }
        }
    }

    /// 4 records x 2 queries register tile: 8 i32 accumulators; for each
    /// record, two i16 partial sums over GROUP chunks (one per query) share
    /// each load of the record.
    ///
    /// # Safety
    /// AVX2; every query has `padded(dim)` bytes and the same `dim`;
    /// `records.len() == nr * record_len(dim)`, `out.len() == nr * qqs.len()`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn scores_tile(qqs: &[QuantQuery], records: &[u8], out: &mut [f32]) {
        let m = qqs.len();
        let dim = qqs[0].dim;
        let stride = record_len(dim);
        let chunks = padded(dim) / 32;
        let nr = records.len() / stride;
        let mut r = 0;
        while r + 4 <= nr {
            let p = records[r * stride..].as_ptr();
            let scales: [f32; 4] =
                std::array::from_fn(|k| record_scale(&records[(r + k) * stride..], dim));
            let mut j = 0;
            while j + 2 <= m {
                let (q0, q1) = (&qqs[j], &qqs[j + 1]);
                let (p0, p1) = (q0.q.as_ptr(), q1.q.as_ptr());
                let mut a = [_mm256_setzero_si256(); 8];
                let mut c = 0;
                while c < chunks {
                    let g = (chunks - c).min(GROUP);
                    for k in 0..4 {
                        let (mut s0, mut s1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                        for cc in 0..g {
                            let o = (c + cc) * 32;
                            // SAFETY: records r..r+4 exist and (c + g) * 32 <=
                            // padded(dim) <= record_len; both queries hold
                            // `chunks * 32` bytes.
                            unsafe {
                                let u = ld(p.add(k * stride), o);
                                s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(u, ld(p0, o)));
                                s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(u, ld(p1, o)));
                            }
                        }
                        let ones = _mm256_set1_epi16(1);
                        a[2 * k] = _mm256_add_epi32(a[2 * k], _mm256_madd_epi16(s0, ones));
                        a[2 * k + 1] = _mm256_add_epi32(a[2 * k + 1], _mm256_madd_epi16(s1, ones));
                    }
                    c += g;
                }
                // Four rows of each query at once, in the order of
                // `QuantQuery::score` ((d - offset) as f32 * scale * qscale), so
                // the bits are the scalar ones.
                let sc = _mm_loadu_ps(scales.as_ptr());
                for (s, qq, jj) in [
                    (hsum4v(a[0], a[2], a[4], a[6]), q0, j),
                    (hsum4v(a[1], a[3], a[5], a[7]), q1, j + 1),
                ] {
                    let d = _mm_cvtepi32_ps(_mm_sub_epi32(s, _mm_set1_epi32(qq.offset)));
                    let f = _mm_mul_ps(_mm_mul_ps(d, sc), _mm_set1_ps(qq.scale));
                    let o = &mut out[jj * nr + r..jj * nr + r + 4];
                    // SAFETY: `o` holds four f32; storeu has no alignment need.
                    unsafe { _mm_storeu_ps(o.as_mut_ptr(), f) };
                }
                j += 2;
            }
            if j < m {
                let mut s = [0.0f32; 4];
                // SAFETY: same CPU features; records r..r+4 are whole records.
                unsafe {
                    scores_avx2::<4, 0, { _MM_HINT_T0 }>(
                        &qqs[j],
                        &records[r * stride..(r + 4) * stride],
                        &mut s,
                        None,
                    )
                };
                out[j * nr + r..j * nr + r + 4].copy_from_slice(&s);
            }
            r += 4;
        }
        while r < nr {
            let rec = &records[r * stride..(r + 1) * stride];
            let scale = record_scale(rec, dim);
            for (j, qq) in qqs.iter().enumerate() {
                // SAFETY: `rec` is one whole record; every query is padded.
                let d = unsafe { dot1::<GROUP>(rec.as_ptr(), qq.q.as_ptr(), chunks) };
                out[j * nr + r] = qq.score(d, scale);
            }
            r += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn record_check_accepts_every_fresh_record_and_refuses_damage() {
        for dim in [1, 7, 8, 33, 384] {
            for seed in 0..20u64 {
                let x = unit(dim, seed * 7 + dim as u64);
                let mut rec = vec![0u8; record_len(dim)];
                quantize_row(&x, &mut rec);
                // The AVX2 path (when the CPU has it) and the portable body agree bit for bit.
                assert_eq!(
                    record_norms(&x, &rec[..dim], record_scale(&rec, dim)),
                    record_norms_body(&x, &rec[..dim], record_scale(&rec, dim))
                );
                assert!(check_record(&x, &rec), "dim {dim} seed {seed}");
                let at = (seed as usize * 13) % dim;
                let mut bad = rec.clone();
                bad[at] = if bad[at] == 64 { 65 } else { 64 };
                assert!(!check_record(&x, &bad), "a changed byte passes");
                let mut bad = rec.clone();
                bad[at] = 200; // outside the 7-bit range the kernels' i16 sums assume
                assert!(!check_record(&x, &bad));
                for field in [dim, dim + 4, dim + 8] {
                    let mut bad = rec.clone();
                    bad[field] ^= 0x10;
                    assert!(!check_record(&x, &bad), "field at {field} changed, passes");
                }
                let mut flipped = x.clone();
                flipped[at] = -flipped[at] + 0.5;
                assert!(!check_record(&flipped, &rec), "a changed row passes");
            }
        }
    }

    fn records(rows: &[Vec<f32>]) -> Vec<u8> {
        let dim = rows[0].len();
        let stride = record_len(dim);
        let mut recs = vec![0u8; rows.len() * stride];
        for (row, out) in rows.iter().zip(recs.chunks_exact_mut(stride)) {
            quantize_row(row, out);
        }
        recs
    }

    #[test]
    fn int8_scores_are_close_to_f32_and_identical_across_isas() {
        for dim in [1usize, 5, 20, 21, 31, 32, 33, 100, 384, 390] {
            let n = 13;
            let rows: Vec<Vec<f32>> = (0..n).map(|i| unit(dim, 7 + i as u64)).collect();
            let recs = records(&rows);
            let q = unit(dim, 1234);
            let qq = QuantQuery::new(&q);
            let mut first: Option<Vec<f32>> = None;
            for isa in Isa::available() {
                let mut out = vec![0.0; n];
                scores(isa, &qq, &recs, &mut out);
                for (r, row) in rows.iter().enumerate() {
                    let exact: f32 = row.iter().zip(&q).map(|(a, b)| a * b).sum();
                    let slack = qq.slack(&recs[r * record_len(dim)..]);
                    assert!(
                        (out[r] - exact).abs() <= slack,
                        "dim {dim} row {r}: {} vs {exact}, bound {slack}",
                        out[r]
                    );
                    assert!(slack < 0.2, "dim {dim}: bound {slack} is useless");
                }
                match &first {
                    None => first = Some(out),
                    Some(f) => assert_eq!(f, &out, "{isa:?} differs from scalar"),
                }
            }
        }
    }

    #[test]
    fn tile_is_bit_identical_to_the_single_query_kernel_and_scalar() {
        for (dim, nr, m) in [
            (384usize, 9usize, 7usize),
            (5, 4, 3),
            (33, 8, 2),
            (64, 3, 1),
            (100, 13, 6),
        ] {
            let rows: Vec<Vec<f32>> = (0..nr).map(|i| unit(dim, 50 + i as u64)).collect();
            let recs = records(&rows);
            let qqs: Vec<QuantQuery> = (0..m)
                .map(|j| QuantQuery::new(&unit(dim, 900 + j as u64)))
                .collect();
            let mut want = vec![0.0f32; nr * m];
            scores_tile(Isa::Scalar, &qqs, &recs, &mut want);
            // The scalar tile is the integer reference, written out here.
            for (r, rec) in recs.chunks_exact(record_len(dim)).enumerate() {
                for (j, qq) in qqs.iter().enumerate() {
                    let d = dot_u8_i8_scalar(&rec[..dim], &qq.q[..dim]);
                    assert_eq!(want[j * nr + r], qq.score(d, record_scale(rec, dim)));
                }
            }
            for isa in Isa::available() {
                let mut out = vec![0.0f32; nr * m];
                scores_tile(isa, &qqs, &recs, &mut out);
                assert_eq!(out, want, "{isa:?} tile dim {dim}");
                for (j, qq) in qqs.iter().enumerate() {
                    let mut single = vec![0.0f32; nr];
                    scores(isa, qq, &recs, &mut single);
                    assert_eq!(
                        single,
                        want[j * nr..(j + 1) * nr],
                        "{isa:?} dim {dim} query {j}"
                    );
                }
            }
        }
    }

    #[test]
    fn extreme_values_do_not_saturate() {
        let dim = 64;
        let row: Vec<f32> = (0..dim)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let rec = records(std::slice::from_ref(&row));
        for sign in [1.0f32, -1.0] {
            let q: Vec<f32> = row.iter().map(|v| v * sign).collect();
            let qq = QuantQuery::new(&q);
            for isa in Isa::available() {
                let mut out = [0.0f32];
                scores(isa, &qq, &rec, &mut out);
                assert!(
                    (out[0] - sign * dim as f32).abs() < 1e-2,
                    "{isa:?}: {}",
                    out[0]
                );
                let mut t = [0.0f32; 2];
                scores_tile(
                    isa,
                    &[QuantQuery::new(&q), QuantQuery::new(&q)],
                    &rec,
                    &mut t,
                );
                assert_eq!(t, [out[0], out[0]]);
            }
        }
    }

    #[test]
    fn the_largest_pair_sums_fit_sixteen_bits() {
        // Every byte 127 against every query byte +-Q_MAX: each pair of products
        // is +-10922 and GROUP chunks add to +-32766, the worst case of the kernels.
        for dim in [64usize, 96, 384] {
            let row = vec![1.0f32 / (dim as f32).sqrt(); dim];
            let rec = records(std::slice::from_ref(&row));
            assert!(rec[..dim].iter().all(|u| *u == 127));
            for sign in [1.0f32, -1.0] {
                let q: Vec<f32> = row.iter().map(|v| v * sign).collect();
                let qq = QuantQuery::new(&q);
                assert!(qq.q[..dim].iter().all(|v| *v as i32 == Q_MAX * sign as i32));
                let want = dot_u8_i8_scalar(&rec[..dim], &qq.q[..dim]);
                assert_eq!(want, 127 * Q_MAX * sign as i32 * dim as i32);
                for isa in Isa::available() {
                    let mut out = [0.0f32; 1];
                    scores(isa, &qq, &rec, &mut out);
                    assert!((out[0] - sign).abs() < 1e-3, "{isa:?} {dim}: {}", out[0]);
                }
            }
        }
    }

    #[test]
    fn zero_row_and_zero_query_score_zero() {
        let dim = 40;
        let rec = records(&[vec![0.0; dim]]);
        let qq = QuantQuery::new(&unit(dim, 3));
        let mut out = [1.0f32];
        scores(Isa::detect(), &qq, &rec, &mut out);
        assert_eq!(out[0], 0.0);
    }

    #[test]
    fn bounded_scores_are_the_scores_and_the_scalar_half_widths() {
        for (dim, n) in [
            (384usize, 13usize),
            (384, 8),
            (33, 7),
            (5, 3),
            (390, 1),
            (20, 9),
            (52, 8),
        ] {
            let rows: Vec<Vec<f32>> = (0..n).map(|i| unit(dim, 40 + i as u64)).collect();
            let mut recs = records(&rows);
            // A damaged record: its half-width is NaN, never a finite number.
            let at = (n / 2) * record_len(dim) + dim + 4;
            recs[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
            let qq = QuantQuery::new(&unit(dim, 4321));
            for isa in Isa::available() {
                let (mut want, mut out, mut half) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
                scores(isa, &qq, &recs, &mut want);
                scores_bounded(isa, &qq, &recs, &mut out, &mut half);
                assert_eq!(out, want, "{isa:?} dim {dim}");
                for (r, h) in half.iter().enumerate() {
                    let rec = &recs[r * record_len(dim)..(r + 1) * record_len(dim)];
                    let w = qq.half_width(rec);
                    if r == n / 2 {
                        assert!(h.is_nan() && w.is_nan(), "{isa:?} dim {dim}: {h}");
                    } else {
                        assert_eq!(h.to_bits(), w.to_bits(), "{isa:?} dim {dim} row {r}");
                        assert!(*h > 0.0 && (qq.slack(rec) - h).abs() <= 1e-6);
                    }
                }
            }
        }
    }

    #[test]
    fn queries_at_127_levels_score_exactly_with_32_bit_sums() {
        // AVX-VNNI (where present) and the scalar loop take queries at every i8
        // level; their integer dot products are exact, so the same bits, and
        // the interval still holds the f32 score (its query error is smaller).
        for (dim, n) in [(384usize, 45usize), (384, 7), (33, 13), (96, 64)] {
            let rows: Vec<Vec<f32>> = (0..n).map(|i| unit(dim, 300 + i as u64)).collect();
            let recs = records(&rows);
            for seed in [1u64, 2] {
                let q = unit(dim, 700 + seed);
                let narrow = QuantQuery::new(&q);
                let qq = QuantQuery::with_levels(&q, 127);
                assert_eq!(
                    qq.q[..dim].iter().map(|v| v.unsigned_abs()).max(),
                    Some(127)
                );
                assert!(qq.err < narrow.err / 2.0, "{} vs {}", qq.err, narrow.err);
                let (mut a, mut ha) = (vec![0.0; n], vec![0.0; n]);
                scores_bounded(Isa::Scalar, &qq, &recs, &mut a, &mut ha);
                for isa in Isa::available() {
                    if single_levels(isa) < 127 {
                        continue;
                    }
                    let (mut b, mut hb) = (vec![0.0; n], vec![0.0; n]);
                    scores_bounded(isa, &qq, &recs, &mut b, &mut hb);
                    assert_eq!(a, b, "{isa:?} dim {dim}");
                    assert_eq!(ha, hb, "{isa:?} dim {dim}");
                }
                for ((x, s), h) in rows.iter().zip(&a).zip(&ha) {
                    let exact: f32 = x.iter().zip(&q).map(|(a, b)| a * b).sum();
                    assert!((exact - s).abs() <= *h, "{exact} {s} {h}");
                }
            }
        }
        // The largest sums: every byte 127 against every query byte +-127.
        let dim = 384;
        let row = vec![1.0f32 / (dim as f32).sqrt(); dim];
        let rec = records(std::slice::from_ref(&row));
        for sign in [1.0f32, -1.0] {
            let q: Vec<f32> = row.iter().map(|v| v * sign).collect();
            let qq = QuantQuery::with_levels(&q, 127);
            for isa in Isa::available() {
                if isa != Isa::Scalar && single_levels(isa) < 127 {
                    continue;
                }
                let mut out = [0.0f32; 1];
                scores(isa, &qq, &rec, &mut out);
                assert!((out[0] - sign).abs() < 1e-3, "{isa:?}: {}", out[0]);
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    #[should_panic(expected = "too wide")]
    fn wide_queries_are_refused_by_sixteen_bit_sums() {
        // Every value equal: every lane sums 4 x 127, beyond 16 bits.
        let q = vec![0.125f32; 64];
        let qq = QuantQuery::with_levels(&q, 127);
        assert!(qq.lanes > i16::MAX as i32);
        let recs = records(&[unit(64, 4)]);
        let mut out = [0.0f32; 1];
        scores_tile(Isa::best(), std::slice::from_ref(&qq), &recs, &mut out);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_vnni_kernel_gives_the_avx2_kernels_bits() {
        if !is_x86_feature_detected!("avxvnni") || Isa::best() != Isa::Avx2 {
            return; // nothing to compare on this CPU
        }
        for (dim, n) in [
            (384usize, 13usize),
            (384, 8),
            (33, 7),
            (5, 3),
            (390, 1),
            (96, 64),
            (384, 45),
            (20, 17),
            (384, 200),
        ] {
            let rows: Vec<Vec<f32>> = (0..n).map(|i| unit(dim, 90 + i as u64)).collect();
            let recs = records(&rows);
            for seed in [1u64, 2, 3] {
                let q = unit(dim, 500 + seed);
                let qq = if seed == 3 {
                    QuantQuery::widest(&q, GROUP)
                } else {
                    QuantQuery::new(&q)
                };
                use std::arch::x86_64::_MM_HINT_T0 as T0;
                let (mut a, mut ha) = (vec![0.0; n], vec![0.0; n]);
                let (mut b, mut hb) = (vec![0.0; n], vec![0.0; n]);
                let (mut c, mut hc) = (vec![0.0; n], vec![0.0; n]);
                // SAFETY: AVX2 and AVX-VNNI were detected; shapes match.
                unsafe {
                    x86::scores_avx2::<4, 8, T0>(&qq, &recs, &mut a, Some(&mut ha));
                    x86::scores_vnni::<4, 0, T0>(&qq, &recs, &mut b, Some(&mut hb));
                    x86::scores_vnni::<8, 16, T0>(&qq, &recs, &mut c, Some(&mut hc));
                }
                let (mut d, mut hd) = (vec![0.0; n], vec![0.0; n]);
                // SAFETY: as above.
                unsafe { x86::scores_into(&qq, &recs, &mut d, Some(&mut hd)) };
                assert_eq!(a, d, "dim {dim}, scores_into");
                assert_eq!(ha, hd, "dim {dim}, scores_into");
                // The shapes `scores_into` and `scores_with` pick (the T1
                // prefetch, 8 and 64 records ahead: inside the 200 records).
                use std::arch::x86_64::_MM_HINT_T1 as T1;
                for f in [
                    x86::scores_avx2::<8, 8, T1>,
                    x86::scores_avx2::<8, 64, T1>,
                    x86::scores_vnni::<8, 32, T1>,
                ] {
                    let (mut e, mut he) = (vec![0.0; n], vec![0.0; n]);
                    // SAFETY: as above.
                    unsafe { f(&qq, &recs, &mut e, Some(&mut he)) };
                    assert_eq!((&a, &ha), (&e, &he), "dim {dim}, T1 prefetch");
                }
                assert_eq!(a, b, "dim {dim}");
                assert_eq!(a, c, "dim {dim}, 8 records an iteration");
                assert_eq!(ha, hc, "dim {dim}, 8 records an iteration");
                assert_eq!(ha, hb, "dim {dim}");
            }
        }
    }

    #[test]
    fn a_damaged_record_has_an_infinite_bound() {
        let dim = 8;
        let mut rec = records(&[unit(dim, 1)]);
        rec[dim + 4..dim + 8].copy_from_slice(&f32::NAN.to_le_bytes());
        let qq = QuantQuery::new(&unit(dim, 2));
        assert_eq!(qq.slack(&rec), f32::INFINITY);
        let rec = records(&[vec![f32::NAN; dim]]);
        assert_eq!(qq.slack(&rec), f32::INFINITY);
    }

    /// Records of raw bytes `u` (each in [0, 127]), scale 1 and norms 1: the
    /// extremes no quantized row reaches all at once.
    fn raw_records(rows: &[Vec<u8>], dim: usize) -> Vec<u8> {
        let stride = record_len(dim);
        let mut out = vec![0u8; rows.len() * stride];
        for (u, rec) in rows.iter().zip(out.chunks_exact_mut(stride)) {
            rec[..dim].copy_from_slice(u);
            for at in [dim, dim + 4, dim + 8] {
                rec[at..at + 4].copy_from_slice(&1.0f32.to_le_bytes());
            }
        }
        out
    }

    /// The plain-AVX2 kernel's scores (at 8 and 4 records an iteration, the
    /// two shapes it runs) against the scalar loop's: the same bits.
    #[cfg(target_arch = "x86_64")]
    fn assert_avx2_is_scalar(qq: &QuantQuery, recs: &[u8], what: &str) {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        use std::arch::x86_64::_MM_HINT_T0 as T0;
        let n = recs.len() / record_len(qq.dim);
        let mut want = vec![0.0; n];
        scores(Isa::Scalar, qq, recs, &mut want);
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        // SAFETY: AVX2 was detected; shapes match.
        unsafe {
            x86::scores_into(qq, recs, &mut a, None);
            x86::scores_avx2::<4, 0, T0>(qq, recs, &mut b, None);
        }
        assert_eq!(a, want, "{what}");
        assert_eq!(b, want, "{what}, 4 records an iteration");
    }

    /// Queries of several shapes: uniform and spiky unit vectors, a constant
    /// one (every lane full: the worst case), one-hot, and near-zero tails.
    fn query_shapes(dim: usize) -> Vec<Vec<f32>> {
        let mut qs: Vec<Vec<f32>> = (0..6).map(|s| unit(dim, 900 + s)).collect();
        qs.push(vec![1.0 / (dim as f32).sqrt(); dim]);
        let mut hot = vec![0.0f32; dim];
        hot[dim / 2] = 1.0;
        qs.push(hot);
        let mut spiky = unit(dim, 77);
        for (i, v) in spiky.iter_mut().enumerate() {
            if i % 7 == 0 {
                *v *= 8.0;
            }
        }
        qs.push(spiky);
        let mut cubed = unit(dim, 78);
        cubed.iter_mut().for_each(|v| *v = *v * *v * *v);
        qs.push(cubed);
        qs
    }

    #[test]
    fn per_query_levels_are_the_widest_whose_lanes_fit_and_score_exactly() {
        for dim in [384usize, 96, 33, 5, 390] {
            for (i, q) in query_shapes(dim).iter().enumerate() {
                let qq = QuantQuery::widest(q, GROUP);
                assert_eq!(qq.lanes, lane_bound(&qq.q, GROUP));
                assert!(qq.lanes <= i16::MAX as i32, "dim {dim} query {i}");
                assert!((Q_MAX..=127).contains(&qq.levels), "{}", qq.levels);
                if qq.levels < 127 {
                    // The widest: one level more would not fit.
                    let wider = QuantQuery::with_levels(q, qq.levels + 1);
                    assert!(wider.lanes > i16::MAX as i32, "dim {dim} query {i}");
                }
                // The same quantization as `with_levels` at those levels.
                assert_eq!(qq.q, QuantQuery::with_levels(q, qq.levels).q);
                // Against quantized rows, and against the bytes that push every
                // lane to its bound: 127 where the query is positive and 0 where
                // it is negative (the largest sum), and the reverse (the lowest).
                let rows: Vec<Vec<f32>> = (0..11).map(|r| unit(dim, 40 + r)).collect();
                #[cfg(target_arch = "x86_64")]
                assert_avx2_is_scalar(&qq, &records(&rows), &format!("dim {dim} query {i}"));
                let hi: Vec<u8> = qq.q[..dim]
                    .iter()
                    .map(|v| if *v > 0 { 127 } else { 0 })
                    .collect();
                let lo: Vec<u8> = qq.q[..dim]
                    .iter()
                    .map(|v| if *v < 0 { 127 } else { 0 })
                    .collect();
                let all: Vec<u8> = vec![127; dim];
                let raw = raw_records(
                    &[
                        hi.clone(),
                        lo,
                        all,
                        hi.clone(),
                        hi.clone(),
                        hi.clone(),
                        hi.clone(),
                        hi.clone(),
                        hi,
                    ],
                    dim,
                );
                #[cfg(target_arch = "x86_64")]
                assert_avx2_is_scalar(&qq, &raw, &format!("dim {dim} query {i}, extreme bytes"));
                let _ = raw;
            }
        }
        // The constant query fills every lane: exactly Q_MAX levels.
        let q = vec![1.0f32 / 384f32.sqrt(); 384];
        assert_eq!(QuantQuery::widest(&q, GROUP).levels, Q_MAX);
        // A one-hot query has a single lane: every level.
        let mut hot = vec![0.0f32; 384];
        hot[5] = 1.0;
        assert_eq!(QuantQuery::widest(&hot, GROUP).levels, 127);
    }

    /// A query whose lane 0 sums `127 + 127 + last` over a group of 3 chunks
    /// (bytes 0 and 1 of chunk 0, byte 0 of chunk 1), 127 levels, `sign`.
    fn lane_query(last: i32, sign: f32) -> QuantQuery {
        let mut x = vec![0.0f32; 96];
        x[0] = sign;
        x[1] = sign;
        x[32] = sign * last as f32 / 127.0;
        let qq = QuantQuery::with_levels(&x, 127);
        assert_eq!(&qq.q[..2], &[(127.0 * sign) as i8; 2]);
        assert_eq!(qq.q[32] as i32, last * sign as i32);
        qq
    }

    #[test]
    fn sixteen_bit_lanes_at_their_bound_are_exact() {
        // 127 x (127 + 127 + 4) = 32766 in one 16-bit lane, both signs.
        for sign in [1.0f32, -1.0] {
            let qq = lane_query(4, sign);
            assert_eq!(qq.lanes, 32766);
            let recs = raw_records(&vec![vec![127u8; 96]; 9], 96);
            let mut want = vec![0.0; 9];
            scores(Isa::Scalar, &qq, &recs, &mut want);
            let d = dot_u8_i8_scalar(&recs[..96], &qq.q[..96]);
            assert_eq!(d, 32766 * sign as i32);
            #[cfg(target_arch = "x86_64")]
            assert_avx2_is_scalar(&qq, &recs, "lane at 32766");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    #[should_panic(expected = "too wide")]
    fn one_more_than_the_lane_bound_is_refused_by_the_avx2_kernel() {
        if !is_x86_feature_detected!("avx2") {
            panic!("too wide (no AVX2 to test)");
        }
        // 127 x 259 = 32893: the lane would wrap.
        let qq = lane_query(5, 1.0);
        assert_eq!(qq.lanes, 32893);
        let recs = raw_records(&[vec![127u8; 96]], 96);
        let mut out = [0.0f32; 1];
        // SAFETY: AVX2 was detected; shapes match.
        unsafe { x86::scores_into(&qq, &recs, &mut out, None) };
    }
}

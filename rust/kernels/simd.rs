//! Inner-product kernels with runtime CPU dispatch and a scalar twin.
//!
//! Every kernel has a portable scalar version that is the reference: the SIMD
//! versions are tested against it within a tolerance (summation order
//! differs, so results agree to ~1e-6, not bit for bit). Which version runs is
//! decided once per process by [`Isa::detect`]; `CORTEX_SIMD=scalar` forces the
//! scalar path (for tests and for ruling the SIMD code out when debugging).
//!
//! AVX-512 is deliberately not dispatched to: no machine this was developed
//! on has it, and an untested kernel is worse than a slower tested one. The
//! x86 path is AVX2+FMA+F16C (f32 and f16 rows) and AVX2 (int8); aarch64 uses
//! NEON, which is part of the aarch64 baseline and so needs no runtime check.
//!
//! Rows are f32 or [`F16`] (the vector file stores f16: half the bytes); the
//! query is always f32, and an f16 row is widened to f32 exactly (F16C's
//! `vcvtph2ps`) before the same FMA chain, so an f16 row scores what its f32
//! widening would.
use std::sync::OnceLock;

/// An IEEE 754 binary16 value (its bits, little-endian in files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

impl F16 {
    /// Exact widening (every f16 is an f32).
    #[inline]
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13) // inf / NaN
        } else if exp != 0 {
            sign | ((exp + 112) << 23) | (man << 13)
        } else if man == 0 {
            sign // +-0
        } else {
            // subnormal: man * 2^-24, exactly representable as a normal f32
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        };
        f32::from_bits(bits)
    }

    /// Round to nearest, ties to even (what numpy's `astype(float16)` and F16C
    /// do); overflow gives infinity, NaN stays NaN.
    pub fn from_f32(x: f32) -> F16 {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32;
        let man = b & 0x7f_ffff;
        if exp == 0xff {
            let nan = if man != 0 { 0x200 } else { 0 };
            return F16(sign | 0x7c00 | nan);
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            // subnormal (or zero) in f16: value = m * 2^-24, rounded
            if e < -10 {
                return F16(sign);
            }
            let m = man | 0x80_0000; // 24 bits, value m * 2^(exp - 150)
            let shift = (14 - e) as u32; // to units of 2^-24
            let q = m >> shift;
            let rem = m & ((1 << shift) - 1);
            let half = 1 << (shift - 1);
            let q = if rem > half || (rem == half && q & 1 == 1) {
                q + 1
            } else {
                q
            };
            return F16(sign | q as u16);
        }
        let q = (e as u32) << 10 | (man >> 13);
        let rem = man & 0x1fff;
        let q = if rem > 0x1000 || (rem == 0x1000 && q & 1 == 1) {
            q + 1
        } else {
            q
        };
        F16(sign | q as u16) // a carry into the exponent is the right rounding
    }
}

/// The element type of rows: f32 or [`F16`].
pub trait Elem: Copy + Send + Sync + 'static {
    /// Whether the kernels widen it from f16.
    const HALF: bool;
    fn f32(self) -> f32;
}

impl Elem for f32 {
    const HALF: bool = false;
    #[inline]
    fn f32(self) -> f32 {
        self
    }
}

impl Elem for F16 {
    const HALF: bool = true;
    #[inline]
    fn f32(self) -> f32 {
        self.to_f32()
    }
}

/// `row` widened to f32 into `out` (same length).
pub fn widen<E: Elem>(row: &[E], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(row) {
        *o = v.f32();
    }
}

/// The instruction set a kernel runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust, no explicit SIMD (the reference).
    Scalar,
    /// x86-64 with AVX2, FMA and F16C (every AVX2 CPU has F16C).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// aarch64 Advanced SIMD.
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl Isa {
    /// The best instruction set this CPU supports, honouring `CORTEX_SIMD=scalar`.
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| {
            if std::env::var("CORTEX_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("scalar")) {
                return Isa::Scalar;
            }
            Isa::best()
        })
    }

    /// The best instruction set of this CPU, ignoring the environment.
    pub fn best() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            return Isa::Neon;
        }
        #[allow(unreachable_code)]
        Isa::Scalar
    }

    /// Every instruction set usable on this CPU, the scalar one first (for tests).
    pub fn available() -> Vec<Isa> {
        let mut v = vec![Isa::Scalar];
        if Isa::best() != Isa::Scalar {
            v.push(Isa::best());
        }
        v
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2+fma+f16c",
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => "neon",
        }
    }
}

// ---------------------------------------------------------------- scalar twin

/// Inner product, scalar reference. Eight partial sums so that the compiler
/// may vectorise it and so its rounding resembles the SIMD versions.
pub fn dot_scalar<E: Elem>(a: &[f32], b: &[E]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let chunks = a.len() / 8;
    for c in 0..chunks {
        for l in 0..8 {
            acc[l] += a[c * 8 + l] * b[c * 8 + l].f32();
        }
    }
    let mut s = 0.0f32;
    for i in chunks * 8..a.len() {
        s += a[i] * b[i].f32();
    }
    let t = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    t + s
}

/// [`dot`] of `q` with four rows anywhere (the screen's survivors): four
/// independent FMA chains instead of one, each in [`dot`]'s order, so every
/// score is bit-identical to [`dot`]'s.
pub fn dot4<E: Elem>(isa: Isa, q: &[f32], rows: [&[E]; 4]) -> [f32; 4] {
    assert!(
        rows.iter().all(|r| r.len() == q.len()),
        "dot4: length mismatch"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2+FMA+F16C were detected before `Isa::Avx2` was chosen; lengths match.
        Isa::Avx2 => unsafe { x86::dot4(q, rows) },
        _ => rows.map(|r| dot(isa, q, r)),
    }
}

/// Scores of `rows` (row-major, `rows.len() == n * dim`) against `q` into `out`.
pub fn scores<E: Elem>(isa: Isa, q: &[f32], rows: &[E], out: &mut [f32]) {
    let dim = q.len();
    assert!(
        dim > 0 && rows.len() == out.len() * dim,
        "scores: shape mismatch"
    );
    match isa {
        Isa::Scalar => {
            for (o, r) in out.iter_mut().zip(rows.chunks_exact(dim)) {
                *o = dot_scalar(q, r);
            }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only constructed after `is_x86_feature_detected!`
        // confirmed AVX2, FMA and F16C; the shape was checked above.
        Isa::Avx2 => unsafe { x86::scores(q, rows, out) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => {
            for (o, r) in out.iter_mut().zip(rows.chunks_exact(dim)) {
                *o = neon_dot(q, r);
            }
        }
    }
}

/// One inner product of the query `a` and the row `b` with the chosen instruction set.
pub fn dot<E: Elem>(isa: Isa, a: &[f32], b: &[E]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot: length mismatch");
    match isa {
        Isa::Scalar => dot_scalar(a, b),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2+FMA+F16C were detected before `Isa::Avx2` was chosen; lengths match.
        Isa::Avx2 => unsafe { x86::dot(a, b) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => neon_dot(a, b),
    }
}

/// A bare read of `data`: every 32-byte word loaded once and folded into four
/// independent XOR accumulators, nothing else. The read floor a scan of the
/// same bytes is measured against (benches/bench_topk.py); the result only
/// keeps the loads from being optimised away.
///
/// `prefetch`: with the scan kernels' software prefetch (6 KiB ahead), or
/// with the hardware prefetchers alone. Which is faster depends on the CPU
/// (on the Xeon of 2026-11-26 the software prefetch made the bare read up to
/// 1.4x slower), so a floor is the faster of the two.
pub fn read_floor(isa: Isa, data: &[u8], prefetch: bool) -> u64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 was detected before `Isa::Avx2` was chosen.
        Isa::Avx2 if prefetch => unsafe { x86::read_floor_ahead::<6144>(data) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx2 => unsafe { x86::read_floor_ahead::<0>(data) },
        _ => {
            let mut acc = [0u64; 4];
            let words = data.chunks_exact(32);
            let tail = words.remainder();
            for w in words {
                for (l, a) in acc.iter_mut().enumerate() {
                    *a ^= u64::from_le_bytes(w[l * 8..l * 8 + 8].try_into().expect("8 bytes"));
                }
            }
            tail.iter()
                .fold(acc[0] ^ acc[1] ^ acc[2] ^ acc[3], |h, b| h ^ *b as u64)
        }
    }
}

/// NEON inner product of an f32 query and a row of either type (an f16 row is
/// widened into a buffer first: aarch64 has no runtime-checked f16 path here).
#[cfg(target_arch = "aarch64")]
fn neon_dot<E: Elem>(q: &[f32], row: &[E]) -> f32 {
    let mut w = vec![0.0f32; row.len()];
    widen(row, &mut w);
    neon::dot(q, &w)
}

/// Hint the CPU to bring `data` into cache (no effect where unsupported).
#[inline]
pub fn prefetch<E>(data: &[E]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = data.as_ptr() as *const i8;
        let bytes = std::mem::size_of_val(data);
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch is a hint that never faults; the address is inside
            // `data` (SSE is part of the x86-64 baseline).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Scores of a tile: `rows` (nr rows) against `queries` (nq queries), both
/// row-major with the same `dim`; `out[r * nq + j] = <rows[r], queries[j]>`.
/// This is the batch kernel: a block of rows stays in L1 while every query
/// passes over it, so the matrix is read from memory once per batch.
pub fn scores_tile<E: Elem>(isa: Isa, dim: usize, rows: &[E], queries: &[f32], out: &mut [f32]) {
    assert!(dim > 0 && rows.len().is_multiple_of(dim) && queries.len().is_multiple_of(dim));
    let nr = rows.len() / dim;
    let nq = queries.len() / dim;
    assert_eq!(out.len(), nr * nq, "scores_tile: output shape mismatch");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2+FMA+F16C detected before `Isa::Avx2` exists; shapes checked above.
        Isa::Avx2 => unsafe { x86::scores_tile(dim, rows, queries, out) },
        _ => {
            for (r, row) in rows.chunks_exact(dim).enumerate() {
                for (j, q) in queries.chunks_exact(dim).enumerate() {
                    out[r * nq + j] = dot(isa, q, row);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::Elem;
    use std::arch::x86_64::*;

    /// Eight elements at `p` as f32: a plain load, or eight f16 widened (F16C).
    ///
    /// # Safety
    /// AVX2+F16C; 8 elements readable at `p`.
    #[inline(always)]
    unsafe fn load8<E: Elem>(p: *const E) -> __m256 {
        // SAFETY: the caller guarantees 8 readable elements and the features.
        unsafe {
            if E::HALF {
                _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
            } else {
                _mm256_loadu_ps(p as *const f32)
            }
        }
    }

    /// Sum each of four accumulators: returns [sum(a), sum(b), sum(c), sum(d)].
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn hsum4(a: __m256, b: __m256, c: __m256, d: __m256) -> __m128 {
        let ab = _mm256_hadd_ps(a, b);
        let cd = _mm256_hadd_ps(c, d);
        let abcd = _mm256_hadd_ps(ab, cd);
        _mm_add_ps(
            _mm256_castps256_ps128(abcd),
            _mm256_extractf128_ps::<1>(abcd),
        )
    }

    /// Reduce one accumulator in exactly the order [`hsum4`] reduces each of its
    /// inputs, so that a row scores the same bits whichever kernel scored it.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn reduce(v: __m256) -> f32 {
        _mm_cvtss_f32(hsum4(v, v, v, v))
    }

    /// One accumulator chain, like each row of [`scores`]: the result is
    /// bit-identical to the score the 4-row kernel gives the same row.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `a.len() == b.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot<E: Elem>(a: &[f32], b: &[E]) -> f32 {
        let n = a.len();
        let main = n / 8 * 8;
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i < main {
            // SAFETY: i + 8 <= n = len of both slices; loadu has no alignment need.
            unsafe {
                acc = _mm256_fmadd_ps(load8(pb.add(i)), _mm256_loadu_ps(pa.add(i)), acc);
            }
            i += 8;
        }
        let mut s = reduce(acc);
        for j in main..n {
            s += b[j].f32() * a[j];
        }
        s
    }

    /// [`super::dot4`]: [`dot`]'s chain for four rows side by side.
    ///
    /// # Safety
    /// AVX2+FMA+F16C; every row has `q.len()` elements.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot4<E: Elem>(q: &[f32], rows: [&[E]; 4]) -> [f32; 4] {
        let n = q.len();
        let main = n / 8 * 8;
        let pq = q.as_ptr();
        let p = rows.map(|r| r.as_ptr());
        let mut a = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i < main {
            // SAFETY: i + 8 <= n = the length of `q` and of every row.
            unsafe {
                let vq = _mm256_loadu_ps(pq.add(i));
                for (acc, pr) in a.iter_mut().zip(p) {
                    *acc = _mm256_fmadd_ps(load8(pr.add(i)), vq, *acc);
                }
            }
            i += 8;
        }
        let mut s = [0.0f32; 4];
        // SAFETY: `s` has room for four f32.
        unsafe { _mm_storeu_ps(s.as_mut_ptr(), hsum4(a[0], a[1], a[2], a[3])) };
        for (sk, row) in s.iter_mut().zip(rows) {
            for j in main..n {
                *sk += row[j].f32() * q[j];
            }
        }
        s
    }

    /// [`super::read_floor`]: 128 bytes a step into four accumulators; with
    /// `AHEAD` > 0 also the scan kernels' software prefetch (two cache lines a
    /// step, `AHEAD` bytes ahead; 6 KiB is eight f16 rows of 384 dimensions).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn read_floor_ahead<const AHEAD: usize>(data: &[u8]) -> u64 {
        // SAFETY: the caller's guarantee.
        unsafe { read_floor_hint::<AHEAD, _MM_HINT_T0>(data) }
    }

    /// [`read_floor_ahead`] with the prefetch hint `HINT` (`_MM_HINT_T0`: into
    /// L1; `_MM_HINT_T1`: into L2 on Intel, into L1 on AMD before Zen 4).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn read_floor_hint<const AHEAD: usize, const HINT: i32>(data: &[u8]) -> u64 {
        let p = data.as_ptr();
        let main = data.len() / 128 * 128;
        let mut a = [_mm256_setzero_si256(); 4];
        let mut i = 0;
        while i < main {
            // SAFETY: i + 128 <= len; unaligned loads; prefetches are hints that
            // never fault, issued only while they stay inside `data`.
            unsafe {
                if AHEAD > 0 && i + AHEAD + 128 <= data.len() {
                    _mm_prefetch::<HINT>(p.add(i + AHEAD) as *const i8);
                    _mm_prefetch::<HINT>(p.add(i + AHEAD + 64) as *const i8);
                }
                for (l, acc) in a.iter_mut().enumerate() {
                    let v = _mm256_loadu_si256(p.add(i + 32 * l) as *const __m256i);
                    *acc = _mm256_xor_si256(*acc, v);
                }
            }
            i += 128;
        }
        let all = _mm256_xor_si256(_mm256_xor_si256(a[0], a[1]), _mm256_xor_si256(a[2], a[3]));
        let mut w = [0u64; 4];
        // SAFETY: `w` has room for 32 bytes.
        unsafe { _mm256_storeu_si256(w.as_mut_ptr() as *mut __m256i, all) };
        data[main..]
            .iter()
            .fold(w[0] ^ w[1] ^ w[2] ^ w[3], |h, b| h ^ *b as u64)
    }

    /// Four rows at a time against one query: four independent FMA chains
    /// hide the FMA latency and one horizontal reduction serves four rows; the
    /// rows 8 on prefetched with the T1 hint (into L2 on Intel and on AMD from
    /// Zen 4; into L1 on older AMD, as T0). On the 1M-row f16 file
    /// (BENCHMARKS.md, "The int8 screen on AVX2, second pass") T0 held L1's
    /// line-fill buffers: 1.14-1.17x the read floor in-process and 1.22-1.25x
    /// through the Python API, against 1.02-1.07x and 1.04-1.05x with T1.
    ///
    /// # Safety
    /// AVX2+FMA; `rows.len() == out.len() * q.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn scores<E: Elem>(q: &[f32], rows: &[E], out: &mut [f32]) {
        // SAFETY: the caller's guarantees.
        unsafe { scores_rows::<E, 4, 8, _MM_HINT_T1>(q, rows, out) }
    }

    /// [`scores`] with `R` rows an iteration (a multiple of 4: `R` FMA chains,
    /// each row's in [`dot`]'s order, so the same bits) and the rows `AHEAD`
    /// on (a multiple of `R`; 0: none) prefetched meanwhile.
    ///
    /// # Safety
    /// As [`scores`].
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn scores_rows<E: Elem, const R: usize, const AHEAD: usize, const HINT: i32>(
        q: &[f32],
        rows: &[E],
        out: &mut [f32],
    ) {
        const { assert!(R > 0 && R.is_multiple_of(4) && AHEAD.is_multiple_of(R)) };
        let dim = q.len();
        let n = out.len();
        let main = dim / 8 * 8;
        let pq = q.as_ptr();
        let mut r = 0;
        while r + R <= n {
            let p0 = rows[r * dim..].as_ptr();
            let mut a = [_mm256_setzero_ps(); R];
            // The R rows are contiguous (R * dim elements): prefetch the rows
            // AHEAD on, two cache lines per step of 8 f32 (one per 8 f16 per
            // four rows), so that they are in cache when their turn comes
            // (~10 % faster than the hardware prefetcher alone on the AMD EPYC
            // (Zen 1) four rows two groups ahead were tuned on; the same trick
            // made the int8 scan 1.9x faster there).
            let esz = std::mem::size_of::<E>();
            let group = R * dim * esz; // bytes of the R rows
            let step = 8 * esz * R; // bytes of the R rows one step covers
            let ahead = if AHEAD > 0 && r + R + AHEAD <= n {
                AHEAD * dim * esz
            } else {
                0
            };
            let pb = p0 as *const i8;
            let mut line = 0usize;
            let mut i = 0;
            while i < main {
                // SAFETY: rows r..r+R exist (r + R <= n) and i + 8 <= dim, so every
                // load stays inside `rows` and `q`; prefetches are hints (they never
                // fault) and stay inside rows r+AHEAD..r+AHEAD+R when `ahead` is
                // non-zero.
                unsafe {
                    if ahead != 0 && line < group {
                        let pf = pb.add(ahead + line);
                        let mut l = 0;
                        while l < step && line + l < group {
                            _mm_prefetch::<HINT>(pf.add(l));
                            l += 64;
                        }
                    }
                    line += step;
                    let vq = _mm256_loadu_ps(pq.add(i));
                    for (k, ak) in a.iter_mut().enumerate() {
                        *ak = _mm256_fmadd_ps(load8(p0.add(k * dim + i)), vq, *ak);
                    }
                }
                i += 8;
            }
            for q4 in 0..R / 4 {
                let mut s = [0.0f32; 4];
                // SAFETY: `s` has room for four f32.
                unsafe {
                    _mm_storeu_ps(
                        s.as_mut_ptr(),
                        hsum4(a[4 * q4], a[4 * q4 + 1], a[4 * q4 + 2], a[4 * q4 + 3]),
                    )
                };
                for (k, sk) in s.iter_mut().enumerate() {
                    let row = &rows[(r + 4 * q4 + k) * dim..(r + 4 * q4 + k + 1) * dim];
                    for j in main..dim {
                        *sk += row[j].f32() * q[j];
                    }
                }
                out[r + 4 * q4..r + 4 * q4 + 4].copy_from_slice(&s);
            }
            r += R;
        }
        while r < n {
            // SAFETY: same CPU features as this function.
            out[r] = unsafe { dot(q, &rows[r * dim..(r + 1) * dim]) };
            r += 1;
        }
    }

    /// 4 rows x 3 queries register tile: 12 accumulators, 3 query registers,
    /// rows used as memory operands. Compute-bound, for batches.
    ///
    /// # Safety
    /// AVX2+FMA; `rows.len() = nr*dim`, `queries.len() = nq*dim`, `out.len() = nr*nq`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn scores_tile<E: Elem>(dim: usize, rows: &[E], queries: &[f32], out: &mut [f32]) {
        let nr = rows.len() / dim;
        let nq = queries.len() / dim;
        let main = dim / 8 * 8;
        let mut r = 0;
        while r + 4 <= nr {
            let pr = rows[r * dim..].as_ptr();
            let mut j = 0;
            while j + 3 <= nq {
                let pq = queries[j * dim..].as_ptr();
                let mut acc = [_mm256_setzero_ps(); 12];
                let mut i = 0;
                while i < main {
                    // SAFETY: rows r..r+4 and queries j..j+3 exist and i + 8 <= dim.
                    unsafe {
                        let q0 = _mm256_loadu_ps(pq.add(i));
                        let q1 = _mm256_loadu_ps(pq.add(dim + i));
                        let q2 = _mm256_loadu_ps(pq.add(2 * dim + i));
                        for k in 0..4 {
                            let vr = load8(pr.add(k * dim + i));
                            acc[k * 3] = _mm256_fmadd_ps(vr, q0, acc[k * 3]);
                            acc[k * 3 + 1] = _mm256_fmadd_ps(vr, q1, acc[k * 3 + 1]);
                            acc[k * 3 + 2] = _mm256_fmadd_ps(vr, q2, acc[k * 3 + 2]);
                        }
                    }
                    i += 8;
                }
                for k in 0..4 {
                    for l in 0..3 {
                        let mut s = reduce(acc[k * 3 + l]);
                        let row = &rows[(r + k) * dim..(r + k + 1) * dim];
                        let q = &queries[(j + l) * dim..(j + l + 1) * dim];
                        for t in main..dim {
                            s += row[t].f32() * q[t];
                        }
                        out[(r + k) * nq + j + l] = s;
                    }
                }
                j += 3;
            }
            while j < nq {
                let q = &queries[j * dim..(j + 1) * dim];
                let mut s = [0.0f32; 4];
                // SAFETY: same CPU features; rows r..r+4 exist.
                unsafe { scores(q, &rows[r * dim..(r + 4) * dim], &mut s) };
                for k in 0..4 {
                    out[(r + k) * nq + j] = s[k];
                }
                j += 1;
            }
            r += 4;
        }
        while r < nr {
            let row = &rows[r * dim..(r + 1) * dim];
            for j in 0..nq {
                // SAFETY: same CPU features; lengths equal.
                out[r * nq + j] = unsafe { dot(&queries[j * dim..(j + 1) * dim], row) };
            }
            r += 1;
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    /// Inner product with NEON (part of the aarch64 baseline).
    pub fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let mut i = 0;
        // SAFETY: NEON is always present on aarch64; every load reads 4 f32 at
        // i..i+4 with i + 4 <= n.
        let mut s = unsafe {
            let mut acc0 = vdupq_n_f32(0.0);
            let mut acc1 = vdupq_n_f32(0.0);
            while i + 8 <= n {
                acc0 = vfmaq_f32(
                    acc0,
                    vld1q_f32(a.as_ptr().add(i)),
                    vld1q_f32(b.as_ptr().add(i)),
                );
                acc1 = vfmaq_f32(
                    acc1,
                    vld1q_f32(a.as_ptr().add(i + 4)),
                    vld1q_f32(b.as_ptr().add(i + 4)),
                );
                i += 8;
            }
            vaddvq_f32(vaddq_f32(acc0, acc1))
        };
        while i < n {
            s += a[i] * b[i];
            i += 1;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn data(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n).map(|_| lcg(&mut s)).collect()
    }

    fn reference(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| *x as f64 * *y as f64)
            .sum::<f64>() as f32
    }

    #[test]
    fn every_isa_matches_the_reference_for_odd_dims() {
        for dim in [1usize, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 384, 385] {
            let q = data(dim, dim as u64);
            let rows = data(dim * 11, 99 + dim as u64);
            for isa in Isa::available() {
                let mut out = vec![0.0; 11];
                scores(isa, &q, &rows, &mut out);
                for (r, o) in out.iter().enumerate() {
                    let want = reference(&q, &rows[r * dim..(r + 1) * dim]);
                    assert!(
                        (o - want).abs() < 1e-4,
                        "{isa:?} dim {dim} row {r}: {o} vs {want}"
                    );
                    let d = dot(isa, &q, &rows[r * dim..(r + 1) * dim]);
                    assert!((d - want).abs() < 1e-4);
                }
            }
        }
    }

    #[test]
    fn dot4_is_bit_identical_to_dot_for_f32_and_f16_rows() {
        for dim in [1usize, 7, 8, 9, 17, 100, 384, 385] {
            let q = data(dim, 5 + dim as u64);
            let rows = data(dim * 9, 77 + dim as u64);
            let half: Vec<F16> = rows.iter().map(|v| F16::from_f32(*v)).collect();
            let row = |r: usize| &rows[r * dim..(r + 1) * dim];
            let hrow = |r: usize| &half[r * dim..(r + 1) * dim];
            for isa in Isa::available() {
                // rows in any order, one of them twice
                for pick in [[0usize, 1, 2, 3], [8, 3, 5, 3]] {
                    let got = dot4(isa, &q, pick.map(row));
                    assert_eq!(got, pick.map(|r| dot(isa, &q, row(r))), "{isa:?} dim {dim}");
                    let got = dot4(isa, &q, pick.map(hrow));
                    assert_eq!(
                        got,
                        pick.map(|r| dot(isa, &q, hrow(r))),
                        "{isa:?} dim {dim}"
                    );
                }
            }
        }
    }

    #[test]
    fn f16_conversions_are_exact_and_round_to_nearest_even() {
        // Every f16 widens exactly and rounds back to itself (NaN stays NaN).
        for bits in 0..=u16::MAX {
            let h = F16(bits);
            let x = h.to_f32();
            if x.is_nan() {
                assert!(F16::from_f32(x).to_f32().is_nan());
                continue;
            }
            assert_eq!(F16::from_f32(x), h, "{bits:#06x}");
            // against the hardware where it exists
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("f16c") {
                // SAFETY: F16C detected.
                let hw = unsafe { hw_widen(bits) };
                assert_eq!(hw.to_bits(), x.to_bits(), "{bits:#06x}");
            }
        }
        // Rounding: against the f64 nearest (ties to even) and the hardware.
        let mut seed = 5u64;
        for i in 0..200_000 {
            let scale = [1.0f32, 1e-3, 1e-5, 1e-7, 6e4, 7e4][i % 6];
            let x = lcg(&mut seed) * scale;
            let h = F16::from_f32(x);
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("f16c") {
                // SAFETY: F16C detected.
                assert_eq!(h.0, unsafe { hw_narrow(x) }, "{x:e}");
            }
            if h.to_f32().is_finite() {
                let (lo, hi) = (F16(h.0.wrapping_sub(1)), F16(h.0.wrapping_add(1)));
                let err = (h.to_f32() as f64 - x as f64).abs();
                for n in [lo, hi] {
                    let v = n.to_f32();
                    if v.is_finite() && (v < 0.0) == (h.to_f32() < 0.0) {
                        assert!(err <= (v as f64 - x as f64).abs(), "{x:e}");
                    }
                }
            }
        }
        for &(x, h) in &[
            (65520.0f32, 0x7c00u16),
            (65519.0, 0x7bff),
            (5.96e-8, 0x0001),
        ] {
            assert_eq!(F16::from_f32(x).0, h, "{x:e}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "f16c")]
    unsafe fn hw_widen(bits: u16) -> f32 {
        use std::arch::x86_64::*;
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(bits as i16)))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "f16c")]
    unsafe fn hw_narrow(x: f32) -> u16 {
        use std::arch::x86_64::*;
        _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set1_ps(x))) as u16
    }

    #[test]
    fn an_f16_row_scores_exactly_what_its_f32_widening_scores() {
        for dim in [1usize, 7, 8, 9, 17, 100, 384, 385] {
            let n = 13;
            let q = data(dim, dim as u64);
            let half: Vec<F16> = data(dim * n, 7 + dim as u64)
                .iter()
                .map(|v| F16::from_f32(*v))
                .collect();
            let wide: Vec<f32> = half.iter().map(|h| h.to_f32()).collect();
            let qs = data(dim * 5, 3);
            for isa in Isa::available() {
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                scores(isa, &q, &half, &mut a);
                scores(isa, &q, &wide, &mut b);
                assert_eq!(a, b, "{isa:?} dim {dim}");
                for r in 0..n {
                    let row = &half[r * dim..(r + 1) * dim];
                    // one chain or four: the same bits
                    assert_eq!(
                        dot(isa, &q, row).to_bits(),
                        a[r].to_bits(),
                        "{isa:?} {dim} {r}"
                    );
                    let want = reference(&q, &wide[r * dim..(r + 1) * dim]);
                    assert!((a[r] - want).abs() < 1e-4);
                }
                let (mut ta, mut tb) = (vec![0.0; n * 5], vec![0.0; n * 5]);
                scores_tile(isa, dim, &half, &qs, &mut ta);
                scores_tile(isa, dim, &wide, &qs, &mut tb);
                assert_eq!(ta, tb, "{isa:?} tile dim {dim}");
            }
        }
    }

    #[test]
    fn tile_matches_the_reference() {
        for (dim, nr, nq) in [
            (384usize, 9usize, 7usize),
            (5, 4, 3),
            (16, 1, 1),
            (33, 8, 6),
        ] {
            let rows = data(dim * nr, 1);
            let qs = data(dim * nq, 2);
            for isa in Isa::available() {
                let mut out = vec![0.0; nr * nq];
                scores_tile(isa, dim, &rows, &qs, &mut out);
                for r in 0..nr {
                    for j in 0..nq {
                        let want =
                            reference(&rows[r * dim..(r + 1) * dim], &qs[j * dim..(j + 1) * dim]);
                        assert!(
                            (out[r * nq + j] - want).abs() < 1e-4,
                            "{isa:?} {dim} {r} {j}"
                        );
                    }
                }
            }
        }
    }
}

//! Thin pyo3 wrapper of the vector file and the top-k kernels: validate and
//! copy arguments with the GIL held, run the kernel with the GIL released,
//! convert the result back.
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use numpy::{
    PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::{Error, Result};
use crate::kernels::simd::{self, Isa, F16};
use crate::kernels::topk::{self, Keep};
use crate::kernels::vecfile::VecFile;

/// Below this many rows covered by the int8 copy, `quantized=None` scans the f16
/// rows: the plain scan of a matrix that fits in cache is as fast. Both are exact, so
/// this only moves speed. Measured crossover (benches/vectors.md).
pub const QUANT_MIN_ROWS: usize = crate::kernels::vecfile::Q8_MIN_ROWS;

/// Threads for a scan: `CORTEX_THREADS` if set to a positive integer, else all cores.
#[pyfunction]
pub fn default_threads() -> usize {
    std::env::var("CORTEX_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The instruction set the kernels use on this CPU ("avx2+fma", "neon" or "scalar").
#[pyfunction]
pub fn simd_level() -> &'static str {
    Isa::detect().name()
}

/// The kernel of the single-query int8 screen on this CPU: "avx-vnni"
/// (AVX2 with `vpdpbusd`), else [`simd_level`]'s instruction set.
#[pyfunction]
pub fn int8_kernel() -> &'static str {
    crate::kernels::quant::kernel_name(Isa::detect())
}

const FIX_F32: &str = "use np.ascontiguousarray(x, dtype=np.float32)";

/// Borrow a C-contiguous float32 array of `ndim` dimensions and copy it out,
/// with an error that says how to fix anything else. Returns (values, shape).
pub(crate) fn f32_array(
    obj: &Bound<'_, PyAny>,
    name: &str,
    ndim: usize,
) -> Result<(Vec<f32>, Vec<usize>)> {
    let arr = obj.cast::<PyUntypedArray>().map_err(|_| {
        Error::Type(format!(
            "{name} must be a numpy float32 array, got {}; {FIX_F32}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))
    })?;
    if arr.ndim() != ndim {
        return Err(Error::Invalid(format!(
            "{name} must have {ndim} dimension(s), got shape {:?}",
            arr.shape()
        )));
    }
    if !arr.dtype().is_equiv_to(&numpy::dtype::<f32>(obj.py())) {
        return Err(Error::Type(format!(
            "{name} must be float32, got {}; {FIX_F32}",
            arr.dtype()
        )));
    }
    let shape = arr.shape().to_vec();
    let v = match ndim {
        1 => {
            let a = obj
                .cast::<PyArray1<f32>>()
                .map_err(|_| Error::Type(format!("{name}: {FIX_F32}")))?;
            let ro = a
                .try_readonly()
                .map_err(|_| Error::Invalid(format!("{name} is being written to")))?;
            ro.as_slice()
                .map_err(|_| Error::Invalid(format!("{name} is not C-contiguous; {FIX_F32}")))?
                .to_vec()
        }
        _ => {
            let a = obj
                .cast::<PyArray2<f32>>()
                .map_err(|_| Error::Type(format!("{name}: {FIX_F32}")))?;
            let ro = a
                .try_readonly()
                .map_err(|_| Error::Invalid(format!("{name} is being written to")))?;
            ro.as_slice()
                .map_err(|_| Error::Invalid(format!("{name} is not C-contiguous; {FIX_F32}")))?
                .to_vec()
        }
    };
    Ok((v, shape))
}

/// Copy a 1-d int64 array out (contiguous or not).
pub(crate) fn i64_array(obj: &Bound<'_, PyAny>, name: &str) -> Result<Vec<i64>> {
    let a = obj.cast::<PyArray1<i64>>().map_err(|_| {
        Error::Type(format!(
            "{name} must be a 1-d numpy int64 array; use np.asarray({name}, dtype=np.int64)"
        ))
    })?;
    let ro = a
        .try_readonly()
        .map_err(|_| Error::Invalid(format!("{name} is being written to")))?;
    Ok(ro.as_array().iter().copied().collect())
}

/// Check every value is finite and the row is not zero, then L2-normalise in place.
pub(crate) fn normalise_rows(v: &mut [f32], dim: usize, name: &str) -> Result<()> {
    for (i, row) in v.chunks_exact_mut(dim).enumerate() {
        if let Some(j) = row.iter().position(|x| !x.is_finite()) {
            return Err(Error::Invalid(format!(
                "{name} row {i} has a NaN or infinite value at column {j}; embeddings must be finite"
            )));
        }
        let norm = row
            .iter()
            .map(|x| *x as f64 * *x as f64)
            .sum::<f64>()
            .sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return Err(Error::Invalid(format!(
                "{name} row {i} has zero length; a zero vector has no direction to compare"
            )));
        }
        let inv = (1.0 / norm) as f32;
        row.iter_mut().for_each(|x| *x *= inv);
    }
    Ok(())
}

pub(crate) fn check_k(k: i64) -> Result<usize> {
    if k <= 0 {
        return Err(Error::Invalid(format!("k must be >= 1, got {k}")));
    }
    Ok(usize::try_from(k).unwrap_or(usize::MAX))
}

pub(crate) fn check_threads(threads: Option<i64>) -> Result<usize> {
    match threads {
        None => Ok(default_threads()),
        Some(t) if t >= 1 => Ok(t as usize),
        Some(t) => Err(Error::Invalid(format!(
            "threads must be >= 1 (or None for all cores), got {t}"
        ))),
    }
}

/// The native handle behind `cortex.vectors.VectorIndex`.
#[pyclass(module = "cortex._native", frozen)]
pub struct NativeIndex {
    inner: RwLock<Option<VecFile>>,
    /// The rows `moments` read lately, copied side by side (see there), the most
    /// recent last: at most SAMPLES_KEPT sets (the whole store's sample and a few
    /// projects' of an agent that moves between them).
    samples: Mutex<Vec<Arc<Sample>>>,
}

/// How many calibration samples `moments` keeps copies of (~1.5 MB each at 384-d).
const SAMPLES_KEPT: usize = 4;

/// A copy of the rows of a fixed set of memories (the semantic calibration's sample),
/// contiguous: scattered over the file, its 2,048 rows cost 0.90 ms of CPU to score
/// right after a 100k scan evicted them, 0.37 ms from this copy (BENCHMARKS.md,
/// "Hybrid latency, fourth pass").
/// Committed rows never change in place (compaction and repair write a new file), so
/// the copy holds while the file has the same rows (`count`).
struct Sample {
    ids: Vec<i64>,
    count: usize,
    rows: Vec<u32>,
    data: Vec<F16>,
}

/// numpy's pairwise summation of float64 (`np.add.reduce` of a contiguous array: runs
/// of eight partial sums up to 128 values, halves beyond), so that `moments` gives
/// numpy's mean and standard deviation to the bit.
fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for x in a {
            res += x;
        }
        res
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let main = n - n % 8;
        let mut i = 8;
        while i < main {
            for (j, acc) in r.iter_mut().enumerate() {
                *acc += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for x in &a[main..] {
            res += x;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&a[..n2]) + pairwise_sum(&a[n2..])
    }
}

impl NativeIndex {
    pub(crate) fn read<T>(&self, f: impl FnOnce(&VecFile) -> Result<T>) -> Result<T> {
        let g = self
            .inner
            .read()
            .map_err(|_| Error::State("index lock poisoned".into()))?;
        f(g.as_ref().ok_or_else(closed)?)
    }
    fn write<T>(&self, f: impl FnOnce(&mut VecFile) -> Result<T>) -> Result<T> {
        let mut g = self
            .inner
            .write()
            .map_err(|_| Error::State("index lock poisoned".into()))?;
        f(g.as_mut().ok_or_else(closed)?)
    }
}

fn closed() -> Error {
    Error::State("this vector index is closed; open it again with VectorIndex.open(path)".into())
}

/// The validated options of a search.
struct How {
    k: usize,
    quantized: Option<bool>,
    threads: usize,
    candidates: Option<usize>,
}

impl How {
    fn new(
        k: i64,
        quantized: Option<bool>,
        threads: Option<i64>,
        candidates: Option<i64>,
    ) -> Result<How> {
        let candidates = match candidates {
            None => None,
            Some(c) if c >= 1 => Some(usize::try_from(c).unwrap_or(usize::MAX)),
            Some(c) => return Err(Error::Invalid(format!("candidates must be >= 1, got {c}"))),
        };
        Ok(How {
            k: check_k(k)?,
            quantized,
            threads: check_threads(threads)?,
            candidates,
        })
    }
}

impl NativeIndex {
    /// Search `m` queries (`qs`, m x `qdim`) with the GIL released: (ids, scores,
    /// width) row-major, `width` = the longest result, gaps id -1 / NaN.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        mut qs: Vec<f32>,
        m: usize,
        qdim: usize,
        how: &How,
        allowed: Option<&[i64]>,
        name: &str,
    ) -> Result<(Vec<i64>, Vec<f32>, usize)> {
        let dim = self.read(|v| Ok(v.dim()))?;
        check_dim(qdim, dim, name)?;
        py.detach(|| {
            normalise_rows(&mut qs, dim, name)?;
            self.read(|vf| {
                let subset = allowed.map(|a| vf.rows_for_ids(a));
                let keep = how.candidates.map_or(Keep::Bound, Keep::Candidates);
                let res = top_rows(
                    vf,
                    &qs,
                    how.k,
                    subset.as_deref(),
                    how.quantized,
                    keep,
                    how.threads,
                );
                let width = res.iter().map(Vec::len).max().unwrap_or(0);
                let mut ids = vec![-1i64; m * width];
                let mut scores = vec![f32::NAN; m * width];
                for (j, hits) in res.iter().enumerate() {
                    for (i, h) in hits.iter().enumerate() {
                        ids[j * width + i] = vf.id(h.row);
                        scores[j * width + i] = h.score;
                    }
                }
                Ok((ids, scores, width))
            })
        })
    }
}

/// `name` ("query" or "vectors") of dimension `got` against an index of `dim`.
pub(crate) fn check_dim(got: usize, dim: usize, name: &str) -> Result<()> {
    if got == dim {
        return Ok(());
    }
    let has = if name == "query" { "has" } else { "have" };
    Err(Error::Invalid(format!(
        "{name} {has} dimension {got}, this index holds {dim}"
    )))
}

/// The `k` best live rows of `vf` for each query of `qs` (normalised rows of
/// `vf.dim()`), best first, ties to the lower row; `subset`: only these rows.
/// `quantized`: True the int8 screen, False the plain scan, None the screen when
/// the int8 copy covers QUANT_MIN_ROWS rows and more than `k` rows are searched (a
/// subset no larger than k keeps every row it holds: the screen could rule nothing
/// out; the calibration sample and the rescoring of the other leg's ids ask for
/// exactly this). Every choice gives the same hits: the screen's are the plain
/// scan's. `keep`: what the screen rescores (topk::Keep).
pub(crate) fn top_rows(
    vf: &VecFile,
    qs: &[f32],
    k: usize,
    subset: Option<&[u32]>,
    quantized: Option<bool>,
    keep: Keep,
    threads: usize,
) -> Vec<Vec<topk::Hit>> {
    let (isa, dim) = (Isa::detect(), vf.dim());
    let live = |r: u32| vf.is_live(r);
    let whole = subset.is_some_and(|s| s.len() <= k);
    if quantized.unwrap_or(!whole && vf.q8_rows() >= QUANT_MIN_ROWS) {
        topk::screened(
            isa,
            vf.rows(),
            vf.q8(),
            qs,
            dim,
            k,
            subset,
            keep,
            &live,
            threads,
        )
    } else if let Some(rows) = subset {
        qs.chunks_exact(dim)
            .map(|q| topk::exact_subset(isa, vf.rows(), q, k, rows, &live, threads))
            .collect()
    } else {
        topk::exact(isa, vf.rows(), qs, dim, k, &live, threads)
    }
}

/// `cortex.semantic.row_checksums` of one stored row: its f16 values read as
/// little-endian 64-bit words (16-bit values when the dimension is not a multiple of
/// 4), each mixed (xorshift-multiply) and times an odd constant of its position,
/// summed mod 2^64, mixed again; never 0 (as SQLite's INTEGER).
fn row_checksum(row: &[F16]) -> i64 {
    const MIX: u64 = 0xBF58_476D_1CE4_E5B9;
    let word = |pos: usize, mut w: u64| -> u64 {
        let mult = (pos as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(0x632B_E59B_D9B4_E019)
            | 1;
        w ^= w >> 29;
        w = w.wrapping_mul(MIX);
        w ^= w >> 32;
        w.wrapping_mul(mult)
    };
    let mut h: u64 = 0;
    if row.len().is_multiple_of(4) {
        for (pos, c) in row.chunks_exact(4).enumerate() {
            let w = u64::from(c[0].0)
                | (u64::from(c[1].0) << 16)
                | (u64::from(c[2].0) << 32)
                | (u64::from(c[3].0) << 48);
            h = h.wrapping_add(word(pos, w));
        }
    } else {
        for (pos, v) in row.iter().enumerate() {
            h = h.wrapping_add(word(pos, u64::from(v.0)));
        }
    }
    h ^= h >> 31;
    h = h.wrapping_mul(MIX);
    h ^= h >> 29;
    if h == 0 {
        h = 1;
    }
    h as i64
}

type Pair<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f32>>);
type IdsLive<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<bool>>);
type Checked<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f64>>);
type Pair2<'py> = (Bound<'py, PyArray2<i64>>, Bound<'py, PyArray2<f32>>);

#[pymethods]
impl NativeIndex {
    /// Create an empty index at `path` (replacing any present), open for writing.
    #[staticmethod]
    fn create(py: Python<'_>, path: PathBuf, dim: i64, model_id: &str) -> PyResult<NativeIndex> {
        if dim <= 0 {
            return Err(Error::Invalid(format!("dim must be >= 1, got {dim}")).into());
        }
        let vf = py.detach(|| VecFile::create(&path, dim as usize, model_id))?;
        Ok(NativeIndex {
            inner: RwLock::new(Some(vf)),
            samples: Mutex::new(Vec::new()),
        })
    }

    /// Open an existing index; `writable=True` takes the one-writer lock.
    /// `upto`: rows past it are not seen (reader) or taken back (writer): see
    /// `VecFile::open_upto`.
    #[staticmethod]
    #[pyo3(signature = (path, writable = false, upto = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        writable: bool,
        upto: Option<usize>,
    ) -> PyResult<NativeIndex> {
        let vf = py.detach(|| VecFile::open_upto(&path, writable, upto))?;
        Ok(NativeIndex {
            inner: RwLock::new(Some(vf)),
            samples: Mutex::new(Vec::new()),
        })
    }

    #[getter]
    fn dim(&self) -> PyResult<usize> {
        Ok(self.read(|v| Ok(v.dim()))?)
    }
    #[getter]
    fn model_id(&self) -> PyResult<String> {
        Ok(self.read(|v| Ok(v.model_id().to_owned()))?)
    }
    /// Rows in the file, masked ones included.
    #[getter]
    fn rows(&self) -> PyResult<usize> {
        Ok(self.read(|v| Ok(v.count()))?)
    }
    /// Rows covered by the int8 copy.
    #[getter]
    fn quantized_rows(&self) -> PyResult<usize> {
        Ok(self.read(|v| Ok(v.q8_rows()))?)
    }
    #[getter]
    fn writable(&self) -> PyResult<bool> {
        Ok(self.read(|v| Ok(v.writable()))?)
    }
    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(self.read(|v| Ok(v.path().to_path_buf()))?)
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().map_or(true, |g| g.is_none())
    }

    /// Rows that searches can return (not masked).
    fn live_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(py.detach(|| self.read(|v| Ok(v.live_count())))?)
    }

    /// Memory ids of rows `0..rows` and whether each is live (for the Python paths).
    fn ids_and_live<'py>(&self, py: Python<'py>) -> PyResult<IdsLive<'py>> {
        let (ids, live) = py.detach(|| {
            self.read(|v| {
                let n = v.count() as u32;
                Ok((
                    (0..n).map(|r| v.id(r)).collect::<Vec<_>>(),
                    (0..n).map(|r| v.is_live(r)).collect::<Vec<_>>(),
                ))
            })
        })?;
        Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, live)))
    }

    /// Append rows: `ids` int64 (n,), `vectors` float32 C-contiguous (n, dim).
    /// Rows are L2-normalised before they are stored; NaN/inf or zero rows are
    /// refused. An id that already has a live row supersedes it.
    fn append(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        vectors: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ids = i64_array(ids, "ids")?;
        let (mut v, shape) = f32_array(vectors, "vectors", 2)?;
        let dim = self.dim()?;
        check_dim(shape[1], dim, "vectors")?;
        if shape[0] != ids.len() {
            return Err(Error::Invalid(format!(
                "{} ids for {} vectors; pass one id per row",
                ids.len(),
                shape[0]
            ))
            .into());
        }
        let mut seen = ids.clone();
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Invalid(format!("id {} appears twice in one append", w[0])).into());
        }
        py.detach(|| {
            normalise_rows(&mut v, dim, "vectors")?;
            self.write(|vf| vf.append(&ids, &v))
        })?;
        Ok(())
    }

    /// Mask the live rows of these memory ids; returns how many rows were masked.
    fn mask(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ids = i64_array(ids, "ids")?;
        Ok(py.detach(|| self.write(|vf| vf.mask(&ids)))?)
    }

    /// See rows appended by the writer since this handle opened or last refreshed
    /// (up to `upto` rows, when given).
    #[pyo3(signature = (upto = None))]
    fn refresh(&self, py: Python<'_>, upto: Option<usize>) -> PyResult<()> {
        Ok(py.detach(|| self.write(|vf| vf.refresh_upto(upto)))?)
    }

    /// Rebuild the int8 copy from the stored (f16) rows (writer only).
    fn rebuild_quantized(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| self.write(|vf| vf.rebuild_q8()))?)
    }

    /// Check every row and memory id against the block checksums and every
    /// int8 record against its row (see vecfile.rs); raises IndexFormatError
    /// naming the first damaged block or record. `from_row` > 0 checks only the
    /// blocks holding rows `from_row..` (the rows appended since a handle last
    /// checked). Reads the whole file (0.17-0.28 s for 1M x 384-d from the page
    /// cache, checksums only).
    #[pyo3(signature = (from_row = 0))]
    fn verify(&self, py: Python<'_>, from_row: usize) -> PyResult<()> {
        py.detach(|| self.write(|vf| vf.refresh()))?;
        Ok(py.detach(|| self.read(|vf| vf.verify_rows_from(from_row)))?)
    }

    /// The random id of this set of files (hex): a rebuild renamed into place
    /// has another one, so a reader can tell that its mapping was replaced.
    #[getter]
    fn uuid(&self) -> PyResult<String> {
        Ok(self.read(|v| Ok(v.uuid().iter().map(|b| format!("{b:02x}")).collect()))?)
    }

    /// Flush written bytes to disk.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| self.read(|vf| vf.sync()))?)
    }

    /// Release the mappings and the writer lock. Idempotent.
    fn close(&self) {
        if let Ok(mut g) = self.inner.write() {
            *g = None;
        }
    }

    /// Top-k by cosine: (memory ids int64, scores float32), best first, ties to
    /// the lower row. `allowed`: memory ids the result may contain (any order).
    /// `quantized`: None = automatic (the int8 screen when the copy covers >=
    /// QUANT_MIN_ROWS rows), True forces the int8 screen, False the plain scan
    /// of the f16 rows. The screen returns exactly the plain scan's answer unless
    /// `candidates` is given (then the best `candidates` rows by int8 score are
    /// rescored: the older heuristic, for comparisons).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (query, k, allowed = None, quantized = None, threads = None, candidates = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        k: i64,
        allowed: Option<&Bound<'py, PyAny>>,
        quantized: Option<bool>,
        threads: Option<i64>,
        candidates: Option<i64>,
    ) -> PyResult<Pair<'py>> {
        let (q, shape) = f32_array(query, "query", 1)?;
        let allowed = allowed.map(|a| i64_array(a, "allowed")).transpose()?;
        let how = How::new(k, quantized, threads, candidates)?;
        let (ids, scores, _) = self.run(py, q, 1, shape[0], &how, allowed.as_deref(), "query")?;
        Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, scores)))
    }

    /// (n, mean, standard deviation) of the cosines of `query` with the live rows of the
    /// memories `allowed` (ascending ids): what `search(query, len(allowed),
    /// allowed=allowed)` scores them, its scores in its order, widened to float64 and
    /// reduced as numpy's `mean()` and `std()` do (the same numbers to the bit). The
    /// rows are copied side by side the first time and read from the copy while the
    /// same `allowed` is asked again (the calibration sample of every query). None when
    /// an id holds several rows or a score is NaN (a damaged file: ask `search`).
    fn moments(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        allowed: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(usize, f64, f64)>> {
        let (mut q, shape) = f32_array(query, "query", 1)?;
        let ids = i64_array(allowed, "allowed")?;
        let dim = self.read(|v| Ok(v.dim()))?;
        check_dim(shape[0], dim, "query")?;
        Ok(py.detach(|| {
            normalise_rows(&mut q, dim, "query")?;
            self.read(|vf| {
                let sample = {
                    let mut kept = self
                        .samples
                        .lock()
                        .map_err(|_| Error::State("vector index lock poisoned".into()))?;
                    kept.retain(|s| s.count == vf.count());
                    match kept.iter().position(|s| s.ids == ids) {
                        Some(at) => {
                            let s = kept.remove(at);
                            kept.push(Arc::clone(&s));
                            s
                        }
                        None => {
                            let rows = vf.rows_for_ids(&ids);
                            let all = vf.rows();
                            let mut data = Vec::with_capacity(rows.len() * dim);
                            for &r in &rows {
                                let at = r as usize * dim;
                                data.extend_from_slice(&all[at..at + dim]);
                            }
                            let s = Arc::new(Sample {
                                ids: ids.clone(),
                                count: vf.count(),
                                rows,
                                data,
                            });
                            if kept.len() >= SAMPLES_KEPT {
                                kept.remove(0);
                            }
                            kept.push(Arc::clone(&s));
                            s
                        }
                    }
                };
                let isa = Isa::detect();
                let mut hits: Vec<topk::Hit> = Vec::with_capacity(sample.rows.len());
                for (&row, v) in sample.rows.iter().zip(sample.data.chunks_exact(dim)) {
                    if vf.is_live(row) {
                        let score = simd::dot(isa, &q, v);
                        if score.is_nan() {
                            return Ok(None);
                        }
                        hits.push(topk::Hit { score, row });
                    }
                }
                if hits.len() > ids.len() {
                    return Ok(None); // an id with two live rows (damage): search says so
                }
                hits.sort_unstable_by(topk::order);
                let n = hits.len();
                if n == 0 {
                    return Ok(Some((0, 0.0, 0.0)));
                }
                let wide: Vec<f64> = hits.iter().map(|h| f64::from(h.score)).collect();
                let mean = pairwise_sum(&wide) / n as f64;
                let squares: Vec<f64> = wide.iter().map(|x| (x - mean) * (x - mean)).collect();
                let sd = (pairwise_sum(&squares) / n as f64).sqrt();
                Ok(Some((n, mean, sd)))
            })
        })?)
    }

    /// Top-k of each row of `queries` (m, dim): arrays of shape (m, k') where
    /// k' = min(k, live rows); missing entries (only with a damaged file) are
    /// id -1, score NaN. Arguments as for `search`.
    #[pyo3(signature = (queries, k, quantized = None, threads = None, candidates = None))]
    fn search_batch<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        quantized: Option<bool>,
        threads: Option<i64>,
        candidates: Option<i64>,
    ) -> PyResult<Pair2<'py>> {
        let (qs, shape) = f32_array(queries, "queries", 2)?;
        let how = How::new(k, quantized, threads, candidates)?;
        let m = shape[0];
        let (ids, scores, width) = self.run(py, qs, m, shape[1], &how, None, "queries")?;
        let ids = PyArray1::from_vec(py, ids).reshape([m, width])?;
        let scores = PyArray1::from_vec(py, scores).reshape([m, width])?;
        Ok((ids, scores))
    }

    /// What `Semantic.check` computes of the stored `rows` (row numbers, as its
    /// `_rows_for` finds them) against `query`, in one call: each row's checksum
    /// (`cortex.semantic.row_checksums`: the SQLite column it is checked against,
    /// to the bit) and the inner product of the stored f16 row, widened to f64, with
    /// the query in f64 over the query's f64 length (the score the index gave it
    /// must be this to within f32 rounding). A search's page checked this way made
    /// ~20 numpy calls one.
    fn check_rows<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        rows: &Bound<'py, PyAny>,
    ) -> PyResult<Checked<'py>> {
        let (q, shape) = f32_array(query, "query", 1)?;
        let rows = i64_array(rows, "rows")?;
        let (sums, exact) = py.detach(|| {
            self.read(|vf| {
                let dim = vf.dim();
                check_dim(shape[0], dim, "query")?;
                let count = vf.count();
                let all = vf.rows();
                let q64: Vec<f64> = q.iter().map(|&x| f64::from(x)).collect();
                let length = q64.iter().map(|x| x * x).sum::<f64>().sqrt();
                let mut sums = Vec::with_capacity(rows.len());
                let mut exact = Vec::with_capacity(rows.len());
                for &r in &rows {
                    let r = usize::try_from(r)
                        .ok()
                        .filter(|&r| r < count)
                        .ok_or_else(|| {
                            Error::Invalid(format!(
                                "rows must be in 0..{}",
                                count.saturating_sub(1)
                            ))
                        })?;
                    let row = &all[r * dim..(r + 1) * dim];
                    sums.push(row_checksum(row));
                    let dot: f64 = row
                        .iter()
                        .zip(&q64)
                        .map(|(v, x)| f64::from(v.to_f32()) * x)
                        .sum();
                    exact.push(dot / length);
                }
                Ok((sums, exact))
            })
        })?;
        Ok((PyArray1::from_vec(py, sums), PyArray1::from_vec(py, exact)))
    }

    /// Bench helper (benches/bench_topk.py), not API: a bare read of the bytes a
    /// scan reads (`part`: "rows", every f16 row; "q8", every int8 record) on
    /// `threads` threads, each folding its contiguous share with the SIMD loads
    /// of the scan kernels and nothing else (`prefetch`: with their software
    /// prefetch or without; the floor is the faster). Returns the fold (so the reads are
    /// not optimised away); time it to get the scan's read floor.
    #[pyo3(signature = (part, threads = 1, prefetch = true))]
    fn read_floor(
        &self,
        py: Python<'_>,
        part: &str,
        threads: usize,
        prefetch: bool,
    ) -> PyResult<u64> {
        if part != "rows" && part != "q8" {
            return Err(
                Error::Invalid(format!("part must be 'rows' or 'q8', got {part:?}")).into(),
            );
        }
        let threads = threads.max(1);
        Ok(py.detach(|| {
            self.read(|vf| {
                let data = if part == "rows" {
                    vf.row_bytes_all()
                } else {
                    vf.q8()
                };
                let isa = Isa::detect();
                if threads == 1 {
                    // on the calling thread, as a one-thread scan runs (par_ranges)
                    return Ok(simd::read_floor(isa, data, prefetch));
                }
                let per = data.len().div_ceil(threads).div_ceil(128).max(1) * 128;
                Ok(std::thread::scope(|s| {
                    let parts: Vec<_> = data
                        .chunks(per)
                        .map(|c| s.spawn(move || simd::read_floor(isa, c, prefetch)))
                        .collect();
                    parts
                        .into_iter()
                        .map(|h| h.join().expect("read thread panicked"))
                        .fold(0, |a, b| a ^ b)
                }))
            })
        })?)
    }

    fn __repr__(&self) -> String {
        match self.read(|v| {
            Ok(format!(
                "NativeIndex({:?}, dim={}, rows={})",
                v.path(),
                v.dim(),
                v.count()
            ))
        }) {
            Ok(s) => s,
            Err(_) => "NativeIndex(closed)".to_owned(),
        }
    }
}

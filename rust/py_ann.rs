//! Thin pyo3 wrapper of the approximate (IVF) index, kernels/ann.rs: build it
//! from a `NativeIndex` (the scan file), open it, search it with the scan
//! file's f16 rows and live flags. The GIL is released while a kernel runs.
use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::errors::{Error, Result};
use crate::kernels::ann::{self, Ivf, Params};
use crate::kernels::simd::Isa;
use crate::kernels::topk::Keep;
use crate::kernels::vecfile::VecFile;
use crate::py_index::{
    check_dim, check_k, check_threads, f32_array, i64_array, normalise_rows, top_rows, NativeIndex,
};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn positive(v: i64, name: &str) -> Result<usize> {
    if v >= 1 {
        Ok(usize::try_from(v).unwrap_or(usize::MAX))
    } else {
        Err(Error::Invalid(format!("{name} must be >= 1, got {v}")))
    }
}

/// An open `.ivf` file (see kernels/ann.rs).
#[pyclass(module = "cortex._native", frozen)]
pub struct AnnIndex {
    ivf: Ivf,
}

impl AnnIndex {
    fn check_pair(&self, vf: &VecFile) -> Result<()> {
        if vf.uuid() != self.ivf.uuid || vf.count() < self.ivf.rows || vf.dim() != self.ivf.dim {
            return Err(Error::State(
                "this approximate index was built from another vector index (stale);".to_owned()
                    + " rebuild it with `cortex index build --approximate`",
            ));
        }
        Ok(())
    }
}

type Found<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f32>>,
    usize,
    bool,
);

#[pymethods]
impl AnnIndex {
    /// Build the index of every committed row of `index` and write it at `path`
    /// (replacing any file there). Returns (lists, rows covered).
    #[staticmethod]
    #[pyo3(signature = (index, path, nlist, sample, iters = 10, seed = 0, threads = None))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        index: &Bound<'_, NativeIndex>,
        path: PathBuf,
        nlist: i64,
        sample: i64,
        iters: i64,
        seed: u64,
        threads: Option<i64>,
    ) -> PyResult<(usize, usize)> {
        let p = Params {
            nlist: positive(nlist, "nlist")?,
            sample: positive(sample, "sample")?,
            iters: positive(iters, "iters")?,
            seed,
            threads: check_threads(threads)?,
        };
        let native = index.get();
        Ok(py.detach(|| {
            native.read(|vf| {
                let built = ann::build(Isa::detect(), vf.rows(), vf.dim(), vf.count(), &p)?;
                let lists = built.offsets.len() - 1;
                let rows = built.order.len();
                ann::write(&path, &built, vf.uuid(), seed)?;
                Ok((lists, rows))
            })
        })?)
    }

    /// Open and check the file at `path` (checksum, offsets, rows): a damaged
    /// file raises IndexFormatError.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<AnnIndex> {
        let ivf = py.detach(|| Ivf::open(&path))?;
        Ok(AnnIndex { ivf })
    }

    #[getter]
    fn nlist(&self) -> usize {
        self.ivf.nlist
    }
    #[getter]
    fn dim(&self) -> usize {
        self.ivf.dim
    }
    /// Rows of the scan file the index covers (0..rows); later rows are the tail.
    #[getter]
    fn rows(&self) -> usize {
        self.ivf.rows
    }
    /// The uuid of the scan file it was built from (hex).
    #[getter]
    fn uuid(&self) -> String {
        hex(&self.ivf.uuid)
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.ivf.seed
    }

    /// Top-k of the `nprobe` lists nearest `query` and of the rows appended
    /// after the build: (ids, scores, rows scored, exact). Scores are exact
    /// (rescored from the f16 rows). With `allowed` (memory ids), when the
    /// allowed rows are no more than the probed lists hold, they are searched
    /// exactly instead (`exact` is then True): cheaper and never worse.
    #[pyo3(signature = (index, query, k, nprobe, allowed = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, NativeIndex>,
        query: &Bound<'py, PyAny>,
        k: i64,
        nprobe: i64,
        allowed: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Found<'py>> {
        let (mut q, shape) = f32_array(query, "query", 1)?;
        let allowed = allowed.map(|a| i64_array(a, "allowed")).transpose()?;
        let k = check_k(k)?;
        let nprobe = positive(nprobe, "nprobe")?;
        let native = index.get();
        let (ids, scores, probed, exact) = py.detach(|| -> Result<_> {
            native.read(|vf| {
                self.check_pair(vf)?;
                let dim = vf.dim();
                check_dim(shape[0], dim, "query")?;
                normalise_rows(&mut q, dim, "query")?;
                let isa = Isa::detect();
                let live = |r: u32| vf.is_live(r);
                let count = vf.count();
                let ranked = self.ivf.ranked(isa, &q);
                let search = |allowed: Option<&dyn Fn(u32) -> bool>| {
                    let (h, p) = self.ivf.search(
                        isa,
                        vf.rows(),
                        count,
                        &q,
                        k,
                        &ranked,
                        nprobe,
                        allowed,
                        &live,
                    );
                    (h, p, nprobe >= self.ivf.nlist)
                };
                let (hits, probed, exact) = match allowed.as_deref() {
                    None => search(None),
                    Some(ids) => {
                        let subset = vf.rows_for_ids(ids);
                        let probes = &ranked[..nprobe.min(ranked.len())];
                        let budget = self.ivf.probed_rows(probes) + (count - self.ivf.rows);
                        if subset.len() <= budget {
                            let hits = top_rows(vf, &q, k, Some(&subset), None, Keep::Bound, 1)
                                .pop()
                                .unwrap_or_default();
                            (hits, subset.len(), true)
                        } else {
                            let mut bits = vec![0u64; count.div_ceil(64)];
                            for &r in &subset {
                                bits[r as usize / 64] |= 1 << (r % 64);
                            }
                            let ok = |r: u32| bits[r as usize / 64] & (1 << (r % 64)) != 0;
                            search(Some(&ok))
                        }
                    }
                };
                let ids: Vec<i64> = hits.iter().map(|h| vf.id(h.row)).collect();
                let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
                Ok((ids, scores, probed, exact))
            })
        })?;
        Ok((
            PyArray1::from_vec(py, ids),
            PyArray1::from_vec(py, scores),
            probed,
            exact,
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "AnnIndex(nlist={}, dim={}, rows={})",
            self.ivf.nlist, self.ivf.dim, self.ivf.rows
        )
    }
}

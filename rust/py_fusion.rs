//! Thin pyo3 wrappers of the fusion kernels.
use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::Error;
use crate::kernels::fusion::{self, Fused};

fn ids_lists(lists: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<i64>>> {
    let mut out = Vec::new();
    for item in lists.try_iter()? {
        let item = item?;
        let a = item.cast::<PyArray1<i64>>().map_err(|_| {
            Error::Type(
                "each id list must be a 1-d numpy int64 array; use np.asarray(ids, dtype=np.int64)"
                    .into(),
            )
        })?;
        out.push(a.try_readonly()?.as_array().iter().copied().collect());
    }
    Ok(out)
}

fn score_lists(lists: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<f64>>> {
    let mut out = Vec::new();
    for item in lists.try_iter()? {
        let item = item?;
        let a = item.cast::<PyArray1<f64>>().map_err(|_| {
            Error::Type("each score list must be a 1-d numpy float64 array; use np.asarray(s, dtype=np.float64)".into())
        })?;
        out.push(a.try_readonly()?.as_array().iter().copied().collect());
    }
    Ok(out)
}

fn to_dict<'py>(py: Python<'py>, f: Fused) -> PyResult<Bound<'py, PyDict>> {
    let n = f.ids.len();
    let d = PyDict::new(py);
    d.set_item("ids", PyArray1::from_vec(py, f.ids))?;
    d.set_item("scores", PyArray1::from_vec(py, f.scores))?;
    let ranks: Bound<'py, PyArray2<i64>> = PyArray1::from_vec(py, f.ranks).reshape([f.lists, n])?;
    let inputs: Bound<'py, PyArray2<f64>> =
        PyArray1::from_vec(py, f.input_scores).reshape([f.lists, n])?;
    d.set_item("ranks", ranks)?;
    d.set_item("input_scores", inputs)?;
    Ok(d)
}

/// Reciprocal Rank Fusion; returns a dict of arrays (`cortex.fusion` wraps it).
#[pyfunction]
#[pyo3(signature = (lists, weights, k = 60.0, scores = None))]
pub fn rrf<'py>(
    py: Python<'py>,
    lists: &Bound<'py, PyAny>,
    weights: Vec<f64>,
    k: f64,
    scores: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let lists = ids_lists(lists)?;
    let scores = scores.map(score_lists).transpose()?;
    let fused = py.detach(|| {
        let l: Vec<&[i64]> = lists.iter().map(Vec::as_slice).collect();
        let s: Option<Vec<&[f64]>> = scores
            .as_ref()
            .map(|s| s.iter().map(Vec::as_slice).collect());
        fusion::rrf(&l, &weights, k, s.as_deref())
    })?;
    to_dict(py, fused)
}

/// Linear fusion of min-max normalised scores; returns a dict of arrays.
#[pyfunction]
pub fn linear<'py>(
    py: Python<'py>,
    lists: &Bound<'py, PyAny>,
    scores: &Bound<'py, PyAny>,
    weights: Vec<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let lists = ids_lists(lists)?;
    let scores = score_lists(scores)?;
    let fused = py.detach(|| {
        let l: Vec<&[i64]> = lists.iter().map(Vec::as_slice).collect();
        let s: Vec<&[f64]> = scores.iter().map(Vec::as_slice).collect();
        fusion::linear(&l, &s, &weights)
    })?;
    to_dict(py, fused)
}

//! `cortex._native`: the hot path of cortex. This file only registers what the
//! other modules define.
use pyo3::prelude::*;

pub mod errors;
pub mod kernels;
pub mod keyword;
mod py_ann;
mod py_files;
mod py_fusion;
mod py_index;
mod py_keyword;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<py_index::NativeIndex>()?;
    m.add_class::<py_keyword::KeywordIndex>()?;
    m.add_class::<py_files::FileLock>()?;
    m.add_class::<py_ann::AnnIndex>()?;
    m.add_function(wrap_pyfunction!(py_files::replace_file, m)?)?;
    m.add_function(wrap_pyfunction!(py_index::simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(py_index::int8_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(py_index::default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(py_fusion::rrf, m)?)?;
    m.add_function(wrap_pyfunction!(py_fusion::linear, m)?)?;
    Ok(())
}

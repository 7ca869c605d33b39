//! The one error type of the native layer and the one place it becomes a
//! Python exception.
//!
//! Kernels return [`Error`]; only [`From<Error> for PyErr`] knows about
//! Python. Each variant maps to one class of `cortex.errors` or one builtin,
//! so that `except cortex.errors.IndexFormatError` works whichever layer
//! failed, and so that no native failure collapses into a bare `Exception`.
use std::fmt;

/// Everything the native layer can fail with.
#[derive(Debug)]
pub enum Error {
    /// The index file is truncated, corrupt, of another format or version.
    /// Maps to `cortex.errors.IndexFormatError`.
    Format(String),
    /// An argument has the wrong value (dimension, NaN, k <= 0, ...).
    /// Maps to `cortex.errors.InvalidOptionError` (a `ValueError`).
    Invalid(String),
    /// An argument has the wrong type or dtype. Maps to `TypeError`.
    Type(String),
    /// The file cannot be read or written (permissions, disk full, locked by
    /// another writer). Maps to `cortex.errors.StorageError`.
    Storage(String),
    /// The index was opened read-only and a write was asked for, or it was
    /// closed. Maps to `cortex.errors.CortexError`.
    State(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format(m)
            | Error::Invalid(m)
            | Error::Type(m)
            | Error::Storage(m)
            | Error::State(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// An I/O failure on `path`, with what was being done.
    pub fn io(what: &str, path: &std::path::Path, err: std::io::Error) -> Self {
        Error::Storage(format!("cannot {what} {}: {err}", path.display()))
    }
}

mod py {
    use super::Error;
    use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
    use pyo3::prelude::*;
    use pyo3::types::PyType;

    /// Fetch `cortex.errors.<name>`; fall back to `fallback` if the module
    /// cannot be imported (the extension used on its own), so that converting
    /// an error never raises a different error.
    fn class<'py>(py: Python<'py>, name: &str) -> Option<Bound<'py, PyType>> {
        let module = py.import("cortex.errors").ok()?;
        let attr = module.getattr(name).ok()?;
        attr.cast_into::<PyType>().ok()
    }

    impl From<Error> for PyErr {
        fn from(err: Error) -> PyErr {
            Python::attach(|py| {
                let (name, msg) = match err {
                    Error::Format(m) => ("IndexFormatError", m),
                    Error::Invalid(m) => ("InvalidOptionError", m),
                    Error::Storage(m) => ("StorageError", m),
                    Error::State(m) => ("CortexError", m),
                    Error::Type(m) => return PyTypeError::new_err(m),
                };
                match class(py, name) {
                    Some(cls) => PyErr::from_type(cls, msg),
                    None if name == "InvalidOptionError" => PyValueError::new_err(msg),
                    None => PyException::new_err(msg),
                }
            })
        }
    }
}

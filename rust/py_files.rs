//! `FileLock` and `replace_file`: the file operations `semantic.py` needs that
//! Python has no portable form of (`fcntl` is POSIX-only; `os.replace` cannot
//! replace a file another process has mapped on Windows). Both are the ones the
//! vector file itself uses (`kernels/files.rs`).
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::kernels::files::{self, Open};

/// An I/O error as the `OSError` subclass of its kind (`PermissionError`,
/// `FileNotFoundError`, ...), with what was being done and the path.
fn os_error(what: &str, path: &Path, err: io::Error) -> PyErr {
    let msg = format!("cannot {what} {}: {err}", path.display());
    PyErr::from(io::Error::new(err.kind(), msg))
}

struct Held {
    file: Option<File>,
    held: bool,
}

/// An exclusive lock on a file, shared with other processes (and with other
/// `FileLock`s of the same file in this one): `flock` on unix, `LockFileEx` on
/// Windows. The file is created if missing and must be a regular file (a
/// symbolic link, directory or FIFO there is an `OSError`); it is never read or
/// written. Not reentrant: acquiring a lock this handle holds is a
/// `RuntimeError` (on unix it would succeed, on Windows wait forever). Closing
/// the handle, or the process ending, releases the lock.
#[pyclass(module = "cortex._native", frozen)]
pub struct FileLock {
    path: PathBuf,
    state: Mutex<Held>,
}

impl FileLock {
    fn with<T>(&self, f: impl FnOnce(&mut Held) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }
}

#[pymethods]
impl FileLock {
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<FileLock> {
        let how = Open {
            write: true,
            create: true,
            no_follow: true,
        };
        let file = py
            .detach(|| files::open_regular(&path, how))
            .map_err(|e| os_error("open the lock file", &path, e))?;
        Ok(FileLock {
            path,
            state: Mutex::new(Held {
                file: Some(file),
                held: false,
            }),
        })
    }

    /// Take the lock: wait for it (the GIL released) when `blocking`, else return
    /// at once. Returns whether this handle holds it now.
    #[pyo3(signature = (blocking = true))]
    fn acquire(&self, py: Python<'_>, blocking: bool) -> PyResult<bool> {
        py.detach(|| {
            self.with(|h| {
                if h.held {
                    return Err(PyRuntimeError::new_err(format!(
                        "{} is already locked by this handle",
                        self.path.display()
                    )));
                }
                let file = h.file.as_ref().ok_or_else(|| closed(&self.path))?;
                let got = if blocking {
                    files::lock(file).map(|()| true)
                } else {
                    files::try_lock(file)
                }
                .map_err(|e| os_error("lock", &self.path, e))?;
                h.held = got;
                Ok(got)
            })
        })
    }

    /// Release the lock this handle holds (a `RuntimeError` if it holds none).
    fn release(&self) -> PyResult<()> {
        self.with(|h| {
            let file = h.file.as_ref().ok_or_else(|| closed(&self.path))?;
            if !h.held {
                return Err(PyRuntimeError::new_err(format!(
                    "{} is not locked by this handle",
                    self.path.display()
                )));
            }
            files::unlock(file).map_err(|e| os_error("unlock", &self.path, e))?;
            h.held = false;
            Ok(())
        })
    }

    /// Close the file, releasing the lock if held. Idempotent.
    fn close(&self) -> PyResult<()> {
        self.with(|h| {
            h.file = None;
            h.held = false;
            Ok(())
        })
    }

    /// Whether this handle holds the lock.
    #[getter]
    fn locked(&self) -> PyResult<bool> {
        self.with(|h| Ok(h.held))
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        self.with(|h| Ok(h.file.is_none()))
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().acquire(slf.py(), true)?;
        Ok(slf)
    }

    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        if self.locked()? {
            self.release()?;
        }
        Ok(())
    }

    fn __repr__(&self) -> PyResult<String> {
        let state = self.with(|h| {
            Ok(match (&h.file, h.held) {
                (None, _) => "closed",
                (Some(_), true) => "locked",
                (Some(_), false) => "unlocked",
            })
        })?;
        Ok(format!("FileLock({:?}, {state})", self.path))
    }
}

fn closed(path: &Path) -> PyErr {
    PyRuntimeError::new_err(format!("the lock of {} is closed", path.display()))
}

/// Rename `src` over `dst` atomically, also when another process has `dst`
/// mapped (on Windows the old file is moved aside first: see kernels/files.rs).
/// A reader that has the old file open or mapped keeps reading the old bytes.
#[pyfunction]
pub fn replace_file(py: Python<'_>, src: PathBuf, dst: PathBuf) -> PyResult<()> {
    py.detach(|| files::replace_file(&src, &dst))
        .map_err(|e| os_error(&format!("replace {} with", src.display()), &dst, e))
}

//! The module's rayon pool and the helper that runs engine work on it with the GIL released.
//!
//! The engine parallelizes over RNS limbs with rayon; `pool.install` makes that work run on
//! this pool, whose size `set_num_threads` controls (default: rayon's default, i.e.
//! `RAYON_NUM_THREADS` or every core).

use crate::errors;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, RwLock};

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

fn build(threads: usize) -> PyResult<Arc<ThreadPool>> {
    ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("heinfer-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| errors::HeinferError::new_err(format!("cannot start the thread pool: {e}")))
}

/// The current pool, built on first use.
pub fn current() -> PyResult<Arc<ThreadPool>> {
    if let Some(p) = POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return Ok(p.clone());
    }
    let mut slot = POOL.write().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = slot.as_ref() {
        return Ok(p.clone());
    }
    let p = build(0)?;
    *slot = Some(p.clone());
    Ok(p)
}

/// Runs `f` on the pool with the GIL released and maps its error onto a Python exception.
pub fn run<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> heinfer_ckks::Result<T> + Send,
    T: Send,
{
    let pool = current()?;
    py.detach(move || pool.install(f)).map_err(errors::to_py)
}

/// Sets the number of worker threads used by every later operation (at least 1).
/// Operations already running finish on the previous pool.
#[pyfunction]
pub fn set_num_threads(n: i64) -> PyResult<()> {
    if n < 1 || n > 4096 {
        return Err(PyValueError::new_err(format!(
            "the number of threads must be in 1..=4096, got {n}"
        )));
    }
    let p = build(n as usize)?;
    *POOL.write().unwrap_or_else(|e| e.into_inner()) = Some(p);
    Ok(())
}

/// The number of worker threads of the pool.
#[pyfunction]
pub fn get_num_threads() -> PyResult<usize> {
    Ok(current()?.current_num_threads())
}

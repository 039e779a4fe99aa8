//! The module's rayon pool and the helper that runs engine work on it with the GIL released.
//!
//! The engine parallelizes over RNS limbs with rayon; `pool.install` makes that work run on
//! this pool, whose size `set_num_threads` controls (default: rayon's default, i.e.
//! `RAYON_NUM_THREADS` or every core).
//!
//! `install` from a thread outside the pool hands the work to a worker and waits for it:
//! 15–50 µs per call on the development VM (an addition of 2,048 coefficients took 16–24 µs,
//! under 1 µs of it arithmetic; 49 µs when the worker had parked between calls). With one
//! thread there is nothing to hand over, so each calling thread runs its calls itself, on a
//! one-thread pool whose only worker is that thread ([`local`], rayon's
//! `use_current_thread`): the same work, in the same order. Those calls take [`ONE`] first,
//! so calls from several Python threads still run one at a time, as on the one worker. With
//! several threads, element-wise calls on fewer than [`INLINE_WORDS`] residue words
//! (additions, plaintext and constant products, rescales at small rings) also run on their
//! calling thread's own pool ([`run_sized`]): the hand-over would cost more than they take.
//! After a short call on the shared pool one worker stays awake for [`WARM_WINDOW_US`] µs
//! ([`keep_warm`]), so that the next call of a chain does not wait for a parked worker.

use crate::errors;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

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

thread_local! {
    /// The calling thread's own one-thread pool (`None` inside: building it failed, e.g. the
    /// thread already works for another pool), built on its first call while the engine runs
    /// on one thread and kept for the thread's life. rayon leaks such a pool's registry when
    /// the thread ends: a few hundred bytes per thread that ever called the engine on one
    /// thread.
    static LOCAL: RefCell<Option<Option<Arc<ThreadPool>>>> = const { RefCell::new(None) };
}

/// The calling thread's one-thread pool (see the module's documentation), or `None` when
/// rayon cannot make this thread a pool's worker.
fn local() -> Option<Arc<ThreadPool>> {
    LOCAL.with(|slot| {
        slot.borrow_mut()
            .get_or_insert_with(|| {
                ThreadPoolBuilder::new()
                    .num_threads(1)
                    .use_current_thread()
                    .thread_name(|i| format!("heinfer-local-{i}"))
                    .build()
                    .ok()
                    .map(Arc::new)
            })
            .clone()
    })
}

/// Held by a call that runs on its caller's own pool: one engine thread means one call at a
/// time, whichever Python thread makes it.
static ONE: Mutex<()> = Mutex::new(());

/// The pool a call touching `words` residue words runs on, and whether it must take [`ONE`]:
/// the caller's own one-thread pool ([`local`]) with one engine thread (taking [`ONE`]) or,
/// with several, for an element-wise call under [`INLINE_WORDS`]; the shared pool otherwise.
fn pool_for_call(words: usize) -> PyResult<(Arc<ThreadPool>, bool)> {
    let pool = current()?;
    let single = pool.current_num_threads() == 1;
    if pool.current_thread_index().is_none() && (single || words < INLINE_WORDS) {
        if let Some(own) = local() {
            return Ok((own, single));
        }
    }
    Ok((pool, false))
}

/// Residue words (`N` × limbs × polynomials) below which an element-wise call runs on its
/// calling thread even when the pool has several threads ([`run_sized`]). Handing a call to a
/// pool worker and waiting for it costs 15–50 µs (more when the worker has parked between
/// calls); an addition of 2^16 words takes about that long on one core, so below it the
/// hand-over costs more than the second thread saves (measured: CryptoNets-ReLU in latency
/// mode, N = 2^12 with two primes, ran its segments in 4.0 ms on two threads and 3.2 ms on
/// one).
pub const INLINE_WORDS: usize = 1 << 16;

/// Runs `f` on the pool with the GIL released and maps its error onto a Python exception.
///
/// A panic anywhere in `f` — on this thread or on a pool worker, which rayon propagates to
/// `install` — is caught here and becomes `InternalError` naming `op` ([`errors::panic_to_py`]):
/// it never reaches Python as pyo3's `PanicException`, a `BaseException`.
pub fn run<T, F>(py: Python<'_>, op: &str, f: F) -> PyResult<T>
where
    F: FnOnce() -> heinfer_ckks::Result<T> + Send,
    T: Send,
{
    run_on(py, op, usize::MAX, f, errors::to_py)
}

/// [`run`] for an element-wise call touching `words` residue words: below [`INLINE_WORDS`]
/// it runs on the caller's own one-thread pool (no hand-over), whatever the pool's size.
pub fn run_sized<T, F>(py: Python<'_>, op: &str, words: usize, f: F) -> PyResult<T>
where
    F: FnOnce() -> heinfer_ckks::Result<T> + Send,
    T: Send,
{
    run_on(py, op, words, f, errors::to_py)
}

/// [`run`] for any error type, mapped onto Python by `map`.
pub fn run_with<T, E, F>(
    py: Python<'_>,
    op: &str,
    f: F,
    map: impl FnOnce(E) -> PyErr,
) -> PyResult<T>
where
    F: FnOnce() -> Result<T, E> + Send,
    T: Send,
    E: Send,
{
    run_on(py, op, usize::MAX, f, map)
}

/// The one body of [`run`], [`run_sized`] and [`run_with`].
fn run_on<T, E, F>(
    py: Python<'_>,
    op: &str,
    words: usize,
    f: F,
    map: impl FnOnce(E) -> PyErr,
) -> PyResult<T>
where
    F: FnOnce() -> Result<T, E> + Send,
    T: Send,
    E: Send,
{
    let (pool, one) = pool_for_call(words)?;
    let caught = py.detach(move || {
        // a panic is caught below, so the guard is never poisoned by this call's work
        let _one = one.then(|| ONE.lock().unwrap_or_else(|e| e.into_inner()));
        let shared = pool.current_thread_index().is_none() && pool.current_num_threads() > 1;
        // only calls on the shared pool end a kept-awake worker's wait: a small call on the
        // caller's own pool between two of them does not need it
        let call = if shared {
            CALLS.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            0
        };
        let start = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| pool.install(f)));
        if shared {
            keep_warm(&pool, call, start.elapsed());
        }
        r
    });
    match caught {
        Ok(r) => r.map_err(map),
        Err(payload) => Err(errors::panic_to_py(op, payload)),
    }
}

/// Calls started on the shared pool, so that a worker kept awake ([`keep_warm`]) sees the
/// next one.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// How long (µs) a worker stays awake after a short call on the shared pool ([`keep_warm`]);
/// 0 turns it off.
static WARM_US: AtomicU64 = AtomicU64::new(WARM_WINDOW_US);

/// The default of [`WARM_US`]: a Python step between two engine calls of a latency-mode
/// segment takes 5–100 µs.
pub const WARM_WINDOW_US: u64 = 100;

/// Calls that take longer than this many windows do not keep a worker awake: the wake-up they
/// would save is a small share of them.
const WARM_CALL_WINDOWS: u32 = 100;

/// Reads `HEINFER_WARM_US` at import: the window of [`keep_warm`] in µs (`0` turns it off, e.g.
/// for processes that share their cores with others). A value that is not a whole number of
/// microseconds up to 1 s fails the import with a message that names it.
pub(crate) fn warm_from_env() -> PyResult<()> {
    let Ok(v) = std::env::var("HEINFER_WARM_US") else {
        return Ok(());
    };
    match v.trim().parse::<u64>() {
        Ok(us) if us <= 1_000_000 => {
            WARM_US.store(us, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(PyValueError::new_err(format!(
            "HEINFER_WARM_US must be a whole number of microseconds in 0..=1000000, got {v:?}"
        ))),
    }
}

/// Hidden hook (`_native._set_warm_us`) for benchmarks that compare the engine with and
/// without [`keep_warm`] in one process: sets its window in µs (0: off) and returns the one
/// it replaces.
#[pyfunction]
pub fn _set_warm_us(us: u64) -> u64 {
    WARM_US.swap(us, Ordering::Relaxed)
}

/// After call number `call` on the shared `pool`, which took `took`, keeps one worker spinning
/// until the next call starts or the window ([`WARM_US`]) passes.
///
/// A rayon worker with nothing to do parks within microseconds, and waking it costs 50–100 µs
/// on the development VM: measured on one rotation at N = 2^12 (two primes) on two threads,
/// 104 µs back to back, 136 µs after 20 µs of Python work and 207 µs after 100 µs — slower than
/// the same rotation on one thread (149 µs). A latency-mode segment on a small ring is such a
/// chain of short calls with Python between them; with one worker awake the next call starts
/// at once (106–112 µs at every gap). Only one worker spins (the caller's next Python step
/// needs the other core on a two-core machine), only after a call shorter than
/// `WARM_CALL_WINDOWS` windows (10 ms), and it stops as soon as the next call on the shared
/// pool starts: at most one window of one core per short call.
fn keep_warm(pool: &ThreadPool, call: u64, took: Duration) {
    let window = Duration::from_micros(WARM_US.load(Ordering::Relaxed));
    if window.is_zero() || took > window * WARM_CALL_WINDOWS {
        return;
    }
    pool.spawn(move || {
        let start = Instant::now();
        while CALLS.load(Ordering::Relaxed) == call && start.elapsed() < window {
            std::hint::spin_loop();
        }
    });
}

/// Hidden test hook (`_native._panic_for_tests`): panics inside [`run`] — in one item of a
/// parallel loop (`"parallel"`, rayon carries it back across workers) or in the closure itself
/// (`"closure"`, an out-of-bounds index) — or inside [`errors::guard`] (`"guard"`), so tests
/// can check that a real panic arrives as `InternalError`. No safe input reaches a panic.
#[pyfunction]
pub fn _panic_for_tests(py: Python<'_>, site: &str) -> PyResult<()> {
    match site {
        "parallel" => run(py, "_panic_for_tests", || {
            use rayon::prelude::*;
            (0..64u32).into_par_iter().for_each(|i| {
                assert!(i != 37, "test panic on a pool worker at item {i}");
            });
            Ok(())
        }),
        "closure" => run(py, "_panic_for_tests", || -> heinfer_ckks::Result<()> {
            let v: Vec<u8> = Vec::new();
            let i = v.len() + 3;
            Err(heinfer_ckks::CkksError::InvalidOperand {
                op: "test",
                reason: format!("{}", v[i]),
            })
        }),
        "guard" => errors::guard("_panic_for_tests", || -> PyResult<()> {
            panic!("test panic while holding the GIL")
        }),
        other => Err(PyValueError::new_err(format!(
            "site must be parallel, closure or guard, not {other:?}"
        ))),
    }
}

/// Sets the number of worker threads used by every later operation (at least 1).
/// Operations already running finish on the previous pool.
#[pyfunction]
pub fn set_num_threads(n: i64) -> PyResult<()> {
    if !(1..=4096).contains(&n) {
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

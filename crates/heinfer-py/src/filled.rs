//! New Python `bytes` written once by the engine: not zeroed first, filled with the GIL
//! released.
//!
//! pyo3's `PyBytes::new_with` zero-fills the new object before its closure writes it, and
//! runs the closure with the GIL held. The engine's writers here set every byte of their
//! buffer (a serialized batch, a key set: each checks its buffer's length against the size it
//! computed, then writes every field), so the zeroing is a wasted pass over memory the size of
//! the message (tens of MB per protocol message), and holding the GIL while writing stalls the
//! other Python threads (gRPC's, a service's handlers) for as long.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::to_py;
use crate::pool::run;
use heinfer_ckks as ckks;

/// A new `bytes` of `head.len() + body_len` bytes: `head`, then what `write` puts into the
/// other `body_len` — on the engine's pool, with the GIL released (`op` names the call in
/// errors).
///
/// `write` must set every byte of the slice it is given, or fail: until this returns, the
/// object is referenced by nothing but this function, so no Python code can see it while it
/// is written; on an error (or a panic, caught by [`run`] as `InternalError`) it is freed
/// without having been seen.
pub(crate) fn filled_bytes<'py, F>(
    py: Python<'py>,
    op: &str,
    head: &[u8],
    body_len: usize,
    write: F,
) -> PyResult<Bound<'py, PyBytes>>
where
    F: FnOnce(&mut [u8]) -> ckks::Result<()> + Send,
{
    let len = head
        .len()
        .checked_add(body_len)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| {
            to_py(ckks::CkksError::InvalidOperand {
                op: "bytes",
                reason: format!(
                    "{} + {body_len} bytes do not fit one bytes object",
                    head.len()
                ),
            })
        })?;
    // SAFETY: `PyBytes_FromStringAndSize(NULL, len)` returns a new, uninitialized bytes
    // object of `len` bytes (or NULL with an exception set, turned into `Err` here) that we
    // own; `PyBytes_AsString` gives its buffer of `len` bytes, valid while `obj` lives (to the
    // end of this function at least). CPython documents filling such an object before it is
    // shared. Nothing else references it until it is returned, so writing through the slice
    // (with the GIL released) races with nothing; every byte is written before it is
    // returned (`head` here, the rest by `write`'s contract).
    unsafe {
        let ptr =
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as pyo3::ffi::Py_ssize_t);
        let obj = Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyBytes>();
        let buf =
            std::slice::from_raw_parts_mut(pyo3::ffi::PyBytes_AsString(ptr).cast::<u8>(), len);
        let (h, body) = buf.split_at_mut(head.len());
        h.copy_from_slice(head);
        run(py, op, move || write(body))?;
        Ok(obj)
    }
}

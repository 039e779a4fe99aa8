//! Encryption straight to bytes: a client's batch written as it is encrypted.
//!
//! `encrypt_batch(…).to_bytes(frame=…)` holds every ciphertext of the batch at once — both
//! polynomials of each, the second expanded from its seed although only the seed travels:
//! 616 MB for CryptoNets' 784 inputs at six limbs, memory the allocator faults in and the
//! kernel zeroes again for every query. Here each thread encrypts one row at a time and
//! serializes it into its own slot of the message, so at most one ciphertext per thread is
//! alive. The bytes have the format of the two calls (a batch of seed-compressed
//! ciphertexts, after the frame's header), which the protocol's receivers validate as any.

use crate::batch::{frame_head, row_values};
use crate::filled::filled_bytes;
use crate::keygen::KeyGenerator;
use crate::pool::run;
use heinfer_ckks as ckks;
use heinfer_ckks::serialize::{self, BATCH_HEADER_BYTES};
use heinfer_ckks::Encoder;
use num_complex::Complex64;
use numpy::PyReadonlyArray2;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;
use std::borrow::Cow;

/// `encrypt_batch(kg, values, scale, level).to_bytes(frame=frame)` without the batch: each
/// row of `values` (`count × slots` complex) encoded and encrypted with the secret key at
/// `scale` and `level` (seed-compressed), serialized as it is encrypted, in parallel.
#[pyfunction]
#[pyo3(signature = (kg, values, scale, level, frame = None))]
pub fn encrypt_batch_bytes<'py>(
    py: Python<'py>,
    kg: &KeyGenerator,
    values: PyReadonlyArray2<'_, Complex64>,
    scale: f64,
    level: usize,
    frame: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let slots = kg.params.slots();
    encrypt_rows_bytes(
        py,
        kg,
        values,
        (slots, "slots"),
        "encrypt_batch_bytes",
        frame,
        |enc, row| kg.inner.encrypt_values(enc, row, scale, level),
    )
}

/// [`encrypt_batch_bytes`] in the coefficients (coefficient packing: `count × N` real
/// values), as `encrypt_batch_coefficients(…).to_bytes(frame=frame)`.
#[pyfunction]
#[pyo3(signature = (kg, values, scale, level, frame = None))]
pub fn encrypt_batch_coefficients_bytes<'py>(
    py: Python<'py>,
    kg: &KeyGenerator,
    values: PyReadonlyArray2<'_, f64>,
    scale: f64,
    level: usize,
    frame: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let n = kg.params.n();
    encrypt_rows_bytes(
        py,
        kg,
        values,
        (n, "coefficients"),
        "encrypt_batch_coefficients_bytes",
        frame,
        |enc, row| kg.inner.encrypt_coefficients(enc, row, scale, level),
    )
}

/// Rows of `values` (each 1 to `width.0` values) encrypted by `encrypt` and written as one
/// batch after `frame`'s header. Every row's ciphertext has the first row's length (seed
/// compressed, one level); one that does not is an error, never a short message.
fn encrypt_rows_bytes<'py, T>(
    py: Python<'py>,
    kg: &KeyGenerator,
    values: PyReadonlyArray2<'_, T>,
    width: (usize, &str),
    op: &'static str,
    frame: Option<Bound<'py, PyAny>>,
    encrypt: impl Fn(&Encoder, &[T]) -> ckks::Result<ckks::Ciphertext> + Sync,
) -> PyResult<Bound<'py, PyBytes>>
where
    T: numpy::Element + Copy + Send + Sync,
{
    let (data, row) = row_values(&values, width.0, width.1)?;
    let count = data.len() / row;
    let params = kg.params.clone();
    let too_many = || ckks::CkksError::InvalidOperand {
        op: "serialize a ciphertext batch",
        reason: format!("{count} ciphertexts do not fit one batch message"),
    };
    let count32 = u32::try_from(count).map_err(|_| crate::errors::to_py(too_many()))?;
    // the first row gives every ciphertext's length
    let first = run(py, op, || {
        let enc = Encoder::new(&params);
        serialize::ciphertext_to_bytes(&params, &encrypt(&enc, &data[..row])?)
    })?;
    let one = first.len();
    let body = (4 + one)
        .checked_mul(count)
        .and_then(|b| b.checked_add(BATCH_HEADER_BYTES))
        .ok_or_else(|| crate::errors::to_py(too_many()))?;
    let head = frame_head(frame, body)?;
    let head = head.as_ref().map_or(&[][..], |h| h.as_bytes());
    // every byte of the body is written: the batch header, then each slot's length and bytes
    filled_bytes(py, op, head, body, |out| {
        let (h, rest) = out.split_at_mut(BATCH_HEADER_BYTES);
        serialize::write_batch_header(h, count32);
        let enc = Encoder::new(&params);
        rest.par_chunks_mut(4 + one)
            .zip(data.par_chunks(row))
            .enumerate()
            .try_for_each(|(i, (slot, r))| {
                let bytes = if i == 0 {
                    Cow::Borrowed(&first[..])
                } else {
                    Cow::Owned(serialize::ciphertext_to_bytes(&params, &encrypt(&enc, r)?)?)
                };
                // every slot is sized by row 0's ciphertext: another length is an error
                serialize::write_batch_slot(slot, &bytes)
            })
    })
}

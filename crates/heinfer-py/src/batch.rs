//! Batches of ciphertexts (one per tensor element, slots or coefficients = batch items): their
//! wire format (`heinfer_ckks::serialize::ciphertext_batch_*`), conversion from and to lists of
//! ciphertexts, and batch encryption and decryption. The kernels are in `kernels.rs`.

use crate::errors::{check_max_bytes, to_py, OperandError};
use crate::filled::filled_bytes;
use crate::keygen::{Decryptor, KeyGenerator};
use crate::objects::Ciphertext;
use crate::params::Params;
use crate::pool::{run, run_with};
use heinfer_ckks as ckks;
use heinfer_ckks::{serialize, CkksParams, Encoder};
use heinfer_kernels::KernelError;
use num_complex::Complex64;
use numpy::{PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;
use std::borrow::Cow;
use zeroize::Zeroizing;

/// Maps a kernel error onto a Python exception.
pub(crate) fn kerr(e: KernelError) -> PyErr {
    match e {
        KernelError::Ckks(c) => to_py(c),
        other => OperandError::new_err(other.to_string()),
    }
}

/// Runs kernel work on the pool with the GIL released; a panic becomes `InternalError`
/// naming `op` (see [`crate::pool::run`]).
pub(crate) fn run_k<T: Send, F: FnOnce() -> heinfer_kernels::Result<T> + Send>(
    py: Python<'_>,
    op: &str,
    f: F,
) -> PyResult<T> {
    run_with(py, op, f, kerr)
}

/// Serialized bytes handed in from Python: a `bytes` object, or a read-only, C-contiguous,
/// one-dimensional buffer of bytes — a `memoryview` of a message's ciphertext field (read in
/// place: `heinfer.protocol.messages.decode_bulk`), or a read-only `uint8` NumPy array (what
/// a Ray actor receives, without a copy, for an array put in the object store). A writeable
/// buffer is refused: its memory could change while the engine reads it with the GIL
/// released.
enum ByteSource<'py> {
    Bytes(Bound<'py, PyBytes>),
    Buffer(PyBuffer<u8>),
}

impl<'py> ByteSource<'py> {
    fn extract(data: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = data.cast::<PyBytes>() {
            return Ok(Self::Bytes(b.clone()));
        }
        let bad = || {
            OperandError::new_err(format!(
                "serialized bytes must be bytes or a read-only contiguous 1-D buffer of bytes, got {}",
                data.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
            ))
        };
        let buf = PyBuffer::<u8>::get(data).map_err(|_| bad())?;
        if !buf.readonly() || !buf.is_c_contiguous() || buf.dimensions() != 1 {
            return Err(bad());
        }
        Ok(Self::Buffer(buf))
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Bytes(b) => b.as_bytes(),
            Self::Buffer(b) if b.len_bytes() == 0 => &[],
            // SAFETY: the buffer is held (and its exporter kept alive) as long as `self`; it
            // is C-contiguous, of `len_bytes` bytes of u8 (checked by `PyBuffer::<u8>::get`),
            // and read-only, so nothing writes it while the slice lives.
            Self::Buffer(b) => unsafe {
                std::slice::from_raw_parts(b.buf_ptr().cast::<u8>(), b.len_bytes())
            },
        }
    }
}

/// Runs `f` on the bytes of `data` ([`ByteSource`]) and the checked `max_bytes`, on the
/// pool with the GIL released (decoding and checking a serialized batch).
fn read_batch<T: Send>(
    py: Python<'_>,
    op: &str,
    data: &Bound<'_, PyAny>,
    max_bytes: usize,
    f: impl FnOnce(&[u8], usize) -> ckks::Result<T> + Send,
) -> PyResult<T> {
    let max_bytes = check_max_bytes(max_bytes).map_err(to_py)?;
    let source = ByteSource::extract(data)?;
    let bytes = source.as_slice();
    run(py, op, || f(bytes, max_bytes))
}

/// An ordered batch of ciphertexts sharing parameters, level, size and scale. The batch
/// operations below work in place (the runtime owns each batch): no fresh memory for
/// squares, rescales, relinearizations and level drops.
///
/// A batch decoded with `narrow=True` keeps its residues in 32-bit words
/// ([`ckks::NarrowBatch`]) when its primes allow: the linear kernels read them as they are;
/// any other operation widens the batch first (the same residues, in 64-bit words).
#[pyclass(module = "heinfer._native", name = "CiphertextBatch")]
pub struct CiphertextBatch {
    /// The ciphertexts (empty while `narrow` holds them).
    pub cts: Vec<ckks::Ciphertext>,
    /// The ciphertexts in 32-bit words, until an operation needs them wide.
    pub narrow: Option<ckks::NarrowBatch>,
    pub params: CkksParams,
}

impl CiphertextBatch {
    pub(crate) fn wrap(cts: Vec<ckks::Ciphertext>, params: &CkksParams) -> Self {
        Self {
            cts,
            narrow: None,
            params: params.clone(),
        }
    }
    /// Level, size and scale of the ciphertexts.
    fn shape(&self) -> PyResult<(usize, usize, f64)> {
        if let Some(n) = &self.narrow {
            return Ok((n.level(), n.size(), n.scale()));
        }
        self.cts
            .first()
            .map(|c| (c.level(), c.size(), c.scale()))
            .ok_or_else(|| OperandError::new_err("the batch is empty"))
    }
    fn count(&self) -> usize {
        self.narrow.as_ref().map_or(self.cts.len(), |n| n.len())
    }
    /// A copy of ciphertext `i` (in range).
    fn ciphertext(&self, i: usize) -> PyResult<ckks::Ciphertext> {
        match &self.narrow {
            None => Ok(self.cts[i].clone()),
            Some(n) => n.ciphertext(&self.params, i).map_err(to_py),
        }
    }
    /// The ciphertexts in 64-bit words: borrowed, or widened from the narrow words.
    pub(crate) fn wide(&self) -> PyResult<Cow<'_, [ckks::Ciphertext]>> {
        match &self.narrow {
            None => Ok(Cow::Borrowed(&self.cts)),
            Some(n) => Ok(Cow::Owned(n.widen(&self.params).map_err(to_py)?)),
        }
    }
    /// Ciphertexts `range` (in range) in 64-bit words: borrowed, or those alone widened.
    fn wide_range(&self, range: std::ops::Range<usize>) -> PyResult<Cow<'_, [ckks::Ciphertext]>> {
        match &self.narrow {
            None => Ok(Cow::Borrowed(&self.cts[range])),
            Some(_) => Ok(Cow::Owned(
                range.map(|i| self.ciphertext(i)).collect::<PyResult<_>>()?,
            )),
        }
    }
    /// The ciphertexts in 64-bit words, to be changed in place (a narrow batch is widened
    /// for good).
    pub(crate) fn wide_mut(&mut self) -> PyResult<&mut Vec<ckks::Ciphertext>> {
        if let Some(n) = self.narrow.take() {
            self.cts = n.widen(&self.params).map_err(to_py)?;
        }
        Ok(&mut self.cts)
    }
}

#[pymethods]
impl CiphertextBatch {
    fn __len__(&self) -> usize {
        self.count()
    }
    /// Level of the ciphertexts.
    #[getter]
    fn level(&self) -> PyResult<usize> {
        Ok(self.shape()?.0)
    }
    /// Scale of the ciphertexts.
    #[getter]
    fn scale(&self) -> PyResult<f64> {
        Ok(self.shape()?.2)
    }
    /// Number of polynomials per ciphertext (2; 3 before relinearization; 5 for the square of
    /// an unrelinearized square).
    #[getter]
    fn size(&self) -> PyResult<usize> {
        Ok(self.shape()?.1)
    }
    /// Whether the residues are kept in 32-bit words (decoded with `narrow=True`, not yet
    /// widened by an operation).
    #[getter]
    fn is_narrow(&self) -> bool {
        self.narrow.is_some()
    }
    /// The ciphertexts at `indices` (in that order; repeats allowed): permutations and
    /// window gathers for the client-aided protocol.
    fn take(&self, indices: Vec<usize>) -> PyResult<Self> {
        if let Some(&i) = indices.iter().find(|&&i| i >= self.count()) {
            return Err(OperandError::new_err(format!(
                "index {i} out of range for a batch of {}",
                self.count()
            )));
        }
        let cts = indices
            .iter()
            .map(|&i| self.ciphertext(i))
            .collect::<PyResult<_>>()?;
        Ok(Self::wrap(cts, &self.params))
    }
    /// A batch of copies of `cts`: at least one ciphertext, all of the same parameters, level,
    /// size and scale (else `OperandError`, or `ParameterError` for other parameters).
    #[staticmethod]
    fn from_list(cts: Vec<PyRef<'_, Ciphertext>>) -> PyResult<Self> {
        let first = cts
            .first()
            .ok_or_else(|| OperandError::new_err("a batch needs at least one ciphertext"))?;
        let params = first.params.clone();
        for c in &cts {
            params.check_id(c.inner.params_id()).map_err(to_py)?;
        }
        let inner: Vec<ckks::Ciphertext> = cts.iter().map(|c| c.inner.clone()).collect();
        serialize::check_uniform(inner.iter().map(|c| (c.level(), c.size(), c.scale())))
            .map_err(|m| OperandError::new_err(format!("cannot build a batch: {m}")))?;
        Ok(Self::wrap(inner, &params))
    }
    /// The ciphertexts, in order: copies, or with `consume=True` the ciphertexts themselves,
    /// moved out of the batch, which is left empty (no copy: a server's input, run once).
    #[pyo3(signature = (consume = false))]
    #[allow(clippy::wrong_self_convention)] // Python's name; `consume=True` empties the batch
    fn to_list(&mut self, consume: bool) -> PyResult<Vec<Ciphertext>> {
        let params = self.params.clone();
        if consume {
            return Ok(std::mem::take(self.wide_mut()?)
                .into_iter()
                .map(|c| Ciphertext::wrap(c, &params))
                .collect());
        }
        Ok(self
            .wide()?
            .iter()
            .map(|c| Ciphertext::wrap(c.clone(), &params))
            .collect())
    }
    /// A copy of ciphertext `i` (negative `i` counts from the end; `IndexError` out of range,
    /// so iteration stops there).
    fn __getitem__(&self, i: isize) -> PyResult<Ciphertext> {
        let len = self.count() as isize;
        let j = if i < 0 { i + len } else { i };
        if j < 0 || j >= len {
            return Err(PyIndexError::new_err(format!(
                "index {i} out of range for a batch of {len}"
            )));
        }
        Ok(Ciphertext::wrap(self.ciphertext(j as usize)?, &self.params))
    }
    /// One message: ciphertexts `[start, stop)` of the batch (all of it by default) in the
    /// validated wire format (see `heinfer_ckks::serialize::ciphertext_batch_to_bytes`); a
    /// chunk of a batch is serialized without copying the batch. `IndexError` unless
    /// `start < stop <= len`. `drop_bits` (one count per polynomial, from
    /// `Params.rounding_drop_bits`): the ciphertexts are only going to be decrypted and travel
    /// rounded, polynomial `i` without `drop_bits[i]` low bits of each coefficient.
    ///
    /// `frame`: a callable taking the batch's length in bytes and returning the `bytes` that
    /// go before it (a protocol message's header: `heinfer.protocol.messages.framing`); the
    /// result is then `frame(n) + batch`, written once into the returned object instead of
    /// serialized, copied into `bytes` and joined with the header (`TypeError` unless it
    /// returns `bytes`).
    #[pyo3(signature = (start = 0, stop = None, drop_bits = None, frame = None))]
    fn to_bytes<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        stop: Option<usize>,
        drop_bits: Option<Vec<u32>>,
        frame: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let stop = stop.unwrap_or(self.count());
        if start >= stop || stop > self.count() {
            return Err(PyIndexError::new_err(format!(
                "ciphertexts [{start}, {stop}) of a batch of {}",
                self.count()
            )));
        }
        let cts = self.wide_range(start..stop)?;
        let cts = &cts[..];
        // sized only (no ciphertext serialized yet): the work is in `write_into` below
        let parts = serialize::ciphertext_batch_parts(&self.params, cts, drop_bits.as_deref())
            .map_err(to_py)?;
        let n = parts.len();
        let head = frame_head(frame, n)?;
        let head = head.as_ref().map_or(&[][..], |h| h.as_bytes());
        // every byte of the body is written (`write_into`: header, each length and ciphertext)
        filled_bytes(py, "CiphertextBatch.to_bytes", head, n, |body| {
            parts.write_into(body)
        })
    }
    /// Decodes and validates a batch: header, count ≤ `max_count` and against the bytes
    /// present, total ≤ `max_bytes`, every ciphertext (parameters, residues below moduli) and
    /// that all share level, size, scale. `data`: `bytes`, or a read-only contiguous 1-D
    /// `uint8` array (read without a copy). Rounded ciphertexts are refused unless
    /// `max_drop_bits` allows them: polynomial `i` may then drop at most `max_drop_bits[i]`
    /// low bits. With `narrow`, two-part ciphertexts whose level's primes are all below
    /// `2^32` keep their residues in 32-bit words (half the memory, read as they are by
    /// `LinearLayer.apply` and `square_chain`; other operations widen the batch first); not
    /// with `max_drop_bits`.
    #[staticmethod]
    #[pyo3(signature = (params, data, max_bytes, max_count, max_drop_bits = None, narrow = false))]
    fn from_bytes(
        py: Python<'_>,
        params: &Params,
        data: &Bound<'_, PyAny>,
        max_bytes: usize,
        max_count: usize,
        max_drop_bits: Option<Vec<u32>>,
        narrow: bool,
    ) -> PyResult<Self> {
        if narrow {
            if max_drop_bits.is_some() {
                return Err(OperandError::new_err(
                    "rounded ciphertexts are not decoded narrow: pass narrow or max_drop_bits, not both",
                ));
            }
            let decoded = read_batch(py, "CiphertextBatch.from_bytes", data, max_bytes, |b, m| {
                serialize::ciphertext_batch_from_bytes_narrow(&params.inner, b, m, max_count)
            })?;
            return Ok(match decoded {
                serialize::DecodedBatch::Wide(cts) => Self::wrap(cts, &params.inner),
                serialize::DecodedBatch::Narrow(n) => Self {
                    cts: Vec::new(),
                    narrow: Some(n),
                    params: params.inner.clone(),
                },
            });
        }
        let allow = max_drop_bits.unwrap_or_default();
        let cts = read_batch(py, "CiphertextBatch.from_bytes", data, max_bytes, |b, m| {
            serialize::ciphertext_batch_from_bytes_rounded(&params.inner, b, m, max_count, &allow)
        })?;
        Ok(Self::wrap(cts, &params.inner))
    }
    /// Validates a serialized batch exactly as `from_bytes` does (every check, every residue)
    /// without building its ciphertexts (nor expanding their seeds); returns
    /// `(count, level, size, scale)`. For a party that forwards the bytes unchanged to the
    /// process that decodes them (the Ray front end). Fails as `from_bytes` would.
    #[staticmethod]
    fn check_bytes(
        py: Python<'_>,
        params: &Params,
        data: &Bound<'_, PyAny>,
        max_bytes: usize,
        max_count: usize,
    ) -> PyResult<(usize, usize, usize, f64)> {
        let (count, shape) = read_batch(
            py,
            "CiphertextBatch.check_bytes",
            data,
            max_bytes,
            |b, m| serialize::ciphertext_batch_check(&params.inner, b, m, max_count),
        )?;
        Ok((count, shape.level, shape.size, shape.scale))
    }
    /// Concatenation of batches (same parameters, level, size and scale), in order. With
    /// `consume=True` the ciphertexts move out of the inputs, which are left empty (no copy:
    /// the chunks of a message joined into one batch); otherwise they are copied.
    #[staticmethod]
    #[pyo3(signature = (batches, consume = false))]
    fn concat(mut batches: Vec<PyRefMut<'_, CiphertextBatch>>, consume: bool) -> PyResult<Self> {
        let first = batches
            .first()
            .ok_or_else(|| OperandError::new_err("nothing to concatenate"))?;
        let params = first.params.clone();
        let (level, size, scale) = first
            .shape()
            .map_err(|_| OperandError::new_err("cannot concatenate an empty batch"))?;
        for b in &batches {
            params.check_id(b.params.id()).map_err(to_py)?;
            let same = |c: (usize, usize, f64)| c.0 == level && c.1 == size && c.2 == scale;
            let uniform = match &b.narrow {
                Some(n) => same((n.level(), n.size(), n.scale())),
                None => b.cts.iter().all(|c| same((c.level(), c.size(), c.scale()))),
            };
            if !uniform {
                return Err(OperandError::new_err(
                    "cannot concatenate batches of different levels, sizes or scales",
                ));
            }
        }
        if batches.iter().all(|b| b.narrow.is_some()) {
            // the chunks of a narrow query join without copying their words
            let parts = batches
                .iter_mut()
                .map(|b| {
                    if consume {
                        b.narrow.take()
                    } else {
                        b.narrow.clone()
                    }
                })
                .map(|n| n.expect("checked just above"))
                .collect();
            return Ok(Self {
                cts: Vec::new(),
                narrow: Some(ckks::NarrowBatch::concat(parts).map_err(to_py)?),
                params,
            });
        }
        let mut cts = Vec::with_capacity(batches.iter().map(|b| b.count()).sum());
        for b in batches.iter_mut() {
            if consume {
                cts.append(b.wide_mut()?);
            } else {
                cts.extend(b.wide()?.iter().cloned());
            }
        }
        Ok(Self::wrap(cts, &params))
    }
    fn __repr__(&self) -> String {
        match self.shape() {
            Ok((level, size, scale)) => format!(
                "CiphertextBatch(len={}, level={level}, size={size}, scale=2^{:.2}{})",
                self.count(),
                scale.log2(),
                if self.narrow.is_some() {
                    ", narrow"
                } else {
                    ""
                }
            ),
            Err(_) => "CiphertextBatch(len=0)".into(),
        }
    }
}

/// Encrypts each row of `values` (at most `width` entries) with `encrypt`, in parallel.
fn encrypt_rows<T>(
    py: Python<'_>,
    kg: &KeyGenerator,
    values: PyReadonlyArray2<'_, T>,
    width: usize,
    what: &str,
    op: &'static str,
    encrypt: impl Fn(&Encoder, &[T]) -> ckks::Result<ckks::Ciphertext> + Sync,
) -> PyResult<CiphertextBatch>
where
    T: numpy::Element + Copy + Send + Sync,
{
    let (data, row) = row_values(&values, width, what)?;
    let params = kg.params.clone();
    let cts = run(py, op, || {
        let enc = Encoder::new(&params);
        data.par_chunks(row).map(|row| encrypt(&enc, row)).collect()
    })?;
    Ok(CiphertextBatch::wrap(cts, &kg.params))
}

/// The values of a `count × row` array (≥ 1 row of 1 to `width` values, else `OperandError`
/// naming `what`), copied row after row ([`crate::encoder::to_vec`]: one `memcpy` for the
/// C-contiguous arrays the client passes; the element iterator it used before was 8–12 % of
/// a coefficient-packed batch's encryption), and `row`.
pub(crate) fn row_values<T: numpy::Element + Copy>(
    values: &PyReadonlyArray2<'_, T>,
    width: usize,
    what: &str,
) -> PyResult<(Vec<T>, usize)> {
    let shape = values.shape().to_vec();
    if shape[0] == 0 || shape[1] == 0 || shape[1] > width {
        return Err(OperandError::new_err(format!(
            "values of shape {shape:?}: need ≥ 1 row of ≤ {width} {what}"
        )));
    }
    Ok((crate::encoder::to_vec(values), shape[1]))
}

/// The bytes `frame(n)` returns for a body of `n` bytes (none without a frame); anything but
/// `bytes` is a `TypeError`.
pub(crate) fn frame_head<'py>(
    frame: Option<Bound<'py, PyAny>>,
    n: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let Some(f) = frame else {
        return Ok(None);
    };
    let h = f.call1((n,))?;
    let h = h.cast_into::<PyBytes>().map_err(|e| {
        PyTypeError::new_err(format!(
            "frame must return bytes, got {}",
            e.into_inner()
                .get_type()
                .name()
                .map(|t| t.to_string())
                .unwrap_or_else(|_| "?".into())
        ))
    })?;
    Ok(Some(h))
}

/// Decrypts every ciphertext and decodes it with `decode`: one row per ciphertext.
fn decrypt_rows<'py, T>(
    py: Python<'py>,
    dec: &Decryptor,
    batch: &CiphertextBatch,
    op: &'static str,
    decode: impl Fn(&Encoder, &ckks::Plaintext) -> ckks::Result<Vec<T>> + Sync,
) -> PyResult<Bound<'py, PyArray2<T>>>
where
    T: numpy::Element + Copy + Send,
{
    let params = dec.params.clone();
    let cts = batch.wide()?;
    let rows: Vec<Vec<T>> = run(py, op, || {
        let enc = Encoder::new(&params);
        cts.par_iter()
            // the plaintext holds message plus decryption error: zeroed when dropped
            .map(|c| decode(&enc, &Zeroizing::new(dec.inner.decrypt(c)?)))
            .collect()
    })?;
    PyArray2::from_vec2(py, &rows).map_err(|e| OperandError::new_err(e.to_string()))
}

/// Encodes each row of `values` (`count × slots` complex) at `scale`, `level` and encrypts it
/// with the secret key (seed-compressed, one NTT per limb), in parallel.
#[pyfunction]
pub fn encrypt_batch(
    py: Python<'_>,
    kg: &KeyGenerator,
    values: PyReadonlyArray2<'_, Complex64>,
    scale: f64,
    level: usize,
) -> PyResult<CiphertextBatch> {
    let slots = kg.params.slots();
    encrypt_rows(
        py,
        kg,
        values,
        slots,
        "slots",
        "encrypt_batch",
        |enc, row| kg.inner.encrypt_values(enc, row, scale, level),
    )
}

/// Encrypts each row of `values` (`count × N` real) in the coefficients of a plaintext
/// (coefficient packing), with the secret key, in parallel.
#[pyfunction]
pub fn encrypt_batch_coefficients(
    py: Python<'_>,
    kg: &KeyGenerator,
    values: PyReadonlyArray2<'_, f64>,
    scale: f64,
    level: usize,
) -> PyResult<CiphertextBatch> {
    let n = kg.params.n();
    encrypt_rows(
        py,
        kg,
        values,
        n,
        "coefficients",
        "encrypt_batch_coefficients",
        |enc, row| kg.inner.encrypt_coefficients(enc, row, scale, level),
    )
}

/// Decrypts and decodes every ciphertext: a `count × slots` complex array.
#[pyfunction]
pub fn decrypt_batch<'py>(
    py: Python<'py>,
    dec: &Decryptor,
    batch: &CiphertextBatch,
) -> PyResult<Bound<'py, PyArray2<Complex64>>> {
    decrypt_rows(py, dec, batch, "decrypt_batch", |enc, pt| enc.decode(pt))
}

/// Decrypts coefficient-packed ciphertexts: a `count × N` real array.
#[pyfunction]
pub fn decrypt_batch_coefficients<'py>(
    py: Python<'py>,
    dec: &Decryptor,
    batch: &CiphertextBatch,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    decrypt_rows(py, dec, batch, "decrypt_batch_coefficients", |enc, pt| {
        enc.decode_coefficients(pt)
    })
}

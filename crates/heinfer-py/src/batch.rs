//! Batches of ciphertexts (one per tensor element, slots or coefficients = batch items): their
//! wire format, and batch encryption and decryption. The kernels are in `kernels.rs`.

use crate::errors::{check_max_bytes, to_py, OperandError};
use crate::keygen::{Decryptor, KeyGenerator};
use crate::params::Params;
use crate::pool::{current, run};
use heinfer_ckks as ckks;
use heinfer_ckks::{serialize, CkksParams, Encoder};
use heinfer_kernels::KernelError;
use num_complex::Complex64;
use numpy::{PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

/// Magic and version of a serialized batch: `b"HEBT"`, u16 version, u32 count, then per
/// ciphertext a u32 length and the ciphertext's own validated format.
const MAGIC: &[u8; 4] = b"HEBT";
const VERSION: u16 = 1;

/// Maps a kernel error onto a Python exception.
pub(crate) fn kerr(e: KernelError) -> PyErr {
    match e {
        KernelError::Ckks(c) => to_py(c),
        other => OperandError::new_err(other.to_string()),
    }
}

/// Runs kernel work on the pool with the GIL released.
pub(crate) fn run_k<T: Send, F: FnOnce() -> heinfer_kernels::Result<T> + Send>(
    py: Python<'_>,
    f: F,
) -> PyResult<T> {
    let pool = current()?;
    py.detach(move || pool.install(f)).map_err(kerr)
}

/// An ordered batch of ciphertexts sharing parameters, level, size and scale. The batch
/// operations below work in place (the runtime owns each batch): no fresh memory for
/// squares, rescales, relinearizations and level drops.
#[pyclass(module = "heinfer._native", name = "CiphertextBatch")]
pub struct CiphertextBatch {
    pub cts: Vec<ckks::Ciphertext>,
    pub params: CkksParams,
}

impl CiphertextBatch {
    pub(crate) fn wrap(cts: Vec<ckks::Ciphertext>, params: &CkksParams) -> Self {
        Self {
            cts,
            params: params.clone(),
        }
    }
    fn first(&self) -> PyResult<&ckks::Ciphertext> {
        self.cts
            .first()
            .ok_or_else(|| OperandError::new_err("the batch is empty"))
    }
}

#[pymethods]
impl CiphertextBatch {
    fn __len__(&self) -> usize {
        self.cts.len()
    }
    /// Level of the ciphertexts.
    #[getter]
    fn level(&self) -> PyResult<usize> {
        Ok(self.first()?.level())
    }
    /// Scale of the ciphertexts.
    #[getter]
    fn scale(&self) -> PyResult<f64> {
        Ok(self.first()?.scale())
    }
    /// Number of polynomials per ciphertext (2, or 3 before relinearization).
    #[getter]
    fn size(&self) -> PyResult<usize> {
        Ok(self.first()?.size())
    }
    /// The ciphertexts at `indices` (in that order; repeats allowed): permutations and
    /// window gathers for the client-aided protocol.
    fn take(&self, indices: Vec<usize>) -> PyResult<Self> {
        if let Some(&i) = indices.iter().find(|&&i| i >= self.cts.len()) {
            return Err(OperandError::new_err(format!(
                "index {i} out of range for a batch of {}",
                self.cts.len()
            )));
        }
        Ok(Self::wrap(
            indices.iter().map(|&i| self.cts[i].clone()).collect(),
            &self.params,
        ))
    }
    /// Overrides the scale of every ciphertext (the caller asserts the messages were
    /// multiplied accordingly).
    fn with_scale(&self, scale: f64) -> PyResult<Self> {
        let mut cts = self.cts.clone();
        for c in &mut cts {
            c.set_scale(scale).map_err(to_py)?;
        }
        Ok(Self::wrap(cts, &self.params))
    }
    /// One message: the batch in the validated wire format.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let parts: Vec<Vec<u8>> = run(py, || {
            self.cts
                .par_iter()
                .map(|c| serialize::ciphertext_to_bytes(&self.params, c))
                .collect()
        })?;
        let total = 10 + parts.iter().map(|p| 4 + p.len()).sum::<usize>();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(parts.len() as u32).to_le_bytes());
        for p in &parts {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes());
            out.extend_from_slice(p);
        }
        Ok(PyBytes::new(py, &out))
    }
    /// Decodes and validates a batch: header, count ≤ `max_count`, total ≤ `max_bytes`, every
    /// ciphertext (parameters, residues below moduli) and that all share level, size, scale.
    #[staticmethod]
    fn from_bytes(
        py: Python<'_>,
        params: &Params,
        data: &[u8],
        max_bytes: usize,
        max_count: usize,
    ) -> PyResult<Self> {
        let err = |m: String| {
            crate::errors::SerializationError::new_err(format!(
                "cannot deserialize ciphertext batch: {m}"
            ))
        };
        let max_bytes = check_max_bytes(max_bytes).map_err(to_py)?;
        if data.len() > max_bytes {
            return Err(err(format!(
                "{} bytes exceed the limit of {max_bytes}",
                data.len()
            )));
        }
        if data.len() < 10 || &data[..4] != MAGIC {
            return Err(err("bad magic (not a heinfer ciphertext batch)".into()));
        }
        let version = u16::from_le_bytes([data[4], data[5]]);
        if version != VERSION {
            return Err(err(format!(
                "version {version}, this build reads {VERSION}"
            )));
        }
        let count = u32::from_le_bytes(data[6..10].try_into().expect("4 bytes")) as usize;
        if count == 0 || count > max_count {
            return Err(err(format!(
                "{count} ciphertexts (allowed 1..={max_count})"
            )));
        }
        let mut slices = Vec::with_capacity(count);
        let mut pos = 10usize;
        for i in 0..count {
            let len_bytes = data
                .get(pos..pos + 4)
                .ok_or_else(|| err(format!("truncated before ciphertext {i}")))?;
            let len = u32::from_le_bytes(len_bytes.try_into().expect("4 bytes")) as usize;
            let body = data
                .get(pos + 4..pos + 4 + len)
                .ok_or_else(|| err(format!("ciphertext {i} is truncated")))?;
            slices.push(body);
            pos += 4 + len;
        }
        if pos != data.len() {
            return Err(err(format!("{} trailing bytes", data.len() - pos)));
        }
        let p = params.inner.clone();
        let cts: Vec<ckks::Ciphertext> = run(py, || {
            slices
                .par_iter()
                .map(|s| serialize::ciphertext_from_bytes(&p, s, max_bytes))
                .collect()
        })?;
        let f = &cts[0];
        if let Some((i, c)) = cts.iter().enumerate().find(|(_, c)| {
            c.level() != f.level()
                || c.size() != f.size()
                || ((c.scale() - f.scale()) / f.scale()).abs() > 1e-9
        }) {
            return Err(err(format!(
                "ciphertext {i} differs from ciphertext 0 in level, size or scale ({} {} {:e})",
                c.level(),
                c.size(),
                c.scale()
            )));
        }
        Ok(Self::wrap(cts, &p))
    }
    /// A batch of `cts` (non-empty; one parameter set; all at one level, size and scale).
    #[staticmethod]
    fn from_list(cts: Vec<PyRef<'_, crate::objects::Ciphertext>>) -> PyResult<Self> {
        let first = cts
            .first()
            .ok_or_else(|| OperandError::new_err("a batch needs at least one ciphertext"))?;
        let params = first.params.clone();
        let f = &first.inner;
        let mut out = Vec::with_capacity(cts.len());
        for (i, c) in cts.iter().enumerate() {
            params.check_id(c.params.id()).map_err(to_py)?;
            let d = &c.inner;
            if d.level() != f.level()
                || d.size() != f.size()
                || ((d.scale() - f.scale()) / f.scale()).abs() > 1e-9
            {
                return Err(OperandError::new_err(format!(
                    "ciphertext {i} differs from ciphertext 0 in level, size or scale"
                )));
            }
            out.push(d.clone());
        }
        Ok(Self::wrap(out, &params))
    }
    /// The ciphertexts of the batch, in order.
    fn to_list(&self) -> Vec<crate::objects::Ciphertext> {
        self.cts
            .iter()
            .map(|c| crate::objects::Ciphertext::wrap(c.clone(), &self.params))
            .collect()
    }
    /// Concatenation of batches (same parameters, level, size and scale).
    #[staticmethod]
    fn concat(batches: Vec<PyRef<'_, CiphertextBatch>>) -> PyResult<Self> {
        let first = batches
            .first()
            .ok_or_else(|| OperandError::new_err("nothing to concatenate"))?;
        let params = first.params.clone();
        let mut cts = Vec::new();
        for b in &batches {
            params.check_id(b.params.id()).map_err(to_py)?;
            cts.extend(b.cts.iter().cloned());
        }
        Ok(Self::wrap(cts, &params))
    }
    fn __repr__(&self) -> String {
        match self.cts.first() {
            Some(c) => format!(
                "CiphertextBatch(len={}, level={}, size={}, scale=2^{:.2})",
                self.cts.len(),
                c.level(),
                c.size(),
                c.scale().log2()
            ),
            None => "CiphertextBatch(len=0)".into(),
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
    encrypt: impl Fn(&Encoder, &[T]) -> ckks::Result<ckks::Ciphertext> + Sync,
) -> PyResult<CiphertextBatch>
where
    T: numpy::Element + Copy + Send + Sync,
{
    let shape = values.shape().to_vec();
    if shape[0] == 0 || shape[1] == 0 || shape[1] > width {
        return Err(OperandError::new_err(format!(
            "values of shape {shape:?}: need ≥ 1 row of ≤ {width} {what}"
        )));
    }
    let data: Vec<T> = values.as_array().iter().copied().collect();
    let params = kg.params.clone();
    let cts = run(py, || {
        let enc = Encoder::new(&params);
        data.par_chunks(shape[1])
            .map(|row| encrypt(&enc, row))
            .collect()
    })?;
    Ok(CiphertextBatch::wrap(cts, &kg.params))
}

/// Decrypts every ciphertext and decodes it with `decode`: one row per ciphertext.
fn decrypt_rows<'py, T>(
    py: Python<'py>,
    dec: &Decryptor,
    batch: &CiphertextBatch,
    decode: impl Fn(&Encoder, &ckks::Plaintext) -> ckks::Result<Vec<T>> + Sync,
) -> PyResult<Bound<'py, PyArray2<T>>>
where
    T: numpy::Element + Copy + Send,
{
    let params = dec.params.clone();
    let rows: Vec<Vec<T>> = run(py, || {
        let enc = Encoder::new(&params);
        batch
            .cts
            .par_iter()
            .map(|c| decode(&enc, &dec.inner.decrypt(c)?))
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
    encrypt_rows(py, kg, values, slots, "slots", |enc, row| {
        kg.inner.encrypt_values(enc, row, scale, level)
    })
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
    encrypt_rows(py, kg, values, n, "coefficients", |enc, row| {
        kg.inner.encrypt_coefficients(enc, row, scale, level)
    })
}

/// Decrypts and decodes every ciphertext: a `count × slots` complex array.
#[pyfunction]
pub fn decrypt_batch<'py>(
    py: Python<'py>,
    dec: &Decryptor,
    batch: &CiphertextBatch,
) -> PyResult<Bound<'py, PyArray2<Complex64>>> {
    decrypt_rows(py, dec, batch, |enc, pt| enc.decode(pt))
}

/// Decrypts coefficient-packed ciphertexts: a `count × N` real array.
#[pyfunction]
pub fn decrypt_batch_coefficients<'py>(
    py: Python<'py>,
    dec: &Decryptor,
    batch: &CiphertextBatch,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    decrypt_rows(py, dec, batch, |enc, pt| enc.decode_coefficients(pt))
}

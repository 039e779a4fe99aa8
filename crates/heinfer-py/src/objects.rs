//! Data objects: plaintexts, ciphertexts and keys, each with the parameters it belongs to
//! and its validated binary form (`to_bytes` / `from_bytes`).

use crate::errors::check_max_bytes;
use crate::params::Params;
use crate::pool::run;
use heinfer_ckks as ckks;
use heinfer_ckks::{serialize, CkksParams};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Serializes on the pool (bit packing of large keys takes a while) and returns `bytes`.
fn bytes_of<'py, F>(py: Python<'py>, op: &'static str, f: F) -> PyResult<Bound<'py, PyBytes>>
where
    F: FnOnce() -> heinfer_ckks::Result<Vec<u8>> + Send,
{
    let v = run(py, op, f)?;
    Ok(PyBytes::new(py, &v))
}

/// An encoded message (NTT form) at a level and scale.
#[pyclass(module = "heinfer._native", name = "Plaintext", frozen)]
pub struct Plaintext {
    pub inner: ckks::Plaintext,
    pub params: CkksParams,
}

#[pymethods]
impl Plaintext {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
    #[getter]
    fn params_id(&self) -> u64 {
        self.inner.params_id()
    }
    /// Whether the plaintext carries the special primes `P` (from `encode_extended`).
    #[getter]
    fn is_extended(&self) -> bool {
        self.inner.poly().limbs() > self.inner.level() + 1
    }
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        bytes_of(py, "Plaintext.to_bytes", || {
            serialize::plaintext_to_bytes(&self.params, &self.inner)
        })
    }
    #[staticmethod]
    fn from_bytes(
        py: Python<'_>,
        params: &Params,
        data: &[u8],
        max_bytes: usize,
    ) -> PyResult<Self> {
        let p = params.inner.clone();
        let inner = run(py, "Plaintext.from_bytes", || {
            serialize::plaintext_from_bytes(&p, data, check_max_bytes(max_bytes)?)
        })?;
        Ok(Self { inner, params: p })
    }
    /// The same plaintext with each limb in the narrowest words its modulus allows
    /// (``CompactPlaintext``: 32 bits below ``2^32``, else 64).
    fn compact(&self) -> PyResult<CompactPlaintext> {
        Ok(CompactPlaintext {
            inner: ckks::CompactPlaintext::new(&self.params, &self.inner)
                .map_err(crate::errors::to_py)?,
        })
    }
}

/// A plaintext with each limb in the narrowest words its modulus allows (32 bits for a
/// modulus below ``2^32``, else 64): less memory than a :class:`Plaintext`, and fewer bytes
/// for a grouped sum to read (``Evaluator.dot_plain_groups`` takes either kind, one kind per
/// call; the result is the same, bit for bit).
#[pyclass(module = "heinfer._native", name = "CompactPlaintext", frozen)]
pub struct CompactPlaintext {
    pub inner: ckks::CompactPlaintext,
}

#[pymethods]
impl CompactPlaintext {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
    #[getter]
    fn params_id(&self) -> u64 {
        self.inner.params_id()
    }
    /// Limbs kept in 32-bit words.
    #[getter]
    fn narrow_limbs(&self) -> usize {
        self.inner.narrow_limbs()
    }
    /// Bytes of its residues (``N · (4 · narrow limbs + 8 · the others)``).
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.bytes()
    }
}

/// A ciphertext (size 2, or 3 before relinearization), NTT form.
#[pyclass(module = "heinfer._native", name = "Ciphertext")]
pub struct Ciphertext {
    pub inner: ckks::Ciphertext,
    pub params: CkksParams,
}

impl Ciphertext {
    /// An engine ciphertext of `params` as a Python object.
    pub fn wrap(inner: ckks::Ciphertext, params: &CkksParams) -> Self {
        Self {
            inner,
            params: params.clone(),
        }
    }
}

#[pymethods]
impl Ciphertext {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }
    #[getter]
    fn params_id(&self) -> u64 {
        self.inner.params_id()
    }
    #[getter]
    fn is_seed_compressed(&self) -> bool {
        self.inner.is_seed_compressed()
    }
    /// Overrides the scale (the caller asserts what the message now is).
    fn set_scale(&mut self, scale: f64) -> PyResult<()> {
        crate::errors::guard("Ciphertext.set_scale", || {
            self.inner.set_scale(scale).map_err(crate::errors::to_py)
        })
    }
    fn clone(&self, py: Python<'_>) -> PyResult<Self> {
        let inner = run(py, "Ciphertext.clone", || Ok(self.inner.clone()))?;
        Ok(Self::wrap(inner, &self.params))
    }
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        bytes_of(py, "Ciphertext.to_bytes", || {
            serialize::ciphertext_to_bytes(&self.params, &self.inner)
        })
    }
    #[staticmethod]
    fn from_bytes(
        py: Python<'_>,
        params: &Params,
        data: &[u8],
        max_bytes: usize,
    ) -> PyResult<Self> {
        let p = params.inner.clone();
        let inner = run(py, "Ciphertext.from_bytes", || {
            serialize::ciphertext_from_bytes(&p, data, check_max_bytes(max_bytes)?)
        })?;
        Ok(Self { inner, params: p })
    }
}

/// A ciphertext over `Q_ℓ ∪ P` encrypting `P·Δ·m` (output of hoisted extended rotations).
#[pyclass(module = "heinfer._native", name = "ExtendedCiphertext")]
pub struct ExtendedCiphertext {
    pub inner: ckks::ExtendedCiphertext,
    pub params: CkksParams,
}

impl ExtendedCiphertext {
    /// An engine extended ciphertext of `params` as a Python object.
    pub fn wrap(inner: ckks::ExtendedCiphertext, params: &CkksParams) -> Self {
        Self {
            inner,
            params: params.clone(),
        }
    }
}

#[pymethods]
impl ExtendedCiphertext {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
    fn clone(&self, py: Python<'_>) -> PyResult<Self> {
        let inner = run(py, "ExtendedCiphertext.clone", || Ok(self.inner.clone()))?;
        Ok(Self {
            inner,
            params: self.params.clone(),
        })
    }
}

/// The secret key. Never printed; client side only.
#[pyclass(module = "heinfer._native", name = "SecretKey", frozen)]
pub struct SecretKey {
    pub inner: ckks::SecretKey,
    pub params: CkksParams,
}

#[pymethods]
impl SecretKey {
    #[getter]
    fn params_id(&self) -> u64 {
        self.inner.params_id()
    }
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        // the native copy is wiped once Python has its own
        let v = run(py, "SecretKey.to_bytes", || {
            Ok(zeroize::Zeroizing::new(serialize::secret_key_to_bytes(
                &self.inner,
            )))
        })?;
        Ok(PyBytes::new(py, &v))
    }
    #[staticmethod]
    fn from_bytes(py: Python<'_>, params: &Params, data: &[u8]) -> PyResult<Self> {
        let p = params.inner.clone();
        // a secret key is N/4 bytes plus a header: 1 MiB bounds every ring degree
        let inner = run(py, "SecretKey.from_bytes", || {
            serialize::secret_key_from_bytes(&p, data, 1 << 20)
        })?;
        Ok(Self { inner, params: p })
    }
    fn __repr__(&self) -> String {
        format!(
            "SecretKey(params_id={:#018x}, <secret>)",
            self.inner.params_id()
        )
    }
}

/// A key wrapper whose Python surface is its parameter id and its wire form.
macro_rules! wire_key {
    ($(#[$doc:meta])* $name:ident, $pyname:literal, $inner:ty, $to:path, $from:path) => {
        $(#[$doc])*
        #[pyclass(module = "heinfer._native", name = $pyname, frozen)]
        pub struct $name {
            pub inner: $inner,
            pub params: CkksParams,
        }

        #[pymethods]
        impl $name {
            #[getter]
            fn params_id(&self) -> u64 {
                self.inner.params_id()
            }
            fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
                bytes_of(py, concat!($pyname, ".to_bytes"), || $to(&self.params, &self.inner))
            }
            #[staticmethod]
            fn from_bytes(py: Python<'_>, params: &Params, data: &[u8], max_bytes: usize) -> PyResult<Self> {
                let p = params.inner.clone();
                let inner = run(py, concat!($pyname, ".from_bytes"), || $from(&p, data, check_max_bytes(max_bytes)?))?;
                Ok(Self { inner, params: p })
            }
        }
    };
}

wire_key!(
    /// The public key.
    PublicKey,
    "PublicKey",
    ckks::PublicKey,
    serialize::public_key_to_bytes,
    serialize::public_key_from_bytes
);

wire_key!(
    /// The relinearization key.
    RelinKey,
    "RelinKey",
    ckks::RelinKey,
    serialize::relin_key_to_bytes,
    serialize::relin_key_from_bytes
);

/// A set of Galois (rotation/conjugation) keys.
#[pyclass(module = "heinfer._native", name = "GaloisKeys", frozen)]
pub struct GaloisKeys {
    pub inner: ckks::GaloisKeys,
    pub params: CkksParams,
}

#[pymethods]
impl GaloisKeys {
    #[getter]
    fn params_id(&self) -> u64 {
        self.params.id()
    }
    /// The Galois elements present, ascending.
    fn elements(&self) -> Vec<u64> {
        self.inner.elements()
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
    fn __contains__(&self, g: u64) -> bool {
        self.inner.get(g).is_some()
    }
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        bytes_of(py, "GaloisKeys.to_bytes", || {
            serialize::galois_keys_to_bytes(&self.params, &self.inner)
        })
    }
    #[staticmethod]
    fn from_bytes(
        py: Python<'_>,
        params: &Params,
        data: &[u8],
        max_bytes: usize,
    ) -> PyResult<Self> {
        let p = params.inner.clone();
        let inner = run(py, "GaloisKeys.from_bytes", || {
            serialize::galois_keys_from_bytes(&p, data, check_max_bytes(max_bytes)?)
        })?;
        Ok(Self { inner, params: p })
    }
}

//! BFV (`heinfer-bfv`): parameters, batch encoder, evaluator, decryptor and flooding. Keys,
//! public-key encryption and ciphertexts are the engine's (`KeyGenerator`, `Encryptor`,
//! `Ciphertext` on `BfvParams.rlwe`).

use crate::encoder::to_vec;
use crate::errors::{to_py, EncodingError, ParameterError, SerializationError};
use crate::objects::{Ciphertext, GaloisKeys, Plaintext, PublicKey, SecretKey};
use crate::params::Params;
use crate::pool::run_with;
use heinfer_bfv::{self as bfv, BfvError, BfvParams as Inner, BfvParamsLiteral};
use heinfer_ckks::{CkksError, SecurityLevel};
use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::PyErr;

/// Maps a BFV error onto its Python exception class (the engine's own errors as the engine
/// maps them).
fn bfv_to_py(e: BfvError) -> PyErr {
    let msg = e.to_string();
    match e {
        BfvError::InvalidParameters(_) | BfvError::ParamsMismatch(_) => {
            ParameterError::new_err(msg)
        }
        BfvError::Encoding(_) => EncodingError::new_err(msg),
        BfvError::Deserialize { .. } => SerializationError::new_err(msg),
        BfvError::Engine(e) => to_py(e),
        BfvError::Math(m) => to_py(CkksError::Math(m)),
    }
}

fn run<T: Send>(
    py: Python<'_>,
    op: &str,
    f: impl FnOnce() -> bfv::Result<T> + Send,
) -> PyResult<T> {
    run_with(py, op, f, bfv_to_py)
}

/// Checked BFV parameters.
#[pyclass(module = "heinfer._native", name = "BfvParams", frozen)]
pub struct BfvParams {
    pub inner: Inner,
}

#[pymethods]
impl BfvParams {
    /// Checks a literal (security table included) and precomputes the tables.
    #[new]
    #[pyo3(signature = (log_n, log_q, log_p, plain_modulus, security=128))]
    fn new(
        py: Python<'_>,
        log_n: u32,
        log_q: Vec<u32>,
        log_p: Vec<u32>,
        plain_modulus: u64,
        security: u32,
    ) -> PyResult<Self> {
        let security = match SecurityLevel::from_bits(security) {
            Some(s) if s != SecurityLevel::InsecureTestOnly => s,
            _ => {
                return Err(bfv_to_py(BfvError::InvalidParameters(format!(
                    "security = {security} bits is not one of 128, 192, 256"
                ))))
            }
        };
        let lit = BfvParamsLiteral {
            log_n,
            log_q,
            log_p,
            plain_modulus,
            security,
        };
        Ok(Self {
            inner: run(py, "BfvParams.new", move || Inner::new(lit))?,
        })
    }

    /// A named preset: `PN13_PLAIN20`, or the insecure test set `INSECURE_LOGN10`.
    #[staticmethod]
    fn preset(py: Python<'_>, name: &str) -> PyResult<Self> {
        let name = name.to_owned();
        let inner = run(py, "BfvParams.preset", move || match name.as_str() {
            "PN13_PLAIN20" => Inner::new(bfv::presets::pn13_plain20()),
            "INSECURE_LOGN10" => bfv::presets::insecure_logn10(),
            other => Err(BfvError::InvalidParameters(format!(
                "unknown BFV preset {other:?}"
            ))),
        })?;
        Ok(Self { inner })
    }

    /// The RLWE parameters underneath (keys, encryption, ciphertexts).
    #[getter]
    fn rlwe(&self) -> Params {
        Params {
            inner: self.inner.rlwe().clone(),
        }
    }
    #[getter]
    fn log_n(&self) -> u32 {
        self.inner.log_n()
    }
    #[getter]
    fn n(&self) -> usize {
        self.inner.n()
    }
    #[getter]
    fn plain_modulus(&self) -> u64 {
        self.inner.plain_modulus()
    }
    #[getter]
    fn log_q(&self) -> f64 {
        self.inner.log_q()
    }
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }
    #[getter]
    fn security(&self) -> u32 {
        self.inner.security().bits()
    }

    /// Serializes a BFV ciphertext (the engine's validated format).
    fn ciphertext_to_bytes<'py>(
        &self,
        py: Python<'py>,
        ct: &Ciphertext,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let v = run(py, "BfvParams.ciphertext_to_bytes", || {
            bfv::ciphertext_to_bytes(&self.inner, &ct.inner)
        })?;
        Ok(pyo3::types::PyBytes::new(py, &v))
    }

    /// Decodes a BFV ciphertext of these parameters (top level, scale 1) from at most
    /// `max_bytes` bytes.
    fn ciphertext_from_bytes(
        &self,
        py: Python<'_>,
        data: &[u8],
        max_bytes: usize,
    ) -> PyResult<Ciphertext> {
        let ct = run(py, "BfvParams.ciphertext_from_bytes", || {
            bfv::ciphertext_from_bytes(&self.inner, data, max_bytes)
        })?;
        Ok(Ciphertext::wrap(ct, self.inner.rlwe()))
    }

    /// Serializes a result flooded with `2^bits` and switched down to its compact level,
    /// rounded by `result_drop_bits(bits)`.
    fn result_to_bytes<'py>(
        &self,
        py: Python<'py>,
        ct: &Ciphertext,
        bits: u32,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let v = run(py, "BfvParams.result_to_bytes", || {
            bfv::result_to_bytes(&self.inner, &ct.inner, bits)
        })?;
        Ok(pyo3::types::PyBytes::new(py, &v))
    }

    /// Decodes a result of a layer flooded with `2^bits`: at its compact level, rounded by at
    /// most `result_drop_bits(bits)`; anything else is refused.
    fn result_from_bytes(
        &self,
        py: Python<'_>,
        data: &[u8],
        max_bytes: usize,
        bits: u32,
    ) -> PyResult<Ciphertext> {
        let ct = run(py, "BfvParams.result_from_bytes", || {
            bfv::result_from_bytes(&self.inner, data, max_bytes, bits)
        })?;
        Ok(Ciphertext::wrap(ct, self.inner.rlwe()))
    }

    /// Low bits `[j0, j1]` a result flooded with `2^bits` drops from its two parts.
    fn result_drop_bits(&self, bits: u32) -> [u32; 2] {
        bfv::result_drop_bits(&self.inner, bits)
    }

    /// Bytes of one result flooded with `2^bits` on the wire.
    fn result_wire_bytes(&self, py: Python<'_>, bits: u32) -> PyResult<usize> {
        run(py, "BfvParams.result_wire_bytes", || {
            bfv::result_wire_bytes(&self.inner, bits)
        })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A plaintext to multiply by (centered lift of `m`, not scaled).
#[pyclass(module = "heinfer._native", name = "BfvMultiplier", frozen)]
pub struct BfvMultiplier {
    inner: bfv::Multiplier,
}

/// Slot vectors mod `p` ↔ plaintexts.
#[pyclass(module = "heinfer._native", name = "BfvEncoder", frozen)]
pub struct BfvEncoder {
    inner: bfv::BatchEncoder,
    params: Inner,
}

#[pymethods]
impl BfvEncoder {
    #[new]
    fn new(params: &BfvParams) -> Self {
        Self {
            inner: bfv::BatchEncoder::new(&params.inner),
            params: params.inner.clone(),
        }
    }
    /// `Δ·m` for slots `values` (each `< p`, at most `N`): to encrypt or add.
    fn encode(&self, py: Python<'_>, values: PyReadonlyArray1<'_, u64>) -> PyResult<Plaintext> {
        let v = to_vec(&values);
        let inner = run(py, "BfvEncoder.encode", || self.inner.encode(&v))?;
        Ok(Plaintext {
            inner,
            params: self.params.rlwe().clone(),
        })
    }
    /// The centered `m` for slots `values`: to multiply by.
    fn encode_multiplier(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<BfvMultiplier> {
        let v = to_vec(&values);
        let inner = run(py, "BfvEncoder.encode_multiplier", || {
            self.inner.encode_multiplier(&v)
        })?;
        Ok(BfvMultiplier { inner })
    }
    /// The centered `m` of every row of `values` (signed integers, reduced mod `p`; at most
    /// `N` columns), the rows in parallel.
    fn encode_multipliers(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray2<'_, i64>,
    ) -> PyResult<Vec<BfvMultiplier>> {
        let cols = values.shape()[1];
        let v = to_vec(&values);
        let inner = run(py, "BfvEncoder.encode_multipliers", || {
            self.inner.encode_multipliers(&v, cols)
        })?;
        Ok(inner
            .into_iter()
            .map(|inner| BfvMultiplier { inner })
            .collect())
    }
    /// Coefficients `[0, p)` of the polynomial with slots `values`.
    fn slots_to_coefficients<'py>(
        &self,
        py: Python<'py>,
        values: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let v = to_vec(&values);
        let c = run(py, "BfvEncoder.slots_to_coefficients", || {
            self.inner.slots_to_coefficients(&v)
        })?;
        Ok(PyArray1::from_vec(py, c))
    }
}

/// Additions, plaintext and scalar products, rotations on BFV ciphertexts.
#[pyclass(module = "heinfer._native", name = "BfvEvaluator", frozen)]
pub struct BfvEvaluator {
    inner: bfv::BfvEvaluator,
    params: Inner,
}

impl BfvEvaluator {
    fn wrap(&self, ct: heinfer_ckks::Ciphertext) -> Ciphertext {
        Ciphertext::wrap(ct, self.params.rlwe())
    }

    /// An operation over a list of ciphertexts that returns one per input (as the CKKS
    /// evaluator's `many`).
    fn many(
        &self,
        py: Python<'_>,
        op: &'static str,
        cts: &[PyRef<'_, Ciphertext>],
        f: impl FnOnce(&[&heinfer_ckks::Ciphertext]) -> bfv::Result<Vec<heinfer_ckks::Ciphertext>>
            + Send,
    ) -> PyResult<Vec<Ciphertext>> {
        let c: Vec<&heinfer_ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let v = run(py, op, || f(&c))?;
        Ok(v.into_iter().map(|c| self.wrap(c)).collect())
    }
}

#[pymethods]
impl BfvEvaluator {
    #[new]
    fn new(params: &BfvParams) -> Self {
        Self {
            inner: bfv::BfvEvaluator::new(&params.inner),
            params: params.inner.clone(),
        }
    }
    fn add(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.add", || {
            self.inner.add(&a.inner, &b.inner)
        })?))
    }
    fn add_assign(
        &self,
        py: Python<'_>,
        mut a: PyRefMut<'_, Ciphertext>,
        b: &Ciphertext,
    ) -> PyResult<()> {
        let a = &mut a.inner;
        run(py, "BfvEvaluator.add_assign", || {
            self.inner.add_assign(a, &b.inner)
        })
    }
    fn sub(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.sub", || {
            self.inner.sub(&a.inner, &b.inner)
        })?))
    }
    fn add_plain(&self, py: Python<'_>, ct: &Ciphertext, pt: &Plaintext) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.add_plain", || {
            self.inner.add_plain(&ct.inner, &pt.inner)
        })?))
    }
    fn sub_plain(&self, py: Python<'_>, ct: &Ciphertext, pt: &Plaintext) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.sub_plain", || {
            self.inner.sub_plain(&ct.inner, &pt.inner)
        })?))
    }
    fn mul_plain(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        m: &BfvMultiplier,
    ) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.mul_plain", || {
            self.inner.mul_plain(&ct.inner, &m.inner)
        })?))
    }
    fn dot_plain(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        ms: Vec<PyRef<'_, BfvMultiplier>>,
    ) -> PyResult<Ciphertext> {
        let c: Vec<&heinfer_ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let m: Vec<&bfv::Multiplier> = ms.iter().map(|m| &m.inner).collect();
        Ok(self.wrap(run(py, "BfvEvaluator.dot_plain", || {
            self.inner.dot_plain(&c, &m)
        })?))
    }
    fn mul_scalar(&self, py: Python<'_>, ct: &Ciphertext, c: u64) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.mul_scalar", || {
            self.inner.mul_scalar(&ct.inner, c)
        })?))
    }
    fn rotate_rows(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        k: i64,
        keys: &GaloisKeys,
    ) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.rotate_rows", || {
            self.inner.rotate_rows(&ct.inner, k, &keys.inner)
        })?))
    }
    fn rotate_rows_hoisted(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Ciphertext>> {
        let v = run(py, "BfvEvaluator.rotate_rows_hoisted", || {
            self.inner
                .rotate_rows_hoisted(&ct.inner, &steps, &keys.inner)
        })?;
        Ok(v.into_iter().map(|c| self.wrap(c)).collect())
    }
    fn rotate_rows_many(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Ciphertext>> {
        self.many(py, "BfvEvaluator.rotate_rows_many", &cts, |c| {
            self.inner.rotate_rows_many(c, &steps, &keys.inner)
        })
    }
    fn fold_rows(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Ciphertext>> {
        self.many(py, "BfvEvaluator.fold_rows", &cts, |c| {
            self.inner.fold_rows(c, &steps, &keys.inner)
        })
    }
    fn swap_rows(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        keys: &GaloisKeys,
    ) -> PyResult<Ciphertext> {
        Ok(self.wrap(run(py, "BfvEvaluator.swap_rows", || {
            self.inner.swap_rows(&ct.inner, &keys.inner)
        })?))
    }
}

/// Exact decryption (client side).
#[pyclass(module = "heinfer._native", name = "BfvDecryptor", frozen)]
pub struct BfvDecryptor {
    inner: bfv::Decryptor,
}

#[pymethods]
impl BfvDecryptor {
    #[new]
    fn new(py: Python<'_>, params: &BfvParams, sk: &SecretKey) -> PyResult<Self> {
        Ok(Self {
            inner: run(py, "BfvDecryptor.new", || {
                bfv::Decryptor::new(&params.inner, &sk.inner)
            })?,
        })
    }
    /// The `N` slots of `ct`, each in `[0, p)`.
    fn decrypt<'py>(
        &self,
        py: Python<'py>,
        ct: &Ciphertext,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let v = run(py, "BfvDecryptor.decrypt", || self.inner.decrypt(&ct.inner))?;
        Ok(PyArray1::from_vec(py, v))
    }
    /// Bits of noise budget left (decryption is correct while positive).
    fn noise_budget(&self, py: Python<'_>, ct: &Ciphertext) -> PyResult<f64> {
        run(py, "BfvDecryptor.noise_budget", || {
            self.inner.noise_budget(&ct.inner)
        })
    }
}

/// Re-randomization and noise flooding with the client's public key (server side).
#[pyclass(module = "heinfer._native", name = "BfvRerandomizer", frozen)]
pub struct BfvRerandomizer {
    inner: bfv::Rerandomizer,
    params: Inner,
}

#[pymethods]
impl BfvRerandomizer {
    #[new]
    fn new(py: Python<'_>, params: &BfvParams, pk: &PublicKey) -> PyResult<Self> {
        let inner = run(py, "BfvRerandomizer.new", || {
            bfv::Rerandomizer::new(&params.inner, &pk.inner)
        })?;
        Ok(Self {
            inner,
            params: params.inner.clone(),
        })
    }
    /// Largest flooding exponent `b` these parameters decrypt through.
    #[getter]
    fn max_flood_bits(&self) -> u32 {
        self.inner.max_flood_bits()
    }
    /// `ct + Enc_pk(0) + (U[−2^b, 2^b), 0)`.
    fn rerandomize(&self, py: Python<'_>, ct: &Ciphertext, bits: u32) -> PyResult<Ciphertext> {
        let c = run(py, "BfvRerandomizer.rerandomize", || {
            self.inner.rerandomize(&ct.inner, bits)
        })?;
        Ok(Ciphertext::wrap(c, self.params.rlwe()))
    }
    /// Re-randomized, flooded with `2^bits` and switched down to the fewest primes that
    /// still decrypt it (a result to send).
    fn rerandomize_compact(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        bits: u32,
    ) -> PyResult<Ciphertext> {
        let c = run(py, "BfvRerandomizer.rerandomize_compact", || {
            self.inner.rerandomize_compact(&ct.inner, bits)
        })?;
        Ok(Ciphertext::wrap(c, self.params.rlwe()))
    }
    /// The level a result flooded with `2^bits` is switched down to.
    fn compact_level(&self, bits: u32) -> usize {
        self.inner.compact_level(bits)
    }
}

/// `count` residues uniform mod `p`, drawn from the engine's stream (AES-256-CTR keyed from
/// the OS) by the samplers' rejection sampling (`Sampler::uniform_into`: exactly uniform). The
/// server's masks of every result: 21 µs per 8,192 values, where the OS's `urandom` took
/// 185 µs. `p` must be in the plaintext moduli's range, `[2, 2^40)`; others are
/// refused (a caller's mistake, not a modulus the shares live in).
#[pyfunction]
pub fn bfv_uniform_mod<'py>(
    py: Python<'py>,
    count: usize,
    p: u64,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    if !(2..1 << 40).contains(&p) {
        return Err(ParameterError::new_err(format!(
            "uniform residues mod {p}: the modulus must be in [2, 2^40)"
        )));
    }
    let mut sampler =
        heinfer_math::sampler::Sampler::from_os().map_err(|e| to_py(CkksError::from(e)))?;
    let mut words = vec![0u64; count];
    sampler.uniform_into(&mut words, &heinfer_math::Modulus::new(p));
    Ok(PyArray1::from_vec(py, words))
}

/// The plaintext primes `p ≡ 1 (mod 2N)` of `bits` bits (12 to 40), largest first, at most
/// `count` (`heinfer_bfv::plain_primes`).
#[pyfunction]
pub fn bfv_plain_primes(log_n: u32, bits: u32, count: usize) -> PyResult<Vec<u64>> {
    if !(12..=40).contains(&bits) || !(10..=16).contains(&log_n) || bits <= log_n + 1 {
        return Err(ParameterError::new_err(format!(
            "plaintext primes of {bits} bits for N = 2^{log_n}: bits must be in 12..=40, above log2(2N), and log_n in 10..=16"
        )));
    }
    Ok(bfv::plain_primes(log_n, bits, count.min(1 << 16)))
}

/// Flooding exponent hiding a `2^noise_bits` error in a ring of degree `2^log_n` with
/// statistical distance below `2^(−stat_bits−1)`.
#[pyfunction]
pub fn bfv_flood_bits(noise_bits: u32, log_n: u32, stat_bits: u32) -> u32 {
    bfv::flood_bits(noise_bits, log_n, stat_bits)
}

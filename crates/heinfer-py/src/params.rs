//! `Params`: checked CKKS parameters (a literal checked on construction, or a preset).

use crate::errors::{guard, to_py};
use crate::pool::run;
use heinfer_ckks::{presets, serialize, CkksError, CkksParams, CkksParamsLiteral, SecurityLevel};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Checked, immutable CKKS parameters.
#[pyclass(module = "heinfer._native", name = "Params", frozen)]
pub struct Params {
    pub inner: CkksParams,
}

#[pymethods]
impl Params {
    /// Checks a literal (security table included) and precomputes the tables.
    #[new]
    #[pyo3(signature = (log_n, log_q, log_p, log_scale, digits=None, security=128))]
    fn new(
        py: Python<'_>,
        log_n: u32,
        log_q: Vec<u32>,
        log_p: Vec<u32>,
        log_scale: u32,
        digits: Option<usize>,
        security: u32,
    ) -> PyResult<Self> {
        let security = match SecurityLevel::from_bits(security) {
            Some(s) if s != SecurityLevel::InsecureTestOnly => s,
            _ => {
                return Err(to_py(CkksError::InvalidParameters(format!(
                    "security = {security} bits is not one of 128, 192, 256"
                ))))
            }
        };
        let lit = CkksParamsLiteral {
            log_n,
            log_q,
            log_p,
            log_scale,
            digits,
            security,
        };
        let inner = run(py, "Params.new", move || CkksParams::new(lit))?;
        Ok(Self { inner })
    }

    /// A named preset: `PN13_QP218`, `PN14_QP438`, `PN15_QP881`, or the insecure test sets
    /// `INSECURE_LOGN10`, `INSECURE_LOGN12`.
    #[staticmethod]
    fn preset(py: Python<'_>, name: &str) -> PyResult<Self> {
        let name = name.to_owned();
        let inner = run(py, "Params.preset", move || match name.as_str() {
            "PN13_QP218" => CkksParams::new(presets::pn13_qp218()),
            "PN14_QP438" => CkksParams::new(presets::pn14_qp438()),
            "PN15_QP881" => CkksParams::new(presets::pn15_qp881()),
            "INSECURE_LOGN10" => presets::insecure_logn10(),
            "INSECURE_LOGN12" => presets::insecure_logn12(),
            other => Err(CkksError::InvalidParameters(format!(
                "unknown preset {other:?}"
            ))),
        })?;
        Ok(Self { inner })
    }

    /// Decodes and checks serialized parameters.
    #[staticmethod]
    #[pyo3(signature = (data, allow_insecure=false))]
    fn from_bytes(py: Python<'_>, data: &[u8], allow_insecure: bool) -> PyResult<Self> {
        let inner = run(py, "Params.from_bytes", || {
            serialize::params_from_bytes(data, allow_insecure)
        })?;
        Ok(Self { inner })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = guard("Params.to_bytes", || {
            Ok(serialize::params_to_bytes(&self.inner))
        })?;
        Ok(PyBytes::new(py, &v))
    }
    /// Exact length of `Ciphertext.to_bytes()` for a ciphertext of `size` polynomials (2 to
    /// 5) at `level`, not seed-compressed (a fresh secret-key encryption is smaller).
    /// `LevelError` above the top level, `OperandError` for another size.
    fn ciphertext_wire_bytes(&self, level: usize, size: usize) -> PyResult<usize> {
        guard("Params.ciphertext_wire_bytes", || {
            serialize::ciphertext_wire_bytes(&self.inner, level, size).map_err(to_py)
        })
    }
    /// Exact length of `CiphertextBatch.to_bytes(drop_bits=drop)` per ciphertext (without the
    /// batch's 4-byte length prefix): the rounded form is smaller (see `rounding_drop_bits`).
    #[pyo3(signature = (level, size, drop))]
    fn rounded_ciphertext_wire_bytes(
        &self,
        level: usize,
        size: usize,
        drop: Vec<u32>,
    ) -> PyResult<usize> {
        guard("Params.rounded_ciphertext_wire_bytes", || {
            serialize::rounded_ciphertext_wire_bytes(&self.inner, level, size, &drop).map_err(to_py)
        })
    }
    /// Low bits each of the `size` polynomials of a ciphertext at `level` may drop when it is
    /// serialized rounded (`CiphertextBatch.to_bytes(drop_bits=…)`), so that the error added to
    /// each decrypted coefficient has a standard deviation of at most `max_std` (coefficient
    /// units: a value's error is about `max_std·√N / scale` in slots, `max_std / scale` in
    /// coefficients). Rounding drops `j` bits of each coefficient of part `i`, adding
    /// `δ_i·s^i` with `|δ_i| ≤ 2^{j−1}`; with the ternary secret the variance per coefficient
    /// is `Σ_i i!·(2/3)^i·N^i·4^{j_i}/12` (`(4^{j_0} + (2N/3)·4^{j_1} + (8N²/9)·4^{j_2} + …)/12`,
    /// up to 5 parts), split equally between the parts.
    /// All zeros when `Q` at `level` exceeds 126 bits.
    fn rounding_drop_bits(&self, level: usize, size: usize, max_std: f64) -> PyResult<Vec<u32>> {
        guard("Params.rounding_drop_bits", || {
            serialize::rounding_drop_bits(&self.inner, level, size, max_std).map_err(to_py)
        })
    }
    /// The engine's noise model (`heinfer_ckks::noise::NoiseModel`) at `level` and `scale`:
    /// the predicted standard deviation of the error one operation adds to each slot (real
    /// part, message units) — `fresh` (public-key encryption), `fresh_symmetric`,
    /// `rescale` (its rounding, `scale` being the scale after it) and `key_switch` (balanced
    /// ModUp digits, ModDown's rounding). What the Python simulation restates; its tests
    /// compare the two.
    fn noise_model(
        &self,
        level: usize,
        scale: f64,
    ) -> PyResult<std::collections::HashMap<&'static str, f64>> {
        guard("Params.noise_model", || {
            if level > self.inner.max_level() || !(scale.is_finite() && scale > 0.0) {
                return Err(to_py(CkksError::InvalidParameters(format!(
                    "noise_model: level {level} (at most {}) and a positive scale, got {scale}",
                    self.inner.max_level()
                ))));
            }
            let m = heinfer_ckks::noise::NoiseModel::new(&self.inner);
            Ok(std::collections::HashMap::from([
                ("fresh", m.fresh(scale)),
                ("fresh_symmetric", m.fresh_symmetric(scale)),
                ("rescale", m.rescale(scale)),
                ("key_switch", m.key_switch(level, scale)),
            ]))
        })
    }
    /// Exact length of `CiphertextBatch.to_bytes()` for `count` (≥ 1) ciphertexts of `size`
    /// polynomials at `level`, none seed-compressed (an upper bound otherwise).
    fn batch_wire_bytes(&self, count: usize, level: usize, size: usize) -> PyResult<usize> {
        guard("Params.batch_wire_bytes", || {
            serialize::ciphertext_batch_wire_bytes(&self.inner, count, level, size).map_err(to_py)
        })
    }
    /// Exact length of `RelinKey.to_bytes()`. `ParameterError` without special primes.
    fn relin_key_wire_bytes(&self) -> PyResult<usize> {
        guard("Params.relin_key_wire_bytes", || {
            serialize::relin_key_wire_bytes(&self.inner).map_err(to_py)
        })
    }
    /// Exact length of `GaloisKeys.to_bytes()` for `count` keys (at most `N − 1`).
    /// `ParameterError` without special primes, `OperandError` for too many keys.
    fn galois_keys_wire_bytes(&self, count: usize) -> PyResult<usize> {
        guard("Params.galois_keys_wire_bytes", || {
            serialize::galois_keys_wire_bytes(&self.inner, count).map_err(to_py)
        })
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
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    #[getter]
    fn max_level(&self) -> usize {
        self.inner.max_level()
    }
    #[getter]
    fn q(&self) -> Vec<u64> {
        self.inner.q().to_vec()
    }
    #[getter]
    fn p(&self) -> Vec<u64> {
        self.inner.p().to_vec()
    }
    #[getter]
    fn alpha(&self) -> usize {
        self.inner.alpha()
    }
    #[getter]
    fn beta(&self) -> usize {
        self.inner.beta()
    }
    #[getter]
    fn log_qp(&self) -> f64 {
        self.inner.log_qp()
    }
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }
    #[getter]
    fn default_scale(&self) -> f64 {
        self.inner.default_scale()
    }
    /// Security level in bits (0: insecure test parameters).
    #[getter]
    fn security(&self) -> u32 {
        self.inner.security().bits()
    }
    #[getter]
    fn log_q(&self) -> Vec<u32> {
        self.inner.literal().log_q.clone()
    }
    #[getter]
    fn log_p(&self) -> Vec<u32> {
        self.inner.literal().log_p.clone()
    }
    #[getter]
    fn log_scale(&self) -> u32 {
        self.inner.literal().log_scale
    }
    #[getter]
    fn digits(&self) -> Option<usize> {
        self.inner.literal().digits
    }
    /// Galois element of a left rotation by `k` slots.
    fn rotation_galois_element(&self, k: i64) -> u64 {
        heinfer_ckks::rotation_galois_element(k, self.inner.n())
    }
    /// Galois element of complex conjugation.
    fn conjugation_galois_element(&self) -> u64 {
        heinfer_ckks::conjugation_galois_element(self.inner.n())
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

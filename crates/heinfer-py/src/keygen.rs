//! Key generation, encryption and decryption.

use crate::errors::{guard, to_py};
use crate::filled::filled_bytes;
use crate::objects::{Ciphertext, GaloisKeys, Plaintext, PublicKey, RelinKey, SecretKey};
use crate::params::Params;
use crate::pool::run;
use heinfer_ckks as ckks;
use heinfer_ckks::CkksParams;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Generates keys; holds the secret key (client side).
#[pyclass(module = "heinfer._native", name = "KeyGenerator", frozen)]
pub struct KeyGenerator {
    pub inner: ckks::KeyGenerator,
    pub params: CkksParams,
}

#[pymethods]
impl KeyGenerator {
    /// A key generator with a fresh secret key from the OS random source.
    #[new]
    fn new(py: Python<'_>, params: &Params) -> PyResult<Self> {
        let p = params.inner.clone();
        let inner = run(py, "KeyGenerator.new", || ckks::KeyGenerator::new(&p))?;
        Ok(Self { inner, params: p })
    }
    /// A key generator around an existing secret key.
    #[staticmethod]
    fn from_secret_key(py: Python<'_>, params: &Params, sk: &SecretKey) -> PyResult<Self> {
        let p = params.inner.clone();
        let inner = run(py, "KeyGenerator.from_secret_key", || {
            ckks::KeyGenerator::from_secret_key(&p, &sk.inner)
        })?;
        Ok(Self { inner, params: p })
    }
    fn secret_key(&self) -> SecretKey {
        SecretKey {
            inner: self.inner.secret_key().clone(),
            params: self.params.clone(),
        }
    }
    fn public_key(&self, py: Python<'_>) -> PyResult<PublicKey> {
        let inner = run(py, "KeyGenerator.public_key", || self.inner.public_key())?;
        Ok(PublicKey {
            inner,
            params: self.params.clone(),
        })
    }
    fn relin_key(&self, py: Python<'_>) -> PyResult<RelinKey> {
        let inner = run(py, "KeyGenerator.relin_key", || self.inner.relin_key())?;
        Ok(RelinKey {
            inner,
            params: self.params.clone(),
        })
    }
    fn galois_keys(
        &self,
        py: Python<'_>,
        steps: Vec<i64>,
        conjugate: bool,
    ) -> PyResult<GaloisKeys> {
        let inner = run(py, "KeyGenerator.galois_keys", || {
            self.inner.galois_keys(&steps, conjugate)
        })?;
        Ok(GaloisKeys {
            inner,
            params: self.params.clone(),
        })
    }
    /// Fresh Galois keys serialized as `galois_keys(steps, conjugate).to_bytes()` would be,
    /// written straight into the returned bytes, one key at a time (no key set is held).
    fn galois_keys_bytes<'py>(
        &self,
        py: Python<'py>,
        steps: Vec<i64>,
        conjugate: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        const OP: &str = "KeyGenerator.galois_keys_bytes";
        let kg = &self.inner;
        let len = run(py, OP, || {
            ckks::serialize::fresh_galois_keys_len(kg, &steps, conjugate)
        })?;
        // every byte is written (the header, then each key's fixed-size record) or it fails
        filled_bytes(py, OP, &[], len, |buf| {
            ckks::serialize::fresh_galois_keys_into(kg, &steps, conjugate, buf)
        })
    }
    fn encrypt_symmetric(&self, py: Python<'_>, pt: &Plaintext) -> PyResult<Ciphertext> {
        let inner = run(py, "KeyGenerator.encrypt_symmetric", || {
            self.inner.encrypt_symmetric(&pt.inner)
        })?;
        Ok(Ciphertext::wrap(inner, &self.params))
    }
    fn __repr__(&self) -> String {
        format!("KeyGenerator(params_id={:#018x})", self.params.id())
    }
}

/// Public-key encryption.
#[pyclass(module = "heinfer._native", name = "Encryptor", frozen)]
pub struct Encryptor {
    inner: ckks::Encryptor,
    pub params: CkksParams,
}

#[pymethods]
impl Encryptor {
    #[new]
    fn new(params: &Params, pk: &PublicKey) -> PyResult<Self> {
        let inner = guard("Encryptor.new", || {
            ckks::Encryptor::new(&params.inner, &pk.inner).map_err(to_py)
        })?;
        Ok(Self {
            inner,
            params: params.inner.clone(),
        })
    }
    fn encrypt(&self, py: Python<'_>, pt: &Plaintext) -> PyResult<Ciphertext> {
        let inner = run(py, "Encryptor.encrypt", || self.inner.encrypt(&pt.inner))?;
        Ok(Ciphertext::wrap(inner, &self.params))
    }
}

/// Secret-key decryption (client side).
#[pyclass(module = "heinfer._native", name = "Decryptor", frozen)]
pub struct Decryptor {
    pub inner: ckks::Decryptor,
    pub params: CkksParams,
}

#[pymethods]
impl Decryptor {
    #[new]
    fn new(params: &Params, sk: &SecretKey) -> PyResult<Self> {
        let inner = guard("Decryptor.new", || {
            ckks::Decryptor::new(&params.inner, &sk.inner).map_err(to_py)
        })?;
        Ok(Self {
            inner,
            params: params.inner.clone(),
        })
    }
    fn decrypt(&self, py: Python<'_>, ct: &Ciphertext) -> PyResult<Plaintext> {
        let inner = run(py, "Decryptor.decrypt", || self.inner.decrypt(&ct.inner))?;
        Ok(Plaintext {
            inner,
            params: self.params.clone(),
        })
    }
    fn __repr__(&self) -> String {
        format!("Decryptor(params_id={:#018x})", self.params.id())
    }
}

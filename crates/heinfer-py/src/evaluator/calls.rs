//! How the evaluator's bindings call the engine: on the pool with the GIL released, small
//! element-wise ops on the calling thread, results wrapped as Python objects.

use super::Evaluator;
use crate::objects::{Ciphertext, ExtendedCiphertext};
use crate::pool::{run, run_sized};
use heinfer_ckks as ckks;
use heinfer_ckks::CkksParams;
use pyo3::prelude::*;

impl Evaluator {
    pub(super) fn ct(
        &self,
        py: Python<'_>,
        op: &'static str,
        f: impl FnOnce(&ckks::Evaluator) -> ckks::Result<ckks::Ciphertext> + Send,
    ) -> PyResult<Ciphertext> {
        let inner = run(py, op, || f(&self.inner))?;
        Ok(Ciphertext::wrap(inner, &self.params))
    }
    pub(super) fn ext(
        &self,
        py: Python<'_>,
        op: &'static str,
        f: impl FnOnce(&ckks::Evaluator) -> ckks::Result<ckks::ExtendedCiphertext> + Send,
    ) -> PyResult<ExtendedCiphertext> {
        let inner = run(py, op, || f(&self.inner))?;
        Ok(ExtendedCiphertext::wrap(inner, &self.params))
    }
    pub(super) fn assign(
        &self,
        py: Python<'_>,
        op: &'static str,
        f: impl FnOnce(&ckks::Evaluator) -> ckks::Result<()> + Send,
    ) -> PyResult<()> {
        run(py, op, || f(&self.inner))
    }
    /// An op on a list of ciphertexts that returns new ones (`f` gets the engine's
    /// ciphertexts, in order).
    pub(super) fn many(
        &self,
        py: Python<'_>,
        op: &'static str,
        cts: &[PyRef<'_, Ciphertext>],
        f: impl FnOnce(&ckks::Evaluator, &[&ckks::Ciphertext]) -> ckks::Result<Vec<ckks::Ciphertext>>
            + Send,
    ) -> PyResult<Vec<Ciphertext>> {
        let c: Vec<&ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let v = run(py, op, || f(&self.inner, &c))?;
        Ok(self.wrap_all(v))
    }
    /// The engine's ciphertexts as Python objects of this evaluator's parameters.
    pub(super) fn wrap_all(&self, v: Vec<ckks::Ciphertext>) -> Vec<Ciphertext> {
        v.into_iter()
            .map(|c| Ciphertext::wrap(c, &self.params))
            .collect()
    }
    /// [`Self::ct`] for an element-wise op on `ct`'s words: a small one runs on the calling
    /// thread ([`run_sized`]).
    pub(super) fn ct_small(
        &self,
        py: Python<'_>,
        op: &'static str,
        on: &ckks::Ciphertext,
        f: impl FnOnce(&ckks::Evaluator) -> ckks::Result<ckks::Ciphertext> + Send,
    ) -> PyResult<Ciphertext> {
        let inner = run_sized(py, op, words(on, &self.params), || f(&self.inner))?;
        Ok(Ciphertext::wrap(inner, &self.params))
    }
    /// [`Self::assign`] for an element-wise op on `words` residue words.
    pub(super) fn assign_small(
        &self,
        py: Python<'_>,
        op: &'static str,
        words: usize,
        f: impl FnOnce(&ckks::Evaluator) -> ckks::Result<()> + Send,
    ) -> PyResult<()> {
        run_sized(py, op, words, || f(&self.inner))
    }
}

/// Residue words of `ct`: `N` × limbs × polynomials.
pub(super) fn words(ct: &ckks::Ciphertext, params: &CkksParams) -> usize {
    params.n() * (ct.level() + 1) * ct.size()
}

//! The evaluator: every homomorphic operation of the engine, allocating (`op`) and in place
//! (`op_assign`) where the engine has both. All run on the pool with the GIL released.

mod calls;
mod groups;

use crate::objects::{Ciphertext, ExtendedCiphertext, GaloisKeys, Plaintext, RelinKey};
use crate::params::Params;
use crate::pool::run;
use calls::words;
use groups::{with_groups, GroupPlaintexts};
use heinfer_ckks as ckks;
use heinfer_ckks::CkksParams;
use pyo3::prelude::*;

/// Homomorphic operations for one parameter set; holds no key.
#[pyclass(module = "heinfer._native", name = "Evaluator", frozen)]
pub struct Evaluator {
    pub(crate) inner: ckks::Evaluator,
    pub(crate) params: CkksParams,
}

#[pymethods]
impl Evaluator {
    #[new]
    fn new(params: &Params) -> Self {
        Self {
            inner: ckks::Evaluator::new(&params.inner),
            params: params.inner.clone(),
        }
    }

    fn add(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.add", &a.inner, |e| e.add(&a.inner, &b.inner))
    }
    fn add_assign(
        &self,
        py: Python<'_>,
        mut a: PyRefMut<'_, Ciphertext>,
        b: &Ciphertext,
    ) -> PyResult<()> {
        let w = words(&a.inner, &self.params);
        let a = &mut a.inner;
        self.assign_small(py, "Evaluator.add_assign", w, |e| e.add_assign(a, &b.inner))
    }
    fn sub(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.sub", &a.inner, |e| e.sub(&a.inner, &b.inner))
    }
    fn sub_assign(
        &self,
        py: Python<'_>,
        mut a: PyRefMut<'_, Ciphertext>,
        b: &Ciphertext,
    ) -> PyResult<()> {
        let w = words(&a.inner, &self.params);
        let a = &mut a.inner;
        self.assign_small(py, "Evaluator.sub_assign", w, |e| e.sub_assign(a, &b.inner))
    }
    fn neg(&self, py: Python<'_>, a: &Ciphertext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.neg", &a.inner, |e| e.neg(&a.inner))
    }
    fn neg_assign(&self, py: Python<'_>, mut a: PyRefMut<'_, Ciphertext>) -> PyResult<()> {
        let w = words(&a.inner, &self.params);
        let a = &mut a.inner;
        self.assign_small(py, "Evaluator.neg_assign", w, |e| e.neg_assign(a))
    }
    fn add_plain(&self, py: Python<'_>, ct: &Ciphertext, pt: &Plaintext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.add_plain", &ct.inner, |e| {
            e.add_plain(&ct.inner, &pt.inner)
        })
    }
    fn add_plain_assign(
        &self,
        py: Python<'_>,
        mut ct: PyRefMut<'_, Ciphertext>,
        pt: &Plaintext,
    ) -> PyResult<()> {
        let w = words(&ct.inner, &self.params);
        let ct = &mut ct.inner;
        self.assign_small(py, "Evaluator.add_plain_assign", w, |e| {
            e.add_plain_assign(ct, &pt.inner)
        })
    }
    fn sub_plain(&self, py: Python<'_>, ct: &Ciphertext, pt: &Plaintext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.sub_plain", &ct.inner, |e| {
            e.sub_plain(&ct.inner, &pt.inner)
        })
    }
    fn mul_plain(&self, py: Python<'_>, ct: &Ciphertext, pt: &Plaintext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.mul_plain", &ct.inner, |e| {
            e.mul_plain(&ct.inner, &pt.inner)
        })
    }
    fn mul_plain_assign(
        &self,
        py: Python<'_>,
        mut ct: PyRefMut<'_, Ciphertext>,
        pt: &Plaintext,
    ) -> PyResult<()> {
        let w = words(&ct.inner, &self.params);
        let ct = &mut ct.inner;
        self.assign_small(py, "Evaluator.mul_plain_assign", w, |e| {
            e.mul_plain_assign(ct, &pt.inner)
        })
    }
    fn mul_const(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        c: f64,
        scale: f64,
    ) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.mul_const", &ct.inner, |e| {
            e.mul_const(&ct.inner, c, scale)
        })
    }
    fn mul_const_assign(
        &self,
        py: Python<'_>,
        mut ct: PyRefMut<'_, Ciphertext>,
        c: f64,
        scale: f64,
    ) -> PyResult<()> {
        let w = words(&ct.inner, &self.params);
        let ct = &mut ct.inner;
        self.assign_small(py, "Evaluator.mul_const_assign", w, |e| {
            e.mul_const_assign(ct, c, scale)
        })
    }
    fn mul_const_complex(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        re: f64,
        im: f64,
        scale: f64,
    ) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.mul_const_complex", &ct.inner, |e| {
            e.mul_const_complex(&ct.inner, re, im, scale)
        })
    }
    fn add_const(&self, py: Python<'_>, ct: &Ciphertext, c: f64) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.add_const", &ct.inner, |e| {
            e.add_const(&ct.inner, c)
        })
    }
    fn add_const_complex(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        re: f64,
        im: f64,
    ) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.add_const_complex", &ct.inner, |e| {
            e.add_const_complex(&ct.inner, re, im)
        })
    }
    fn mul(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.mul", |e| e.mul(&a.inner, &b.inner))
    }
    fn square(&self, py: Python<'_>, a: &Ciphertext) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.square", |e| e.square(&a.inner))
    }
    fn relinearize(&self, py: Python<'_>, ct: &Ciphertext, rlk: &RelinKey) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.relinearize", |e| {
            e.relinearize(&ct.inner, &rlk.inner)
        })
    }
    fn relinearize_assign(
        &self,
        py: Python<'_>,
        mut ct: PyRefMut<'_, Ciphertext>,
        rlk: &RelinKey,
    ) -> PyResult<()> {
        let ct = &mut ct.inner;
        self.assign(py, "Evaluator.relinearize_assign", |e| {
            e.relinearize_assign(ct, &rlk.inner)
        })
    }
    fn mul_relin(
        &self,
        py: Python<'_>,
        a: &Ciphertext,
        b: &Ciphertext,
        rlk: &RelinKey,
    ) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.mul_relin", |e| {
            e.mul_relin(&a.inner, &b.inner, &rlk.inner)
        })
    }
    fn rescale(&self, py: Python<'_>, ct: &Ciphertext) -> PyResult<Ciphertext> {
        self.ct_small(py, "Evaluator.rescale", &ct.inner, |e| e.rescale(&ct.inner))
    }
    fn rescale_assign(&self, py: Python<'_>, mut ct: PyRefMut<'_, Ciphertext>) -> PyResult<()> {
        let w = words(&ct.inner, &self.params);
        let ct = &mut ct.inner;
        self.assign_small(py, "Evaluator.rescale_assign", w, |e| e.rescale_assign(ct))
    }
    /// ``rescale_assign`` on each of ``cts``, in parallel across them; every one is checked
    /// first, so on an error none is rescaled.
    fn rescale_many_assign(
        &self,
        py: Python<'_>,
        mut cts: Vec<PyRefMut<'_, Ciphertext>>,
    ) -> PyResult<()> {
        let mut c: Vec<&mut ckks::Ciphertext> = cts.iter_mut().map(|c| &mut c.inner).collect();
        self.assign(py, "Evaluator.rescale_many_assign", |e| {
            e.rescale_many_assign(&mut c)
        })
    }
    fn drop_level(&self, py: Python<'_>, ct: &Ciphertext, levels: usize) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.drop_level", |e| {
            e.drop_level(&ct.inner, levels)
        })
    }
    fn drop_to_level(&self, py: Python<'_>, ct: &Ciphertext, level: usize) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.drop_to_level", |e| {
            e.drop_to_level(&ct.inner, level)
        })
    }
    fn rotate(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        k: i64,
        keys: &GaloisKeys,
    ) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.rotate", |e| {
            e.rotate(&ct.inner, k, &keys.inner)
        })
    }
    /// `[rotate(cts[i], steps[i], keys) for i]`, the rotations spread over the pool's threads.
    fn rotate_many(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Ciphertext>> {
        self.many(py, "Evaluator.rotate_many", &cts, |e, c| {
            e.rotate_many(c, &steps, &keys.inner)
        })
    }
    /// Rotate-and-add folds of each ciphertext, `c ← c + rotate(c, s)` for each `s` of
    /// `steps` in order (new ciphertexts; the inputs are unchanged), in one call.
    fn fold(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Ciphertext>> {
        self.many(py, "Evaluator.fold", &cts, |e, c| {
            e.fold(c, &steps, &keys.inner)
        })
    }
    fn conjugate(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        keys: &GaloisKeys,
    ) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.conjugate", |e| {
            e.conjugate(&ct.inner, &keys.inner)
        })
    }
    fn apply_galois(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        g: u64,
        keys: &GaloisKeys,
    ) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.apply_galois", |e| {
            e.apply_galois(&ct.inner, g, &keys.inner)
        })
    }
    fn rotate_hoisted(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Ciphertext>> {
        let v = run(py, "Evaluator.rotate_hoisted", || {
            self.inner.rotate_hoisted(&ct.inner, &steps, &keys.inner)
        })?;
        Ok(self.wrap_all(v))
    }
    fn rotate_hoisted_extended(
        &self,
        py: Python<'_>,
        ct: &Ciphertext,
        steps: Vec<i64>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<ExtendedCiphertext>> {
        let v = run(py, "Evaluator.rotate_hoisted_extended", || {
            self.inner
                .rotate_hoisted_extended(&ct.inner, &steps, &keys.inner)
        })?;
        Ok(v.into_iter()
            .map(|c| ExtendedCiphertext::wrap(c, &self.params))
            .collect())
    }
    /// ``[rotate_hoisted(cts[i], steps[i], keys) for i]`` in one call, in parallel across
    /// the ciphertexts as well as their steps (bit-identical to one call per ciphertext).
    fn rotate_hoisted_many(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        steps: Vec<Vec<i64>>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Vec<Ciphertext>>> {
        let c: Vec<&ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let v = run(py, "Evaluator.rotate_hoisted_many", || {
            self.inner.rotate_hoisted_many(&c, &steps, &keys.inner)
        })?;
        Ok(v.into_iter().map(|r| self.wrap_all(r)).collect())
    }
    /// ``[rotate_hoisted_extended(cts[i], steps[i], keys) for i]`` in one call, in parallel
    /// across the ciphertexts as well as their steps.
    fn rotate_hoisted_extended_many(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        steps: Vec<Vec<i64>>,
        keys: &GaloisKeys,
    ) -> PyResult<Vec<Vec<ExtendedCiphertext>>> {
        let c: Vec<&ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let v = run(py, "Evaluator.rotate_hoisted_extended_many", || {
            self.inner
                .rotate_hoisted_extended_many(&c, &steps, &keys.inner)
        })?;
        Ok(v.into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|c| ExtendedCiphertext::wrap(c, &self.params))
                    .collect()
            })
            .collect())
    }
    fn add_extended_assign(
        &self,
        py: Python<'_>,
        mut a: PyRefMut<'_, ExtendedCiphertext>,
        b: &ExtendedCiphertext,
    ) -> PyResult<()> {
        let a = &mut a.inner;
        self.assign(py, "Evaluator.add_extended_assign", |e| {
            e.add_extended_assign(a, &b.inner)
        })
    }
    fn mul_const_extended(
        &self,
        py: Python<'_>,
        x: &ExtendedCiphertext,
        c: f64,
        scale: f64,
    ) -> PyResult<ExtendedCiphertext> {
        self.ext(py, "Evaluator.mul_const_extended", |e| {
            e.mul_const_extended(&x.inner, c, scale)
        })
    }
    fn mul_plain_extended(
        &self,
        py: Python<'_>,
        x: &ExtendedCiphertext,
        pt: &Plaintext,
    ) -> PyResult<ExtendedCiphertext> {
        self.ext(py, "Evaluator.mul_plain_extended", |e| {
            e.mul_plain_extended(&x.inner, &pt.inner)
        })
    }
    fn mod_down_extended(&self, py: Python<'_>, x: &ExtendedCiphertext) -> PyResult<Ciphertext> {
        self.ct(py, "Evaluator.mod_down_extended", |e| {
            e.mod_down_extended(&x.inner)
        })
    }
    fn dot_plain(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
        pts: Vec<PyRef<'_, Plaintext>>,
    ) -> PyResult<Ciphertext> {
        let c: Vec<&ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let p: Vec<&ckks::Plaintext> = pts.iter().map(|p| &p.inner).collect();
        self.ct(py, "Evaluator.dot_plain", |e| e.dot_plain(&c, &p))
    }
    fn dot_plain_extended(
        &self,
        py: Python<'_>,
        exts: Vec<PyRef<'_, ExtendedCiphertext>>,
        pts: Vec<PyRef<'_, Plaintext>>,
    ) -> PyResult<Ciphertext> {
        let x: Vec<&ckks::ExtendedCiphertext> = exts.iter().map(|c| &c.inner).collect();
        let p: Vec<&ckks::Plaintext> = pts.iter().map(|p| &p.inner).collect();
        self.ct(py, "Evaluator.dot_plain_extended", |e| {
            e.dot_plain_extended(&x, &p)
        })
    }
    /// One sum per group over the shared ciphertexts ``xs``: output ``g`` is
    /// ``Σ_t xs[terms[g][t]] · pts[g][t]``, every group in one pass over the ciphertexts'
    /// columns (bit-identical to one ``dot_plain`` per group).
    fn dot_plain_groups(
        &self,
        py: Python<'_>,
        xs: Vec<PyRef<'_, Ciphertext>>,
        terms: Vec<Vec<usize>>,
        pts: GroupPlaintexts<'_>,
    ) -> PyResult<Vec<Ciphertext>> {
        let x: Vec<&ckks::Ciphertext> = xs.iter().map(|c| &c.inner).collect();
        let v = with_groups!(pts, terms, |groups| run(
            py,
            "Evaluator.dot_plain_groups",
            || self.inner.dot_plain_groups(&x, &groups)
        )?);
        Ok(self.wrap_all(v))
    }
    /// ``dot_plain_groups`` over extended ciphertexts and extended plaintexts: each group's
    /// sum in ``Q_ℓ ∪ P``, then one ModDown per group (as ``dot_plain_extended``).
    fn dot_plain_extended_groups(
        &self,
        py: Python<'_>,
        xs: Vec<PyRef<'_, ExtendedCiphertext>>,
        terms: Vec<Vec<usize>>,
        pts: GroupPlaintexts<'_>,
    ) -> PyResult<Vec<Ciphertext>> {
        let x: Vec<&ckks::ExtendedCiphertext> = xs.iter().map(|c| &c.inner).collect();
        let v = with_groups!(pts, terms, |groups| run(
            py,
            "Evaluator.dot_plain_extended_groups",
            || self.inner.dot_plain_extended_groups(&x, &groups)
        )?);
        Ok(self.wrap_all(v))
    }
}

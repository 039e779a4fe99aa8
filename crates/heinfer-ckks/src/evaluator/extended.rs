//! Ciphertexts in the extended basis `Q_ℓ ∪ P`, scaled by `P` (double hoisting).
//!
//! An [`ExtendedCiphertext`] `(e_0, e_1)` satisfies `e_0 + e_1·s ≈ P·Δ·m` over `Q_ℓ·P`. Rotated
//! copies from [`Evaluator::rotate_hoisted_extended`] can be multiplied by constants or by
//! plaintexts encoded with P limbs ([`crate::Encoder::encode_extended`]) and summed; a single
//! [`Evaluator::mod_down_extended`] then returns an ordinary ciphertext. A baby-step giant-step
//! sum of `r` rotations then costs one ModDown instead of `r`.

use super::{same_level, same_scale, scaled_constant, Evaluator};
use crate::ciphertext::{check_scale, Ciphertext, Plaintext};
use crate::error::{CkksError, Result};
use crate::poly::{modulus_index, RnsPoly};
use heinfer_math::vecops;
use rayon::prelude::*;

/// A ciphertext over `Q_ℓ ∪ P` that encrypts `P·Δ·m`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedCiphertext {
    pub(crate) params_id: u64,
    pub(crate) parts: Vec<RnsPoly>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
}

impl ExtendedCiphertext {
    pub(crate) fn new(params_id: u64, parts: Vec<RnsPoly>, level: usize, scale: f64) -> Self {
        Self {
            params_id,
            parts,
            level,
            scale,
        }
    }
    /// Level `ℓ`.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
    /// Scale of the message (the `P` factor is not included).
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

impl Evaluator {
    fn check_ext(&self, e: &ExtendedCiphertext) -> Result<()> {
        self.params.check_id(e.params_id)
    }

    /// `a ← a + b` in the extended basis.
    pub fn add_extended_assign(
        &self,
        a: &mut ExtendedCiphertext,
        b: &ExtendedCiphertext,
    ) -> Result<()> {
        self.check_ext(a)?;
        self.check_ext(b)?;
        same_level("add_extended", a.level, b.level)?;
        same_scale("add_extended", a.scale, b.scale)?;
        let n = self.params.n();
        let inner = self.params.inner();
        let level = a.level;
        for (pa, pb) in a.parts.iter_mut().zip(&b.parts) {
            pa.data
                .par_chunks_mut(n)
                .zip(pb.data.par_chunks(n))
                .enumerate()
                .for_each(|(i, (x, y))| {
                    vecops::add_assign(x, y, inner.moduli[modulus_index(&self.params, level, i)].q)
                });
        }
        Ok(())
    }

    /// `e · c` for a real constant at `const_scale`, in the extended basis.
    pub fn mul_const_extended(
        &self,
        e: &ExtendedCiphertext,
        c: f64,
        const_scale: f64,
    ) -> Result<ExtendedCiphertext> {
        self.check_ext(e)?;
        let v = scaled_constant(c, const_scale)?;
        let scale = e.scale * const_scale;
        check_scale(scale)?;
        let inner = self.params.inner();
        let mut r = self.map_extended_limbs(e, |_, mi, x| {
            let m = &inner.moduli[mi];
            let w = m.reduce_i128(v);
            vecops::mul_scalar_assign(x, w, m.shoup(w), m);
        });
        r.scale = scale;
        Ok(r)
    }

    /// `e · pt` for a plaintext encoded with P limbs at the same level.
    pub fn mul_plain_extended(
        &self,
        e: &ExtendedCiphertext,
        pt: &Plaintext,
    ) -> Result<ExtendedCiphertext> {
        self.check_ext(e)?;
        self.check_pt(pt)?;
        same_level("mul_plain_extended", e.level, pt.level)?;
        let k = self.params.p().len();
        if pt.poly.limbs() != e.level + 1 + k {
            return Err(CkksError::InvalidOperand {
                op: "mul_plain_extended",
                reason: "the plaintext has no P limbs (encode it with encode_extended)".into(),
            });
        }
        let scale = e.scale * pt.scale;
        check_scale(scale)?;
        let inner = self.params.inner();
        let mut r = self.map_extended_limbs(e, |i, mi, x| {
            vecops::mul_assign(x, pt.poly.limb(i), &inner.barrett[mi])
        });
        r.scale = scale;
        Ok(r)
    }

    /// A copy of `e` with `f(limb_index, modulus_table_index, limb)` applied to every limb of
    /// every part.
    fn map_extended_limbs<F>(&self, e: &ExtendedCiphertext, f: F) -> ExtendedCiphertext
    where
        F: Fn(usize, usize, &mut [u64]) + Sync + Send,
    {
        let n = self.params.n();
        let mut r = e.clone();
        for p in r.parts.iter_mut() {
            p.data
                .par_chunks_mut(n)
                .enumerate()
                .for_each(|(i, x)| f(i, modulus_index(&self.params, e.level, i), x));
        }
        r
    }

    /// Divides by `P` and returns to `Q_ℓ`: one ModDown per part.
    pub fn mod_down_extended(&self, e: &ExtendedCiphertext) -> Result<Ciphertext> {
        self.check_ext(e)?;
        let parts = e
            .parts
            .iter()
            .map(|p| self.mod_down(p.data.clone(), e.level))
            .collect();
        Ok(Ciphertext {
            params_id: e.params_id,
            parts,
            level: e.level,
            scale: e.scale,
            seed: None,
        })
    }
}

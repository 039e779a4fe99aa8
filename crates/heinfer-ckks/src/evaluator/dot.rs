//! Sums of ciphertext–plaintext products in one pass: the inner sum of a linear transform.
//!
//! A baby-step giant-step linear transform (Halevi–Shoup; GAZELLE §5; Bossuat et al.'s double
//! hoisting) computes, per giant step, `Σ_t pt_t ⊙ rot(x, b_t)`. Forming each product as a
//! new ciphertext and adding it costs an allocation and three passes over memory per term;
//! [`Evaluator::dot_plain`] and [`Evaluator::dot_plain_extended`] accumulate every product
//! into one output limb at a time (which stays in cache) and, in the extended basis, finish
//! with the single ModDown of double hoisting.

use super::{same_level, same_scale, Evaluator};
use crate::ciphertext::{check_scale, Ciphertext, Plaintext};
use crate::error::{CkksError, Result};
use crate::evaluator::extended::ExtendedCiphertext;
use crate::poly::{modulus_index, RnsPoly};
use heinfer_math::dot;
use rayon::prelude::*;

fn invalid(op: &'static str, reason: &str) -> CkksError {
    CkksError::InvalidOperand {
        op,
        reason: reason.into(),
    }
}

impl Evaluator {
    /// `Σ_t cts[t] · pts[t]` (no rescale). All ciphertexts share level, size and scale, all
    /// plaintexts share a scale and are at the ciphertexts' level or above.
    pub fn dot_plain(&self, cts: &[&Ciphertext], pts: &[&Plaintext]) -> Result<Ciphertext> {
        const OP: &str = "dot_plain";
        if cts.is_empty() || cts.len() != pts.len() {
            return Err(invalid(
                OP,
                "needs as many plaintexts as ciphertexts, at least one",
            ));
        }
        let (c0, p0) = (cts[0], pts[0]);
        for (ct, pt) in cts.iter().zip(pts) {
            self.check_ct(ct)?;
            self.check_pt(pt)?;
            same_level(OP, c0.level, ct.level)?;
            same_scale(OP, c0.scale, ct.scale)?;
            same_scale(OP, p0.scale, pt.scale)?;
            if pt.level < ct.level || pt.poly.limbs() != pt.level + 1 {
                return Err(invalid(
                    OP,
                    "a plaintext is below the ciphertexts' level or extended",
                ));
            }
            if ct.parts.len() != c0.parts.len() {
                return Err(invalid(OP, "ciphertexts of different sizes"));
            }
        }
        let scale = c0.scale * p0.scale;
        check_scale(scale)?;
        let n = self.params.n();
        let inner = self.params.inner();
        let level = c0.level;
        let parts = (0..c0.parts.len())
            .map(|j| {
                let mut acc = vec![0u64; (level + 1) * n];
                acc.par_chunks_mut(n).enumerate().for_each(|(i, out)| {
                    let a: Vec<&[u64]> = cts.iter().map(|ct| ct.parts[j].limb(i)).collect();
                    let b: Vec<&[u64]> = pts.iter().map(|pt| pt.poly.limb(i)).collect();
                    dot::dot1(out, &a, &b, &inner.barrett[i]);
                });
                RnsPoly::from_data(acc, n)
            })
            .collect();
        Ok(Ciphertext {
            params_id: c0.params_id,
            parts,
            level,
            scale,
            seed: None,
        })
    }

    /// `ModDown(Σ_t exts[t] · pts[t])`: the products of extended ciphertexts (from
    /// [`Evaluator::rotate_hoisted_extended`]) and extended plaintexts summed over `Q_ℓ ∪ P`,
    /// then divided by `P` once.
    pub fn dot_plain_extended(
        &self,
        exts: &[&ExtendedCiphertext],
        pts: &[&Plaintext],
    ) -> Result<Ciphertext> {
        const OP: &str = "dot_plain_extended";
        if exts.is_empty() || exts.len() != pts.len() {
            return Err(invalid(
                OP,
                "needs as many plaintexts as ciphertexts, at least one",
            ));
        }
        let (e0, p0) = (exts[0], pts[0]);
        let k = self.params.p().len();
        for (e, pt) in exts.iter().zip(pts) {
            self.params.check_id(e.params_id)?;
            self.check_pt(pt)?;
            same_level(OP, e0.level, e.level)?;
            same_level(OP, e.level, pt.level)?;
            same_scale(OP, e0.scale, e.scale)?;
            same_scale(OP, p0.scale, pt.scale)?;
            if pt.poly.limbs() != e.level + 1 + k {
                return Err(invalid(
                    OP,
                    "a plaintext has no P limbs (encode it with encode_extended)",
                ));
            }
        }
        let scale = e0.scale * p0.scale;
        check_scale(scale)?;
        let n = self.params.n();
        let inner = self.params.inner();
        let level = e0.level;
        let limbs = level + 1 + k;
        let parts: Vec<RnsPoly> = (0..e0.parts.len())
            .map(|j| {
                let mut acc = vec![0u64; limbs * n];
                acc.par_chunks_mut(n).enumerate().for_each(|(i, out)| {
                    let bc = &inner.barrett[modulus_index(&self.params, level, i)];
                    let a: Vec<&[u64]> = exts.iter().map(|e| e.parts[j].limb(i)).collect();
                    let b: Vec<&[u64]> = pts.iter().map(|pt| pt.poly.limb(i)).collect();
                    dot::dot1(out, &a, &b, bc);
                });
                RnsPoly::from_data(acc, n)
            })
            .collect();
        let parts = parts
            .into_iter()
            .map(|p| self.mod_down(p.data, level))
            .collect();
        Ok(Ciphertext {
            params_id: e0.params_id,
            parts,
            level,
            scale,
            seed: None,
        })
    }
}

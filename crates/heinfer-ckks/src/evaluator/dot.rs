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

/// Column chunks per limb in [`par_sums`]: a ciphertext has 2 parts of 2–4 limbs at the
/// levels of a linear layer, too few tasks to keep every thread busy (3 limbs on 2 threads
/// leave one idle half the time); 4 chunks per limb make 16–32 tasks of ≥ 256 words.
const CHUNKS: usize = 4;

/// `parts` accumulators of `limbs · n` words, every `(part, limb, column chunk)` filled by
/// `sum(part, limb, columns, out)` on the pool in parallel.
fn par_sums(
    parts: usize,
    limbs: usize,
    n: usize,
    sum: impl Fn(usize, usize, std::ops::Range<usize>, &mut [u64]) + Sync,
) -> Vec<Vec<u64>> {
    let w = (n / CHUNKS).max(1);
    let mut acc: Vec<Vec<u64>> = (0..parts).map(|_| vec![0u64; limbs * n]).collect();
    let tasks: Vec<(usize, usize, &mut [u64])> = acc
        .iter_mut()
        .enumerate()
        .flat_map(|(j, a)| a.chunks_mut(w).enumerate().map(move |(t, o)| (j, t, o)))
        .collect();
    tasks.into_par_iter().for_each(|(j, t, out)| {
        let (i, c) = ((t * w) / n, (t * w) % n);
        sum(j, i, c..c + out.len(), out)
    });
    acc
}

/// `Σ_t x_t · pt_t` for every part `j` and limb `i` ([`par_sums`]): `part(t, j, i)` is limb `i`
/// of part `j` of term `t`'s ciphertext, `pt(t, i)` limb `i` of its plaintext, `bc(i)` the
/// limb's Barrett constant.
fn plaintext_sums<'a>(
    parts: usize,
    limbs: usize,
    n: usize,
    terms: usize,
    part: impl Fn(usize, usize, usize) -> &'a [u64] + Sync,
    pt: impl Fn(usize, usize) -> &'a [u64] + Sync,
    bc: impl Fn(usize) -> &'a heinfer_math::vecops::BarrettConst + Sync,
) -> Vec<Vec<u64>> {
    par_sums(parts, limbs, n, |j, i, cols, out| {
        let a: Vec<&[u64]> = (0..terms).map(|t| &part(t, j, i)[cols.clone()]).collect();
        let b: Vec<&[u64]> = (0..terms).map(|t| &pt(t, i)[cols.clone()]).collect();
        dot::dot1(out, &a, &b, bc(i));
    })
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
        let acc = plaintext_sums(
            c0.parts.len(),
            level + 1,
            n,
            cts.len(),
            |t, j, i| cts[t].parts[j].limb(i),
            |t, i| pts[t].poly.limb(i),
            |i| &inner.barrett[i],
        );
        let parts = acc.into_iter().map(|a| RnsPoly::from_data(a, n)).collect();
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
        let acc = plaintext_sums(
            e0.parts.len(),
            limbs,
            n,
            exts.len(),
            |t, j, i| exts[t].parts[j].limb(i),
            |t, i| pts[t].poly.limb(i),
            |i| &inner.barrett[modulus_index(&self.params, level, i)],
        );
        let parts = acc.into_iter().map(|a| self.mod_down(a, level)).collect();
        Ok(Ciphertext {
            params_id: e0.params_id,
            parts,
            level,
            scale,
            seed: None,
        })
    }
}

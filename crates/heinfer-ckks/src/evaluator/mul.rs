//! Ciphertext–ciphertext multiplication, squaring and relinearization.
//!
//! `(a_0, a_1)·(b_0, b_1) = (a_0 b_0, a_0 b_1 + a_1 b_0, a_1 b_1)` decrypts under `(1, s, s²)`;
//! relinearization key-switches the `s²` part back to `s`.

use super::{same_level, Evaluator};
use crate::ciphertext::{Ciphertext, MAX_PARTS};
use crate::error::{CkksError, Result};
use crate::keys::RelinKey;
use crate::poly::RnsPoly;
use heinfer_math::vecops;
use rayon::prelude::*;

impl Evaluator {
    /// `a · b` without relinearization (size-3 result, scale `a.scale·b.scale`).
    pub fn mul(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        self.check_linear("mul", a)?;
        self.check_linear("mul", b)?;
        same_level("mul", a.level, b.level)?;
        self.tensor(a, b)
    }

    /// `a²` without relinearization (one product fewer than `mul(a, a)` per pair of parts):
    /// `2·size − 1` parts, scale `a.scale²`. A 2-part `a` gives 3 parts (decrypted with
    /// `s²`); a 3-part `a` — a square not relinearized — gives [`MAX_PARTS`] = 5
    /// (`c_k = Σ_{i+j=k} a_i a_j`, decrypted with `s³`, `s⁴`: no key switch, and the error of
    /// the product is the product of the errors, as for any square).
    pub fn square(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.check_ct(a)?;
        check_square(a)?;
        self.tensor(a, a)
    }

    /// In-place [`Self::square`]. At 2 parts, `(a_0, a_1) ← (a_0², 2·a_0 a_1, a_1²)`, reusing
    /// the two input polynomials (one new polynomial instead of three).
    pub fn square_assign(&self, a: &mut Ciphertext) -> Result<()> {
        self.check_ct(a)?;
        check_square(a)?;
        if a.parts.len() != 2 {
            *a = self.tensor(a, a)?;
            return Ok(());
        }
        let scale = a.scale * a.scale;
        self.check_product_scale(scale, a.level)?;
        let n = self.params.n();
        let inner = self.params.inner();
        let limbs = a.level + 1;
        let mut d1 = RnsPoly::from_data(crate::scratch::take(limbs * n), n);
        {
            let (p0, p1) = a.parts_mut().split_at_mut(1);
            p0[0]
                .data
                .par_chunks_mut(n)
                .zip(p1[0].data.par_chunks_mut(n))
                .zip(d1.data.par_chunks_mut(n))
                .enumerate()
                .for_each(|(i, ((a0, a1), x1))| {
                    let bc = &inner.barrett[i];
                    vecops::mul_into(x1, a0, a1, bc);
                    vecops::add_self_assign(x1, inner.moduli[i].q);
                    let mut t = crate::scratch::take(n);
                    t.copy_from_slice(a0);
                    vecops::mul_assign(a0, &t, bc);
                    t.copy_from_slice(a1);
                    vecops::mul_assign(a1, &t, bc);
                    crate::scratch::give(t);
                });
        }
        let a1 = a.parts.pop().expect("size 2");
        a.parts.push(d1);
        a.parts.push(a1);
        a.scale = scale;
        Ok(())
    }

    /// `d_k = Σ_{i+j=k} a_i b_j` (`a.size + b.size − 1` parts); when `a` and `b` are the same
    /// ciphertext, one product per pair ([`vecops::square_term`]).
    fn tensor(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        let scale = a.scale * b.scale;
        self.check_product_scale(scale, a.level)?;
        let same = std::ptr::eq(a, b);
        let n = self.params.n();
        let inner = self.params.inner();
        let limbs = a.level + 1;
        let (sa, sb) = (a.parts.len(), b.parts.len());
        let count = sa + sb - 1;
        let mut out: Vec<RnsPoly> = (0..count)
            .map(|_| RnsPoly::from_data(crate::scratch::take(limbs * n), n))
            .collect();
        let mut per_limb: Vec<Vec<&mut [u64]>> =
            (0..limbs).map(|_| Vec::with_capacity(count)).collect();
        for d in out.iter_mut() {
            for (i, limb) in d.data.chunks_mut(n).enumerate() {
                per_limb[i].push(limb);
            }
        }
        per_limb
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut xs)| {
                let bc = &inner.barrett[i];
                if same {
                    let a: Vec<&[u64]> = a.parts.iter().map(|p| p.limb(i)).collect();
                    for (k, x) in xs.iter_mut().enumerate() {
                        vecops::square_term(x, &a, k, bc);
                    }
                    return;
                }
                for (k, x) in xs.iter_mut().enumerate() {
                    let lo = k.saturating_sub(sb - 1);
                    vecops::mul_into(x, a.parts[lo].limb(i), b.parts[k - lo].limb(i), bc);
                    for pi in lo + 1..=k.min(sa - 1) {
                        vecops::mul_add_assign(x, a.parts[pi].limb(i), b.parts[k - pi].limb(i), bc);
                    }
                }
            });
        Ok(Ciphertext {
            params_id: a.params_id,
            parts: out,
            level: a.level,
            scale,
            seed: None,
        })
    }

    /// Relinearizes a size-3 ciphertext to size 2 (size 2 is returned unchanged).
    pub fn relinearize(&self, ct: &Ciphertext, rlk: &RelinKey) -> Result<Ciphertext> {
        let mut r = ct.clone();
        self.relinearize_assign(&mut r, rlk)?;
        Ok(r)
    }

    /// In-place [`Self::relinearize`].
    pub fn relinearize_assign(&self, ct: &mut Ciphertext, rlk: &RelinKey) -> Result<()> {
        self.check_ct(ct)?;
        self.params.check_id(rlk.params_id())?;
        if ct.parts.len() == 2 {
            return Ok(());
        }
        if ct.parts.len() != 3 {
            return Err(crate::error::CkksError::InvalidOperand {
                op: "relinearize",
                reason: format!(
                    "ciphertext has {} parts; relinearization takes 3 (a square of a 3-part \
                     ciphertext is only decrypted)",
                    ct.parts.len()
                ),
            });
        }
        let level = ct.level;
        ct.seed = None;
        let c2 = ct.parts.pop().expect("size 3");
        let (k0, k1) = self.key_switch(&c2, level, &rlk.0);
        crate::scratch::give(c2.data);
        let n = self.params.n();
        let inner = self.params.inner();
        let parts = ct.parts_mut();
        for (p, k) in parts.iter_mut().zip([&k0, &k1]) {
            p.data
                .par_chunks_mut(n)
                .enumerate()
                .for_each(|(i, x)| vecops::add_assign(x, k.limb(i), inner.moduli[i].q));
        }
        crate::scratch::give(k0.data);
        crate::scratch::give(k1.data);
        Ok(())
    }

    /// `relinearize(a · b)`.
    pub fn mul_relin(&self, a: &Ciphertext, b: &Ciphertext, rlk: &RelinKey) -> Result<Ciphertext> {
        let mut r = self.mul(a, b)?;
        self.relinearize_assign(&mut r, rlk)?;
        Ok(r)
    }
}

/// A square's operand: 2 parts, or 3 (a square not relinearized; the result has
/// [`MAX_PARTS`]).
fn check_square(a: &Ciphertext) -> Result<()> {
    if 2 * a.parts.len() - 1 > MAX_PARTS {
        return Err(CkksError::InvalidOperand {
            op: "square",
            reason: format!(
                "a ciphertext of size {} squares to {} parts, more than {MAX_PARTS} (relinearize first)",
                a.parts.len(),
                2 * a.parts.len() - 1
            ),
        });
    }
    Ok(())
}

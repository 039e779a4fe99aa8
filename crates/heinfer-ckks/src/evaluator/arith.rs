//! Addition, subtraction, negation and multiplication by plaintexts and constants.
//!
//! Constants use the scalar fast path (nGraph-HE2 §3.1.1): a real constant `c` at scale `s` is
//! the one integer `⌊c·s⌉`; multiplying by it multiplies limb `i` by `⌊c·s⌉ mod q_i`, `O(ℓN)`
//! with no polynomial and no NTT. A complex constant `u + iv` multiplies by
//! `u + v·X^{N/2}`, since `X^{N/2}` evaluates to `±i` at every slot's root (CKKS.md).

use super::{same_level, same_scale, scaled_constant, Evaluator};
use crate::ciphertext::{check_scale, Ciphertext, Plaintext};
use crate::error::{CkksError, Result};
use crate::poly::RnsPoly;
use heinfer_math::vecops;
use rayon::prelude::*;

impl Evaluator {
    /// `a + b`.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.binary("add", a, b, false)
    }

    /// `a ← a + b` (same level, same scale; sizes may differ).
    pub fn add_assign(&self, a: &mut Ciphertext, b: &Ciphertext) -> Result<()> {
        self.binary_assign("add", a, b, false)
    }

    /// `a − b`.
    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.binary("sub", a, b, true)
    }

    /// `a ± b` in one pass over memory (no copy of `a` first) when the sizes agree.
    fn binary(
        &self,
        op: &'static str,
        a: &Ciphertext,
        b: &Ciphertext,
        sub: bool,
    ) -> Result<Ciphertext> {
        if a.parts.len() != b.parts.len() {
            let mut r = a.clone();
            self.binary_assign(op, &mut r, b, sub)?;
            return Ok(r);
        }
        self.check_ct(a)?;
        self.check_ct(b)?;
        same_level(op, a.level, b.level)?;
        same_scale(op, a.scale, b.scale)?;
        let inner = self.params.inner();
        let parts = self.map_parts(a, |j, i, out| {
            let (x, y, q) = (a.parts[j].limb(i), b.parts[j].limb(i), inner.moduli[i].q);
            if sub {
                vecops::sub_to_uninit(out, x, y, q)
            } else {
                vecops::add_to_uninit(out, x, y, q)
            }
        });
        Ok(Ciphertext {
            params_id: a.params_id,
            parts,
            level: a.level,
            scale: a.scale,
            seed: None,
        })
    }

    /// `a ← a − b`.
    pub fn sub_assign(&self, a: &mut Ciphertext, b: &Ciphertext) -> Result<()> {
        self.binary_assign("sub", a, b, true)
    }

    fn binary_assign(
        &self,
        op: &'static str,
        a: &mut Ciphertext,
        b: &Ciphertext,
        sub: bool,
    ) -> Result<()> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        same_level(op, a.level, b.level)?;
        same_scale(op, a.scale, b.scale)?;
        let n = self.params.n();
        let level = a.level;
        while a.parts.len() < b.parts.len() {
            a.parts.push(crate::poly::RnsPoly::zero(n, level + 1));
        }
        let inner = self.params.inner();
        for (pa, pb) in a.parts_mut().iter_mut().zip(&b.parts) {
            pa.data
                .par_chunks_mut(n)
                .zip(pb.data.par_chunks(n))
                .enumerate()
                .for_each(|(i, (x, y))| {
                    if sub {
                        vecops::sub_assign(x, y, inner.moduli[i].q)
                    } else {
                        vecops::add_assign(x, y, inner.moduli[i].q)
                    }
                });
        }
        Ok(())
    }

    /// `−a`.
    pub fn neg(&self, a: &Ciphertext) -> Result<Ciphertext> {
        let mut r = a.clone();
        self.neg_assign(&mut r)?;
        Ok(r)
    }

    /// `a ← −a`.
    pub fn neg_assign(&self, a: &mut Ciphertext) -> Result<()> {
        self.check_ct(a)?;
        let n = self.params.n();
        let inner = self.params.inner();
        for p in a.parts_mut() {
            p.data
                .par_chunks_mut(n)
                .enumerate()
                .for_each(|(i, x)| vecops::neg_assign(x, inner.moduli[i].q));
        }
        Ok(())
    }

    /// `ct + pt` (plaintext at the ciphertext's level or above, same scale).
    pub fn add_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext> {
        let mut r = ct.clone();
        self.add_plain_assign(&mut r, pt)?;
        Ok(r)
    }

    /// `ct ← ct + pt`.
    pub fn add_plain_assign(&self, ct: &mut Ciphertext, pt: &Plaintext) -> Result<()> {
        self.plain_additive_assign("add_plain", ct, pt, false)
    }

    /// `ct − pt`.
    pub fn sub_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext> {
        let mut r = ct.clone();
        self.sub_plain_assign(&mut r, pt)?;
        Ok(r)
    }

    /// `ct ← ct − pt`.
    pub fn sub_plain_assign(&self, ct: &mut Ciphertext, pt: &Plaintext) -> Result<()> {
        self.plain_additive_assign("sub_plain", ct, pt, true)
    }

    fn plain_additive_assign(
        &self,
        op: &'static str,
        ct: &mut Ciphertext,
        pt: &Plaintext,
        sub: bool,
    ) -> Result<()> {
        self.plain_prologue(op, ct, pt)?;
        same_scale(op, ct.scale, pt.scale)?;
        let n = self.params.n();
        let inner = self.params.inner();
        ct.parts_mut()[0]
            .data
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, x)| {
                if sub {
                    vecops::sub_assign(x, pt.poly.limb(i), inner.moduli[i].q)
                } else {
                    vecops::add_assign(x, pt.poly.limb(i), inner.moduli[i].q)
                }
            });
        Ok(())
    }

    /// New parts shaped like `ct`'s: limb `i` of part `j` is written by `f(j, i, out)`, which
    /// must write every word of `out` (one pass over memory, no zero-fill or copy first).
    fn map_parts<F>(&self, ct: &Ciphertext, f: F) -> Vec<RnsPoly>
    where
        F: Fn(usize, usize, &mut [std::mem::MaybeUninit<u64>]) + Sync + Send,
    {
        let n = self.params.n();
        (0..ct.parts.len())
            .map(|j| {
                RnsPoly::from_data(
                    vecops::build_limbs(ct.level + 1, n, |i, out| f(j, i, out)),
                    n,
                )
            })
            .collect()
    }

    fn plain_prologue(&self, op: &'static str, ct: &Ciphertext, pt: &Plaintext) -> Result<()> {
        self.check_ct(ct)?;
        self.check_pt(pt)?;
        if pt.level < ct.level {
            return Err(CkksError::LevelTooLow {
                op,
                level: pt.level,
                needed: ct.level,
            });
        }
        Ok(())
    }

    /// `ct · pt` (no rescale); the result's scale is the product of the scales.
    pub fn mul_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext> {
        self.plain_prologue("mul_plain", ct, pt)?;
        let scale = ct.scale * pt.scale;
        self.check_product_scale(scale, ct.level)?;
        let inner = self.params.inner();
        let parts = self.map_parts(ct, |j, i, out| {
            vecops::mul_to_uninit(out, ct.parts[j].limb(i), pt.poly.limb(i), &inner.barrett[i])
        });
        Ok(Ciphertext {
            params_id: ct.params_id,
            parts,
            level: ct.level,
            scale,
            seed: None,
        })
    }

    /// `ct ← ct · pt`.
    pub fn mul_plain_assign(&self, ct: &mut Ciphertext, pt: &Plaintext) -> Result<()> {
        self.plain_prologue("mul_plain", ct, pt)?;
        let scale = ct.scale * pt.scale;
        self.check_product_scale(scale, ct.level)?;
        let n = self.params.n();
        let inner = self.params.inner();
        for p in ct.parts_mut() {
            p.data.par_chunks_mut(n).enumerate().for_each(|(i, x)| {
                vecops::mul_assign(x, pt.poly.limb(i), &inner.barrett[i]);
            });
        }
        ct.scale = scale;
        Ok(())
    }

    /// `ct · c` for a real constant `c` encoded at `const_scale` (scalar fast path). The result's
    /// scale is `ct.scale · const_scale`. After a rescale by `q_ℓ` it is
    /// `ct.scale · const_scale / q_ℓ`: `const_scale = q_ℓ` keeps `ct.scale` exactly, while
    /// `const_scale = ct.scale` matches a rescaled ciphertext–ciphertext product (both become
    /// `Δ²/q_ℓ`) — pick the one matching what the result is added to.
    pub fn mul_const(&self, ct: &Ciphertext, c: f64, const_scale: f64) -> Result<Ciphertext> {
        self.check_ct(ct)?;
        check_scale(const_scale)?;
        let v = scaled_constant(c, const_scale)?;
        let scale = ct.scale * const_scale;
        self.check_product_scale(scale, ct.level)?;
        let inner = self.params.inner();
        let parts = self.map_parts(ct, |j, i, out| {
            let m = &inner.moduli[i];
            let w = m.reduce_i128(v);
            vecops::mul_scalar_to_uninit(out, ct.parts[j].limb(i), w, m.shoup(w), m)
        });
        Ok(Ciphertext {
            params_id: ct.params_id,
            parts,
            level: ct.level,
            scale,
            seed: None,
        })
    }

    /// `ct ← ct · c` (see [`Self::mul_const`]).
    pub fn mul_const_assign(&self, ct: &mut Ciphertext, c: f64, const_scale: f64) -> Result<()> {
        self.check_ct(ct)?;
        check_scale(const_scale)?;
        let v = scaled_constant(c, const_scale)?;
        let scale = ct.scale * const_scale;
        self.check_product_scale(scale, ct.level)?;
        let n = self.params.n();
        let inner = self.params.inner();
        for p in ct.parts_mut() {
            p.data.par_chunks_mut(n).enumerate().for_each(|(i, x)| {
                let m = &inner.moduli[i];
                let w = m.reduce_i128(v);
                vecops::mul_scalar_assign(x, w, m.shoup(w), m);
            });
        }
        ct.scale = scale;
        Ok(())
    }

    /// `ct · (re + i·im)` for a complex constant at `const_scale`: `u·ct + v·X^{N/2}·ct`.
    pub fn mul_const_complex(
        &self,
        ct: &Ciphertext,
        re: f64,
        im: f64,
        const_scale: f64,
    ) -> Result<Ciphertext> {
        self.check_ct(ct)?;
        check_scale(const_scale)?;
        let (u, v) = (
            scaled_constant(re, const_scale)?,
            scaled_constant(im, const_scale)?,
        );
        let scale = ct.scale * const_scale;
        self.check_product_scale(scale, ct.level)?;
        let n = self.params.n();
        let inner = self.params.inner();
        let mut r = ct.clone();
        for p in r.parts_mut() {
            p.data.par_chunks_mut(n).enumerate().for_each(|(i, x)| {
                let m = &inner.moduli[i];
                let (uq, vq) = (m.reduce_i128(u), m.reduce_i128(v));
                // w_j = u + v·(X^{N/2})_j, then x ← x ⊙ w
                let mut w = inner.x_half_ntt[i].clone();
                vecops::mul_scalar_assign(&mut w, vq, m.shoup(vq), m);
                vecops::add_scalar_assign(&mut w, uq, m.q);
                vecops::mul_assign(x, &w, &inner.barrett[i]);
            });
        }
        r.scale = scale;
        Ok(r)
    }

    /// `ct + c` for a real constant (added to every slot at the ciphertext's scale).
    pub fn add_const(&self, ct: &Ciphertext, c: f64) -> Result<Ciphertext> {
        self.add_const_complex(ct, c, 0.0)
    }

    /// `ct + (re + i·im)` in every slot.
    pub fn add_const_complex(&self, ct: &Ciphertext, re: f64, im: f64) -> Result<Ciphertext> {
        let mut r = ct.clone();
        self.add_const_complex_assign(&mut r, re, im)?;
        Ok(r)
    }

    /// `ct ← ct + c` for a real constant.
    pub fn add_const_assign(&self, ct: &mut Ciphertext, c: f64) -> Result<()> {
        self.add_const_complex_assign(ct, c, 0.0)
    }

    /// `ct ← ct + (re + i·im)` in every slot.
    pub fn add_const_complex_assign(&self, ct: &mut Ciphertext, re: f64, im: f64) -> Result<()> {
        self.check_ct(ct)?;
        let (u, v) = (
            self.added_constant(re, ct.scale, ct.level)?,
            self.added_constant(im, ct.scale, ct.level)?,
        );
        let n = self.params.n();
        let inner = self.params.inner();
        ct.parts_mut()[0]
            .data
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, x)| {
                let m = &inner.moduli[i];
                let (uq, vq) = (m.reduce_i128(u), m.reduce_i128(v));
                if vq != 0 {
                    vecops::mul_scalar_add_assign(x, &inner.x_half_ntt[i], vq, m.shoup(vq), m);
                }
                vecops::add_scalar_assign(x, uq, m.q);
            });
        Ok(())
    }
}

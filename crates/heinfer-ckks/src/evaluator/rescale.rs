//! Rescaling and level dropping.
//!
//! `Rescale(c) = ⌊c / q_ℓ⌉ mod Q_{ℓ−1}` computed limb-wise: with `r` the residue modulo `q_ℓ`
//! centered to `(−q_ℓ/2, q_ℓ/2]`, `c_i ← (c_i − r)·q_ℓ^{-1} mod q_i`. The scale becomes
//! `scale / q_ℓ` (tracked exactly in f64).

use super::Evaluator;
use crate::ciphertext::{check_scale, Ciphertext};
use crate::error::{CkksError, Result};
use heinfer_math::vecops;
use rayon::prelude::*;

impl Evaluator {
    /// Divides by the last prime `q_ℓ` with rounding and drops it.
    pub fn rescale(&self, ct: &Ciphertext) -> Result<Ciphertext> {
        let mut r = ct.clone();
        self.rescale_assign(&mut r)?;
        Ok(r)
    }

    /// In-place [`Self::rescale`].
    pub fn rescale_assign(&self, ct: &mut Ciphertext) -> Result<()> {
        let scale = self.rescaled_scale(ct)?;
        self.rescale_unchecked(ct, scale);
        Ok(())
    }

    /// [`Self::rescale_assign`] on each ciphertext, in parallel across them: one ciphertext
    /// at a low level has too few limbs to keep every core busy (a layer's outputs are
    /// rescaled together). Every ciphertext is checked before any changes, so on an error
    /// none is rescaled. Bit-identical to calling [`Self::rescale_assign`] on each.
    pub fn rescale_many_assign(&self, cts: &mut [&mut Ciphertext]) -> Result<()> {
        let scales = cts
            .iter()
            .map(|c| self.rescaled_scale(c))
            .collect::<Result<Vec<f64>>>()?;
        cts.par_iter_mut()
            .zip(scales.par_iter())
            .for_each(|(c, &s)| self.rescale_unchecked(c, s));
        Ok(())
    }

    /// The scale of `ct` after a rescale, refusing a ciphertext that cannot be rescaled.
    fn rescaled_scale(&self, ct: &Ciphertext) -> Result<f64> {
        self.check_ct(ct)?;
        let level = ct.level;
        if level == 0 {
            return Err(CkksError::LevelTooLow {
                op: "rescale",
                level,
                needed: 1,
            });
        }
        let scale = ct.scale / self.params.inner().q[level] as f64;
        check_scale(scale)?;
        Ok(scale)
    }

    /// The rescale of a ciphertext [`Self::rescaled_scale`] accepted, to `scale`.
    fn rescale_unchecked(&self, ct: &mut Ciphertext, scale: f64) {
        let level = ct.level;
        let inner = self.params.inner();
        let n = self.params.n();
        let ql = inner.q[level];
        let half = ql / 2;
        for p in ct.parts_mut() {
            let mut last = p.limb(level).to_vec();
            inner.ntt[level].inverse(&mut last);
            // shift by ⌊q_ℓ/2⌋ so that subtracting it afterwards centers the residue
            vecops::add_scalar_assign(&mut last, half, ql);
            p.truncate(level);
            p.data.par_chunks_mut(n).enumerate().for_each(|(i, x)| {
                let m = &inner.moduli[i];
                let mut r = crate::scratch::take(n);
                r.copy_from_slice(&last);
                // Shoup multiplication by 1 reduces any 64-bit word modulo q_i
                vecops::mul_scalar_assign(&mut r, 1, m.shoup(1), m);
                let h = inner.rescale_half[level][i];
                vecops::add_scalar_assign(&mut r, m.q - h, m.q);
                inner.ntt[i].forward(&mut r);
                vecops::sub_assign(x, &r, m.q);
                let (w, ws) = inner.rescale_inv[level][i];
                vecops::mul_scalar_assign(x, w, ws, m);
                crate::scratch::give(r);
            });
        }
        ct.level = level - 1;
        ct.scale = scale;
    }

    /// Drops the last `levels` primes without scaling (the message and scale are unchanged).
    pub fn drop_level(&self, ct: &Ciphertext, levels: usize) -> Result<Ciphertext> {
        self.check_ct(ct)?;
        if levels > ct.level {
            return Err(CkksError::LevelTooLow {
                op: "drop_level",
                level: ct.level,
                needed: levels,
            });
        }
        let mut r = ct.clone();
        let new_level = ct.level - levels;
        for p in r.parts_mut() {
            p.truncate(new_level + 1);
        }
        r.level = new_level;
        Ok(r)
    }

    /// Drops levels until `ct` is at `level`.
    pub fn drop_to_level(&self, ct: &Ciphertext, level: usize) -> Result<Ciphertext> {
        if level > ct.level {
            return Err(CkksError::LevelTooLow {
                op: "drop_to_level",
                level: ct.level,
                needed: level,
            });
        }
        self.drop_level(ct, ct.level - level)
    }
}

//! Rescaling and level dropping.
//!
//! `Rescale(c) = ⌊c / q_ℓ⌉ mod Q_{ℓ−1}` computed limb-wise: with `r` the residue modulo `q_ℓ`
//! centered to `(−q_ℓ/2, q_ℓ/2]`, `c_i ← (c_i − r)·q_ℓ^{-1} mod q_i`. The scale becomes
//! `scale / q_ℓ` (tracked exactly in f64).

use super::Evaluator;
use crate::ciphertext::{check_scale, Ciphertext};
use crate::error::{CkksError, Result};
use crate::poly::RnsPoly;
use heinfer_math::rns::BasisConverter;
use heinfer_math::vecops;
use rayon::prelude::*;

/// What a rescale by several primes needs: the conversion of the centred residue modulo
/// their product `D` to the remaining primes, and `[D^{-1}]_{q_i}` (with Shoup companions).
struct RescaleBy {
    conv: BasisConverter,
    d_inv: Vec<(u64, u64)>,
}

impl Evaluator {
    /// Divides by the last prime `q_ℓ` with rounding and drops it.
    pub fn rescale(&self, ct: &Ciphertext) -> Result<Ciphertext> {
        let scale = self.rescaled_scale(ct)?;
        let (level, n) = (ct.level, self.params.n());
        // only the limbs that stay are copied (a clone would copy the dropped one too)
        let parts = ct
            .parts
            .iter()
            .map(|p| {
                let mut head = p.data[..level * n].to_vec();
                let mut last = crate::scratch::take(n);
                last.copy_from_slice(p.limb(level));
                self.rescale_limbs(&mut head, &mut last, level);
                crate::scratch::give(last);
                RnsPoly::from_data(head, n)
            })
            .collect();
        Ok(Ciphertext {
            params_id: ct.params_id,
            parts,
            level: level - 1,
            scale,
            seed: None,
        })
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
        let n = self.params.n();
        for p in ct.parts_mut() {
            // the dropped limb is worked on where it is (it goes with the truncation)
            let (head, last) = p.data.split_at_mut(level * n);
            self.rescale_limbs(head, &mut last[..n], level);
            p.truncate(level);
        }
        ct.level = level - 1;
        ct.scale = scale;
    }

    /// One polynomial's rescale: `head` (its limbs `0..ℓ`, NTT form) becomes
    /// `(head_i − r)·q_ℓ^{-1}` limb by limb, `r` the residue of `last` (its limb `ℓ`, NTT
    /// form; overwritten: the caller drops it or passes a copy) centred to
    /// `(−q_ℓ/2, q_ℓ/2]`. Per limb: one pass reducing `r` modulo `q_i`, one adding the
    /// centring constant, a forward NTT and one pass for the subtraction and product together.
    fn rescale_limbs(&self, head: &mut [u64], last: &mut [u64], level: usize) {
        let inner = self.params.inner();
        let n = self.params.n();
        let ql = inner.q[level];
        let c = last;
        inner.ntt[level].inverse(c);
        // shift by ⌊q_ℓ/2⌋ so that subtracting it afterwards centers the residue
        vecops::add_scalar_assign(c, ql / 2, ql);
        let c: &[u64] = c;
        head.par_chunks_mut(n).enumerate().for_each(|(i, x)| {
            let m = &inner.moduli[i];
            let mut r = crate::scratch::take(n);
            // r = c mod q_i in one pass from c (a Shoup product by 1 reduces any 64-bit word)
            vecops::mul_scalar_sum_into(&mut r, &[c], &[(1, m.shoup(1))], m);
            let h = inner.rescale_half[level][i];
            vecops::add_scalar_assign(&mut r, m.q - h, m.q);
            inner.ntt[i].forward(&mut r);
            // (x − r)·q_ℓ^{-1} in one pass
            let (w, ws) = inner.rescale_inv[level][i];
            vecops::sub_mul_scalar_assign(x, &r, w, ws, m);
            crate::scratch::give(r);
        });
    }

    /// Divides by the last `k` primes `D = q_ℓ·…·q_{ℓ−k+1}` at once, with rounding, and drops
    /// them: `⌊c/D⌉` exactly (the centred residue `[c]_D` converted to the remaining primes,
    /// as ModDown divides by `P`), where `k` rescales in a row give `⌊⌊c/q_ℓ⌉/q_{ℓ−1}⌉…`,
    /// which differs by at most 1 per coefficient (their roundings before the last one move
    /// the quotient by less than 1 in all), and only with a chance of about `1/q_{ℓ−1}` per
    /// coefficient. The scale is divided by each prime in
    /// turn, as `k` rescales would. Transforms per polynomial: `k` inverse and `ℓ+1−k` forward
    /// NTTs, against `k + Σ_t (ℓ+1−t)` for `k` rescales (6 against 11 at `ℓ = 5, k = 2`).
    /// `k = 1` is [`Self::rescale_assign`].
    pub fn rescale_by_assign(&self, ct: &mut Ciphertext, k: usize) -> Result<()> {
        let scale = self.rescaled_scale_by(ct, k)?;
        match self.rescale_converter(ct.level, k) {
            None => self.rescale_unchecked(ct, scale),
            Some(conv) => self.rescale_by_unchecked(ct, k, &conv, scale),
        }
        Ok(())
    }

    /// [`Self::rescale_by_assign`] on each ciphertext, in parallel across them (one conversion
    /// table per level present). Every ciphertext is checked before any changes, so on an error none is rescaled.
    pub fn rescale_by_many_assign(&self, cts: &mut [&mut Ciphertext], k: usize) -> Result<()> {
        let scales = cts
            .iter()
            .map(|c| self.rescaled_scale_by(c, k))
            .collect::<Result<Vec<f64>>>()?;
        let mut convs = std::collections::HashMap::new();
        for c in cts.iter() {
            convs
                .entry(c.level)
                .or_insert_with(|| self.rescale_converter(c.level, k));
        }
        cts.par_iter_mut()
            .zip(scales.par_iter())
            .for_each(|(c, &s)| match &convs[&c.level] {
                None => self.rescale_unchecked(c, s),
                Some(conv) => self.rescale_by_unchecked(c, k, conv, s),
            });
        Ok(())
    }

    /// The scale of `ct` after `k` rescales, refusing a ciphertext that cannot take them.
    fn rescaled_scale_by(&self, ct: &Ciphertext, k: usize) -> Result<f64> {
        if k == 0 {
            return Err(CkksError::InvalidOperand {
                op: "rescale",
                reason: "a rescale by zero primes".into(),
            });
        }
        self.check_ct(ct)?;
        if ct.level < k {
            return Err(CkksError::LevelTooLow {
                op: "rescale",
                level: ct.level,
                needed: k,
            });
        }
        let q = &self.params.inner().q;
        let mut scale = ct.scale;
        for t in 0..k {
            scale /= q[ct.level - t] as f64;
            check_scale(scale)?;
        }
        Ok(scale)
    }

    /// The conversion from the last `k` primes of level `level` to the others, and
    /// `[D^{-1}]_{q_i}` for each of those (none for `k = 1`, which the one-prime rescale does).
    fn rescale_converter(&self, level: usize, k: usize) -> Option<RescaleBy> {
        if k < 2 {
            return None;
        }
        let moduli = &self.params.inner().moduli;
        let (keep, drop) = moduli[..=level].split_at(level + 1 - k);
        let d_inv = keep
            .iter()
            .map(|m| {
                let d = drop.iter().fold(1u64, |acc, p| m.mul(acc, p.q % m.q));
                let inv = m.inv(d);
                (inv, m.shoup(inv))
            })
            .collect();
        Some(RescaleBy {
            conv: BasisConverter::new(drop, keep),
            d_inv,
        })
    }

    /// The rescale by `k ≥ 2` primes of a ciphertext [`Self::rescaled_scale_by`] accepted.
    fn rescale_by_unchecked(&self, ct: &mut Ciphertext, k: usize, by: &RescaleBy, scale: f64) {
        let level = ct.level;
        let inner = self.params.inner();
        let n = self.params.n();
        let keep = level + 1 - k;
        for p in ct.parts_mut() {
            let mut last = crate::scratch::take(k * n);
            last.copy_from_slice(&p.data[keep * n..(level + 1) * n]);
            for (t, limb) in last.chunks_mut(n).enumerate() {
                inner.ntt[keep + t].inverse(limb);
            }
            let mut conv = crate::scratch::take(keep * n);
            let mut scratch = crate::scratch::take((k + 1) * n);
            by.conv.convert_centered(&last, &mut conv, &mut scratch, n);
            p.truncate(keep);
            p.data
                .par_chunks_mut(n)
                .zip(conv.par_chunks_mut(n))
                .enumerate()
                .for_each(|(i, (x, c))| {
                    let m = &inner.moduli[i];
                    inner.ntt[i].forward(c);
                    let (w, ws) = by.d_inv[i];
                    vecops::sub_mul_scalar_assign(x, c, w, ws, m);
                });
            crate::scratch::give(last);
            crate::scratch::give(conv);
            crate::scratch::give(scratch);
        }
        ct.level = level - k;
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
        // only the limbs that stay are copied (a clone would copy the dropped ones too); the
        // seed goes: it expands to `c_1` at every prime, not at the ones kept
        let new_level = ct.level - levels;
        let kept = (new_level + 1) * self.params.n();
        Ok(Ciphertext {
            params_id: ct.params_id,
            parts: ct
                .parts
                .iter()
                .map(|p| RnsPoly::from_data(p.data[..kept].to_vec(), self.params.n()))
                .collect(),
            level: new_level,
            scale: ct.scale,
            seed: None,
        })
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

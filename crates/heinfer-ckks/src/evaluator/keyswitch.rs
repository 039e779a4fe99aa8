//! Hybrid key switching (GHS / Han–Ki, as in SEAL, OpenFHE and Lattigo).
//!
//! To switch `d·s′` to `s` at level `ℓ`:
//!
//! 1. **ModUp** (decompose): split the primes of `Q_ℓ` into digits `Q_j` of `α` primes; for each
//!    digit, take `[d]_{Q_j}` in coefficient form and extend it to `Q_ℓ ∪ P` by fast basis
//!    conversion: `D_j = [d]_{Q_j} + u·Q_j`. Limbs of the digit itself are reused in NTT form.
//! 2. **Inner product**: `(a_0, a_1) = Σ_j D_j · swk_j` over `Q_ℓ ∪ P`; since the gadget
//!    vanishes outside digit `j` and equals `P` on it, `a_0 + a_1·s ≈ P·d·s′`.
//! 3. **ModDown**: divide by `P`: `(x − Conv_{P→Q}([x]_P))·P^{-1}` on each limb of `Q_ℓ`.
//!
//! Hoisting (GAZELLE Appendix A; Halevi–Shoup) keeps step 1 and repeats 2–3 per Galois key.

use super::Evaluator;
use crate::keys::SwitchingKey;
use crate::poly::{modulus_index, RnsPoly};
use heinfer_math::vecops;
use rayon::prelude::*;

/// The ModUp decomposition of one polynomial: `β` digits over `Q_ℓ ∪ P`, NTT form.
pub(crate) struct Decomposed {
    pub level: usize,
    pub digits: Vec<RnsPoly>,
}

impl Evaluator {
    /// ModUp of `c` (NTT form, `ℓ+1` limbs).
    pub(crate) fn decompose(&self, c: &RnsPoly, level: usize) -> Decomposed {
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let alpha = params.alpha();
        let k = params.p().len();
        let mut coeff = RnsPoly::from_data(c.data[..(level + 1) * n].to_vec(), n);
        crate::poly::ntt_inverse(params, &mut coeff, level);
        let beta = params.beta_at(level);
        let digits = (0..beta)
            .into_par_iter()
            .map(|j| {
                let lo = j * alpha;
                let hi = ((j + 1) * alpha).min(level + 1);
                let conv = &inner.modup[level][j];
                let others = level + 1 - (hi - lo) + k;
                let mut ext = vec![0u64; others * n];
                let mut scratch = vec![0u64; (hi - lo) * n];
                conv.convert(&coeff.data[lo * n..hi * n], &mut ext, &mut scratch, n);
                let mut d = RnsPoly::zero(n, level + 1 + k);
                // limb order of `ext`: Q_ℓ without the digit, then P
                let targets: Vec<usize> = (0..level + 1 + k).filter(|i| *i < lo || *i >= hi).collect();
                let src = &ext;
                d.data.par_chunks_mut(n).enumerate().for_each(|(i, limb)| {
                    if i >= lo && i < hi {
                        limb.copy_from_slice(c.limb(i));
                    } else {
                        let t = targets.iter().position(|&x| x == i).expect("target limb");
                        limb.copy_from_slice(&src[t * n..(t + 1) * n]);
                        inner.ntt[modulus_index(params, level, i)].forward(limb);
                    }
                });
                d
            })
            .collect();
        Decomposed { level, digits }
    }

    /// `(Σ_j D_j·b_j, Σ_j D_j·a_j)` over `Q_ℓ ∪ P` (NTT form).
    pub(crate) fn inner_product(&self, dec: &Decomposed, key: &SwitchingKey) -> (RnsPoly, RnsPoly) {
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let level = dec.level;
        let limbs = level + 1 + params.p().len();
        let mut acc0 = RnsPoly::zero(n, limbs);
        let mut acc1 = RnsPoly::zero(n, limbs);
        acc0.data.par_chunks_mut(n).zip(acc1.data.par_chunks_mut(n)).enumerate().for_each(|(i, (l0, l1))| {
            let mi = modulus_index(params, level, i);
            let b = &inner.barrett[mi];
            for (j, d) in dec.digits.iter().enumerate() {
                vecops::mul_add_assign(l0, d.limb(i), key.b[j].limb(mi), b);
                vecops::mul_add_assign(l1, d.limb(i), key.a[j].limb(mi), b);
            }
        });
        (acc0, acc1)
    }

    /// ModDown: `x ∈ R_{Q_ℓ P}` (NTT) ↦ `⌊x/P⌉ ∈ R_{Q_ℓ}` (NTT), up to `±|P|`.
    pub(crate) fn mod_down(&self, x: &RnsPoly, level: usize) -> RnsPoly {
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let k = params.p().len();
        let mut xp = RnsPoly::from_data(x.data[(level + 1) * n..(level + 1 + k) * n].to_vec(), n);
        let lq = params.q().len();
        xp.data.par_chunks_mut(n).enumerate().for_each(|(t, limb)| inner.ntt[lq + t].inverse(limb));
        let mut conv = vec![0u64; (level + 1) * n];
        let mut scratch = vec![0u64; k * n];
        inner.moddown[level].convert(&xp.data, &mut conv, &mut scratch, n);
        let mut out = RnsPoly::from_data(x.data[..(level + 1) * n].to_vec(), n);
        out.data.par_chunks_mut(n).zip(conv.par_chunks_mut(n)).enumerate().for_each(|(i, (o, c))| {
            inner.ntt[i].forward(c);
            let m = &inner.moduli[i];
            vecops::sub_assign(o, c, m.q);
            let (w, ws) = inner.p_inv_mod_q[i];
            vecops::mul_scalar_assign(o, w, ws, m);
        });
        out
    }

    /// Full key switch of `c` (NTT, level `ℓ`): returns `(k_0, k_1)` with `k_0 + k_1·s ≈ c·s′`.
    pub(crate) fn key_switch(&self, c: &RnsPoly, level: usize, key: &SwitchingKey) -> (RnsPoly, RnsPoly) {
        let dec = self.decompose(c, level);
        let (a0, a1) = self.inner_product(&dec, key);
        rayon::join(|| self.mod_down(&a0, level), || self.mod_down(&a1, level))
    }
}

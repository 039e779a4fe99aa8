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
use crate::compact::{CompactPoly, Words};
use crate::keys::SwitchingKey;
use crate::poly::{modulus_index, RnsPoly};
use crate::scratch;
use heinfer_math::vecops;
use rayon::prelude::*;

/// The ModUp decomposition of one polynomial: `β` digits over `Q_ℓ ∪ P`, NTT form
/// (pooled buffers, returned on drop).
pub(crate) struct Decomposed {
    pub level: usize,
    pub digits: Vec<Vec<u64>>,
}

impl Drop for Decomposed {
    fn drop(&mut self) {
        for d in self.digits.drain(..) {
            scratch::give(d);
        }
    }
}

impl Evaluator {
    /// ModUp of `c` (NTT form, `ℓ+1` limbs).
    pub(crate) fn decompose(&self, c: &RnsPoly, level: usize) -> Decomposed {
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let alpha = params.alpha();
        let k = params.p().len();
        let mut coeff = scratch::take((level + 1) * n);
        // copied limb by limb on the workers (one serial copy of the whole would hold the
        // other threads back)
        coeff.par_chunks_mut(n).enumerate().for_each(|(i, l)| {
            l.copy_from_slice(c.limb(i));
            inner.ntt[i].inverse(l);
        });
        let beta = params.beta_at(level);
        let limbs = level + 1 + k;
        let digits = (0..beta)
            .into_par_iter()
            .map(|j| {
                let lo = j * alpha;
                let hi = ((j + 1) * alpha).min(level + 1);
                let mut d = scratch::take(limbs * n);
                let mut conv_scratch = scratch::take((hi - lo + 1) * n);
                // converted limbs are (Q_ℓ without the digit) ‖ P: written around the digit's
                // own limbs, which are copied in NTT form; balanced (centred) digits
                inner.modup[level][j].convert_balanced_with_gap(
                    &coeff[lo * n..hi * n],
                    &mut d,
                    &mut conv_scratch,
                    n,
                    lo,
                    hi - lo,
                );
                d[lo * n..hi * n].copy_from_slice(&c.data[lo * n..hi * n]);
                scratch::give(conv_scratch);
                d.par_chunks_mut(n).enumerate().for_each(|(i, limb)| {
                    if i < lo || i >= hi {
                        inner.ntt[modulus_index(params, level, i)].forward(limb);
                    }
                });
                d
            })
            .collect();
        scratch::give(coeff);
        Decomposed { level, digits }
    }

    /// `(Σ_j D_j·b_j, Σ_j D_j·a_j)` over `Q_ℓ ∪ P` (NTT form).
    pub(crate) fn inner_product(
        &self,
        dec: &Decomposed,
        key: &SwitchingKey,
    ) -> (Vec<u64>, Vec<u64>) {
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let level = dec.level;
        let limbs = level + 1 + params.p().len();
        let mut acc0 = scratch::take(limbs * n);
        let mut acc1 = scratch::take(limbs * n);
        acc0.par_chunks_mut(n)
            .zip(acc1.par_chunks_mut(n))
            .enumerate()
            .for_each(|(i, (l0, l1))| {
                let mi = modulus_index(params, level, i);
                let d: Vec<&[u64]> = dec.digits.iter().map(|d| &d[i * n..(i + 1) * n]).collect();
                key_dot(l0, l1, &d, key, mi, &inner.barrett[mi]);
            });
        (acc0, acc1)
    }

    /// ModUp and inner product fused, limb by limb: `(Σ_j D_j·b_j, Σ_j D_j·a_j)` over
    /// `Q_ℓ ∪ P` (NTT form), bit-identical to [`Self::decompose`] + [`Self::inner_product`].
    ///
    /// For each output limb, the `β` digit limbs `D_j` are converted and transformed into a
    /// scratch of `β·N` words (cache-resident) and consumed at once by the inner product,
    /// instead of writing all `β·(ℓ+1+k)` digit limbs to memory and reading them back. Used when
    /// the decomposition is not shared (plain key switching and rotation; hoisting keeps
    /// [`Self::decompose`]).
    pub(crate) fn modup_inner_product(
        &self,
        c: &RnsPoly,
        level: usize,
        key: &SwitchingKey,
    ) -> (Vec<u64>, Vec<u64>) {
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let alpha = params.alpha();
        let beta = params.beta_at(level);
        let limbs = level + 1 + params.p().len();
        let digit = |j: usize| (j * alpha, ((j + 1) * alpha).min(level + 1));
        // coefficient form, each limb scaled by [(Q_j/q_i)^{-1}]_{q_i} for its digit j
        let mut coeff = scratch::take((level + 1) * n);
        coeff.par_chunks_mut(n).enumerate().for_each(|(i, l)| {
            l.copy_from_slice(c.limb(i));
            inner.ntt[i].inverse(l);
            let j = i / alpha;
            inner.modup[level][j].scale_input(i - digit(j).0, l);
        });
        // each balanced digit's correction (see heinfer_math::rns); none is allocated when no
        // digit balances (e.g. two special primes of 50 bits), and the others' is not read
        let balances = |j: usize| inner.modup[level][j].balances();
        let mut centers = if (0..beta).any(balances) {
            scratch::take(beta * n)
        } else {
            Vec::new()
        };
        centers.par_chunks_mut(n).enumerate().for_each(|(j, c)| {
            let (lo, hi) = digit(j);
            if balances(j) {
                inner.modup[level][j].balance(&coeff[lo * n..hi * n], c, n);
            }
        });
        let mut acc0 = scratch::take(limbs * n);
        let mut acc1 = scratch::take(limbs * n);
        acc0.par_chunks_mut(n)
            .zip(acc1.par_chunks_mut(n))
            .enumerate()
            .for_each(|(i, (l0, l1))| {
                let mi = modulus_index(params, level, i);
                let mut tmp = scratch::take(beta * n);
                for (j, t) in tmp.chunks_mut(n).enumerate() {
                    let (lo, hi) = digit(j);
                    if i < lo || i >= hi {
                        // target index of limb i in the digit's converter: (Q_ℓ \ Q_j) ‖ P
                        let target = if i < lo { i } else { i - (hi - lo) };
                        inner.modup[level][j].convert_one_balanced(
                            &coeff[lo * n..hi * n],
                            centers.get(j * n..(j + 1) * n).unwrap_or(&[]),
                            target,
                            t,
                            n,
                        );
                        inner.ntt[mi].forward(t);
                    }
                }
                let d: Vec<&[u64]> = (0..beta)
                    .map(|j| {
                        let (lo, hi) = digit(j);
                        if i < lo || i >= hi {
                            &tmp[j * n..(j + 1) * n]
                        } else {
                            &c.data[i * n..(i + 1) * n]
                        }
                    })
                    .collect();
                key_dot(l0, l1, &d, key, mi, &inner.barrett[mi]);
                drop(d);
                scratch::give(tmp);
            });
        scratch::give(coeff);
        scratch::give(centers);
        (acc0, acc1)
    }

    /// ModDown: `x ∈ R_{Q_ℓ P}` (NTT, consumed) ↦ `⌊x/P⌉ ∈ R_{Q_ℓ}` (NTT), up to `±|P|`.
    pub(crate) fn mod_down(&self, x: Vec<u64>, level: usize) -> RnsPoly {
        mod_down(&self.params, x, level, None)
    }

    /// Full key switch of `c` (NTT, level `ℓ`): returns `(k_0, k_1)` with `k_0 + k_1·s ≈ c·s′`.
    pub(crate) fn key_switch(
        &self,
        c: &RnsPoly,
        level: usize,
        key: &SwitchingKey,
    ) -> (RnsPoly, RnsPoly) {
        let (a0, a1) = self.modup_inner_product(c, level, key);
        rayon::join(|| self.mod_down(a0, level), || self.mod_down(a1, level))
    }
}

/// `acc0 = Σ_j d_j·b_j`, `acc1 = Σ_j d_j·a_j` modulo the prime `mi` over the first
/// `d.len()` digits of `key`: one pass over the digits when the key keeps that limb in 64-bit
/// words ([`heinfer_math::dot::dot2`]); for a limb in 32-bit words (a prime below `2^32`), one
/// pass per key half reading those words as they are ([`heinfer_math::dot::dot1_narrow`]).
fn key_dot(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[u64]],
    key: &SwitchingKey,
    mi: usize,
    bc: &vecops::BarrettConst,
) {
    let (b, a) = (&key.b[..d.len()], &key.a[..d.len()]);
    if matches!(b[0].words(mi), Words::Wide(_)) {
        heinfer_math::dot::dot2(acc0, acc1, d, &wide(b, mi), &wide(a, mi), bc);
    } else {
        heinfer_math::dot::dot1_narrow(acc0, d, &narrow(b, mi), bc);
        heinfer_math::dot::dot1_narrow(acc1, d, &narrow(a, mi), bc);
    }
}

/// Limb `mi` of each of `polys`, all kept in 64-bit words (every polynomial of a key shares
/// one layout).
fn wide(polys: &[CompactPoly], mi: usize) -> Vec<&[u64]> {
    polys
        .iter()
        .map(|k| match k.words(mi) {
            Words::Wide(v) => v,
            Words::Narrow(_) => unreachable!("a key's polynomials share one layout"),
        })
        .collect()
}

/// Limb `mi` of each of `polys`, all kept in 32-bit words, as [`wide`].
fn narrow(polys: &[CompactPoly], mi: usize) -> Vec<&[u32]> {
    polys
        .iter()
        .map(|k| match k.words(mi) {
            Words::Narrow(v) => v,
            Words::Wide(_) => unreachable!("a key's polynomials share one layout"),
        })
        .collect()
}

/// ModDown: `x ∈ R_{Q_ℓ P}` (NTT, consumed) ↦ `⌊x/P⌉ ∈ R_{Q_ℓ}` (NTT), up to `±|P|`.
///
/// With `error = Some(e)` (public-key encryption: `x = b·u` or `a·u`, secret-derived) every
/// temporary and the `P` limbs of `x` are zeroed before they are freed or pooled; only the
/// result, a ciphertext component, is kept.
///
/// With `error = Some(e)` it returns `⌊(x + e)/P⌉` for a small signed polynomial `e` given in
/// coefficient form, at no extra transform: `e` is added to the P residues after their inverse
/// NTT and subtracted from the converted value before its forward NTT, since
/// `(x_Q + e) − Conv([x_P + e]_P) = x_Q − (Conv([x_P + e]_P) − e)`.
pub(crate) fn mod_down(
    params: &crate::params::CkksParams,
    mut x: Vec<u64>,
    level: usize,
    error: Option<&[i64]>,
) -> RnsPoly {
    let inner = params.inner();
    let n = params.n();
    let k = params.p().len();
    let lq = params.q().len();
    let qn = (level + 1) * n;
    x[qn..qn + k * n]
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(t, limb)| {
            inner.ntt[lq + t].inverse(limb);
            if let Some(e) = error {
                add_small(limb, e, inner.moduli[lq + t].q);
            }
        });
    // the exact centered residue r = [x]_P ∈ (−P/2, P/2]: x − r is divisible by P and
    // (x − r)/P = ⌊x/P⌉ exactly (a fast conversion would add u·P, u < k, i.e. a biased error
    // of up to k − 1 per coefficient, costing ~4 bits at k = 2)
    let mut conv = scratch::take(qn);
    let mut conv_scratch = scratch::take((k + 1) * n);
    inner.moddown[level].convert_centered(&x[qn..qn + k * n], &mut conv, &mut conv_scratch, n);
    let secret = error.is_some();
    if secret {
        scratch::give_secret(conv_scratch);
        zeroize::Zeroize::zeroize(&mut x[qn..]);
    } else {
        scratch::give(conv_scratch);
    }
    x.truncate(qn);
    x.par_chunks_mut(n)
        .zip(conv.par_chunks_mut(n))
        .enumerate()
        .for_each(|(i, (o, c))| {
            let m = &inner.moduli[i];
            if let Some(e) = error {
                sub_small(c, e, m.q);
            }
            inner.ntt[i].forward(c);
            let (w, ws) = inner.p_inv_mod_q[i];
            vecops::sub_mul_scalar_assign(o, c, w, ws, m);
        });
    if secret {
        scratch::give_secret(conv);
    } else {
        scratch::give(conv);
    }
    RnsPoly::from_data(x, n)
}

/// `a ← a + e mod q` for a small signed `e` (`|e| < q`); branch-free so it vectorizes.
fn add_small(a: &mut [u64], e: &[i64], q: u64) {
    for (x, &v) in a.iter_mut().zip(e) {
        // v mod q ∈ [0, q): q + v for negative v
        let t = (v as u64).wrapping_add(q & ((v >> 63) as u64));
        let s = *x + t;
        *x = s.min(s.wrapping_sub(q));
    }
}

/// `a ← a − e mod q` for a small signed `e` (`|e| < q`); branch-free so it vectorizes.
fn sub_small(a: &mut [u64], e: &[i64], q: u64) {
    for (x, &v) in a.iter_mut().zip(e) {
        // −v mod q ∈ [0, q): q − v for positive v, −v otherwise
        let neg = (v.wrapping_neg()) as u64;
        let t = neg.wrapping_add(q & (((-v) >> 63) as u64));
        let s = *x + t;
        *x = s.min(s.wrapping_sub(q));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CkksParams, CkksParamsLiteral, KeyGenerator, SecurityLevel};
    use heinfer_math::sampler::Sampler;

    /// The inner product on a key whose limbs below `2^32` are kept in 32-bit words gives the
    /// bits of `dot2` on the same key in 64-bit words, at every prime (34- and 28-bit) and digit
    /// count.
    #[test]
    fn narrow_key_limbs_give_the_bits_of_the_64_bit_inner_product() {
        let params = CkksParams::new_insecure_for_tests(CkksParamsLiteral {
            log_n: 12,
            log_q: vec![34, 28, 28, 28],
            log_p: vec![34],
            log_scale: 28,
            digits: None,
            security: SecurityLevel::InsecureTestOnly,
        })
        .unwrap();
        let kg = KeyGenerator::new(&params).unwrap();
        let key = kg.galois_key(5).unwrap().key;
        let n = params.n();
        let inner = params.inner();
        let mut os = Sampler::from_os().unwrap();
        let mut narrow_limbs = 0;
        for (mi, m) in params.moduli().iter().enumerate() {
            narrow_limbs += usize::from(m.q >> 32 == 0);
            for digits in 1..=key.digits() {
                let d: Vec<Vec<u64>> = (0..digits)
                    .map(|_| {
                        let mut v = vec![0; n];
                        os.uniform_into(&mut v, m);
                        v
                    })
                    .collect();
                let d: Vec<&[u64]> = d.iter().map(|v| v.as_slice()).collect();
                let (mut got0, mut got1) = (vec![0; n], vec![0; n]);
                key_dot(&mut got0, &mut got1, &d, &key, mi, &inner.barrett[mi]);
                let wb: Vec<RnsPoly> = key.b[..digits].iter().map(|k| k.widen()).collect();
                let wa: Vec<RnsPoly> = key.a[..digits].iter().map(|k| k.widen()).collect();
                let b: Vec<&[u64]> = wb.iter().map(|p| p.limb(mi)).collect();
                let a: Vec<&[u64]> = wa.iter().map(|p| p.limb(mi)).collect();
                let (mut want0, mut want1) = (vec![0; n], vec![0; n]);
                heinfer_math::dot::dot2(&mut want0, &mut want1, &d, &b, &a, &inner.barrett[mi]);
                assert_eq!((got0, got1), (want0, want1), "prime {mi}, {digits} digits");
            }
        }
        assert_eq!(
            narrow_limbs, 3,
            "28-bit primes kept narrow, 34-bit ones wide"
        );
    }
}

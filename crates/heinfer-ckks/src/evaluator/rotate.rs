//! Slot rotations, conjugation and hoisted rotations.
//!
//! A rotation by `k` applies `σ_g`, `g = 5^k mod 2N`, and key-switches `σ_g(c_1)` from
//! `s(X^g)` back to `s`. Galois keys are stored pre-permuted by `σ_g^{-1}`, so with the ModUp
//! digits `D_j` of the *unrotated* `c_1`:
//!
//! ```text
//!   rot_g(c) = σ_g( c_0 + ModDown(Σ_j D_j·K′_{j,0}),  ModDown(Σ_j D_j·K′_{j,1}) ),
//! ```
//!
//! which needs one permutation of two polynomials per rotation. **Hoisting** (GAZELLE Appendix A:
//! one `PermDecomp`, many `PermAuto`) computes the `D_j` once for all rotations of the same
//! ciphertext. The *extended* variant also skips ModDown and returns `P·rot_g(c)` over
//! `Q_ℓ ∪ P`, so a sum of rotated products pays a single ModDown (double hoisting, for
//! baby-step giant-step linear transforms).

use super::{Evaluator, ExtendedCiphertext};
use crate::ciphertext::Ciphertext;
use crate::error::{CkksError, Result};
use crate::keygen::permute_poly;
use crate::keys::{GaloisKey, GaloisKeys};
use crate::poly::RnsPoly;
use heinfer_math::automorphism::{conjugation_galois_element, rotation_galois_element};
use heinfer_math::vecops;
use rayon::prelude::*;

impl Evaluator {
    /// Rotates the slots left by `k` (right for negative `k`).
    pub fn rotate(&self, ct: &Ciphertext, k: i64, keys: &GaloisKeys) -> Result<Ciphertext> {
        let g = rotation_galois_element(k, self.params.n());
        if g == 1 {
            self.check_ct(ct)?;
            return Ok(ct.clone());
        }
        self.apply_galois(ct, g, keys)
    }

    /// `[rotate(cts[i], steps[i]) for i]`, the rotations running in parallel (one per worker):
    /// a rotation at a small level has too few limbs to keep every core busy on its own, so
    /// independent rotations (a transform's giant steps, the folds of its outputs) are better
    /// spread over the cores. Bit-identical to calling [`Self::rotate`] on each.
    pub fn rotate_many(
        &self,
        cts: &[&Ciphertext],
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<Ciphertext>> {
        same_count("rotate_many", cts.len(), steps.len(), "steps")?;
        cts.par_iter()
            .zip(steps.par_iter())
            .map(|(ct, &k)| self.rotate(ct, k, keys))
            .collect()
    }

    /// Rotate-and-add folds of each ciphertext: `c ← c + rot(c, s)` for each `s` of `steps`,
    /// in order. With steps `m, 2m, 4m, …, 2^{t−1}·m` slot `i` of the result holds
    /// `Σ_{j<2^t} c[i + j·m]` (a sum over `2^t` slots `m` apart, e.g. the partial products
    /// of a dense layer). Each fold depends on the one before, so the steps of one ciphertext
    /// run one after another (each rotation over the limbs in parallel) and the ciphertexts
    /// in parallel; the whole chain is one call, so the pool's workers stay awake between
    /// its rotations. Bit-identical to [`Self::rotate`] and [`Self::add_assign`] in a loop.
    pub fn fold(
        &self,
        cts: &[&Ciphertext],
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<Ciphertext>> {
        cts.par_iter()
            .map(|&ct| {
                let mut acc = ct.clone();
                for &s in steps {
                    let r = self.rotate(&acc, s, keys)?;
                    self.add_assign(&mut acc, &r)?;
                }
                Ok(acc)
            })
            .collect()
    }

    /// Complex conjugation of every slot.
    pub fn conjugate(&self, ct: &Ciphertext, keys: &GaloisKeys) -> Result<Ciphertext> {
        self.apply_galois(ct, conjugation_galois_element(self.params.n()), keys)
    }

    /// Applies `σ_g` and switches back to the secret key.
    pub fn apply_galois(&self, ct: &Ciphertext, g: u64, keys: &GaloisKeys) -> Result<Ciphertext> {
        self.check_ct(ct)?;
        self.check_linear("rotate", ct)?;
        let key = self.galois_key(keys, g)?;
        let switched = self.modup_inner_product(&ct.parts[1], ct.level, &key.key);
        self.rotate_switched(ct, switched, key)
    }

    /// Rotations of one ciphertext by each of `steps`, sharing one decomposition.
    pub fn rotate_hoisted(
        &self,
        ct: &Ciphertext,
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<Ciphertext>> {
        self.check_ct(ct)?;
        self.check_linear("rotate_hoisted", ct)?;
        let ks = self.hoisted_keys(steps, keys)?;
        let dec = self.decompose(&ct.parts[1], ct.level);
        // the rotations in parallel, as in the extended variant below
        ks.par_iter()
            .map(|k| match k {
                None => Ok(ct.clone()),
                Some(key) => self.rotate_decomposed(ct, &dec, key),
            })
            .collect()
    }

    /// Like [`Self::rotate_hoisted`] but returns `P·rot_k(ct)` over `Q_ℓ ∪ P` without ModDown.
    pub fn rotate_hoisted_extended(
        &self,
        ct: &Ciphertext,
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<ExtendedCiphertext>> {
        self.check_ct(ct)?;
        self.check_linear("rotate_hoisted_extended", ct)?;
        let n = self.params.n();
        let level = ct.level;
        let ks = self.hoisted_keys(steps, keys)?;
        let dec = self.decompose(&ct.parts[1], level);
        let p_c0 = self.times_p_extended(&ct.parts[0], level);
        // the baby steps in parallel (each one's key product also splits over limbs)
        ks.par_iter()
            .map(|k| {
                let (mut e0, mut e1) = match k {
                    None => (p_c0.clone(), self.times_p_extended(&ct.parts[1], level)),
                    Some(key) => {
                        let (a0, a1) = self.inner_product(&dec, &key.key);
                        let mut a0 = RnsPoly::from_data(a0, n);
                        self.add_limbs(&mut a0, &p_c0, level);
                        (a0, RnsPoly::from_data(a1, n))
                    }
                };
                if let Some(key) = k {
                    let table = self.params.galois_table(key.galois_element)?;
                    permute_poly(&mut e0, &table);
                    permute_poly(&mut e1, &table);
                }
                Ok(ExtendedCiphertext::new(
                    ct.params_id,
                    vec![e0, e1],
                    level,
                    ct.scale,
                ))
            })
            .collect()
    }

    /// `[rotate_hoisted(cts[i], steps[i]) for i]` in one call: the ciphertexts' hoisted
    /// rotations run in parallel across ciphertexts as well as across their steps. One
    /// ciphertext's decomposition at a low level has too few limbs, and a convolution's few
    /// baby steps too few rotations, to keep every core busy on their own. Bit-identical to
    /// calling [`Self::rotate_hoisted`] on each.
    pub fn rotate_hoisted_many(
        &self,
        cts: &[&Ciphertext],
        steps: &[Vec<i64>],
        keys: &GaloisKeys,
    ) -> Result<Vec<Vec<Ciphertext>>> {
        each_hoisted("rotate_hoisted_many", cts, steps, |ct, s| {
            self.rotate_hoisted(ct, s, keys)
        })
    }

    /// [`Self::rotate_hoisted_many`] for [`Self::rotate_hoisted_extended`]: `P·rot_k(ct)`
    /// over `Q_ℓ ∪ P` for every ciphertext and each of its steps, in parallel across both.
    pub fn rotate_hoisted_extended_many(
        &self,
        cts: &[&Ciphertext],
        steps: &[Vec<i64>],
        keys: &GaloisKeys,
    ) -> Result<Vec<Vec<ExtendedCiphertext>>> {
        each_hoisted("rotate_hoisted_extended_many", cts, steps, |ct, s| {
            self.rotate_hoisted_extended(ct, s, keys)
        })
    }

    /// The Galois key of each of `steps` (None for a step that leaves the slots where they
    /// are), every one checked before any work.
    fn hoisted_keys<'a>(
        &self,
        steps: &[i64],
        keys: &'a GaloisKeys,
    ) -> Result<Vec<Option<&'a GaloisKey>>> {
        let n = self.params.n();
        steps
            .iter()
            .map(|&k| match rotation_galois_element(k, n) {
                1 => Ok(None),
                g => self.galois_key(keys, g).map(Some),
            })
            .collect()
    }

    fn galois_key<'a>(&self, keys: &'a GaloisKeys, g: u64) -> Result<&'a GaloisKey> {
        heinfer_math::automorphism::check_galois_element(g, self.params.n()).map_err(|e| {
            CkksError::InvalidOperand {
                op: "apply_galois",
                reason: e.to_string(),
            }
        })?;
        let key = keys.get(g).ok_or(CkksError::MissingGaloisKey(g))?;
        self.params.check_id(key.params_id())?;
        Ok(key)
    }

    fn rotate_decomposed(
        &self,
        ct: &Ciphertext,
        dec: &super::keyswitch::Decomposed,
        key: &GaloisKey,
    ) -> Result<Ciphertext> {
        let switched = self.inner_product(dec, &key.key);
        self.rotate_switched(ct, switched, key)
    }

    /// The rotation after the inner product `(a0, a1)` of `ct.parts[1]` with the Galois key:
    /// ModDown, add `c_0`, permute.
    fn rotate_switched(
        &self,
        ct: &Ciphertext,
        (a0, a1): (Vec<u64>, Vec<u64>),
        key: &GaloisKey,
    ) -> Result<Ciphertext> {
        let level = ct.level;
        let n = self.params.n();
        let inner = self.params.inner();
        let (mut m0, m1) = rayon::join(|| self.mod_down(a0, level), || self.mod_down(a1, level));
        m0.data
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, x)| vecops::add_assign(x, ct.parts[0].limb(i), inner.moduli[i].q));
        let table = self.params.galois_table(key.galois_element)?;
        let (r0, r1) = (permuted(&m0, &table), permuted(&m1, &table));
        crate::scratch::give(m0.data);
        crate::scratch::give(m1.data);
        Ok(Ciphertext {
            params_id: ct.params_id,
            parts: vec![r0, r1],
            level,
            scale: ct.scale,
            seed: None,
        })
    }

    /// `P·c` over `Q_ℓ ∪ P` (zero on the P limbs).
    pub(crate) fn times_p_extended(&self, c: &RnsPoly, level: usize) -> RnsPoly {
        let n = self.params.n();
        let inner = self.params.inner();
        let mut out = RnsPoly::zero(n, level + 1 + self.params.p().len());
        out.data[..(level + 1) * n].copy_from_slice(&c.data[..(level + 1) * n]);
        out.data[..(level + 1) * n]
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, x)| {
                let m = &inner.moduli[i];
                let w = inner.p_mod_q[i];
                vecops::mul_scalar_assign(x, w, m.shoup(w), m);
            });
        out
    }

    fn add_limbs(&self, acc: &mut RnsPoly, other: &RnsPoly, level: usize) {
        let n = self.params.n();
        let inner = self.params.inner();
        acc.data
            .par_chunks_mut(n)
            .zip(other.data.par_chunks(n))
            .enumerate()
            .for_each(|(i, (x, y))| {
                let mi = crate::poly::modulus_index(&self.params, level, i);
                vecops::add_assign(x, y, inner.moduli[mi].q);
            });
    }
}

/// `[rotate(cts[i], steps[i]) for i]` for a hoisted `rotate`, in parallel across the
/// ciphertexts (the body of both `*_many` hoisted rotations).
fn each_hoisted<T: Send>(
    op: &'static str,
    cts: &[&Ciphertext],
    steps: &[Vec<i64>],
    rotate: impl Fn(&Ciphertext, &[i64]) -> Result<Vec<T>> + Sync,
) -> Result<Vec<Vec<T>>> {
    same_count(op, cts.len(), steps.len(), "lists of steps")?;
    cts.par_iter()
        .zip(steps.par_iter())
        .map(|(ct, s)| rotate(ct, s))
        .collect()
}

/// Refuses `cts` ciphertexts given `steps` steps (`what`: "steps" or "lists of steps"), one
/// per ciphertext expected.
fn same_count(op: &'static str, cts: usize, steps: usize, what: &str) -> Result<()> {
    if cts != steps {
        return Err(CkksError::InvalidOperand {
            op,
            reason: format!("{cts} ciphertexts but {steps} {what}"),
        });
    }
    Ok(())
}

/// `σ(poly)` into a fresh buffer, given the evaluation-form permutation table.
fn permuted(poly: &RnsPoly, table: &[u32]) -> RnsPoly {
    let n = poly.n;
    let mut out = crate::scratch::take(poly.data.len());
    out.par_chunks_mut(n)
        .zip(poly.data.par_chunks(n))
        .for_each(|(o, src)| {
            heinfer_math::automorphism::permute_into(src, table, o);
        });
    RnsPoly::from_data(out, n)
}

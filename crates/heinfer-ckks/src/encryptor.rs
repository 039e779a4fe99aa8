//! Public-key encryption and secret-key decryption.
//!
//! Public-key encryption works in the extended basis `Q_ℓ ∪ P` and divides by `P` (as SEAL does):
//! `Enc_pk(m) = (⌊(b·u + e_0)/P⌉ + m, ⌊(a·u + e_1)/P⌉)` with `u` ternary and `e_0, e_1`
//! Gaussian. The division shrinks the encryption noise `e·u + e_0 + e_1·s` to the rounding
//! term `r_0 + r_1·s` — about 3 bits more precision than encrypting over `Q_ℓ` directly, for
//! `k` extra limbs and two ModDowns. `Dec_s(c) = Σ_i c_i·s^i`.
//!
//! `u`, the errors, the `P` limbs of `b·u + e_0` and `a·u + e_1` and the decryption temporaries
//! are zeroed before they are freed or go back to the scratch pool: knowing `u` (or `b·u` on one
//! prime, with `b` public) would reveal the message.

use crate::ciphertext::{Ciphertext, Plaintext, MAX_PARTS};
use crate::error::{CkksError, Result};
use crate::evaluator::keyswitch::mod_down;
use crate::keygen::{basis_indices, small_to_ntt};
use crate::keys::{PublicKey, SecretKey};
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::sampler::Sampler;
use heinfer_math::vecops;
use rayon::prelude::*;
use zeroize::Zeroizing;

/// Encrypts plaintexts under a public key.
pub struct Encryptor {
    params: CkksParams,
    pk: PublicKey,
}

impl Encryptor {
    /// An encryptor for `pk` (which must belong to `params`).
    pub fn new(params: &CkksParams, pk: &PublicKey) -> Result<Self> {
        params.check_id(pk.params_id)?;
        Ok(Self {
            params: params.clone(),
            pk: pk.clone(),
        })
    }

    /// Encrypts `pt` at its level and scale.
    pub fn encrypt(&self, pt: &Plaintext) -> Result<Ciphertext> {
        let params = &self.params;
        params.check_id(pt.params_id)?;
        let inner = params.inner();
        let n = params.n();
        let level = pt.level;
        let idx = basis_indices(params, level, true);
        let mut os = Sampler::from_os()?;
        let u = Zeroizing::new(os.ternary(n));
        let u: Zeroizing<Vec<i64>> = Zeroizing::new(u.iter().map(|&x| x as i64).collect());
        let u = small_to_ntt(params, &u, &idx);
        let (e0, e1) = (
            Zeroizing::new(os.gaussian(n)),
            Zeroizing::new(os.gaussian(n)),
        );
        let lq = params.q().len();
        let limbs = idx.len();
        let mut c0 = RnsPoly::from_data(crate::scratch::take(limbs * n), n);
        let mut c1 = RnsPoly::from_data(crate::scratch::take(limbs * n), n);
        let work = |(i, (l0, l1)): (usize, (&mut [u64], &mut [u64]))| {
            let mi = idx[i];
            // the public key holds all of Q then P: limb of Q_ℓ ∪ P index i ↦ key limb
            let ki = if mi < lq {
                mi
            } else {
                params.max_level() + 1 + (mi - lq)
            };
            let b = &inner.barrett[mi];
            vecops::mul_into(l0, self.pk.b.limb(ki), u.limb(i), b);
            vecops::mul_into(l1, self.pk.a.limb(ki), u.limb(i), b);
        };
        c0.data
            .par_chunks_mut(n)
            .zip(c1.data.par_chunks_mut(n))
            .enumerate()
            .for_each(work);
        crate::scratch::give_secret(u.data);
        // ⌊(b·u + e_0)/P⌉, ⌊(a·u + e_1)/P⌉: the errors enter in coefficient form inside ModDown
        let (mut c0, c1) = rayon::join(
            || mod_down(params, c0.data, level, Some(&e0[..])),
            || mod_down(params, c1.data, level, Some(&e1[..])),
        );
        c0.data
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, l0)| vecops::add_assign(l0, pt.poly.limb(i), inner.moduli[i].q));
        Ok(Ciphertext {
            params_id: params.id(),
            parts: vec![c0, c1],
            level,
            scale: pt.scale,
            seed: None,
        })
    }

    /// An encryption of zero at `level` over `Q_ℓ` alone, with `extra` (one signed integer per
    /// coefficient) added to the error of `c_0`: `(b·u + e_0 + extra, a·u + e_1)`, the textbook
    /// RLWE public-key encryption. Its error `e·u + e_0 + e_1·s + extra` is larger than
    /// [`Self::encrypt`]'s (no division by `P`: `e·u` and `e_1·s` stay, about `2N·6σ` at
    /// most), which nothing notices under a noise flood, and it takes three transforms per
    /// limb (`u`, `e_0 + extra`, `e_1`) instead of [`Self::encrypt`]'s extended `u` and two
    /// ModDowns: BFV's re-randomization with flooding (`heinfer_bfv::Rerandomizer`). Fails for
    /// a level out of range or `extra` of another length than `N`.
    pub fn encrypt_zero_with_error(&self, level: usize, extra: &[i128]) -> Result<Ciphertext> {
        self.check_extra(level, extra.len())?;
        self.encrypt_zero_with(level, |q, _, j| q.reduce_i128(extra[j]))
    }

    /// [`Self::encrypt_zero_with_error`] with a wider error: `hi[j]·2^64 + lo[j]` on
    /// coefficient `j` (up to 191 bits, for flooding beyond what an `i128` holds). Fails as
    /// [`Self::encrypt_zero_with_error`] does, and for `hi` and `lo` of different lengths.
    pub fn encrypt_zero_with_wide_error(
        &self,
        level: usize,
        hi: &[i128],
        lo: &[u64],
    ) -> Result<Ciphertext> {
        self.check_extra(level, hi.len())?;
        self.check_extra(level, lo.len())?;
        // 2^64 mod q for each prime of the level, then hi·2^64 + lo mod q per coefficient
        let two64: Vec<u64> = self.params.inner().moduli[..=level]
            .iter()
            .map(|q| q.reduce_u128(1u128 << 64))
            .collect();
        self.encrypt_zero_with(level, |q, i, j| {
            q.add(q.mul(q.reduce_i128(hi[j]), two64[i]), q.reduce_u64(lo[j]))
        })
    }

    /// The level in range and `len` error coefficients, one per coefficient of the ring.
    fn check_extra(&self, level: usize, len: usize) -> Result<()> {
        let params = &self.params;
        if level > params.max_level() {
            return Err(CkksError::LevelOutOfRange {
                level,
                max: params.max_level(),
            });
        }
        let n = params.n();
        if len != n {
            return Err(CkksError::InvalidOperand {
                op: "encrypt_zero_with_error",
                reason: format!("{len} error coefficients for N = {n}"),
            });
        }
        Ok(())
    }

    /// `(b·u + e_0 + x, a·u + e_1)` over `Q_ℓ`, with `extra(q, i, j)` the residue of `x`'s
    /// coefficient `j` modulo `q`, the level's prime `i` (checked by the callers:
    /// [`Self::check_extra`]).
    fn encrypt_zero_with(
        &self,
        level: usize,
        extra: impl Fn(&heinfer_math::modulus::Modulus, usize, usize) -> u64 + Sync,
    ) -> Result<Ciphertext> {
        let params = &self.params;
        let n = params.n();
        let inner = params.inner();
        let idx: Vec<usize> = (0..=level).collect();
        let mut os = Sampler::from_os()?;
        let u = Zeroizing::new(os.ternary(n));
        let u: Zeroizing<Vec<i64>> = Zeroizing::new(u.iter().map(|&x| x as i64).collect());
        let u = small_to_ntt(params, &u, &idx);
        let e1 = Zeroizing::new(os.gaussian(n));
        let mut c1 = small_to_ntt(params, &e1, &idx);
        let e0 = Zeroizing::new(os.gaussian(n));
        let mut c0 = RnsPoly::from_data(crate::scratch::take((level + 1) * n), n);
        c0.data
            .par_chunks_mut(n)
            .zip(c1.data.par_chunks_mut(n))
            .enumerate()
            .for_each(|(i, (l0, l1))| {
                let q = &inner.moduli[i];
                for (j, (x, &e)) in l0.iter_mut().zip(e0.iter()).enumerate() {
                    *x = q.add(q.reduce_i64(e), extra(q, i, j));
                }
                inner.ntt[i].forward(l0);
                // c_0 = b·u + (e_0 + extra), c_1 = a·u + e_1 (the key holds all of Q, then P)
                let b = &inner.barrett[i];
                vecops::mul_add_assign(l0, self.pk.b.limb(i), u.limb(i), b);
                vecops::mul_add_assign(l1, self.pk.a.limb(i), u.limb(i), b);
            });
        crate::scratch::give_secret(u.data);
        Ok(Ciphertext {
            params_id: params.id(),
            parts: vec![c0, c1],
            level,
            scale: 1.0,
            seed: None,
        })
    }
}

/// Decrypts ciphertexts with the secret key (client side).
pub struct Decryptor {
    params: CkksParams,
    sk: SecretKey,
}

impl Decryptor {
    /// A decryptor for `sk` (which must belong to `params`).
    pub fn new(params: &CkksParams, sk: &SecretKey) -> Result<Self> {
        params.check_id(sk.params_id)?;
        Ok(Self {
            params: params.clone(),
            sk: sk.clone(),
        })
    }

    /// `Σ_i c_i·s^i` at the ciphertext's level and scale, by Horner's rule
    /// (`c_0 + s·(c_1 + s·(c_2 + …))`), for 2 to [`MAX_PARTS`] parts.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Plaintext> {
        let params = &self.params;
        params.check_id(ct.params_id)?;
        let size = ct.parts.len();
        if !(2..=MAX_PARTS).contains(&size) {
            return Err(CkksError::InvalidOperand {
                op: "decrypt",
                reason: format!("ciphertext has {size} parts (2 to {MAX_PARTS} are decrypted)"),
            });
        }
        let inner = params.inner();
        let n = params.n();
        if size == 2 {
            // c_0 + c_1·s in one pass into fresh memory (no copy of c_0 first)
            let data = vecops::build_limbs(ct.level + 1, n, |i, out| {
                let s = self.sk.ntt.limb(i);
                let (c0, c1) = (ct.parts[0].limb(i), ct.parts[1].limb(i));
                vecops::mul_add_to_uninit(out, c0, c1, s, &inner.barrett[i])
            });
            return Ok(Plaintext {
                params_id: params.id(),
                poly: RnsPoly::from_data(data, n),
                level: ct.level,
                scale: ct.scale,
            });
        }
        let mut m = RnsPoly::from_data(ct.parts[0].data.clone(), n);
        m.data.par_chunks_mut(n).enumerate().for_each(|(i, limb)| {
            let b = &inner.barrett[i];
            let s = self.sk.ntt.limb(i);
            // t = c_{size-1}·s + c_{size-2}, then t·s + c_k down to c_1
            let mut t = Zeroizing::new(ct.parts[size - 2].limb(i).to_vec());
            vecops::mul_add_assign(&mut t, ct.parts[size - 1].limb(i), s, b);
            let mut u = Zeroizing::new(vec![0u64; n]);
            for k in (1..size - 2).rev() {
                u.copy_from_slice(ct.parts[k].limb(i));
                vecops::mul_add_assign(&mut u, &t, s, b);
                std::mem::swap(&mut *t, &mut *u);
            }
            vecops::mul_add_assign(limb, &t, s, b);
        });
        Ok(Plaintext {
            params_id: params.id(),
            poly: m,
            level: ct.level,
            scale: ct.scale,
        })
    }
}

//! Exact BFV decryption: `m = ⌊p·x/Q⌉ mod p` for `x = c_0 + c_1·s mod Q`, computed without
//! floating point for any number of ciphertext primes.
//!
//! Per coefficient, Garner's algorithm turns the residues of `x` into mixed-radix digits
//! `x = v_0 + v_1·q_0 + v_2·q_0q_1 + …`; then one pass from the lowest digit carries
//! `t_i = p·v_i + c_i = r_i + q_i·c_{i+1}` (128-bit), which gives `p·x = R + Q·c_k` with
//! `R = r_0 + r_1·q_0 + … < Q` in mixed radix. So `⌊p·x/Q⌋ = c_k`, and it rounds up when
//! `R ≥ (Q+1)/2`, compared digit by digit from the top. `R` centered is `Q·v` for the
//! invariant noise `v = (p·e − (Q mod p)·m)/Q`, which [`Decryptor::noise_budget`] reports as
//! `−log2(2|v|)` bits (decryption is correct while it is positive). A ciphertext at a lower
//! level `ℓ` decrypts the same way with `Q_ℓ = q_0·…·q_ℓ`.

use crate::encoder::BatchEncoder;
use crate::error::{BfvError, Result};
use crate::params::{mixed_radix, BfvParams};
use heinfer_ckks::{Ciphertext, SecretKey};
use heinfer_math::Modulus;
use rayon::prelude::*;
use zeroize::Zeroize;

/// Decrypts BFV ciphertexts with the secret key (client side).
pub struct Decryptor {
    params: BfvParams,
    inner: heinfer_ckks::Decryptor,
    encoder: BatchEncoder,
}

/// Refuses what a BFV ciphertext of `params` cannot be: another parameter set, a lower level,
/// a scale other than 1, or more than two parts.
pub(crate) fn check_ciphertext(params: &BfvParams, ct: &Ciphertext, op: &str) -> Result<()> {
    check_result(params, ct, op)?;
    if ct.level() != params.level() {
        return Err(BfvError::ParamsMismatch(format!(
            "{op}: a BFV ciphertext to compute on has level {}; got level {} (a compacted result \
             is only decrypted)",
            params.level(),
            ct.level(),
        )));
    }
    Ok(())
}

/// [`check_ciphertext`] at any level: what a decryptor and the wire accept (a result the
/// server switched down to fewer primes, [`crate::Rerandomizer::rerandomize_compact`]).
pub(crate) fn check_result(params: &BfvParams, ct: &Ciphertext, op: &str) -> Result<()> {
    params.rlwe().check_id(ct.params_id())?;
    if ct.level() > params.level() || ct.scale() != 1.0 || ct.size() != 2 {
        return Err(BfvError::ParamsMismatch(format!(
            "{op}: a BFV ciphertext has level {}, scale 1 and two parts; got level {}, scale {}, {} parts",
            params.level(),
            ct.level(),
            ct.scale(),
            ct.size()
        )));
    }
    Ok(())
}

impl Decryptor {
    /// A decryptor for `sk` (a key of `params.rlwe()`).
    pub fn new(params: &BfvParams, sk: &SecretKey) -> Result<Self> {
        Ok(Self {
            params: params.clone(),
            inner: heinfer_ckks::Decryptor::new(params.rlwe(), sk)?,
            encoder: BatchEncoder::new(params),
        })
    }

    /// The `N` slots of `ct`, each in `[0, p)`.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Vec<u64>> {
        Ok(self
            .encoder
            .coefficients_to_slots(self.decrypt_coefficients(ct)?))
    }

    /// The message polynomial's coefficients in `[0, p)`.
    pub fn decrypt_coefficients(&self, ct: &Ciphertext) -> Result<Vec<u64>> {
        let (m, _) = self.scale_and_round(ct, false)?;
        Ok(m)
    }

    /// Bits of noise budget left: `−log2(2·max_j |v_j|)` over the coefficients' invariant
    /// noise `v_j`. Decryption is correct while it is positive. For tests and parameter
    /// choice; a party that decrypts what it was sent does not need it.
    pub fn noise_budget(&self, ct: &Ciphertext) -> Result<f64> {
        let (_, worst) = self.scale_and_round(ct, true)?;
        let log_q: f64 = self.params.rlwe().q()[..=ct.level()]
            .iter()
            .map(|&q| (q as f64).log2())
            .sum();
        Ok(if worst <= 0.0 {
            log_q - 1.0
        } else {
            log_q - 1.0 - worst.log2()
        })
    }

    /// Message coefficients and, when asked, the largest `|R|` (centered, as `f64`).
    fn scale_and_round(&self, ct: &Ciphertext, noise: bool) -> Result<(Vec<u64>, f64)> {
        check_result(&self.params, ct, "decrypt")?;
        let rlwe = self.params.rlwe();
        let n = rlwe.n();
        let k = ct.level() + 1; // Q_ℓ = q_0·…·q_ℓ
        let half_digits = &self.params.inner().half_digits[ct.level()];
        let mut pt = self.inner.decrypt(ct)?;
        let mut x = pt.poly().clone();
        pt.zeroize();
        x.data_mut()
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, limb)| rlwe.ntt(i).inverse(limb));
        let inner = self.params.inner();
        let qs: Vec<Modulus> = rlwe.q()[..k].iter().map(|&q| Modulus::new(q)).collect();
        let t = inner.t.q;
        const CHUNK: usize = 256;
        let data = x.data();
        let per_chunk: Vec<(Vec<u64>, f64)> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let mut res = vec![0u64; k];
                let mut out = Vec::with_capacity(CHUNK);
                let mut worst = 0f64;
                for j in c * CHUNK..((c + 1) * CHUNK).min(n) {
                    for (i, r) in res.iter_mut().enumerate() {
                        *r = data[i * n + j];
                    }
                    let v = mixed_radix(&qs, &inner.prefix_mod_q, &inner.prefix_inv, &res);
                    let (mut m, r) = scale_digits(&qs, t, &v);
                    let up = !less(&r, half_digits);
                    if up {
                        m += 1;
                    }
                    out.push((m % t as u128) as u64);
                    if noise {
                        worst = worst.max(centered_abs(&qs, &r, up));
                    }
                    res.as_mut_slice().zeroize();
                }
                (out, worst)
            })
            .collect();
        x.zeroize();
        let mut m = Vec::with_capacity(n);
        let mut worst = 0f64;
        for (o, w) in per_chunk {
            m.extend(o);
            worst = worst.max(w);
        }
        Ok((m, worst))
    }
}

/// `p·x = R + Q·c` for `x` in mixed radix `v`: returns `(c, digits of R)`.
fn scale_digits(qs: &[Modulus], t: u64, v: &[u64]) -> (u128, Vec<u64>) {
    let mut carry: u128 = 0;
    let r = qs
        .iter()
        .zip(v)
        .map(|(q, &vi)| {
            let x = t as u128 * vi as u128 + carry;
            carry = x / q.q as u128;
            (x % q.q as u128) as u64
        })
        .collect();
    (carry, r)
}

/// `a < b` for mixed-radix digit vectors (most significant digit last).
fn less(a: &[u64], b: &[u64]) -> bool {
    for (x, y) in a.iter().zip(b).rev() {
        if x != y {
            return x < y;
        }
    }
    false
}

/// `|R|` centered as an `f64`: `R` when it rounded down, else `Q − R` (computed exactly in
/// mixed radix before the conversion, so small noise is not lost to cancellation).
fn centered_abs(qs: &[Modulus], r: &[u64], up: bool) -> f64 {
    let digits: Vec<u64> = if !up {
        r.to_vec()
    } else {
        // Q − R: the lowest non-zero digit j becomes q_j − r_j, the ones above q_i − 1 − r_i
        let j = r.iter().position(|&d| d != 0).unwrap_or(r.len());
        r.iter()
            .enumerate()
            .map(|(i, &d)| match i.cmp(&j) {
                std::cmp::Ordering::Less => 0,
                std::cmp::Ordering::Equal => qs[i].q - d,
                std::cmp::Ordering::Greater => qs[i].q - 1 - d,
            })
            .collect()
    };
    // Horner from the most significant digit
    digits
        .iter()
        .zip(qs)
        .rev()
        .fold(0f64, |acc, (&d, q)| acc * q.q as f64 + d as f64)
}

//! Key generation: secret, public, relinearization and Galois keys.
//!
//! Every key's uniform half is expanded from a fresh OS-seeded 32-byte seed (ChaCha20), so a
//! key travels as `(b, seed)`: half the bytes.
//!
//! Every temporary derived from the secret or from the errors (`e` before it is hidden by
//! `−a·s`, `a·s`, `s²`, `s(X^g)`, the widened secret coefficients) is zeroed before it is
//! freed or returned to the scratch pool.

use crate::ciphertext::Ciphertext;
use crate::error::Result;
use crate::keys::{GaloisKey, GaloisKeys, PublicKey, RelinKey, SecretKey, SwitchingKey};
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::automorphism::{conjugation_galois_element, rotation_galois_element};
use heinfer_math::sampler::{Sampler, Seed};
use heinfer_math::vecops;
use rayon::prelude::*;
use zeroize::Zeroizing;

/// Generates keys for one parameter set. Holds the secret key: a client-side object.
pub struct KeyGenerator {
    params: CkksParams,
    sk: SecretKey,
}

/// Expands a uniform polynomial over the moduli of table indices `moduli` from `seed`.
pub(crate) fn expand_uniform(params: &CkksParams, seed: Seed, moduli: &[usize]) -> RnsPoly {
    let inner = params.inner();
    let n = params.n();
    let mut s = Sampler::from_seed(seed);
    let mut p = RnsPoly::zero(n, moduli.len());
    for (i, &mi) in moduli.iter().enumerate() {
        s.uniform_into(p.limb_mut(i), &inner.moduli[mi]);
    }
    p
}

/// A key-switching key's digits before compaction: `(b_j)`, `(a_j)`, the seeds of the `a_j`.
type KeyDigits = (Vec<RnsPoly>, Vec<RnsPoly>, Vec<Seed>);

/// Table indices of `Q_ℓ` (and of `P` when `extended`).
pub(crate) fn basis_indices(params: &CkksParams, level: usize, extended: bool) -> Vec<usize> {
    let lq = params.q().len();
    let mut v: Vec<usize> = (0..=level).collect();
    if extended {
        v.extend(lq..lq + params.p().len());
    }
    v
}

/// A small signed polynomial (error or ternary) in NTT form over the given moduli.
pub(crate) fn small_to_ntt(params: &CkksParams, coeffs: &[i64], moduli: &[usize]) -> RnsPoly {
    let inner = params.inner();
    let n = params.n();
    let mut p = RnsPoly::from_data(crate::scratch::take(n * moduli.len()), n);
    p.data
        .par_chunks_mut(n)
        .zip(moduli.par_iter())
        .for_each(|(limb, &mi)| {
            let q = inner.moduli[mi].q;
            // |c| < q: a negative value maps to q + c without a division
            for (x, &c) in limb.iter_mut().zip(coeffs) {
                *x = if c < 0 {
                    q.wrapping_add(c as u64)
                } else {
                    c as u64
                };
            }
            inner.ntt[mi].forward(limb);
        });
    p
}

impl KeyGenerator {
    /// A key generator with a fresh secret key drawn from the OS random source.
    pub fn new(params: &CkksParams) -> Result<Self> {
        let mut s = Sampler::from_os()?;
        let coeffs = s.ternary(params.n());
        Ok(Self::from_ternary(params, coeffs))
    }

    fn from_ternary(params: &CkksParams, coeffs: Vec<i8>) -> Self {
        let all = basis_indices(params, params.max_level(), true);
        let wide: Zeroizing<Vec<i64>> = Zeroizing::new(coeffs.iter().map(|&c| c as i64).collect());
        let ntt = small_to_ntt(params, &wide, &all);
        Self {
            params: params.clone(),
            sk: SecretKey {
                params_id: params.id(),
                coeffs,
                ntt,
            },
        }
    }

    /// Rebuilds a key generator around an existing secret key (e.g. one loaded from bytes).
    pub fn from_secret_key(params: &CkksParams, sk: &SecretKey) -> Result<Self> {
        params.check_id(sk.params_id)?;
        Ok(Self::from_ternary(params, sk.coeffs.clone()))
    }

    /// The secret key.
    pub fn secret_key(&self) -> &SecretKey {
        &self.sk
    }

    /// A public key `(−a·s + e, a)` over `Q_L ∪ P` (encryption happens in the extended basis and
    /// divides by `P`, see [`crate::Encryptor`]).
    pub fn public_key(&self) -> Result<PublicKey> {
        let params = &self.params;
        require_special_primes(params, "public-key encryption")?;
        let idx = basis_indices(params, params.max_level(), true);
        let mut os = Sampler::from_os()?;
        let seed = os.seed();
        let a = expand_uniform(params, seed, &idx);
        let e = small_to_ntt(params, &Zeroizing::new(os.gaussian(params.n())), &idx);
        let b = self.minus_as_plus(&a, e, &idx);
        Ok(PublicKey {
            params_id: params.id(),
            b,
            a,
            seed,
        })
    }

    /// `e − a·s` over the moduli `idx` (`s` restricted to them).
    fn minus_as_plus(&self, a: &RnsPoly, mut e: RnsPoly, idx: &[usize]) -> RnsPoly {
        let inner = self.params.inner();
        let n = self.params.n();
        e.data.par_chunks_mut(n).enumerate().for_each(|(i, limb)| {
            let mi = idx[i];
            let mut t = crate::scratch::take(n);
            vecops::mul_into(&mut t, a.limb(i), self.sk.ntt.limb(mi), &inner.barrett[mi]);
            vecops::sub_assign(limb, &t, inner.moduli[mi].q);
            crate::scratch::give_secret(t);
        });
        e
    }

    /// The digits of a key-switching key from `s′` (NTT form over all of `Q ∪ P`) to `s`:
    /// `(b_j, a_j, seed_j)` for every `j`, in 64-bit words.
    fn switching_key(&self, s_prime: &RnsPoly) -> Result<KeyDigits> {
        let params = &self.params;
        require_special_primes(params, "key switching")?;
        let inner = params.inner();
        let n = params.n();
        let lq = params.q().len();
        let idx = basis_indices(params, params.max_level(), true);
        let alpha = params.alpha();
        let mut os = Sampler::from_os()?;
        let (mut bs, mut as_, mut seeds) = (Vec::new(), Vec::new(), Vec::new());
        for j in 0..params.beta() {
            let seed = os.seed();
            let a = expand_uniform(params, seed, &idx);
            let e = small_to_ntt(params, &Zeroizing::new(os.gaussian(n)), &idx);
            let mut b = self.minus_as_plus(&a, e, &idx);
            for i in j * alpha..((j + 1) * alpha).min(lq) {
                let m = &inner.moduli[i];
                let pm = inner.p_mod_q[i];
                vecops::mul_scalar_add_assign(b.limb_mut(i), s_prime.limb(i), pm, m.shoup(pm), m);
            }
            bs.push(b);
            as_.push(a);
            seeds.push(seed);
        }
        Ok((bs, as_, seeds))
    }

    /// The relinearization key (`s² → s`).
    pub fn relin_key(&self) -> Result<RelinKey> {
        let inner = self.params.inner();
        let mut s2 = Zeroizing::new(self.sk.ntt.clone());
        for i in 0..s2.limbs() {
            vecops::mul_assign(s2.limb_mut(i), self.sk.ntt.limb(i), &inner.barrett[i]);
        }
        let (b, a, seeds) = self.switching_key(&s2)?;
        Ok(RelinKey(SwitchingKey::new(&self.params, b, a, seeds)))
    }

    /// The Galois key of element `g` (`s(X^g) → s`), stored pre-permuted (see [`GaloisKey`]).
    pub fn galois_key(&self, g: u64) -> Result<GaloisKey> {
        let (b, a, seeds) = self.galois_digits(g, true)?;
        Ok(GaloisKey {
            galois_element: g,
            key: SwitchingKey::new(&self.params, b, a, seeds),
        })
    }

    /// The Galois key of `g` as the wire carries it: each `b_j` pre-permuted, in 64-bit
    /// words, and the seed of each `a_j` (not kept: the reader expands and permutes them).
    pub(crate) fn galois_key_wire(&self, g: u64) -> Result<(Vec<RnsPoly>, Vec<Seed>)> {
        let (b, _, seeds) = self.galois_digits(g, false)?;
        Ok((b, seeds))
    }

    /// The digits of the Galois key of `g`, `b_j` pre-permuted by `σ_g^{-1}` (and `a_j` too
    /// when `permute_a`).
    fn galois_digits(&self, g: u64, permute_a: bool) -> Result<KeyDigits> {
        let params = &self.params;
        let table = params.galois_table(g)?;
        let mut sg = Zeroizing::new(self.sk.ntt.clone());
        for i in 0..sg.limbs() {
            heinfer_math::automorphism::permute_into(self.sk.ntt.limb(i), &table, sg.limb_mut(i));
        }
        let (mut b, mut a, seeds) = self.switching_key(&sg)?;
        let inv = params.galois_table(inverse_galois_element(g, params.n()))?;
        let permuted = if permute_a { a.len() } else { 0 };
        for poly in b.iter_mut().chain(a[..permuted].iter_mut()) {
            permute_poly(poly, &inv);
        }
        Ok((b, a, seeds))
    }

    /// The distinct non-identity Galois elements of rotations by `steps` (and conjugation),
    /// ascending: the keys [`Self::galois_keys`] makes, in the order they serialize.
    pub(crate) fn galois_elements(&self, steps: &[i64], conjugate: bool) -> Vec<u64> {
        let n = self.params.n();
        let mut elems: Vec<u64> = steps
            .iter()
            .map(|&k| rotation_galois_element(k, n))
            .collect();
        if conjugate {
            elems.push(conjugation_galois_element(n));
        }
        elems.sort_unstable();
        elems.dedup();
        elems.retain(|&g| g != 1);
        elems
    }

    /// The parameters these keys are for.
    pub fn params(&self) -> &CkksParams {
        &self.params
    }

    /// Galois keys for left rotations by each of `steps` (negative: right), plus complex
    /// conjugation when `conjugate` is set.
    pub fn galois_keys(&self, steps: &[i64], conjugate: bool) -> Result<GaloisKeys> {
        // One key per element, generated in parallel (each draws its own OS randomness).
        let made: Vec<GaloisKey> = self
            .galois_elements(steps, conjugate)
            .into_par_iter()
            .map(|g| self.galois_key(g))
            .collect::<Result<_>>()?;
        let mut keys = GaloisKeys::new();
        for k in made {
            keys.insert(k);
        }
        Ok(keys)
    }

    /// Encrypts with the secret key: `(−a·s + e + m, a)`, `a` expanded from a fresh seed, so the
    /// ciphertext serializes in seed-compressed form.
    pub fn encrypt_symmetric(&self, pt: &crate::ciphertext::Plaintext) -> Result<Ciphertext> {
        let params = &self.params;
        params.check_id(pt.params_id)?;
        let idx = basis_indices(params, pt.level, false);
        let mut os = Sampler::from_os()?;
        let seed = os.seed();
        let a = expand_uniform(params, seed, &idx);
        let e = small_to_ntt(params, &Zeroizing::new(os.gaussian(params.n())), &idx);
        let mut b = self.minus_as_plus(&a, e, &idx);
        let inner = params.inner();
        for i in 0..=pt.level {
            vecops::add_assign(b.limb_mut(i), pt.poly.limb(i), inner.moduli[i].q);
        }
        Ok(Ciphertext {
            params_id: params.id(),
            parts: vec![b, a],
            level: pt.level,
            scale: pt.scale,
            seed: Some(seed),
        })
    }
}

impl KeyGenerator {
    /// Encodes `values` and encrypts them with the secret key in one pass: the message and
    /// the error are added in coefficient form, so the pair costs one forward NTT per limb
    /// instead of two (the result equals `encrypt_symmetric(encode(values))` in distribution).
    /// Seed-compressed like [`Self::encrypt_symmetric`].
    pub fn encrypt_values(
        &self,
        enc: &crate::encoder::Encoder,
        values: &[num_complex::Complex64],
        scale: f64,
        level: usize,
    ) -> Result<Ciphertext> {
        let (coeffs, _) = enc.embed_inverse(values, scale, level)?;
        self.encrypt_scaled_coefficients(coeffs, scale, level)
    }

    /// Encrypts real `values` placed in the **coefficients** of the plaintext
    /// (`m(X) = Σ round(Δ·v_j)·X^j`, up to `N` values) with the secret key — coefficient
    /// packing. Additions and products by scalars act on coefficients as on slots, so a
    /// segment without ciphertext products can use it: no FFT to encode or decode, `N`
    /// values per ciphertext, and the fresh error stays `e` per value (not `e` spread by the
    /// canonical embedding, `√N` times larger). Decode with
    /// [`crate::Encoder::decode_coefficients`].
    pub fn encrypt_coefficients(
        &self,
        enc: &crate::encoder::Encoder,
        values: &[f64],
        scale: f64,
        level: usize,
    ) -> Result<Ciphertext> {
        let coeffs = enc.scaled_coefficients(values, scale, level)?;
        self.encrypt_scaled_coefficients(coeffs, scale, level)
    }

    /// `(−a·s + e + c, a)` for scaled integer coefficients `c` (as f64), one NTT per limb.
    fn encrypt_scaled_coefficients(
        &self,
        coeffs: Vec<f64>,
        scale: f64,
        level: usize,
    ) -> Result<Ciphertext> {
        // message plus error: zeroed when dropped, like the error itself
        let mut coeffs = Zeroizing::new(coeffs);
        let params = &self.params;
        let inner = params.inner();
        let n = params.n();
        let idx = basis_indices(params, level, false);
        let mut os = Sampler::from_os()?;
        let seed = os.seed();
        let e = Zeroizing::new(os.gaussian(n));
        let max = crate::scaled::add_error_max(&mut coeffs, &e);
        let a = expand_uniform(params, seed, &idx);
        let mut b = RnsPoly::from_data(crate::scratch::take(n * idx.len()), n);
        b.data
            .par_chunks_mut(n)
            .zip(idx.par_iter())
            .enumerate()
            .for_each(|(i, (limb, &mi))| {
                let m = &inner.moduli[mi];
                if max < 4.0e15 && m.q < (1u64 << 50) {
                    vecops::reduce_f64_into(limb, &coeffs, m.q);
                } else {
                    for (x, &c) in limb.iter_mut().zip(coeffs.iter()) {
                        *x = m.reduce_i128(c as i128);
                    }
                }
                inner.ntt[mi].forward(limb);
                let mut t = crate::scratch::take(n);
                vecops::mul_into(&mut t, a.limb(i), self.sk.ntt.limb(mi), &inner.barrett[mi]);
                vecops::sub_assign(limb, &t, m.q);
                crate::scratch::give_secret(t);
            });
        Ok(Ciphertext {
            params_id: params.id(),
            parts: vec![b, a],
            level,
            scale,
            seed: Some(seed),
        })
    }
}

/// Refuses `what` for parameters without special primes.
fn require_special_primes(params: &CkksParams, what: &str) -> Result<()> {
    if params.p().is_empty() {
        return Err(crate::error::CkksError::InvalidParameters(format!(
            "{what} needs special primes P; these parameters have none (secret-key encryption only)"
        )));
    }
    Ok(())
}

/// `g^{-1} mod 2N`.
pub(crate) fn inverse_galois_element(g: u64, n: usize) -> u64 {
    let two_n = 2 * n as u64;
    // the group (Z/2NZ)^* has exponent ≤ N/2, so g^{N/2 − 1} = g^{-1}
    let mut r = 1u64;
    let mut b = g % two_n;
    let mut e = (n / 2 - 1) as u64;
    while e > 0 {
        if e & 1 == 1 {
            r = r * b % two_n;
        }
        b = b * b % two_n;
        e >>= 1;
    }
    debug_assert_eq!(r * g % two_n, 1);
    r
}

/// Applies an evaluation-form permutation to every limb of `poly`.
pub(crate) fn permute_poly(poly: &mut RnsPoly, table: &[u32]) {
    let n = poly.n;
    poly.data.par_chunks_mut(n).for_each(|limb| {
        let src = limb.to_vec();
        heinfer_math::automorphism::permute_into(&src, table, limb);
    });
}

// The expansion of the secret key from its ternary coefficients must be reproducible for
// serialization; keep `from_ternary` crate-visible.
impl KeyGenerator {
    pub(crate) fn from_ternary_coeffs(params: &CkksParams, coeffs: Vec<i8>) -> Self {
        Self::from_ternary(params, coeffs)
    }
}

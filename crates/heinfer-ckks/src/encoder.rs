//! The CKKS encoder: complex vectors ↔ polynomials through the canonical embedding.
//!
//! Slot `j` holds the evaluation of the message polynomial at `ζ^{5^j mod 2N}`,
//! `ζ = e^{iπ/N}`; the conjugate slots are implied, so the polynomial is real. Encoding computes
//! `m = ⌊Δ·σ^{-1}(z)⌉` with the O(N log N) "special FFT" of Cheon et al. (HEAAN) in f64, reduces
//! it modulo each prime and applies the NTT. Decoding inverts the NTT, reconstructs the
//! centered integer coefficients from the first two limbs (CRT over `q_0·q_1`, exact while
//! `|coefficients| < q_0·q_1/2`; `q_0` alone at level 0), divides by `Δ` and applies the forward
//! special FFT.
//!
//! Real vectors fill the real parts; complex packing (nGraph-HE2 §3.1.2) puts a second real
//! vector in the imaginary parts.

use crate::ciphertext::{check_scale, Plaintext};
use crate::compact::{narrow_into, CompactPlaintext, WordsMut};
use crate::error::{CkksError, Result};
use crate::fft::SpecialFft;
use crate::keygen::basis_indices;
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use num_complex::Complex64;
use rayon::prelude::*;
use std::sync::Arc;

/// The error for a value that is NaN or infinite.
const NOT_FINITE: &str = "a value is NaN or infinite";

/// Encodes and decodes vectors of up to `N/2` complex values.
pub struct Encoder {
    params: CkksParams,
    /// The special FFT of the embedding (vectorized, [`crate::fft`]; shared by every encoder
    /// of the same parameters).
    fft: Arc<SpecialFft>,
}

impl Encoder {
    /// An encoder for `params`.
    pub fn new(params: &CkksParams) -> Self {
        Self {
            params: params.clone(),
            fft: params.special_fft(),
        }
    }

    /// Number of slots `N/2`.
    pub fn slots(&self) -> usize {
        self.params.slots()
    }

    /// Encodes real values (zero-padded to `N/2` slots) at `scale` and `level`.
    pub fn encode_real(&self, values: &[f64], scale: f64, level: usize) -> Result<Plaintext> {
        let z: Vec<Complex64> = values.iter().map(|&x| Complex64::new(x, 0.0)).collect();
        self.encode(&z, scale, level)
    }

    /// Encodes complex values (zero-padded to `N/2` slots) at `scale` and `level`.
    ///
    /// Fails if there are more than `N/2` values, a value is not finite, or a scaled
    /// coefficient does not fit below `Q_ℓ/2` (no silent wrap-around).
    pub fn encode(&self, values: &[Complex64], scale: f64, level: usize) -> Result<Plaintext> {
        self.encode_in_basis(values, scale, level, false)
    }

    /// Encodes with the special primes `P` as extra limbs, for multiplying extended
    /// ciphertexts ([`crate::ExtendedCiphertext`]) in baby-step giant-step sums.
    pub fn encode_extended(
        &self,
        values: &[Complex64],
        scale: f64,
        level: usize,
    ) -> Result<Plaintext> {
        self.encode_in_basis(values, scale, level, true)
    }

    fn encode_in_basis(
        &self,
        values: &[Complex64],
        scale: f64,
        level: usize,
        extended: bool,
    ) -> Result<Plaintext> {
        let (coeffs, max) = self.embed_inverse(values, scale, level)?;
        let n = self.params.n();
        let inner = self.params.inner();
        let idx = basis_indices(&self.params, level, extended);
        let mut poly = RnsPoly::zero(n, idx.len());
        poly.data
            .par_chunks_mut(n)
            .zip(idx.par_iter())
            .for_each(|(limb, &mi)| {
                reduce_coefficients(limb, &coeffs, max, &inner.moduli[mi]);
                inner.ntt[mi].forward(limb);
            });
        Ok(Plaintext {
            params_id: self.params.id(),
            poly,
            level,
            scale,
        })
    }

    /// [`Self::encode`] (or, `extended`, [`Self::encode_extended`]) straight into a
    /// [`CompactPlaintext`] (see [`Self::encode_compact_many`]).
    pub fn encode_compact(
        &self,
        values: &[Complex64],
        scale: f64,
        level: usize,
        extended: bool,
    ) -> Result<CompactPlaintext> {
        let mut one = self.encode_compact_many(&[values], scale, level, extended)?;
        Ok(one.remove(0))
    }

    /// Every row of `rows` encoded as [`Self::encode_compact`] would, in parallel, into one
    /// buffer shared by the results (freed with the last of them, see
    /// [`CompactPlaintext`]): the same residues as [`Self::encode`], each 32-bit limb reduced
    /// in a per-thread scratch limb and written narrow — transformed in its 32-bit words
    /// where the plan runs the 32-bit transform ([`heinfer_math::NttPlan::forward_words32`]),
    /// in the scratch limb otherwise — so no 64-bit plaintext is allocated on the way. The
    /// first error fails the call.
    pub fn encode_compact_many<R: AsRef<[Complex64]> + Sync>(
        &self,
        rows: &[R],
        scale: f64,
        level: usize,
        extended: bool,
    ) -> Result<Vec<CompactPlaintext>> {
        let n = self.params.n();
        let inner = self.params.inner();
        let idx = basis_indices(&self.params, level, extended);
        let moduli: Vec<u64> = idx.iter().map(|&mi| inner.moduli[mi].q).collect();
        let head = (self.params.id(), level, scale, n);
        CompactPlaintext::batch(head, &moduli, rows.len(), |r, parts| {
            let (coeffs, max) = self.embed_inverse(rows[r].as_ref(), scale, level)?;
            parts
                .into_par_iter()
                .zip(idx.par_iter())
                .for_each(|(part, &mi)| match part {
                    WordsMut::Wide(limb) => {
                        reduce_coefficients(limb, &coeffs, max, &inner.moduli[mi]);
                        inner.ntt[mi].forward(limb);
                    }
                    WordsMut::Narrow(words) => {
                        let mut limb = crate::scratch::take(n);
                        reduce_coefficients(&mut limb, &coeffs, max, &inner.moduli[mi]);
                        let ntt = &inner.ntt[mi];
                        if ntt.kernel() == heinfer_math::NttKernel::TfheNtt32 {
                            narrow_into(words, &limb);
                            ntt.forward_words32(words);
                        } else {
                            ntt.forward(&mut limb);
                            narrow_into(words, &limb);
                        }
                        crate::scratch::give(limb);
                    }
                });
            Ok(())
        })
    }

    /// `⌊Δ·σ^{-1}(z)⌉` as f64 integers, checked against `Q_ℓ/2`, and their largest magnitude.
    pub(crate) fn embed_inverse(
        &self,
        values: &[Complex64],
        scale: f64,
        level: usize,
    ) -> Result<(Vec<f64>, f64)> {
        let n = self.params.n();
        let slots = n / 2;
        let finite = values.iter().all(|v| v.re.is_finite() && v.im.is_finite());
        self.check_input(values.len(), slots, "slots", finite, scale, level)?;
        let mut z = vec![Complex64::new(0.0, 0.0); slots];
        z[..values.len()].copy_from_slice(values);
        self.fft.inverse(&mut z);
        // real parts to coefficients 0..N/2, imaginary parts to N/2..N, scaled and rounded in
        // one vectorized pass that also finds the largest magnitude
        let mut coeffs = vec![0.0f64; n];
        let (re, im) = coeffs.split_at_mut(slots);
        let pass = crate::scaled::scale_round_complex_into(re, im, &z, scale);
        if !pass.finite {
            // the values were finite (checked above): their inverse FFT overflowed
            return Err(CkksError::Encoding(
                "the values' inverse embedding overflows (a value is too large to encode)".into(),
            ));
        }
        self.check_max(pass.max_abs, scale, level)?;
        Ok((coeffs, pass.max_abs))
    }

    /// Refuses a bad scale or level, more than `capacity` values, or a value not finite.
    fn check_input(
        &self,
        count: usize,
        capacity: usize,
        what: &str,
        finite: bool,
        scale: f64,
        level: usize,
    ) -> Result<()> {
        check_scale(scale)?;
        if level > self.params.max_level() {
            return Err(CkksError::LevelOutOfRange {
                level,
                max: self.params.max_level(),
            });
        }
        if count > capacity {
            return Err(CkksError::Encoding(format!(
                "{count} values do not fit in {capacity} {what}"
            )));
        }
        if !finite {
            return Err(CkksError::Encoding(NOT_FINITE.into()));
        }
        Ok(())
    }

    /// Refuses scaled coefficients whose largest magnitude `max` reaches `Q_ℓ/2` (they would
    /// wrap around), 2^127 (the rounding's integers), or `scale·2^61` (the decoder rebuilds a
    /// coefficient from the limbs that hold `|m| < 2^61` at the scale: beyond, it would come
    /// back wrapped, silently).
    fn check_max(&self, max: f64, scale: f64, level: usize) -> Result<()> {
        let log_q = self.params.log_q_at(level);
        if max.is_nan() || max <= 0.0 {
            return Ok(());
        }
        let why = if max.log2() + 1.0 >= log_q {
            format!("beyond Q_{level}/2 = 2^{:.1}", log_q - 1.0)
        } else if max >= 1.6e38 {
            "beyond the 2^127 the encoder's integers hold".to_string()
        } else if max / scale >= 2f64.powi(61) {
            format!(
                "{:.1} bits above the scale: values of 2^61 and more cannot be decoded",
                (max / scale).log2()
            )
        } else {
            return Ok(());
        };
        Err(CkksError::Encoding(format!(
            "scaled coefficients reach 2^{:.1}, {why}: lower the scale or the values",
            max.log2()
        )))
    }

    /// Decodes a plaintext to `N/2` complex values.
    pub fn decode(&self, pt: &Plaintext) -> Result<Vec<Complex64>> {
        let slots = self.params.slots();
        // the centered coefficients are message plus decryption error: zeroed when dropped
        let values = zeroize::Zeroizing::new(self.decode_coefficients(pt)?);
        let mut z: Vec<Complex64> = (0..slots)
            .map(|i| Complex64::new(values[i], values[i + slots]))
            .collect();
        self.fft.forward(&mut z);
        Ok(z)
    }

    /// `round(Δ·v_j)` as the coefficients of a plaintext (coefficient packing, see
    /// [`crate::KeyGenerator::encrypt_coefficients`]), checked like [`Self::encode`]: at most
    /// `N` finite values whose scaled magnitude stays below `Q_ℓ/2`.
    pub fn scaled_coefficients(
        &self,
        values: &[f64],
        scale: f64,
        level: usize,
    ) -> Result<Vec<f64>> {
        let n = self.params.n();
        // the count, scale and level first (more than `n` values would not all be written)
        self.check_input(values.len(), n, "coefficients", true, scale, level)?;
        let mut coeffs = vec![0.0f64; n];
        // rounding, finiteness and the largest magnitude in one vectorized pass
        let pass = crate::scaled::scale_round_into(&mut coeffs, values, scale);
        if !pass.finite {
            return Err(CkksError::Encoding(NOT_FINITE.into()));
        }
        self.check_max(pass.max_abs, scale, level)?;
        Ok(coeffs)
    }

    /// Decodes a coefficient-packed plaintext: its `N` centered coefficients over the scale.
    pub fn decode_coefficients(&self, pt: &Plaintext) -> Result<Vec<f64>> {
        self.params.check_id(pt.params_id)?;
        let inner = self.params.inner();
        // enough limbs for |m| < 2^61 (fewer inverse NTTs than all ℓ+1 limbs, same result)
        let limbs = self.decode_limbs(pt);
        // coefficients of a decrypted message with its error: zeroed when dropped
        let mut coef: zeroize::Zeroizing<Vec<Vec<u64>>> =
            zeroize::Zeroizing::new((0..limbs).map(|i| pt.poly.limb(i).to_vec()).collect());
        for (i, c) in coef.iter_mut().enumerate() {
            inner.ntt[i].inverse(c);
        }
        let inv_scale = 1.0 / pt.scale;
        let mut out = centered_crt(&inner.moduli[..limbs], &coef);
        out.iter_mut().for_each(|v| *v *= inv_scale);
        Ok(out)
    }

    /// Limbs enough to reconstruct `|m| < 2^61` at the plaintext's scale: `Q_k ≥ Δ·2^62`.
    fn decode_limbs(&self, pt: &Plaintext) -> usize {
        let inner = self.params.inner();
        let need = pt.scale.log2() + 62.0;
        let mut limbs = 1;
        let mut bits = (inner.q[0] as f64).log2();
        while limbs <= pt.level && bits < need {
            bits += (inner.q[limbs] as f64).log2();
            limbs += 1;
        }
        limbs
    }

    /// Decodes the real parts.
    pub fn decode_real(&self, pt: &Plaintext) -> Result<Vec<f64>> {
        Ok(self.decode(pt)?.into_iter().map(|z| z.re).collect())
    }
}

/// The centered integers `x ∈ (−Q/2, Q/2]` of the residues `coef[i][c] = x mod q_i`, as f64,
/// over the given limbs (Garner's mixed-radix reconstruction).
///
/// With `h = ⌊Q/2⌋`, whose mixed-radix digits are `(q_i − 1)/2`, the residues of
/// `y = x + h mod Q ∈ [0, Q)` are turned into digits `t_i`, and `x = y − h = Σ (t_i − h_i)·W_i`
/// (`W_i = q_0⋯q_{i−1}`) is evaluated by Horner's rule from the top digit with small signed
/// digit differences, so no large terms cancel: the result has f64's relative precision.
pub(crate) fn centered_crt(moduli: &[heinfer_math::Modulus], coef: &[Vec<u64>]) -> Vec<f64> {
    let k = moduli.len();
    let n = coef[0].len();
    let half: Vec<u64> = moduli.iter().map(|m| (m.q - 1) / 2).collect();
    if k == 1 {
        let q = moduli[0].q;
        return coef[0]
            .iter()
            .map(|&x| {
                if x > q / 2 {
                    -((q - x) as f64)
                } else {
                    x as f64
                }
            })
            .collect();
    }
    // h mod q_i = (q_i − 1)·2^{-1}… computed from the digits: h = Σ_j half_j·W_j
    let h_mod: Vec<u64> = moduli
        .iter()
        .map(|mi| {
            let mut acc = 0u64;
            let mut w = 1u64;
            for (j, mj) in moduli.iter().enumerate() {
                acc = mi.add(acc, mi.mul(half[j] % mi.q, w));
                w = mi.mul(w, mj.q % mi.q);
            }
            acc
        })
        .collect();
    // inv[i][j] = q_j^{-1} mod q_i for j < i
    let inv: Vec<Vec<(u64, u64)>> = (0..k)
        .map(|i| {
            (0..i)
                .map(|j| {
                    let v = moduli[i].inv(moduli[j].q % moduli[i].q);
                    (v, moduli[i].shoup(v))
                })
                .collect()
        })
        .collect();
    let one: Vec<u64> = moduli.iter().map(|m| m.shoup(1)).collect();
    let mut out = vec![0f64; n];
    let mut t = vec![0u64; k];
    for (c, o) in out.iter_mut().enumerate() {
        for i in 0..k {
            let m = &moduli[i];
            let mut x = m.add(coef[i][c], h_mod[i]);
            for j in 0..i {
                let (w, ws) = inv[i][j];
                // Shoup multiplication by 1 reduces any 64-bit word (no division)
                x = m.mul_shoup(m.sub(x, m.mul_shoup(t[j], 1, one[i])), w, ws);
            }
            t[i] = x;
        }
        let mut acc = 0f64;
        for i in (0..k).rev() {
            acc = acc * moduli[i].q as f64 + (t[i] as f64 - half[i] as f64);
        }
        *o = acc;
    }
    zeroize::Zeroize::zeroize(&mut t);
    out
}

/// `limb[j] = coeffs[j] mod q` for integer-valued `coeffs` whose magnitudes are below `max`
/// (the f64 reduction below `2^52`, else through `i64` or `i128`).
fn reduce_coefficients(limb: &mut [u64], coeffs: &[f64], max: f64, m: &heinfer_math::Modulus) {
    if max < 4.0e15 && m.q < (1u64 << 50) {
        heinfer_math::vecops::reduce_f64_into(limb, coeffs, m.q);
    } else if max < 9.2e18 {
        for (x, &c) in limb.iter_mut().zip(coeffs) {
            *x = m.reduce_i64(c as i64);
        }
    } else {
        for (x, &c) in limb.iter_mut().zip(coeffs) {
            *x = m.reduce_i128(c as i128);
        }
    }
}

//! SIMD batching: `N` slots mod `p` ↔ a plaintext polynomial, and its two encodings.
//!
//! * [`BatchEncoder::encode`]: `Δ·m` over `Q` — what is encrypted and what `add_plain` adds.
//! * [`BatchEncoder::encode_multiplier`]: `m` with centered coefficients in `(−p/2, p/2]`
//!   over `Q` — what `mul_plain` multiplies by (the product's noise grows with `‖m‖`, so the
//!   centered lift keeps it half as large as `[0, p)` would).
//!
//! Slots to coefficients is one inverse NTT mod `p` after placing slot `s` at the NTT index
//! holding its root (see [`crate::params`] for the slot layout).

use crate::error::{BfvError, Result};
use crate::params::BfvParams;
use heinfer_ckks::poly::RnsPoly;
use heinfer_ckks::Plaintext;
use heinfer_math::vecops;
use rayon::prelude::*;

/// A plaintext to multiply ciphertexts by ([`crate::BfvEvaluator::mul_plain`]): the
/// centered lift of `m`, not scaled by `Δ`. A separate type, so it cannot be encrypted or
/// added by mistake.
#[derive(Debug, Clone, PartialEq)]
pub struct Multiplier(pub(crate) Plaintext);

impl Multiplier {
    /// The underlying engine plaintext (NTT form over `Q`, scale 1).
    pub fn plaintext(&self) -> &Plaintext {
        &self.0
    }
}

/// Encodes and decodes slot vectors mod `p`.
#[derive(Debug, Clone)]
pub struct BatchEncoder {
    params: BfvParams,
}

impl BatchEncoder {
    /// An encoder for `params`.
    pub fn new(params: &BfvParams) -> Self {
        Self {
            params: params.clone(),
        }
    }

    /// The parameters.
    pub fn params(&self) -> &BfvParams {
        &self.params
    }

    /// Coefficients `[0, p)` of the polynomial whose slots are `values` (fewer than `N`
    /// values: the rest are 0). Fails on more than `N` values or a value `≥ p`.
    pub fn slots_to_coefficients(&self, values: &[u64]) -> Result<Vec<u64>> {
        let inner = self.params.inner();
        let (n, t) = (self.params.n(), inner.t.q);
        if values.len() > n {
            return Err(BfvError::Encoding(format!(
                "{} values for {n} slots",
                values.len()
            )));
        }
        if let Some(v) = values.iter().find(|&&v| v >= t) {
            return Err(BfvError::Encoding(format!(
                "value {v} is not below the plaintext modulus {t}"
            )));
        }
        Ok(self.scatter_inverse(values.iter().copied()))
    }

    /// The inverse NTT mod `p` of slot values already below `p` (at most `N`, in slot order):
    /// each placed at the NTT index holding its slot's root, the rest 0.
    fn scatter_inverse(&self, values: impl Iterator<Item = u64>) -> Vec<u64> {
        let inner = self.params.inner();
        let mut a = vec![0u64; self.params.n()];
        for (v, &j) in values.zip(&inner.slot_to_ntt) {
            a[j as usize] = v;
        }
        inner.t_ntt.inverse(&mut a);
        a
    }

    /// The `N` slots of the polynomial with coefficients `coeffs` (each `< p`).
    pub fn coefficients_to_slots(&self, mut coeffs: Vec<u64>) -> Vec<u64> {
        let inner = self.params.inner();
        inner.t_ntt.forward(&mut coeffs);
        let t = &inner.t;
        inner
            .slot_to_ntt
            .iter()
            .map(|&j| t.reduce(coeffs[j as usize]))
            .collect()
    }

    /// `Δ·m` in NTT form over `Q` for slots `values`: to encrypt, or to add to a ciphertext.
    pub fn encode(&self, values: &[u64]) -> Result<Plaintext> {
        let m = self.slots_to_coefficients(values)?;
        let (inner, rlwe) = (self.params.inner(), self.params.rlwe());
        let n = rlwe.n();
        // every coefficient is below p, and every ciphertext prime above it (BfvParams): each
        // limb starts as a copy of m (written once, no zero-filled buffer first)
        let mut data = Vec::with_capacity(n * rlwe.q().len());
        for _ in rlwe.q() {
            data.extend_from_slice(&m);
        }
        data.par_chunks_mut(n).enumerate().for_each(|(i, limb)| {
            let (q, d) = (&rlwe.moduli()[i], inner.delta_mod_q[i]);
            vecops::mul_scalar_assign(limb, d, q.shoup(d), q);
            rlwe.ntt(i).forward(limb);
        });
        Ok(Plaintext::from_poly(
            rlwe,
            RnsPoly::from_data(data, n),
            self.params.level(),
            1.0,
        )?)
    }

    /// The centered lift of `m` in NTT form over `Q` for slots `values`: to multiply by.
    pub fn encode_multiplier(&self, values: &[u64]) -> Result<Multiplier> {
        let m = self.slots_to_coefficients(values)?;
        self.multiplier_from_coefficients(&m, true)
    }

    /// The multiplier of coefficients `m` (each `< p`): their centered lift into every `Q`
    /// prime, then NTT — the limbs in parallel with `parallel`, else one after another (when
    /// the caller already runs one multiplier per worker). Each limb is written once (no
    /// zero-filled buffer first).
    fn multiplier_from_coefficients(&self, m: &[u64], parallel: bool) -> Result<Multiplier> {
        let rlwe = self.params.rlwe();
        let (n, t) = (rlwe.n(), self.params.plain_modulus());
        let mut data = Vec::with_capacity(n * rlwe.q().len());
        for md in rlwe.moduli().iter().take(rlwe.q().len()) {
            // c > p/2 stands for c − p < 0, i.e. c + (q − p) mod q (branch-free)
            let shift = md.q - t;
            data.extend(
                m.iter()
                    .map(|&c| c + (u64::from(c > t / 2).wrapping_neg() & shift)),
            );
        }
        let ntt = |(i, limb): (usize, &mut [u64])| rlwe.ntt(i).forward(limb);
        if parallel {
            data.par_chunks_mut(n).enumerate().for_each(ntt);
        } else {
            data.chunks_mut(n).enumerate().for_each(ntt);
        }
        Ok(Multiplier(Plaintext::from_poly(
            rlwe,
            RnsPoly::from_data(data, n),
            self.params.level(),
            1.0,
        )?))
    }

    /// [`Self::encode_multiplier`] of every row of `values` (`rows × cols` signed integers,
    /// row-major, reduced mod `p`; `cols ≤ N`, the rest of each row's slots 0), the rows in
    /// parallel: a layer's diagonals encoded in one call, each on one worker (a
    /// multiplier's three limbs keep two workers unevenly busy).
    pub fn encode_multipliers(&self, values: &[i64], cols: usize) -> Result<Vec<Multiplier>> {
        let n = self.params.n();
        if cols == 0 || cols > n || !values.len().is_multiple_of(cols) {
            return Err(BfvError::Encoding(format!(
                "{} values in rows of {cols} for {n} slots",
                values.len()
            )));
        }
        let t = &self.params.inner().t;
        values
            .par_chunks(cols)
            .map(|row| {
                // reduced and placed in one pass (every value is below p by construction)
                let a = self.scatter_inverse(row.iter().map(|&v| t.reduce_i64(v)));
                self.multiplier_from_coefficients(&a, false)
            })
            .collect()
    }

    /// Slot values of signed integers reduced mod `p` (for weights and shares written as
    /// `i64`).
    pub fn reduce_signed(&self, values: &[i64]) -> Vec<u64> {
        let t = &self.params.inner().t;
        values.iter().map(|&v| t.reduce_i64(v)).collect()
    }
}

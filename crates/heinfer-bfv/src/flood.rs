//! Circuit privacy by noise flooding (GAZELLE §4.1): before the server sends a ciphertext
//! computed with its weights, it adds a fresh public-key encryption of zero (so `c_1` is a
//! new RLWE sample, independent of the weights) and a uniform integer error in
//! `[−2^b, 2^b)` on every coefficient of `c_0` (so the decryption error, which depends on the
//! weights through `e·m`, is hidden). Both in one engine call
//! ([`heinfer_ckks::Encryptor::encrypt_zero_with_error`]): the textbook encryption over `Q`,
//! whose `c_0` error carries the flood — a larger fresh error than the engine's `P`-scaled
//! encryption (≈ 2^18 at `N = 2^13`), invisible under a flood of 2^60 and more, and a third
//! of the transforms.
//!
//! **Statistical distance.** For one coefficient with error `|e| ≤ B`, `e + U[−2^b, 2^b)`
//! and `U[−2^b, 2^b)` are at distance `|e|/2^{b+1} ≤ B/2^{b+1}`; over `N` coefficients
//! at most `N·B/2^{b+1}`. [`flood_bits`] picks `b = ⌈log2 B⌉ + λ + log2 N` for distance
//! at most `2^{−λ−1}`; decryption stays correct while `2^b + B` is below `Δ/2`, which
//! [`Rerandomizer::rerandomize`] checks.
//!
//! **Compact results.** Flooding needs a large `Q`, but only until the noise is flooded:
//! [`Rerandomizer::rerandomize_compact`] then switches the ciphertext down to the fewest primes
//! `Q_ℓ = q_0·…·q_ℓ` that still decrypt it (`c ↦ ⌊c·Q_ℓ/Q⌉`, the engine's rescale by each
//! dropped prime). The error becomes `e·Q_ℓ/Q + r` with the rounding `|r| ≤ (1 + N)/2` (a
//! ternary secret) plus at most `p` from `⌊Q/p⌋·Q_ℓ/Q ≠ ⌊Q_ℓ/p⌋`, and must stay below
//! `Δ_ℓ/2 = ⌊Q_ℓ/p⌋/2` with the same 3 bits of margin; it then travels rounded
//! ([`crate::rounding`]). Switching is public and applied to
//! the flooded ciphertext — the client could do it itself — so it hides exactly as much; a
//! result then travels in one or two primes instead of all of them (a third of the bytes at
//! the protocol's parameters).

use crate::decrypt::check_ciphertext;
use crate::error::{BfvError, Result};
use crate::params::BfvParams;
use heinfer_ckks::{Ciphertext, Encryptor, Evaluator, PublicKey};
use heinfer_math::prg::AesCtr;
use rand_core::{RngCore, SeedableRng};
use zeroize::Zeroize;

/// Largest flooding exponent: `U[−2^b, 2^b)` is drawn as `hi·2^64 + lo` with `lo` uniform
/// in `[0, 2^64)` and `hi` uniform in `[−2^{b−64}, 2^{b−64})` from `b − 63 ≤ 126` random bits
/// of a 128-bit word (above 125 bits; below, from `b + 1` bits of one word).
pub const MAX_FLOOD_BITS: u32 = 189;

/// Largest flooding exponent drawn as one 128-bit word.
const NARROW_FLOOD_BITS: u32 = 125;

/// Statistical security of flooding in bits (λ), the and GAZELLE's choice.
pub const STATISTICAL_BITS: u32 = 40;

/// Flooding bits `b` hiding an error of at most `2^noise_bits` per coefficient in a ring of
/// degree `2^log_n` with statistical distance below `2^{−stat_bits−1}`.
pub fn flood_bits(noise_bits: u32, log_n: u32, stat_bits: u32) -> u32 {
    // saturating: a sum past u32 is refused by `rerandomize` (above `max_flood_bits`), never
    // wrapped to a small flood
    noise_bits.saturating_add(stat_bits).saturating_add(log_n)
}

/// Re-randomizes ciphertexts with a public key and floods their noise (server side).
pub struct Rerandomizer {
    params: BfvParams,
    enc: Encryptor,
    ev: Evaluator,
}

impl Rerandomizer {
    /// A re-randomizer with the client's public key.
    pub fn new(params: &BfvParams, pk: &PublicKey) -> Result<Self> {
        Ok(Self {
            params: params.clone(),
            enc: Encryptor::new(params.rlwe(), pk)?,
            ev: Evaluator::new(params.rlwe()),
        })
    }

    /// Largest flooding `b` these parameters decrypt through with an error of `2^noise_bits`:
    /// `2^{b+1} ≤ Δ/16` (the flood, the error it hides and the fresh encryption's below
    /// `2^{b+1}`, with the 4 bits of margin [`crate::rounding::compact_level`] asks of every
    /// level, so that a result flooded this much still switches down).
    /// At most [`MAX_FLOOD_BITS`] (the sampler's widest draw).
    pub fn max_flood_bits(&self) -> u32 {
        let log_delta = self.params.log_q() - (self.params.plain_modulus() as f64).log2();
        (log_delta.floor() as u32)
            .saturating_sub(5)
            .min(MAX_FLOOD_BITS)
    }

    /// `ct + Enc_pk(0) + (e, 0)`, `e` uniform in `[−2^b, 2^b)` per coefficient (OS-seeded).
    pub fn rerandomize(&self, ct: &Ciphertext, b: u32) -> Result<Ciphertext> {
        check_ciphertext(&self.params, ct, "rerandomize")?;
        if b > self.max_flood_bits() {
            return Err(BfvError::InvalidParameters(format!(
                "flooding with 2^{b} does not fit these parameters (at most 2^{}: Δ = ⌊Q/p⌋ is {:.1} bits)",
                self.max_flood_bits(),
                self.params.log_q() - (self.params.plain_modulus() as f64).log2()
            )));
        }
        let rlwe = self.params.rlwe();
        // the engine's stream (AES-256-CTR), keyed from the OS
        let mut rng = AesCtr::from_seed(heinfer_math::sampler::os_seed()?);
        // a fresh encryption of zero whose c_0 error carries the flood: one set of transforms
        let fresh = if b <= NARROW_FLOOD_BITS {
            let mut e = uniform_centered(&mut rng, rlwe.n(), b);
            let fresh = self.enc.encrypt_zero_with_error(self.params.level(), &e);
            e.zeroize();
            fresh
        } else {
            let (mut hi, mut lo) = uniform_centered_wide(&mut rng, rlwe.n(), b);
            let fresh = self
                .enc
                .encrypt_zero_with_wide_error(self.params.level(), &hi, &lo);
            hi.zeroize();
            lo.zeroize();
            fresh
        };
        let mut fresh = fresh?;
        self.ev.add_assign(&mut fresh, ct)?;
        Ok(fresh)
    }

    /// The level a result flooded with `2^b` is switched down to:
    /// [`crate::rounding::compact_level`].
    pub fn compact_level(&self, b: u32) -> usize {
        crate::rounding::compact_level(&self.params, b)
    }

    /// [`Self::rerandomize`], then the result switched down to [`Self::compact_level`]`(b)`:
    /// the same message, flooded the same way, in fewer bytes.
    pub fn rerandomize_compact(&self, ct: &Ciphertext, b: u32) -> Result<Ciphertext> {
        let mut c = self.rerandomize(ct, b)?;
        let level = self.compact_level(b);
        if level == self.params.level() {
            return Ok(c);
        }
        // the engine's rescale divides by the last prime with rounding; its scale bookkeeping
        // is given the product of the dropped primes (rounded up, so it ends at ≥ 1) and reset
        let dropped: f64 = self.params.rlwe().q()[level + 1..]
            .iter()
            .map(|&q| q as f64)
            .product();
        c.set_scale(dropped * (1.0 + 1e-9))?;
        for _ in level..self.params.level() {
            self.ev.rescale_assign(&mut c)?;
        }
        c.set_scale(1.0)?;
        Ok(c)
    }
}

/// `n` integers uniform in `[−2^b, 2^b)`: the low `b + 1` bits of each 16 random bytes, less
/// `2^b` (every draw kept: no rejection, no data-dependent branch). The bytes are drawn
/// [`DRAW_BYTES`] at a time into one reused buffer, wiped once at the end.
pub(crate) fn uniform_centered(rng: &mut impl RngCore, n: usize, b: u32) -> Vec<i128> {
    assert!(b <= NARROW_FLOOD_BITS, "flooding bound out of range");
    let mask: u128 = (1u128 << (b + 1)) - 1;
    let half = 1i128 << b;
    let mut out = Vec::with_capacity(n);
    let mut buf = [0u8; DRAW_BYTES];
    while out.len() < n {
        let take = (n - out.len()).min(DRAW_BYTES / 16);
        let bytes = &mut buf[..16 * take];
        rng.fill_bytes(bytes);
        out.extend(
            bytes.chunks_exact(16).map(|w| {
                (u128::from_le_bytes(w.try_into().expect("16 bytes")) & mask) as i128 - half
            }),
        );
    }
    buf.zeroize();
    out
}

/// `n` integers uniform in `[−2^b, 2^b)` for `64 ≤ b ≤` [`MAX_FLOOD_BITS`], as `hi·2^64 + lo`:
/// `lo` uniform in `[0, 2^64)` and, independently, `hi` uniform in `[−2^{b−64}, 2^{b−64})`
/// ([`uniform_centered`]), so each of the `2^{b+1}` values is taken by exactly one pair.
pub(crate) fn uniform_centered_wide(
    rng: &mut impl RngCore,
    n: usize,
    b: u32,
) -> (Vec<i128>, Vec<u64>) {
    assert!(
        (64..=MAX_FLOOD_BITS).contains(&b),
        "flooding bound out of range"
    );
    let hi = uniform_centered(rng, n, b - 64);
    let mut bytes = vec![0u8; 8 * n];
    rng.fill_bytes(&mut bytes);
    let lo = bytes
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        .collect();
    bytes.zeroize();
    (hi, lo)
}

/// Random bytes per draw of [`uniform_centered`] (256 values).
const DRAW_BYTES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine's encryption of zero with an extra `c_0` error, as the flooding uses it:
    /// an extra error of `Δ·m` (the message `m`'s coefficients scaled) decrypts to `m`, with
    /// the fresh error far below `Δ/2`.
    #[test]
    fn an_extra_error_of_delta_m_decrypts_to_m() {
        use crate::{presets, BatchEncoder, Decryptor};
        use heinfer_ckks::KeyGenerator;
        let params = presets::insecure_logn10().unwrap();
        let kg = KeyGenerator::new(params.rlwe()).unwrap();
        let enc = Encryptor::new(params.rlwe(), &kg.public_key().unwrap()).unwrap();
        let p = params.plain_modulus();
        let values: Vec<u64> = (0..params.n() as u64).map(|i| (i * 7919 + 5) % p).collect();
        let coeffs = BatchEncoder::new(&params)
            .slots_to_coefficients(&values)
            .unwrap();
        let q: u128 = params.rlwe().q().iter().map(|&x| u128::from(x)).product();
        let delta = (q / u128::from(p)) as i128;
        let extra: Vec<i128> = coeffs.iter().map(|&c| delta * c as i128).collect();
        let ct = enc.encrypt_zero_with_error(params.level(), &extra).unwrap();
        let dec = Decryptor::new(&params, kg.secret_key()).unwrap();
        assert_eq!(dec.decrypt(&ct).unwrap(), values);
        // the fresh error (e·u + e_0 + e_1·s, N = 1024) leaves most of Δ: log2 Δ ≈ 80
        assert!(dec.noise_budget(&ct).unwrap() > 50.0);
        assert!(enc
            .encrypt_zero_with_error(params.level(), &extra[1..])
            .is_err());
    }

    /// The sampler's distribution: every value in `[−2^b, 2^b)`, each of the `2^{b+1}` values
    /// about equally often, and both ends reached.
    #[test]
    fn uniform_centered_is_uniform_on_its_range() {
        let mut rng = AesCtr::from_seed([7u8; 32]);
        let b = 2;
        let v = uniform_centered(&mut rng, 50_000, b);
        assert_eq!(v.len(), 50_000);
        let mut counts = [0usize; 8];
        for &x in &v {
            assert!((-4..4).contains(&x), "{x}");
            counts[(x + 4) as usize] += 1;
        }
        // 50,000 / 8 = 6,250 each; a standard deviation of ~74
        assert!(
            counts.iter().all(|&c| (5_900..6_600).contains(&c)),
            "{counts:?}"
        );
        let wide = uniform_centered(&mut rng, 4096, 120);
        assert!(wide
            .iter()
            .all(|&x| (-(1i128 << 120)..1i128 << 120).contains(&x)));
        assert!(
            wide.iter().any(|&x| x > 1i128 << 118) && wide.iter().any(|&x| x < -(1i128 << 118))
        );
    }

    /// The wide sampler: `hi·2^64 + lo` in `[−2^b, 2^b)`, `hi` uniform on its `2^{b−63}`
    /// values, `lo`'s top and bottom bits each set about half the time, both ends reached.
    #[test]
    fn uniform_centered_wide_is_uniform_on_its_range() {
        let mut rng = AesCtr::from_seed([9u8; 32]);
        let (hi, lo) = uniform_centered_wide(&mut rng, 40_000, 66);
        assert_eq!((hi.len(), lo.len()), (40_000, 40_000));
        let mut counts = [0usize; 8];
        for &h in &hi {
            assert!((-4..4).contains(&h), "{h}");
            counts[(h + 4) as usize] += 1;
        }
        // 5,000 each; a standard deviation of ~66
        assert!(
            counts.iter().all(|&c| (4_700..5_300).contains(&c)),
            "{counts:?}"
        );
        for bit in [0, 31, 63] {
            let ones = lo.iter().filter(|&&x| x >> bit & 1 == 1).count();
            assert!((19_000..21_000).contains(&ones), "bit {bit}: {ones}");
        }
        let (hi, _) = uniform_centered_wide(&mut rng, 4096, MAX_FLOOD_BITS);
        let top = 1i128 << (MAX_FLOOD_BITS - 64);
        assert!(hi.iter().all(|&h| (-top..top).contains(&h)));
        assert!(hi.iter().any(|&h| h > top / 4) && hi.iter().any(|&h| h < -top / 4));
    }

    /// A flood wider than one 128-bit word (2^150 on four 55-bit primes, N = 2^10) decrypts
    /// to the message, and the error it leaves is that wide: the noise budget drops by about
    /// the flood's bits.
    #[test]
    fn a_wide_flood_decrypts_and_floods() {
        use crate::{BatchEncoder, Decryptor};
        use heinfer_ckks::KeyGenerator;
        let params = BfvParams::new_insecure_for_tests(crate::BfvParamsLiteral {
            log_n: 10,
            log_q: vec![55, 55, 55, 55],
            log_p: vec![55],
            plain_modulus: crate::presets::PLAIN_MODULUS_20,
            security: heinfer_ckks::SecurityLevel::InsecureTestOnly,
        })
        .unwrap();
        let kg = KeyGenerator::new(params.rlwe()).unwrap();
        let pk = kg.public_key().unwrap();
        let p = params.plain_modulus();
        let values: Vec<u64> = (0..params.n() as u64).map(|i| (i * 31 + 7) % p).collect();
        let ct = Encryptor::new(params.rlwe(), &pk)
            .unwrap()
            .encrypt(&BatchEncoder::new(&params).encode(&values).unwrap())
            .unwrap();
        let rr = Rerandomizer::new(&params, &pk).unwrap();
        assert_eq!(rr.max_flood_bits(), MAX_FLOOD_BITS);
        let dec = Decryptor::new(&params, kg.secret_key()).unwrap();
        let before = dec.noise_budget(&ct).unwrap();
        let flooded = rr.rerandomize(&ct, 150).unwrap();
        assert_eq!(dec.decrypt(&flooded).unwrap(), values);
        let after = dec.noise_budget(&flooded).unwrap();
        // the budget is log2(Δ/2) − log2|e|: the flood's 2^150 leaves Δ's bits less ~150
        let log_delta = params.log_q() - (p as f64).log2();
        assert!(
            (log_delta - 153.0..log_delta - 148.0).contains(&after),
            "{before} → {after}"
        );
        assert!(rr.rerandomize(&ct, rr.max_flood_bits() + 1).is_err());
    }
}

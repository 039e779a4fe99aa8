//! BFV parameters: the RLWE ring and moduli (checked by the engine's CKKS parameter code, so
//! the security table, prime generation, NTT plans and key-switching tables are the same
//! ones), plus a plaintext prime `p ≡ 1 (mod 2N)` with its own NTT for SIMD batching.
//!
//! * Ciphertext modulus `Q = q_0·…·q_{k−1}` (all primes are used at every step: BFV does not
//!   rescale); special primes `P` for hybrid key switching (rotations, public key).
//! * A message `m ∈ Z_p[X]/(X^N+1)` is encrypted as `Δ·m + e` with `Δ = ⌊Q/p⌋`; decryption is
//!   correct while the invariant noise `|p·e/Q| < 1/2` ([`crate::Decryptor::noise_budget`]).
//! * Slots: `m` evaluated at the `N` primitive `2N`-th roots of unity mod `p`, arranged as two
//!   rows of `N/2` (SEAL's layout): slot `j < N/2` of row 0 is `m(ψ^{5^j})`, of row 1
//!   `m(ψ^{−5^j})`. The Galois element `5^k` rotates both rows left by `k`; `2N − 1` swaps them.

use crate::error::{BfvError, Result};
use heinfer_ckks::{CkksParams, CkksParamsLiteral, SecurityLevel};
use heinfer_math::automorphism::bit_reverse;
use heinfer_math::primes::is_prime;
use heinfer_math::{Modulus, NttPlan};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Smallest plaintext prime: below it a share carries too few bits to be useful.
pub const MIN_PLAIN_BITS: u32 = 12;
/// Largest plaintext prime: shares and products of the garbled circuits stay below 2^40.
pub const MAX_PLAIN_BITS: u32 = 40;

/// Unchecked BFV parameters, as a user writes them; [`BfvParams::new`] checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfvParamsLiteral {
    /// `log2 N` (11..=16; 10 for insecure test parameters).
    pub log_n: u32,
    /// Bit sizes of the ciphertext primes `q_0..q_{k−1}` (17..=61 bits each).
    pub log_q: Vec<u32>,
    /// Bit sizes of the special primes (key switching: rotations and the public key). At
    /// least one.
    pub log_p: Vec<u32>,
    /// The plaintext prime `p`: `p ≡ 1 (mod 2N)`, 12..=40 bits.
    pub plain_modulus: u64,
    /// Security level enforced on `log2(Q·P)` with the HomomorphicEncryption.org table.
    pub security: SecurityLevel,
}

/// Checked, immutable BFV parameters with their precomputations. Cheap to clone (`Arc`).
#[derive(Clone)]
pub struct BfvParams {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub lit: BfvParamsLiteral,
    pub rlwe: CkksParams,
    pub id: u64,
    /// The plaintext prime with its reduction constants and NTT.
    pub t: Modulus,
    pub t_ntt: NttPlan,
    /// `slot ↦` index of the plaintext NTT's output holding that slot.
    pub slot_to_ntt: Vec<u32>,
    /// `Δ mod q_i`.
    pub delta_mod_q: Vec<u64>,
    /// `[i][j] = (q_0·…·q_{j−1}) mod q_i` for `j < i` (Garner's mixed radix).
    pub prefix_mod_q: Vec<Vec<u64>>,
    /// `(q_0·…·q_{i−1})^{−1} mod q_i`.
    pub prefix_inv: Vec<u64>,
    /// `[ℓ]`: mixed-radix digits of `(Q_ℓ+1)/2` for `Q_ℓ = q_0·…·q_ℓ`, for rounding at level `ℓ`.
    pub half_digits: Vec<Vec<u64>>,
}

impl std::fmt::Debug for BfvParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BfvParams(logN={}, p={}, logQ={:.1}, logQP={:.1}, id={:#018x})",
            self.log_n(),
            self.plain_modulus(),
            self.log_q(),
            self.rlwe().log_qp(),
            self.id()
        )
    }
}

impl BfvParams {
    /// Checks a literal against the security table and builds the parameters.
    pub fn new(lit: BfvParamsLiteral) -> Result<Self> {
        if lit.security == SecurityLevel::InsecureTestOnly {
            return Err(BfvError::InvalidParameters(
                "the insecure test level is only available through BfvParams::new_insecure_for_tests".into(),
            ));
        }
        Self::build(lit)
    }

    /// Builds parameters **without any security guarantee**, for `INSECURE_*` tests only.
    pub fn new_insecure_for_tests(mut lit: BfvParamsLiteral) -> Result<Self> {
        lit.security = SecurityLevel::InsecureTestOnly;
        Self::build(lit)
    }

    fn build(lit: BfvParamsLiteral) -> Result<Self> {
        let n = 1u64 << lit.log_n.min(20);
        let t = lit.plain_modulus;
        let bits = 64 - t.leading_zeros();
        if !(MIN_PLAIN_BITS..=MAX_PLAIN_BITS).contains(&bits) || !is_prime(t) || t % (2 * n) != 1 {
            return Err(BfvError::InvalidParameters(format!(
                "the plaintext modulus {t} must be a prime of {MIN_PLAIN_BITS}..={MAX_PLAIN_BITS} bits with p ≡ 1 (mod 2N = {})",
                2 * n
            )));
        }
        if lit.log_p.is_empty() {
            return Err(BfvError::InvalidParameters(
                "BFV needs at least one special prime (public key, rotations)".into(),
            ));
        }
        if lit.log_q.iter().any(|&b| b <= bits + 1) {
            return Err(BfvError::InvalidParameters(format!(
                "every ciphertext prime must be larger than the plaintext modulus ({bits} bits)"
            )));
        }
        let ckks = CkksParamsLiteral {
            log_n: lit.log_n,
            log_q: lit.log_q.clone(),
            log_p: lit.log_p.clone(),
            // unused by BFV (no rescale, no real encoding); the engine wants q_0 above it
            log_scale: 10,
            digits: None,
            security: lit.security,
        };
        let rlwe = if lit.security == SecurityLevel::InsecureTestOnly {
            CkksParams::new_insecure_for_tests(ckks)?
        } else {
            CkksParams::new(ckks)?
        };
        // Δ = ⌊Q/p⌋ must exceed twice a fresh public-key encryption's noise: `e·u + e_1 + e_0·s`,
        // whose coefficients have a deviation about σ·√(4N/3); at six deviations that asks
        // log2 Δ ≥ log2(12σ) + ½·log2(4N/3) ≈ 5.5 + log2(N)/2. Below it even a fresh encryption
        // decrypts wrong.
        let log_q: f64 = rlwe.q().iter().map(|&q| (q as f64).log2()).sum();
        let room = log_q - (t as f64).log2();
        let need = 5.5 + lit.log_n as f64 / 2.0;
        if room < need {
            return Err(BfvError::InvalidParameters(format!(
                "Q = 2^{log_q:.1} over p = 2^{:.1} leaves Δ = 2^{room:.1}: a fresh encryption's noise \
                 needs 2^{need:.1} at N = 2^{}; add ciphertext primes or take a smaller p",
                (t as f64).log2(),
                lit.log_n
            )));
        }
        if rlwe.q().iter().chain(rlwe.p()).any(|&q| q == t) {
            return Err(BfvError::InvalidParameters(format!(
                "the plaintext modulus {t} is one of the ciphertext primes"
            )));
        }
        let inner = precompute(lit, rlwe)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// The literal these parameters were built from.
    pub fn literal(&self) -> &BfvParamsLiteral {
        &self.inner.lit
    }
    /// The RLWE parameters underneath: keys ([`heinfer_ckks::KeyGenerator`]), the evaluator's
    /// additions, rotations and hoisting, and serialization all run on them.
    pub fn rlwe(&self) -> &CkksParams {
        &self.inner.rlwe
    }
    /// `log2 N`.
    pub fn log_n(&self) -> u32 {
        self.inner.lit.log_n
    }
    /// Ring degree `N` (also the number of slots).
    pub fn n(&self) -> usize {
        self.inner.rlwe.n()
    }
    /// Number of slots: `N` (two rows of `N/2`).
    pub fn slots(&self) -> usize {
        self.n()
    }
    /// The plaintext prime `p`.
    pub fn plain_modulus(&self) -> u64 {
        self.inner.t.q
    }
    /// Exact `log2 Q`.
    pub fn log_q(&self) -> f64 {
        self.inner.rlwe.q().iter().map(|&q| (q as f64).log2()).sum()
    }
    /// Level every BFV ciphertext lives at (all of `Q`).
    pub fn level(&self) -> usize {
        self.inner.rlwe.max_level()
    }
    /// Identifier: the first 8 bytes of SHA-256 over the RLWE parameters' id and `p`.
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    /// Security level.
    pub fn security(&self) -> SecurityLevel {
        self.inner.lit.security
    }
}

fn precompute(lit: BfvParamsLiteral, rlwe: CkksParams) -> Result<Inner> {
    let n = rlwe.n();
    let t = Modulus::new(lit.plain_modulus);
    let t_ntt = NttPlan::new(n, t.q)?;
    // NTT output j holds m(ψ^{2·brev(j)+1}): invert that map for the slot exponents ±5^j
    let logn = n.trailing_zeros();
    let two_n = 2 * n as u64;
    let mut slot_to_ntt = vec![0u32; n];
    let mut g = 1u64;
    for j in 0..n / 2 {
        for (row, e) in [(0, g), (1, two_n - g)] {
            let idx = bit_reverse(((e - 1) / 2) as usize, logn);
            slot_to_ntt[row * n / 2 + j] = idx as u32;
        }
        g = g * 5 % two_n;
    }
    let qs: Vec<Modulus> = rlwe.q().iter().map(|&q| Modulus::new(q)).collect();
    // Δ = (Q − (Q mod p))/p ≡ −(Q mod p)·p^{−1} (mod q_i)
    let q_mod_t = qs.iter().fold(1u64, |acc, q| t.mul(acc, t.reduce(q.q)));
    let delta_mod_q = qs
        .iter()
        .map(|q| q.mul(q.neg(q.reduce(q_mod_t)), q.inv(q.reduce(t.q))))
        .collect();
    let prefix_mod_q: Vec<Vec<u64>> = qs
        .iter()
        .enumerate()
        .map(|(i, qi)| {
            let mut acc = 1u64;
            (0..i)
                .map(|j| {
                    let v = acc;
                    acc = qi.mul(acc, qi.reduce(qs[j].q));
                    v
                })
                .collect()
        })
        .collect();
    let prefix_inv: Vec<u64> = qs
        .iter()
        .enumerate()
        .map(|(i, qi)| {
            let prod = (0..i).fold(1u64, |acc, j| qi.mul(acc, qi.reduce(qs[j].q)));
            qi.inv(prod)
        })
        .collect();
    // (Q+1)/2 ≡ 2^{−1} (mod q_i)
    let half: Vec<u64> = qs.iter().map(|q| q.inv(2)).collect();
    let half_digits = (1..=qs.len())
        .map(|k| mixed_radix(&qs[..k], &prefix_mod_q[..k], &prefix_inv[..k], &half[..k]))
        .collect();
    let mut h = Sha256::new();
    h.update(b"heinfer-bfv params v1");
    h.update(rlwe.id().to_le_bytes());
    h.update(t.q.to_le_bytes());
    let id = u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes"));
    Ok(Inner {
        lit,
        rlwe,
        id,
        t,
        t_ntt,
        slot_to_ntt,
        delta_mod_q,
        prefix_mod_q,
        prefix_inv,
        half_digits,
    })
}

/// Garner's algorithm: the mixed-radix digits `v` of the `x < Q` with residues `res`
/// (`x = v_0 + v_1·q_0 + v_2·q_0·q_1 + …`, `v_i < q_i`).
pub(crate) fn mixed_radix(
    qs: &[Modulus],
    prefix: &[Vec<u64>],
    prefix_inv: &[u64],
    res: &[u64],
) -> Vec<u64> {
    let mut v = Vec::with_capacity(qs.len());
    for (i, qi) in qs.iter().enumerate() {
        // x mod q_i minus what the lower digits already account for
        let mut acc = qi.reduce(res[i]);
        for (j, &vj) in v.iter().enumerate() {
            acc = qi.sub(acc, qi.mul(qi.reduce(vj), prefix[i][j]));
        }
        v.push(qi.mul(acc, prefix_inv[i]));
    }
    v
}

/// The plaintext primes `p ≡ 1 (mod 2N)` of `bits` bits, largest first (at most `count`).
pub fn plain_primes(log_n: u32, bits: u32, count: usize) -> Vec<u64> {
    let two_n = 2u64 << log_n;
    let hi = 1u64 << bits;
    let mut out = Vec::new();
    let mut c = (hi - 1) / two_n * two_n + 1;
    while c > hi / 2 && out.len() < count {
        if c < hi && is_prime(c) {
            out.push(c);
        }
        c -= two_n;
    }
    out
}

//! CKKS parameters: an unchecked literal, turned by one constructor into checked, immutable
//! parameters with every precomputed table the engine needs.
//!
//! * Ring `R = Z[X]/(X^N+1)`, `N = 2^logN`, `n = N/2` complex slots.
//! * Ciphertext modulus `Q_L = q_0·q_1·…·q_L`: `q_0` is the base prime (bounds the final
//!   precision), `q_1..q_L` are the scale primes (each ≈ Δ, one consumed per rescale).
//! * Special primes `P = p_0·…·p_{k−1}`, used only inside hybrid key switching.
//! * Key switching splits the primes of `Q` into `β` digits of `α` consecutive primes
//!   (GHS / Han–Ki hybrid key switching); noise grows with `Q_j/P`, so `P` must be about as large
//!   as the largest digit.
//! * `log2(Q_L·P)` is checked against the HomomorphicEncryption.org table ([`crate::security`]).

use crate::error::{CkksError, Result};
use crate::fft::SpecialFft;
use crate::security::{max_log_qp, SecurityLevel};
use heinfer_math::primes::generate_primes;
use heinfer_math::NttPlan;
use sha2::{Digest, Sha256};
use std::sync::Arc;

mod tables;
use tables::precompute;
pub(crate) use tables::ParamsInner;

/// Largest supported `logN`.
pub const MAX_LOG_N: u32 = 16;
/// Smallest `logN` for secure parameters (10 is allowed only for insecure test presets).
pub const MIN_LOG_N: u32 = 11;
/// Largest digit/special-modulus gap tolerated: `log2(P) ≥ max_j log2(Q_j) − MAX_DIGIT_EXCESS_BITS`.
/// Each bit of excess adds a bit of key-switching noise.
pub const MAX_DIGIT_EXCESS_BITS: f64 = 8.0;

/// ModUp balances a digit (residues in `(−q/2, q/2]`, `heinfer_math::rns`) unless it is at
/// least this many bits below `P` at ring degree `N = 2^log_n`: `9 + log_n/2`.
///
/// Unbalanced, a digit has mean `≈ Q_j/2` in every coefficient, so its term `D_j·e_j/P` in a
/// key switch's error carries the polynomial `(Q_j/2)·(1 + X + … + X^{N−1})·e_j/P`, fixed per
/// key. Its variance is small, but not where it lands: at the root `ζ = e^{iπ/N}` (slot 0
/// before a rotation's automorphism, that slot's image after it) the all-ones polynomial is
/// `≈ 2N/π`, so the offset there is `≈ (Q_j/P)·σ·N^{3/2}/π` against ModDown's rounding noise of
/// `N/√18` per slot — a ratio of `(Q_j/P)·σ·√N·1.35`, under 1 % at `9 + log2(N)/2` bits below
/// `P` (15.5 at `N = 2^13`). A variance comparison (the rule was six bits) misses it: six bits
/// below `P` at `N = 2^13`, conjugation's error carried a fixed offset of 4× its noise at slot
/// 0, the same for every ciphertext of a key (2026-11-28). Balanced, a digit has mean zero and
/// the offset is gone; the balancing term costs a few per cent of a key switch at logN 13.
pub fn unbalanced_digit_bits(log_n: u32) -> f64 {
    9.0 + log_n as f64 / 2.0
}

/// Unchecked parameters: plain data, as a user writes them. Turn them into [`CkksParams`]
/// with [`CkksParams::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CkksParamsLiteral {
    /// `log2` of the ring degree `N` (11..=16).
    pub log_n: u32,
    /// Bit sizes of `q_0, q_1, …, q_L` (base prime first, then one scale prime per level).
    pub log_q: Vec<u32>,
    /// Bit sizes of the special primes `p_0..p_{k−1}`. May be empty: such parameters support
    /// secret-key encryption and every operation without key switching (no public key,
    /// relinearization or rotation keys), which is all a client-aided linear segment needs.
    pub log_p: Vec<u32>,
    /// Default scale `Δ = 2^log_scale` used by encoders and evaluators unless told otherwise.
    pub log_scale: u32,
    /// Number of key-switching digits `β`; `None` picks the fewest digits whose size stays
    /// within `P` (larger `α`, fewer NTTs).
    pub digits: Option<usize>,
    /// Security level enforced at construction.
    pub security: SecurityLevel,
}

/// Checked, immutable CKKS parameters with their precomputations. Cheap to clone (`Arc`).
#[derive(Clone)]
pub struct CkksParams {
    inner: Arc<ParamsInner>,
}

impl std::fmt::Debug for CkksParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CkksParams(logN={}, L={}, logQP={:.1}, alpha={}, beta={}, id={:#018x})",
            self.log_n(),
            self.max_level(),
            self.log_qp(),
            self.alpha(),
            self.beta(),
            self.id()
        )
    }
}

impl CkksParams {
    /// Checks a literal and builds the parameters: generates the primes, enforces the
    /// security table, and precomputes NTT plans and key-switching tables.
    ///
    /// Fails with [`CkksError::InsecureParameters`] above the security bound and with
    /// [`CkksError::InvalidParameters`] for malformed literals.
    pub fn new(lit: CkksParamsLiteral) -> Result<Self> {
        if lit.security == SecurityLevel::InsecureTestOnly {
            return Err(CkksError::InvalidParameters(
                "the insecure test level is only available through CkksParams::new_insecure_for_tests".into(),
            ));
        }
        Self::build(lit)
    }

    /// Builds parameters **without any security guarantee**, for `INSECURE_*` test presets only.
    pub fn new_insecure_for_tests(mut lit: CkksParamsLiteral) -> Result<Self> {
        lit.security = SecurityLevel::InsecureTestOnly;
        Self::build(lit)
    }

    fn build(lit: CkksParamsLiteral) -> Result<Self> {
        Self::build_expecting(lit, None)
    }

    /// Checks the literal and, when `expected_id` is given, compares the id *before* the
    /// (expensive) precomputation, so hostile bytes cannot buy work with a mismatched header.
    pub(crate) fn build_expecting(
        lit: CkksParamsLiteral,
        expected_id: Option<u64>,
    ) -> Result<Self> {
        let insecure = lit.security == SecurityLevel::InsecureTestOnly;
        let min_log_n = if insecure { 10 } else { MIN_LOG_N };
        if lit.log_n < min_log_n || lit.log_n > MAX_LOG_N {
            return Err(CkksError::InvalidParameters(format!(
                "logN = {} is outside {}..={}",
                lit.log_n, min_log_n, MAX_LOG_N
            )));
        }
        if lit.log_q.is_empty() {
            return Err(CkksError::InvalidParameters(
                "need at least one Q prime".into(),
            ));
        }
        if lit.log_q.len() + lit.log_p.len() > 64 {
            return Err(CkksError::InvalidParameters(
                "at most 64 primes in Q and P together".into(),
            ));
        }
        if lit.log_scale < 10 || lit.log_scale > 60 {
            return Err(CkksError::InvalidParameters(format!(
                "log_scale = {} is outside 10..=60",
                lit.log_scale
            )));
        }
        if lit.log_q[0] <= lit.log_scale {
            return Err(CkksError::InvalidParameters(format!(
                "the base prime ({} bits) must be larger than the scale (2^{}) to hold a message",
                lit.log_q[0], lit.log_scale
            )));
        }
        let n = 1usize << lit.log_n;
        let bits: Vec<u32> = lit.log_q.iter().chain(&lit.log_p).copied().collect();
        let primes = generate_primes(&bits, 2 * n as u64, &[])?;
        let log_qp: f64 = primes.iter().map(|&q| (q as f64).log2()).sum();
        let max = max_log_qp(lit.log_n, lit.security).ok_or_else(|| {
            CkksError::InvalidParameters(format!(
                "the security standard gives no bound for logN = {} at {} bits",
                lit.log_n,
                lit.security.bits()
            ))
        })?;
        let bit_sum: u32 = bits.iter().sum();
        if bit_sum > max {
            return Err(CkksError::InsecureParameters {
                log_qp,
                max,
                log_n: lit.log_n,
                security: lit.security.bits(),
            });
        }
        let (q, p) = primes.split_at(lit.log_q.len());
        let log_p: f64 = p.iter().map(|&x| (x as f64).log2()).sum();
        let lq = q.len();
        let alpha = if p.is_empty() {
            // no key switching: one digit per prime keeps the tables minimal
            1
        } else {
            match lit.digits {
                Some(beta) => {
                    if beta == 0 || beta > lq {
                        return Err(CkksError::InvalidParameters(format!(
                            "digits = {beta} must be in 1..={lq} (the number of Q primes)"
                        )));
                    }
                    lq.div_ceil(beta)
                }
                None => (1..=lq)
                    .rev()
                    .find(|&a| max_digit_bits(q, a) <= log_p)
                    .unwrap_or(1),
            }
        };
        let worst = max_digit_bits(q, alpha);
        if !p.is_empty() && worst > log_p + MAX_DIGIT_EXCESS_BITS {
            return Err(CkksError::InvalidParameters(format!(
                "key-switching digits of {alpha} primes ({worst:.0} bits) are too large for P ({log_p:.0} bits): \
                 use more digits or more special primes"
            )));
        }
        if let Some(expected) = expected_id {
            let id = params_id(lit.log_n, q, p, alpha, lit.security);
            if id != expected {
                return Err(CkksError::ParamsMismatch {
                    expected,
                    found: id,
                });
            }
        }
        let inner = precompute(lit, n, q.to_vec(), p.to_vec(), alpha, log_qp)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    pub(crate) fn inner(&self) -> &ParamsInner {
        &self.inner
    }

    /// The literal these parameters were built from.
    pub fn literal(&self) -> &CkksParamsLiteral {
        &self.inner.lit
    }
    /// `log2 N`.
    pub fn log_n(&self) -> u32 {
        self.inner.lit.log_n
    }
    /// Ring degree `N`.
    pub fn n(&self) -> usize {
        self.inner.n
    }
    /// The special FFT of these parameters' ring, built on first use and shared.
    pub(crate) fn special_fft(&self) -> Arc<SpecialFft> {
        self.inner
            .fft
            .get_or_init(|| Arc::new(SpecialFft::new(self.inner.n)))
            .clone()
    }
    /// Number of complex slots `N/2`.
    pub fn slots(&self) -> usize {
        self.inner.n / 2
    }
    /// Top level `L` (number of Q primes − 1).
    pub fn max_level(&self) -> usize {
        self.inner.q.len() - 1
    }
    /// The Q primes `q_0..q_L`.
    pub fn q(&self) -> &[u64] {
        &self.inner.q
    }
    /// The special primes.
    pub fn p(&self) -> &[u64] {
        &self.inner.p
    }
    /// The moduli with their reduction constants: the `Q` primes, then the `P` primes.
    pub fn moduli(&self) -> &[heinfer_math::Modulus] {
        &self.inner.moduli
    }
    /// `NTT(X^{N/2}) mod q_i`: multiplying by it multiplies every slot by `i` (the imaginary
    /// unit), which places constants in the imaginary part of complex-packed slots.
    pub fn x_half_ntt(&self, i: usize) -> &[u64] {
        &self.inner.x_half_ntt[i]
    }
    /// `NTT(1 + X + … + X^{N−1}) mod q_i`: multiplying a constant by it adds the constant to
    /// every coefficient (a bias under coefficient packing).
    pub fn ones_ntt(&self, i: usize) -> &[u64] {
        &self.inner.ones_ntt[i]
    }
    /// The negacyclic NTT plan of modulus `i` (the `Q` primes, then the `P` primes): the
    /// transform other schemes on these parameters (BFV) use to move polynomials in and out of
    /// evaluation form.
    pub fn ntt(&self, i: usize) -> &NttPlan {
        &self.inner.ntt[i]
    }
    /// Primes per key-switching digit `α`.
    pub fn alpha(&self) -> usize {
        self.inner.alpha
    }
    /// Number of key-switching digits at the top level `β = ⌈(L+1)/α⌉`.
    pub fn beta(&self) -> usize {
        self.inner.q.len().div_ceil(self.inner.alpha)
    }
    /// Digits at level `ℓ`: `⌈(ℓ+1)/α⌉`.
    pub fn beta_at(&self, level: usize) -> usize {
        (level + 1).div_ceil(self.inner.alpha)
    }
    /// `log2(Q_ℓ) = Σ_{i ≤ ℓ} log2 q_i`: what a value at level `ℓ` must stay below (halved,
    /// centered) — the encoder's, a product's and an added constant's bound.
    pub fn log_q_at(&self, level: usize) -> f64 {
        self.q()[..=level].iter().map(|&q| (q as f64).log2()).sum()
    }
    /// Exact `log2(Q_L·P)`.
    pub fn log_qp(&self) -> f64 {
        self.inner.log_qp
    }
    /// Default scale `2^log_scale`.
    pub fn default_scale(&self) -> f64 {
        (self.inner.lit.log_scale as f64).exp2()
    }
    /// Security level.
    pub fn security(&self) -> SecurityLevel {
        self.inner.lit.security
    }
    /// Identifier of this parameter set: the first 8 bytes of a SHA-256 over logN, the
    /// primes, α and the security level. Every object carries it.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The evaluation-form permutation of `σ_g` (`out[j] = in[table[j]]` on every NTT limb),
    /// from a bounded least-recently-used cache (see [`crate::galois_tables`]).
    ///
    /// Fails with [`CkksError::Math`] when `g` is not a Galois element of this ring (even, or
    /// not below `2N`).
    pub fn galois_table(&self, g: u64) -> Result<Arc<Vec<u32>>> {
        self.inner.galois_tables.get(g)
    }

    /// Number of permutation tables currently cached (at most
    /// [`crate::galois_tables::GALOIS_TABLE_CACHE_CAPACITY`]).
    pub fn cached_galois_tables(&self) -> usize {
        self.inner.galois_tables.len()
    }

    /// Checks that an object with parameter id `found` belongs to these parameters.
    pub fn check_id(&self, found: u64) -> Result<()> {
        if found != self.id() {
            return Err(CkksError::ParamsMismatch {
                expected: self.id(),
                found,
            });
        }
        Ok(())
    }
}

fn max_digit_bits(q: &[u64], alpha: usize) -> f64 {
    q.chunks(alpha)
        .map(|c| c.iter().map(|&x| (x as f64).log2()).sum::<f64>())
        .fold(0.0, f64::max)
}

pub(super) fn params_id(
    log_n: u32,
    q: &[u64],
    p: &[u64],
    alpha: usize,
    security: SecurityLevel,
) -> u64 {
    let mut h = Sha256::new();
    h.update(b"heinfer-ckks-params-v1");
    h.update(log_n.to_le_bytes());
    h.update((q.len() as u32).to_le_bytes());
    for x in q {
        h.update(x.to_le_bytes());
    }
    h.update((p.len() as u32).to_le_bytes());
    for x in p {
        h.update(x.to_le_bytes());
    }
    h.update((alpha as u32).to_le_bytes());
    h.update(security.bits().to_le_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    /// Which ModUp digits balance (see [`unbalanced_digit_bits`]): every digit of the 13-bit
    /// preset (40–49-bit primes, a 49-bit `P`: at most 9 bits below it, under the 15.5-bit
    /// gap), and at logN 14 (`P` of 100 bits) the digits of 90 bits but not those of 80.
    #[test]
    fn digits_balance_unless_far_below_p() {
        assert_eq!(unbalanced_digit_bits(13), 15.5);
        let p = CkksParams::new(presets::pn13_qp218()).unwrap();
        let top = &p.inner().modup[p.max_level()];
        assert!(top.iter().all(|c| c.balances()));
        let p = CkksParams::new(presets::pn14_qp438()).unwrap();
        let (alpha, p_bits) = (
            p.alpha(),
            p.p().iter().map(|&x| (x as f64).log2()).sum::<f64>(),
        );
        for (j, conv) in p.inner().modup[p.max_level()].iter().enumerate() {
            let q = &p.q()[j * alpha..((j + 1) * alpha).min(p.q().len())];
            let bits: f64 = q.iter().map(|&x| (x as f64).log2()).sum();
            assert_eq!(
                conv.balances(),
                bits > p_bits - 16.0,
                "digit {j}: {bits:.1} bits, P {p_bits:.1}"
            );
        }
    }
}

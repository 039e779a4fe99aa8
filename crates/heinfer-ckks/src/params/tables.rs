//! The tables every [`CkksParams`](super::CkksParams) carries, computed once at construction:
//! NTT plans, Barrett constants, the rescale's `q_ℓ^{-1} mod q_i` and rounding halves, the
//! ModUp/ModDown basis converters of hybrid key switching, `P^{±1} mod q_i`, the NTT forms of
//! `X^{N/2}` and of the all-ones polynomial, and the (bounded) cache of Galois permutations.

use super::{params_id, unbalanced_digit_bits, CkksParamsLiteral};
use crate::error::Result;
use crate::fft::SpecialFft;
use crate::galois_tables::{GaloisTableCache, GALOIS_TABLE_CACHE_CAPACITY};
use heinfer_math::rns::BasisConverter;
use heinfer_math::vecops::BarrettConst;
use heinfer_math::{Modulus, NttPlan};
use std::sync::{Arc, OnceLock};

/// Checked parameters with their tables (behind the `Arc` of [`super::CkksParams`]).
pub(crate) struct ParamsInner {
    pub lit: CkksParamsLiteral,
    pub n: usize,
    pub q: Vec<u64>,
    pub p: Vec<u64>,
    pub alpha: usize,
    pub id: u64,
    pub log_qp: f64,
    /// NTT plans, Q primes then P primes.
    pub ntt: Vec<NttPlan>,
    /// Moduli, Q primes then P primes.
    pub moduli: Vec<Modulus>,
    pub barrett: Vec<BarrettConst>,
    /// `[ℓ][i]` = `q_ℓ^{-1} mod q_i` (Shoup pair), `i < ℓ`.
    pub rescale_inv: Vec<Vec<(u64, u64)>>,
    /// `[ℓ][i]` = `⌊q_ℓ/2⌋ mod q_i`, for rounding in rescale.
    pub rescale_half: Vec<Vec<u64>>,
    /// `[ℓ][j]`: digit `j` of `Q_ℓ` → (`Q_ℓ` minus the digit) ∪ `P`.
    pub modup: Vec<Vec<BasisConverter>>,
    /// `[ℓ]`: `P → Q_ℓ`.
    pub moddown: Vec<BasisConverter>,
    /// `P^{-1} mod q_i` (Shoup pair).
    pub p_inv_mod_q: Vec<(u64, u64)>,
    /// `P mod q_i`.
    pub p_mod_q: Vec<u64>,

    /// NTT of `X^{N/2}` modulo each Q prime (complex-constant multiplication).
    pub x_half_ntt: Vec<Vec<u64>>,
    /// NTT of `1 + X + … + X^{N−1}` modulo each Q prime (a constant in every coefficient).
    pub ones_ntt: Vec<Vec<u64>>,
    /// Permutation tables of `σ_g` in NTT form, bounded (see [`crate::galois_tables`]).
    pub galois_tables: GaloisTableCache,
    /// The special FFT's twiddles, built by the first [`crate::Encoder`] and shared by every
    /// later one (building them takes ~0.3 ms at `N = 2^13`: a client makes an encoder per
    /// batch it encrypts or decrypts).
    pub fft: OnceLock<Arc<SpecialFft>>,
}

/// Builds every table for checked primes `q`, `p` and digit size `alpha`.
pub(super) fn precompute(
    lit: CkksParamsLiteral,
    n: usize,
    q: Vec<u64>,
    p: Vec<u64>,
    alpha: usize,
    log_qp: f64,
) -> Result<ParamsInner> {
    let all: Vec<u64> = q.iter().chain(&p).copied().collect();
    let ntt = all
        .iter()
        .map(|&x| NttPlan::new(n, x))
        .collect::<heinfer_math::Result<Vec<_>>>()?;
    let moduli: Vec<Modulus> = all.iter().map(|&x| Modulus::new(x)).collect();
    let barrett = all.iter().map(|&x| BarrettConst::new(x)).collect();
    let lq = q.len();
    let qm = &moduli[..lq];
    let pm = &moduli[lq..];
    let rescale_inv = (0..lq)
        .map(|l| {
            (0..l)
                .map(|i| {
                    let inv = qm[i].inv(q[l] % q[i]);
                    (inv, qm[i].shoup(inv))
                })
                .collect()
        })
        .collect();
    let rescale_half = (0..lq)
        .map(|l| (0..l).map(|i| (q[l] / 2) % q[i]).collect())
        .collect();
    let p_bits: f64 = pm.iter().map(|m| (m.q as f64).log2()).sum();
    let gap = unbalanced_digit_bits(n.trailing_zeros());
    let modup = if pm.is_empty() {
        Vec::new()
    } else {
        (0..lq)
            .map(|l| {
                (0..(l + 1).div_ceil(alpha))
                    .map(|j| {
                        let lo = j * alpha;
                        let hi = ((j + 1) * alpha).min(l + 1);
                        let to: Vec<Modulus> = qm[..=l]
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| *i < lo || *i >= hi)
                            .map(|(_, m)| *m)
                            .chain(pm.iter().copied())
                            .collect();
                        // balanced digits only where they matter (unbalanced_digit_bits)
                        let digit_bits: f64 = qm[lo..hi].iter().map(|m| (m.q as f64).log2()).sum();
                        BasisConverter::new(&qm[lo..hi], &to).balancing(digit_bits > p_bits - gap)
                    })
                    .collect()
            })
            .collect()
    };
    let moddown = if pm.is_empty() {
        Vec::new()
    } else {
        (0..lq)
            .map(|l| BasisConverter::new(pm, &qm[..=l]))
            .collect()
    };
    let p_mod_q: Vec<u64> = qm
        .iter()
        .map(|m| p.iter().fold(1u64, |acc, &x| m.mul(acc, x % m.q)))
        .collect();
    let p_inv_mod_q = qm
        .iter()
        .zip(&p_mod_q)
        .map(|(m, &pm)| {
            let inv = m.inv(pm);
            (inv, m.shoup(inv))
        })
        .collect();
    let x_half_ntt = ntt[..lq]
        .iter()
        .map(|plan| {
            let mut v = vec![0u64; n];
            v[n / 2] = 1;
            plan.forward(&mut v);
            v
        })
        .collect();
    let ones_ntt = ntt[..lq]
        .iter()
        .map(|plan| {
            let mut v = vec![1u64; n];
            plan.forward(&mut v);
            v
        })
        .collect();
    let id = params_id(lit.log_n, &q, &p, alpha, lit.security);
    Ok(ParamsInner {
        lit,
        n,
        q,
        p,
        alpha,
        id,
        log_qp,
        ntt,
        moduli,
        barrett,
        rescale_inv,
        rescale_half,
        modup,
        moddown,
        p_inv_mod_q,
        p_mod_q,
        x_half_ntt,
        ones_ntt,
        galois_tables: GaloisTableCache::new(n, GALOIS_TABLE_CACHE_CAPACITY),
        fft: OnceLock::new(),
    })
}

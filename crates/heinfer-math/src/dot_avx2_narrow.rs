//! Inner products for primes `2^20 ≤ q < 2^30` on AVX2: 32-bit integer products.
//!
//! A residue below `q < 2^30` sits in the low half of its 64-bit word, and `vpmuludq`
//! multiplies the low halves of four words into four exact 64-bit products (`< q² < 2^60`).
//! Eight of them, or seven beside a reduced running sum (`< q`), add up in the 64-bit lanes
//! without overflow (`< 2^63`): the terms come in the same chunks as the double-precision
//! sums' (`crate::dot`: a few limbs streamed at a time, which the hardware prefetchers follow;
//! one pass over all the terms of a long sum would stream each from memory at random). Each
//! lane `x < 2^64` is then reduced in double precision, with no 64-bit multiply:
//! `x = h·2^32 + l` (`h, l < 2^32`, exact as doubles),
//!
//! ```text
//!   k = round(h·fl(2^32/q) + l·fl(1/q)),   r = fma(−k, q, h·2^32) + l = x − k·q,
//! ```
//!
//! where the estimate is within `3·2^-53·x/q < 0.01` of `x/q` (`x/q < 2^44` for `q ≥ 2^20`),
//! so `|r| < 0.51·q`, the FMA's result (`|h·2^32 − k·q| < 2^33`) is exact, and one conditional
//! addition of `q` gives `[0, q)`: the same bits as every other family.
//!
//! The double-precision lanes (`vecops_avx2::F64Lanes`) spend four multiply-class
//! instructions on each vector of four products (product, its error term, quotient,
//! remainder) plus two conversions per loaded vector; here it is one `vpmuludq` and one
//! `vpaddq`. Key switching's inner product over the digits and the latency kernels' sums of
//! plaintext products at 21- to 30-bit primes take this path.

#![cfg(target_arch = "x86_64")]

use crate::vecops_avx2::{add_q_if_negative, f64_to_words, words_to_f64, LazyLanes, ROUND};
use std::arch::x86_64::*;

/// Smallest prime size taken: `x/q < 2^44` keeps the quotient estimate within `0.01`.
const MIN_BITS: u32 = 20;
/// Primes below `2^MAX_BITS` take this path (`8·q² < 2^63`).
const MAX_BITS: u32 = 30;

/// Products summed in a lane before a reduction (as `crate::dot`'s chunks: a chunk after the
/// first adds the reduced running sum and seven products).
pub(crate) const LAZY_TERMS: usize = 8;

/// Whether the kernels apply to `q` (`2^20 ≤ q < 2^30`); the caller checks AVX2 and FMA.
pub(crate) fn applies(q: u64) -> bool {
    q >> (MIN_BITS - 1) > 1 && q >> MAX_BITS == 0
}

/// The lanes of the integer sums (`vecops_avx2::dot1` / `dot2` with `L = Narrow`): the
/// reduction's constants for one prime. Callers check [`applies`]`(q)`, every input `< q` and
/// at most [`LAZY_TERMS`] terms per call.
#[derive(Clone, Copy)]
pub(crate) struct Narrow {
    q: __m256d,
    qinv: __m256d,
    two32_over_q: __m256d,
}

/// `x mod q` for four words `x < 2^64` (module documentation).
#[inline(always)]
unsafe fn reduce(x: __m256i, c: Narrow) -> __m256i {
    let h = words_to_f64(_mm256_srli_epi64::<32>(x));
    let l = words_to_f64(_mm256_and_si256(x, _mm256_set1_epi64x(0xFFFF_FFFF)));
    let t = _mm256_fmadd_pd(h, c.two32_over_q, _mm256_mul_pd(l, c.qinv));
    let round = _mm256_set1_pd(ROUND);
    let k = _mm256_sub_pd(_mm256_add_pd(t, round), round);
    let high = _mm256_mul_pd(h, _mm256_set1_pd(4_294_967_296.0));
    let r = _mm256_add_pd(_mm256_fnmadd_pd(k, c.q, high), l);
    f64_to_words(add_q_if_negative(r, c.q))
}

impl LazyLanes for Narrow {
    #[inline(always)]
    unsafe fn new(q: u64) -> Self {
        Self {
            q: _mm256_set1_pd(q as f64),
            qinv: _mm256_set1_pd(1.0 / q as f64),
            two32_over_q: _mm256_set1_pd(4_294_967_296.0 / q as f64),
        }
    }
    type In = __m256i;
    type Sum = __m256i;
    #[inline(always)]
    unsafe fn start(self, p: *const u64, accumulate: bool) -> __m256i {
        if accumulate {
            _mm256_loadu_si256(p as *const __m256i)
        } else {
            _mm256_setzero_si256()
        }
    }
    #[inline(always)]
    unsafe fn input(self, v: __m256i) -> __m256i {
        v
    }
    #[inline(always)]
    unsafe fn mul_add(self, s: __m256i, x: __m256i, y: __m256i) -> __m256i {
        _mm256_add_epi64(s, _mm256_mul_epu32(x, y))
    }
    #[inline(always)]
    unsafe fn finish(self, p: *mut u64, s: __m256i) {
        _mm256_storeu_si256(p as *mut __m256i, reduce(s, self))
    }
}

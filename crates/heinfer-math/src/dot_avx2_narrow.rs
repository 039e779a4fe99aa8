//! Inner products for primes `2^20 ≤ q < 2^30` on AVX2: 32-bit integer products.
//!
//! A residue below `q < 2^30` sits in the low half of its 64-bit word, and `vpmuludq`
//! multiplies the low halves of four words into four exact 64-bit products (`< q² < 2^60`).
//! Eight of them, or seven beside a reduced running sum (`< q`), add up in the 64-bit lanes
//! without overflow (`< 2^63`): the terms come in the same chunks as the double-precision
//! sums' (`crate::dot`: a few limbs streamed at a time, which the hardware prefetchers follow;
//! one pass over all the terms of a long sum would stream each from memory at random). Each
//! lane `x < 2^64` is then reduced in double precision, with no 64-bit multiply: `x = h·2^32 + l` (`h, l < 2^32`, exact as doubles),
//!
//! ```text
//!   k = round(h·fl(2^32/q) + l·fl(1/q)),   r = fma(−k, q, h·2^32) + l = x − k·q,
//! ```
//!
//! where the estimate is within `3·2^-53·x/q < 0.01` of `x/q` (`x/q < 2^44` for `q ≥ 2^20`),
//! so `|r| < 0.51·q`, the FMA's result (`|h·2^32 − k·q| < 2^33`) is exact, and one conditional
//! addition of `q` gives `[0, q)`: the same bits as every other family.
//!
//! The double-precision path (`vecops_avx2::dot2`) spends four multiply-class instructions on
//! each vector of four products (product, its error term, quotient, remainder) plus two
//! conversions per loaded vector; here it is one `vpmuludq` and one `vpaddq`. Key switching's inner product over the digits and the
//! latency kernels' sums of plaintext products at 21- to 30-bit primes take this path.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

/// Smallest prime size taken: `x/q < 2^44` keeps the quotient estimate within `0.01`.
const MIN_BITS: u32 = 20;
/// Primes below `2^MAX_BITS` take this path (`8·q² < 2^63`).
const MAX_BITS: u32 = 30;

/// Products summed in a lane before a reduction (as `crate::dot`'s chunks: a chunk after the
/// first adds the reduced running sum and seven products).
pub(crate) const LAZY_TERMS: usize = 8;

/// `2^52` as f64: integers below it sit in its mantissa.
const MAGIC: f64 = 4_503_599_627_370_496.0;
/// `1.5·2^52`: `(v + C) − C` is `v` rounded to the nearest integer for `|v| < 2^51`.
const ROUND: f64 = 6_755_399_441_055_744.0;

/// Whether the kernels apply to `q` (`2^20 ≤ q < 2^30`); the caller checks AVX2 and FMA.
pub(crate) fn applies(q: u64) -> bool {
    q >> (MIN_BITS - 1) > 1 && q >> MAX_BITS == 0
}

/// The reduction's constants for one prime.
#[derive(Clone, Copy)]
struct Consts {
    q: __m256d,
    qinv: __m256d,
    two32_over_q: __m256d,
}

impl Consts {
    #[inline(always)]
    unsafe fn new(q: u64) -> Self {
        Self {
            q: _mm256_set1_pd(q as f64),
            qinv: _mm256_set1_pd(1.0 / q as f64),
            two32_over_q: _mm256_set1_pd(4_294_967_296.0 / q as f64),
        }
    }
}

/// Four words `< 2^52` as doubles.
#[inline(always)]
unsafe fn to_f64(v: __m256i) -> __m256d {
    let magic = _mm256_set1_pd(MAGIC);
    _mm256_sub_pd(_mm256_or_pd(_mm256_castsi256_pd(v), magic), magic)
}

/// Four exact integers in `[0, 2^52)` as words.
#[inline(always)]
unsafe fn to_words(r: __m256d) -> __m256i {
    let magic = _mm256_set1_pd(MAGIC);
    _mm256_castpd_si256(_mm256_xor_pd(_mm256_add_pd(r, magic), magic))
}

/// `x mod q` for four words `x < 2^64` (module documentation).
#[inline(always)]
unsafe fn reduce(x: __m256i, c: Consts) -> __m256i {
    let h = to_f64(_mm256_srli_epi64::<32>(x));
    let l = to_f64(_mm256_and_si256(x, _mm256_set1_epi64x(0xFFFF_FFFF)));
    let t = _mm256_fmadd_pd(h, c.two32_over_q, _mm256_mul_pd(l, c.qinv));
    let round = _mm256_set1_pd(ROUND);
    let k = _mm256_sub_pd(_mm256_add_pd(t, round), round);
    let high = _mm256_mul_pd(h, _mm256_set1_pd(4_294_967_296.0));
    let r = _mm256_add_pd(_mm256_fnmadd_pd(k, c.q, high), l);
    let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(r, _mm256_setzero_pd());
    to_words(_mm256_add_pd(r, _mm256_and_pd(neg, c.q)))
}

#[inline(always)]
unsafe fn load(p: *const u64) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline(always)]
unsafe fn store(p: *mut u64, v: __m256i) {
    _mm256_storeu_si256(p as *mut __m256i, v)
}

/// `acc = Σ_t a[t]·b[t] mod q` (plus the old value when `accumulate`).
///
/// # Safety
/// AVX2 and FMA available, [`applies`]`(q)`, every input `< q`, at most [`LAZY_TERMS`] terms,
/// `acc.len()` a multiple of 4 and every slice at least that long.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot1(acc: &mut [u64], a: &[&[u64]], b: &[&[u64]], q: u64, accumulate: bool) {
    let c = Consts::new(q);
    let p = acc.as_mut_ptr();
    let mut i = 0;
    while i + 4 <= acc.len() {
        let mut s = if accumulate {
            load(p.add(i))
        } else {
            _mm256_setzero_si256()
        };
        for (x, y) in a.iter().zip(b) {
            let prod = _mm256_mul_epu32(load(x.as_ptr().add(i)), load(y.as_ptr().add(i)));
            s = _mm256_add_epi64(s, prod);
        }
        store(p.add(i), reduce(s, c));
        i += 4;
    }
}

/// `acc0 = Σ_j d[j]·b[j]`, `acc1 = Σ_j d[j]·a[j] mod q` (plus the old values when
/// `accumulate`), each `d[j]` loaded once for both sums.
///
/// # Safety
/// As [`dot1`], for `acc0` and `acc1` of the same length.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot2(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[u64]],
    b: &[&[u64]],
    a: &[&[u64]],
    q: u64,
    accumulate: bool,
) {
    let c = Consts::new(q);
    let (p0, p1) = (acc0.as_mut_ptr(), acc1.as_mut_ptr());
    let mut i = 0;
    while i + 4 <= acc0.len().min(acc1.len()) {
        let (mut s0, mut s1) = if accumulate {
            (load(p0.add(i)), load(p1.add(i)))
        } else {
            (_mm256_setzero_si256(), _mm256_setzero_si256())
        };
        for j in 0..d.len() {
            let dv = load(d[j].as_ptr().add(i));
            s0 = _mm256_add_epi64(s0, _mm256_mul_epu32(dv, load(b[j].as_ptr().add(i))));
            s1 = _mm256_add_epi64(s1, _mm256_mul_epu32(dv, load(a[j].as_ptr().add(i))));
        }
        store(p0.add(i), reduce(s0, c));
        store(p1.add(i), reduce(s1, c));
        i += 4;
    }
}

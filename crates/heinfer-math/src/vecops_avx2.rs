//! AVX2 + FMA element-wise kernels for primes `q < 2^50` (CPUs without AVX-512, e.g. AMD
//! Zen 1 and 2): the products run in double precision, four lanes at a time, as in the AVX2 NTT
//! (`ntt_fma_avx2`).
//!
//! AVX2 has no 64×64-bit multiply (the AVX-512 family builds one from four `vpmuludq`); two
//! doubles hold an exact product instead. For integers `a < 2^51`, `b < 2^50`
//!
//! ```text
//!   h = fl(a·b),  l = fma(a, b, −h)        (a·b = h + l exactly, |l| ≤ ulp(h)/2 ≤ 2^48)
//!   r = fma(−k, q, h) + l = a·b − k·q      (exact whenever |h − k·q| < 2^53)
//! ```
//!
//! and the quotient estimate `k` decides the range of `r`. Estimates are rounded to integers
//! by adding and subtracting `C = 1.5·2^52` (the sum's unit in the last place is 1 for values
//! below `2^51` in magnitude), the addition folded into an FMA, in place of `vroundpd`.
//!
//! * **vector products** (`a, b < q`): `k = fma(h, fl(1/q), C) − C = round(h·fl(1/q))` is
//!   within `0.75` of `a·b/q` (two roundings of relative size `2^-53` of a value below
//!   `q < 2^50`, and the rounding to an integer), so `|r| ≤ 0.75q`;
//! * **Shoup products** (`x < 2^51` any, `w < q` a constant): `k = round(x·fl(w/q))`, where
//!   `|x·fl(w/q) − x·w/q| ≤ 0.25` (the value is below `x < 2^51`), so `|x·w/q − k| ≤ 0.75` and
//!   `r ∈ (−q, q)`. Inputs of 51 bits or more (legal for the portable Shoup kernels: ModDown
//!   feeds residues of larger primes) are reduced first, per vector of four, by the portable
//!   `%` (one test per vector when none is);
//! * **reductions** of an exact sum (`|x| < 8q`): `k = round(x·fl(1/q))`, `|x − k·q| < q`.
//!
//! Residues move in and out of doubles through the mantissa of `2^52` (AVX2 has no u64↔f64
//! conversion): `f64::from_bits(x | bits(2^52)) − 2^52 = x` for `x < 2^52`, and back. Sums of
//! unreduced products stay exact below `2^53`; every kernel ends with values in `[0, q)`, so
//! the outputs are bit-identical to the portable kernels'.
//!
//! Every function here is `unsafe`: it must only be called when [`available`] is true and
//! `q < 2^MAX_BITS`, with pointers valid for `len` elements (outputs may alias an input
//! exactly, never partially).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

/// Largest prime size the kernels accept: `q < 2^50`, so that sums of up to eight products
/// in `[−q, q]` stay below `2^53`.
pub(crate) const MAX_BITS: u32 = 50;

/// Products in `[−q, q]` summed before one reduction in [`dot1`] / [`dot2`] (`8q < 2^53`; a
/// chunk after the first adds the reduced running sum and seven products).
pub(crate) const LAZY_TERMS: usize = 8;

/// Shoup products in `(−q, q)` summed before a reduction in [`mul_shoup_sum`]: with the
/// running sum in `[0, q)`, `|Σ| < 8q < 2^53`.
const SHOUP_LAZY_TERMS: usize = 7;

/// `2^52` as f64: integers below it sit in its mantissa.
const MAGIC: f64 = 4_503_599_627_370_496.0;

/// `1.5·2^52`: `(v + C) − C` is `v` rounded to the nearest integer for `|v| < 2^51`.
pub(crate) const ROUND: f64 = 6_755_399_441_055_744.0;

/// Whether this CPU can run the kernels (AVX2 and FMA).
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Four residues `< 2^52` at `p` as doubles.
#[inline(always)]
unsafe fn load(p: *const u64) -> __m256d {
    words_to_f64(_mm256_loadu_si256(p as *const __m256i))
}

/// Four words `< 2^52` as doubles.
#[inline(always)]
pub(crate) unsafe fn words_to_f64(v: __m256i) -> __m256d {
    let magic = _mm256_set1_pd(MAGIC);
    _mm256_sub_pd(_mm256_or_pd(_mm256_castsi256_pd(v), magic), magic)
}

/// Four exact integers in `[0, 2^52)` as words.
#[inline(always)]
pub(crate) unsafe fn f64_to_words(r: __m256d) -> __m256i {
    let magic = _mm256_set1_pd(MAGIC);
    _mm256_castpd_si256(_mm256_xor_pd(_mm256_add_pd(r, magic), magic))
}

/// Four words at `p` as doubles, each reduced mod `q` first if it has 51 bits or more.
#[inline(always)]
unsafe fn load_any(p: *const u64, q: u64) -> __m256d {
    let v = _mm256_loadu_si256(p as *const __m256i);
    let wide = _mm256_set1_epi64x(!((1i64 << 51) - 1));
    if _mm256_testz_si256(v, wide) != 0 {
        return load(p);
    }
    let t = [*p % q, *p.add(1) % q, *p.add(2) % q, *p.add(3) % q];
    load(t.as_ptr())
}

/// Stores four exact integers in `[0, 2^52)` at `p` as words.
#[inline(always)]
unsafe fn store(p: *mut u64, r: __m256d) {
    _mm256_storeu_si256(p as *mut __m256i, f64_to_words(r));
}

/// `round(x·y)` for `|x·y| < 2^51` (one rounding of the exact product).
#[inline(always)]
unsafe fn round_mul(x: __m256d, y: __m256d) -> __m256d {
    let c = _mm256_set1_pd(ROUND);
    _mm256_sub_pd(_mm256_fmadd_pd(x, y, c), c)
}

/// `a·b − k·q` computed exactly from `h = fl(a·b)` (valid while `|h − k·q| < 2^53`).
#[inline(always)]
unsafe fn product_minus(a: __m256d, b: __m256d, h: __m256d, k: __m256d, q: __m256d) -> __m256d {
    _mm256_add_pd(_mm256_fnmadd_pd(k, q, h), _mm256_fmsub_pd(a, b, h))
}

/// `a·b − k·q` with `k = round(a·b/q)`: exact, `|·| ≤ 0.75q` for `a, b < q`.
#[inline(always)]
unsafe fn mul_lazy(a: __m256d, b: __m256d, q: __m256d, qinv: __m256d) -> __m256d {
    let h = _mm256_mul_pd(a, b);
    product_minus(a, b, h, round_mul(h, qinv), q)
}

/// `x·w − k·q` with `k = round(x·fl(w/q))`: exact, in `(−q, q)` for `x < 2^51`, `w < q`.
#[inline(always)]
unsafe fn shoup_lazy(x: __m256d, w: __m256d, wq: __m256d, q: __m256d) -> __m256d {
    product_minus(x, w, _mm256_mul_pd(x, w), round_mul(x, wq), q)
}

/// `r + q` where `r < 0`.
#[inline(always)]
pub(crate) unsafe fn add_q_if_negative(r: __m256d, q: __m256d) -> __m256d {
    let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(r, _mm256_setzero_pd());
    _mm256_add_pd(r, _mm256_and_pd(neg, q))
}

/// `r − q` where `r ≥ q`.
#[inline(always)]
unsafe fn sub_q_if_at_least(r: __m256d, q: __m256d) -> __m256d {
    let ge = _mm256_cmp_pd::<_CMP_GE_OQ>(r, q);
    _mm256_sub_pd(r, _mm256_and_pd(ge, q))
}

/// `[−q, 2q)` → `[0, q)`.
#[inline(always)]
unsafe fn fix(r: __m256d, q: __m256d) -> __m256d {
    sub_q_if_at_least(add_q_if_negative(r, q), q)
}

/// An exact integer `|x| < 2^53` with `|x/q| < 2^50` reduced to `[0, q)`.
#[inline(always)]
unsafe fn reduce(x: __m256d, q: __m256d, qinv: __m256d) -> __m256d {
    let k = round_mul(x, qinv);
    add_q_if_negative(_mm256_fnmadd_pd(k, q, x), q)
}

/// `a·b mod q` for the scalar tails (any `a`, `b < q`).
#[inline(always)]
fn mul_mod(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

/// `out[i] = a[i]·b[i] mod q`, or `src[i] + a[i]·b[i] mod q` when `ACC` (all inputs `< q`;
/// `src` is read only with `ACC`, and may be `out`: each element is read before it is written).
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn mul<const ACC: bool>(
    out: *mut u64,
    src: *const u64,
    a: *const u64,
    b: *const u64,
    len: usize,
    q: u64,
) {
    let (qv, qinv) = (_mm256_set1_pd(q as f64), _mm256_set1_pd(1.0 / q as f64));
    let body = len - len % 4;
    let mut i = 0;
    while i < body {
        let r = mul_lazy(load(a.add(i)), load(b.add(i)), qv, qinv);
        let r = if ACC {
            fix(_mm256_add_pd(r, load(src.add(i))), qv)
        } else {
            add_q_if_negative(r, qv)
        };
        store(out.add(i), r);
        i += 4;
    }
    for i in body..len {
        let p = mul_mod(*a.add(i), *b.add(i), q);
        *out.add(i) = if ACC { (*src.add(i) + p) % q } else { p };
    }
}

/// `out[i] = a[i]·w mod q`, or `out[i] + a[i]·w mod q` when `ACC` (`w < q`, any `a[i]`;
/// without `ACC`, `out` may be `a`).
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn mul_shoup<const ACC: bool>(
    out: *mut u64,
    a: *const u64,
    len: usize,
    w: u64,
    q: u64,
) {
    let qv = _mm256_set1_pd(q as f64);
    let (wv, wq) = (
        _mm256_set1_pd(w as f64),
        _mm256_set1_pd(w as f64 / q as f64),
    );
    let body = len - len % 4;
    let mut i = 0;
    while i < body {
        let r = shoup_lazy(load_any(a.add(i), q), wv, wq, qv);
        let r = if ACC {
            fix(_mm256_add_pd(r, load(out.add(i))), qv)
        } else {
            add_q_if_negative(r, qv)
        };
        store(out.add(i), r);
        i += 4;
    }
    for i in body..len {
        let p = mul_mod(*a.add(i) % q, w, q);
        *out.add(i) = if ACC { (*out.add(i) + p) % q } else { p };
    }
}

/// `out[i] = Σ_t a[t][i]·w[t].0 mod q` (`w[t].0 < q`, any `a[t][i]`; the Shoup companions
/// `w[t].1` are not needed): the running sum stays in a register, reduced every
/// [`SHOUP_LAZY_TERMS`] terms. `out` must not alias an input.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn mul_shoup_sum(
    out: *mut u64,
    a: &[*const u64],
    w: &[(u64, u64)],
    len: usize,
    q: u64,
) {
    match a.len() {
        1 => return mul_shoup_sum_of::<1>(out, a, w, len, q),
        2 => return mul_shoup_sum_of::<2>(out, a, w, len, q),
        3 => return mul_shoup_sum_of::<3>(out, a, w, len, q),
        4 => return mul_shoup_sum_of::<4>(out, a, w, len, q),
        _ => {}
    }
    let (qv, qinv) = (_mm256_set1_pd(q as f64), _mm256_set1_pd(1.0 / q as f64));
    let ws: Vec<(f64, f64)> = w
        .iter()
        .map(|&(x, _)| (x as f64, x as f64 / q as f64))
        .collect();
    let body = len - len % 4;
    let mut i = 0;
    while i < body {
        let mut s = _mm256_setzero_pd();
        for (t, (&p, &(wt, wqt))) in a.iter().zip(&ws).enumerate() {
            if t > 0 && t % SHOUP_LAZY_TERMS == 0 {
                s = reduce(s, qv, qinv);
            }
            let x = load_any(p.add(i), q);
            s = _mm256_add_pd(
                s,
                shoup_lazy(x, _mm256_set1_pd(wt), _mm256_set1_pd(wqt), qv),
            );
        }
        store(out.add(i), reduce(s, qv, qinv));
        i += 4;
    }
    for i in body..len {
        *out.add(i) = a.iter().zip(w).fold(0, |s, (&p, &(wt, _))| {
            (s + mul_mod(*p.add(i) % q, wt, q)) % q
        });
    }
}

/// [`mul_shoup_sum`] for exactly `T ≤ SHOUP_LAZY_TERMS` terms (the basis conversions' usual
/// 2–4: a key switch's digits of two primes and their balancing term, two special primes):
/// the terms' pointers and constants stay in registers and the loop over them is unrolled,
/// where the general loop reloaded and re-broadcast them for every four elements: 1.39× the
/// time at two terms and 1.44× at three (N = 2^14, a 40-bit prime, AMD Zen 3, 2,000 calls of
/// each interleaved in one process). The same arithmetic, so the same results.
#[target_feature(enable = "avx2,fma")]
unsafe fn mul_shoup_sum_of<const T: usize>(
    out: *mut u64,
    a: &[*const u64],
    w: &[(u64, u64)],
    len: usize,
    q: u64,
) {
    debug_assert!(T <= SHOUP_LAZY_TERMS && a.len() == T && w.len() == T);
    let (qv, qinv) = (_mm256_set1_pd(q as f64), _mm256_set1_pd(1.0 / q as f64));
    let mut p = [std::ptr::null::<u64>(); T];
    let mut wv = [_mm256_setzero_pd(); T];
    let mut wq = [_mm256_setzero_pd(); T];
    for t in 0..T {
        p[t] = a[t];
        wv[t] = _mm256_set1_pd(w[t].0 as f64);
        wq[t] = _mm256_set1_pd(w[t].0 as f64 / q as f64);
    }
    let body = len - len % 4;
    let mut i = 0;
    while i < body {
        let mut s = shoup_lazy(load_any(p[0].add(i), q), wv[0], wq[0], qv);
        for t in 1..T {
            s = _mm256_add_pd(s, shoup_lazy(load_any(p[t].add(i), q), wv[t], wq[t], qv));
        }
        store(out.add(i), reduce(s, qv, qinv));
        i += 4;
    }
    for i in body..len {
        *out.add(i) = a.iter().zip(w).fold(0, |s, (&p, &(wt, _))| {
            (s + mul_mod(*p.add(i) % q, wt, q)) % q
        });
    }
}

/// The lane arithmetic of a lazy inner product ([`dot1`], [`dot2`]): products summed
/// unreduced over four lanes, one reduction at the end of a chunk of terms. The
/// double-precision sums here ([`F64Lanes`]) and the 32-bit integer ones of
/// `dot_avx2_narrow` (`Narrow`) run the same loops.
pub(crate) trait LazyLanes: Copy {
    /// The lanes' constants for the prime `q`.
    unsafe fn new(q: u64) -> Self;
    /// Four loaded inputs.
    type In: Copy;
    /// Four running sums.
    type Sum: Copy;
    /// The four reduced values at `p` when `accumulate`, otherwise zeros.
    unsafe fn start(self, p: *const u64, accumulate: bool) -> Self::Sum;
    /// Four inputs `< q`, as 64-bit words.
    unsafe fn input(self, v: __m256i) -> Self::In;
    /// `s + x·y`, unreduced.
    unsafe fn mul_add(self, s: Self::Sum, x: Self::In, y: Self::In) -> Self::Sum;
    /// Stores `s mod q` at `p`.
    unsafe fn finish(self, p: *mut u64, s: Self::Sum);
}

/// Residue words a lazy inner product loads four at a time: 64-bit, or 32-bit (a prime below
/// `2^32`: a plaintext kept in half the memory) zero-extended on the load.
pub(crate) trait Residue: Copy {
    /// Four words at `p` as 64-bit lanes.
    unsafe fn load4(p: *const Self) -> __m256i;
}

impl Residue for u64 {
    #[inline(always)]
    unsafe fn load4(p: *const u64) -> __m256i {
        _mm256_loadu_si256(p as *const __m256i)
    }
}

impl Residue for u32 {
    #[inline(always)]
    unsafe fn load4(p: *const u32) -> __m256i {
        _mm256_cvtepu32_epi64(_mm_loadu_si128(p as *const __m128i))
    }
}

/// `acc = Σ_t a[t]·b[t] mod q`, plus the old `acc` when `accumulate`, in lanes `L` (all
/// inputs `< q`, and whatever bounds `L` sets on `q` and the terms; at most [`LAZY_TERMS`]
/// terms, one fewer when accumulating; lengths multiples of 4, every slice at least
/// `acc.len()` long). `b`'s words are `B`: 64- or 32-bit.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot1<L: LazyLanes, B: Residue>(
    acc: &mut [u64],
    a: &[&[u64]],
    b: &[&[B]],
    q: u64,
    accumulate: bool,
) {
    let l = L::new(q);
    let p = acc.as_mut_ptr();
    let mut i = 0;
    while i + 4 <= acc.len() {
        let mut s = l.start(p.add(i), accumulate);
        for (x, y) in a.iter().zip(b) {
            let (x, y) = (u64::load4(x.as_ptr().add(i)), B::load4(y.as_ptr().add(i)));
            s = l.mul_add(s, l.input(x), l.input(y));
        }
        l.finish(p.add(i), s);
        i += 4;
    }
}

/// `acc0 = Σ_j d[j]·b[j]`, `acc1 = Σ_j d[j]·a[j] mod q` (plus the old values when
/// `accumulate`) in lanes `L`: the key-switching inner product, each digit's limb loaded once
/// for both halves. Bounds as [`dot1`]; `d`'s words are `D`: 64- or 32-bit.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot2<L: LazyLanes, D: Residue>(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[D]],
    b: &[&[u64]],
    a: &[&[u64]],
    q: u64,
    accumulate: bool,
) {
    let l = L::new(q);
    let (p0, p1) = (acc0.as_mut_ptr(), acc1.as_mut_ptr());
    let mut i = 0;
    while i + 4 <= acc0.len().min(acc1.len()) {
        let (mut s0, mut s1) = (
            l.start(p0.add(i), accumulate),
            l.start(p1.add(i), accumulate),
        );
        for j in 0..d.len() {
            let dv = l.input(D::load4(d[j].as_ptr().add(i)));
            s0 = l.mul_add(s0, dv, l.input(u64::load4(b[j].as_ptr().add(i))));
            s1 = l.mul_add(s1, dv, l.input(u64::load4(a[j].as_ptr().add(i))));
        }
        l.finish(p0.add(i), s0);
        l.finish(p1.add(i), s1);
        i += 4;
    }
}

/// Double-precision lanes: each product exact in `[−q, q]` ([`mul_lazy`]), up to
/// [`LAZY_TERMS`] of them summed below `2^53`.
#[derive(Clone, Copy)]
pub(crate) struct F64Lanes {
    q: __m256d,
    qinv: __m256d,
}

impl LazyLanes for F64Lanes {
    #[inline(always)]
    unsafe fn new(q: u64) -> Self {
        Self {
            q: _mm256_set1_pd(q as f64),
            qinv: _mm256_set1_pd(1.0 / q as f64),
        }
    }
    type In = __m256d;
    type Sum = __m256d;
    #[inline(always)]
    unsafe fn start(self, p: *const u64, accumulate: bool) -> __m256d {
        if accumulate {
            load(p)
        } else {
            _mm256_setzero_pd()
        }
    }
    #[inline(always)]
    unsafe fn input(self, v: __m256i) -> __m256d {
        words_to_f64(v)
    }
    #[inline(always)]
    unsafe fn mul_add(self, s: __m256d, x: __m256d, y: __m256d) -> __m256d {
        _mm256_add_pd(s, mul_lazy(x, y, self.q, self.qinv))
    }
    #[inline(always)]
    unsafe fn finish(self, p: *mut u64, s: __m256d) {
        store(p, reduce(s, self.q, self.qinv))
    }
}

/// `out[i] = c[i] mod q` for integer-valued `|c[i]| < 2^52`: `k = round(c·fl(1/q))` is within
/// `0.5 + 2^52/q·2^-52 < 0.84` of `c/q` (`q ≥ 3`), so `c − k·q ∈ (−q, q)`, exact.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn reduce_f64(out: *mut u64, c: &[f64], q: u64) {
    let (qv, qinv) = (_mm256_set1_pd(q as f64), _mm256_set1_pd(1.0 / q as f64));
    let body = c.len() - c.len() % 4;
    let mut i = 0;
    while i < body {
        let x = _mm256_loadu_pd(c.as_ptr().add(i));
        let k = round_mul(x, qinv);
        store(
            out.add(i),
            add_q_if_negative(_mm256_fnmadd_pd(k, qv, x), qv),
        );
        i += 4;
    }
    for (j, &x) in c.iter().enumerate().skip(body) {
        *out.add(j) = (x as i64).rem_euclid(q as i64) as u64;
    }
}

/// Instantiates a portable element-wise body with AVX2 enabled, so LLVM vectorizes it.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

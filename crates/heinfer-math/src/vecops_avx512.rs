//! AVX-512F/DQ element-wise kernels (CPUs without IFMA, and primes of 50 bits or more).
//!
//! 64×64→128-bit products are built from four 32-bit multiplies (`vpmuludq`) in
//! [`mul_wide`]; Shoup products use the 64-bit companion `⌊w·2^64/q⌋`, Barrett products
//! `r = ⌊2^{k+63}/q⌋` with two conditional subtractions (see [`crate::vecops`]). Every function
//! is `unsafe`: callers must have checked AVX-512F/DQ ([`crate::vec_kernel`]).

use crate::vecops::BarrettConst;
use std::arch::x86_64::*;

#[inline(always)]
pub unsafe fn mul_wide(x: __m512i, y: __m512i) -> (__m512i, __m512i) {
    let lo_mask = _mm512_set1_epi64(0xFFFF_FFFF);
    let x_hi = _mm512_shuffle_epi32::<0b1011_0001>(x);
    let y_hi = _mm512_shuffle_epi32::<0b1011_0001>(y);
    let ll = _mm512_mul_epu32(x, y);
    let lh = _mm512_mul_epu32(x, y_hi);
    let hl = _mm512_mul_epu32(x_hi, y);
    let hh = _mm512_mul_epu32(x_hi, y_hi);
    let t = _mm512_add_epi64(lh, _mm512_srli_epi64::<32>(ll));
    let t_lo = _mm512_and_si512(t, lo_mask);
    let t_hi = _mm512_srli_epi64::<32>(t);
    let u = _mm512_add_epi64(hl, t_lo);
    let hi = _mm512_add_epi64(_mm512_add_epi64(hh, t_hi), _mm512_srli_epi64::<32>(u));
    let lo = _mm512_add_epi64(_mm512_slli_epi64::<32>(u), _mm512_and_si512(ll, lo_mask));
    (lo, hi)
}

#[inline(always)]
pub unsafe fn mulhi(x: __m512i, y: __m512i) -> __m512i {
    mul_wide(x, y).1
}

#[inline(always)]
pub unsafe fn small_mod(x: __m512i, q: __m512i) -> __m512i {
    _mm512_min_epu64(x, _mm512_sub_epi64(x, q))
}

#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_shoup_assign(a: &mut [u64], w: u64, ws: u64, q: u64) {
    let (vw, vws, vq) = (
        _mm512_set1_epi64(w as i64),
        _mm512_set1_epi64(ws as i64),
        _mm512_set1_epi64(q as i64),
    );
    let chunks = a.len() / 8;
    let p = a.as_mut_ptr();
    for c in 0..chunks {
        let ptr = p.add(8 * c) as *mut __m512i;
        let x = _mm512_loadu_si512(ptr as *const _);
        let hi = mulhi(x, vws);
        let r = _mm512_sub_epi64(_mm512_mullo_epi64(x, vw), _mm512_mullo_epi64(hi, vq));
        _mm512_storeu_si512(ptr as *mut _, small_mod(r, vq));
    }
    crate::vecops::mul_shoup_assign_scalar(&mut a[8 * chunks..], w, ws, q);
}

/// `out[i] = a[i]·w mod q` through a raw output pointer (valid for `a.len()` writes).
#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_shoup_to(out: *mut u64, a: &[u64], w: u64, ws: u64, q: u64) {
    let (vw, vws, vq) = (
        _mm512_set1_epi64(w as i64),
        _mm512_set1_epi64(ws as i64),
        _mm512_set1_epi64(q as i64),
    );
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let x = _mm512_loadu_si512(a.as_ptr().add(8 * c) as *const _);
        let hi = mulhi(x, vws);
        let r = _mm512_sub_epi64(_mm512_mullo_epi64(x, vw), _mm512_mullo_epi64(hi, vq));
        _mm512_storeu_si512(out.add(8 * c) as *mut _, small_mod(r, vq));
    }
    for (i, &x) in a.iter().enumerate().skip(8 * chunks) {
        let hi = ((x as u128 * ws as u128) >> 64) as u64;
        let r = x.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(q));
        out.add(i).write(r.min(r.wrapping_sub(q)));
    }
}

/// `out[i] = a[i]·b[i] mod q` through a raw output pointer (valid for `a.len()` writes).
#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_to(out: *mut u64, a: &[u64], bv: &[u64], b: &BarrettConst) {
    let (vq, vr) = (_mm512_set1_epi64(b.q as i64), _mm512_set1_epi64(b.r as i64));
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let x = _mm512_loadu_si512(a.as_ptr().add(8 * c) as *const _);
        let y = _mm512_loadu_si512(bv.as_ptr().add(8 * c) as *const _);
        _mm512_storeu_si512(out.add(8 * c) as *mut _, barrett(x, y, b, vq, vr));
    }
    for i in 8 * chunks..a.len() {
        out.add(i).write(b.mul(a[i], bv[i]));
    }
}

#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_shoup_add_assign(acc: &mut [u64], a: &[u64], w: u64, ws: u64, q: u64) {
    let (vw, vws, vq) = (
        _mm512_set1_epi64(w as i64),
        _mm512_set1_epi64(ws as i64),
        _mm512_set1_epi64(q as i64),
    );
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let pa = acc.as_mut_ptr().add(8 * c) as *mut __m512i;
        let x = _mm512_loadu_si512(a.as_ptr().add(8 * c) as *const _);
        let hi = mulhi(x, vws);
        let r = small_mod(
            _mm512_sub_epi64(_mm512_mullo_epi64(x, vw), _mm512_mullo_epi64(hi, vq)),
            vq,
        );
        let s = _mm512_add_epi64(_mm512_loadu_si512(pa as *const _), r);
        _mm512_storeu_si512(pa as *mut _, small_mod(s, vq));
    }
    crate::vecops::mul_shoup_add_assign_scalar(&mut acc[8 * chunks..], &a[8 * chunks..], w, ws, q);
}

#[inline(always)]
unsafe fn barrett(x: __m512i, y: __m512i, b: &BarrettConst, vq: __m512i, vr: __m512i) -> __m512i {
    let (lo, hi) = mul_wide(x, y);
    let sh = _mm512_set1_epi64((b.k - 1) as i64);
    let shc = _mm512_set1_epi64((65 - b.k) as i64);
    let c1 = _mm512_or_si512(_mm512_srlv_epi64(lo, sh), _mm512_sllv_epi64(hi, shc));
    let c3 = mulhi(c1, vr);
    // r ∈ [0, 3q): see `BarrettConst::mul`
    let r = small_mod(_mm512_sub_epi64(lo, _mm512_mullo_epi64(c3, vq)), vq);
    small_mod(r, vq)
}

#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_into(out: &mut [u64], a: &[u64], bv: &[u64], b: &BarrettConst) {
    let (vq, vr) = (_mm512_set1_epi64(b.q as i64), _mm512_set1_epi64(b.r as i64));
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let x = _mm512_loadu_si512(a.as_ptr().add(8 * c) as *const _);
        let y = _mm512_loadu_si512(bv.as_ptr().add(8 * c) as *const _);
        _mm512_storeu_si512(
            out.as_mut_ptr().add(8 * c) as *mut _,
            barrett(x, y, b, vq, vr),
        );
    }
    for i in 8 * chunks..a.len() {
        out[i] = b.mul(a[i], bv[i]);
    }
}

#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_assign(a: &mut [u64], bv: &[u64], b: &BarrettConst) {
    let (vq, vr) = (_mm512_set1_epi64(b.q as i64), _mm512_set1_epi64(b.r as i64));
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let pa = a.as_mut_ptr().add(8 * c) as *mut __m512i;
        let x = _mm512_loadu_si512(pa as *const _);
        let y = _mm512_loadu_si512(bv.as_ptr().add(8 * c) as *const _);
        _mm512_storeu_si512(pa as *mut _, barrett(x, y, b, vq, vr));
    }
    for i in 8 * chunks..a.len() {
        a[i] = b.mul(a[i], bv[i]);
    }
}

/// `out[i] = src[i] + a[i]·bv[i] mod q` for `i < a.len()`; `out` and `src` hold `a.len()`
/// words and may be the same buffer (each element is read before it is written).
#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_add_to(out: *mut u64, src: *const u64, a: &[u64], bv: &[u64], b: &BarrettConst) {
    let (vq, vr) = (_mm512_set1_epi64(b.q as i64), _mm512_set1_epi64(b.r as i64));
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let x = _mm512_loadu_si512(a.as_ptr().add(8 * c) as *const _);
        let y = _mm512_loadu_si512(bv.as_ptr().add(8 * c) as *const _);
        let acc = _mm512_loadu_si512(src.add(8 * c) as *const _);
        let s = _mm512_add_epi64(acc, barrett(x, y, b, vq, vr));
        _mm512_storeu_si512(out.add(8 * c) as *mut _, small_mod(s, vq));
    }
    for i in 8 * chunks..a.len() {
        *out.add(i) = small_mod_s(*src.add(i) + b.mul(a[i], bv[i]), b.q);
    }
}

#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn mul_add_assign(acc: &mut [u64], a: &[u64], bv: &[u64], b: &BarrettConst) {
    let p = acc.as_mut_ptr();
    mul_add_to(p, p, &a[..acc.len().min(a.len())], bv, b)
}

#[inline(always)]
fn small_mod_s(x: u64, q: u64) -> u64 {
    x.min(x.wrapping_sub(q))
}

/// Instantiates a portable element-wise body with AVX-512 enabled, so LLVM vectorizes it.
#[target_feature(enable = "avx512f,avx512dq")]
pub unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

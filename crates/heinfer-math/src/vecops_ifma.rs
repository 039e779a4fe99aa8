//! AVX-512 IFMA element-wise kernels for primes `q < 2^50` (52-bit limbs).
//!
//! IFMA multiplies the low 52 bits of two 64-bit lanes into a 104-bit product and adds either
//! its low half (`vpmadd52luq`: `c + lo52(a·b)`) or its high half (`vpmadd52huq`:
//! `c + ⌊a·b/2^52⌋`) to a 64-bit accumulator — one instruction where the plain AVX-512 path
//! needs four 32-bit multiplies and a dozen shifts and adds. Every kernel computes a value `t`
//! that is known to lie in `[0, 4q)`: since `4q < 2^52`, it suffices to know `t mod 2^52`, so
//! quotient corrections are added as `lo52(h·(2^52 − q)) ≡ −h·q (mod 2^52)` and one mask
//! recovers `t` exactly. Two conditional subtractions (`min(t, t − 2q)`, `min(t, t − q)`)
//! then leave the unique representative in `[0, q)`: outputs are fully reduced and therefore
//! bit-identical to the portable kernels.
//!
//! * **Barrett** (`a·b`, both `< q`, `k = ⌈log2 q⌉ ≤ 50`): `c = ⌊a·b/2^{k−1}⌋ < 2^{k+1}`,
//!   `r = ⌊2^{k−1+52}/q⌋ < 2^52`, `h = ⌊c·r/2^52⌋`. Then `⌊a·b/q⌋ − h ∈ {0, 1, 2}` (the
//!   estimate loses `< a·b/2^{k+51} ≤ 1/2`, `< 2^{k−1}/q ≤ 1` and one floor), so
//!   `a·b − h·q ∈ [0, 3q)`, plus an accumulator `< q` for multiply-accumulate.
//! * **Shoup** (`x·w` for a constant `w < q`, `x < 2^52`): `w' = ⌊w·2^52/q⌋` (the 64-bit
//!   companion shifted right by 12), `h = ⌊x·w'/2^52⌋`, `x·w − h·q ∈ [0, 2q)`. Lanes with
//!   `x ≥ 2^52` (legal for the portable Shoup kernels) are detected per block of eight and
//!   computed by the portable formula.
//! * **Lazy inner products** ([`dot1`], [`dot2`]): the 104-bit products are summed unreduced
//!   as `(Σ hi52, Σ lo52)`, two instructions per product; after at most [`LAZY_TERMS`] terms
//!   `S = H·2^52 + L` with `H < 2^52` is reduced as `Shoup(H, 2^52 mod q) + Shoup(L, 1)`.
//! * **Key-switching helpers**: [`sub_mul_shoup`] (ModDown's `(x − Conv)·P^{-1}`: the
//!   unreduced difference `x − c + q < 2q` is a valid Shoup input) and [`mul_shoup_sum`]
//!   (the fast basis conversion `Σ_i t_i·w_i`, the running sum kept in a register).
//!
//! Every function here is `unsafe`: it must only be called when [`available`] is true, with
//! pointers valid for `len` elements (outputs may alias an input exactly, never partially).

use crate::vecops::BarrettConst;
use std::arch::x86_64::*;

/// Largest prime size the kernels accept: `q < 2^MAX_BITS` keeps `4q < 2^52`.
pub(crate) const MAX_BITS: u32 = 50;

/// Products summed unreduced in [`dot1`] / [`dot2`]: `15·2^48 + 2^12 < 2^52` bounds the high
/// sum (each `hi52(a·b) < q²/2^52 < 2^48`), the low sum stays below `2^56`.
pub(crate) const LAZY_TERMS: usize = 15;

const MASK52: u64 = (1 << 52) - 1;

/// Whether this CPU runs the IFMA kernels.
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512ifma")
}

/// Broadcast constants of one modulus.
#[derive(Clone, Copy)]
struct Consts {
    q: __m512i,
    two_q: __m512i,
    neg_q: __m512i,
    mask: __m512i,
    zero: __m512i,
}

#[inline(always)]
unsafe fn consts(q: u64) -> Consts {
    Consts {
        q: _mm512_set1_epi64(q as i64),
        two_q: _mm512_set1_epi64(2 * q as i64),
        neg_q: _mm512_set1_epi64(((1u64 << 52) - q) as i64),
        mask: _mm512_set1_epi64(MASK52 as i64),
        zero: _mm512_setzero_si512(),
    }
}

/// `t ≡ x (mod 2^52)` with the true value in `[0, 4q)` ↦ `t mod q`.
#[inline(always)]
unsafe fn finish(t: __m512i, c: &Consts) -> __m512i {
    let t = _mm512_and_si512(t, c.mask);
    let t = _mm512_min_epu64(t, _mm512_sub_epi64(t, c.two_q));
    _mm512_min_epu64(t, _mm512_sub_epi64(t, c.q))
}

#[inline(always)]
unsafe fn load(p: *const u64, i: usize) -> __m512i {
    _mm512_loadu_si512(p.add(i) as *const _)
}

/// Residue words the inner products load eight at a time into 64-bit lanes: 64-bit words as
/// they are, 32-bit ones (a prime below `2^32`: compact keys and plaintexts) zero-extended by
/// the load, with no widened copy.
pub(crate) trait Lanes: Copy {
    /// The eight words at `p + i`, in 64-bit lanes.
    ///
    /// # Safety
    /// `p + i .. p + i + 8` must be readable, from a function compiled with `avx512f`.
    unsafe fn load8(p: *const Self, i: usize) -> __m512i;
}

impl Lanes for u64 {
    #[inline(always)]
    unsafe fn load8(p: *const u64, i: usize) -> __m512i {
        load(p, i)
    }
}

impl Lanes for u32 {
    #[inline(always)]
    unsafe fn load8(p: *const u32, i: usize) -> __m512i {
        _mm512_cvtepu32_epi64(_mm256_loadu_si256(p.add(i) as *const _))
    }
}

#[inline(always)]
unsafe fn store(p: *mut u64, i: usize, v: __m512i) {
    _mm512_storeu_si512(p.add(i) as *mut _, v)
}

/// Barrett shift counts and constant of `b` as vectors `(k − 1, 53 − k, r)`.
#[inline(always)]
unsafe fn barrett_vectors(b: &BarrettConst) -> (__m512i, __m512i, __m512i) {
    let k = b.bits() as i64;
    (
        _mm512_set1_epi64(k - 1),
        _mm512_set1_epi64(53 - k),
        _mm512_set1_epi64(b.r52() as i64),
    )
}

/// `acc + x·y − h·q (mod 2^52)` for the Barrett quotient estimate `h` (true value in `[0, 4q)`).
#[inline(always)]
unsafe fn barrett_lazy(
    acc: __m512i,
    x: __m512i,
    y: __m512i,
    (sh_lo, sh_hi, r): (__m512i, __m512i, __m512i),
    c: &Consts,
) -> __m512i {
    let lo = _mm512_madd52lo_epu64(c.zero, x, y);
    let hi = _mm512_madd52hi_epu64(c.zero, x, y);
    let top = _mm512_or_si512(_mm512_srlv_epi64(lo, sh_lo), _mm512_sllv_epi64(hi, sh_hi));
    let h = _mm512_madd52hi_epu64(c.zero, top, r);
    _mm512_madd52lo_epu64(_mm512_add_epi64(lo, acc), h, c.neg_q)
}

/// `out[i] = a[i]·b[i] mod q` for `i < len` (inputs `< q < 2^50`).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn mul(
    out: *mut u64,
    a: *const u64,
    b: *const u64,
    len: usize,
    bc: &BarrettConst,
) {
    let c = consts(bc.modulus());
    let bv = barrett_vectors(bc);
    let body = len - len % 8;
    for i in (0..body).step_by(8) {
        let t = barrett_lazy(c.zero, load(a, i), load(b, i), bv, &c);
        store(out, i, finish(t, &c));
    }
    for i in body..len {
        *out.add(i) = bc.mul(*a.add(i), *b.add(i));
    }
}

/// `out[i] = src[i] + a[i]·b[i] mod q` for `i < len` (inputs `< q < 2^50`); `out` may be
/// `src` (each element is read before it is written).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn mul_add(
    out: *mut u64,
    src: *const u64,
    a: *const u64,
    b: *const u64,
    len: usize,
    bc: &BarrettConst,
) {
    let c = consts(bc.modulus());
    let bv = barrett_vectors(bc);
    let body = len - len % 8;
    for i in (0..body).step_by(8) {
        let t = barrett_lazy(load(src, i), load(a, i), load(b, i), bv, &c);
        store(out, i, finish(t, &c));
    }
    let q = bc.modulus();
    for i in body..len {
        let s = *src.add(i) + bc.mul(*a.add(i), *b.add(i));
        *out.add(i) = s.min(s.wrapping_sub(q));
    }
}

/// Portable Shoup product for one element (any `x`), as in [`crate::Modulus::mul_shoup`].
#[inline(always)]
fn shoup_scalar(x: u64, w: u64, ws: u64, q: u64) -> u64 {
    let h = ((x as u128 * ws as u128) >> 64) as u64;
    let r = x.wrapping_mul(w).wrapping_sub(h.wrapping_mul(q));
    r.min(r.wrapping_sub(q))
}

/// `out[i] = (acc ? out[i] : 0) + a[i]·w mod q` for `i < len`, `w < q < 2^50` with 64-bit
/// Shoup companion `ws = ⌊w·2^64/q⌋`; any `a[i]` (blocks holding a value `≥ 2^52` take the
/// portable formula). With `ACC`, `out[i] < q`.
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn mul_shoup<const ACC: bool>(
    out: *mut u64,
    a: *const u64,
    len: usize,
    w: u64,
    ws: u64,
    q: u64,
) {
    let c = consts(q);
    let vw = _mm512_set1_epi64(w as i64);
    // ⌊⌊w·2^64/q⌋ / 2^12⌋ = ⌊w·2^52/q⌋
    let vws = _mm512_set1_epi64((ws >> 12) as i64);
    let limit = _mm512_set1_epi64(1 << 52);
    let body = len - len % 8;
    let scalar = |i: usize| {
        let r = shoup_scalar(*a.add(i), w, ws, q);
        let s = if ACC { *out.add(i) + r } else { r };
        *out.add(i) = s.min(s.wrapping_sub(q));
    };
    for i in (0..body).step_by(8) {
        let x = load(a, i);
        if _mm512_cmpge_epu64_mask(x, limit) != 0 {
            (i..i + 8).for_each(scalar);
            continue;
        }
        let init = if ACC { load(out, i) } else { c.zero };
        let h = _mm512_madd52hi_epu64(c.zero, x, vws);
        let t = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(init, x, vw), h, c.neg_q);
        store(out, i, finish(t, &c));
    }
    (body..len).for_each(scalar);
}

/// Shoup constants `(w, ⌊w·2^52/q⌋)` for `w = 2^52 mod q` and `w = 1`, as vectors.
#[inline(always)]
unsafe fn fold_vectors(q: u64) -> [__m512i; 3] {
    let w = ((1u128 << 52) % q as u128) as u64;
    let ws = ((w as u128) << 52) / q as u128;
    let one_s = (1u64 << 52) / q;
    [
        _mm512_set1_epi64(w as i64),
        _mm512_set1_epi64(ws as i64),
        _mm512_set1_epi64(one_s as i64),
    ]
}

/// `(H, L)` unreduced sums (`H < 2^52` after the carry, see the module docs) ↦ `S mod q`.
#[inline(always)]
unsafe fn fold(hi: __m512i, lo: __m512i, f: &[__m512i; 3], c: &Consts) -> __m512i {
    let h = _mm512_add_epi64(hi, _mm512_srli_epi64::<52>(lo));
    let l = _mm512_and_si512(lo, c.mask);
    // S ≡ H·(2^52 mod q) + L·1: two Shoup products, each in [0, 2q)
    let qh = _mm512_madd52hi_epu64(c.zero, h, f[1]);
    let ql = _mm512_madd52hi_epu64(c.zero, l, f[2]);
    let t = _mm512_madd52lo_epu64(l, h, f[0]);
    let t = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(t, qh, c.neg_q), ql, c.neg_q);
    finish(t, c)
}

/// `acc = (accumulate ? acc : 0) + Σ_t a[t]·b[t] mod q` over `len` coefficients, for at most
/// [`LAZY_TERMS`] terms (inputs `< q < 2^50`; `len` a multiple of 8).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn dot1<W: Lanes>(
    acc: &mut [u64],
    a: &[&[u64]],
    b: &[&[W]],
    q: u64,
    accumulate: bool,
) {
    let c = consts(q);
    let f = fold_vectors(q);
    let p = acc.as_mut_ptr();
    for i in (0..acc.len()).step_by(8) {
        let mut lo = if accumulate { load(p, i) } else { c.zero };
        let mut hi = c.zero;
        for (x, y) in a.iter().zip(b) {
            let (x, y) = (load(x.as_ptr(), i), W::load8(y.as_ptr(), i));
            lo = _mm512_madd52lo_epu64(lo, x, y);
            hi = _mm512_madd52hi_epu64(hi, x, y);
        }
        store(p, i, fold(hi, lo, &f, &c));
    }
}

/// `acc0 = (acc? acc0 : 0) + Σ_j d[j]·b[j]`, `acc1 = (acc? acc1 : 0) + Σ_j d[j]·a[j]` modulo
/// `q`, for at most [`LAZY_TERMS`] digits (inputs `< q < 2^50`; `len` a multiple of 8).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn dot2<W: Lanes>(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[W]],
    b: &[&[u64]],
    a: &[&[u64]],
    q: u64,
    accumulate: bool,
) {
    let c = consts(q);
    let f = fold_vectors(q);
    let (p0, p1) = (acc0.as_mut_ptr(), acc1.as_mut_ptr());
    for i in (0..acc0.len()).step_by(8) {
        let (mut lo0, mut lo1) = if accumulate {
            (load(p0, i), load(p1, i))
        } else {
            (c.zero, c.zero)
        };
        let (mut hi0, mut hi1) = (c.zero, c.zero);
        for j in 0..d.len() {
            let x = W::load8(d[j].as_ptr(), i);
            let (y0, y1) = (load(b[j].as_ptr(), i), load(a[j].as_ptr(), i));
            lo0 = _mm512_madd52lo_epu64(lo0, x, y0);
            hi0 = _mm512_madd52hi_epu64(hi0, x, y0);
            lo1 = _mm512_madd52lo_epu64(lo1, x, y1);
            hi1 = _mm512_madd52hi_epu64(hi1, x, y1);
        }
        store(p0, i, fold(hi0, lo0, &f, &c));
        store(p1, i, fold(hi1, lo1, &f, &c));
    }
}

/// `a[i] = (a[i] − b[i])·w mod q` for `i < len` (`a[i], b[i] < q < 2^50`, `w < q` with 64-bit
/// Shoup companion `ws`): `a − b + q ∈ [1, 2q) < 2^52` is a valid Shoup multiplicand, so the
/// difference needs no reduction of its own.
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn sub_mul_shoup(
    a: *mut u64,
    b: *const u64,
    len: usize,
    w: u64,
    ws: u64,
    q: u64,
) {
    let c = consts(q);
    let vw = _mm512_set1_epi64(w as i64);
    let vws = _mm512_set1_epi64((ws >> 12) as i64);
    let body = len - len % 8;
    for i in (0..body).step_by(8) {
        let x = _mm512_sub_epi64(_mm512_add_epi64(load(a, i), c.q), load(b, i));
        let h = _mm512_madd52hi_epu64(c.zero, x, vws);
        let t = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(c.zero, x, vw), h, c.neg_q);
        store(a, i, finish(t, &c));
    }
    for i in body..len {
        *a.add(i) = shoup_scalar(*a.add(i) + q - *b.add(i), w, ws, q);
    }
}

/// `out[i] = Σ_t a_t[i]·w_t mod q` for `i < len` (`w_t < q < 2^50` with 64-bit Shoup
/// companions `ws_t`; any `a_t[i]`, blocks holding a value `≥ 2^52` take the portable formula):
/// the fast basis conversion's inner sum, with the running sum kept in a register — each
/// Shoup product in `[0, 2q)` is added to a sum in `[0, q)` and `finish` reduces `[0, 3q)`.
/// `a` and `w` have the same length; `out` is not read (it may be uninitialized).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn mul_shoup_sum(
    out: *mut u64,
    a: &[*const u64],
    w: &[(u64, u64)],
    len: usize,
    q: u64,
) {
    let c = consts(q);
    let limit = _mm512_set1_epi64(1 << 52);
    let body = len - len % 8;
    let scalar = |i: usize| {
        let mut s = 0u64;
        for (&p, &(wt, wst)) in a.iter().zip(w) {
            let r = s + shoup_scalar(*p.add(i), wt, wst, q);
            s = r.min(r.wrapping_sub(q));
        }
        *out.add(i) = s;
    };
    'block: for i in (0..body).step_by(8) {
        let mut s = c.zero;
        for (&p, &(wt, wst)) in a.iter().zip(w) {
            let x = load(p, i);
            if _mm512_cmpge_epu64_mask(x, limit) != 0 {
                (i..i + 8).for_each(scalar);
                continue 'block;
            }
            let h = _mm512_madd52hi_epu64(c.zero, x, _mm512_set1_epi64((wst >> 12) as i64));
            let t = _mm512_madd52lo_epu64(s, x, _mm512_set1_epi64(wt as i64));
            s = finish(_mm512_madd52lo_epu64(t, h, c.neg_q), &c);
        }
        store(out, i, s);
    }
    (body..len).for_each(scalar);
}

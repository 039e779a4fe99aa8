//! Inner products of residue vectors for one RNS limb: the key-switching inner product
//! [`dot2`] (`acc_0 = Σ_j d_j·b_j`, `acc_1 = Σ_j d_j·a_j (mod q)` over the digits `j`) and the
//! plaintext dot product [`dot1`] (`acc = Σ_t a_t·b_t (mod q)`, the sums of plaintext products
//! of latency mode's kernels).
//!
//! For `q < 2^50` on AVX-512 the products run in double precision (see [`crate::ntt`] for the
//! exact FMA product): each product lands in `[−q, q]` un-reduced, up to eight of them are
//! summed in registers (`|Σ| ≤ 8q ≤ 2^53`, still exact; a chunk after the first adds the
//! reduced running sum and seven products), and one reduction per coefficient finishes. Each
//! digit's limb is loaded once for both key halves. When the process runs the IFMA kernels
//! ([`crate::vec_kernel`]) and `q < 2^50`, the 104-bit products are summed unreduced instead,
//! two multiply-add instructions per product and one reduction per 15 terms
//! (`vecops_ifma::dot2`). On AVX2 + FMA CPUs without AVX-512 the same double-precision sums
//! run four lanes at a time (`vecops_avx2`), and for primes `2^20 ≤ q < 2^30` as 32-bit
//! integer products summed in 64-bit lanes (`dot_avx2_narrow`: one multiply instruction per
//! four products). Otherwise, Barrett products. All paths give the same bits.
//!
//! [`dot1_narrow`] and [`dot2_narrow`] take the plaintext operand in 32-bit words (a prime
//! below `2^32`: a compact plaintext, two thirds or less of the memory): the AVX2 kernels
//! zero-extend four words per load and the IFMA kernels eight; the other families widen eight
//! terms at a time into a buffer and sum those.

use crate::vec_kernel::{kernel_for, VecKernel};
use crate::vecops::{self, BarrettConst};
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest number of products accumulated before a reduction on the FMA paths (one fewer when
/// the chunk also adds the running sum, so that `|Σ| ≤ 8q < 2^53`).
const LAZY_TERMS: usize = 8;
#[cfg(target_arch = "x86_64")]
const _: () = assert!(
    LAZY_TERMS == crate::vecops_avx2::LAZY_TERMS
        && LAZY_TERMS == crate::dot_avx2_narrow::LAZY_TERMS
);

/// `(start, end, accumulate)` of the chunks of `len` terms one kernel call sums (at most
/// `most`), onto the running sum from the first chunk on when `onto`; a chunk that adds onto
/// the running sum takes `spare` terms fewer (the FMA paths' bound counts the sum as a term).
fn chunks(
    len: usize,
    most: usize,
    spare: usize,
    onto: bool,
) -> impl Iterator<Item = (usize, usize, bool)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= len {
            return None;
        }
        let accumulate = onto || start > 0;
        let take = if accumulate { most - spare } else { most };
        let end = (start + take).min(len);
        let chunk = (start, end, accumulate);
        start = end;
        Some(chunk)
    })
}

/// Whether every slice holds at least `n` words (the vector kernels read `n` of each).
fn long_enough<W>(n: usize, xs: &[&[&[W]]]) -> bool {
    xs.iter().all(|s| s.iter().all(|v| v.len() >= n))
}

/// The lazy inner products of one SIMD family, summing up to [`LAZY_TERMS`] products per
/// reduction: AVX-512's or AVX2's in double precision, or AVX2's 32-bit integer products
/// for primes `2^20 ≤ q < 2^30`.
/// `W`: the words of `dot1`'s second and `dot2`'s first operand (64- or 32-bit).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::type_complexity)]
struct LazyKernel<W> {
    dot1: unsafe fn(&mut [u64], &[&[u64]], &[&[W]], u64, bool),
    dot2: unsafe fn(&mut [u64], &mut [u64], &[&[W]], &[&[u64]], &[&[u64]], u64, bool),
}

/// The lazy kernels for family `k`, if it has them and they apply (`q < 2^50`,
/// lengths a multiple of 8); IFMA's own sums are taken before this.
#[cfg(target_arch = "x86_64")]
fn lazy_kernel(k: VecKernel, vector_ok: bool, q: u64) -> Option<LazyKernel<u64>> {
    if !vector_ok || q >= (1u64 << 50) {
        return None;
    }
    match k {
        VecKernel::Avx2 => avx2_kernel(q),
        VecKernel::Avx512 | VecKernel::Ifma if crate::ntt_fma::available() => Some(LazyKernel {
            dot1: fma::dot1,
            dot2: fma::dot2,
        }),
        _ => None,
    }
}

/// `acc = Σ a·b` (onto `acc` when `onto`) through the lazy kernel `f`, chunk by chunk.
///
/// # Safety
/// What `f`'s choice requires: the CPU features, `q` in its range, every slice at least
/// `acc.len()` words, a multiple of 8.
#[cfg(target_arch = "x86_64")]
unsafe fn lazy_dot1<W>(
    f: &LazyKernel<W>,
    acc: &mut [u64],
    a: &[&[u64]],
    b: &[&[W]],
    q: u64,
    onto: bool,
) {
    for (start, end, accumulate) in chunks(a.len(), LAZY_TERMS, 1, onto) {
        // SAFETY: the caller's guarantees; a chunk sums at most LAZY_TERMS terms, one fewer
        // when it adds the running sum.
        unsafe { (f.dot1)(acc, &a[start..end], &b[start..end], q, accumulate) };
    }
}

/// `acc0 = Σ d·b`, `acc1 = Σ d·a` (onto them when `onto`) through `f`, as [`lazy_dot1`].
///
/// # Safety
/// As [`lazy_dot1`]'s, with `acc0.len() == acc1.len()`.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn lazy_dot2<W>(
    f: &LazyKernel<W>,
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[W]],
    b: &[&[u64]],
    a: &[&[u64]],
    q: u64,
    onto: bool,
) {
    for (start, end, accumulate) in chunks(d.len(), LAZY_TERMS, 1, onto) {
        let (d, b, a) = (&d[start..end], &b[start..end], &a[start..end]);
        // SAFETY: as in `lazy_dot1`.
        unsafe { (f.dot2)(acc0, acc1, d, b, a, q, accumulate) };
    }
}

/// The AVX2 family's lazy kernels for `q < 2^50` over operands of `W` words: 32-bit integer
/// products for `2^20 ≤ q < 2^30` (unless [`set_narrow_sums`] turned them off), double
/// precision otherwise.
#[cfg(target_arch = "x86_64")]
fn avx2_kernel<W: crate::vecops_avx2::Residue>(q: u64) -> Option<LazyKernel<W>> {
    use crate::dot_avx2_narrow::{applies, Narrow};
    use crate::vecops_avx2::{dot1, dot2, F64Lanes};
    Some(if applies(q) && NARROW.load(Ordering::Relaxed) {
        LazyKernel {
            dot1: dot1::<Narrow, W>,
            dot2: dot2::<Narrow, W>,
        }
    } else {
        LazyKernel {
            dot1: dot1::<F64Lanes, W>,
            dot2: dot2::<F64Lanes, W>,
        }
    })
}

/// Whether the AVX2 family may sum with 32-bit integer products ([`set_narrow_sums`]).
static NARROW: AtomicBool = AtomicBool::new(true);

/// Lets the AVX2 family sum the products of primes `2^20 ≤ q < 2^30` as 32-bit integer
/// products (the default, `true`) or makes it use its double-precision sums for every prime
/// below `2^50` (`false`), for the rest of the process: benchmarks compare the two in one run.
/// Results do not change.
pub fn set_narrow_sums(enabled: bool) {
    NARROW.store(enabled, Ordering::Relaxed);
}

/// Writes `acc = Σ_t a[t]·b[t]` modulo `q` (all inputs in `[0, q)`; at least one term).
pub fn dot1(acc: &mut [u64], a: &[&[u64]], b: &[&[u64]], bc: &BarrettConst) {
    dot1_with(kernel_for(bc.modulus()), acc, a, b, bc, false)
}

/// [`dot1`] through the kernel family `k` (which this CPU must support); `onto` adds the sum
/// to `acc` (in `[0, q)`) instead of writing it.
pub(crate) fn dot1_with(
    k: VecKernel,
    acc: &mut [u64],
    a: &[&[u64]],
    b: &[&[u64]],
    bc: &BarrettConst,
    onto: bool,
) {
    assert!(!a.is_empty() && a.len() == b.len());
    let vector_ok = acc.len().is_multiple_of(8) && long_enough(acc.len(), &[a, b]);
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Ifma && vector_ok && bc.modulus() >> crate::vecops_ifma::MAX_BITS == 0 {
        // SAFETY: IFMA is available (`k`), q < 2^50, every slice holds `acc.len()` words, a
        // multiple of 8.
        return unsafe { ifma_dot1(acc, a, b, bc.modulus(), onto) };
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(f) = lazy_kernel(k, vector_ok, bc.modulus()) {
        // SAFETY: `lazy_kernel` checked the CPU features, q < 2^50 and the lengths.
        unsafe { lazy_dot1(&f, acc, a, b, bc.modulus(), onto) };
        return;
    }
    let _ = vector_ok;
    if !onto {
        vecops::mul_into_with(k, acc, a[0], b[0], bc);
    }
    for t in usize::from(!onto)..a.len() {
        vecops::mul_add_assign_with(k, acc, a[t], b[t], bc);
    }
}

/// Writes `acc0 = Σ_j d[j]·b[j]` and `acc1 = Σ_j d[j]·a[j]` modulo `q` (all inputs in `[0, q)`).
pub fn dot2(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[u64]],
    b: &[&[u64]],
    a: &[&[u64]],
    bc: &BarrettConst,
) {
    dot2_with(kernel_for(bc.modulus()), acc0, acc1, d, b, a, bc, false)
}

/// [`dot2`] through the kernel family `k` (which this CPU must support); `onto` adds the sums
/// to `acc0`, `acc1` (in `[0, q)`) instead of writing them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dot2_with(
    k: VecKernel,
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[u64]],
    b: &[&[u64]],
    a: &[&[u64]],
    bc: &BarrettConst,
    onto: bool,
) {
    assert!(!d.is_empty() && d.len() == b.len() && d.len() == a.len());
    let n = acc0.len();
    let vector_ok = n.is_multiple_of(8) && acc1.len() == n && long_enough(n, &[d, b, a]);
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Ifma && vector_ok && bc.modulus() >> crate::vecops_ifma::MAX_BITS == 0 {
        // SAFETY: IFMA is available (`k`), q < 2^50, every slice holds `n` words, a multiple of
        // 8.
        return unsafe { ifma_dot2(acc0, acc1, d, b, a, bc.modulus(), onto) };
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(f) = lazy_kernel(k, vector_ok, bc.modulus()) {
        // SAFETY: as above (`vector_ok` includes acc1.len() == n).
        unsafe { lazy_dot2(&f, acc0, acc1, d, b, a, bc.modulus(), onto) };
        return;
    }
    let _ = vector_ok;
    if !onto {
        vecops::mul_into_with(k, acc0, d[0], b[0], bc);
        vecops::mul_into_with(k, acc1, d[0], a[0], bc);
    }
    for j in usize::from(!onto)..d.len() {
        vecops::mul_add_assign_with(k, acc0, d[j], b[j], bc);
        vecops::mul_add_assign_with(k, acc1, d[j], a[j], bc);
    }
}

/// Terms widened at a time where no kernel reads 32-bit words (one lazy chunk of eight).
const WIDEN_TERMS: usize = 8;

/// [`dot1`] with `b`'s residues in 32-bit words (a prime `q < 2^32`): the AVX2 and IFMA
/// families read them as they are; the others widen a few terms at a time into a buffer and
/// sum those. The
/// same bits as [`dot1`] on the same residues.
pub fn dot1_narrow(acc: &mut [u64], a: &[&[u64]], b: &[&[u32]], bc: &BarrettConst) {
    dot1_narrow_with(kernel_for(bc.modulus()), acc, a, b, bc)
}

/// [`dot1_narrow`] through the kernel family `k` (which this CPU must support).
pub(crate) fn dot1_narrow_with(
    k: VecKernel,
    acc: &mut [u64],
    a: &[&[u64]],
    b: &[&[u32]],
    bc: &BarrettConst,
) {
    assert!(!a.is_empty() && a.len() == b.len() && bc.modulus() >> 32 == 0);
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Ifma
        && acc.len().is_multiple_of(8)
        && long_enough(acc.len(), &[a])
        && long_enough(acc.len(), &[b])
    {
        // SAFETY: IFMA is available (`k`), q < 2^32, every slice holds `acc.len()` words, a
        // multiple of 8.
        return unsafe { ifma_dot1(acc, a, b, bc.modulus(), false) };
    }
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Avx2 {
        let ok = acc.len().is_multiple_of(8)
            && long_enough(acc.len(), &[a])
            && long_enough(acc.len(), &[b]);
        if let (true, Some(f)) = (ok, avx2_kernel::<u32>(bc.modulus())) {
            // SAFETY: AVX2 and FMA are available (`k`), q < 2^32, lengths checked (`ok`).
            unsafe { lazy_dot1(&f, acc, a, b, bc.modulus(), false) };
            return;
        }
    }
    let mut wide = vec![0u64; WIDEN_TERMS * acc.len()];
    for (start, end, onto) in chunks(b.len(), WIDEN_TERMS, 0, false) {
        let bw = widen(&b[start..end], acc.len(), &mut wide);
        dot1_with(k, acc, &a[start..end], &bw, bc, onto);
    }
}

/// [`dot2`] with `d`'s residues in 32-bit words (a prime `q < 2^32`), as [`dot1_narrow`].
pub fn dot2_narrow(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[u32]],
    b: &[&[u64]],
    a: &[&[u64]],
    bc: &BarrettConst,
) {
    dot2_narrow_with(kernel_for(bc.modulus()), acc0, acc1, d, b, a, bc)
}

/// [`dot2_narrow`] through the kernel family `k` (which this CPU must support).
pub(crate) fn dot2_narrow_with(
    k: VecKernel,
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[u32]],
    b: &[&[u64]],
    a: &[&[u64]],
    bc: &BarrettConst,
) {
    assert!(!d.is_empty() && d.len() == b.len() && d.len() == a.len() && bc.modulus() >> 32 == 0);
    let n = acc0.len();
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Ifma
        && n.is_multiple_of(8)
        && acc1.len() == n
        && long_enough(n, &[d])
        && long_enough(n, &[b, a])
    {
        // SAFETY: as in `dot1_narrow_with`.
        return unsafe { ifma_dot2(acc0, acc1, d, b, a, bc.modulus(), false) };
    }
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Avx2 {
        let ok = n.is_multiple_of(8)
            && acc1.len() == n
            && long_enough(n, &[d])
            && long_enough(n, &[b, a]);
        if let (true, Some(f)) = (ok, avx2_kernel::<u32>(bc.modulus())) {
            // SAFETY: as in `dot1_narrow_with`.
            unsafe { lazy_dot2(&f, acc0, acc1, d, b, a, bc.modulus(), false) };
            return;
        }
    }
    let mut wide = vec![0u64; WIDEN_TERMS * n];
    for (start, end, onto) in chunks(d.len(), WIDEN_TERMS, 0, false) {
        let dw = widen(&d[start..end], n, &mut wide);
        dot2_with(k, acc0, acc1, &dw, &b[start..end], &a[start..end], bc, onto);
    }
}

/// The IFMA [`dot1`] over any number of terms, [`crate::vecops_ifma::LAZY_TERMS`] per
/// kernel call, on `b`'s words as they are (64- or 32-bit).
///
/// # Safety
/// The CPU has IFMA, `q < 2^50`, and every slice holds `acc.len()` words, a multiple of 8.
#[cfg(target_arch = "x86_64")]
unsafe fn ifma_dot1<W: crate::vecops_ifma::Lanes>(
    acc: &mut [u64],
    a: &[&[u64]],
    b: &[&[W]],
    q: u64,
    onto: bool,
) {
    for (start, end, accumulate) in chunks(a.len(), crate::vecops_ifma::LAZY_TERMS, 0, onto) {
        crate::vecops_ifma::dot1(acc, &a[start..end], &b[start..end], q, accumulate);
    }
}

/// The IFMA [`dot2`] over any number of digits, as [`ifma_dot1`], on `d`'s words as they are.
///
/// # Safety
/// As [`ifma_dot1`], for `acc0`, `acc1` and every slice.
#[cfg(target_arch = "x86_64")]
unsafe fn ifma_dot2<W: crate::vecops_ifma::Lanes>(
    acc0: &mut [u64],
    acc1: &mut [u64],
    d: &[&[W]],
    b: &[&[u64]],
    a: &[&[u64]],
    q: u64,
    onto: bool,
) {
    for (start, end, accumulate) in chunks(d.len(), crate::vecops_ifma::LAZY_TERMS, 0, onto) {
        let (d, b, a) = (&d[start..end], &b[start..end], &a[start..end]);
        crate::vecops_ifma::dot2(acc0, acc1, d, b, a, q, accumulate);
    }
}

/// The first `n` words of each of `v` in 64-bit words, in `buf` (`v.len() · n` words at
/// least).
fn widen<'b>(v: &[&[u32]], n: usize, buf: &'b mut [u64]) -> Vec<&'b [u64]> {
    for (dst, src) in buf.chunks_exact_mut(n).zip(v) {
        for (o, &x) in dst.iter_mut().zip(&src[..n]) {
            *o = u64::from(x);
        }
    }
    buf.chunks_exact(n).take(v.len()).collect()
}

#[cfg(target_arch = "x86_64")]
mod fma {
    use std::arch::x86_64::*;

    /// `a·b − k·q` with `k = round(a·b/q)`: exact, in `[−q, q]` for `a, b < q < 2^50`.
    #[inline(always)]
    unsafe fn mul_lazy(a: __m512d, b: __m512d, q: __m512d, qinv: __m512d) -> __m512d {
        let h = _mm512_mul_pd(a, b);
        let l = _mm512_fmsub_pd(a, b, h);
        let k = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_pd(h, qinv),
        );
        _mm512_add_pd(_mm512_fnmadd_pd(k, q, h), l)
    }

    /// Reduces an exact integer `|x| < 2^53` to `[0, q)`.
    #[inline(always)]
    unsafe fn reduce(x: __m512d, q: __m512d, qinv: __m512d) -> __m512d {
        let k = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(
            _mm512_mul_pd(x, qinv),
        );
        let r = _mm512_fnmadd_pd(k, q, x);
        let neg = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(r, _mm512_setzero_pd());
        let r = _mm512_mask_add_pd(r, neg, r, q);
        let ge = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(r, q);
        _mm512_mask_sub_pd(r, ge, r, q)
    }

    #[inline(always)]
    unsafe fn load(p: &[u64], i: usize) -> __m512d {
        _mm512_cvtepu64_pd(_mm512_loadu_si512(p.as_ptr().add(i) as *const _))
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) unsafe fn dot1(
        acc: &mut [u64],
        a: &[&[u64]],
        b: &[&[u64]],
        q: u64,
        accumulate: bool,
    ) {
        let qv = _mm512_set1_pd(q as f64);
        let qinv = _mm512_set1_pd(1.0 / q as f64);
        let n = acc.len();
        let mut i = 0;
        while i < n {
            let mut s = if accumulate {
                load(acc, i)
            } else {
                _mm512_setzero_pd()
            };
            for t in 0..a.len() {
                s = _mm512_add_pd(s, mul_lazy(load(a[t], i), load(b[t], i), qv, qinv));
            }
            _mm512_storeu_si512(
                acc.as_mut_ptr().add(i) as *mut _,
                _mm512_cvtpd_epu64(reduce(s, qv, qinv)),
            );
            i += 8;
        }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) unsafe fn dot2(
        acc0: &mut [u64],
        acc1: &mut [u64],
        d: &[&[u64]],
        b: &[&[u64]],
        a: &[&[u64]],
        q: u64,
        accumulate: bool,
    ) {
        let qv = _mm512_set1_pd(q as f64);
        let qinv = _mm512_set1_pd(1.0 / q as f64);
        let n = acc0.len();
        let mut i = 0;
        while i < n {
            let (mut s0, mut s1) = if accumulate {
                (load(acc0, i), load(acc1, i))
            } else {
                (_mm512_setzero_pd(), _mm512_setzero_pd())
            };
            for j in 0..d.len() {
                let dv = load(d[j], i);
                s0 = _mm512_add_pd(s0, mul_lazy(dv, load(b[j], i), qv, qinv));
                s1 = _mm512_add_pd(s1, mul_lazy(dv, load(a[j], i), qv, qinv));
            }
            let r0 = reduce(s0, qv, qinv);
            let r1 = reduce(s1, qv, qinv);
            _mm512_storeu_si512(acc0.as_mut_ptr().add(i) as *mut _, _mm512_cvtpd_epu64(r0));
            _mm512_storeu_si512(acc1.as_mut_ptr().add(i) as *mut _, _mm512_cvtpd_epu64(r1));
            i += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modulus::Modulus;
    use crate::primes::generate_primes;

    /// The chunks of a sum: at most `most` terms, `spare` fewer in a chunk that adds onto the
    /// running sum (what keeps the FMA paths' lazy sums below 2^53), every term once.
    #[test]
    fn chunks_respect_the_kernels_term_limits() {
        let got = |len, most, spare, onto| chunks(len, most, spare, onto).collect::<Vec<_>>();
        assert_eq!(
            got(20, 8, 1, false),
            [(0, 8, false), (8, 15, true), (15, 20, true)]
        );
        assert_eq!(
            got(20, 8, 1, true),
            [(0, 7, true), (7, 14, true), (14, 20, true)]
        );
        assert_eq!(
            got(20, 8, 0, false),
            [(0, 8, false), (8, 16, true), (16, 20, true)]
        );
        assert_eq!(got(8, 8, 0, true), [(0, 8, true)]);
        assert!(got(0, 8, 1, false).is_empty());
    }

    #[test]
    fn dot2_matches_scalar_for_many_digit_counts() {
        for bits in [30u32, 40, 49, 50, 55] {
            let q = generate_primes(&[bits], 64, &[]).unwrap()[0];
            let m = Modulus::new(q);
            let bc = BarrettConst::new(q);
            let n = 64;
            for digits in [1usize, 2, 7, 8, 9, 15, 16, 17, 40] {
                let mut s = (bits as u64) * 1000 + digits as u64;
                let mut next = || {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (s >> 7) % q
                };
                let mk = |next: &mut dyn FnMut() -> u64| {
                    (0..digits)
                        .map(|_| (0..n).map(|_| next()).collect::<Vec<u64>>())
                        .collect::<Vec<_>>()
                };
                let (dv, bv, av) = (mk(&mut next), mk(&mut next), mk(&mut next));
                let dr: Vec<&[u64]> = dv.iter().map(|v| v.as_slice()).collect();
                let br: Vec<&[u64]> = bv.iter().map(|v| v.as_slice()).collect();
                let ar: Vec<&[u64]> = av.iter().map(|v| v.as_slice()).collect();
                let (mut x0, mut x1) = (vec![0u64; n], vec![0u64; n]);
                dot2(&mut x0, &mut x1, &dr, &br, &ar, &bc);
                let mut y0 = vec![0u64; n];
                dot1(&mut y0, &dr, &br, &bc);
                assert_eq!(
                    y0, x0,
                    "dot1 == first half of dot2, bits {bits} digits {digits}"
                );
                for c in 0..n {
                    let e0 = (0..digits).fold(0, |acc, j| m.add(acc, m.mul(dv[j][c], bv[j][c])));
                    let e1 = (0..digits).fold(0, |acc, j| m.add(acc, m.mul(dv[j][c], av[j][c])));
                    assert_eq!(
                        (x0[c], x1[c]),
                        (e0, e1),
                        "bits {bits} digits {digits} coefficient {c}"
                    );
                }
            }
        }
    }
}

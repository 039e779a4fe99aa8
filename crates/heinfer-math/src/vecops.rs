//! Element-wise modular kernels over slices of residues (`[0, q)` in, `[0, q)` out).
//!
//! These are the inner loops of every homomorphic operation. Each kernel has a portable body,
//! on x86-64 with AVX-512F/DQ an explicitly vectorized body (64×64→128-bit products built from
//! four 32-bit multiplies, `vpmuludq`), for primes `q < 2^50` on CPUs with AVX-512 IFMA a
//! 52-bit multiply-add body (`vecops_ifma`), and for primes `q < 2^50` on CPUs with AVX2 and
//! FMA but no AVX-512 a double-precision body (`vecops_avx2`). The family is chosen once per
//! process ([`crate::vec_kernel`]); all produce the same fully reduced outputs.
//!
//! * `x·w mod q` for a constant `w` uses Shoup's companion `w' = ⌊w·2^64/q⌋`.
//! * `a·b mod q` for two vectors uses Barrett reduction with `r = ⌊2^{k+63}/q⌋`, `k = ⌈log2 q⌉`,
//!   exact for `q < 2^62` after two conditional subtractions (the quotient estimate is short
//!   by at most 2; one subtraction left `q + 1` for `a = b = q − 1` at some 61-bit `q`).

use crate::modulus::Modulus;
use crate::vec_kernel::kernel_for;
pub use crate::vec_kernel::{available_kernels, kernel, set_kernel, VecKernel};
#[cfg(target_arch = "x86_64")]
use crate::vecops_ifma;
use std::mem::MaybeUninit;

mod additive;
mod square;
mod uninit;
pub use additive::*;
pub use square::*;
pub use uninit::*;

/// Barrett constants for the element-wise product kernel.
#[derive(Debug, Clone, Copy)]
pub struct BarrettConst {
    pub(crate) q: u64,
    pub(crate) k: u32,
    pub(crate) r: u64,
    /// `⌊2^{k−1+52}/q⌋` (`< 2^52` for odd `q`): the IFMA kernels' constant for `q < 2^50`.
    r52: u64,
}

impl BarrettConst {
    /// Constants for modulus `q < 2^62`.
    pub fn new(q: u64) -> Self {
        let k = 64 - q.leading_zeros();
        let r = ((1u128 << (k + 63)) / q as u128) as u64;
        let r52 = ((1u128 << (k - 1 + 52)) / q as u128) as u64;
        Self { q, k, r, r52 }
    }

    /// `k = ⌈log2 q⌉` (the bit length of `q`).
    pub(crate) fn bits(&self) -> u32 {
        self.k
    }

    /// `⌊2^{k−1+52}/q⌋`.
    pub(crate) fn r52(&self) -> u64 {
        self.r52
    }

    /// The modulus.
    pub fn modulus(&self) -> u64 {
        self.q
    }

    /// `a·b mod q` for `a, b < q` (portable Barrett).
    #[inline(always)]
    pub(crate) fn mul(&self, a: u64, b: u64) -> u64 {
        let p = a as u128 * b as u128;
        let c1 = (p >> (self.k - 1)) as u64;
        let c3 = ((c1 as u128 * self.r as u128) >> 64) as u64;
        let r = (p as u64).wrapping_sub(c3.wrapping_mul(self.q));
        // the estimate c3 falls short of ⌊a·b/q⌋ by up to 2 (it loses < a·b/2^{k+63} ≤ 1/2,
        // < 2^{k−1}/q ≤ 1 and one floor), e.g. for a = b = q − 1: two subtractions
        small_mod(small_mod(r, self.q), self.q)
    }
}

#[inline(always)]
fn small_mod(x: u64, q: u64) -> u64 {
    x.min(x.wrapping_sub(q))
}

#[cfg(target_arch = "x86_64")]
use crate::vecops_avx2 as avx2;
#[cfg(target_arch = "x86_64")]
use crate::vecops_avx512 as avx512;

/// Whether the AVX-512 bodies run (the process runs the AVX-512 or the IFMA family).
#[inline(always)]
fn has_avx512() -> bool {
    matches!(kernel(), VecKernel::Avx512 | VecKernel::Ifma)
}

/// Whether the process runs the AVX2 family (the CPU has AVX2 and FMA).
#[inline(always)]
fn has_avx2() -> bool {
    kernel() == VecKernel::Avx2
}

/// Whether the AVX2 family runs for modulus `q` (`q < 2^50`).
#[inline(always)]
fn avx2_for(k: VecKernel, q: u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        k == VecKernel::Avx2 && q >> avx2::MAX_BITS == 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (k, q);
        false
    }
}

pub(crate) fn mul_shoup_assign_scalar(a: &mut [u64], w: u64, ws: u64, q: u64) {
    for x in a {
        let hi = ((*x as u128 * ws as u128) >> 64) as u64;
        *x = small_mod(x.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(q)), q);
    }
}

pub(crate) fn mul_shoup_add_assign_scalar(acc: &mut [u64], a: &[u64], w: u64, ws: u64, q: u64) {
    for (y, &x) in acc.iter_mut().zip(a) {
        let hi = ((x as u128 * ws as u128) >> 64) as u64;
        let r = small_mod(x.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(q)), q);
        *y = small_mod(*y + r, q);
    }
}

/// `a[i] ← a[i]·w mod q` for a constant `w < q` with Shoup companion `ws` (`a[i]` any u64).
pub fn mul_scalar_assign(a: &mut [u64], w: u64, ws: u64, m: &Modulus) {
    mul_scalar_assign_with(kernel_for(m.q), a, w, ws, m)
}

/// [`mul_scalar_assign`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_scalar_assign_with(k: VecKernel, a: &mut [u64], w: u64, ws: u64, m: &Modulus) {
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available (`k` comes from `kernel_for`/`available_kernels`) and
        // `q < 2^50`; the pointer is valid for `a.len()` reads and writes (exact aliasing).
        VecKernel::Ifma if m.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            let p = a.as_mut_ptr();
            vecops_ifma::mul_shoup::<false>(p, p, a.len(), w, ws, m.q)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/DQ is available.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe { avx512::mul_shoup_assign(a, w, ws, m.q) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; exact aliasing as above.
        _ if avx2_for(k, m.q) => unsafe {
            let p = a.as_mut_ptr();
            avx2::mul_shoup::<false>(p, p, a.len(), w, m.q)
        },
        _ => mul_shoup_assign_scalar(a, w, ws, m.q),
    }
}

/// `acc[i] ← acc[i] + a[i]·w mod q` for a constant `w < q` with Shoup companion `ws`.
pub fn mul_scalar_add_assign(acc: &mut [u64], a: &[u64], w: u64, ws: u64, m: &Modulus) {
    mul_scalar_add_assign_with(kernel_for(m.q), acc, a, w, ws, m)
}

/// [`mul_scalar_add_assign`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_scalar_add_assign_with(
    k: VecKernel,
    acc: &mut [u64],
    a: &[u64],
    w: u64,
    ws: u64,
    m: &Modulus,
) {
    debug_assert_eq!(acc.len(), a.len());
    let len = acc.len().min(a.len());
    let (acc, a) = (&mut acc[..len], &a[..len]);
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; both slices hold `len` elements.
        VecKernel::Ifma if m.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            vecops_ifma::mul_shoup::<true>(acc.as_mut_ptr(), a.as_ptr(), len, w, ws, m.q)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/DQ is available.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe {
            avx512::mul_shoup_add_assign(acc, a, w, ws, m.q)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; both slices hold `len` elements.
        _ if avx2_for(k, m.q) => unsafe {
            avx2::mul_shoup::<true>(acc.as_mut_ptr(), a.as_ptr(), len, w, m.q)
        },
        _ => mul_shoup_add_assign_scalar(acc, a, w, ws, m.q),
    }
}

/// `a[i] ← (a[i] − b[i])·w mod q` for `a[i], b[i] < q` and a constant `w < q` with Shoup
/// companion `ws` (ModDown's last step, `(x − Conv([x]_P))·P^{-1}`, in one pass with IFMA).
pub fn sub_mul_scalar_assign(a: &mut [u64], b: &[u64], w: u64, ws: u64, m: &Modulus) {
    sub_mul_scalar_assign_with(kernel_for(m.q), a, b, w, ws, m)
}

/// [`sub_mul_scalar_assign`] through the kernel family `k` (which this CPU must support).
pub(crate) fn sub_mul_scalar_assign_with(
    k: VecKernel,
    a: &mut [u64],
    b: &[u64],
    w: u64,
    ws: u64,
    m: &Modulus,
) {
    debug_assert_eq!(a.len(), b.len());
    let len = a.len().min(b.len());
    let (a, b) = (&mut a[..len], &b[..len]);
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Ifma && m.q >> vecops_ifma::MAX_BITS == 0 {
        // SAFETY: IFMA is available (`k`) and `q < 2^50`; both slices hold `len` elements.
        return unsafe { vecops_ifma::sub_mul_shoup(a.as_mut_ptr(), b.as_ptr(), len, w, ws, m.q) };
    }
    if k == VecKernel::Portable {
        for (x, &y) in a.iter_mut().zip(b) {
            *x = small_mod(*x + m.q - y, m.q);
        }
        return mul_shoup_assign_scalar(a, w, ws, m.q);
    }
    sub_assign(a, b, m.q);
    mul_scalar_assign_with(k, a, w, ws, m);
}

/// `out[i] ← Σ_t a[t][i]·w[t].0 mod q` for constants `w[t].0 < q` with Shoup companions
/// `w[t].1` (any `a[t][i]`; at least one term): the inner sum of a fast basis conversion, one
/// pass over memory with IFMA (the running sum stays in a register).
pub fn mul_scalar_sum_into(out: &mut [u64], a: &[&[u64]], w: &[(u64, u64)], m: &Modulus) {
    mul_scalar_sum_into_with(kernel_for(m.q), out, a, w, m)
}

/// [`mul_scalar_sum_into`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_scalar_sum_into_with(
    k: VecKernel,
    out: &mut [u64],
    a: &[&[u64]],
    w: &[(u64, u64)],
    m: &Modulus,
) {
    assert!(!a.is_empty() && a.len() == w.len());
    let len = a.iter().fold(out.len(), |l, x| l.min(x.len()));
    debug_assert_eq!(len, out.len());
    let out = &mut out[..len];
    #[cfg(target_arch = "x86_64")]
    if k == VecKernel::Ifma && m.q >> vecops_ifma::MAX_BITS == 0 {
        let ptrs: Vec<*const u64> = a.iter().map(|x| x.as_ptr()).collect();
        // SAFETY: IFMA is available (`k`) and `q < 2^50`; `out` and every input hold at least
        // `len` elements; `out` does not alias an input (it is a unique borrow).
        return unsafe { vecops_ifma::mul_shoup_sum(out.as_mut_ptr(), &ptrs, w, len, m.q) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_for(k, m.q) {
        let ptrs: Vec<*const u64> = a.iter().map(|x| x.as_ptr()).collect();
        // SAFETY: AVX2 and FMA are available (`k`) and `q < 2^50`; `out` and every input hold
        // at least `len` elements; `out` does not alias an input (it is a unique borrow).
        return unsafe { avx2::mul_shoup_sum(out.as_mut_ptr(), &ptrs, w, len, m.q) };
    }
    out.copy_from_slice(&a[0][..len]);
    mul_scalar_assign_with(k, out, w[0].0, w[0].1, m);
    for (x, &(wt, wst)) in a.iter().zip(w).skip(1) {
        mul_scalar_add_assign_with(k, out, &x[..len], wt, wst, m);
    }
}

/// `a[i] ← a[i]·b[i] mod q`.
pub fn mul_assign(a: &mut [u64], b: &[u64], bc: &BarrettConst) {
    mul_assign_with(kernel_for(bc.q), a, b, bc)
}

/// [`mul_assign`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_assign_with(k: VecKernel, a: &mut [u64], b: &[u64], bc: &BarrettConst) {
    debug_assert_eq!(a.len(), b.len());
    let len = a.len().min(b.len());
    let (a, b) = (&mut a[..len], &b[..len]);
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; `a` (read and written in place) and `b`
        // hold `len` elements.
        VecKernel::Ifma if bc.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            let p = a.as_mut_ptr();
            vecops_ifma::mul(p, p, b.as_ptr(), len, bc)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/DQ is available.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe { avx512::mul_assign(a, b, bc) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; `a` (in place) and `b` hold
        // `len` elements.
        _ if avx2_for(k, bc.q) => unsafe {
            let p = a.as_mut_ptr();
            avx2::mul::<false>(p, p, p, b.as_ptr(), len, bc.q)
        },
        _ => {
            for (x, &y) in a.iter_mut().zip(b) {
                *x = bc.mul(*x, y);
            }
        }
    }
}

/// `out[i] ← a[i]·b[i] mod q`.
pub fn mul_into(out: &mut [u64], a: &[u64], b: &[u64], bc: &BarrettConst) {
    mul_into_with(kernel_for(bc.q), out, a, b, bc)
}

/// [`mul_into`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_into_with(
    k: VecKernel,
    out: &mut [u64],
    a: &[u64],
    b: &[u64],
    bc: &BarrettConst,
) {
    debug_assert!(a.len() == b.len() && a.len() == out.len());
    let len = out.len().min(a.len()).min(b.len());
    let (out, a, b) = (&mut out[..len], &a[..len], &b[..len]);
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; the three slices hold `len` elements.
        VecKernel::Ifma if bc.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            vecops_ifma::mul(out.as_mut_ptr(), a.as_ptr(), b.as_ptr(), len, bc)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/DQ is available.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe { avx512::mul_into(out, a, b, bc) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; the three slices hold `len`.
        _ if avx2_for(k, bc.q) => unsafe {
            avx2::mul::<false>(
                out.as_mut_ptr(),
                a.as_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                len,
                bc.q,
            )
        },
        _ => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = bc.mul(x, y);
            }
        }
    }
}

/// `acc[i] ← acc[i] + a[i]·b[i] mod q`.
pub fn mul_add_assign(acc: &mut [u64], a: &[u64], b: &[u64], bc: &BarrettConst) {
    mul_add_assign_with(kernel_for(bc.q), acc, a, b, bc)
}

/// [`mul_add_assign`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_add_assign_with(
    k: VecKernel,
    acc: &mut [u64],
    a: &[u64],
    b: &[u64],
    bc: &BarrettConst,
) {
    debug_assert!(a.len() == b.len() && a.len() == acc.len());
    let len = acc.len().min(a.len()).min(b.len());
    let (acc, a, b) = (&mut acc[..len], &a[..len], &b[..len]);
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; the three slices hold `len` elements.
        VecKernel::Ifma if bc.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            {
                let p = acc.as_mut_ptr();
                vecops_ifma::mul_add(p, p, a.as_ptr(), b.as_ptr(), len, bc)
            }
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/DQ is available.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe { avx512::mul_add_assign(acc, a, b, bc) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; the three slices hold `len`.
        _ if avx2_for(k, bc.q) => unsafe {
            {
                let p = acc.as_mut_ptr();
                avx2::mul::<true>(p, p, a.as_ptr(), b.as_ptr(), len, bc.q)
            }
        },
        _ => {
            for ((o, &x), &y) in acc.iter_mut().zip(a).zip(b) {
                *o = small_mod(*o + bc.mul(x, y), bc.q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `[y]_q + c·w mod q` from one prime's conversion, against 128-bit arithmetic: any 64-bit
    /// `y` (edges, multiples of `q` and their neighbours, random words) at primes of 20 to 61
    /// bits, with and without the selected weight.
    #[test]
    fn reduce_add_select_is_exact_over_every_word() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for q in [
            (1u64 << 20) + 7,
            (1 << 30) - 35,
            (1 << 40) - 87,
            (1 << 49) + 69,
            (1 << 50) - 27,
            (1 << 61) - 1,
        ] {
            let mut y: Vec<u64> = vec![
                0,
                1,
                q - 1,
                q,
                q + 1,
                2 * q - 1,
                2 * q,
                u64::MAX,
                u64::MAX - 1,
            ];
            for k in [3u64, 1 << 20, u64::MAX / q] {
                y.extend([k * q - 1, k * q, k * q + 1]);
            }
            y.extend((0..1000).map(|_| next()));
            y.extend((0..1000).map(|_| next() >> (next() % 64)));
            let c: Vec<u64> = y.iter().map(|_| next() & 1).collect();
            let w = next() % q;
            let mut out = vec![0; y.len()];
            reduce_add_select_into(&mut out, &y, &c, w, q, 1.0 / q as f64);
            for ((&o, &v), &b) in out.iter().zip(&y).zip(&c) {
                let want = ((v as u128 % q as u128 + (b * w) as u128) % q as u128) as u64;
                assert_eq!(o, want, "q {q}, y {v}, c {b}");
            }
        }
    }

    /// The process's family (AVX-512, AVX2 or portable) over the whole input range
    /// `|c| < 2^52`, for small and large moduli.
    #[test]
    fn reduce_f64_takes_the_whole_range() {
        let top = (1i64 << 52) - 1;
        for q in [
            3u64,
            5,
            12289,
            (1 << 30) - 35,
            (1 << 49) + 1,
            (1 << 50) - 27,
        ] {
            let m = Modulus::new(q);
            let qi = q as i64;
            let mut v: Vec<i64> = vec![
                0,
                1,
                -1,
                qi,
                -qi,
                qi - 1,
                1 - qi,
                top,
                -top,
                top - 1,
                1 << 51,
            ];
            let mut s = q;
            while v.len() < 67 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.push((s as i64) >> 12);
            }
            let c: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            let mut o = vec![0u64; c.len()];
            reduce_f64_into(&mut o, &c, q);
            let e: Vec<u64> = v.iter().map(|&x| m.reduce_i64(x)).collect();
            assert_eq!(o, e, "q = {q}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn kernels_match_scalar(q in (1u64 << 20)..(1u64 << 61), seed in any::<u64>(), len in 0usize..40) {
            let q = q | 1;
            let m = Modulus::new(q);
            let bc = BarrettConst::new(q);
            let mut s = seed;
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); s % q };
            let a: Vec<u64> = (0..len).map(|_| next()).collect();
            let b: Vec<u64> = (0..len).map(|_| next()).collect();
            let w = next();
            let expect_mul: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| m.mul(x, y)).collect();
            let mut t = a.clone(); mul_assign(&mut t, &b, &bc); prop_assert_eq!(&t, &expect_mul);
            let mut o = vec![0; len]; mul_into(&mut o, &a, &b, &bc); prop_assert_eq!(&o, &expect_mul);
            let mut acc = b.clone(); mul_add_assign(&mut acc, &a, &b, &bc);
            let e: Vec<u64> = b.iter().zip(&expect_mul).map(|(&x, &y)| m.add(x, y)).collect();
            prop_assert_eq!(&acc, &e);
            let mut t = a.clone(); mul_scalar_assign(&mut t, w, m.shoup(w), &m);
            let e: Vec<u64> = a.iter().map(|&x| m.mul(x, w)).collect();
            prop_assert_eq!(&t, &e);
            let mut acc = b.clone(); mul_scalar_add_assign(&mut acc, &a, w, m.shoup(w), &m);
            let e2: Vec<u64> = b.iter().zip(&e).map(|(&x, &y)| m.add(x, y)).collect();
            prop_assert_eq!(&acc, &e2);
            let mut t = a.clone(); add_assign(&mut t, &b, q);
            prop_assert_eq!(&t, &a.iter().zip(&b).map(|(&x, &y)| m.add(x, y)).collect::<Vec<_>>());
            let mut t = a.clone(); sub_assign(&mut t, &b, q);
            prop_assert_eq!(&t, &a.iter().zip(&b).map(|(&x, &y)| m.sub(x, y)).collect::<Vec<_>>());
            let mk = |f: &dyn Fn(&mut [MaybeUninit<u64>])| { let mut v: Vec<u64> = Vec::with_capacity(len); f(&mut v.spare_capacity_mut()[..len]); unsafe { v.set_len(len) }; v };
            prop_assert_eq!(&mk(&|o| mul_to_uninit(o, &a, &b, &bc)), &expect_mul);
            prop_assert_eq!(&mk(&|o| mul_scalar_to_uninit(o, &a, w, m.shoup(w), &m)), &a.iter().map(|&x| m.mul(x, w)).collect::<Vec<_>>());
            prop_assert_eq!(&mk(&|o| add_to_uninit(o, &a, &b, q)), &a.iter().zip(&b).map(|(&x, &y)| m.add(x, y)).collect::<Vec<_>>());
            prop_assert_eq!(&mk(&|o| sub_to_uninit(o, &a, &b, q)), &a.iter().zip(&b).map(|(&x, &y)| m.sub(x, y)).collect::<Vec<_>>());
            let mut t = a.clone(); neg_assign(&mut t, q);
            prop_assert_eq!(&t, &a.iter().map(|&x| m.neg(x)).collect::<Vec<_>>());
            if q < (1 << 50) {
                let signed: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| (x as i64 - (y as i64) * 3) as f64).collect();
                let mut o = vec![0u64; len];
                reduce_f64_into(&mut o, &signed, q);
                let e: Vec<u64> = signed.iter().map(|&v| m.reduce_i64(v as i64)).collect();
                prop_assert_eq!(&o, &e);
            }
        }
    }
}

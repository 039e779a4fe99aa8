//! Kernels that write fresh buffers: products into uninitialised memory, exact reduction of
//! integer-valued doubles, and [`build_limbs`], which assembles a polynomial limb by limb in
//! parallel without zero-filling it first (the allocating evaluator operations are one pass).

use super::*;

/// `out[i] ← c[i] mod q` for integer-valued `c[i]` with `|c[i]| < 2^52` and `q < 2^50`
/// (exact double-precision floor division; vectorized under AVX-512 and AVX2).
pub fn reduce_f64_into(out: &mut [u64], c: &[f64], q: u64) {
    debug_assert!(q < (1 << 50) && out.len() == c.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        return unsafe { avx512_reduce_f64_into(out, c, q) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the AVX2 family runs only on a CPU with AVX2 and FMA; `out` holds `c.len()`
        // words (checked above in debug builds, and `zip`'s bound below is the same).
        let len = out.len().min(c.len());
        return unsafe { avx2::reduce_f64(out.as_mut_ptr(), &c[..len], q) };
    }
    let qf = q as f64;
    for (o, &x) in out.iter_mut().zip(c) {
        let r = x - (x / qf).floor() * qf;
        let r = if r < 0.0 {
            r + qf
        } else if r >= qf {
            r - qf
        } else {
            r
        };
        *o = r as u64;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn avx512_reduce_f64_into(out: &mut [u64], c: &[f64], q: u64) {
    use std::arch::x86_64::*;
    let qv = _mm512_set1_pd(q as f64);
    let qinv = _mm512_set1_pd(1.0 / q as f64);
    let chunks = c.len() / 8;
    for k in 0..chunks {
        let x = _mm512_loadu_pd(c.as_ptr().add(8 * k));
        let f = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(
            _mm512_mul_pd(x, qinv),
        );
        let r = _mm512_fnmadd_pd(f, qv, x);
        let neg = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(r, _mm512_setzero_pd());
        let r = _mm512_mask_add_pd(r, neg, r, qv);
        let ge = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(r, qv);
        let r = _mm512_mask_sub_pd(r, ge, r, qv);
        _mm512_storeu_si512(out.as_mut_ptr().add(8 * k) as *mut _, _mm512_cvtpd_epu64(r));
    }
    let qf = q as f64;
    for i in 8 * chunks..c.len() {
        let x = c[i];
        let r = x - (x / qf).floor() * qf;
        let r = if r < 0.0 {
            r + qf
        } else if r >= qf {
            r - qf
        } else {
            r
        };
        out[i] = r as u64;
    }
}

/// `out[i] ← a[i]·w mod q` into uninitialized memory (every element is written).
pub fn mul_scalar_to_uninit(out: &mut [MaybeUninit<u64>], a: &[u64], w: u64, ws: u64, m: &Modulus) {
    mul_scalar_to_uninit_with(kernel_for(m.q), out, a, w, ws, m)
}

/// [`mul_scalar_to_uninit`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_scalar_to_uninit_with(
    k: VecKernel,
    out: &mut [MaybeUninit<u64>],
    a: &[u64],
    w: u64,
    ws: u64,
    m: &Modulus,
) {
    assert_eq!(out.len(), a.len());
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; `out` is valid for `a.len()` writes and
        // the kernel writes each element once, before any read of it.
        VecKernel::Ifma if m.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            vecops_ifma::mul_shoup::<false>(
                out.as_mut_ptr() as *mut u64,
                a.as_ptr(),
                a.len(),
                w,
                ws,
                m.q,
            )
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `out` is valid for `a.len()` writes; the kernel writes each element once.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe {
            avx512::mul_shoup_to(out.as_mut_ptr() as *mut u64, a, w, ws, m.q)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; `out` is valid for `a.len()`
        // writes and each element is written once, before any read of it.
        _ if avx2_for(k, m.q) => unsafe {
            avx2::mul_shoup::<false>(out.as_mut_ptr() as *mut u64, a.as_ptr(), a.len(), w, m.q)
        },
        _ => {
            for (o, &x) in out.iter_mut().zip(a) {
                let hi = ((x as u128 * ws as u128) >> 64) as u64;
                o.write(small_mod(
                    x.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(m.q)),
                    m.q,
                ));
            }
        }
    }
}

/// `out[i] ← a[i]·b[i] mod q` into uninitialized memory (every element is written).
pub fn mul_to_uninit(out: &mut [MaybeUninit<u64>], a: &[u64], b: &[u64], bc: &BarrettConst) {
    mul_to_uninit_with(kernel_for(bc.q), out, a, b, bc)
}

/// [`mul_to_uninit`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_to_uninit_with(
    k: VecKernel,
    out: &mut [MaybeUninit<u64>],
    a: &[u64],
    b: &[u64],
    bc: &BarrettConst,
) {
    assert!(out.len() == a.len() && a.len() == b.len());
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; `out` is valid for `a.len()` writes and
        // the kernel writes each element once, before any read of it.
        VecKernel::Ifma if bc.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            vecops_ifma::mul(
                out.as_mut_ptr() as *mut u64,
                a.as_ptr(),
                b.as_ptr(),
                a.len(),
                bc,
            )
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `out` is valid for `a.len()` writes; the kernel writes each element once.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe {
            avx512::mul_to(out.as_mut_ptr() as *mut u64, a, b, bc)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; `out` is valid for `a.len()`
        // writes and each element is written once, before any read of it.
        _ if avx2_for(k, bc.q) => unsafe {
            avx2::mul::<false>(
                out.as_mut_ptr() as *mut u64,
                a.as_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                a.len(),
                bc.q,
            )
        },
        _ => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                o.write(bc.mul(x, y));
            }
        }
    }
}

/// `out[i] ← c[i] + a[i]·b[i] mod q` (all inputs `< q`) into uninitialised memory: one pass
/// where a copy of `c` and [`mul_add_assign`] would be two (a decryption's `c_0 + c_1·s`).
pub fn mul_add_to_uninit(
    out: &mut [MaybeUninit<u64>],
    c: &[u64],
    a: &[u64],
    b: &[u64],
    bc: &BarrettConst,
) {
    mul_add_to_uninit_with(kernel_for(bc.q), out, c, a, b, bc)
}

/// [`mul_add_to_uninit`] through the kernel family `k` (which this CPU must support).
pub(crate) fn mul_add_to_uninit_with(
    k: VecKernel,
    out: &mut [MaybeUninit<u64>],
    c: &[u64],
    a: &[u64],
    b: &[u64],
    bc: &BarrettConst,
) {
    assert!(out.len() == a.len() && a.len() == b.len() && c.len() == a.len());
    let (o, len) = (out.as_mut_ptr() as *mut u64, a.len());
    match k {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: IFMA is available and `q < 2^50`; `out` is valid for `len` writes, each
        // element written once; `c`, `a`, `b` hold `len` words and do not overlap `out`.
        VecKernel::Ifma if bc.q >> vecops_ifma::MAX_BITS == 0 => unsafe {
            vecops_ifma::mul_add(o, c.as_ptr(), a.as_ptr(), b.as_ptr(), len, bc)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/DQ is available; as above.
        VecKernel::Avx512 | VecKernel::Ifma => unsafe {
            avx512::mul_add_to(o, c.as_ptr(), a, b, bc)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available and `q < 2^50`; as above.
        _ if avx2_for(k, bc.q) => unsafe {
            avx2::mul::<true>(o, c.as_ptr(), a.as_ptr(), b.as_ptr(), len, bc.q)
        },
        _ => {
            for (((o, &z), &x), &y) in out.iter_mut().zip(c).zip(a).zip(b) {
                o.write(small_mod(z + bc.mul(x, y), bc.q));
            }
        }
    }
}

/// Builds a vector of `limbs·n` words whose limb `i` is written by `f(i, limb)`; `f` must write
/// every element of the limb it is given. Limbs are produced in parallel and the memory is
/// never zero-filled first (the allocating evaluator operations are one pass over memory).
pub fn build_limbs<F>(limbs: usize, n: usize, f: F) -> Vec<u64>
where
    F: Fn(usize, &mut [MaybeUninit<u64>]) + Sync + Send,
{
    use rayon::prelude::*;
    let len = limbs * n;
    let mut v: Vec<u64> = Vec::with_capacity(len);
    v.spare_capacity_mut()[..len]
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(i, out)| f(i, out));
    // SAFETY: every limb was fully written by `f` (its contract; all callers in this crate and
    // in heinfer-ckks pass kernels that write each element of their output exactly once).
    unsafe { v.set_len(len) };
    v
}

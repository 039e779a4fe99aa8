//! A negacyclic NTT in double precision with fused multiply-add, for primes `q < 2^50`
//! on x86-64 with AVX-512F/DQ (no IFMA needed), or with AVX2 and FMA
//! ([`crate::ntt_fma_avx2`], four lanes instead of eight).
//!
//! Residues `< 2^50` are exact in an f64 mantissa. For a twiddle `w < q` and its quotient
//! `w_q = w/q`, the product `a·w mod q` is computed exactly with
//!
//! ```text
//!   h = fl(a·w),   l = fma(a, w, −h)        (TwoProduct: a·w = h + l exactly)
//!   k = round(a·w_q)                          (|a·w/q − k| < 0.9 for a < q < 2^50)
//!   r = fma(−k, q, h) + l                     (exact integer in (−q, q))
//!   r += q if r < 0
//! ```
//!
//! eight lanes at a time, on the two FMA ports — about twice the throughput of emulating
//! 64×64-bit integer products with four 32-bit multiplies. Butterflies keep every value fully
//! reduced in `[0, q)`.
//!
//! The transform is the Cooley–Tukey / Gentleman–Sande pair of Longa–Naehrig with twiddles
//! `ψ^{brev(k)}`; it uses **the same `ψ` as `tfhe-ntt`** for the prime, so both implementations
//! produce bit-identical results in the same (bit-reversed) order and objects in NTT form do
//! not depend on which one a machine runs.

#![cfg(target_arch = "x86_64")]

use crate::automorphism::bit_reverse;
use crate::modulus::Modulus;
use std::arch::x86_64::*;

/// Precomputed twiddles of the FMA NTT for one prime.
pub(crate) struct FmaNtt {
    pub(crate) n: usize,
    pub(crate) q: f64,
    /// `ψ^{brev(k)}` and `ψ^{brev(k)}/q`, padded by 8 for vector loads.
    pub(crate) fwd_w: Vec<f64>,
    pub(crate) fwd_wq: Vec<f64>,
    /// `ψ^{-brev(k)}` and quotient, padded.
    pub(crate) inv_w: Vec<f64>,
    pub(crate) inv_wq: Vec<f64>,
    /// `N^{-1}` and quotient.
    pub(crate) n_inv: f64,
    pub(crate) n_inv_q: f64,
    /// Whether the AVX-512 kernels run (else the AVX2 ones).
    avx512: bool,
}

/// Elements per cache block (16 KiB of f64): stages whose butterflies fit in a block run
/// block by block, so most passes stay in L1.
pub(crate) const BLOCK: usize = 2048;

/// Whether this CPU can run the AVX-512 FMA NTT (the element-wise kernels of [`crate::dot`]
/// ask this too).
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
}

impl FmaNtt {
    /// Twiddles for `n`, prime `q < 2^50`, primitive `2n`-th root `psi`; the transforms run
    /// AVX-512 where the CPU has it, else AVX2 + FMA (the caller checks that one of them is
    /// [`available`] or [`crate::ntt_fma_avx2::available`]).
    pub(crate) fn new(n: usize, q: u64, psi: u64) -> Self {
        assert!(q < (1 << 50) && n >= 16);
        let m = Modulus::new(q);
        let logn = n.trailing_zeros();
        let psi_inv = m.inv(psi);
        let mut pw = vec![0u64; n];
        let mut ipw = vec![0u64; n];
        let (mut a, mut b) = (1u64, 1u64);
        for i in 0..n {
            let r = bit_reverse(i, logn);
            pw[r] = a;
            ipw[r] = b;
            a = m.mul(a, psi);
            b = m.mul(b, psi_inv);
        }
        let qf = q as f64;
        let pad = |v: &[u64]| -> (Vec<f64>, Vec<f64>) {
            let mut w: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            let mut wq: Vec<f64> = v.iter().map(|&x| x as f64 / qf).collect();
            w.resize(n + 8, 0.0);
            wq.resize(n + 8, 0.0);
            (w, wq)
        };
        let (fwd_w, fwd_wq) = pad(&pw);
        let (inv_w, inv_wq) = pad(&ipw);
        let n_inv = m.inv(n as u64 % q);
        Self {
            n,
            q: qf,
            fwd_w,
            fwd_wq,
            inv_w,
            inv_wq,
            n_inv: n_inv as f64,
            n_inv_q: n_inv as f64 / qf,
            avx512: available(),
        }
    }

    /// Forward transform in place (coefficients in `[0, q)` → bit-reversed evaluations).
    pub(crate) fn forward(&self, a: &mut [u64]) {
        assert_eq!(a.len(), self.n);
        // SAFETY: `new`'s caller checked that the CPU has AVX-512F/DQ or AVX2 + FMA, and
        // `avx512` says which; the length is N.
        unsafe {
            if self.avx512 {
                self.forward_avx512(a)
            } else {
                self.forward_avx2(a)
            }
        }
    }

    /// Inverse transform in place, normalized.
    pub(crate) fn inverse(&self, a: &mut [u64]) {
        assert_eq!(a.len(), self.n);
        // SAFETY: as in `forward`.
        unsafe {
            if self.avx512 {
                self.inverse_avx512(a)
            } else {
                self.inverse_avx2(a)
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn forward_avx512(&self, a: &mut [u64]) {
        let n = self.n;
        let p = a.as_mut_ptr();
        to_f64(p, n);
        let x = p as *mut f64;
        let q = _mm512_set1_pd(self.q);
        let block = BLOCK.min(n);
        // stages whose butterflies span more than a block: full passes
        let mut t = n;
        let mut m = 1;
        while t > block {
            t >>= 1;
            self.wide_stage(x, 0, n, m, t, &self.fwd_w, &self.fwd_wq, q, true);
            m <<= 1;
        }
        // remaining stages block by block, in L1
        let (m0, t0) = (m, t);
        let mut base = 0;
        while base < n {
            let (mut m, mut t) = (m0, t0);
            while m < n {
                t >>= 1;
                if t >= 8 {
                    self.wide_stage(
                        x,
                        base,
                        base + block,
                        m,
                        t,
                        &self.fwd_w,
                        &self.fwd_wq,
                        q,
                        true,
                    );
                } else {
                    self.small_stage(
                        x,
                        base,
                        base + block,
                        m,
                        t,
                        &self.fwd_w,
                        &self.fwd_wq,
                        q,
                        true,
                    );
                }
                m <<= 1;
            }
            base += block;
        }
        to_u64(p, n);
    }

    /// Butterflies with distance `t ≥ 8` over `x[start..end]` at stage `m`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn wide_stage(
        &self,
        x: *mut f64,
        start: usize,
        end: usize,
        m: usize,
        t: usize,
        tw: &[f64],
        twq: &[f64],
        q: __m512d,
        forward: bool,
    ) {
        let mut j1 = start;
        while j1 < end {
            let i = j1 / (2 * t);
            let w = _mm512_set1_pd(*tw.get_unchecked(m + i));
            let wq = _mm512_set1_pd(*twq.get_unchecked(m + i));
            let mut j = j1;
            while j < j1 + t {
                let u = _mm512_loadu_pd(x.add(j));
                let v = _mm512_loadu_pd(x.add(j + t));
                if forward {
                    let v = mulmod(v, w, wq, q);
                    _mm512_storeu_pd(x.add(j), add_mod(u, v, q));
                    _mm512_storeu_pd(x.add(j + t), sub_mod(u, v, q));
                } else {
                    _mm512_storeu_pd(x.add(j), add_mod(u, v, q));
                    _mm512_storeu_pd(x.add(j + t), mulmod(sub_mod(u, v, q), w, wq, q));
                }
                j += 8;
            }
            j1 += 2 * t;
        }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn inverse_avx512(&self, a: &mut [u64]) {
        let n = self.n;
        let p = a.as_mut_ptr();
        to_f64(p, n);
        let x = p as *mut f64;
        let q = _mm512_set1_pd(self.q);
        let block = BLOCK.min(n);
        // stages with distance below a block: block by block, in L1
        let mut base = 0;
        let (mut m_end, mut t_end) = (n >> 1, 1);
        while base < n {
            let (mut m, mut t) = (n >> 1, 1);
            while 2 * t <= block && m >= 1 {
                if t >= 8 {
                    self.wide_stage(
                        x,
                        base,
                        base + block,
                        m,
                        t,
                        &self.inv_w,
                        &self.inv_wq,
                        q,
                        false,
                    );
                } else {
                    self.small_stage(
                        x,
                        base,
                        base + block,
                        m,
                        t,
                        &self.inv_w,
                        &self.inv_wq,
                        q,
                        false,
                    );
                }
                t <<= 1;
                m >>= 1;
            }
            (m_end, t_end) = (m, t);
            base += block;
        }
        // the wide stages: full passes
        let (mut m, mut t) = (m_end, t_end);
        while m >= 1 {
            self.wide_stage(x, 0, n, m, t, &self.inv_w, &self.inv_wq, q, false);
            t <<= 1;
            m >>= 1;
        }
        let ni = _mm512_set1_pd(self.n_inv);
        let niq = _mm512_set1_pd(self.n_inv_q);
        let mut j = 0;
        while j < n {
            _mm512_storeu_pd(x.add(j), mulmod(_mm512_loadu_pd(x.add(j)), ni, niq, q));
            j += 8;
        }
        to_u64(p, n);
    }

    /// A stage with butterfly distance `t ∈ {1, 2, 4}`: 16 values (two vectors) at a time,
    /// de-interleaved into the `u` and `v` halves with two-source permutes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn small_stage(
        &self,
        x: *mut f64,
        start: usize,
        end: usize,
        m: usize,
        t: usize,
        tw: &[f64],
        twq: &[f64],
        q: __m512d,
        forward: bool,
    ) {
        let (u_idx, v_idx, w_idx) = small_stage_indices(t);
        // inverse permutations: positions of u and v lanes back into x and y
        let (bx, by) = back_indices(&u_idx, &v_idx);
        let (u_idx, v_idx, w_idx) = (load_idx(&u_idx), load_idx(&v_idx), load_idx(&w_idx));
        let (bx, by) = (load_idx(&bx), load_idx(&by));
        let groups_per_16 = 16 / (2 * t);
        let mut base = start;
        let mut i = start / (2 * t); // butterfly-group index
        while base < end {
            let xa = _mm512_loadu_pd(x.add(base));
            let ya = _mm512_loadu_pd(x.add(base + 8));
            let u = _mm512_permutex2var_pd(xa, u_idx, ya);
            let v = _mm512_permutex2var_pd(xa, v_idx, ya);
            let w = _mm512_permutexvar_pd(w_idx, _mm512_loadu_pd(tw.as_ptr().add(m + i)));
            let wq = _mm512_permutexvar_pd(w_idx, _mm512_loadu_pd(twq.as_ptr().add(m + i)));
            let (nu, nv) = if forward {
                let v = mulmod(v, w, wq, q);
                (add_mod(u, v, q), sub_mod(u, v, q))
            } else {
                (add_mod(u, v, q), mulmod(sub_mod(u, v, q), w, wq, q))
            };
            _mm512_storeu_pd(x.add(base), _mm512_permutex2var_pd(nu, bx, nv));
            _mm512_storeu_pd(x.add(base + 8), _mm512_permutex2var_pd(nu, by, nv));
            base += 16;
            i += groups_per_16;
        }
    }
}

/// For distance `t`, lane sources (0..16 over the pair x‖y) of the `u` and `v` halves and the
/// twiddle lane of each butterfly.
fn small_stage_indices(t: usize) -> ([i64; 8], [i64; 8], [i64; 8]) {
    let mut u = [0i64; 8];
    let mut v = [0i64; 8];
    let mut w = [0i64; 8];
    let mut k = 0;
    for e in 0..16usize {
        if e % (2 * t) < t {
            u[k] = e as i64;
            v[k] = (e + t) as i64;
            w[k] = (e / (2 * t)) as i64;
            k += 1;
        }
    }
    (u, v, w)
}

/// Index vectors that scatter (u‖v) lanes back to x (lanes 0..8) and y (lanes 8..16).
fn back_indices(u: &[i64; 8], v: &[i64; 8]) -> ([i64; 8], [i64; 8]) {
    let mut src = [0i64; 16];
    for k in 0..8 {
        src[u[k] as usize] = k as i64; // from nu lane k
        src[v[k] as usize] = 8 + k as i64; // from nv lane k
    }
    let mut bx = [0i64; 8];
    let mut by = [0i64; 8];
    bx.copy_from_slice(&src[..8]);
    by.copy_from_slice(&src[8..]);
    (bx, by)
}

#[inline(always)]
unsafe fn load_idx(v: &[i64; 8]) -> __m512i {
    _mm512_loadu_si512(v.as_ptr() as *const _)
}

/// `a·w mod q` for `a ∈ [0, q)`, result in `[0, q)`.
#[inline(always)]
unsafe fn mulmod(a: __m512d, w: __m512d, wq: __m512d, q: __m512d) -> __m512d {
    let h = _mm512_mul_pd(a, w);
    let l = _mm512_fmsub_pd(a, w, h);
    let k = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_pd(a, wq),
    );
    let r = _mm512_add_pd(_mm512_fnmadd_pd(k, q, h), l);
    let neg = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(r, _mm512_setzero_pd());
    _mm512_mask_add_pd(r, neg, r, q)
}

#[inline(always)]
unsafe fn add_mod(u: __m512d, v: __m512d, q: __m512d) -> __m512d {
    let s = _mm512_add_pd(u, v);
    let ge = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(s, q);
    _mm512_mask_sub_pd(s, ge, s, q)
}

#[inline(always)]
unsafe fn sub_mod(u: __m512d, v: __m512d, q: __m512d) -> __m512d {
    let d = _mm512_sub_pd(u, v);
    let neg = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(d, _mm512_setzero_pd());
    _mm512_mask_add_pd(d, neg, d, q)
}

/// In-place u64 → f64 (exact below 2^53).
#[inline(always)]
unsafe fn to_f64(p: *mut u64, n: usize) {
    let mut j = 0;
    while j < n {
        let v = _mm512_loadu_si512(p.add(j) as *const _);
        _mm512_storeu_pd(p.add(j) as *mut f64, _mm512_cvtepu64_pd(v));
        j += 8;
    }
}

/// In-place f64 → u64.
#[inline(always)]
unsafe fn to_u64(p: *mut u64, n: usize) {
    let mut j = 0;
    while j < n {
        let v = _mm512_loadu_pd(p.add(j) as *const f64);
        _mm512_storeu_si512(p.add(j) as *mut _, _mm512_cvtpd_epu64(v));
        j += 8;
    }
}

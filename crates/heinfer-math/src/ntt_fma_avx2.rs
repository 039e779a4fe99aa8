//! The double-precision FMA NTT of [`crate::ntt_fma`] on AVX2 + FMA CPUs without AVX-512
//! (e.g. AMD Zen 1 and 2): the same twiddles, butterflies, cache blocking and exact product
//!
//! ```text
//!   h = fl(a·w),  l = fma(a, w, −h),  k = round(a·w_q),  r = fma(−k, q, h) + l,  r += q if r < 0
//! ```
//!
//! four lanes at a time. AVX2 has no u64↔f64 conversion, so residues (below 2^50) move in and
//! out of the mantissa of `2^52`: `f64::from_bits(x | bits(2^52)) − 2^52 = x` exactly, and back.
//! Stages with butterfly distance `t ≥ 4` run on whole vectors; `t = 2` and `t = 1` pair the
//! lanes of two vectors with 128-bit-lane and in-lane shuffles. Bit-identical to `tfhe-ntt` and
//! to the AVX-512 kernel (the same `ψ`; tested against `tfhe-ntt` below).

#![cfg(target_arch = "x86_64")]

use crate::ntt_fma::{FmaNtt, BLOCK};
use std::arch::x86_64::*;

/// Whether this CPU can run the AVX2 FMA transform.
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// `2^52` as f64: integers below it sit in its mantissa.
const MAGIC: f64 = 4_503_599_627_370_496.0;

impl FmaNtt {
    /// Forward transform in place (coefficients in `[0, q)` → bit-reversed evaluations).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA ([`available`]); `a.len()` must be `N`.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn forward_avx2(&self, a: &mut [u64]) {
        let n = self.n;
        let p = a.as_mut_ptr();
        to_f64(p, n);
        let x = p as *mut f64;
        let q = _mm256_set1_pd(self.q);
        let block = BLOCK.min(n);
        let mut t = n;
        let mut m = 1;
        while t > block {
            t >>= 1;
            wide_stage(x, 0, n, m, t, &self.fwd_w, &self.fwd_wq, q, true);
            m <<= 1;
        }
        let (m0, t0) = (m, t);
        let mut base = 0;
        while base < n {
            let (mut m, mut t) = (m0, t0);
            while m < n {
                t >>= 1;
                if t >= 4 {
                    wide_stage(
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
                    small_stage(
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

    /// Inverse transform in place, normalized.
    ///
    /// # Safety
    /// As [`Self::forward_avx2`].
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn inverse_avx2(&self, a: &mut [u64]) {
        let n = self.n;
        let p = a.as_mut_ptr();
        to_f64(p, n);
        let x = p as *mut f64;
        let q = _mm256_set1_pd(self.q);
        let block = BLOCK.min(n);
        let mut base = 0;
        let (mut m_end, mut t_end) = (n >> 1, 1);
        while base < n {
            let (mut m, mut t) = (n >> 1, 1);
            while 2 * t <= block && m >= 1 {
                if t >= 4 {
                    wide_stage(
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
                    small_stage(
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
        let (mut m, mut t) = (m_end, t_end);
        while m >= 1 {
            wide_stage(x, 0, n, m, t, &self.inv_w, &self.inv_wq, q, false);
            t <<= 1;
            m >>= 1;
        }
        let ni = _mm256_set1_pd(self.n_inv);
        let niq = _mm256_set1_pd(self.n_inv_q);
        let mut j = 0;
        while j < n {
            _mm256_storeu_pd(x.add(j), mulmod(_mm256_loadu_pd(x.add(j)), ni, niq, q));
            j += 4;
        }
        to_u64(p, n);
    }
}

/// Butterflies with distance `t ≥ 4` over `x[start..end]` at stage `m`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn wide_stage(
    x: *mut f64,
    start: usize,
    end: usize,
    m: usize,
    t: usize,
    tw: &[f64],
    twq: &[f64],
    q: __m256d,
    forward: bool,
) {
    let mut j1 = start;
    while j1 < end {
        let i = j1 / (2 * t);
        let w = _mm256_set1_pd(*tw.get_unchecked(m + i));
        let wq = _mm256_set1_pd(*twq.get_unchecked(m + i));
        let mut j = j1;
        while j < j1 + t {
            let u = _mm256_loadu_pd(x.add(j));
            let v = _mm256_loadu_pd(x.add(j + t));
            if forward {
                let v = mulmod(v, w, wq, q);
                _mm256_storeu_pd(x.add(j), add_mod(u, v, q));
                _mm256_storeu_pd(x.add(j + t), sub_mod(u, v, q));
            } else {
                _mm256_storeu_pd(x.add(j), add_mod(u, v, q));
                _mm256_storeu_pd(x.add(j + t), mulmod(sub_mod(u, v, q), w, wq, q));
            }
            j += 4;
        }
        j1 += 2 * t;
    }
}

/// A stage with butterfly distance `t ∈ {1, 2}`: 8 values (two vectors `a`, `b`) at a time.
/// `t = 2`: `u = (a0, a1, b0, b1)`, `v = (a2, a3, b2, b3)`, twiddles `(w_i, w_i, w_{i+1},
/// w_{i+1})`; `t = 1`: `u = (a0, b0, a2, b2)`, `v = (a1, b1, a3, b3)`, twiddles `(w_i, w_{i+2},
/// w_{i+1}, w_{i+3})`; the same shuffles put the results back.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn small_stage(
    x: *mut f64,
    start: usize,
    end: usize,
    m: usize,
    t: usize,
    tw: &[f64],
    twq: &[f64],
    q: __m256d,
    forward: bool,
) {
    let groups_per_8 = 8 / (2 * t);
    let mut base = start;
    let mut i = start / (2 * t);
    while base < end {
        let a = _mm256_loadu_pd(x.add(base));
        let b = _mm256_loadu_pd(x.add(base + 4));
        let wl = _mm256_loadu_pd(tw.as_ptr().add(m + i));
        let wql = _mm256_loadu_pd(twq.as_ptr().add(m + i));
        let (u, v, w, wq) = if t == 2 {
            (
                _mm256_permute2f128_pd::<0x20>(a, b),
                _mm256_permute2f128_pd::<0x31>(a, b),
                _mm256_permute4x64_pd::<0b01_01_00_00>(wl),
                _mm256_permute4x64_pd::<0b01_01_00_00>(wql),
            )
        } else {
            (
                _mm256_unpacklo_pd(a, b),
                _mm256_unpackhi_pd(a, b),
                _mm256_permute4x64_pd::<0b11_01_10_00>(wl),
                _mm256_permute4x64_pd::<0b11_01_10_00>(wql),
            )
        };
        let (nu, nv) = if forward {
            let v = mulmod(v, w, wq, q);
            (add_mod(u, v, q), sub_mod(u, v, q))
        } else {
            (add_mod(u, v, q), mulmod(sub_mod(u, v, q), w, wq, q))
        };
        let (ra, rb) = if t == 2 {
            (
                _mm256_permute2f128_pd::<0x20>(nu, nv),
                _mm256_permute2f128_pd::<0x31>(nu, nv),
            )
        } else {
            (_mm256_unpacklo_pd(nu, nv), _mm256_unpackhi_pd(nu, nv))
        };
        _mm256_storeu_pd(x.add(base), ra);
        _mm256_storeu_pd(x.add(base + 4), rb);
        base += 8;
        i += groups_per_8;
    }
}

/// `a·w mod q` for `a ∈ [0, q)`, result in `[0, q)`.
#[inline(always)]
unsafe fn mulmod(a: __m256d, w: __m256d, wq: __m256d, q: __m256d) -> __m256d {
    let h = _mm256_mul_pd(a, w);
    let l = _mm256_fmsub_pd(a, w, h);
    let k =
        _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_pd(a, wq));
    let r = _mm256_add_pd(_mm256_fnmadd_pd(k, q, h), l);
    let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(r, _mm256_setzero_pd());
    _mm256_add_pd(r, _mm256_and_pd(neg, q))
}

#[inline(always)]
unsafe fn add_mod(u: __m256d, v: __m256d, q: __m256d) -> __m256d {
    let s = _mm256_add_pd(u, v);
    let ge = _mm256_cmp_pd::<_CMP_GE_OQ>(s, q);
    _mm256_sub_pd(s, _mm256_and_pd(ge, q))
}

#[inline(always)]
unsafe fn sub_mod(u: __m256d, v: __m256d, q: __m256d) -> __m256d {
    let d = _mm256_sub_pd(u, v);
    let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(d, _mm256_setzero_pd());
    _mm256_add_pd(d, _mm256_and_pd(neg, q))
}

/// In-place u64 → f64 for values below 2^52: the value as the mantissa of `2^52`, less `2^52`.
#[inline(always)]
unsafe fn to_f64(p: *mut u64, n: usize) {
    let magic = _mm256_set1_pd(MAGIC);
    let mut j = 0;
    while j < n {
        let v = _mm256_loadu_si256(p.add(j) as *const __m256i);
        let f = _mm256_or_pd(_mm256_castsi256_pd(v), magic);
        _mm256_storeu_pd(p.add(j) as *mut f64, _mm256_sub_pd(f, magic));
        j += 4;
    }
}

/// In-place f64 → u64 for exact integers in `[0, 2^52)`: `2^52` added, the mantissa kept.
#[inline(always)]
unsafe fn to_u64(p: *mut u64, n: usize) {
    let magic = _mm256_set1_pd(MAGIC);
    let mut j = 0;
    while j < n {
        let f = _mm256_add_pd(_mm256_loadu_pd(p.add(j) as *const f64), magic);
        let v = _mm256_xor_si256(_mm256_castpd_si256(f), _mm256_castpd_si256(magic));
        _mm256_storeu_si256(p.add(j) as *mut __m256i, v);
        j += 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primes::generate_primes;

    /// Bit for bit `tfhe-ntt`'s transform (the same ψ), forward and inverse, from N = 16 (every
    /// stage a small one) to 2^15 (wide passes before the cache blocks), primes 30 to 49 bits.
    #[test]
    fn avx2_transform_is_tfhe_ntt_bit_for_bit() {
        if !available() {
            return;
        }
        for (logn, bits) in [
            (4u32, 30u32),
            (5, 40),
            (8, 45),
            (12, 49),
            (13, 36),
            (15, 49),
        ] {
            let n = 1usize << logn;
            let q = generate_primes(&[bits], 2 * n as u64, &[]).unwrap()[0];
            let plan = tfhe_ntt::prime64::Plan::try_new(n, q).unwrap();
            let mut x = vec![0u64; n];
            x[1] = 1;
            plan.fwd(&mut x);
            let f = FmaNtt::new(n, q, x[0]);
            let a: Vec<u64> = (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7) % q)
                .collect();
            let (mut y, mut z) = (a.clone(), a.clone());
            plan.fwd(&mut y);
            // SAFETY: AVX2 and FMA are available (checked above); the length is N.
            unsafe { f.forward_avx2(&mut z) };
            assert_eq!(z, y, "forward logN={logn} q={q}");
            unsafe { f.inverse_avx2(&mut z) };
            assert_eq!(z, a, "inverse logN={logn} q={q}");
            let top = vec![q - 1; n]; // the largest residues round-trip too
            let mut w = top.clone();
            unsafe {
                f.forward_avx2(&mut w);
                f.inverse_avx2(&mut w);
            }
            assert_eq!(w, top);
        }
    }
}

//! The double-precision FMA NTT of [`crate::ntt_fma`] on AVX2 + FMA CPUs without AVX-512
//! (e.g. AMD Zen 1 and 2): the same twiddles, butterflies, cache blocking and exact product
//!
//! ```text
//!   h = fl(a·w),  l = fma(a, w, −h),  k = round(a·w_q),  r = fma(−k, q, h) + l
//! ```
//!
//! four lanes at a time, with *lazy* reduction: values between stages are integers of either
//! sign, congruent to the residues, kept exactly in doubles, and brought to `[0, q)` once, as
//! the transform's words are written back. The bounds, for `q < 2^50`:
//!
//! - the product above, for `|a| ≤ 4q` and `w ∈ [0, q)`: `|a·w/q| ≤ 4q < 2^52`, so
//!   `fl(a·w_q)` is within 1 of `a·w/q` (two roundings of `2^-53`), `k` within 1.5 of it and
//!   `|r| = |a·w − k·q| ≤ 1.5q`; `h − k·q` is an integer below `1.5q + ulp(h)/2 ≤ 2^51` and `r`
//!   one below `1.5q`, so both FMA results are exact;
//! - `reduce(x) = x − round(x·fl(1/q))·q` for `|x| < 2^52`: `|r| ≤ q/2 + 1`, exact.
//!
//! Forward (Cooley–Tukey) butterfly `(u, v) → (u′ + r, u′ − r)` with `r` the product of `v`,
//! and `u′ = reduce(u)` at every other stage, `u′ = u` at the rest: entries stay within
//! `q/2 + 1 + 1.5q` after a reducing stage and `2q + 1 + 1.5q < 4q` after the next. Inverse
//! (Gentleman–Sande) `(u, v) → (reduce(u + v), (u − v)·w)`: entries stay within `2q`, so
//! `|u − v| ≤ 4q`. A butterfly takes 8 or 11 vector operations (forward) and 11 (inverse),
//! against the 17 of one reduced to `[0, q)` at every stage.
//!
//! AVX2 has no u64↔f64 conversion, so residues (below 2^50) move in and out of the mantissa
//! of `2^52`: `f64::from_bits(x | bits(2^52)) − 2^52 = x` exactly, and back. Stages with
//! butterfly distance `t ≥ 4` run on whole vectors; `t = 2` and `t = 1` pair the lanes of two
//! vectors with 128-bit-lane and in-lane shuffles. Bit-identical to `tfhe-ntt` and to the
//! AVX-512 kernel (the same `ψ`, and every result a canonical residue; tested against
//! `tfhe-ntt` below, extreme residues included).

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
        let q = Lanes::new(self.q);
        let block = BLOCK.min(n);
        let mut t = n;
        let mut m = 1;
        while t > block {
            t >>= 1;
            self.forward_stage(x, 0, n, m, t, q);
            m <<= 1;
        }
        let (m0, t0) = (m, t);
        let mut base = 0;
        while base < n {
            let (mut m, mut t) = (m0, t0);
            while m < n {
                t >>= 1;
                self.forward_stage(x, base, base + block, m, t, q);
                m <<= 1;
            }
            base += block;
        }
        to_u64_canonical(p, n, q, None);
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
        let q = Lanes::new(self.q);
        let block = BLOCK.min(n);
        let mut base = 0;
        let (mut m_end, mut t_end) = (n >> 1, 1);
        while base < n {
            let (mut m, mut t) = (n >> 1, 1);
            while 2 * t <= block && m >= 1 {
                self.inverse_stage(x, base, base + block, m, t, q);
                t <<= 1;
                m >>= 1;
            }
            (m_end, t_end) = (m, t);
            base += block;
        }
        let (mut m, mut t) = (m_end, t_end);
        while m >= 1 {
            self.inverse_stage(x, 0, n, m, t, q);
            t <<= 1;
            m >>= 1;
        }
        let ni = (_mm256_set1_pd(self.n_inv), _mm256_set1_pd(self.n_inv_q));
        to_u64_canonical(p, n, q, Some(ni));
    }

    /// Forward stage `m` (butterfly distance `t`) over `x[start..end]`. Stage `log2 m` odd
    /// reduces each `u` first; even stages do not: the first one's entries are residues, and
    /// after a reducing stage entries are within `2q + 1`, so the next stage's stay within
    /// `2q + 1 + 1.5q < 4q`, the product's domain.
    #[inline(always)]
    unsafe fn forward_stage(
        &self,
        x: *mut f64,
        start: usize,
        end: usize,
        m: usize,
        t: usize,
        q: Lanes,
    ) {
        let (w, wq) = (&self.fwd_w[..], &self.fwd_wq[..]);
        match (t >= 4, reduces_at(m)) {
            (true, true) => wide_stage::<FORWARD_REDUCING>(x, start, end, m, t, w, wq, q),
            (true, false) => wide_stage::<FORWARD>(x, start, end, m, t, w, wq, q),
            (false, true) => small_stage::<FORWARD_REDUCING>(x, start, end, m, t, w, wq, q),
            (false, false) => small_stage::<FORWARD>(x, start, end, m, t, w, wq, q),
        }
    }

    /// Inverse stage `m` (butterfly distance `t`) over `x[start..end]`.
    #[inline(always)]
    unsafe fn inverse_stage(
        &self,
        x: *mut f64,
        start: usize,
        end: usize,
        m: usize,
        t: usize,
        q: Lanes,
    ) {
        let (w, wq) = (&self.inv_w[..], &self.inv_wq[..]);
        if t >= 4 {
            wide_stage::<INVERSE>(x, start, end, m, t, w, wq, q);
        } else {
            small_stage::<INVERSE>(x, start, end, m, t, w, wq, q);
        }
    }
}

/// Whether forward stage `m` reduces `u` first: every other stage, from the second (`log2 m`
/// odd).
#[inline(always)]
fn reduces_at(m: usize) -> bool {
    m.trailing_zeros() % 2 == 1
}

/// The butterflies of [`Lanes::butterfly`]: forward without reducing `u`, forward reducing
/// `u` first, inverse.
const FORWARD: u8 = 0;
const FORWARD_REDUCING: u8 = 1;
const INVERSE: u8 = 2;

/// Butterflies with distance `t ≥ 4` over `x[start..end]` at stage `m`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn wide_stage<const B: u8>(
    x: *mut f64,
    start: usize,
    end: usize,
    m: usize,
    t: usize,
    tw: &[f64],
    twq: &[f64],
    q: Lanes,
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
            let (nu, nv) = q.butterfly::<B>(u, v, w, wq);
            _mm256_storeu_pd(x.add(j), nu);
            _mm256_storeu_pd(x.add(j + t), nv);
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
unsafe fn small_stage<const B: u8>(
    x: *mut f64,
    start: usize,
    end: usize,
    m: usize,
    t: usize,
    tw: &[f64],
    twq: &[f64],
    q: Lanes,
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
        let (nu, nv) = q.butterfly::<B>(u, v, w, wq);
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

/// The prime in every lane, and `fl(1/q)` for [`Lanes::reduce`].
#[derive(Clone, Copy)]
struct Lanes {
    q: __m256d,
    qinv: __m256d,
}

impl Lanes {
    #[inline(always)]
    unsafe fn new(q: f64) -> Self {
        Self {
            q: _mm256_set1_pd(q),
            qinv: _mm256_set1_pd(1.0 / q),
        }
    }

    /// `r ≡ a·w (mod q)` with `|r| ≤ 1.5q`, exact, for integer `|a| ≤ 4q` and `w ∈ [0, q)`
    /// (`w_q = fl(w/q)`; the module documentation has the bound).
    #[inline(always)]
    unsafe fn mul(self, a: __m256d, w: __m256d, wq: __m256d) -> __m256d {
        let h = _mm256_mul_pd(a, w);
        let l = _mm256_fmsub_pd(a, w, h);
        let k = _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_pd(a, wq),
        );
        _mm256_add_pd(_mm256_fnmadd_pd(k, self.q, h), l)
    }

    /// `r ≡ x (mod q)` with `|r| ≤ q/2 + 1`, exact, for integer `|x| < 2^52`.
    #[inline(always)]
    unsafe fn reduce(self, x: __m256d) -> __m256d {
        let k = _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_pd(x, self.qinv),
        );
        _mm256_fnmadd_pd(k, self.q, x)
    }

    /// `x mod q` in `[0, q)` for integer `|x| < 2^52`.
    #[inline(always)]
    unsafe fn canonical(self, x: __m256d) -> __m256d {
        let r = self.reduce(x);
        let neg = _mm256_cmp_pd::<_CMP_LT_OQ>(r, _mm256_setzero_pd());
        _mm256_add_pd(r, _mm256_and_pd(neg, self.q))
    }

    /// One lazy butterfly ([`FORWARD`], [`FORWARD_REDUCING`] or [`INVERSE`]): forward
    /// `(u, v) → (u′ + r, u′ − r)` with `r` the product of `v` and `u′ = u` or `reduce(u)`
    /// (entries within `4q`, see `forward_stage`); inverse `(u, v) → (reduce(u + v), (u − v)·w)`
    /// (entries within `2q`).
    #[inline(always)]
    unsafe fn butterfly<const B: u8>(
        self,
        u: __m256d,
        v: __m256d,
        w: __m256d,
        wq: __m256d,
    ) -> (__m256d, __m256d) {
        if B == INVERSE {
            (
                self.reduce(_mm256_add_pd(u, v)),
                self.mul(_mm256_sub_pd(u, v), w, wq),
            )
        } else {
            let u = if B == FORWARD_REDUCING {
                self.reduce(u)
            } else {
                u
            };
            let r = self.mul(v, w, wq);
            (_mm256_add_pd(u, r), _mm256_sub_pd(u, r))
        }
    }
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

/// In-place f64 → u64 of the lazy entries (integers within `4q`), each first multiplied by
/// `scale = (w, fl(w/q))` if given (the inverse's `N^{-1}`; entries within `2q` then) and
/// brought to `[0, q)`: `2^52` added, the mantissa kept.
#[inline(always)]
unsafe fn to_u64_canonical(p: *mut u64, n: usize, q: Lanes, scale: Option<(__m256d, __m256d)>) {
    let magic = _mm256_set1_pd(MAGIC);
    let mut j = 0;
    while j < n {
        let mut x = _mm256_loadu_pd(p.add(j) as *const f64);
        if let Some((w, wq)) = scale {
            x = q.mul(x, w, wq);
        }
        let f = _mm256_add_pd(q.canonical(x), magic);
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
            (12, 50),
            (13, 36),
            (14, 50),
            (15, 49),
            (15, 50),
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
            // extreme residues, where lazy entries grow most: all q − 1, alternating 0 and
            // q − 1, and the transforms' own outputs of those, against tfhe-ntt both ways
            let top = vec![q - 1; n];
            let alternating: Vec<u64> =
                (0..n).map(|i| if i % 2 == 0 { 0 } else { q - 1 }).collect();
            for input in [top, alternating] {
                let mut y = input.clone();
                plan.fwd(&mut y);
                let mut w = input.clone();
                unsafe { f.forward_avx2(&mut w) };
                assert_eq!(w, y, "forward of extreme residues, logN={logn} q={q}");
                let mut back = y.clone();
                plan.inv(&mut back);
                plan.normalize(&mut back);
                unsafe { f.inverse_avx2(&mut y) };
                assert_eq!(y, back, "inverse of a transform, logN={logn} q={q}");
                unsafe { f.inverse_avx2(&mut w) };
                assert_eq!(w, input, "round trip, logN={logn} q={q}");
                let mut z = input.clone();
                plan.inv(&mut z);
                plan.normalize(&mut z);
                let mut zi = input.clone();
                unsafe { f.inverse_avx2(&mut zi) };
                assert_eq!(zi, z, "inverse of extreme residues, logN={logn} q={q}");
            }
        }
    }

    /// Four lanes of `xs` (integers) as a vector, and back.
    unsafe fn lanes(xs: [i64; 4]) -> __m256d {
        _mm256_setr_pd(xs[0] as f64, xs[1] as f64, xs[2] as f64, xs[3] as f64)
    }

    unsafe fn back(v: __m256d) -> [i64; 4] {
        let mut out = [0.0f64; 4];
        _mm256_storeu_pd(out.as_mut_ptr(), v);
        out.map(|x| {
            assert_eq!(x, x.trunc(), "a lazy entry is not an integer");
            x as i64
        })
    }

    /// Forward butterfly `B` on `(u, v)` with twiddle `w`: both outputs within `4q` and
    /// congruent to `u ± v·w`.
    unsafe fn check_forward<const B: u8>(l: Lanes, u: [i64; 4], v: [i64; 4], w: i64, q: i64) {
        let (wv, wq) = (
            _mm256_set1_pd(w as f64),
            _mm256_set1_pd(w as f64 / q as f64),
        );
        let (x, y) = l.butterfly::<B>(lanes(u), lanes(v), wv, wq);
        let (x, y) = (back(x), back(y));
        let modq = |x: i128| x.rem_euclid(q as i128);
        for k in 0..4 {
            let p = v[k] as i128 * w as i128;
            assert!(
                x[k].abs() < 4 * q && y[k].abs() < 4 * q,
                "forward entry beyond 4q, q={q}, B={B}"
            );
            assert_eq!(modq(x[k] as i128), modq(u[k] as i128 + p));
            assert_eq!(modq(y[k] as i128), modq(u[k] as i128 - p));
        }
    }

    /// The bounds the module documentation proves, checked at their edges: the product for
    /// `|a| ≤ 4q`, the reduction, and both butterflies keep their entries within `4q`
    /// (forward) and `2q` (inverse), congruent to the exact results — for primes up to the
    /// largest the kernel takes.
    #[test]
    fn lazy_arithmetic_keeps_its_bounds_at_the_edges() {
        if !available() {
            return;
        }
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move |m: i64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % (2 * m as u64 + 1)) as i64 - m
        };
        for bits in [30u32, 40, 49, 50] {
            let q = generate_primes(&[bits], 1 << 14, &[]).unwrap()[0] as i64;
            let modq = |x: i128| x.rem_euclid(q as i128);
            // SAFETY: AVX2 and FMA are available (checked above).
            unsafe {
                let l = Lanes::new(q as f64);
                let edges = [
                    0,
                    1,
                    -1,
                    q - 1,
                    1 - q,
                    q,
                    -q,
                    2 * q,
                    -2 * q,
                    4 * q,
                    -4 * q,
                    4 * q - 1,
                ];
                let mut values: Vec<i64> = edges.to_vec();
                values.extend((0..60).map(|_| rand(4 * q)));
                let ws = [0, 1, q - 1, q / 2, rand(q).abs() % q];
                for chunk in values.chunks(4).filter(|c| c.len() == 4) {
                    let a = [chunk[0], chunk[1], chunk[2], chunk[3]];
                    for &w in &ws {
                        let (wv, wq) = (
                            _mm256_set1_pd(w as f64),
                            _mm256_set1_pd(w as f64 / q as f64),
                        );
                        let r = back(l.mul(lanes(a), wv, wq));
                        for k in 0..4 {
                            assert!(
                                r[k].abs() <= q + q / 2,
                                "|a·w| reduced to {} > 1.5q, q={q}",
                                r[k]
                            );
                            assert_eq!(modq(r[k] as i128), modq(a[k] as i128 * w as i128));
                        }
                        // forward butterflies: the reducing one on entries within 4q, the
                        // other on entries within 2q (as after a reducing stage); the inverse
                        // on entries within 2q
                        let (u, v) = (a, [a[3], a[0], a[1], a[2]]);
                        check_forward::<FORWARD_REDUCING>(l, u, v, w, q);
                        let (u2, v2) = (u.map(|z| z / 2), v.map(|z| z / 2));
                        check_forward::<FORWARD>(l, u2, v2, w, q);
                        let (x, y) = l.butterfly::<INVERSE>(lanes(u2), lanes(v2), wv, wq);
                        let (x, y) = (back(x), back(y));
                        for k in 0..4 {
                            assert!(
                                x[k].abs() <= 2 * q && y[k].abs() <= 2 * q,
                                "inverse entry beyond 2q, q={q}"
                            );
                            assert_eq!(modq(x[k] as i128), modq(u2[k] as i128 + v2[k] as i128));
                            assert_eq!(
                                modq(y[k] as i128),
                                modq((u2[k] as i128 - v2[k] as i128) * w as i128)
                            );
                        }
                    }
                    let c = back(l.canonical(lanes(a)));
                    for k in 0..4 {
                        assert!((0..q).contains(&c[k]));
                        assert_eq!(c[k] as i128, modq(a[k] as i128));
                    }
                }
                let big = (1i64 << 52) - 1; // the reduction's whole domain
                let r = back(l.reduce(lanes([big, -big, big - 12345, 3 * q + 7])));
                for (k, x) in [big, -big, big - 12345, 3 * q + 7].into_iter().enumerate() {
                    assert!(r[k].abs() <= q / 2 + 1);
                    assert_eq!(modq(r[k] as i128), modq(x as i128));
                }
            }
        }
    }

    /// The forward schedule keeps every entry within `4q` (in units of `q`, worst cases from
    /// the module documentation: a product within `1.5q`, a reduced entry within `q/2 + 1`).
    #[test]
    fn the_forward_schedule_keeps_entries_within_4q() {
        let q = (1u64 << 50) as f64;
        for logn in 1..=17 {
            let mut bound = 1.0; // residues in [0, q)
            for stage in 0..logn {
                let m = 1usize << stage;
                let u = if reduces_at(m) { 0.5 + 1.0 / q } else { bound };
                assert!(bound <= 4.0, "stage {stage} multiplies entries beyond 4q");
                bound = u + 1.5;
                assert!(
                    bound < 4.0,
                    "logN={logn}: stage {stage} leaves entries within {bound}q"
                );
            }
        }
    }
}

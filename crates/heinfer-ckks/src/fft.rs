//! The "special FFT" of the canonical embedding (Cheon et al., HEAAN), vectorized.
//!
//! Slot `j` of a message is the evaluation of its polynomial at `ζ^{5^j mod 2N}`,
//! `ζ = e^{iπ/N}`. With the slots in bit-reversed order, [`SpecialFft::forward`] is a radix-2
//! decimation-in-time transform whose stage of butterfly width `len` (`2, 4, …, N/2`) uses the
//! twiddles `w_j = ζ^{(5^j mod 4·len)·(2N / 4·len)}`, `j < len/2`:
//! `(u, v) ↦ (u + w·v, u − w·v)`. [`SpecialFft::inverse`] undoes it stage by stage with the
//! conjugate twiddles, `(u, v) ↦ (u + v, (u − v)·w̄)`, then divides by `N/2`.
//!
//! The butterflies run on split real and imaginary arrays, so each stage is one loop over
//! contiguous `f64`s that the compiler turns into 8-wide (AVX-512) or 4-wide (AVX2) vector code;
//! the copy for the CPU is chosen once, when the transform is built. Every copy evaluates the
//! same expressions in the same order without fused multiply-adds, so results are bit-identical
//! on every machine (encoding is deterministic across servers).

use num_complex::Complex64;
use std::f64::consts::PI;

/// The special FFT for `N/2` slots: twiddles of every stage (split into real and imaginary
/// parts) and the vector width the CPU offers.
pub(crate) struct SpecialFft {
    slots: usize,
    fwd_re: Vec<f64>,
    fwd_im: Vec<f64>,
    inv_re: Vec<f64>,
    inv_im: Vec<f64>,
    simd: Simd,
}

#[derive(Clone, Copy)]
enum Simd {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl SpecialFft {
    /// The transform of ring degree `n` (`n/2` slots).
    pub(crate) fn new(n: usize) -> Self {
        let m = 2 * n;
        let slots = n / 2;
        let mut rot_group = Vec::with_capacity(slots);
        let mut g = 1usize;
        for _ in 0..slots {
            rot_group.push(g);
            g = g * 5 % m;
        }
        let root = |k: usize| Complex64::from_polar(1.0, 2.0 * PI * k as f64 / m as f64);
        let (mut fwd_re, mut fwd_im, mut inv_re, mut inv_im) = (vec![], vec![], vec![], vec![]);
        let mut len = 2;
        while len <= slots {
            let lenq = len << 2;
            let gap = m / lenq;
            for &r in &rot_group[..len / 2] {
                let (f, i) = (root((r % lenq) * gap), root((lenq - (r % lenq)) * gap));
                fwd_re.push(f.re);
                fwd_im.push(f.im);
                inv_re.push(i.re);
                inv_im.push(i.im);
            }
            len <<= 1;
        }
        Self {
            slots,
            fwd_re,
            fwd_im,
            inv_re,
            inv_im,
            simd: detect(),
        }
    }

    /// `z ↦ σ(z)`: the slot values of the polynomial whose packed coefficients are `vals`
    /// (`vals[j] = m_j + i·m_{j+N/2}`), in place.
    pub(crate) fn forward(&self, vals: &mut [Complex64]) {
        bit_reverse_permute(vals);
        let (re, im) = self.stages(vals, false);
        for (v, (&r, &i)) in vals.iter_mut().zip(re.iter().zip(&im)) {
            *v = Complex64::new(r, i);
        }
    }

    /// Inverse of [`Self::forward`], in place.
    pub(crate) fn inverse(&self, vals: &mut [Complex64]) {
        let (re, im) = self.stages(vals, true);
        let inv = 1.0 / self.slots as f64;
        for (v, (&r, &i)) in vals.iter_mut().zip(re.iter().zip(&im)) {
            *v = Complex64::new(r, i) * inv;
        }
        bit_reverse_permute(vals);
    }

    /// Every stage of one direction on `vals` split into real and imaginary parts, with the
    /// copy compiled for this CPU.
    fn stages(&self, vals: &[Complex64], inverse: bool) -> (Vec<f64>, Vec<f64>) {
        assert_eq!(vals.len(), self.slots, "special FFT of the wrong size");
        type Stages = unsafe fn(&mut [f64], &mut [f64], &[f64], &[f64]);
        let (run, wr, wi): (Stages, &[f64], &[f64]) = match (self.simd, inverse) {
            (Simd::Scalar, false) => (forward_stages, &self.fwd_re, &self.fwd_im),
            (Simd::Scalar, true) => (inverse_stages, &self.inv_re, &self.inv_im),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx2, false) => (forward_avx2, &self.fwd_re, &self.fwd_im),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx2, true) => (inverse_avx2, &self.inv_re, &self.inv_im),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx512, false) => (forward_avx512, &self.fwd_re, &self.fwd_im),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx512, true) => (inverse_avx512, &self.inv_re, &self.inv_im),
        };
        let (mut re, mut im) = split(vals);
        // SAFETY: a vector copy is chosen only where its CPU features were detected at
        // construction; the scalar copies are safe functions.
        unsafe { run(&mut re, &mut im, wr, wi) };
        (re, im)
    }
}

fn detect() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Simd::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return Simd::Avx2;
        }
    }
    Simd::Scalar
}

fn split(vals: &[Complex64]) -> (Vec<f64>, Vec<f64>) {
    (
        vals.iter().map(|v| v.re).collect(),
        vals.iter().map(|v| v.im).collect(),
    )
}

/// One radix-2 stage of butterfly width `2h` over every block of `re`/`im`: `bf` gets the
/// `(u, v)` halves (real and imaginary) and the stage's twiddles `w`, all exactly `h` long
/// (no bounds checks left, so the element loop inside `bf` vectorizes).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn stage(
    re: &mut [f64],
    im: &mut [f64],
    h: usize,
    wr: &[f64],
    wi: &[f64],
    bf: impl Fn(&mut [f64], &mut [f64], &mut [f64], &mut [f64], &[f64], &[f64]),
) {
    let (wr, wi) = (&wr[..h], &wi[..h]);
    for (cr, ci) in re.chunks_exact_mut(2 * h).zip(im.chunks_exact_mut(2 * h)) {
        let (ur, vr) = cr.split_at_mut(h);
        let (ui, vi) = ci.split_at_mut(h);
        bf(
            &mut ur[..h],
            &mut ui[..h],
            &mut vr[..h],
            &mut vi[..h],
            wr,
            wi,
        );
    }
}

/// Forward stages, `len = 2, 4, …, size` (input in bit-reversed order).
#[inline(always)]
fn forward_stages(re: &mut [f64], im: &mut [f64], tw_re: &[f64], tw_im: &[f64]) {
    let (mut h, mut off) = (1, 0);
    while 2 * h <= re.len() {
        stage(
            re,
            im,
            h,
            &tw_re[off..],
            &tw_im[off..],
            |ur, ui, vr, vi, wr, wi| {
                for k in 0..ur.len() {
                    // t = v·w, (u, v) ← (u + t, u − t), as num_complex evaluates it
                    let tr = vr[k] * wr[k] - vi[k] * wi[k];
                    let ti = vr[k] * wi[k] + vi[k] * wr[k];
                    let (ar, ai) = (ur[k], ui[k]);
                    ur[k] = ar + tr;
                    ui[k] = ai + ti;
                    vr[k] = ar - tr;
                    vi[k] = ai - ti;
                }
            },
        );
        off += h;
        h <<= 1;
    }
}

/// Inverse stages, `len = size, …, 4, 2` (output in bit-reversed order, not yet scaled).
#[inline(always)]
fn inverse_stages(re: &mut [f64], im: &mut [f64], tw_re: &[f64], tw_im: &[f64]) {
    let (mut h, mut off) = (re.len() / 2, tw_re.len());
    while h >= 1 {
        off -= h;
        stage(
            re,
            im,
            h,
            &tw_re[off..],
            &tw_im[off..],
            |ur, ui, vr, vi, wr, wi| {
                for k in 0..ur.len() {
                    // (u, v) ← (u + v, (u − v)·w)
                    let (ar, ai, br, bi) = (ur[k], ui[k], vr[k], vi[k]);
                    ur[k] = ar + br;
                    ui[k] = ai + bi;
                    let (dr, di) = (ar - br, ai - bi);
                    vr[k] = dr * wr[k] - di * wi[k];
                    vi[k] = dr * wi[k] + di * wr[k];
                }
            },
        );
        h >>= 1;
    }
}

/// A copy of a stage loop compiled for a vector extension (called only where it is present).
macro_rules! simd_copy {
    ($name:ident, $feature:literal, $body:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $name(re: &mut [f64], im: &mut [f64], tw_re: &[f64], tw_im: &[f64]) {
            $body(re, im, tw_re, tw_im)
        }
    };
}

simd_copy!(forward_avx2, "avx2", forward_stages);
simd_copy!(forward_avx512, "avx512f", forward_stages);
simd_copy!(inverse_avx2, "avx2", inverse_stages);
simd_copy!(inverse_avx512, "avx512f", inverse_stages);

/// Permutes `v` into bit-reversed index order.
pub(crate) fn bit_reverse_permute<T>(v: &mut [T]) {
    let n = v.len();
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = heinfer_math::automorphism::bit_reverse(i, bits);
        if i < j {
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot values by direct evaluation: `Σ_k m_k ζ^{k·5^j}`.
    fn evaluate(coeffs: &[f64], n: usize) -> Vec<Complex64> {
        let slots = n / 2;
        let mut g = 1usize;
        (0..slots)
            .map(|_| {
                let z = (0..n).fold(Complex64::new(0.0, 0.0), |acc, k| {
                    acc + Complex64::from_polar(
                        coeffs[k],
                        PI * ((k * g) % (2 * n)) as f64 / n as f64,
                    )
                });
                g = g * 5 % (2 * n);
                z
            })
            .collect()
    }

    #[test]
    fn forward_is_the_canonical_embedding_and_inverse_undoes_it() {
        for n in [4usize, 16, 64, 256] {
            let coeffs: Vec<f64> = (0..n).map(|k| ((k * 37 + 11) % 17) as f64 - 8.0).collect();
            let slots = n / 2;
            let mut z: Vec<Complex64> = (0..slots)
                .map(|j| Complex64::new(coeffs[j], coeffs[j + slots]))
                .collect();
            let fft = SpecialFft::new(n);
            fft.forward(&mut z);
            for (a, b) in z.iter().zip(evaluate(&coeffs, n)) {
                assert!((a - b).norm() < 1e-9 * n as f64, "n = {n}: {a} vs {b}");
            }
            fft.inverse(&mut z);
            for j in 0..slots {
                assert!(
                    (z[j].re - coeffs[j]).abs() < 1e-9
                        && (z[j].im - coeffs[j + slots]).abs() < 1e-9
                );
            }
        }
    }

    #[test]
    fn every_vector_width_gives_the_same_bits() {
        let n = 1 << 12;
        let mut fft = SpecialFft::new(n);
        let z0: Vec<Complex64> = (0..n / 2)
            .map(|j| Complex64::new((j as f64).sin(), (j as f64 * 0.3).cos()))
            .collect();
        let run = |fft: &SpecialFft| {
            let mut a = z0.clone();
            fft.inverse(&mut a);
            let mut b = a.clone();
            fft.forward(&mut b);
            (a, b)
        };
        let fast = run(&fft);
        fft.simd = Simd::Scalar;
        assert_eq!(run(&fft), fast);
    }
}

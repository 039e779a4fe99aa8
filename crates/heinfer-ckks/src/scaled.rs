//! Scaled values rounded to integer coefficients, in one vectorized pass.
//!
//! Encoding a coefficient-packed plaintext is `c_j = round(Δ·v_j)` (half away from zero), a
//! check that every `v_j` is finite and one that `max |c_j| < Q/2`; encrypting adds the error
//! and takes the maximum again (it picks the reduction). Written as separate scalar loops
//! (an `all` that exits early, `f64::max` folds, a rounding with a branch for ties) these
//! were a quarter of a client's encryption at `N = 2^11`. Here each is one pass whose loop
//! the compiler vectorizes: the largest magnitude is kept as the bits of `|c|` (for
//! non-negative floats the order of the bits is the order of the values), finiteness as an
//! `&=`, and the rounding is `f64::round`, which with SSE4.1 (implied by AVX2) compiles to
//! vector instructions instead of a libm call. Without AVX2 the same loops run with
//! [`round_half_away`], which gives the same integers without libm (a zero may differ in
//! sign: `−0.0` and `0.0` reduce to the same residue).

/// Largest magnitude of what a pass wrote, and whether every input was finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pass {
    /// `max_j |c_j|` (meaningless when `finite` is false).
    pub max_abs: f64,
    /// Whether every input value was finite (neither NaN nor infinite).
    pub finite: bool,
}

/// `out[j] = round(scale·values[j])` (half away from zero) for `j < values.len()`, with the
/// largest `|out[j]|` and whether every value was finite. `out` must be at least as long as
/// `values`; the rest of it is left as it is.
pub(crate) fn scale_round_into(out: &mut [f64], values: &[f64], scale: f64) -> Pass {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn fast(out: &mut [f64], values: &[f64], scale: f64) -> Pass {
            scale_round_body(out, values, scale, f64::round)
        }
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { fast(out, values, scale) };
    }
    scale_round_body(out, values, scale, round_half_away)
}

#[inline(always)]
fn scale_round_body(out: &mut [f64], values: &[f64], scale: f64, round: fn(f64) -> f64) -> Pass {
    let (mut max, mut finite) = (0u64, true);
    for (c, &v) in out.iter_mut().zip(values) {
        let r = round(v * scale);
        *c = r;
        finite &= v.is_finite();
        max = max.max(r.abs().to_bits());
    }
    Pass {
        max_abs: f64::from_bits(max),
        finite,
    }
}

/// `re[j] = round(scale·z[j].re)` and `im[j] = round(scale·z[j].im)` (half away from zero)
/// for `j < z.len()`, in one pass: the inverse canonical embedding's last step, which puts the
/// real parts of the slots' inverse FFT in coefficients `0..N/2` and the imaginary parts in
/// `N/2..N`. Returns the largest rounded magnitude and whether every part was finite; `re`
/// and `im` must be at least as long as `z`.
pub(crate) fn scale_round_complex_into(
    re: &mut [f64],
    im: &mut [f64],
    z: &[num_complex::Complex64],
    scale: f64,
) -> Pass {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn fast(
            re: &mut [f64],
            im: &mut [f64],
            z: &[num_complex::Complex64],
            scale: f64,
        ) -> Pass {
            scale_round_complex_body(re, im, z, scale, f64::round)
        }
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { fast(re, im, z, scale) };
    }
    scale_round_complex_body(re, im, z, scale, round_half_away)
}

#[inline(always)]
fn scale_round_complex_body(
    re: &mut [f64],
    im: &mut [f64],
    z: &[num_complex::Complex64],
    scale: f64,
    round: fn(f64) -> f64,
) -> Pass {
    let (mut max, mut finite) = (0u64, true);
    for ((r, i), v) in re.iter_mut().zip(im.iter_mut()).zip(z) {
        let (a, b) = (round(v.re * scale), round(v.im * scale));
        (*r, *i) = (a, b);
        finite &= v.re.is_finite() & v.im.is_finite();
        max = max.max(a.abs().to_bits()).max(b.abs().to_bits());
    }
    Pass {
        max_abs: f64::from_bits(max),
        finite,
    }
}

/// `c[j] += e[j]` for every `j`, and the largest `|c[j]|` after (the coefficients must be
/// finite: a NaN would count as larger than every number).
pub(crate) fn add_error_max(c: &mut [f64], e: &[i64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn fast(c: &mut [f64], e: &[i64]) -> f64 {
            add_error_body(c, e)
        }
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { fast(c, e) };
    }
    add_error_body(c, e)
}

#[inline(always)]
fn add_error_body(c: &mut [f64], e: &[i64]) -> f64 {
    let mut max = 0u64;
    for (c, &x) in c.iter_mut().zip(e) {
        *c += x as f64;
        max = max.max(c.abs().to_bits());
    }
    f64::from_bits(max)
}

/// Round half away from zero (as `f64::round`, but `+0.0` where it gives `−0.0`) without a
/// libm call: exact for `|x| < 2^51`; larger values go through `f64::round`.
#[inline(always)]
pub(crate) fn round_half_away(x: f64) -> f64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2^52
    if x.abs() < 2_251_799_813_685_248.0 {
        // ties: the magic-number trick rounds half to even; nudge exact halves away from zero
        let r = (x + MAGIC) - MAGIC;
        if (r - x).abs() == 0.5 {
            x.round()
        } else {
            r
        }
    } else {
        x.round()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge_values() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            1e-300,
            -1e-300,
            4503599627370495.5,
            -4503599627370495.5,
            2251799813685248.5,
            -2251799813685247.5,
            1e18,
            -1e18,
            7.0,
            -7.25,
        ];
        // a pseudo-random spread of magnitudes, ties included
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..4096 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let m = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let x = m * 2f64.powi(i % 60);
            v.push(if i % 7 == 0 { x.trunc() + 0.5 } else { x });
        }
        v
    }

    #[test]
    fn every_path_rounds_as_f64_round() {
        // the same integers (`==`: a zero's sign aside)
        for x in edge_values() {
            assert_eq!(round_half_away(x), x.round(), "{x:e}");
        }
        let v = edge_values();
        for scale in [1.0, 3.0, 2f64.powi(20), 0.75] {
            let mut out = vec![f64::NAN; v.len() + 3];
            let pass = scale_round_into(&mut out, &v, scale);
            let want: Vec<f64> = v.iter().map(|x| (x * scale).round()).collect();
            for (g, w) in out.iter().zip(&want) {
                assert_eq!(g, w, "scale {scale}");
            }
            assert!(
                out[v.len()..].iter().all(|x| x.is_nan()),
                "the rest is left"
            );
            // the path without AVX2: the same integers and the same pass
            let mut plain = vec![0.0; v.len()];
            let scalar = scale_round_body(&mut plain, &v, scale, round_half_away);
            assert_eq!(pass, scalar);
            assert!(
                plain.iter().zip(&want).all(|(g, w)| g == w),
                "scale {scale}"
            );
            assert!(pass.finite);
            assert_eq!(
                pass.max_abs,
                want.iter().fold(0.0f64, |m, x| m.max(x.abs()))
            );
        }
    }

    #[test]
    fn complex_parts_round_as_f64_round_into_their_halves() {
        let v = edge_values();
        let z: Vec<num_complex::Complex64> = v
            .iter()
            .zip(v.iter().rev())
            .map(|(&a, &b)| num_complex::Complex64::new(a, -b))
            .collect();
        for scale in [1.0, 3.0, 2f64.powi(20), 0.75] {
            let (mut re, mut im) = (vec![f64::NAN; z.len() + 2], vec![f64::NAN; z.len() + 2]);
            let pass = scale_round_complex_into(&mut re, &mut im, &z, scale);
            for (j, c) in z.iter().enumerate() {
                assert_eq!(re[j], (c.re * scale).round(), "re {j}, scale {scale}");
                assert_eq!(im[j], (c.im * scale).round(), "im {j}, scale {scale}");
            }
            assert!(re[z.len()..]
                .iter()
                .chain(&im[z.len()..])
                .all(|x| x.is_nan()));
            let (mut r2, mut i2) = (vec![0.0; z.len()], vec![0.0; z.len()]);
            let scalar = scale_round_complex_body(&mut r2, &mut i2, &z, scale, round_half_away);
            assert_eq!(pass, scalar, "the path without AVX2: the same pass");
            assert!(r2
                .iter()
                .zip(&re)
                .chain(i2.iter().zip(&im))
                .all(|(a, b)| a == b));
            let both = re[..z.len()].iter().chain(&im[..z.len()]);
            assert_eq!(pass.max_abs, both.fold(0.0f64, |m, x| m.max(x.abs())));
            assert!(pass.finite);
        }
        let mut bad = z.clone();
        bad[7].im = f64::NAN;
        let (mut re, mut im) = (vec![0.0; z.len()], vec![0.0; z.len()]);
        assert!(!scale_round_complex_into(&mut re, &mut im, &bad, 1.0).finite);
    }

    #[test]
    fn a_value_not_finite_is_reported() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut v = vec![1.0; 37];
            v[29] = bad;
            let pass = scale_round_into(&mut [0.0; 37], &v, 2.0);
            assert!(!pass.finite, "{bad}");
        }
    }

    #[test]
    fn the_error_is_added_and_the_largest_magnitude_kept() {
        let mut c: Vec<f64> = (0..1000).map(|i| (i as f64 - 500.0) * 3.0).collect();
        let e: Vec<i64> = (0..1000).map(|i| (i % 13) - 6).collect();
        let want: Vec<f64> = c.iter().zip(&e).map(|(a, &b)| a + b as f64).collect();
        let max = add_error_max(&mut c, &e);
        assert_eq!(c, want);
        assert_eq!(max, want.iter().fold(0.0f64, |m, x| m.max(x.abs())));
    }
}

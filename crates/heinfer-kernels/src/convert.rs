//! Conversions between residues and exact f64 integers for the linear kernels: centering,
//! splitting into two digits, and reduction of exact products modulo `q`.

/// Bits of the low digit when a residue modulo `q` is split in two.
pub(crate) fn split_bits(q: u64) -> u32 {
    (64 - q.leading_zeros()).div_ceil(2)
}

/// Conversions between residues and centered f64 values, compiled for AVX-512 when the CPU
/// has it, else for AVX2 and FMA (the compiler vectorizes these loops; without `avx512dq` a
/// u64↔f64 conversion is scalar; without `fma` the reduction's `mul_add` is a call into the
/// runtime's `fma`, once per coefficient).
pub(crate) mod simd {
    use std::mem::MaybeUninit;

    macro_rules! dispatch {
        ($name:ident, $body:ident, ($($arg:ident: $ty:ty),*)) => {
            pub(crate) fn $name($($arg: $ty),*) {
                #[cfg(target_arch = "x86_64")]
                if crate::gemm::has_avx512() && std::arch::is_x86_feature_detected!("avx512dq") {
                    #[target_feature(enable = "avx512f,avx512dq")]
                    unsafe fn fast($($arg: $ty),*) {
                        $body($($arg),*)
                    }
                    // SAFETY: the CPU supports the enabled features (checked just above).
                    return unsafe { fast($($arg),*) };
                }
                #[cfg(target_arch = "x86_64")]
                if crate::gemm::has_avx2_fma() {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn mid($($arg: $ty),*) {
                        $body($($arg),*)
                    }
                    // SAFETY: the CPU supports the enabled features (checked just above).
                    return unsafe { mid($($arg),*) };
                }
                $body($($arg),*)
            }
        };
    }
    dispatch!(center, center_body, (src: &[u64], q: u64, dst: &mut [f64]));
    dispatch!(split, split_body, (src: &[u64], q: u64, s: u32, lo: &mut [f64], hi: &mut [f64]));
    dispatch!(reduce_into, reduce_body, (y: &[f64], q: u64, dst: &mut [MaybeUninit<u64>]));

    /// `dst = y mod q` (see [`reduce_into`], which also writes into uninitialized memory).
    pub(crate) fn reduce(y: &[f64], q: u64, dst: &mut [u64]) {
        // SAFETY: `MaybeUninit<u64>` has the layout of `u64`, and `reduce_into` stores only
        // initialized values into the slice.
        reduce_into(y, q, unsafe {
            &mut *(dst as *mut [u64] as *mut [MaybeUninit<u64>])
        })
    }

    /// `dst = src` centered to `(−q/2, q/2]`, as f64.
    #[inline(always)]
    fn center_body(src: &[u64], q: u64, dst: &mut [f64]) {
        let (half, qf) = ((q / 2) as i64, q as i64);
        for (d, &x) in dst.iter_mut().zip(src) {
            let x = x as i64;
            *d = (if x > half { x - qf } else { x }) as f64;
        }
    }

    /// Centered residues split as `hi·2^s + lo` with `lo ∈ [−2^{s−1}, 2^{s−1})`.
    #[inline(always)]
    fn split_body(src: &[u64], q: u64, s: u32, lo: &mut [f64], hi: &mut [f64]) {
        let (half, qf, h) = ((q / 2) as i64, q as i64, 1i64 << (s - 1));
        for ((l, u), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(src) {
            let x = x as i64;
            let c = if x > half { x - qf } else { x };
            let top = (c + h) >> s;
            *u = top as f64;
            *l = (c - (top << s)) as f64;
        }
    }

    /// `dst = y mod q` for exact integers `|y| < 2^53` held in f64 (every word of `dst`
    /// written, none read).
    #[inline(always)]
    fn reduce_body(y: &[f64], q: u64, dst: &mut [MaybeUninit<u64>]) {
        let qf = q as f64;
        let inv = 1.0 / qf;
        for (d, &v) in dst.iter_mut().zip(y) {
            let quot = (v * inv).round_ties_even();
            // SAFETY: |r| < 2q < 2^63 and finite (the caller guarantees |v| < 2^53); the
            // unchecked conversion vectorizes where the saturating `as` does not.
            let r: i64 = unsafe { (-quot).mul_add(qf, v).to_int_unchecked() };
            let r = if r < 0 { r + q as i64 } else { r };
            d.write((if r >= q as i64 { r - q as i64 } else { r }) as u64);
        }
    }
}

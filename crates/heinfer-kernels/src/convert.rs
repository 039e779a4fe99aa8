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
    use crate::gemm::NR;
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
    dispatch!(center32, center_body, (src: &[u32], q: u64, dst: &mut [f64]));
    dispatch!(split, split_body, (src: &[u64], q: u64, s: u32, lo: &mut [f64], hi: &mut [f64]));
    dispatch!(split32, split_body, (src: &[u32], q: u64, s: u32, lo: &mut [f64], hi: &mut [f64]));
    dispatch!(reduce_into, reduce_body, (y: &[f64], q: u64, dst: &mut [MaybeUninit<u64>]));
    dispatch!(square_block, square_block_body, (y: [&[f64]; 2], rows: &[u32], bias: Bias<'_>, q: u64, s: [&mut [f64]; 3]));

    /// The bias of a [`square_block`]: none, one centered residue per row (indexed by row),
    /// or that residue times a centered vector of [`NR`] words (the packing's bias vector on
    /// the block's columns).
    #[derive(Clone, Copy)]
    pub(crate) enum Bias<'a> {
        None,
        Rows(&'a [f64]),
        RowsTimes(&'a [f64], &'a [f64]),
    }

    /// `dst = y mod q` (see [`reduce_into`], which also writes into uninitialized memory).
    pub(crate) fn reduce(y: &[f64], q: u64, dst: &mut [u64]) {
        // SAFETY: `MaybeUninit<u64>` has the layout of `u64`, and `reduce_into` stores only
        // initialized values into the slice.
        reduce_into(y, q, unsafe {
            &mut *(dst as *mut [u64] as *mut [MaybeUninit<u64>])
        })
    }

    /// `dst = src` centered to `(−q/2, q/2]`, as f64 (residues in 64- or 32-bit words).
    #[inline(always)]
    fn center_body<W: Copy + Into<u64>>(src: &[W], q: u64, dst: &mut [f64]) {
        let (half, qf) = ((q / 2) as i64, q as i64);
        for (d, &x) in dst.iter_mut().zip(src) {
            let x = x.into() as i64;
            *d = (if x > half { x - qf } else { x }) as f64;
        }
    }

    /// Centered residues split as `hi·2^s + lo` with `lo ∈ [−2^{s−1}, 2^{s−1})`.
    #[inline(always)]
    fn split_body<W: Copy + Into<u64>>(src: &[W], q: u64, s: u32, lo: &mut [f64], hi: &mut [f64]) {
        let (half, qf, h) = ((q / 2) as i64, q as i64, 1i64 << (s - 1));
        for ((l, u), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(src) {
            let x = x.into() as i64;
            let c = if x > half { x - qf } else { x };
            let top = (c + h) >> s;
            *u = top as f64;
            *l = (c - (top << s)) as f64;
        }
    }

    /// The squares of one register block of a fused chain's first layer, for its second: for
    /// the block's rows `r` (`rows[r]`, each [`NR`] words of `y[0]` and `y[1]` from row
    /// `r·NR`), `u_p = y_p + bias mod q` and
    ///
    /// ```text
    /// s[0][rows[r]] = u_0²,  s[1][rows[r]] = 2·u_0·u_1,  s[2][rows[r]] = u_1²   (mod q, centered)
    /// ```
    ///
    /// all in f64: the same values as reducing to residues, multiplying them and centering
    /// (`reduce`, `vecops::mul_into`, [`center`]), without the round trip through integers or
    /// a buffer of residues. See [`Fmod`] for why every step is exact.
    #[inline(always)]
    fn square_block_body(y: [&[f64]; 2], rows: &[u32], bias: Bias<'_>, q: u64, s: [&mut [f64]; 3]) {
        let f = Fmod::new(q);
        let [s0, s1, s2] = s;
        for (r, &row) in rows.iter().enumerate() {
            let (y0, y1) = (&y[0][r * NR..(r + 1) * NR], &y[1][r * NR..(r + 1) * NR]);
            let at = row as usize * NR;
            let (d0, d1, d2) = (
                &mut s0[at..at + NR],
                &mut s1[at..at + NR],
                &mut s2[at..at + NR],
            );
            let mut u0 = [0.0; NR];
            match bias {
                Bias::None => {
                    for (u, &v) in u0.iter_mut().zip(y0) {
                        *u = f.center(v);
                    }
                }
                Bias::Rows(b) => {
                    let b = b[row as usize];
                    for (u, &v) in u0.iter_mut().zip(y0) {
                        *u = f.wrap(f.center(v) + b);
                    }
                }
                Bias::RowsTimes(b, vector) => {
                    let b = b[row as usize];
                    for ((u, &v), &w) in u0.iter_mut().zip(y0).zip(vector) {
                        *u = f.wrap(f.center(v) + f.mul(b, w));
                    }
                }
            }
            for c in 0..NR {
                let (a, b) = (u0[c], f.center(y1[c]));
                d0[c] = f.mul(a, a);
                d1[c] = f.mul(a + a, b);
                d2[c] = f.mul(b, b);
            }
        }
    }

    /// Arithmetic modulo `q < 2^50` on exact integers held in f64, results centered in
    /// `(−q/2, q/2]` (`q` odd: the same values as [`center`] of the residue).
    ///
    /// - `center(y)` for `|y| < 2^53` (and `q ≥ 16`): `t = y − round(y·(1/q))·q`. The
    ///   computed `y·(1/q)` is off from `y/q` by at most `|y/q|·2^-51 < 1/4` (`|y/q| < 2^49`),
    ///   so `|t| < 0.75·q`: an integer, computed exactly by one fused multiply-add; one
    ///   conditional `±q` centers it.
    /// - `mul(a, b)` for centered `|a| ≤ q`, `|b| ≤ q/2`: `h = fl(a·b)` and `l = a·b − h`
    ///   (exact: one fused multiply-add; the error of a product is representable), `t =
    ///   h − round(h·(1/q))·q` exact as above (`|h/q| ≤ q/2 < 2^49`), `r = t + l` exact
    ///   (`|l| ≤ ulp(h)/2 ≤ q²/2^54 ≤ q/16`), so `|r| < 0.82·q`, then centered. `r ≡ a·b
    ///   (mod q)` and every intermediate is an integer below `2^53`: the result is exact.
    #[derive(Clone, Copy)]
    struct Fmod {
        q: f64,
        inv: f64,
        half: f64,
    }

    impl Fmod {
        #[inline(always)]
        fn new(q: u64) -> Self {
            debug_assert!(q % 2 == 1 && q < 1 << 50, "Fmod needs an odd q below 2^50");
            let q = q as f64;
            Self {
                q,
                inv: 1.0 / q,
                half: 0.5 * q,
            }
        }

        /// `x` in `(−1.5q, 1.5q)` moved to `(−q/2, q/2]`.
        #[inline(always)]
        fn wrap(self, x: f64) -> f64 {
            let x = if x > self.half { x - self.q } else { x };
            if x <= -self.half {
                x + self.q
            } else {
                x
            }
        }

        /// `y mod q`, centered.
        #[inline(always)]
        fn center(self, y: f64) -> f64 {
            let quot = (y * self.inv).round_ties_even();
            self.wrap((-quot).mul_add(self.q, y))
        }

        /// `a·b mod q`, centered.
        #[inline(always)]
        fn mul(self, a: f64, b: f64) -> f64 {
            let h = a * b;
            let l = a.mul_add(b, -h);
            let quot = (h * self.inv).round_ties_even();
            self.wrap((-quot).mul_add(self.q, h) + l)
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

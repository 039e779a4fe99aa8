//! The f64 micro-kernel of the batch-axis linear layer.
//!
//! Computes a register block of `Y = W·X`: `m ≤ MR` output rows by [`NR`] columns,
//!
//! ```text
//! y[r][c] = Σ_k w[k·m + r] · xt[idx[k]·ldx + col + c]      (r < m, c < NR)
//! ```
//!
//! `w` is the row block packed column-major (`m` weights of input `k` adjacent, so each is
//! one broadcast), `idx` selects the rows of the packed input tile `xt` that this group of
//! outputs reads (a convolution window, or every input of a dense layer). Every operand is
//! an integer of at most 53 bits and the caller guarantees `Σ_k |w|·|x| < 2^53`, so the
//! floating-point result is the exact integer.
//!
//! With AVX-512 the block is `m × 4` registers of 8 lanes (`m ≤ 6`: 24 accumulators,
//! 4 input registers, 1 broadcast — 29 of the 32 registers); each input row loaded feeds
//! `4·m` fused multiply-adds. With AVX2 and FMA (no AVX-512: e.g. AMD Zen 1 and 2) the 32 columns
//! run as four strips of 8 (`m × 2` registers of 4 lanes: 12 accumulators, 2 inputs and a
//! broadcast of the 16 registers), each strip over all inputs. Elsewhere a portable loop of
//! the same shape is used: without the `fma` target feature each of its `mul_add`s is a call
//! into the runtime's software-dispatched `fma` (measured in `docs/benchmarks-history.md`). Every path
//! sums the same products in the same order with one rounding each, on exact integers: the
//! same bits.

/// Largest number of output rows per micro-kernel call.
pub const MR: usize = 6;
/// Columns per micro-kernel call (4 AVX-512 registers of 8 doubles).
pub const NR: usize = 32;

/// Whether the AVX2 + FMA kernel can run on this CPU (cached by the standard library).
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX-512 kernel can run on this CPU (cached by the standard library).
#[inline]
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The rows of a packed input tile that a block reads, with the largest index kept, so a
/// call checks one bound instead of every index (the check over 845 indices was 3.5 % of a
/// CryptoNets query's server time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowIndex {
    idx: Vec<u32>,
    max: u32,
}

impl RowIndex {
    /// The indices, in the order the weights are packed.
    pub fn new(idx: Vec<u32>) -> Self {
        let max = idx.iter().copied().max().unwrap_or(0);
        Self { idx, max }
    }
    /// The indices.
    pub fn as_slice(&self) -> &[u32] {
        &self.idx
    }
    /// Number of indices.
    pub fn len(&self) -> usize {
        self.idx.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.idx.is_empty()
    }
}

/// `kernel::block::<M>(args)` for the row count `m` (1 to 6, the const parameter each
/// instruction set's block is compiled for).
#[cfg(target_arch = "x86_64")]
macro_rules! by_rows {
    ($kernel:ident, $m:expr, $($arg:expr),*) => {
        match $m {
            1 => $kernel::block::<1>($($arg),*),
            2 => $kernel::block::<2>($($arg),*),
            3 => $kernel::block::<3>($($arg),*),
            4 => $kernel::block::<4>($($arg),*),
            5 => $kernel::block::<5>($($arg),*),
            _ => $kernel::block::<6>($($arg),*),
        }
    };
}

/// `out[r·NR + c] = Σ_k w[k·m + r]·xt[idx[k]·ldx + col + c]` for `r < m`, `c < NR`.
///
/// # Panics
/// If `m` is 0 or above [`MR`], `w.len() != idx.len()·m`, an index points outside `xt`
/// or `out` is shorter than `m·NR` (the callers in this crate construct these sizes).
pub fn block(
    m: usize,
    w: &[f64],
    idx: &RowIndex,
    xt: &[f64],
    ldx: usize,
    col: usize,
    out: &mut [f64],
) {
    assert!(
        (1..=MR).contains(&m) && w.len() == idx.len() * m && out.len() >= m * NR && col + NR <= ldx
    );
    assert!(idx.is_empty() || (idx.max as usize + 1) * ldx <= xt.len());
    let idx = idx.as_slice();
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU supports AVX-512F (checked above) and every access was bounds-checked
        // by the assertions: rows idx[k] ≤ max of xt hold ldx ≥ col + NR values, out holds m·NR.
        unsafe { by_rows!(avx512, m, w, idx, xt.as_ptr(), ldx, col, out.as_mut_ptr()) }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above); the accesses were bounds-checked
        // by the assertions as for the AVX-512 kernel.
        unsafe { by_rows!(avx2, m, w, idx, xt.as_ptr(), ldx, col, out.as_mut_ptr()) }
        return;
    }
    portable(m, w, idx, xt, ldx, col, out);
}

/// The same block without SIMD intrinsics (the compiler vectorizes the inner loop).
pub fn portable(
    m: usize,
    w: &[f64],
    idx: &[u32],
    xt: &[f64],
    ldx: usize,
    col: usize,
    out: &mut [f64],
) {
    let mut acc = [[0f64; NR]; MR];
    for (k, &row) in idx.iter().enumerate() {
        let x = &xt[row as usize * ldx + col..row as usize * ldx + col + NR];
        for r in 0..m {
            let wk = w[k * m + r];
            for (a, &xv) in acc[r].iter_mut().zip(x) {
                *a = wk.mul_add(xv, *a);
            }
        }
    }
    for r in 0..m {
        out[r * NR..(r + 1) * NR].copy_from_slice(&acc[r]);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::NR;
    use std::arch::x86_64::*;

    /// The register-blocked kernel for `M` rows (see the module documentation).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block<const M: usize>(
        w: &[f64],
        idx: &[u32],
        xt: *const f64,
        ldx: usize,
        col: usize,
        out: *mut f64,
    ) {
        let mut acc = [[_mm512_setzero_pd(); 4]; M];
        let wp = w.as_ptr();
        for (k, &row) in idx.iter().enumerate() {
            let xp = xt.add(row as usize * ldx + col);
            let x0 = _mm512_loadu_pd(xp);
            let x1 = _mm512_loadu_pd(xp.add(8));
            let x2 = _mm512_loadu_pd(xp.add(16));
            let x3 = _mm512_loadu_pd(xp.add(24));
            for (r, a) in acc.iter_mut().enumerate() {
                let wv = _mm512_set1_pd(*wp.add(k * M + r));
                a[0] = _mm512_fmadd_pd(wv, x0, a[0]);
                a[1] = _mm512_fmadd_pd(wv, x1, a[1]);
                a[2] = _mm512_fmadd_pd(wv, x2, a[2]);
                a[3] = _mm512_fmadd_pd(wv, x3, a[3]);
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (v, &reg) in a.iter().enumerate() {
                _mm512_storeu_pd(out.add(r * NR + v * 8), reg);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::NR;
    use std::arch::x86_64::*;

    /// The AVX2 + FMA kernel for `M` rows: four strips of 8 columns (see the module
    /// documentation).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block<const M: usize>(
        w: &[f64],
        idx: &[u32],
        xt: *const f64,
        ldx: usize,
        col: usize,
        out: *mut f64,
    ) {
        let wp = w.as_ptr();
        for strip in (0..NR).step_by(8) {
            let mut acc = [[_mm256_setzero_pd(); 2]; M];
            for (k, &row) in idx.iter().enumerate() {
                let xp = xt.add(row as usize * ldx + col + strip);
                let x0 = _mm256_loadu_pd(xp);
                let x1 = _mm256_loadu_pd(xp.add(4));
                for (r, a) in acc.iter_mut().enumerate() {
                    let wv = _mm256_set1_pd(*wp.add(k * M + r));
                    a[0] = _mm256_fmadd_pd(wv, x0, a[0]);
                    a[1] = _mm256_fmadd_pd(wv, x1, a[1]);
                }
            }
            for (r, a) in acc.iter().enumerate() {
                _mm256_storeu_pd(out.add(r * NR + strip), a[0]);
                _mm256_storeu_pd(out.add(r * NR + strip + 4), a[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every kernel this CPU runs gives the portable loop's bits (random integer blocks of
    /// every height, products up to 2^45 summed over up to 40 inputs).
    #[test]
    fn every_kernel_matches_the_portable_loop() {
        let ldx = NR + 8;
        let rows = 50usize;
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let xt: Vec<f64> = (0..rows * ldx)
            .map(|_| ((next() % (1 << 30)) as f64) - (1u64 << 29) as f64)
            .collect();
        for m in 1..=MR {
            let k = 37;
            let w: Vec<f64> = (0..k * m)
                .map(|_| ((next() % (1 << 16)) as f64) - 32768.0)
                .collect();
            let idx: Vec<u32> = (0..k).map(|_| (next() % rows as u64) as u32).collect();
            let mut want = vec![0f64; m * NR];
            portable(m, &w, &idx, &xt, ldx, 8, &mut want);
            #[cfg(target_arch = "x86_64")]
            {
                let mut got = vec![0f64; m * NR];
                if has_avx2_fma() {
                    // SAFETY: AVX2 and FMA are available; the sizes are those `block` checks.
                    unsafe {
                        match m {
                            1 => avx2::block::<1>(&w, &idx, xt.as_ptr(), ldx, 8, got.as_mut_ptr()),
                            2 => avx2::block::<2>(&w, &idx, xt.as_ptr(), ldx, 8, got.as_mut_ptr()),
                            3 => avx2::block::<3>(&w, &idx, xt.as_ptr(), ldx, 8, got.as_mut_ptr()),
                            4 => avx2::block::<4>(&w, &idx, xt.as_ptr(), ldx, 8, got.as_mut_ptr()),
                            5 => avx2::block::<5>(&w, &idx, xt.as_ptr(), ldx, 8, got.as_mut_ptr()),
                            _ => avx2::block::<6>(&w, &idx, xt.as_ptr(), ldx, 8, got.as_mut_ptr()),
                        }
                    }
                    assert_eq!(got, want, "AVX2 kernel, m = {m}");
                }
                if has_avx512() {
                    let mut got = vec![0f64; m * NR];
                    block(m, &w, &RowIndex::new(idx.clone()), &xt, ldx, 8, &mut got);
                    assert_eq!(got, want, "AVX-512 kernel, m = {m}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn block_is_the_exact_integer_product(m in 1usize..=MR, k in 1usize..40, seed in any::<u64>()) {
            let ldx = NR + 8;
            let rows = 50usize;
            let mut s = seed | 1;
            let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s };
            let xt: Vec<f64> = (0..rows * ldx).map(|_| ((next() % (1 << 30)) as f64) - (1u64 << 29) as f64).collect();
            let w: Vec<f64> = (0..k * m).map(|_| ((next() % (1 << 16)) as f64) - 32768.0).collect();
            let idx: Vec<u32> = (0..k).map(|_| (next() % rows as u64) as u32).collect();
            let mut out = vec![0f64; m * NR];
            block(m, &w, &RowIndex::new(idx.clone()), &xt, ldx, 8, &mut out);
            for r in 0..m {
                for c in 0..NR {
                    let exact: i128 = (0..k).map(|j| w[j * m + r] as i128 * xt[idx[j] as usize * ldx + 8 + c] as i128).sum();
                    prop_assert_eq!(out[r * NR + c] as i128, exact);
                }
            }
        }
    }

    #[test]
    #[should_panic]
    fn an_index_past_the_tile_is_refused() {
        let xt = vec![0f64; 4 * NR];
        let mut out = vec![0f64; NR];
        block(
            1,
            &[1.0, 1.0],
            &RowIndex::new(vec![0, 4]),
            &xt,
            NR,
            0,
            &mut out,
        );
    }
}

//! Software prefetch for the linear kernels' input tiles.
//!
//! A column tile reads a few cache lines (`NR` or `TILE` words) from every input ciphertext:
//! hundreds of separate streams, more than the hardware prefetchers track, so without a hint
//! each tile waits on its inputs' lines one ciphertext after another (the centering of
//! CryptoNets' 784 inputs was ~16 % of its fused chain, stalled on those loads). The kernels
//! ask for the lines of the input [`AHEAD`] positions further on while they convert the current
//! one; the fused square chain, whose tiles are narrow (`NR` words), also asks for each input's
//! words of the next tile.

/// How many inputs ahead of the one being converted the kernels prefetch.
pub(crate) const AHEAD: usize = 4;

/// Asks the CPU to bring `words` (one hint per 64-byte line) into its first-level cache: a hint with no effect on
/// results (and none on CPUs other than x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(words: &[T]) {
    #[cfg(target_arch = "x86_64")]
    for line in words.chunks((64 / std::mem::size_of::<T>()).max(1)) {
        // SAFETY: `_mm_prefetch` only hints the cache (it never faults); the address is
        // inside `words`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = words;
}

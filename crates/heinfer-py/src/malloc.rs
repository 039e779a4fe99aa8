//! The process's C allocator, tuned for the megabyte messages of the protocol.
//!
//! The engine's own buffers come from mimalloc (the module's global allocator). Python's
//! objects do not: the messages (`bytes` of 1–20 MB), their protobuf copies and the NumPy
//! arrays of a batch come from glibc's `malloc`, which maps every block above its mmap
//! threshold afresh and returns it to the OS when it is freed — so each query paid page
//! faults and the kernel's zeroing of every page again (`clear_page_erms`: ~11 % of the
//! samples of an in-process CryptoNets-ReLU query). Raising the mmap threshold to its
//! maximum (32 MiB) and the trim threshold to 256 MiB keeps those blocks in the heap for the
//! next query: measured 13–27 % less time per in-process batch (three interleaved pairs,
//! AMD EPYC). `HEINFER_MALLOC_TUNING=0` in the environment leaves glibc's defaults.
//!
//! Blocks above the mmap threshold (at most 32 MiB in glibc) are still mapped afresh, which
//! is why `heinfer.infer` cuts messages into 16 MiB chunks and the protocol reads ciphertexts
//! in place: with 256 MiB chunks, 98 % of a MobileNetV2-0.35-96 throughput query's page
//! faults were copies of its messages into fresh `bytes` (docs/benchmarks-history.md).
//!
//! mimalloc's own purge delay (memory freed for 1 s goes back to the OS) is left as it is,
//! on measurement: that query (4,096 images, client and server in one process) still spends
//! ~18 % of its worker threads' samples zeroing pages mimalloc had returned, but never purging
//! (`MIMALLOC_PURGE_DELAY=-1`) took 230.3 s against 231.7 s with the default and kept
//! mimalloc's peak beside NumPy's (glibc's): 17.7 GB against 14.3 GB.

/// Applies the tuning once, at import (glibc on Linux only; elsewhere nothing).
pub(crate) fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var("HEINFER_MALLOC_TUNING").is_ok_and(|v| v == "0") {
            return;
        }
        // SAFETY: mallopt only sets allocator parameters; it is called at import, and glibc
        // serializes it with its arenas' locks. A refused value (return 0) leaves the default.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}

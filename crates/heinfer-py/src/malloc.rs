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
//! AMD EPYC).
//!
//! mimalloc returns ("purges") memory freed for 10 ms by default. A query of a large model
//! frees and reallocates gigabytes per segment, seconds apart: each time the pages came back
//! fresh, and the kernel zeroed them (a MobileNetV2-0.35-96 throughput query of 4,096 images:
//! 32 % of its samples in `clear_page_erms`). The module keeps freed memory for reuse instead
//! ([`PURGE_DELAY_MS`] = −1: never purge): that query's server part 340 s with the default,
//! 283 s with a 10 s delay, 228 s never purging (AMD EPYC, 2 threads, one run each). The
//! cost: a process keeps the memory of its largest moment (its peak RSS) until it exits.
//! `MIMALLOC_PURGE_DELAY` in the environment wins (`MIMALLOC_PURGE_DELAY=10` is mimalloc's
//! default); `HEINFER_MALLOC_TUNING=0` leaves both allocators' defaults.

/// mimalloc's purge delay set at import, in milliseconds (−1: never; see the module's
/// documentation).
pub const PURGE_DELAY_MS: i64 = -1;

/// `mi_option_purge_delay` in mimalloc's `mi_option_t`: 15 in both the v3 sources
/// `libmimalloc-sys` builds by default and its v2 ones (checked against their headers).
#[cfg(not(miri))]
const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;

#[cfg(not(miri))]
extern "C" {
    fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
    fn mi_option_get(option: std::os::raw::c_int) -> std::os::raw::c_long;
}

/// mimalloc's purge delay now, in milliseconds (-1: never).
#[cfg(all(test, not(miri)))]
fn purge_delay_ms() -> i64 {
    // SAFETY: reads an integer option of mimalloc's public C API.
    i64::from(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) })
}

/// Applies the tuning once, at import (glibc on Linux only; elsewhere mimalloc's alone).
pub(crate) fn tune() {
    if std::env::var("HEINFER_MALLOC_TUNING").is_ok_and(|v| v == "0") {
        return;
    }
    #[cfg(not(miri))]
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` is mimalloc's public C API (linked in with the global
        // allocator); it stores an integer option, and a purge delay may change at any time.
        unsafe {
            mi_option_set(
                MI_OPTION_PURGE_DELAY,
                PURGE_DELAY_MS as std::os::raw::c_long,
            )
        };
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets allocator parameters; it is called at import, and glibc
        // serializes it with its arenas' locks. A refused value (return 0) leaves the default.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    #[test]
    fn the_purge_delay_is_set_unless_the_environment_says_otherwise() {
        super::tune();
        let env = std::env::var("MIMALLOC_PURGE_DELAY").ok();
        let off = std::env::var("HEINFER_MALLOC_TUNING").is_ok_and(|v| v == "0");
        match (env, off) {
            (None, false) => assert_eq!(super::purge_delay_ms(), super::PURGE_DELAY_MS),
            (Some(v), _) => assert_eq!(super::purge_delay_ms().to_string(), v),
            (None, true) => assert_eq!(super::purge_delay_ms(), 10),
        }
    }
}

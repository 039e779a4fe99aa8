//! What this crate's criterion benchmarks share: the allocator of the Python extension (so
//! timings match what Python callers see), criterion's settings and list-valued environment
//! knobs.

use criterion::Criterion;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Criterion settings sized for a shared 2-core machine: 20 samples over 3 s after 1 s of
/// warm-up (a full `cargo bench -p heinfer-ckks` stays within a few minutes).
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

#[path = "../../../heinfer-math/benches/support/env.rs"]
mod env;
#[allow(unused_imports)] // the wire bench reads no environment
pub use env::env_list;

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

/// The comma-separated numbers in environment variable `name`, or `default` when it is unset.
/// Panics (this is a benchmark) on a value that is not a list of numbers.
#[allow(dead_code)] // not every bench of the crate reads the environment
pub fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={v:?}: expected numbers separated by commas"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

//! What the std-timer benchmarks of this crate share: the allocator of the Python extension
//! (so timings match what Python callers see) and the median of repeated runs.

use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Median wall time of `reps` runs of `f`, in microseconds, after one warm-up run.
pub fn median_us<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

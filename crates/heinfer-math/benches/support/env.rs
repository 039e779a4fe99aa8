//! The environment knobs of the workspace's benchmarks (shared by `#[path]` inclusion: the
//! benches of heinfer-math, heinfer-ckks and heinfer-kernels).

/// The comma-separated numbers in environment variable `name`, or `default` when it is unset.
/// Panics (this is a benchmark) on a value that is not a list of numbers.
#[allow(dead_code)] // not every bench reads the environment
pub fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .map(|s| {
                s.trim().parse().unwrap_or_else(|_| {
                    panic!("{name}={v:?}: expected numbers separated by commas")
                })
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

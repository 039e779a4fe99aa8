//! Helpers shared by the kernels' tests: small insecure parameters and a deterministic stream
//! of values.

use heinfer_ckks::{CkksParams, CkksParamsLiteral, SecurityLevel};
use heinfer_kernels::linear::{GroupSpec, LinearLayer};

/// Insecure test parameters at N = 2^10 over primes of `log_q` bits, no special prime.
pub fn params(log_q: Vec<u32>) -> CkksParams {
    CkksParams::new_insecure_for_tests(CkksParamsLiteral {
        log_n: 10,
        log_q,
        log_p: vec![],
        log_scale: 20,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    })
    .unwrap()
}

/// A deterministic stream of values in [−1, 1) (xorshift).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// `m × k` random layer of weight scale 256: rows `0..m−1` dense, the last row in no group
/// (its bias alone).
#[allow(dead_code)] // not every test crate that includes this module builds layers
pub fn layer(m: usize, k: usize, digits: usize, rng: &mut Rng) -> LinearLayer {
    let w: Vec<f64> = (0..(m - 1) * k)
        .map(|_| (rng.next() * 256.0).round())
        .collect();
    let groups = vec![GroupSpec {
        rows: (0..m as u32 - 1).collect(),
        cols: (0..k as u32).collect(),
        weights: w,
    }];
    LinearLayer::new(m, k, groups, 256.0, digits).unwrap()
}

//! Helpers shared by the kernels' tests: small insecure parameters and a deterministic stream
//! of values.

use heinfer_ckks::{CkksParams, CkksParamsLiteral, SecurityLevel};

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

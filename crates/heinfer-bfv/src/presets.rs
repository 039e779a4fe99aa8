//! BFV parameter presets. The secure one is checked against the security table like every
//! other parameter set; `INSECURE_*` ones exist for fast tests only and offer **no security**.

use crate::error::Result;
use crate::params::{BfvParams, BfvParamsLiteral};
use heinfer_ckks::SecurityLevel;

/// The plaintext prime of the two-party protocol: `1,032,193 = 63·2^14 + 1`, the largest
/// 20-bit prime `≡ 1 (mod 2^14)` (batching up to `N = 8192`), the share modulus of
/// `heinfer-2pc`'s layer circuits.
pub const PLAIN_MODULUS_20: u64 = 1_032_193;

/// `N = 8192`, `Q` three 50-bit primes, one 50-bit special prime (`log2 QP ≈ 200 ≤ 218`, 128-bit
/// secure), `p = 1,032,193`: `Δ ≈ 2^130`, room for 40-bit flooding over a linear layer's
/// worst-case noise (see [`crate::flood`]). Every prime is below 2^50 (IFMA kernels).
pub fn pn13_plain20() -> BfvParamsLiteral {
    BfvParamsLiteral {
        log_n: 13,
        log_q: vec![50, 50, 50],
        log_p: vec![50],
        plain_modulus: PLAIN_MODULUS_20,
        security: SecurityLevel::Bits128,
    }
}

/// **Insecure** (`N = 1024`), for tests: two 50-bit `Q` primes, one special prime,
/// `p = 1,032,193`.
pub fn insecure_logn10() -> Result<BfvParams> {
    BfvParams::new_insecure_for_tests(BfvParamsLiteral {
        log_n: 10,
        log_q: vec![50, 50],
        log_p: vec![50],
        plain_modulus: PLAIN_MODULUS_20,
        security: SecurityLevel::InsecureTestOnly,
    })
}

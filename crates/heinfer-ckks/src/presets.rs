//! Parameter presets. Secure presets are named after their ring degree and `log2(QP)` budget;
//! the `INSECURE_*` ones exist for fast tests only and offer **no security**.
//!
//! Every prime of the secure presets is below 2^50, so every limb runs the double-precision
//! FMA NTT ([`heinfer_math::ntt`]) on AVX-512 machines.

use crate::error::Result;
use crate::params::{CkksParams, CkksParamsLiteral};
use crate::security::SecurityLevel;

/// logN = 13, `log2(QP) ≤ 218`: `q_0` 49 bits, three 40-bit scale primes (3 levels at Δ = 2^40),
/// one 49-bit special prime (α = 1, β = 4 digits). SEAL's shape for this budget.
pub fn pn13_qp218() -> CkksParamsLiteral {
    CkksParamsLiteral {
        log_n: 13,
        log_q: vec![49, 40, 40, 40],
        log_p: vec![49],
        log_scale: 40,
        digits: None,
        security: SecurityLevel::Bits128,
    }
}

/// logN = 14, `log2(QP) ≤ 438` (430 used): `q_0` 50 bits, seven 40-bit scale primes (7 levels at
/// Δ = 2^40), two 50-bit special primes (α = 2, β = 4 digits).
pub fn pn14_qp438() -> CkksParamsLiteral {
    CkksParamsLiteral {
        log_n: 14,
        log_q: [50].into_iter().chain(std::iter::repeat_n(40, 7)).collect(),
        log_p: vec![50, 50],
        log_scale: 40,
        digits: None,
        security: SecurityLevel::Bits128,
    }
}

/// logN = 15, `log2(QP) ≤ 881` (878 used): `q_0` 50 bits, sixteen 40-bit scale primes (16 levels
/// at Δ = 2^40), four 47-bit special primes (α = 4, β = 5 digits).
pub fn pn15_qp881() -> CkksParamsLiteral {
    CkksParamsLiteral {
        log_n: 15,
        log_q: [50]
            .into_iter()
            .chain(std::iter::repeat_n(40, 16))
            .collect(),
        log_p: vec![47, 47, 47, 47],
        log_scale: 40,
        digits: None,
        security: SecurityLevel::Bits128,
    }
}

/// INSECURE, tests only: logN = 10, `q_0` 50 bits, three 35-bit scale primes, two 50-bit
/// special primes (α = 2), Δ = 2^35.
pub fn insecure_logn10_literal() -> CkksParamsLiteral {
    CkksParamsLiteral {
        log_n: 10,
        log_q: vec![50, 35, 35, 35],
        log_p: vec![50, 50],
        log_scale: 35,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    }
}

/// INSECURE, tests only: [`insecure_logn10_literal`] built.
pub fn insecure_logn10() -> Result<CkksParams> {
    CkksParams::new_insecure_for_tests(insecure_logn10_literal())
}

/// INSECURE, tests only: logN = 12, `q_0` 55 bits, five 40-bit scale primes, one 60-bit
/// special prime (α = 1, β = 6: many digits), Δ = 2^40.
pub fn insecure_logn12_literal() -> CkksParamsLiteral {
    CkksParamsLiteral {
        log_n: 12,
        log_q: vec![55, 40, 40, 40, 40, 40],
        log_p: vec![60],
        log_scale: 40,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    }
}

/// INSECURE, tests only: [`insecure_logn12_literal`] built.
pub fn insecure_logn12() -> Result<CkksParams> {
    CkksParams::new_insecure_for_tests(insecure_logn12_literal())
}

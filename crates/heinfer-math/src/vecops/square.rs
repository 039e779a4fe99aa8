//! The coefficients of a square of a polynomial in `s` whose coefficients are vectors: the
//! parts of a squared ciphertext, limb by limb (`heinfer-ckks`' `square` and the kernels'
//! fused squares share this one definition).

use super::*;

/// `out ← d_k mod q`, the coefficient of `s^k` in `(Σ_i a_i s^i)²`:
/// `d_k = 2·Σ_{i<j, i+j=k} a_i a_j (+ a_{k/2}²)` for `k < 2·a.len() − 1` — at two parts
/// `(a_0², 2·a_0 a_1, a_1²)`, at three `(a_0², 2·a_0 a_1, 2·a_0 a_2 + a_1², 2·a_1 a_2, a_2²)`.
/// Every `a_i` and `out` have the same length; one product per pair.
pub fn square_term(out: &mut [u64], a: &[&[u64]], k: usize, bc: &BarrettConst) {
    let last = a.len() - 1;
    debug_assert!(k <= 2 * last);
    let mut written = false;
    for i in k.saturating_sub(last)..=k.min(last) {
        let j = k - i;
        if i >= j {
            break;
        }
        if written {
            mul_add_assign(out, a[i], a[j], bc);
        } else {
            mul_into(out, a[i], a[j], bc);
        }
        written = true;
    }
    if written {
        add_self_assign(out, bc.q);
    }
    if k.is_multiple_of(2) {
        let m = a[k / 2];
        if written {
            mul_add_assign(out, m, m, bc);
        } else {
            mul_into(out, m, m, bc);
        }
    }
}

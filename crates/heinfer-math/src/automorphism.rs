//! Galois automorphisms `σ_g : a(X) ↦ a(X^g)` of `Z_q[X]/(X^N + 1)`, `g` odd.
//!
//! In coefficient form coefficient `i` moves to `i·g mod 2N`, negated when that index is
//! `≥ N` (because `X^N = −1`). In evaluation form `σ_g` only permutes the evaluation points:
//! with `ψ_j = ψ^{e_j}` the point at NTT index `j` (`e_j = 2·brev(j)+1`, see [`crate::ntt`]),
//! `σ_g(a)(ψ_j) = a(ψ^{e_j·g})`, which is the value at the index `j'` with `e_{j'} = e_j·g mod 2N`.
//! The permutation does not depend on the prime, so one table serves every RNS limb.
//!
//! Slot rotations of CKKS use `g = 5^k mod 2N`; complex conjugation uses `g = 2N − 1`.

use crate::error::{MathError, Result};
use crate::modulus::Modulus;

/// Reverses the low `bits` bits of `x`.
#[inline]
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        return 0;
    }
    x.reverse_bits() >> (usize::BITS - bits)
}

/// Checks that `g` is a valid Galois element for ring degree `n`: odd and below `2n`.
pub fn check_galois_element(g: u64, n: usize) -> Result<()> {
    if g.is_multiple_of(2) || g >= 2 * n as u64 {
        return Err(MathError::InvalidGaloisElement { g, n });
    }
    Ok(())
}

/// Galois element of a left rotation of the `N/2` CKKS slots by `k` (negative: right).
pub fn rotation_galois_element(k: i64, n: usize) -> u64 {
    let slots = (n / 2) as i64;
    let k = k.rem_euclid(slots) as u64;
    let two_n = 2 * n as u64;
    let mut g = 1u64;
    let mut base = 5u64;
    let mut e = k;
    while e > 0 {
        if e & 1 == 1 {
            g = g * base % two_n;
        }
        base = base * base % two_n;
        e >>= 1;
    }
    g
}

/// Galois element of complex conjugation of the slots: `2N − 1`.
pub fn conjugation_galois_element(n: usize) -> u64 {
    2 * n as u64 - 1
}

/// Index table of `σ_g` in evaluation form: `out[j] = in[table[j]]`.
pub fn ntt_permutation(n: usize, g: u64) -> Result<Vec<u32>> {
    check_galois_element(g, n)?;
    let logn = n.trailing_zeros();
    let mask = 2 * n as u64 - 1;
    Ok((0..n)
        .map(|j| {
            let e = 2 * bit_reverse(j, logn) as u64 + 1;
            let eg = (e * g) & mask;
            bit_reverse(((eg - 1) / 2) as usize, logn) as u32
        })
        .collect())
}

/// Applies an evaluation-form permutation: `out[j] = input[table[j]]`.
#[inline]
pub fn permute_into(input: &[u64], table: &[u32], out: &mut [u64]) {
    for (o, &t) in out.iter_mut().zip(table) {
        *o = input[t as usize];
    }
}

/// Applies `σ_g` to a polynomial in coefficient form modulo `m`.
pub fn apply_coefficient_form(input: &[u64], g: u64, m: &Modulus, out: &mut [u64]) -> Result<()> {
    let n = input.len();
    check_galois_element(g, n)?;
    let mask = 2 * n - 1;
    for (i, &c) in input.iter().enumerate() {
        let idx = (i * g as usize) & mask;
        if idx < n {
            out[idx] = c;
        } else {
            out[idx - n] = m.neg(c);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ntt::NttPlan;
    use crate::primes::generate_primes;

    #[test]
    fn ntt_permutation_matches_coefficient_automorphism() {
        let n = 256;
        let q = generate_primes(&[55], 2 * n as u64, &[]).unwrap()[0];
        let plan = NttPlan::new(n, q).unwrap();
        let a: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 13) % q).collect();
        for g in [5u64, 25, 2 * n as u64 - 1, rotation_galois_element(-3, n)] {
            let mut coeff = vec![0; n];
            apply_coefficient_form(&a, g, plan.modulus(), &mut coeff).unwrap();
            plan.forward(&mut coeff);
            let mut fa = a.clone();
            plan.forward(&mut fa);
            let table = ntt_permutation(n, g).unwrap();
            let mut perm = vec![0; n];
            permute_into(&fa, &table, &mut perm);
            assert_eq!(perm, coeff, "g = {g}");
        }
    }

    #[test]
    fn rotation_elements_compose() {
        let n = 1 << 12;
        let two_n = 2 * n as u64;
        let g1 = rotation_galois_element(1, n);
        let g2 = rotation_galois_element(2, n);
        assert_eq!(g1 * g1 % two_n, g2);
        assert_eq!(rotation_galois_element(-1, n) * g1 % two_n, 1);
        assert!(check_galois_element(4, n).is_err());
        assert!(check_galois_element(two_n + 1, n).is_err());
    }
}

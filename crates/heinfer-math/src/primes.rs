//! Deterministic generation of NTT-friendly primes.
//!
//! A prime `q ≡ 1 (mod 2N)` has a primitive `2N`-th root of unity, which the negacyclic NTT
//! over `Z_q[X]/(X^N+1)` needs. For a requested size of `b` bits we walk the progression
//! `2^b + 1 − k·2N`, `k = 1, 2, …` downward from `2^b`, skip primes already taken, and test each
//! candidate with Miller–Rabin on the first twelve prime bases (deterministic for every 64-bit
//! integer). Same request, same primes, on every machine.
//!
//! Every prime has exactly `b` bits (`2^{b−1} < q < 2^b`), as in SEAL's `CoeffModulus::Create`:
//! the security check sums bit sizes, so a "40-bit" prime must not be `2^40 + 2N·k`. (CKKS.md
//! suggested searching outward from `2^b`; primes above `2^b` would silently push `log2(QP)`
//! over the standard's bound. The scale drift this causes is below `2^-20` per level.)

use crate::error::{MathError, Result};

/// Largest prime size we hand out: `q < 2^61` leaves head-room for lazy reductions.
pub const MAX_PRIME_BITS: u32 = 61;
/// Smallest prime size we hand out.
pub const MIN_PRIME_BITS: u32 = 17;

/// Deterministic Miller–Rabin primality test, exact for all `n < 2^64`.
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    for &p in &BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let mul = |a: u64, b: u64| (a as u128 * b as u128 % n as u128) as u64;
    let pow = |mut a: u64, mut e: u64| {
        let mut r = 1u64;
        while e > 0 {
            if e & 1 == 1 {
                r = mul(r, a);
            }
            a = mul(a, a);
            e >>= 1;
        }
        r
    };
    let mut d = n - 1;
    let mut s = 0;
    while d.is_multiple_of(2) {
        d /= 2;
        s += 1;
    }
    'outer: for &a in &BASES {
        let mut x = pow(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul(x, x);
            if x == n - 1 {
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// Generates one prime `≡ 1 (mod two_n)` of about `bits` bits for each entry of `bits`, all
/// distinct and distinct from `exclude`. Deterministic.
pub fn generate_primes(bits: &[u32], two_n: u64, exclude: &[u64]) -> Result<Vec<u64>> {
    if !two_n.is_power_of_two() || two_n < 4 {
        return Err(MathError::PrimeGeneration(format!(
            "2N = {two_n} is not a power of two ≥ 4"
        )));
    }
    let mut taken: Vec<u64> = exclude.to_vec();
    let mut out = Vec::with_capacity(bits.len());
    for &b in bits {
        if !(MIN_PRIME_BITS..=MAX_PRIME_BITS).contains(&b) {
            return Err(MathError::PrimeGeneration(format!(
                "prime size {b} bits is outside {MIN_PRIME_BITS}..={MAX_PRIME_BITS}"
            )));
        }
        if (two_n as u128) >= (1u128 << (b - 1)) {
            return Err(MathError::PrimeGeneration(format!(
                "a {b}-bit prime cannot be ≡ 1 mod 2N = {two_n}"
            )));
        }
        let top = (1u64 << b) + 1;
        let bottom = 1u64 << (b - 1);
        let mut found = None;
        let mut k = 1u64;
        while let Some(c) = top.checked_sub(k * two_n) {
            if c <= bottom {
                break;
            }
            if !taken.contains(&c) && is_prime(c) {
                found = Some(c);
                break;
            }
            k += 1;
        }
        let q = found.ok_or_else(|| {
            MathError::PrimeGeneration(format!("no unused {b}-bit prime ≡ 1 mod {two_n} was found"))
        })?;
        taken.push(q);
        out.push(q);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_primes_and_composites() {
        assert!(is_prime(2) && is_prime(3) && is_prime(0x1fffffffffffffff));
        assert!(is_prime(1152921504606584833)); // a 60-bit NTT prime used by SEAL
        assert!(!is_prime(1) && !is_prime(561) && !is_prime(3215031751));
        assert!(!is_prime((1u64 << 61) + 1));
    }

    #[test]
    fn generated_primes_are_ntt_friendly_distinct_deterministic() {
        let two_n = 1u64 << 15;
        let bits = [60, 40, 40, 40, 40, 50, 50, 61];
        let a = generate_primes(&bits, two_n, &[]).unwrap();
        let b = generate_primes(&bits, two_n, &[]).unwrap();
        assert_eq!(a, b);
        for (q, &bb) in a.iter().zip(&bits) {
            assert!(is_prime(*q));
            assert_eq!(q % two_n, 1);
            assert_eq!(64 - q.leading_zeros(), bb);
        }
        let mut s = a.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), a.len());
    }

    #[test]
    fn refuses_bad_requests() {
        assert!(generate_primes(&[62], 1 << 14, &[]).is_err());
        assert!(generate_primes(&[16], 1 << 14, &[]).is_err());
        assert!(generate_primes(&[20], 1 << 20, &[]).is_err());
    }
}

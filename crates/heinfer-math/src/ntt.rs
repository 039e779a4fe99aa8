//! The negacyclic number-theoretic transform over `Z_q[X]/(X^N + 1)`.
//!
//! For a primitive `2N`-th root of unity `ψ mod q`, the forward transform maps
//! `a(X) = Σ a_i X^i` to its evaluations at the odd powers of `ψ`; a product of polynomials
//! becomes a point-wise product. Primes below 2^50 on AVX-512 machines run our
//! double-precision FMA transform ([`crate::ntt_fma`], 8–20% faster here); every other case
//! runs the `tfhe-ntt` crate (AVX-512 / AVX2 / scalar, chosen at run time). Both use the same
//! `ψ` and order and agree bit for bit (tested), so objects in NTT form do not depend on the
//! machine that made them.
//!
//! **Ordering.** Output index `j` holds `a(ψ^{2·brev(j)+1})`, where `brev` reverses the
//! `log2 N` bits of `j` (checked by a test). The Galois permutations in
//! [`crate::automorphism`] rely on this.

use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use crate::primes::is_prime;

/// A negacyclic NTT plan for one prime `q ≡ 1 (mod 2N)`.
pub struct NttPlan {
    plan: tfhe_ntt::prime64::Plan,
    #[cfg(target_arch = "x86_64")]
    fma: Option<crate::ntt_fma::FmaNtt>,
    modulus: Modulus,
    n: usize,
}

impl std::fmt::Debug for NttPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NttPlan {{ n: {}, q: {} }}", self.n, self.modulus.q)
    }
}

impl NttPlan {
    /// Builds the plan for ring degree `n` (a power of two ≥ 16) and prime `q ≡ 1 mod 2n`.
    pub fn new(n: usize, q: u64) -> Result<Self> {
        if !n.is_power_of_two() || n < 16 {
            return Err(MathError::NttPlan(format!(
                "ring degree {n} is not a power of two ≥ 16"
            )));
        }
        if q >= 1u64 << 61 || !is_prime(q) || q % (2 * n as u64) != 1 {
            return Err(MathError::NttPlan(format!(
                "{q} is not a prime < 2^61 with q ≡ 1 mod {}",
                2 * n
            )));
        }
        let plan = tfhe_ntt::prime64::Plan::try_new(n, q)
            .ok_or_else(|| MathError::NttPlan(format!("no 2N-th root of unity mod {q}")))?;
        #[cfg(target_arch = "x86_64")]
        let fma = (q < (1u64 << 50) && crate::ntt_fma::available()).then(|| {
            // the same ψ as tfhe-ntt: the evaluation of X at output index 0
            let mut x = vec![0u64; n];
            x[1] = 1;
            plan.fwd(&mut x);
            crate::ntt_fma::FmaNtt::new(n, q, x[0])
        });
        Ok(Self {
            plan,
            #[cfg(target_arch = "x86_64")]
            fma,
            modulus: Modulus::new(q),
            n,
        })
    }

    /// Whether this plan runs the double-precision FMA kernels (see [`crate::ntt_fma`]).
    pub fn uses_fma(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.fma.is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Forward transform through `tfhe-ntt` only (for tests and benchmarks).
    pub fn forward_reference(&self, a: &mut [u64]) {
        self.plan.fwd(a);
    }

    /// Inverse transform through `tfhe-ntt` only (for tests and benchmarks).
    pub fn inverse_reference(&self, a: &mut [u64]) {
        self.plan.inv(a);
        self.plan.normalize(a);
    }

    /// Ring degree `N`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The prime modulus.
    pub fn modulus(&self) -> &Modulus {
        &self.modulus
    }

    /// Forward transform in place: coefficients in `[0, q)` → evaluations (bit-reversed order).
    #[inline]
    pub fn forward(&self, a: &mut [u64]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.fma {
            return f.forward(a);
        }
        self.plan.fwd(a);
    }

    /// Inverse transform in place, normalized by `N^{-1}`: evaluations → coefficients in `[0, q)`.
    #[inline]
    pub fn inverse(&self, a: &mut [u64]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.fma {
            return f.inverse(a);
        }
        self.plan.inv(a);
        self.plan.normalize(a);
    }

    /// `acc[i] ← acc[i] + a[i]·b[i] mod q` (vectorized; inputs in `[0, q)`).
    #[inline]
    pub fn mul_accumulate(&self, acc: &mut [u64], a: &[u64], b: &[u64]) {
        self.plan.mul_accumulate(acc, a, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automorphism::bit_reverse;
    use crate::primes::generate_primes;
    use proptest::prelude::*;

    fn schoolbook(a: &[u64], b: &[u64], m: &Modulus) -> Vec<u64> {
        let n = a.len();
        let mut c = vec![0u64; n];
        for i in 0..n {
            for j in 0..n {
                let p = m.mul(a[i], b[j]);
                if i + j < n {
                    c[i + j] = m.add(c[i + j], p);
                } else {
                    c[i + j - n] = m.sub(c[i + j - n], p);
                }
            }
        }
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn round_trip_and_negacyclic_product(seed in any::<u64>(), bits in prop::sample::select(vec![30u32, 40, 50, 55, 60, 61])) {
            let n = 64;
            let q = generate_primes(&[bits], 2 * n as u64, &[]).unwrap()[0];
            let plan = NttPlan::new(n, q).unwrap();
            let mut s = seed;
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 3) % q };
            let a: Vec<u64> = (0..n).map(|_| next()).collect();
            let b: Vec<u64> = (0..n).map(|_| next()).collect();
            let mut fa = a.clone();
            plan.forward(&mut fa);
            let mut back = fa.clone();
            plan.inverse(&mut back);
            prop_assert_eq!(&back, &a);
            let mut fb = b.clone();
            plan.forward(&mut fb);
            let mut prod = vec![0u64; n];
            plan.mul_accumulate(&mut prod, &fa, &fb);
            plan.inverse(&mut prod);
            prop_assert_eq!(prod, schoolbook(&a, &b, plan.modulus()));
        }
    }

    #[test]
    fn output_order_is_bit_reversed_odd_powers() {
        for logn in [4u32, 10, 13] {
            let n = 1usize << logn;
            let q = generate_primes(&[50], 2 * n as u64, &[]).unwrap()[0];
            let plan = NttPlan::new(n, q).unwrap();
            let m = plan.modulus();
            let mut x = vec![0u64; n];
            x[1] = 1;
            plan.forward(&mut x);
            let psi = x[0]; // index 0 ↔ exponent 1
            assert_eq!(
                m.pow(psi, n as u64),
                q - 1,
                "ψ must be a primitive 2N-th root"
            );
            for j in 0..n {
                let e = 2 * bit_reverse(j, logn) as u64 + 1;
                assert_eq!(x[j], m.pow(psi, e), "logN={logn} j={j}");
            }
        }
    }

    #[test]
    fn fma_and_reference_transforms_agree_bit_for_bit() {
        for (logn, bits) in [(4u32, 30u32), (5, 40), (10, 45), (13, 49), (14, 40)] {
            let n = 1usize << logn;
            let q = generate_primes(&[bits], 2 * n as u64, &[]).unwrap()[0];
            let plan = NttPlan::new(n, q).unwrap();
            let a: Vec<u64> = (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9E3779B97F4A7C15) >> 7) % q)
                .collect();
            let (mut x, mut y) = (a.clone(), a.clone());
            plan.forward(&mut x);
            plan.forward_reference(&mut y);
            assert_eq!(x, y, "forward logN={logn} q={q} (fma: {})", plan.uses_fma());
            plan.inverse(&mut x);
            plan.inverse_reference(&mut y);
            assert_eq!(x, a);
            assert_eq!(y, a);
        }
    }

    #[test]
    fn refuses_bad_moduli() {
        assert!(NttPlan::new(64, 97).is_err()); // 97 ≢ 1 mod 128
        assert!(NttPlan::new(63, 127).is_err());
    }
}

//! The negacyclic number-theoretic transform over `Z_q[X]/(X^N + 1)`.
//!
//! For a primitive `2N`-th root of unity `ψ mod q`, the forward transform maps
//! `a(X) = Σ a_i X^i` to its evaluations at the odd powers of `ψ`; a product of polynomials
//! becomes a point-wise product. Three implementations: the `tfhe-ntt` crate's 64-bit
//! transform (AVX-512 with IFMA where the CPU has it, AVX-512, AVX2 or scalar, chosen at run
//! time), its 32-bit transform for primes below 2^32 (eight lanes per AVX2 register, Shoup
//! products), and, for primes below 2^50 on AVX-512 or AVX2 + FMA machines, our
//! double-precision FMA transform (`ntt_fma`, `ntt_fma_avx2`).
//! Which one is faster depends on the CPU (measured: the FMA transform wins by 8–20% on an
//! Intel Xeon without IFMA; `tfhe-ntt`'s IFMA path wins by 1.5–1.8× on an AMD EPYC with
//! IFMA; on an AMD EPYC Zen 1 (AVX2, no AVX-512) the 32-bit transform takes 0.74–0.84× the
//! time of the FMA one with lazy reduction at a 30-bit prime (criterion, N = 2^13 and 2^14,
//! 2026-11-30), its narrowing to 32-bit words and widening back included, and about 2.4× at
//! 32 bits, where tfhe-ntt has no Shoup products), so the first plan of each ring degree and
//! prime size in a process times them on a random polynomial and every plan of that shape uses
//! the winner ([`NttPlan::kernel`]).
//! All use the same `ψ` and order and agree bit for bit (tested on every machine), so objects
//! in NTT form do not depend on the machine or the kernel that made them.
//!
//! **Ordering.** Output index `j` holds `a(ψ^{2·brev(j)+1})`, where `brev` reverses the
//! `log2 N` bits of `j` (checked by a test). The Galois permutations in
//! [`crate::automorphism`] rely on this.

use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use crate::primes::is_prime;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The transform a plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NttKernel {
    /// Our double-precision FMA transform (AVX-512, else AVX2 + FMA; primes below 2^50).
    Fma,
    /// The `tfhe-ntt` crate (its own run-time choice of IFMA / AVX-512 / AVX2 / scalar).
    TfheNtt,
    /// The `tfhe-ntt` crate's 32-bit transform (primes below 2^32): each limb narrowed to
    /// 32-bit words in place, transformed, and widened back.
    TfheNtt32,
}

/// A negacyclic NTT plan for one prime `q ≡ 1 (mod 2N)`.
pub struct NttPlan {
    plan: tfhe_ntt::prime64::Plan,
    /// The 32-bit transform, for a prime below 2^32 whose `ψ` it shares with `plan`.
    plan32: Option<tfhe_ntt::prime32::Plan>,
    #[cfg(target_arch = "x86_64")]
    fma: Option<crate::ntt_fma::FmaNtt>,
    kernel: NttKernel,
    modulus: Modulus,
    n: usize,
}

/// The kernel chosen per (ring degree, prime bits) in this process.
fn choices() -> &'static Mutex<HashMap<(usize, u32), NttKernel>> {
    static CHOICES: OnceLock<Mutex<HashMap<(usize, u32), NttKernel>>> = OnceLock::new();
    CHOICES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Seconds of the fastest of `reps` calls of `f`.
fn fastest<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
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
        // the same ψ as tfhe-ntt's 64-bit plan: the evaluation of X at output index 0
        let psi = {
            let mut x = vec![0u64; n];
            x[1] = 1;
            plan.fwd(&mut x);
            x[0]
        };
        let plan32 = u32::try_from(q)
            .ok()
            .and_then(|q32| tfhe_ntt::prime32::Plan::try_new(n, q32))
            .filter(|p| {
                let mut x = vec![0u32; n];
                x[1] = 1;
                p.fwd(&mut x);
                u64::from(x[0]) == psi
            });
        #[cfg(target_arch = "x86_64")]
        let fma = (q < (1u64 << 50)
            && (crate::ntt_fma::available() || crate::ntt_fma_avx2::available()))
        .then(|| crate::ntt_fma::FmaNtt::new(n, q, psi));
        let mut me = Self {
            plan,
            plan32,
            #[cfg(target_arch = "x86_64")]
            fma,
            kernel: NttKernel::TfheNtt,
            modulus: Modulus::new(q),
            n,
        };
        me.kernel = me.choose();
        Ok(me)
    }

    /// The fastest kernel for this plan's shape, measured once per process and shape
    /// (forward + inverse on a random polynomial, best of 5 each; ~1 ms at N = 2^14).
    fn choose(&self) -> NttKernel {
        #[cfg(target_arch = "x86_64")]
        let fma = self.fma.is_some();
        #[cfg(not(target_arch = "x86_64"))]
        let fma = false;
        if !fma && self.plan32.is_none() {
            return NttKernel::TfheNtt;
        }
        let key = (self.n, 64 - self.modulus.q.leading_zeros());
        let mut table = choices().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&k) = table.get(&key) {
            return k;
        }
        let q = self.modulus.q;
        let mut a: Vec<u64> = (0..self.n as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % q)
            .collect();
        let mut best = (
            fastest(5, || {
                self.plan.fwd(&mut a);
                self.plan.inv(&mut a);
                self.plan.normalize(&mut a);
            }),
            NttKernel::TfheNtt,
        );
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.fma {
            let t = fastest(5, || {
                f.forward(&mut a);
                f.inverse(&mut a);
            });
            if t <= best.0 {
                best = (t, NttKernel::Fma);
            }
        }
        if self.plan32.is_some() {
            let t = fastest(5, || {
                self.forward_u32(&mut a);
                self.inverse_u32(&mut a);
            });
            if t < best.0 {
                best = (t, NttKernel::TfheNtt32);
            }
        }
        table.insert(key, best.1);
        best.1
    }

    /// The kernel this plan runs (chosen by measurement; see the module documentation).
    pub fn kernel(&self) -> NttKernel {
        self.kernel
    }

    /// Whether this plan runs the double-precision FMA kernels (see `ntt_fma`).
    pub fn uses_fma(&self) -> bool {
        self.kernel == NttKernel::Fma
    }

    /// Forward transform through the FMA kernel, if this machine and prime have it (for
    /// tests and benchmarks: both kernels are checked on every machine that has both).
    pub fn forward_fma(&self, a: &mut [u64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.fma {
            f.forward(a);
            return true;
        }
        let _ = a;
        false
    }

    /// Inverse transform through the FMA kernel, if this machine and prime have it.
    pub fn inverse_fma(&self, a: &mut [u64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.fma {
            f.inverse(a);
            return true;
        }
        let _ = a;
        false
    }

    /// Forward transform through `tfhe-ntt`'s 32-bit transform, if the prime is below 2^32
    /// (for tests and benchmarks, as [`NttPlan::forward_fma`]).
    pub fn forward_u32(&self, a: &mut [u64]) -> bool {
        match &self.plan32 {
            Some(p) => {
                in_u32_words(a, |w| p.fwd(w));
                true
            }
            None => false,
        }
    }

    /// Inverse transform through `tfhe-ntt`'s 32-bit transform, if the prime is below 2^32.
    pub fn inverse_u32(&self, a: &mut [u64]) -> bool {
        match &self.plan32 {
            Some(p) => {
                in_u32_words(a, |w| {
                    p.inv(w);
                    p.normalize(w);
                });
                true
            }
            None => false,
        }
    }

    /// Forward transform of residues kept in 32-bit words (a compact limb; the prime is below
    /// 2^32), in place: through the 32-bit transform when it is this plan's kernel, else
    /// widened into a new buffer, transformed by the chosen kernel and narrowed back. The
    /// same bits as [`NttPlan::forward`].
    pub fn forward_words32(&self, a: &mut [u32]) {
        assert!(
            self.modulus.q >> 32 == 0,
            "{} is not below 2^32",
            self.modulus.q
        );
        if let (NttKernel::TfheNtt32, Some(p)) = (self.kernel, &self.plan32) {
            return p.fwd(a);
        }
        let mut wide: Vec<u64> = a.iter().map(|&w| u64::from(w)).collect();
        self.forward(&mut wide);
        for (o, w) in a.iter_mut().zip(wide) {
            // a residue below q < 2^32
            *o = w as u32;
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
        if self.kernel == NttKernel::Fma {
            if let Some(f) = &self.fma {
                return f.forward(a);
            }
        }
        if self.kernel == NttKernel::TfheNtt32 && self.forward_u32(a) {
            return;
        }
        self.plan.fwd(a);
    }

    /// Inverse transform in place, normalized by `N^{-1}`: evaluations → coefficients in `[0, q)`.
    #[inline]
    pub fn inverse(&self, a: &mut [u64]) {
        #[cfg(target_arch = "x86_64")]
        if self.kernel == NttKernel::Fma {
            if let Some(f) = &self.fma {
                return f.inverse(a);
            }
        }
        if self.kernel == NttKernel::TfheNtt32 && self.inverse_u32(a) {
            return;
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

/// Runs `f` on `a`'s values (each below 2^32) as 32-bit words, in place: the values are
/// packed into the first half of `a`'s bytes, `f` transforms them, and they are widened back
/// (zero high halves). Packing runs upward and widening downward, so neither overwrites a
/// word it has yet to read: word `i` goes to 32-bit index `i` from index `2i` (or `2i + 1`
/// on a big-endian machine) and back.
fn in_u32_words(a: &mut [u64], f: impl FnOnce(&mut [u32])) {
    let n = a.len();
    let lo = usize::from(cfg!(target_endian = "big"));
    let w: &mut [u32] = bytemuck::cast_slice_mut(a);
    for i in 0..n {
        w[i] = w[2 * i + lo];
    }
    f(&mut w[..n]);
    for i in (0..n).rev() {
        let v = w[i];
        w[2 * i + lo] = v;
        w[2 * i + 1 - lo] = 0;
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
            for (j, &xj) in x.iter().enumerate().take(n) {
                let e = 2 * bit_reverse(j, logn) as u64 + 1;
                assert_eq!(xj, m.pow(psi, e), "logN={logn} j={j}");
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
            let (mut x, mut y, mut z) = (a.clone(), a.clone(), a.clone());
            plan.forward(&mut x);
            plan.forward_reference(&mut y);
            assert_eq!(x, y, "forward logN={logn} q={q} ({:?})", plan.kernel());
            if plan.forward_fma(&mut z) {
                assert_eq!(z, y, "FMA forward logN={logn} q={q}");
                assert!(plan.inverse_fma(&mut z));
                assert_eq!(z, a);
            }
            plan.inverse(&mut x);
            plan.inverse_reference(&mut y);
            assert_eq!(x, a);
            assert_eq!(y, a);
        }
    }

    #[test]
    fn the_32_bit_transform_agrees_bit_for_bit_below_2_to_the_32() {
        let cases = [
            (5u32, 17u32),
            (10, 20),
            (12, 28),
            (13, 30),
            (13, 31),
            (14, 29),
            (12, 32),
        ];
        for (logn, bits) in cases {
            let n = 1usize << logn;
            for q in generate_primes(&[bits, bits], 2 * n as u64, &[]).unwrap() {
                let plan = NttPlan::new(n, q).unwrap();
                let mut a: Vec<u64> = (0..n as u64)
                    .map(|i| (i.wrapping_mul(0x9E3779B97F4A7C15) >> 7) % q)
                    .collect();
                (a[0], a[1]) = (q - 1, 0);
                let (mut x, mut y) = (a.clone(), a.clone());
                plan.forward_reference(&mut y);
                assert!(
                    plan.forward_u32(&mut x),
                    "logN={logn} q={q}: no 32-bit plan"
                );
                assert_eq!(x, y, "forward logN={logn} q={q}");
                assert!(plan.inverse_u32(&mut x));
                assert_eq!(x, a, "inverse logN={logn} q={q}");
                let mut z = a.clone();
                plan.forward(&mut z);
                assert_eq!(z, y, "chosen kernel {:?}, logN={logn} q={q}", plan.kernel());
                let mut w: Vec<u32> = a.iter().map(|&v| v as u32).collect();
                plan.forward_words32(&mut w);
                assert!(
                    w.iter().zip(&y).all(|(&u, &v)| u64::from(u) == v),
                    "words32 logN={logn} q={q}"
                );
                plan.inverse(&mut z);
                assert_eq!(z, a, "chosen kernel {:?}, logN={logn} q={q}", plan.kernel());
            }
        }
        // none above 2^32, nor below tfhe-ntt's smallest 32-bit ring (N = 32)
        let q = generate_primes(&[33], 64, &[]).unwrap()[0];
        assert!(!NttPlan::new(32, q).unwrap().forward_u32(&mut [0; 32]));
        let q = generate_primes(&[20], 32, &[]).unwrap()[0];
        assert!(!NttPlan::new(16, q).unwrap().forward_u32(&mut [0; 16]));
    }

    #[test]
    fn u32_words_in_place_keep_every_value() {
        let mut a: Vec<u64> = (0..64u64)
            .map(|i| (i * 0x0123_4567) & 0xFFFF_FFFF)
            .collect();
        let want: Vec<u64> = a.iter().map(|v| v ^ 0x5555_5555).collect();
        in_u32_words(&mut a, |w| w.iter_mut().for_each(|v| *v ^= 0x5555_5555));
        assert_eq!(a, want);
    }

    #[test]
    fn refuses_bad_moduli() {
        assert!(NttPlan::new(64, 97).is_err()); // 97 ≢ 1 mod 128
        assert!(NttPlan::new(63, 127).is_err());
    }
}

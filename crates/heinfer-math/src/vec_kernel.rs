//! Which family of element-wise kernels ([`crate::vecops`], [`crate::dot`]) this process runs.
//!
//! All families produce fully reduced outputs in `[0, q)`, hence the same bits; they differ
//! only in speed, which depends on the CPU. The choice is made once per process: the fastest
//! family the CPU supports by its features, except that when IFMA is available it is timed
//! against plain AVX-512 on a 40-bit modulus (multiply-accumulate and Shoup
//! multiply-accumulate over 2^12 coefficients, best of 5 each; ~0.1 ms) and the faster one is
//! kept, as [`crate::ntt`] does for transforms. Primes of 50 bits or more never run the IFMA
//! kernels (their bounds need `4q < 2^52`) and use plain AVX-512 instead. On a CPU with AVX2
//! and FMA but no AVX-512 the AVX2 family runs (products 2.2–2.6×, the key-switching inner
//! product 3.6–4.5× the portable loops on an AMD EPYC of the Zen 1 kind, family 23 model 1:
//! `cargo bench -p heinfer-math --bench ntt -- vecops`), and primes of 50 bits or more use the
//! portable loops.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// A family of element-wise kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VecKernel {
    /// Portable Rust (auto-vectorized where the compiler can).
    Portable,
    /// AVX2 + FMA: exact products in double precision, for primes `q < 2^50` (see
    /// `vecops_avx2` for the bounds).
    Avx2,
    /// AVX-512F/DQ: 64×64-bit products from four 32-bit multiplies.
    Avx512,
    /// AVX-512 IFMA: 52-bit multiply-add instructions, for primes `q < 2^50`
    /// (see `vecops_ifma` for the bounds).
    Ifma,
}

impl VecKernel {
    fn code(self) -> u8 {
        match self {
            VecKernel::Portable => 1,
            VecKernel::Avx512 => 2,
            VecKernel::Ifma => 3,
            VecKernel::Avx2 => 4,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(VecKernel::Portable),
            2 => Some(VecKernel::Avx512),
            3 => Some(VecKernel::Ifma),
            4 => Some(VecKernel::Avx2),
            _ => None,
        }
    }
}

/// 0 until chosen; then a [`VecKernel::code`].
static CHOICE: AtomicU8 = AtomicU8::new(0);

fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::vecops_avx2::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn has_ifma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx512() && crate::vecops_ifma::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The families this CPU can run, slowest first.
pub fn available_kernels() -> Vec<VecKernel> {
    let mut v = vec![VecKernel::Portable];
    if has_avx2() {
        v.push(VecKernel::Avx2);
    }
    if has_avx512() {
        v.push(VecKernel::Avx512);
    }
    if has_ifma() {
        v.push(VecKernel::Ifma);
    }
    v
}

/// The family this process runs (chosen on first use; see the module documentation).
pub fn kernel() -> VecKernel {
    if let Some(k) = VecKernel::from_code(CHOICE.load(Ordering::Relaxed)) {
        return k;
    }
    let k = choose();
    // a concurrent first call may have chosen too; either choice is valid
    let _ = CHOICE.compare_exchange(0, k.code(), Ordering::Relaxed, Ordering::Relaxed);
    VecKernel::from_code(CHOICE.load(Ordering::Relaxed)).unwrap_or(k)
}

/// Forces the family for the rest of the process (benchmarks compare families in one run).
/// Returns `false`, changing nothing, if this CPU cannot run `k`. Results do not change.
pub fn set_kernel(k: VecKernel) -> bool {
    if !available_kernels().contains(&k) {
        return false;
    }
    CHOICE.store(k.code(), Ordering::Relaxed);
    true
}

/// The family to run for modulus `q`: the process choice, with IFMA replaced by plain
/// AVX-512 and AVX2 by the portable loops when `q ≥ 2^50`.
#[inline]
pub(crate) fn kernel_for(q: u64) -> VecKernel {
    match kernel() {
        #[cfg(target_arch = "x86_64")]
        VecKernel::Ifma if q >> crate::vecops_ifma::MAX_BITS != 0 => VecKernel::Avx512,
        #[cfg(target_arch = "x86_64")]
        VecKernel::Avx2 if q >> crate::vecops_avx2::MAX_BITS != 0 => VecKernel::Portable,
        k => k,
    }
}

/// Seconds of the fastest of 5 calls of `f` (after one warm-up call).
fn fastest<F: FnMut()>(mut f: F) -> f64 {
    f();
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn choose() -> VecKernel {
    if !has_avx512() {
        return if has_avx2() {
            VecKernel::Avx2
        } else {
            VecKernel::Portable
        };
    }
    if !has_ifma() {
        return VecKernel::Avx512;
    }
    use crate::vecops::{self, BarrettConst};
    let q = (1u64 << 40) - 87; // odd; the kernels do not need a prime
    let n = 1 << 12;
    let bc = BarrettConst::new(q);
    let m = crate::Modulus::new(q);
    let a: Vec<u64> = (0..n as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % q)
        .collect();
    let b: Vec<u64> = a.iter().map(|&x| x.wrapping_mul(7919) % q).collect();
    let w = 0x1234_5678 % q;
    let ws = m.shoup(w);
    let mut acc = vec![0u64; n];
    let mut time = |k: VecKernel| {
        fastest(|| {
            vecops::mul_add_assign_with(k, &mut acc, &a, &b, &bc);
            vecops::mul_scalar_add_assign_with(k, &mut acc, &a, w, ws, &m);
        })
    };
    let t_avx = time(VecKernel::Avx512);
    let t_ifma = time(VecKernel::Ifma);
    if t_ifma <= t_avx {
        VecKernel::Ifma
    } else {
        VecKernel::Avx512
    }
}

#[cfg(test)]
mod tests {
    //! Every kernel family this CPU runs against the portable `Modulus` arithmetic, on random
    //! inputs mixed with the edge values 0, 1 and q − 1 (all-(q − 1) inputs give the largest
    //! lazy sums). On a CPU without IFMA the IFMA family is simply not in the list.
    use super::*;
    use crate::dot::{dot1_narrow_with, dot1_with, dot2_narrow_with, dot2_with};
    use crate::primes::generate_primes;
    use crate::vecops::*;
    use crate::Modulus;
    use proptest::prelude::*;
    use std::mem::MaybeUninit;

    /// Random residues `< q` where `edge` picks 0, 1 or q − 1 one time in four.
    fn residues(q: u64, len: usize, seed: u64, all_max: bool) -> Vec<u64> {
        let mut s = seed | 1;
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if all_max {
                    return q - 1;
                }
                match (s >> 60) % 8 {
                    0 => 0,
                    1 => q - 1,
                    2 => 1,
                    _ => (s >> 3) % q,
                }
            })
            .collect()
    }

    fn uninit(len: usize, f: impl FnOnce(&mut [MaybeUninit<u64>])) -> Vec<u64> {
        let mut v: Vec<u64> = Vec::with_capacity(len);
        f(&mut v.spare_capacity_mut()[..len]);
        // SAFETY: the kernels under test write every element (their contract).
        unsafe { v.set_len(len) };
        v
    }

    fn check_elementwise(q: u64, len: usize, seed: u64, all_max: bool) {
        let m = Modulus::new(q);
        let bc = BarrettConst::new(q);
        let a = residues(q, len, seed, all_max);
        let b = residues(q, len, seed ^ 0xABCD, all_max);
        let acc0 = residues(q, len, seed ^ 0x1234, all_max);
        let w = if all_max {
            q - 1
        } else {
            residues(q, 1, seed ^ 77, false)[0]
        };
        let ws = m.shoup(w);
        // Shoup kernels accept any u64 multiplicand (ModDown feeds residues of larger primes)
        let wide: Vec<u64> = a
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                if i % 11 == 3 {
                    x | (1 << 52) | (i as u64) << 55
                } else {
                    x
                }
            })
            .collect();
        let e_mul: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| m.mul(x, y)).collect();
        let e_mac: Vec<u64> = acc0
            .iter()
            .zip(&e_mul)
            .map(|(&x, &y)| m.add(x, y))
            .collect();
        let e_sh: Vec<u64> = wide.iter().map(|&x| m.mul(x % q, w)).collect();
        let e_shac: Vec<u64> = acc0.iter().zip(&e_sh).map(|(&x, &y)| m.add(x, y)).collect();
        for k in available_kernels() {
            let ctx = format!("{k:?} q={q} len={len} seed={seed} all_max={all_max}");
            let mut t = a.clone();
            mul_assign_with(k, &mut t, &b, &bc);
            assert_eq!(t, e_mul, "mul_assign {ctx}");
            let mut t = vec![0; len];
            mul_into_with(k, &mut t, &a, &b, &bc);
            assert_eq!(t, e_mul, "mul_into {ctx}");
            let t = uninit(len, |o| mul_to_uninit_with(k, o, &a, &b, &bc));
            assert_eq!(t, e_mul, "mul_to_uninit {ctx}");
            let mut t = acc0.clone();
            mul_add_assign_with(k, &mut t, &a, &b, &bc);
            assert_eq!(t, e_mac, "mul_add_assign {ctx}");
            let t = uninit(len, |o| mul_add_to_uninit_with(k, o, &acc0, &a, &b, &bc));
            assert_eq!(t, e_mac, "mul_add_to_uninit {ctx}");
            let mut t = wide.clone();
            mul_scalar_assign_with(k, &mut t, w, ws, &m);
            assert_eq!(t, e_sh, "mul_scalar_assign {ctx}");
            let t = uninit(len, |o| mul_scalar_to_uninit_with(k, o, &wide, w, ws, &m));
            assert_eq!(t, e_sh, "mul_scalar_to_uninit {ctx}");
            let mut t = acc0.clone();
            mul_scalar_add_assign_with(k, &mut t, &wide, w, ws, &m);
            assert_eq!(t, e_shac, "mul_scalar_add_assign {ctx}");
            let mut t = a.clone();
            sub_mul_scalar_assign_with(k, &mut t, &b, w, ws, &m);
            let e: Vec<u64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| m.mul(m.sub(x, y), w))
                .collect();
            assert_eq!(t, e, "sub_mul_scalar_assign {ctx}");
            let terms: Vec<&[u64]> = vec![&wide, &b, &acc0, &a];
            let ws4 = [
                (w, ws),
                (1 % q, m.shoup(1 % q)),
                (q - 1, m.shoup(q - 1)),
                (0, 0),
            ];
            for nt in 1..=4 {
                let mut t = vec![0; len];
                mul_scalar_sum_into_with(k, &mut t, &terms[..nt], &ws4[..nt], &m);
                let e: Vec<u64> = (0..len)
                    .map(|i| (0..nt).fold(0, |s, j| m.add(s, m.mul(terms[j][i] % q, ws4[j].0))))
                    .collect();
                assert_eq!(t, e, "mul_scalar_sum_into terms={nt} {ctx}");
            }
        }
    }

    fn check_dots(q: u64, n: usize, terms: usize, seed: u64, all_max: bool) {
        let m = Modulus::new(q);
        let bc = BarrettConst::new(q);
        let mk = |s: u64| -> Vec<Vec<u64>> {
            (0..terms)
                .map(|t| residues(q, n, s.wrapping_add(t as u64 * 7919), all_max))
                .collect()
        };
        let (dv, bv, av) = (mk(seed), mk(seed ^ 0x55), mk(seed ^ 0xAA));
        fn refs(v: &[Vec<u64>]) -> Vec<&[u64]> {
            v.iter().map(|x| x.as_slice()).collect()
        }
        let (dr, br, ar) = (refs(&dv), refs(&bv), refs(&av));
        let sum = |x: &Vec<Vec<u64>>, c: usize| {
            (0..terms).fold(0, |s, j| m.add(s, m.mul(dv[j][c], x[j][c])))
        };
        let e0: Vec<u64> = (0..n).map(|c| sum(&bv, c)).collect();
        let e1: Vec<u64> = (0..n).map(|c| sum(&av, c)).collect();
        for k in available_kernels() {
            let ctx = format!("{k:?} q={q} n={n} terms={terms} all_max={all_max}");
            let (mut x0, mut x1) = (vec![7u64; n], vec![7u64; n]);
            dot2_with(k, &mut x0, &mut x1, &dr, &br, &ar, &bc, false);
            assert_eq!((&x0, &x1), (&e0, &e1), "dot2 {ctx}");
            let mut y = vec![7u64; n];
            dot1_with(k, &mut y, &dr, &br, &bc, false);
            assert_eq!(y, e0, "dot1 {ctx}");
            // the same sums in two calls, the second onto the first's (`onto`)
            for split in [1, terms / 2, terms - 1] {
                if split == 0 || split >= terms {
                    continue;
                }
                let (h, t) = (..split, split..);
                let (mut z0, mut z1) = (vec![7u64; n], vec![7u64; n]);
                dot2_with(k, &mut z0, &mut z1, &dr[h], &br[h], &ar[h], &bc, false);
                dot2_with(
                    k,
                    &mut z0,
                    &mut z1,
                    &dr[t.clone()],
                    &br[t.clone()],
                    &ar[t.clone()],
                    &bc,
                    true,
                );
                assert_eq!((&z0, &z1), (&e0, &e1), "dot2 onto, split {split}, {ctx}");
                let mut y = vec![7u64; n];
                dot1_with(k, &mut y, &dr[h], &br[h], &bc, false);
                dot1_with(k, &mut y, &dr[t.clone()], &br[t], &bc, true);
                assert_eq!(y, e0, "dot1 onto, split {split}, {ctx}");
            }
            // the plaintext operand in 32-bit words (a prime below 2^32)
            if q >> 32 == 0 {
                let dn: Vec<Vec<u32>> = dv
                    .iter()
                    .map(|v| v.iter().map(|&x| x as u32).collect())
                    .collect();
                let dn: Vec<&[u32]> = dn.iter().map(|v| v.as_slice()).collect();
                let (mut z0, mut z1) = (vec![7u64; n], vec![7u64; n]);
                dot2_narrow_with(k, &mut z0, &mut z1, &dn, &br, &ar, &bc);
                assert_eq!((&z0, &z1), (&e0, &e1), "dot2 narrow {ctx}");
                let mut y = vec![7u64; n];
                dot1_narrow_with(k, &mut y, &br, &dn, &bc);
                let f0: Vec<u64> = (0..n)
                    .map(|c| (0..terms).fold(0, |s, j| m.add(s, m.mul(bv[j][c], dv[j][c]))))
                    .collect();
                assert_eq!(y, f0, "dot1 narrow {ctx}");
            }
        }
    }

    fn prime(bits: u32) -> u64 {
        generate_primes(&[bits], 64, &[]).unwrap()[0]
    }

    #[test]
    fn every_family_matches_portable_at_edges() {
        for bits in [17u32, 20, 21, 28, 30, 31, 32, 40, 45, 49, 50, 55, 61] {
            let q = prime(bits);
            for len in [0usize, 1, 7, 8, 9, 64, 67] {
                check_elementwise(q, len, bits as u64 * 31 + len as u64, false);
                check_elementwise(q, len, 3, true);
            }
            for terms in [1usize, 2, 4, 14, 15, 16, 30, 31, 40] {
                check_dots(q, 64, terms, bits as u64 + terms as u64, false);
                check_dots(q, 64, terms, 9, true);
            }
            check_dots(q, 12, 3, 5, false); // not a multiple of 8: the portable body
        }
        // the largest IFMA modulus, the narrow sums' largest and smallest primes (AVX2), the
        // primes just outside them, and the smallest odd moduli
        for q in [
            (1u64 << 50) - 27,
            (1u64 << 49) + 1,
            (1u64 << 30) - 35,
            (1u64 << 20) + 7,
            (1u64 << 31) - 1,
            (1u64 << 20) - 3,
            3,
            5,
        ] {
            check_elementwise(q, 40, q, false);
            check_elementwise(q, 40, q, true);
            check_dots(q, 16, 16, q, true);
        }
    }

    #[test]
    fn chosen_family_is_available() {
        assert!(available_kernels().contains(&kernel()));
        assert!(available_kernels().contains(&kernel_for(1 << 40)));
        assert!(available_kernels().contains(&kernel_for((1 << 60) + 1)));
        if has_avx2() {
            assert!(available_kernels().contains(&VecKernel::Avx2));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn every_family_matches_portable(q in 3u64..(1u64 << 61), seed in any::<u64>(), len in 0usize..80, terms in 1usize..20) {
            let q = q | 1;
            check_elementwise(q, len, seed, false);
            check_dots(q, 8 * (len / 8), terms, seed, false);
        }
    }
}

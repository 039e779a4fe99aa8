//! Residue-number-system basis conversion ("fast base conversion", Bajard et al.; HPS 2019).
//!
//! For `x` given by its residues `x_i` modulo the primes of `Q = Π q_i`, the approximate
//! conversion to another basis `{p_j}` is
//!
//! ```text
//!   Conv_{Q→P}(x)_j = Σ_i [x_i · (Q/q_i)^{-1}]_{q_i} · (Q/q_i) mod p_j  =  x + u·Q  (mod p_j),
//! ```
//!
//! with a small integer `0 ≤ u < |Q|` (number of primes). Key switching tolerates the `u·Q`
//! term: in ModUp it is multiplied by a key whose gadget vanishes mod `Q`, in ModDown it adds
//! at most `|P|` to the rounding error.
//!
//! The *balanced* conversion ([`BasisConverter::convert_balanced_with_gap`], ModUp) takes each
//! `y_i = [x_i·(Q/q_i)^{-1}]_{q_i}` in `(−q_i/2, q_i/2]` instead of `[0, q_i)`: the result is
//! `x + u·Q` with `x` and `u` both centred (`|u| ≤ |Q|/2`). With `[0, q_i)`, every digit of a key
//! switch has mean `≈ Q/2` in each coefficient, and its product with the key's error `e`
//! carries the term `(Q/2)·(1 + X + … + X^{N−1})·e`: a random walk over `e`'s coefficients,
//! whose size varies from key to key (measured, `N = 2^12`, one 39-bit prime per digit and a
//! 39-bit `P`: a rotation's error 66–185 per coefficient over ten Galois keys) and which the
//! balanced digits remove. Balancing costs one more term in every converted limb's sum; a
//! converter built with [`BasisConverter::balancing`]`(false)` skips it (the engine does so
//! for digits far below the special primes, whose term is negligible either way).

use crate::modulus::Modulus;
use crate::vecops;

/// A constant and its Shoup precomputation `⌊w·2^64/q⌋`.
type ShoupPair = (u64, u64);

/// Precomputed constants to convert residues from one basis to another.
#[derive(Debug, Clone)]
pub struct BasisConverter {
    from: Vec<Modulus>,
    to: Vec<Modulus>,
    /// `1/q_i` in double precision (exact centered conversion).
    inv_from: Vec<f64>,
    /// `[(Q/q_i)^{-1}]_{q_i}` and its Shoup companion.
    qhat_inv: Vec<(u64, u64)>,
    /// `[Q/q_i]_{p_j}` and its Shoup companion, indexed `[j][i]`.
    qhat_mod_p: Vec<Vec<(u64, u64)>>,
    /// `qhat_mod_p[j]` followed by `[−Q]_{p_j}` (the last term of the balanced and the
    /// centred conversions).
    balanced_weights: Vec<Vec<(u64, u64)>>,
    /// Whether the balanced conversion balances (see [`BasisConverter::balancing`]).
    balanced: bool,
    /// `1/p_j` in double precision: from one source prime, whose weights are 1 and
    /// `[−q]_{p_j}`, a target limb is a reduction and a selected addition
    /// ([`vecops::reduce_add_select_into`]) instead of a sum of products.
    inv_to: Vec<f64>,
}

impl BasisConverter {
    /// Constants for converting from basis `from` to basis `to` (disjoint sets of primes).
    pub fn new(from: &[Modulus], to: &[Modulus]) -> Self {
        let qhat_inv = from
            .iter()
            .enumerate()
            .map(|(i, mi)| {
                let mut prod = 1u64;
                for (k, mk) in from.iter().enumerate() {
                    if k != i {
                        prod = mi.mul(prod, mk.q % mi.q);
                    }
                }
                let inv = mi.inv(prod);
                (inv, mi.shoup(inv))
            })
            .collect();
        let qhat_mod_p = to
            .iter()
            .map(|pj| {
                (0..from.len())
                    .map(|i| {
                        let mut prod = 1u64;
                        for (k, mk) in from.iter().enumerate() {
                            if k != i {
                                prod = pj.mul(prod, mk.q % pj.q);
                            }
                        }
                        (prod, pj.shoup(prod))
                    })
                    .collect()
            })
            .collect();
        let inv_from = from.iter().map(|m| 1.0 / m.q as f64).collect();
        let q_mod_p: Vec<(u64, u64)> = to
            .iter()
            .map(|pj| {
                let v = from.iter().fold(1u64, |acc, m| pj.mul(acc, m.q % pj.q));
                (v, pj.shoup(v))
            })
            .collect();
        let balanced_weights = to
            .iter()
            .zip(&q_mod_p)
            .zip(&qhat_mod_p)
            .map(
                |((pj, &(qm, _)), w): ((&Modulus, &ShoupPair), &Vec<ShoupPair>)| {
                    let neg = if qm == 0 { 0 } else { pj.q - qm };
                    let mut w = w.clone();
                    w.push((neg, pj.shoup(neg)));
                    w
                },
            )
            .collect();
        Self {
            from: from.to_vec(),
            to: to.to_vec(),
            inv_from,
            qhat_inv,
            qhat_mod_p,
            balanced_weights,
            balanced: true,
            inv_to: to.iter().map(|m| 1.0 / m.q as f64).collect(),
        }
    }

    /// With `false`, the balanced conversion methods convert residues in `[0, q_i)` as
    /// [`Self::convert`] does (and [`Self::balance`] is not needed): for a ModUp digit far
    /// below the special primes, whose term in a key switch's error is negligible either way,
    /// one term less in every converted limb's sum.
    pub fn balancing(mut self, on: bool) -> Self {
        self.balanced = on;
        self
    }

    /// Whether the balanced conversion balances ([`Self::balancing`]).
    pub fn balances(&self) -> bool {
        self.balanced
    }

    /// Source basis.
    pub fn from(&self) -> &[Modulus] {
        &self.from
    }

    /// Target basis.
    pub fn to(&self) -> &[Modulus] {
        &self.to
    }

    /// Converts `input` (`from.len()` limbs of `n` coefficients, concatenated, coefficient
    /// form) into `output` (`to.len()` limbs of `n`). `scratch` must hold `from.len()·n` words.
    pub fn convert(&self, input: &[u64], output: &mut [u64], scratch: &mut [u64], n: usize) {
        let k = self.from.len();
        assert!(
            input.len() >= k * n && output.len() >= self.to.len() * n && scratch.len() >= k * n
        );
        self.scale_inputs(input, scratch, n);
        for j in 0..self.to.len() {
            self.convert_one(&scratch[..k * n], j, &mut output[j * n..(j + 1) * n], n);
        }
    }

    /// Target limb `j` of [`Self::convert`] from the scaled inputs: `out ← Σ_i y_i·[Q/q_i]_{p_j}
    /// mod p_j` (Shoup's product is exact for any 64-bit multiplicand, so `y_i ≥ p_j` is fine).
    fn convert_one(&self, scaled: &[u64], j: usize, out: &mut [u64], n: usize) {
        let terms: Vec<&[u64]> = scaled[..self.from.len() * n].chunks(n).collect();
        vecops::mul_scalar_sum_into(&mut out[..n], &terms, &self.qhat_mod_p[j], &self.to[j]);
    }

    /// `scratch ← input` with every limb scaled ([`Self::scale_input`]).
    fn scale_inputs(&self, input: &[u64], scratch: &mut [u64], n: usize) {
        for i in 0..self.from.len() {
            let t = &mut scratch[i * n..(i + 1) * n];
            t.copy_from_slice(&input[i * n..(i + 1) * n]);
            self.scale_input(i, t);
        }
    }
}

impl BasisConverter {
    /// Like [`Self::convert`], with each scaled input `y_i` taken in `(−q_i/2, q_i/2]` (the
    /// module's *balanced* conversion): the result is `x + u·Q` with centred `x` and `u`. Target
    /// limb `j` lands at limb `j` of `output` when `j < gap_at` and at limb `j + gap_len`
    /// otherwise, leaving `gap_len` limbs untouched — the ModUp output of a digit is written
    /// around the digit's own limbs without a copy. `scratch` must hold `(from.len() + 1)·n`
    /// words.
    pub fn convert_balanced_with_gap(
        &self,
        input: &[u64],
        output: &mut [u64],
        scratch: &mut [u64],
        n: usize,
        gap_at: usize,
        gap_len: usize,
    ) {
        let k = self.from.len();
        assert!(
            input.len() >= k * n
                && output.len() >= (self.to.len() + gap_len) * n
                && scratch.len() >= (k + 1) * n
        );
        self.scale_inputs(input, scratch, n);
        let (ys, c) = scratch.split_at_mut(k * n);
        if self.balanced {
            self.balance(ys, &mut c[..n], n);
        }
        let c = &c[..n];
        for j in 0..self.to.len() {
            let limb = if j < gap_at { j } else { j + gap_len };
            self.convert_one_balanced(ys, c, j, &mut output[limb * n..(limb + 1) * n], n);
        }
    }

    /// The correction of the balanced conversion: `c ← #{i : y_i > q_i/2}` per coefficient, for
    /// the scaled inputs `y_i` ([`Self::scale_input`], `from.len()` limbs of `n` in `scaled`).
    pub fn balance(&self, scaled: &[u64], c: &mut [u64], n: usize) {
        let k = self.from.len();
        assert!(scaled.len() >= k * n && c.len() >= n);
        let c = &mut c[..n];
        c.fill(0);
        for (i, m) in self.from.iter().enumerate() {
            vecops::count_above(c, &scaled[i * n..(i + 1) * n], m.q / 2);
        }
    }

    /// Target limb `j` of the balanced conversion alone: `out ← Σ_i y_i·[Q/q_i]_{p_j} −
    /// c·Q mod p_j`, for the scaled inputs `y_i` (`from.len()` limbs of `n` in `scaled`) and
    /// their correction `c` ([`Self::balance`]; not read, and may be empty, when the converter
    /// does not balance).
    /// Bit-identical to limb `j` of
    /// [`Self::convert_balanced_with_gap`]; lets key switching convert one target limb at a time.
    pub fn convert_one_balanced(
        &self,
        scaled: &[u64],
        c: &[u64],
        j: usize,
        out: &mut [u64],
        n: usize,
    ) {
        let k = self.from.len();
        assert!(scaled.len() >= k * n && out.len() >= n && j < self.to.len());
        if !self.balanced {
            return self.convert_one(scaled, j, out, n);
        }
        assert!(c.len() >= n);
        if self.one_prime_to(j) {
            return self.convert_one_prime(&scaled[..n], &c[..n], j, &mut out[..n]);
        }
        let terms: Vec<&[u64]> = scaled[..k * n]
            .chunks(n)
            .chain(std::iter::once(&c[..n]))
            .collect();
        vecops::mul_scalar_sum_into(
            &mut out[..n],
            &terms,
            &self.balanced_weights[j],
            &self.to[j],
        );
    }

    /// The first step of [`Self::convert`] for source limb `i`, in place:
    /// `x_i ← [x_i·(Q/q_i)^{-1}]_{q_i}` (nothing to do when `Q` is the one prime `q_i`, whose
    /// factor is 1: a key switch's digits of one prime each).
    pub fn scale_input(&self, i: usize, limb: &mut [u64]) {
        let (w, ws) = self.qhat_inv[i];
        if w != 1 {
            vecops::mul_scalar_assign(limb, w, ws, &self.from[i]);
        }
    }

    /// Whether target limb `j` takes [`Self::convert_one_prime`]: one source prime (weights
    /// 1 and `[−q]_{p_j}`) and a target prime the float reduction covers.
    fn one_prime_to(&self, j: usize) -> bool {
        let p = self.to[j].q;
        self.from.len() == 1 && (1 << 20..1 << 62).contains(&p)
    }

    /// `out ← [y]_{p_j} + c·[−q]_{p_j} mod p_j` (flags `c ∈ {0, 1}`): target limb `j` of the
    /// balanced and centred conversions from one prime `q`, whose scale is 1.
    fn convert_one_prime(&self, y: &[u64], c: &[u64], j: usize, out: &mut [u64]) {
        let (w, _) = self.balanced_weights[j][1];
        vecops::reduce_add_select_into(out, y, c, w, self.to[j].q, self.inv_to[j]);
    }
}

impl BasisConverter {
    /// Exact conversion of the *centered* representative `x ∈ (−Q/2, Q/2]` (HPS 2019): with
    /// `y_i = [x_i·(Q/q_i)^{-1}]_{q_i}`, `v = ⌊Σ_i y_i/q_i⌉` (double precision) is the number of
    /// `Q`s that the fast conversion adds beyond the centered value, so
    /// `Σ_i y_i·(Q/q_i) − v·Q ≡ x_centered (mod p_j)`, one Shoup sum of `k + 1` terms per
    /// target limb. Off by `±Q` only when `x` lies within `|Q|·2^{-52}·Q` of `±Q/2` (never for
    /// one prime, which needs no floating point: `v = [y > q/2]`, the balanced conversion's
    /// correction, for an odd `q`). `scratch` must hold
    /// `(from.len() + 1)·n` words; it holds the `y_i` and `v` afterwards (the caller wipes it
    /// when the input is secret-derived).
    pub fn convert_centered(
        &self,
        input: &[u64],
        output: &mut [u64],
        scratch: &mut [u64],
        n: usize,
    ) {
        let k = self.from.len();
        assert!(
            input.len() >= k * n
                && output.len() >= self.to.len() * n
                && scratch.len() >= (k + 1) * n
        );
        let (ys, v) = scratch.split_at_mut(k * n);
        let v = &mut v[..n];
        // the sum's terms: the scaled inputs y_i, then v (weight [−Q]_{p_j})
        let ys: &[u64] = if k == 1 {
            // one prime: v = ⌊y/q⌉ = [y > q/2] exactly (q is odd), and the scale is 1, so the
            // input is y itself
            self.balance(&input[..n], v, n);
            &input[..n]
        } else {
            self.scale_inputs(input, ys, n);
            // v = ⌊Σ_i y_i/q_i⌉, accumulated limb by limb (so the loops vectorize) in v's own
            // words as f64, then rounded in place
            let acc: &mut [f64] = bytemuck::cast_slice_mut(v);
            acc.fill(0.0);
            for i in 0..k {
                let inv = self.inv_from[i];
                for (a, &y) in acc.iter_mut().zip(&ys[i * n..(i + 1) * n]) {
                    *a += y as f64 * inv;
                }
            }
            const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2^52: adding it rounds
            for a in acc.iter_mut() {
                *a = f64::from_bits(((*a + MAGIC) - MAGIC) as u64);
            }
            ys
        };
        // v ≤ k: each target limb is one pass, Σ_i y_i·[Q/q_i]_{p_j} + v·[−Q]_{p_j} (the
        // balanced conversion's weights; Shoup's product is exact for any 64-bit multiplicand).
        // The scratch, secret-derived when the input is (public-key encryption divides
        // `b·u + e` by `P`), is the caller's to wipe.
        let terms: Vec<&[u64]> = ys.chunks(n).chain(std::iter::once(&*v)).collect();
        for (j, pj) in self.to.iter().enumerate() {
            let out = &mut output[j * n..(j + 1) * n];
            if self.one_prime_to(j) {
                self.convert_one_prime(terms[0], v, j, out);
            } else {
                vecops::mul_scalar_sum_into(out, &terms, &self.balanced_weights[j], pj);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primes::generate_primes;

    /// One source prime (ModDown with one special prime): the centred conversion is exact at
    /// the edges `(q ± 1)/2`, `0` and `q − 1`, to larger and smaller target primes, and the
    /// converter's scale (1) leaves its input as it is.
    #[test]
    fn centered_conversion_from_one_prime_is_exact() {
        let n = 16;
        let ps = generate_primes(&[49, 40, 50, 30], 32, &[]).unwrap();
        let from = [Modulus::new(ps[0])];
        let to: Vec<Modulus> = ps[1..].iter().map(|&q| Modulus::new(q)).collect();
        let q = ps[0];
        let mut xs = vec![
            0,
            1,
            (q - 1) / 2,
            q.div_ceil(2),
            q - 1,
            q - 2,
            q / 3,
            2 * q / 3,
        ];
        xs.extend((0..8u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 5) % q));
        let conv = BasisConverter::new(&from, &to);
        let mut scaled = xs.clone();
        conv.scale_input(0, &mut scaled);
        assert_eq!(scaled, xs, "one prime: the scale is 1");
        let mut out = vec![0u64; to.len() * n];
        let mut scratch = vec![5u64; 2 * n];
        conv.convert_centered(&xs, &mut out, &mut scratch, n);
        for (j, pj) in to.iter().enumerate() {
            for (c, &x) in xs.iter().enumerate() {
                let centred = if x > q / 2 {
                    x as i128 - q as i128
                } else {
                    x as i128
                };
                assert_eq!(
                    out[j * n + c],
                    centred.rem_euclid(pj.q as i128) as u64,
                    "x = {x}, target {j}"
                );
            }
        }
    }

    #[test]
    fn conversion_is_exact_up_to_multiples_of_q() {
        let n = 32;
        let ps = generate_primes(&[50, 51, 52, 49, 48], 64, &[]).unwrap();
        let from: Vec<Modulus> = ps[..2].iter().map(|&q| Modulus::new(q)).collect();
        let to: Vec<Modulus> = ps[2..].iter().map(|&q| Modulus::new(q)).collect();
        let big_q = from[0].q as u128 * from[1].q as u128;
        let xs: Vec<u128> = (0..n as u128)
            .map(|i| (i * 0x1234_5678_9abc_def1_2345 + 77) % big_q)
            .collect();
        let mut input = vec![0u64; 2 * n];
        for (c, &x) in xs.iter().enumerate() {
            input[c] = (x % from[0].q as u128) as u64;
            input[n + c] = (x % from[1].q as u128) as u64;
        }
        let conv = BasisConverter::new(&from, &to);
        let mut out = vec![0u64; 3 * n];
        let mut scratch = vec![0u64; 2 * n];
        conv.convert(&input, &mut out, &mut scratch, n);
        let mut scaled = input.clone();
        for (i, limb) in scaled.chunks_mut(n).enumerate() {
            conv.scale_input(i, limb);
        }
        // balanced: x + u·Q with x and u centred (|u| ≤ 1 for two primes), one target limb at
        // a time the same as the whole, and the gap left untouched
        let mut bal = vec![7u64; 4 * n];
        let mut scratch3 = vec![0u64; 3 * n];
        conv.convert_balanced_with_gap(&input, &mut bal, &mut scratch3, n, 1, 1);
        assert!(
            bal[n..2 * n].iter().all(|&v| v == 7),
            "the gap is left as it was"
        );
        let mut c = vec![0u64; n];
        conv.balance(&scaled, &mut c, n);
        for (j, pj) in to.iter().enumerate() {
            let limb = if j < 1 { j } else { j + 1 };
            let mut one = vec![0u64; n];
            conv.convert_one_balanced(&scaled, &c, j, &mut one, n);
            assert_eq!(
                one,
                bal[limb * n..(limb + 1) * n],
                "convert_one_balanced limb {j}"
            );
            for (cf, &x) in xs.iter().enumerate() {
                let x = x as i128;
                let xc = if x > (big_q / 2) as i128 {
                    x - big_q as i128
                } else {
                    x
                };
                let ok = (-1..=1i128)
                    .any(|u| (xc + u * big_q as i128).rem_euclid(pj.q as i128) as u64 == one[cf]);
                assert!(ok, "balanced coefficient {cf} limb {j}");
            }
        }
        // a converter that does not balance converts as `convert` does
        let plain = conv.clone().balancing(false);
        let mut unbal = vec![0u64; 3 * n];
        plain.convert_balanced_with_gap(&input, &mut unbal, &mut scratch3, n, 0, 0);
        assert_eq!(unbal, out, "without balancing: the plain conversion");
        for (j, pj) in to.iter().enumerate() {
            for c in 0..n {
                let ok = (0..2u128)
                    .any(|u| ((xs[c] + u * big_q) % pj.q as u128) as u64 == out[j * n + c]);
                assert!(ok, "coefficient {c} limb {j}");
            }
        }
        // the centered conversion is exact: x − Q when x > Q/2
        let mut scratch = vec![0u64; 3 * n];
        conv.convert_centered(&input, &mut out, &mut scratch, n);
        for (j, pj) in to.iter().enumerate() {
            for c in 0..n {
                let x = xs[c] as i128;
                let centered = if x > (big_q / 2) as i128 {
                    x - big_q as i128
                } else {
                    x
                };
                assert_eq!(
                    out[j * n + c],
                    centered.rem_euclid(pj.q as i128) as u64,
                    "centered {c} limb {j}"
                );
            }
        }
    }
}

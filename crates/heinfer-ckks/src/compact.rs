//! Plaintexts in the narrowest words their moduli allow: less memory for the same sums.
//!
//! A latency-mode linear layer keeps thousands of encoded diagonals (LoLa's CIFAR network:
//! 16,384 per convolution, 11.8 GB in all) and reads each of them once per query in
//! [`Evaluator::dot_plain_groups`](crate::Evaluator::dot_plain_groups). The latency
//! programs' scale primes are often 26–30 bits (`q_0` and the special primes a few bits
//! more): every residue modulo a prime below `2^32` fits 32 bits exactly.
//! [`CompactPlaintext`] keeps such a limb in 32-bit words and the others in 64-bit ones
//! (LoLa's network: 7.5 GB); the grouped sums read a 32-bit limb as it is
//! (`heinfer_math::dot::dot2_narrow`, which zero-extends four words per load on AVX2 CPUs and
//! widens a few terms at a time elsewhere) — the same residues, so the same bits as the
//! [`Plaintext`].

use crate::ciphertext::Plaintext;
use crate::error::Result;
use crate::params::CkksParams;
use crate::poly::{modulus_index, RnsPoly};

/// One limb's residues, in the words its modulus allows.
#[derive(Clone, Debug)]
enum Limb {
    Wide(Vec<u64>),
    Narrow(Vec<u32>),
}

/// An encoded message (NTT form) at a level and scale, each limb in 32-bit words where its
/// modulus is below `2^32` and in 64-bit words otherwise: a [`Plaintext`] in less memory. It
/// serves the grouped sums ([`PlainTerm`]); [`CompactPlaintext::widen`] gives the
/// [`Plaintext`] back.
#[derive(Clone, Debug)]
pub struct CompactPlaintext {
    params_id: u64,
    level: usize,
    scale: f64,
    n: usize,
    limbs: Vec<Limb>,
}

impl CompactPlaintext {
    /// The plaintext `pt` of `params` (checked), each limb in the narrowest words its
    /// modulus allows.
    pub fn new(params: &CkksParams, pt: &Plaintext) -> Result<Self> {
        params.check_id(pt.params_id())?;
        let poly = pt.poly();
        let limbs = (0..poly.limbs())
            .map(|i| {
                let q = params.moduli()[modulus_index(params, pt.level(), i)].q;
                let v = poly.limb(i);
                if q >> 32 == 0 {
                    // every residue is below q < 2^32: the cast keeps it whole
                    Limb::Narrow(v.iter().map(|&w| w as u32).collect())
                } else {
                    Limb::Wide(v.to_vec())
                }
            })
            .collect();
        Ok(Self {
            params_id: pt.params_id(),
            level: pt.level(),
            scale: pt.scale(),
            n: poly.n(),
            limbs,
        })
    }

    /// Level `ℓ`.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale `Δ` of the encoding.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
    /// Limbs (`ℓ + 1`, and the special primes' when extended).
    pub fn limbs(&self) -> usize {
        self.limbs.len()
    }
    /// Limbs kept in 32-bit words.
    pub fn narrow_limbs(&self) -> usize {
        self.limbs
            .iter()
            .filter(|l| matches!(l, Limb::Narrow(_)))
            .count()
    }
    /// Bytes of its residues: `N · (4 · narrow limbs + 8 · the others)`.
    pub fn bytes(&self) -> usize {
        self.n * (8 * self.limbs() - 4 * self.narrow_limbs())
    }
    /// The same plaintext in 64-bit words.
    pub fn widen(&self) -> Plaintext {
        let mut data = Vec::with_capacity(self.n * self.limbs());
        for l in &self.limbs {
            match l {
                Limb::Wide(v) => data.extend_from_slice(v),
                Limb::Narrow(v) => data.extend(v.iter().map(|&w| u64::from(w))),
            }
        }
        Plaintext {
            params_id: self.params_id,
            poly: RnsPoly::from_data(data, self.n),
            level: self.level,
            scale: self.scale,
        }
    }
}

/// A limb's residues as a plaintext stores them.
#[derive(Clone, Copy, Debug)]
pub enum Words<'a> {
    /// 64-bit words.
    Wide(&'a [u64]),
    /// 32-bit words (a modulus below `2^32`).
    Narrow(&'a [u32]),
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::Plaintext {}
    impl Sealed for super::CompactPlaintext {}
}

/// A plaintext term of a grouped sum ([`Evaluator::dot_plain_groups`](crate::Evaluator::dot_plain_groups)):
/// a [`Plaintext`] or a [`CompactPlaintext`] (sealed: these two only).
pub trait PlainTerm: sealed::Sealed + Sync {
    /// Parameters id, level and scale.
    fn head(&self) -> (u64, usize, f64);
    /// Limbs of its polynomial.
    fn limbs(&self) -> usize;
    /// Limb `i`'s residues.
    fn words(&self, i: usize) -> Words<'_>;
}

impl PlainTerm for Plaintext {
    fn head(&self) -> (u64, usize, f64) {
        (self.params_id, self.level, self.scale)
    }
    fn limbs(&self) -> usize {
        self.poly.limbs()
    }
    fn words(&self, i: usize) -> Words<'_> {
        Words::Wide(self.poly.limb(i))
    }
}

impl PlainTerm for CompactPlaintext {
    fn head(&self) -> (u64, usize, f64) {
        (self.params_id, self.level, self.scale)
    }
    fn limbs(&self) -> usize {
        self.limbs.len()
    }
    fn words(&self, i: usize) -> Words<'_> {
        match &self.limbs[i] {
            Limb::Wide(v) => Words::Wide(v),
            Limb::Narrow(v) => Words::Narrow(v),
        }
    }
}

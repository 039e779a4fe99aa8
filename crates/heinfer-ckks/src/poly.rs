//! Polynomials in RNS form: `limbs` residue vectors of `N` words each, stored contiguously.
//!
//! Limb `i` of a polynomial at level `ℓ` is its residue modulo `q_i` (`i ≤ ℓ`); polynomials in
//! the extended basis `Q_ℓ ∪ P` carry the `P` limbs after the `Q` limbs. Ciphertexts and
//! plaintexts are kept in evaluation (NTT) form; they leave it only for rescaling, basis
//! extension and decoding.

use crate::params::CkksParams;

/// A polynomial in RNS form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RnsPoly {
    pub(crate) data: Vec<u64>,
    pub(crate) n: usize,
}

impl RnsPoly {
    /// The zero polynomial with `limbs` limbs of degree `n`.
    pub fn zero(n: usize, limbs: usize) -> Self {
        Self {
            data: vec![0; n * limbs],
            n,
        }
    }

    /// Wraps raw data (`data.len()` must be a multiple of `n`).
    pub fn from_data(data: Vec<u64>, n: usize) -> Self {
        debug_assert_eq!(data.len() % n, 0);
        Self { data, n }
    }

    /// Number of limbs.
    pub fn limbs(&self) -> usize {
        self.data.len() / self.n
    }

    /// Ring degree.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Limb `i`.
    pub fn limb(&self, i: usize) -> &[u64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    /// Limb `i`, mutable.
    pub fn limb_mut(&mut self, i: usize) -> &mut [u64] {
        &mut self.data[i * self.n..(i + 1) * self.n]
    }

    /// All residues, limb after limb.
    pub fn data(&self) -> &[u64] {
        &self.data
    }

    /// All residues, limb after limb, mutable.
    pub fn data_mut(&mut self) -> &mut [u64] {
        &mut self.data
    }

    /// Drops limbs beyond the first `limbs`.
    pub fn truncate(&mut self, limbs: usize) {
        self.data.truncate(limbs * self.n);
    }
}

/// Zeroes every residue, capacity included (secret-derived polynomials: `s²`, `s(X^g)`, `u`).
impl zeroize::Zeroize for RnsPoly {
    fn zeroize(&mut self) {
        self.data.zeroize();
    }
}

/// Index of the modulus of limb `i` of a polynomial at level `level` (extended with P limbs
/// when `i > level`) into the parameter tables (Q primes first, then P primes).
#[inline]
pub(crate) fn modulus_index(params: &CkksParams, level: usize, i: usize) -> usize {
    if i <= level {
        i
    } else {
        params.q().len() + (i - level - 1)
    }
}

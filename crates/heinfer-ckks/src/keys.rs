//! Keys: the secret key (client only), the public key, and key-switching keys
//! (relinearization and Galois keys), with seed compression of their uniform halves.

use crate::compact::CompactPoly;
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::sampler::Seed;
use std::collections::BTreeMap;

/// The secret key `s`: a uniform ternary polynomial. Lives only on the client; it is never
/// printed (`Debug` shows nothing of it) and no server-side type holds it.
#[derive(Clone)]
pub struct SecretKey {
    pub(crate) params_id: u64,
    /// Ternary coefficients in `{−1, 0, 1}`.
    pub(crate) coeffs: Vec<i8>,
    /// `s` in NTT form over every prime of `Q ∪ P`.
    pub(crate) ntt: RnsPoly,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey {{ params_id: {:#018x}, .. }}", self.params_id)
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        // wipe the secret, spare capacity included (volatile writes, not optimized away)
        zeroize::Zeroize::zeroize(&mut self.coeffs);
        zeroize::Zeroize::zeroize(&mut self.ntt);
    }
}

impl SecretKey {
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
}

/// The public key `(b, a) = (−a·s + e, a)` over `Q_L ∪ P`; `a` is expanded from `seed`.
#[derive(Debug, Clone, PartialEq)]
pub struct PublicKey {
    pub(crate) params_id: u64,
    pub(crate) b: RnsPoly,
    pub(crate) a: RnsPoly,
    pub(crate) seed: Seed,
}

impl PublicKey {
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
}

/// A hybrid key-switching key from `s′` to `s`: one pair per digit `j` over `Q_L ∪ P`,
/// `swk_j = (−a_j·s + e_j + P·[Q̂_j·Q̂_j^{-1}]·s′, a_j)`; each `a_j` is expanded from a seed.
///
/// Its `2β` polynomials are kept compact, in one buffer ([`CompactPoly`]): a limb whose prime
/// is below `2^32` in 32-bit words (the latency programs' 26–30-bit scale primes; LoLa's CIFAR
/// network's 631 rotation keys 3.5 → 2.2 GB on the server), read as they are by the
/// key-switching inner product (`heinfer_math::dot::dot1_narrow`).
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchingKey {
    pub(crate) params_id: u64,
    pub(crate) b: Vec<CompactPoly>,
    pub(crate) a: Vec<CompactPoly>,
    pub(crate) seeds: Vec<Seed>,
}

impl SwitchingKey {
    /// The key of `params` whose digits are `(b[j], a[j])` (over every prime of `Q ∪ P`,
    /// NTT form) and `a[j]`'s seeds, compacted.
    pub(crate) fn new(
        params: &CkksParams,
        b: Vec<RnsPoly>,
        a: Vec<RnsPoly>,
        seeds: Vec<Seed>,
    ) -> Self {
        let moduli: Vec<u64> = params.moduli().iter().map(|m| m.q).collect();
        let polys: Vec<&RnsPoly> = b.iter().chain(&a).collect();
        let mut all = CompactPoly::from_polys(&polys, &moduli);
        let a_part = all.split_off(b.len());
        Self {
            params_id: params.id(),
            b: all,
            a: a_part,
            seeds,
        }
    }

    /// Number of digits `β`.
    pub fn digits(&self) -> usize {
        self.b.len()
    }
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
}

/// The relinearization key: switches `s²` to `s`.
#[derive(Debug, Clone, PartialEq)]
pub struct RelinKey(pub(crate) SwitchingKey);

impl RelinKey {
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.0.params_id
    }
}

/// The Galois key of one element `g`: switches `s(X^g)` to `s`.
///
/// Stored *pre-permuted* by `σ_g^{-1}` (both halves; `a` is `σ_g^{-1}` of the seed's
/// expansion), so a rotation multiplies the un-permuted decomposition by the key and permutes
/// only the two output polynomials: `Σ_j σ(D_j)·K_j = σ(Σ_j D_j·σ^{-1}(K_j))`.
#[derive(Debug, Clone, PartialEq)]
pub struct GaloisKey {
    pub(crate) galois_element: u64,
    pub(crate) key: SwitchingKey,
}

impl GaloisKey {
    /// The Galois element `g`.
    pub fn galois_element(&self) -> u64 {
        self.galois_element
    }
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.key.params_id
    }
}

/// A set of Galois keys, by Galois element.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GaloisKeys {
    pub(crate) keys: BTreeMap<u64, GaloisKey>,
}

impl GaloisKeys {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds (or replaces) a key.
    pub fn insert(&mut self, key: GaloisKey) {
        self.keys.insert(key.galois_element, key);
    }
    /// The key of element `g`, if present.
    pub fn get(&self, g: u64) -> Option<&GaloisKey> {
        self.keys.get(&g)
    }
    /// The Galois elements present, ascending.
    pub fn elements(&self) -> Vec<u64> {
        self.keys.keys().copied().collect()
    }
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
    /// Checks that every key belongs to `params`.
    pub fn check(&self, params: &CkksParams) -> crate::Result<()> {
        for k in self.keys.values() {
            params.check_id(k.params_id())?;
        }
        Ok(())
    }
}

//! Ciphertexts and plaintexts.

use crate::error::{CkksError, Result};
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::sampler::Seed;

/// An encoded message: one polynomial in NTT form at a level, with its scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Plaintext {
    pub(crate) params_id: u64,
    pub(crate) poly: RnsPoly,
    pub(crate) level: usize,
    pub(crate) scale: f64,
}

/// Zeroes the polynomial: a decrypted plaintext holds the message plus the decryption error,
/// which depends on the secret key (wrap it in `zeroize::Zeroizing` to wipe it on drop).
impl zeroize::Zeroize for Plaintext {
    fn zeroize(&mut self) {
        self.poly.zeroize();
    }
}

impl Plaintext {
    /// Level `ℓ` (the polynomial has `ℓ+1` limbs).
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
    /// The polynomial (NTT form).
    pub fn poly(&self) -> &RnsPoly {
        &self.poly
    }

    /// Builds a plaintext from an NTT-form polynomial at `level` (`level+1` limbs of degree
    /// `N`, residues below their moduli) — the constructor of encoders outside this crate
    /// (BFV's), whose NTTs leave every residue reduced. Checks the shape, level and scale;
    /// residues are the caller's responsibility, as in [`Ciphertext::from_parts`] (debug
    /// builds check them: the check cost 9 % of a BFV encoding).
    pub fn from_poly(params: &CkksParams, poly: RnsPoly, level: usize, scale: f64) -> Result<Self> {
        if level > params.max_level() {
            return Err(CkksError::LevelOutOfRange {
                level,
                max: params.max_level(),
            });
        }
        if poly.n() != params.n() || poly.limbs() != level + 1 {
            return Err(CkksError::InvalidOperand {
                op: "Plaintext::from_poly",
                reason: format!(
                    "polynomial has {} limbs of degree {}, expected {} of degree {}",
                    poly.limbs(),
                    poly.n(),
                    level + 1,
                    params.n()
                ),
            });
        }
        debug_assert!((0..=level).all(|i| poly.limb(i).iter().all(|&x| x < params.q()[i])));
        check_scale(scale)?;
        Ok(Self {
            params_id: params.id(),
            poly,
            level,
            scale,
        })
    }
}

/// The most polynomials a ciphertext has: `(c_0, …, c_4)`, the square of a 3-part ciphertext
/// not relinearized (decrypted with `s`, …, `s^4`; see [`crate::Evaluator::square`]).
pub const MAX_PARTS: usize = 5;

/// A CKKS ciphertext `(c_0, c_1, …)` in NTT form, 2 to [`MAX_PARTS`] polynomials: decrypts
/// to `Σ c_i s^i ≈ Δ·m`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ciphertext {
    pub(crate) params_id: u64,
    pub(crate) parts: Vec<RnsPoly>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    /// For a fresh secret-key encryption, the seed that expands to `c_1` (halves the bytes).
    pub(crate) seed: Option<Seed>,
}

impl Ciphertext {
    /// Level `ℓ` (each part has `ℓ+1` limbs): the number of rescales still possible.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale `Δ` of the encrypted message.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Overrides the scale (the caller asserts the message is now `Σ c_i s^i / scale`).
    pub fn set_scale(&mut self, scale: f64) -> Result<()> {
        check_scale(scale)?;
        self.scale = scale;
        Ok(())
    }
    /// Number of polynomials (2 for a linear ciphertext, 3 after a multiplication).
    pub fn size(&self) -> usize {
        self.parts.len()
    }
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
    /// Part `i`, if the ciphertext has it.
    pub fn part(&self, i: usize) -> Option<&RnsPoly> {
        self.parts.get(i)
    }
    /// Whether this ciphertext can be serialized in seed-compressed form.
    pub fn is_seed_compressed(&self) -> bool {
        self.seed.is_some()
    }

    /// The polynomials, mutable (drops seed compression: `c_1` is no longer the expansion
    /// of a seed once a caller may have changed it).
    pub fn parts_mut(&mut self) -> &mut [RnsPoly] {
        self.seed = None;
        &mut self.parts
    }

    /// Drops the primes above `level` in place (modulus switching without scaling: the
    /// message and scale are unchanged).
    pub fn truncate_to_level(&mut self, level: usize) -> Result<()> {
        if level > self.level {
            return Err(CkksError::LevelTooLow {
                op: "drop_to_level",
                level: self.level,
                needed: level,
            });
        }
        for p in self.parts_mut() {
            p.truncate(level + 1);
        }
        self.level = level;
        Ok(())
    }

    /// All polynomials.
    pub fn parts(&self) -> &[RnsPoly] {
        &self.parts
    }

    /// Builds a ciphertext from NTT-form parts at `level` (each part must have `level+1`
    /// limbs of degree `N`, residues below their moduli) — the constructor of kernels that
    /// compute parts directly. Checks shapes, level and scale; residues are the caller's
    /// responsibility (debug builds check them).
    pub fn from_parts(
        params: &CkksParams,
        parts: Vec<RnsPoly>,
        level: usize,
        scale: f64,
    ) -> Result<Self> {
        if level > params.max_level() {
            return Err(CkksError::LevelOutOfRange {
                level,
                max: params.max_level(),
            });
        }
        if !(2..=MAX_PARTS).contains(&parts.len()) {
            return Err(CkksError::InvalidOperand {
                op: "from_parts",
                reason: format!("{} parts (a ciphertext has 2 to {MAX_PARTS})", parts.len()),
            });
        }
        for p in &parts {
            if p.n() != params.n() || p.limbs() != level + 1 {
                return Err(CkksError::InvalidOperand {
                    op: "from_parts",
                    reason: format!(
                        "part has {} limbs of degree {}, expected {} of degree {}",
                        p.limbs(),
                        p.n(),
                        level + 1,
                        params.n()
                    ),
                });
            }
            debug_assert!((0..=level).all(|i| p.limb(i).iter().all(|&x| x < params.q()[i])));
        }
        check_scale(scale)?;
        Ok(Self {
            params_id: params.id(),
            parts,
            level,
            scale,
            seed: None,
        })
    }

    pub(crate) fn check(&self, params: &CkksParams) -> Result<()> {
        params.check_id(self.params_id)
    }
}

/// A scale must be finite, ≥ 1 and below 2^1000.
pub(crate) fn check_scale(scale: f64) -> Result<()> {
    if !(scale.is_finite() && scale >= 1.0 && scale < 2f64.powi(1000)) {
        return Err(CkksError::InvalidScale(format!(
            "{scale} is not a finite value in [1, 2^1000)"
        )));
    }
    Ok(())
}

//! The homomorphic evaluator: arithmetic, rescaling, key switching, rotations.
//!
//! Every operation checks parameter ids, levels and scales and returns an error (never panics)
//! on a mismatch. Operations come as `op` (allocates the result) and `op_assign` (in place).
//! Work over independent limbs runs on the current rayon pool.

mod arith;
mod dot;
mod extended;
pub(crate) mod keyswitch;
mod mul;
mod rescale;
mod rotate;

pub use extended::ExtendedCiphertext;

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::error::{CkksError, Result};
use crate::params::CkksParams;

/// Largest relative difference between two scales that still counts as equal.
pub const SCALE_TOLERANCE: f64 = 1.0 / (1u64 << 20) as f64;

/// Evaluates homomorphic operations for one parameter set. Holds no key: keys are passed
/// to the operations that need them, so one evaluator serves many clients.
#[derive(Clone, Debug)]
pub struct Evaluator {
    params: CkksParams,
}

impl Evaluator {
    /// An evaluator for `params`.
    pub fn new(params: &CkksParams) -> Self {
        Self {
            params: params.clone(),
        }
    }

    /// The parameters.
    pub fn params(&self) -> &CkksParams {
        &self.params
    }

    fn check_ct(&self, ct: &Ciphertext) -> Result<()> {
        ct.check(&self.params)
    }

    /// A product's scale: [`check_scale`], and below `Q_ℓ` (SEAL's rule: at or above it even
    /// a value of 1 wraps around the modulus and decrypts to garbage, silently).
    fn check_product_scale(&self, scale: f64, level: usize) -> Result<()> {
        crate::ciphertext::check_scale(scale)?;
        let log_q = self.params.log_q_at(level);
        if scale.log2() >= log_q {
            return Err(CkksError::InvalidScale(format!(
                "a product at scale 2^{:.1} does not fit the modulus Q_{level} = 2^{log_q:.1}: rescale first",
                scale.log2()
            )));
        }
        Ok(())
    }

    /// `round(c·scale)` for a constant added at `level`: below `Q_ℓ/2`, as the encoder
    /// requires of an encoded one (beyond, it wrapped around the modulus and vanished).
    fn added_constant(&self, c: f64, scale: f64, level: usize) -> Result<i128> {
        let v = scaled_constant(c, scale)?;
        let log_q = self.params.log_q_at(level);
        if v != 0 && (v.unsigned_abs() as f64).log2() + 1.0 >= log_q {
            return Err(CkksError::Encoding(format!(
                "constant {c} at scale 2^{:.1} reaches Q_{level}/2 = 2^{:.1}",
                scale.log2(),
                log_q - 1.0
            )));
        }
        Ok(v)
    }

    fn check_pt(&self, pt: &Plaintext) -> Result<()> {
        self.params.check_id(pt.params_id)
    }

    fn check_linear(&self, op: &'static str, ct: &Ciphertext) -> Result<()> {
        if ct.parts.len() != 2 {
            return Err(CkksError::InvalidOperand {
                op,
                reason: format!(
                    "expected a ciphertext of size 2, got size {} (relinearize first)",
                    ct.parts.len()
                ),
            });
        }
        Ok(())
    }
}

fn same_level(op: &'static str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(CkksError::LevelMismatch { op, lhs: a, rhs: b });
    }
    Ok(())
}

fn same_scale(op: &'static str, a: f64, b: f64) -> Result<()> {
    if ((a - b) / a.max(b)).abs() > SCALE_TOLERANCE {
        return Err(CkksError::ScaleMismatch { op, lhs: a, rhs: b });
    }
    Ok(())
}

/// `round(c·scale)` as a signed 128-bit integer, refusing values that do not fit.
fn scaled_constant(c: f64, scale: f64) -> Result<i128> {
    let v = (c * scale).round();
    if !v.is_finite() || v.abs() >= 1.0e38 {
        return Err(CkksError::Encoding(format!(
            "constant {c} at scale {scale:e} does not fit in 127 bits"
        )));
    }
    Ok(v as i128)
}

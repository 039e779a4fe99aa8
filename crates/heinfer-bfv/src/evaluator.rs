//! Homomorphic operations on BFV ciphertexts: the engine's additions, rotations (plain and
//! hoisted) and fused plaintext dot products, with BFV's encodings and checks around them.
//!
//! Every ciphertext stays at the top level with scale 1: BFV never rescales. `mul_plain`
//! multiplies by a [`Multiplier`]; the result decrypts to the slot-wise product mod `p`
//! with noise `e·m + (Q mod p)·k`, where `m·m' = [m·m']_p + p·k` (so ‖k‖ ≤ N·p/4).

use crate::decrypt::check_ciphertext;
use crate::encoder::Multiplier;
use crate::error::{BfvError, Result};
use crate::params::BfvParams;
use heinfer_ckks::{Ciphertext, Evaluator, GaloisKeys, Plaintext};

/// Evaluates additions, plaintext products and rotations on BFV ciphertexts (server side).
pub struct BfvEvaluator {
    params: BfvParams,
    ev: Evaluator,
}

impl BfvEvaluator {
    /// An evaluator for `params`.
    pub fn new(params: &BfvParams) -> Self {
        Self {
            params: params.clone(),
            ev: Evaluator::new(params.rlwe()),
        }
    }

    /// The parameters.
    pub fn params(&self) -> &BfvParams {
        &self.params
    }

    fn check(&self, ct: &Ciphertext, op: &str) -> Result<()> {
        check_ciphertext(&self.params, ct, op)
    }

    fn check_all(&self, cts: &[&Ciphertext], op: &str) -> Result<()> {
        cts.iter().try_for_each(|ct| self.check(ct, op))
    }

    fn check_plain(&self, pt: &Plaintext, op: &str) -> Result<()> {
        self.params.rlwe().check_id(pt.params_id())?;
        if pt.level() != self.params.level() || pt.scale() != 1.0 {
            return Err(BfvError::ParamsMismatch(format!(
                "{op}: not a BFV plaintext of these parameters"
            )));
        }
        Ok(())
    }

    /// `a + b`.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check(a, "add")?;
        self.check(b, "add")?;
        Ok(self.ev.add(a, b)?)
    }

    /// `a ← a + b`.
    pub fn add_assign(&self, a: &mut Ciphertext, b: &Ciphertext) -> Result<()> {
        self.check(a, "add")?;
        self.check(b, "add")?;
        Ok(self.ev.add_assign(a, b)?)
    }

    /// `a − b`.
    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check(a, "sub")?;
        self.check(b, "sub")?;
        Ok(self.ev.sub(a, b)?)
    }

    /// `ct + m` for `pt = Δ·m` ([`crate::BatchEncoder::encode`]).
    pub fn add_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext> {
        self.check(ct, "add_plain")?;
        self.check_plain(pt, "add_plain")?;
        Ok(self.ev.add_plain(ct, pt)?)
    }

    /// `ct − m` for `pt = Δ·m`.
    pub fn sub_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext> {
        self.check(ct, "sub_plain")?;
        self.check_plain(pt, "sub_plain")?;
        Ok(self.ev.sub_plain(ct, pt)?)
    }

    /// Slot-wise `ct · m` mod `p`.
    pub fn mul_plain(&self, ct: &Ciphertext, m: &Multiplier) -> Result<Ciphertext> {
        self.check(ct, "mul_plain")?;
        self.check_plain(&m.0, "mul_plain")?;
        Ok(self.ev.mul_plain(ct, &m.0)?)
    }

    /// `Σ_i cts[i] · ms[i]` in one pass (no intermediate ciphertexts): GAZELLE's diagonal
    /// products after the rotations.
    pub fn dot_plain(&self, cts: &[&Ciphertext], ms: &[&Multiplier]) -> Result<Ciphertext> {
        self.check_all(cts, "dot_plain")?;
        for m in ms {
            self.check_plain(&m.0, "dot_plain")?;
        }
        let pts: Vec<&Plaintext> = ms.iter().map(|m| &m.0).collect();
        Ok(self.ev.dot_plain(cts, &pts)?)
    }

    /// Every slot times the integer `c` mod `p` (lifted to `(−p/2, p/2]`).
    pub fn mul_scalar(&self, ct: &Ciphertext, c: u64) -> Result<Ciphertext> {
        self.check(ct, "mul_scalar")?;
        let t = self.params.plain_modulus();
        if c >= t {
            return Err(BfvError::Encoding(format!(
                "scalar {c} is not below the plaintext modulus {t}"
            )));
        }
        let centered = if c > t / 2 {
            c as f64 - t as f64
        } else {
            c as f64
        };
        Ok(self.ev.mul_const(ct, centered, 1.0)?)
    }

    /// Both rows of slots rotated left by `k` (right for `k < 0`), modulo `N/2`.
    pub fn rotate_rows(&self, ct: &Ciphertext, k: i64, keys: &GaloisKeys) -> Result<Ciphertext> {
        self.check(ct, "rotate_rows")?;
        Ok(self.ev.rotate(ct, k, keys)?)
    }

    /// `[rotate_rows(cts[i], steps[i]) for i]`, the rotations running in parallel (one per
    /// worker): a BFV ciphertext has too few limbs (three primes and a special one here) to
    /// keep every core busy on one rotation, so a transform's independent giant steps are
    /// better spread over the cores. Bit-identical to [`Self::rotate_rows`] on each.
    pub fn rotate_rows_many(
        &self,
        cts: &[&Ciphertext],
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<Ciphertext>> {
        self.check_all(cts, "rotate_rows_many")?;
        Ok(self.ev.rotate_many(cts, steps, keys)?)
    }

    /// Rotate-and-add folds of each ciphertext, `c ← c + rotate_rows(c, s)` for each `s` of
    /// `steps` in order, the ciphertexts in parallel and the whole chain in one engine call.
    /// Bit-identical to [`Self::rotate_rows`] and an addition in a loop.
    pub fn fold_rows(
        &self,
        cts: &[&Ciphertext],
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<Ciphertext>> {
        self.check_all(cts, "fold_rows")?;
        Ok(self.ev.fold(cts, steps, keys)?)
    }

    /// Rotations of one ciphertext by each of `steps`, sharing one key-switching
    /// decomposition (hoisting, GAZELLE §5.2).
    pub fn rotate_rows_hoisted(
        &self,
        ct: &Ciphertext,
        steps: &[i64],
        keys: &GaloisKeys,
    ) -> Result<Vec<Ciphertext>> {
        self.check(ct, "rotate_rows_hoisted")?;
        Ok(self.ev.rotate_hoisted(ct, steps, keys)?)
    }

    /// The two rows exchanged (Galois element `2N − 1`).
    pub fn swap_rows(&self, ct: &Ciphertext, keys: &GaloisKeys) -> Result<Ciphertext> {
        self.check(ct, "swap_rows")?;
        Ok(self.ev.conjugate(ct, keys)?)
    }
}

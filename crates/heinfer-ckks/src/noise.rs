//! The noise model used for error budgets: predicted standard deviation of the error in
//! each *slot* (real part, after dividing by the scale), per operation.
//!
//! A polynomial whose `N` coefficients are independent with variance `v` evaluates at a root of
//! unity to a complex value of variance `N·v`; its real part has variance `N·v/2`. With
//! `σ² = 3.19²`, a ternary `s` or `u` (each coefficient non-zero with probability 2/3), and
//! `h = 2N/3` the expected number of non-zero products per coefficient:
//!
//! * fresh public-key encryption, done over `Q·P` and divided by `P` with exact rounding
//!   (SEAL's method): only the rounding `r_0 + r_1·s` remains: `v = (1 + h)/12`;
//! * rescale rounding `r_0 + r_1·s`, `r` uniform in `[−½, ½]`: `v = (1 + h)/12`;
//! * encoding rounding: `v = 1/12`;
//! * hybrid key switching at level `ℓ`: `Σ_j D_j·e_j / P` with ModUp's balanced digits
//!   (`heinfer_math::rns`: digit `j` of `α_j` primes is a sum of `α_j` terms uniform over
//!   `(−Q_j/2, Q_j/2]`, `E[D_j²] = α_j·Q_j²/12`, no mean left to be fixed per key):
//!   `v = Σ_j N·σ²·α_j·Q_j²/(12·P²)`, plus the ModDown error.
//!
//! These are the formulas the compiler budgets with; tests compare them with measurements.

use crate::params::CkksParams;
use heinfer_math::sampler::ERROR_STDDEV;

/// Predicted per-slot error standard deviations (in message units) for a parameter set.
pub struct NoiseModel {
    n: f64,
    h: f64,
    params: CkksParams,
}

impl NoiseModel {
    /// The model for `params`.
    pub fn new(params: &CkksParams) -> Self {
        let n = params.n() as f64;
        Self {
            n,
            h: 2.0 * n / 3.0,
            params: params.clone(),
        }
    }

    fn slot_std(&self, coeff_var: f64, scale: f64) -> f64 {
        (self.n * coeff_var / 2.0).sqrt() / scale
    }

    /// Fresh public-key encryption.
    pub fn fresh(&self, scale: f64) -> f64 {
        self.slot_std((1.0 + self.h) / 12.0 + 1.0 / 12.0, scale)
    }

    /// Fresh secret-key encryption (`e` Gaussian, no division by `P`).
    pub fn fresh_symmetric(&self, scale: f64) -> f64 {
        self.slot_std(ERROR_STDDEV * ERROR_STDDEV + 1.0 / 12.0, scale)
    }

    /// Rounding error added by one rescale, at the scale after the rescale.
    pub fn rescale(&self, scale_after: f64) -> f64 {
        self.slot_std((1.0 + self.h) / 12.0, scale_after)
    }

    /// Error added by one key switch at `level`, at `scale`: `Σ_j D_j·e_j / P` plus ModDown's
    /// rounding. ModUp's digits are balanced (`heinfer_math::rns`): digit `j`, of `α_j` primes,
    /// is a sum of `α_j` independent terms uniform over `(−Q_j/2, Q_j/2]`, so
    /// `E[D_j²] = α_j·Q_j²/12`, and its product with the key's error adds `N·σ²·α_j·Q_j²/(12·P²)`
    /// per coefficient.
    pub fn key_switch(&self, level: usize, scale: f64) -> f64 {
        let s2 = ERROR_STDDEV * ERROR_STDDEV;
        let q = self.params.q();
        let log_p: f64 = self.params.p().iter().map(|&x| (x as f64).log2()).sum();
        let var: f64 = q[..=level]
            .chunks(self.params.alpha())
            .map(|c| {
                let log_qj: f64 = c.iter().map(|&x| (x as f64).log2()).sum();
                self.n * s2 * c.len() as f64 * (2f64).powf(2.0 * (log_qj - log_p)) / 12.0
            })
            .sum();
        self.slot_std(var + (1.0 + self.h) / 12.0, scale)
    }
}

//! Samplers for secrets, errors and uniform polynomials, driven by ChaCha20.
//!
//! Every stream is seeded from the operating system (`getrandom`) unless a seed is given
//! explicitly — which happens only to *expand* a public uniform polynomial from the 32-byte
//! seed stored in a seed-compressed ciphertext or key. Secret material never comes from a
//! caller-chosen seed outside test code.
//!
//! * Uniform mod `q`: rejection sampling on the top bits of 64-bit words (no modulo bias).
//! * Ternary secret: uniform in `{−1, 0, 1}`, one byte of the stream per coefficient,
//!   rejection on values ≥ 255.
//! * Error: discrete Gaussian of parameter σ = 3.19 (`ERROR_STDDEV`), tail-cut at 6σ, sampled
//!   by inversion of a 64-bit cumulative distribution table (CDT) of
//!   `P(|e| = k) ∝ exp(−k²/2σ²)`, `k ≤ 19`, plus a random sign (0 counted once).

use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// Standard deviation of the error distribution (HomomorphicEncryption.org standard).
pub const ERROR_STDDEV: f64 = 3.19;
/// Error samples are rejected beyond this many standard deviations.
pub const ERROR_TAIL_CUT: f64 = 6.0;

/// A 32-byte ChaCha20 seed.
pub type Seed = [u8; 32];

/// Draws a fresh seed from the operating system.
pub fn os_seed() -> Result<Seed> {
    let mut s = [0u8; 32];
    getrandom::fill(&mut s).map_err(|e| MathError::Entropy(e.to_string()))?;
    Ok(s)
}

/// A ChaCha20 random stream. Its state (key, counter, buffered output) is overwritten when
/// it is dropped: an OS-seeded stream produces secrets and encryption randomness.
pub struct Sampler {
    rng: ChaCha20Rng,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: `self.rng` is a valid, aligned place; the old value needs no drop (plain
        // words), and the volatile write keeps the compiler from eliding this dead store.
        unsafe { std::ptr::write_volatile(&mut self.rng, ChaCha20Rng::from_seed([0; 32])) };
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

impl Sampler {
    /// A stream seeded from the operating system.
    pub fn from_os() -> Result<Self> {
        Ok(Self {
            rng: ChaCha20Rng::from_seed(os_seed()?),
        })
    }

    /// A stream expanded from a given seed (public randomness, or tests).
    pub fn from_seed(seed: Seed) -> Self {
        Self {
            rng: ChaCha20Rng::from_seed(seed),
        }
    }

    /// A fresh 32-byte seed drawn from this stream.
    pub fn seed(&mut self) -> Seed {
        let mut s = [0u8; 32];
        self.rng.fill_bytes(&mut s);
        s
    }

    /// Fills `out` with uniform residues modulo `m` (rejection sampling, no bias).
    pub fn uniform_into(&mut self, out: &mut [u64], m: &Modulus) {
        let bits = 64 - m.q.leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        for x in out.iter_mut() {
            loop {
                let v = self.rng.next_u64() & mask;
                if v < m.q {
                    *x = v;
                    break;
                }
            }
        }
    }

    /// `n` ternary values in `{−1, 0, 1}`.
    pub fn ternary(&mut self, n: usize) -> Vec<i8> {
        let mut out = Vec::with_capacity(n);
        let mut buf = [0u8; 64];
        while out.len() < n {
            self.rng.fill_bytes(&mut buf);
            for &b in &buf {
                if b < 255 && out.len() < n {
                    out.push((b % 3) as i8 - 1);
                }
            }
        }
        out
    }

    /// `n` discrete-Gaussian error values (σ = 3.19, |e| ≤ 6σ).
    pub fn gaussian(&mut self, n: usize) -> Vec<i64> {
        let table = cdt();
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let r = self.rng.next_u64();
            // the top bit is the sign, the other 63 bits index the CDT of |e|
            let u = r & (u64::MAX >> 1);
            let mag = table.partition_point(|&c| c <= u) as i64;
            out.push(if r >> 63 == 1 { -mag } else { mag });
        }
        out
    }
}

/// Cumulative table of `|e|` for the discrete Gaussian, scaled to 2^63: entry `k` is
/// `2^63·P(|e| ≤ k)`, where `P(|e| = 0) = ρ(0)/Z`, `P(|e| = k) = 2ρ(k)/Z` and the sign is drawn
/// separately (so a sampled 0 with either sign is still 0).
fn cdt() -> &'static [u64] {
    static TABLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let bound = (ERROR_STDDEV * ERROR_TAIL_CUT).floor() as i64;
        let rho = |k: i64| (-((k * k) as f64) / (2.0 * ERROR_STDDEV * ERROR_STDDEV)).exp();
        let weights: Vec<f64> = (0..=bound)
            .map(|k| if k == 0 { rho(0) } else { 2.0 * rho(k) })
            .collect();
        let z: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let scale = (1u64 << 63) as f64;
        let mut t: Vec<u64> = weights
            .iter()
            .map(|w| {
                acc += w / z;
                (acc * scale).min(scale - 1.0) as u64
            })
            .collect();
        // the last entry covers everything: no sample beyond the tail cut
        *t.last_mut().expect("non-empty") = u64::MAX >> 1;
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_have_the_documented_moments() {
        let mut s = Sampler::from_seed([7; 32]);
        let e = s.gaussian(200_000);
        let mean = e.iter().sum::<i64>() as f64 / e.len() as f64;
        let var = e.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / e.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!(
            (var.sqrt() - ERROR_STDDEV).abs() < 0.05,
            "stddev {}",
            var.sqrt()
        );
        assert!(
            e.iter().any(|&x| x < -8) && e.iter().any(|&x| x > 8),
            "both tails are sampled"
        );
        assert!(e
            .iter()
            .all(|&x| (x as f64).abs() <= ERROR_STDDEV * ERROR_TAIL_CUT + 0.5));
        let t = s.ternary(30_000);
        for v in [-1i8, 0, 1] {
            let c = t.iter().filter(|&&x| x == v).count();
            assert!((c as f64 / 30_000.0 - 1.0 / 3.0).abs() < 0.02);
        }
        let m = Modulus::new(1_000_003);
        let mut u = vec![0; 50_000];
        s.uniform_into(&mut u, &m);
        assert!(u.iter().all(|&x| x < m.q));
        let mean = u.iter().map(|&x| x as f64).sum::<f64>() / u.len() as f64;
        assert!((mean / m.q as f64 - 0.5).abs() < 0.01);
    }

    #[test]
    fn same_seed_same_stream_os_seeds_differ() {
        let m = Modulus::new(97);
        let (mut a, mut b) = (vec![0; 16], vec![0; 16]);
        Sampler::from_seed([1; 32]).uniform_into(&mut a, &m);
        Sampler::from_seed([1; 32]).uniform_into(&mut b, &m);
        assert_eq!(a, b);
        assert_ne!(os_seed().unwrap(), os_seed().unwrap());
    }
}

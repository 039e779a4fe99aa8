//! The error type of `heinfer-math`.

/// Everything a caller of `heinfer-math` can get wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MathError {
    /// A requested prime size cannot be satisfied (too large, too small, or exhausted).
    #[error("cannot generate primes: {0}")]
    PrimeGeneration(String),
    /// A modulus that is not an NTT-friendly prime for the requested ring degree.
    #[error("cannot build an NTT plan: {0}")]
    NttPlan(String),
    /// A Galois element that is not an odd residue modulo 2N.
    #[error("invalid Galois element {g} for ring degree {n}: it must be odd and below 2N")]
    InvalidGaloisElement { g: u64, n: usize },
    /// The operating system random source failed.
    #[error("the operating system random source failed: {0}")]
    Entropy(String),
}

/// Result alias of `heinfer-math`.
pub type Result<T> = std::result::Result<T, MathError>;

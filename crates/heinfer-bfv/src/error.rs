//! The error type of `heinfer-bfv`: one enum; the engine's own errors pass through.

use heinfer_ckks::CkksError;
use heinfer_math::MathError;

/// Everything a caller (or hostile bytes) can get wrong in BFV. Never a panic.
#[derive(Debug, thiserror::Error)]
pub enum BfvError {
    /// Parameters outside what BFV supports (plaintext modulus, sizes, noise budget).
    #[error("invalid BFV parameters: {0}")]
    InvalidParameters(String),
    /// Values that cannot be encoded (wrong count, not below the plaintext modulus).
    #[error("cannot encode: {0}")]
    Encoding(String),
    /// A ciphertext or plaintext that does not belong to these BFV parameters.
    #[error("BFV parameters mismatch: {0}")]
    ParamsMismatch(String),
    /// Bytes that do not decode into a valid object.
    #[error("cannot decode {what}: {reason}")]
    Deserialize {
        /// What was being decoded.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// An error of the shared RLWE engine (levels, keys, shapes, security table).
    #[error(transparent)]
    Engine(#[from] CkksError),
    /// An error of the arithmetic layer (NTT plans, primes, the OS random source).
    #[error(transparent)]
    Math(#[from] MathError),
}

/// `Result` with [`BfvError`].
pub type Result<T> = std::result::Result<T, BfvError>;

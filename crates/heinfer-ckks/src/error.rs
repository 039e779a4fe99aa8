//! The error type of `heinfer-ckks`: one enum, one variant per thing a caller can get wrong.

use heinfer_math::MathError;

/// Everything a caller of the CKKS engine can get wrong. Operations never panic on caller
/// input; they return one of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CkksError {
    /// `log2(Q·P)` exceeds the HomomorphicEncryption.org bound for the ring degree.
    #[error(
        "insecure parameters: log2(QP) = {log_qp:.1} bits exceeds the {security}-bit bound of {max} bits for logN = {log_n}"
    )]
    InsecureParameters {
        log_qp: f64,
        max: u32,
        log_n: u32,
        security: u32,
    },
    /// Parameters that are malformed (sizes, counts, ranges).
    #[error("invalid parameters: {0}")]
    InvalidParameters(String),
    /// Two objects built for different parameter sets.
    #[error("parameter mismatch: object belongs to parameter set {found:#018x}, expected {expected:#018x}")]
    ParamsMismatch { expected: u64, found: u64 },
    /// Operands at different levels.
    #[error("cannot {op}: operands are at different levels ({lhs} and {rhs})")]
    LevelMismatch {
        op: &'static str,
        lhs: usize,
        rhs: usize,
    },
    /// An operation needs more levels than the operand has left.
    #[error("cannot {op}: operand is at level {level}, needs at least {needed}")]
    LevelTooLow {
        op: &'static str,
        level: usize,
        needed: usize,
    },
    /// A level above the top level of the parameters.
    #[error("level {level} does not exist: the top level is {max}")]
    LevelOutOfRange { level: usize, max: usize },
    /// Operands whose scales differ (relative difference above 2^-20).
    #[error("cannot {op}: scales differ ({lhs:e} vs {rhs:e})")]
    ScaleMismatch {
        op: &'static str,
        lhs: f64,
        rhs: f64,
    },
    /// A scale that is not positive and finite, or too large for the modulus.
    #[error("invalid scale: {0}")]
    InvalidScale(String),
    /// No Galois key for the requested rotation or conjugation.
    #[error("missing Galois key for Galois element {0} (generate it with the key generator)")]
    MissingGaloisKey(u64),
    /// No relinearization key was supplied.
    #[error("missing relinearization key")]
    MissingRelinKey,
    /// A ciphertext of the wrong shape for the operation (e.g. degree 2 where 1 is needed).
    #[error("cannot {op}: {reason}")]
    InvalidOperand { op: &'static str, reason: String },
    /// Values that cannot be encoded (too many, not finite, or too large for the modulus).
    #[error("cannot encode: {0}")]
    Encoding(String),
    /// Bytes that do not decode to a valid object.
    #[error("cannot deserialize {what}: {reason}")]
    Deserialize { what: &'static str, reason: String },
    /// An error of the arithmetic layer.
    #[error(transparent)]
    Math(#[from] MathError),
}

/// Result alias of `heinfer-ckks`.
pub type Result<T> = std::result::Result<T, CkksError>;

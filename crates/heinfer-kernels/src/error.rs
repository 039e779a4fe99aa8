//! The error type of `heinfer-kernels`.

use heinfer_ckks::CkksError;

/// Everything a caller of the kernels can get wrong. Kernels never panic on caller input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// A layer description that is malformed (indices, shapes, non-integer weights).
    #[error("invalid layer: {0}")]
    InvalidLayer(String),
    /// Operands that do not fit the layer (count, size, level, scale).
    #[error("invalid operands: {0}")]
    InvalidOperands(String),
    /// The f64 products would not be exact for these weights and moduli.
    #[error("inexact layer: {0}")]
    Inexact(String),
    /// An error of the CKKS engine.
    #[error(transparent)]
    Ckks(#[from] CkksError),
}

/// Result alias of `heinfer-kernels`.
pub type Result<T> = std::result::Result<T, KernelError>;

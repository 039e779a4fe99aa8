//! The error type of `heinfer-2pc`: one enum, one variant per thing a caller or a peer can get wrong.

/// Everything a caller (or the other party's bytes) can get wrong. Never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TwoPartyError {
    /// Bytes from the other party that do not decode (wrong length, bad point, bad count).
    #[error("cannot decode {what}: {reason}")]
    Deserialize {
        /// What was being decoded (e.g. "base OT message").
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A message that arrives in a state that does not expect it (out of order, repeated).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Arguments outside what the operation supports (bit widths, moduli, counts).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The operating system's random source failed.
    #[error("the OS random source failed: {0}")]
    Randomness(String),
}

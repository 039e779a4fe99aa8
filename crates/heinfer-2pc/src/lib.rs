//! # heinfer-2pc — the two-party layer of GAZELLE (§4): garbled circuits and oblivious transfer
//!
//! Layer: beside `heinfer-ckks` / `heinfer-bfv`, below the bindings (see `ARCHITECTURE.md`).
//! It imports no HE crate: its inputs are additive shares modulo a plaintext modulus `p`.
//!
//! * [`block`]: the 128-bit [`Block`] every label, key and hash output is made of.
//! * [`hash`]: fixed-key AES as a correlation-robust hash `π(σ(x)) ⊕ σ(x)` and a tweakable one
//!   `π(π(x) ⊕ i) ⊕ π(x)` (Guo et al., "Efficient and Secure Multiparty Computation from
//!   Fixed-Key Block Ciphers"); four blocks per instruction where the CPU has VAES (`vaes`).
//! * [`rng`]: the OS-seeded ChaCha20 generator every party draws its randomness from.
//!
//! Everything is *sans-IO*: a party is a state machine that takes and produces byte messages,
//! so the same code runs in process, over gRPC or over Ray. Every message decoded from bytes is
//! validated (length, counts) before use and a bad one is an [`TwoPartyError`], never a panic.

pub mod block;
pub mod error;
pub mod gc;
pub mod hash;
pub mod nonlinear;
pub mod ot;
mod pool;
pub mod rng;
#[cfg(target_arch = "x86_64")]
mod vaes;

pub use block::Block;
pub use error::TwoPartyError;

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, TwoPartyError>;

//! Oblivious transfer (GAZELLE §4: the garbler sends the evaluator the labels of its input
//! wires): Chou–Orlandi base OT, IKNP extension, and Beaver's derandomization.
//!
//! Layer: inside `heinfer-2pc`, used by the garbled circuits (`gc`). Semi-honest security, as
//! GAZELLE's threat model (§2).
//!
//! # Flow
//!
//! ```text
//!   receiver (evaluator)                          sender (garbler)
//! setup, once per session (128 public-key OTs):
//!   IknpReceiver::new            ── A ──────▶     IknpSender::receive_setup
//!   IknpReceiver::receive_setup  ◀── B_i ─────
//! offline, per batch (no inputs):
//!   extend_random(m)             ── u_i ────▶     extend_random          → pairs (m⁰, m¹)
//!   extend_correlated(m)         ── u_i ────▶     extend_correlated(Δ)   → m⁰ (m¹ = m⁰ ⊕ Δ)
//!   PendingCorrelated::finish    ◀── τ_j ─────
//! online, per batch:
//!   ChosenOtReceiver::choose(b)  ── d = b⊕c ▶     ChosenOtSender::send_pairs / send_labels
//!   ChosenOtReceiver::receive    ◀── y ───────                       → receiver gets x^{b_j}_j
//! ```
//!
//! Bytes per OT: offline 16 (random) or 32 (correlated); online 1 bit + 32 bytes (random
//! batch) or 1 bit + 16 bytes (correlated batch, labels `x⁰, x⁰ ⊕ Δ`). GAZELLE's online phase
//! is what a client waits for, so garbled-circuit inputs use the correlated form.
//!
//! # Sans-IO
//!
//! Every party is a state machine that takes and returns `Vec<u8>` messages ([`wire`] gives the
//! format), so the same code runs in process, over gRPC or over Ray. A message in a state that
//! does not expect it (wrong kind, wrong batch number, repeated, before setup) is a
//! [`crate::TwoPartyError::Protocol`] error; bytes that do not decode (length, count, point)
//! are a [`crate::TwoPartyError::Deserialize`] error; neither panics nor changes the state.
//!
//! # Why not `cryprot-ot`
//!
//! `cryprot-ot` 0.3 (MIT, a port of libOTe) was checked first (issue 11, item 5). Its protocols
//! are `async fn`s over its own `cryprot_net::Connection` (a QUIC/tokio channel: the traits
//! `RotSender`/`RotReceiver` require `Connected`, the constructors take a `Connection`), so it
//! cannot run over heinfer's transport, which hands byte messages to the caller; it also pulls
//! `rand` 0.10, tokio and rayon into a crate that otherwise uses `rand_core` 0.9. The protocols
//! here are the same (Chou–Orlandi + IKNP with the fixed-key-AES hash), built on
//! `curve25519-dalek`, `aes` and `sha2`.

pub mod base;
pub mod batch;
pub mod iknp;
pub mod online;
pub(crate) mod prg;
pub mod transpose;
pub mod wire;

pub use base::{BaseOtReceiver, BaseOtSender};
pub use batch::{
    CorrelatedOtReceiverBatch, CorrelatedOtSenderBatch, RandomOtReceiverBatch, RandomOtSenderBatch,
};
pub use iknp::{IknpReceiver, IknpSender, PendingCorrelated};
pub use online::{ChosenOtReceiver, ChosenOtSender};

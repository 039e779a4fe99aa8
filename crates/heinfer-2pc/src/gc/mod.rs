//! Garbled circuits: boolean circuits ([`circuit`]), half-gates garbling ([`garble`](mod@garble)) and
//! evaluation ([`evaluate`](mod@evaluate)), and the circuits of GAZELLE's non-linear layers on additive
//! shares modulo `p` ([`layers`]), whose outputs become additive shares without being
//! decoded ([`arith`]).

pub mod arith;
pub mod circuit;
pub mod evaluate;
pub mod garble;
mod halfgates;
pub mod layers;
mod wires;

pub use circuit::{Builder, Circuit, Gate, Wire};
pub use evaluate::{evaluate, evaluate_labels};
pub use garble::{garble, GarbledBatch, GarblerSecrets};

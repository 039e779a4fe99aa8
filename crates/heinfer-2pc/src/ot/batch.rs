//! What an offline extension batch leaves each party: the pads the online phase consumes.
//!
//! * random OT: the sender holds `(m⁰_j, m¹_j)`, the receiver a random `c_j` and `m^{c_j}_j`;
//! * correlated OT: the same with `m¹_j = m⁰_j ⊕ Δ` for the sender's global `Δ`.
//!
//! A batch is single-use: the online phase ([`super::online`]) consumes it by value. Pads are
//! wiped when dropped and never printed (`Debug` shows only sizes).

use zeroize::Zeroize;

use crate::Block;

/// The sender's side of a random-OT batch: pairs `(m⁰_j, m¹_j)` of independent random blocks.
pub struct RandomOtSenderBatch {
    pub(crate) batch: u64,
    pub(crate) pairs: Vec<[Block; 2]>,
}

/// The sender's side of a correlated-OT batch: `m⁰_j`, with `m¹_j = m⁰_j ⊕ Δ`.
pub struct CorrelatedOtSenderBatch {
    pub(crate) batch: u64,
    pub(crate) delta: Block,
    pub(crate) zeros: Vec<Block>,
}

/// The receiver's side of a random-OT batch: random choices `c_j` and `m^{c_j}_j`.
pub struct RandomOtReceiverBatch {
    pub(crate) pads: ReceiverPads,
}

/// The receiver's side of a correlated-OT batch: random choices `c_j` and `m⁰_j ⊕ c_j Δ`.
pub struct CorrelatedOtReceiverBatch {
    pub(crate) pads: ReceiverPads,
}

/// Choices and chosen messages, shared by both receiver flavours.
pub(crate) struct ReceiverPads {
    pub(crate) batch: u64,
    pub(crate) choices: Vec<bool>,
    pub(crate) messages: Vec<Block>,
}

impl RandomOtSenderBatch {
    /// The batch number within the session.
    pub fn batch(&self) -> u64 {
        self.batch
    }
    /// Number of OTs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }
    /// Whether the batch holds no OT.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
    /// `(m⁰_j, m¹_j)` for every `j`.
    pub fn pairs(&self) -> &[[Block; 2]] {
        &self.pairs
    }
}

impl CorrelatedOtSenderBatch {
    /// The batch number within the session.
    pub fn batch(&self) -> u64 {
        self.batch
    }
    /// Number of OTs.
    pub fn len(&self) -> usize {
        self.zeros.len()
    }
    /// Whether the batch holds no OT.
    pub fn is_empty(&self) -> bool {
        self.zeros.is_empty()
    }
    /// The global offset `Δ = m⁰_j ⊕ m¹_j`.
    pub fn delta(&self) -> Block {
        self.delta
    }
    /// `m⁰_j` for every `j`.
    pub fn zeros(&self) -> &[Block] {
        &self.zeros
    }
}

impl ReceiverPads {
    fn len(&self) -> usize {
        self.messages.len()
    }
}

macro_rules! receiver_accessors {
    ($ty:ty) => {
        impl $ty {
            /// The batch number within the session.
            pub fn batch(&self) -> u64 {
                self.pads.batch
            }
            /// Number of OTs.
            pub fn len(&self) -> usize {
                self.pads.len()
            }
            /// Whether the batch holds no OT.
            pub fn is_empty(&self) -> bool {
                self.pads.len() == 0
            }
            /// The random choice bits `c_j`.
            pub fn choices(&self) -> &[bool] {
                &self.pads.choices
            }
            /// The chosen messages `m^{c_j}_j`.
            pub fn messages(&self) -> &[Block] {
                &self.pads.messages
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "{}(batch {}, {} OTs)",
                    stringify!($ty),
                    self.pads.batch,
                    self.pads.len()
                )
            }
        }
    };
}
receiver_accessors!(RandomOtReceiverBatch);
receiver_accessors!(CorrelatedOtReceiverBatch);

impl std::fmt::Debug for RandomOtSenderBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RandomOtSenderBatch(batch {}, {} OTs)",
            self.batch,
            self.len()
        )
    }
}

impl std::fmt::Debug for CorrelatedOtSenderBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CorrelatedOtSenderBatch(batch {}, {} OTs)",
            self.batch,
            self.len()
        )
    }
}

/// Overwrites blocks with zeros.
pub(crate) fn wipe(blocks: &mut [Block]) {
    for b in blocks {
        b.0.zeroize();
    }
}

impl Drop for RandomOtSenderBatch {
    fn drop(&mut self) {
        for p in &mut self.pairs {
            wipe(p);
        }
    }
}

impl Drop for CorrelatedOtSenderBatch {
    fn drop(&mut self) {
        wipe(&mut self.zeros);
        self.delta.0.zeroize();
    }
}

impl Drop for ReceiverPads {
    fn drop(&mut self) {
        wipe(&mut self.messages);
        self.choices.zeroize();
    }
}

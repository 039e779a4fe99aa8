//! The online phase: chosen-message OT from a precomputed batch (Beaver, "Precomputing
//! Oblivious Transfer", CRYPTO 1995).
//!
//! The receiver holds random `c_j` and `m^{c_j}_j`; with its real choice `b_j` it sends the
//! bit-packed `d_j = b_j ⊕ c_j` (1 bit per OT). The sender, holding inputs `(x⁰_j, x¹_j)`:
//!
//! * **random batch, any pair** ([`ChosenOtSender::send_pairs`], 32 bytes per OT):
//!   $y^0_j = x^0_j \oplus m^{d_j}_j,\ y^1_j = x^1_j \oplus m^{1 \oplus d_j}_j$; the receiver
//!   outputs $y^{b_j}_j \oplus m^{c_j}_j = x^{b_j}_j$.
//! * **correlated batch, labels `x¹ = x⁰ ⊕ Δ`** ([`ChosenOtSender::send_labels`], 16 bytes per
//!   OT): here $m^1_j = m^0_j \oplus \Delta$, so one correction
//!   $y_j = x^0_j \oplus m^0_j \oplus d_j \Delta$ serves both choices:
//!   $y_j \oplus m^{c_j}_j = x^0_j \oplus (d_j \oplus c_j)\Delta = x^0_j \oplus b_j \Delta$.
//!   The `Δ` must be the one the batch was extended with (the garbler's global free-XOR offset).
//!
//! [`ChosenOtSender::send_labels`] on a *random* batch falls back to two corrections
//! `(x⁰, x⁰ ⊕ Δ)`. Each batch is used once: a second use is a [`TwoPartyError::Protocol`] error.

use std::mem;

use zeroize::Zeroize;

use super::batch::{
    CorrelatedOtReceiverBatch, CorrelatedOtSenderBatch, RandomOtReceiverBatch, RandomOtSenderBatch,
    ReceiverPads,
};
use super::wire::{self, Kind, MAX_OTS_PER_BATCH};
use crate::{Block, Result, TwoPartyError};

/// The OT receiver of the online phase (the GC evaluator, its share bits as choices).
pub struct ChosenOtReceiver {
    state: ReceiverState,
}

enum ReceiverState {
    Ready {
        pads: ReceiverPads,
        correlated: bool,
    },
    AwaitingCorrections {
        pads: ReceiverPads,
        choices: Vec<bool>,
        correlated: bool,
    },
    Done,
}

impl ChosenOtReceiver {
    /// Online receiver over a random-OT batch (expects two corrections per OT).
    pub fn from_random(batch: RandomOtReceiverBatch) -> ChosenOtReceiver {
        Self::ready(batch.pads, false)
    }

    /// Online receiver over a correlated-OT batch (expects one correction per OT).
    pub fn from_correlated(batch: CorrelatedOtReceiverBatch) -> ChosenOtReceiver {
        Self::ready(batch.pads, true)
    }

    fn ready(pads: ReceiverPads, correlated: bool) -> ChosenOtReceiver {
        ChosenOtReceiver {
            state: ReceiverState::Ready { pads, correlated },
        }
    }

    /// Number of OTs.
    pub fn len(&self) -> usize {
        match &self.state {
            ReceiverState::Ready { pads, .. } | ReceiverState::AwaitingCorrections { pads, .. } => {
                pads.messages.len()
            }
            ReceiverState::Done => 0,
        }
    }

    /// Whether no OT is left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Commits to the choices `b_j`: returns the message carrying `d_j = b_j ⊕ c_j`.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if already called, with
    /// [`TwoPartyError::InvalidArgument`] if `bits` is not one bit per OT.
    pub fn choose(&mut self, bits: &[bool]) -> Result<Vec<u8>> {
        let ReceiverState::Ready { pads, correlated } = &self.state else {
            return Err(TwoPartyError::Protocol(
                "online OT receiver: the choices were already sent".into(),
            ));
        };
        let n = pads.messages.len();
        if bits.len() != n {
            return Err(TwoPartyError::InvalidArgument(format!(
                "{} choice bits for a batch of {n} OTs",
                bits.len()
            )));
        }
        let d: Vec<bool> = bits.iter().zip(&pads.choices).map(|(b, c)| b ^ c).collect();
        let mut msg = wire::begin(Kind::OnlineChoices, pads.batch, n, wire::packed_len(n));
        wire::pack_bits(&d, &mut msg);
        let correlated = *correlated;
        let ReceiverState::Ready { pads, .. } = mem::replace(&mut self.state, ReceiverState::Done)
        else {
            unreachable!("matched above")
        };
        self.state = ReceiverState::AwaitingCorrections {
            pads,
            choices: bits.to_vec(),
            correlated,
        };
        Ok(msg)
    }

    /// Takes the sender's corrections and returns `x^{b_j}_j` for every `j`.
    ///
    /// Fails with [`TwoPartyError::Protocol`] before [`ChosenOtReceiver::choose`], after a
    /// successful call, for the wrong kind of message or another batch's;
    /// [`TwoPartyError::Deserialize`] for a wrong count or length. A failed call changes nothing.
    pub fn receive(&mut self, msg: &[u8]) -> Result<Vec<Block>> {
        let ReceiverState::AwaitingCorrections {
            pads,
            choices,
            correlated,
        } = &self.state
        else {
            return Err(TwoPartyError::Protocol(
                "online OT receiver: corrections before the choices were sent, or twice".into(),
            ));
        };
        let what = "OT corrections";
        let (kind, width) = if *correlated {
            (Kind::OnlineSingle, 1)
        } else {
            (Kind::OnlinePairs, 2)
        };
        let (header, payload) = wire::open(
            msg,
            kind,
            MAX_OTS_PER_BATCH,
            |c| c * width * Block::BYTES,
            what,
        )?;
        check_header(header.batch, header.count, pads, what)?;
        let out = payload
            .chunks_exact(width * Block::BYTES)
            .zip(choices)
            .zip(&pads.messages)
            .map(|((y, &b), m)| {
                let at = if width == 2 && b { Block::BYTES } else { 0 };
                let y = Block::from_bytes(y[at..at + Block::BYTES].try_into().expect("16 bytes"));
                y ^ *m
            })
            .collect();
        self.state = ReceiverState::Done;
        Ok(out)
    }
}

impl Drop for ChosenOtReceiver {
    fn drop(&mut self) {
        if let ReceiverState::AwaitingCorrections { choices, .. } = &mut self.state {
            choices.zeroize();
        }
    }
}

/// The OT sender of the online phase (the GC garbler, with its label pairs).
pub struct ChosenOtSender {
    state: SenderState,
}

enum SenderState {
    Random(RandomOtSenderBatch),
    Correlated(CorrelatedOtSenderBatch),
    Used,
}

impl ChosenOtSender {
    /// Online sender over a random-OT batch.
    pub fn from_random(batch: RandomOtSenderBatch) -> ChosenOtSender {
        ChosenOtSender {
            state: SenderState::Random(batch),
        }
    }

    /// Online sender over a correlated-OT batch.
    pub fn from_correlated(batch: CorrelatedOtSenderBatch) -> ChosenOtSender {
        ChosenOtSender {
            state: SenderState::Correlated(batch),
        }
    }

    /// Transfers arbitrary pairs `(x⁰_j, x¹_j)` (random batches only): 32 bytes per OT.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if the batch was used, for the wrong kind of
    /// message or another batch's; [`TwoPartyError::Deserialize`] for a bad choices message;
    /// [`TwoPartyError::InvalidArgument`] for a correlated batch or a wrong number of pairs.
    pub fn send_pairs(&mut self, choices_msg: &[u8], messages: &[[Block; 2]]) -> Result<Vec<u8>> {
        let batch = match &self.state {
            SenderState::Random(b) => b,
            SenderState::Correlated(_) => {
                return Err(TwoPartyError::InvalidArgument(
                    "a correlated batch transfers only labels x⁰, x⁰ ⊕ Δ: use send_labels".into(),
                ))
            }
            SenderState::Used => return Err(used()),
        };
        check_len(messages.len(), batch.len())?;
        let d = read_choices(choices_msg, batch.batch, batch.len())?;
        let n = batch.len();
        let mut out = wire::begin(Kind::OnlinePairs, batch.batch, n, n * 2 * Block::BYTES);
        for ((x, m), &d) in messages.iter().zip(&batch.pairs).zip(&d) {
            let d = usize::from(d);
            out.extend_from_slice(&(x[0] ^ m[d]).to_bytes());
            out.extend_from_slice(&(x[1] ^ m[1 - d]).to_bytes());
        }
        self.state = SenderState::Used;
        Ok(out)
    }

    /// Transfers garbled-circuit labels `x⁰_j` and `x¹_j = x⁰_j ⊕ Δ`: 16 bytes per OT over a
    /// correlated batch (whose `Δ` must equal `delta`), 32 bytes over a random batch.
    ///
    /// Fails as [`ChosenOtSender::send_pairs`], and with [`TwoPartyError::InvalidArgument`] if
    /// `delta` is not the correlated batch's `Δ`.
    pub fn send_labels(
        &mut self,
        choices_msg: &[u8],
        label0: &[Block],
        delta: Block,
    ) -> Result<Vec<u8>> {
        let batch = match &self.state {
            SenderState::Random(_) => {
                let pairs: Vec<[Block; 2]> = label0.iter().map(|&x| [x, x ^ delta]).collect();
                return self.send_pairs(choices_msg, &pairs);
            }
            SenderState::Correlated(b) => b,
            SenderState::Used => return Err(used()),
        };
        if batch.delta != delta {
            return Err(TwoPartyError::InvalidArgument(
                "Δ differs from the one the correlated batch was extended with".into(),
            ));
        }
        check_len(label0.len(), batch.len())?;
        let d = read_choices(choices_msg, batch.batch, batch.len())?;
        let n = batch.len();
        let mut out = wire::begin(Kind::OnlineSingle, batch.batch, n, n * Block::BYTES);
        for ((x, m), &d) in label0.iter().zip(&batch.zeros).zip(&d) {
            let y = if d { *x ^ *m ^ delta } else { *x ^ *m };
            out.extend_from_slice(&y.to_bytes());
        }
        self.state = SenderState::Used;
        Ok(out)
    }
}

fn used() -> TwoPartyError {
    TwoPartyError::Protocol("online OT sender: this batch was already used".into())
}

fn check_len(got: usize, n: usize) -> Result<()> {
    if got != n {
        return Err(TwoPartyError::InvalidArgument(format!(
            "{got} inputs for a batch of {n} OTs"
        )));
    }
    Ok(())
}

fn check_header(batch: u64, count: usize, pads: &ReceiverPads, what: &'static str) -> Result<()> {
    if batch != pads.batch {
        return Err(TwoPartyError::Protocol(format!(
            "{what} of batch {batch}, expected batch {}",
            pads.batch
        )));
    }
    if count != pads.messages.len() {
        return Err(TwoPartyError::Deserialize {
            what,
            reason: format!("{count} OTs, expected {}", pads.messages.len()),
        });
    }
    Ok(())
}

fn read_choices(msg: &[u8], batch: u64, n: usize) -> Result<Vec<bool>> {
    let what = "OT choices";
    let (header, payload) = wire::open(
        msg,
        Kind::OnlineChoices,
        MAX_OTS_PER_BATCH,
        wire::packed_len,
        what,
    )?;
    if header.batch != batch {
        return Err(TwoPartyError::Protocol(format!(
            "{what} of batch {}, expected batch {batch}",
            header.batch
        )));
    }
    if header.count != n {
        return Err(TwoPartyError::Deserialize {
            what,
            reason: format!("{} bits, expected {n}", header.count),
        });
    }
    wire::unpack_bits(payload, n, what)
}

//! IKNP OT extension (Ishai, Kilian, Nissim, Petrank, CRYPTO 2003), semi-honest, `κ = 128`,
//! with the correlation-robust hash of Guo et al. (S&P 2020) as `H`.
//!
//! **Setup, once per session** (two messages). The extension *receiver* plays base-OT *sender*
//! and gets seed pairs `(k⁰_i, k¹_i)`; the extension *sender* draws `s ∈ {0,1}^128` and, as
//! base-OT receiver, gets `k^{s_i}_i`, for `i < 128`. Each seed keys an AES-CTR stream `G`
//! (AES-128 in counter mode keyed by the seed, `G(k)_c = AES_k(c)`).
//!
//! **A batch of `m` OTs** (one message, receiver → sender; `m` is padded to `m' = 128⌈m/128⌉`
//! rows). The receiver draws choices `r ∈ {0,1}^{m}` and sends, per column `i`,
//! $$u_i = G(k^0_i) \oplus G(k^1_i) \oplus r, \qquad t_i = G(k^0_i).$$
//! The sender forms $q_i = G(k^{s_i}_i) \oplus s_i u_i = t_i \oplus s_i r$; transposed, row `j`
//! is $q_j = t_j \oplus r_j s$. With `idx_j` the session-wide index of the OT,
//! $$m^0_j = \mathrm{CR}(q_j \oplus idx_j), \quad m^1_j = \mathrm{CR}(q_j \oplus s \oplus idx_j),
//!   \qquad m^{r_j}_j = \mathrm{CR}(t_j \oplus idx_j).$$
//! The columns are read at PRG counters `[c, c + m'/128)` and the session counter then moves
//! past them, so batches never reuse PRG output or an index. A batch number in every message
//! keeps both parties in step.
//!
//! **Correlated batches** add one message (sender → receiver): for a global `Δ` the sender
//! keeps `m⁰_j` and sends $\tau_j = m^0_j \oplus m^1_j \oplus \Delta$; the receiver outputs
//! $m^{r_j}_j \oplus r_j \tau_j = m^0_j \oplus r_j \Delta$. Cost per OT: 16 bytes of columns
//! (+16 bytes of `τ` when correlated), three AES calls for the columns (receiver), 1–2 for `H`.

use rand_core::CryptoRng;
use zeroize::Zeroize;

use super::base::{BaseOtReceiver, BaseOtSender};
use super::batch::{
    CorrelatedOtReceiverBatch, CorrelatedOtSenderBatch, RandomOtReceiverBatch, RandomOtSenderBatch,
    ReceiverPads,
};
use super::prg::ColumnPrg;
use super::transpose::columns_to_rows;
use super::wire::{self, Kind, MAX_OTS_PER_BATCH};
use crate::hash::FixedKeyHash;
use crate::rng::random_block;
use crate::{Block, Result, TwoPartyError};

/// The security parameter: base OTs per session, columns of the extension matrix.
pub const KAPPA: usize = 128;

/// Bytes of the column message payload for `m` OTs.
fn columns_len(m: usize) -> usize {
    KAPPA * m.div_ceil(128) * Block::BYTES
}

/// Where a session stands in the stream of batches.
struct Position {
    batch: u64,
    /// The next PRG counter block of every column.
    block: u64,
}

impl Position {
    /// The index of the first OT of the batch.
    fn first_index(&self) -> u128 {
        u128::from(self.block) * 128
    }
    fn advance(&mut self, blocks: usize) {
        self.batch += 1;
        self.block += blocks as u64;
    }
}

/// The OT-extension **receiver** (the GC evaluator): base-OT sender during setup.
pub struct IknpReceiver {
    state: ReceiverState,
}

enum ReceiverState {
    AwaitingSetup(BaseOtSender),
    Ready {
        prg0: ColumnPrg,
        prg1: ColumnPrg,
        at: Position,
    },
}

impl IknpReceiver {
    /// Starts a session: returns the receiver and the first setup message (base-OT `A`).
    pub fn new<R: CryptoRng>(rng: &mut R) -> Result<(IknpReceiver, Vec<u8>)> {
        let (base, msg) = BaseOtSender::new(KAPPA, rng)?;
        Ok((
            IknpReceiver {
                state: ReceiverState::AwaitingSetup(base),
            },
            msg,
        ))
    }

    /// Takes the sender's setup reply (the base-OT points) and becomes ready to extend.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if the session is already set up.
    pub fn receive_setup(&mut self, msg: &[u8]) -> Result<()> {
        let ReceiverState::AwaitingSetup(base) = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "IKNP receiver: the session is already set up".into(),
            ));
        };
        let mut keys = base.receive(msg)?;
        let k0: Vec<Block> = keys.iter().map(|k| k[0]).collect();
        let k1: Vec<Block> = keys.iter().map(|k| k[1]).collect();
        for k in &mut keys {
            super::batch::wipe(k);
        }
        self.state = ReceiverState::Ready {
            prg0: ColumnPrg::new(&k0),
            prg1: ColumnPrg::new(&k1),
            at: Position { batch: 0, block: 0 },
        };
        Ok(())
    }

    /// A batch of `count` random OTs: the receiver's pads and the message for
    /// [`IknpSender::extend_random`].
    ///
    /// Fails with [`TwoPartyError::Protocol`] before setup, [`TwoPartyError::InvalidArgument`]
    /// if `count` is 0 or above [`MAX_OTS_PER_BATCH`].
    pub fn extend_random<R: CryptoRng>(
        &mut self,
        count: usize,
        rng: &mut R,
    ) -> Result<(RandomOtReceiverBatch, Vec<u8>)> {
        let (pads, msg) = self.extend(Kind::ExtRandom, count, rng)?;
        Ok((RandomOtReceiverBatch { pads }, msg))
    }

    /// A batch of `count` correlated OTs: the message for [`IknpSender::extend_correlated`] and
    /// a pending batch that [`PendingCorrelated::finish`] completes with the sender's reply.
    ///
    /// Fails as [`IknpReceiver::extend_random`].
    pub fn extend_correlated<R: CryptoRng>(
        &mut self,
        count: usize,
        rng: &mut R,
    ) -> Result<(PendingCorrelated, Vec<u8>)> {
        let (pads, msg) = self.extend(Kind::ExtCorrelated, count, rng)?;
        Ok((PendingCorrelated { pads: Some(pads) }, msg))
    }

    fn extend<R: CryptoRng>(
        &mut self,
        kind: Kind,
        count: usize,
        rng: &mut R,
    ) -> Result<(ReceiverPads, Vec<u8>)> {
        let ReceiverState::Ready { prg0, prg1, at } = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "IKNP receiver: extension before the setup finished".into(),
            ));
        };
        check_count(count)?;
        let blocks = count.div_ceil(128);
        // Choice bits, packed as the column `r`; the padding rows choose 0.
        let mut r: Vec<Block> = (0..blocks).map(|_| random_block(rng)).collect();
        if !count.is_multiple_of(128) {
            r[blocks - 1].0 &= (1u128 << (count % 128)) - 1;
        }
        let choices: Vec<bool> = (0..count)
            .map(|j| (r[j / 128].0 >> (j % 128)) & 1 == 1)
            .collect();

        let mut msg = wire::begin(kind, at.batch, count, columns_len(count));
        let mut t = vec![Block::ZERO; KAPPA * blocks];
        let mut u = vec![Block::ZERO; blocks];
        for (i, t_col) in t.chunks_exact_mut(blocks).enumerate() {
            prg0.xor_into(i, at.block, t_col);
            for ((u, t), r) in u.iter_mut().zip(t_col.iter()).zip(&r) {
                *u = *t ^ *r;
            }
            prg1.xor_into(i, at.block, &mut u);
            Block::write_all(&u, &mut msg);
        }
        super::batch::wipe(&mut r);
        let mut rows = vec![Block::ZERO; KAPPA * blocks];
        columns_to_rows(&t, blocks, &mut rows);
        super::batch::wipe(&mut t);
        rows.truncate(count);
        let first = at.first_index();
        for (j, row) in rows.iter_mut().enumerate() {
            *row ^= Block(first + j as u128);
        }
        FixedKeyHash::new().cr_many(&mut rows);
        let pads = ReceiverPads {
            batch: at.batch,
            choices,
            messages: rows,
        };
        at.advance(blocks);
        Ok((pads, msg))
    }
}

/// A correlated batch waiting for the sender's corrections `τ_j`.
pub struct PendingCorrelated {
    /// `None` once finished.
    pads: Option<ReceiverPads>,
}

impl PendingCorrelated {
    /// Applies the sender's corrections: `m^{r_j} ⊕ r_j τ_j = m⁰_j ⊕ r_j Δ`.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if already finished, for another kind of message
    /// or another batch's; [`TwoPartyError::Deserialize`] for a wrong count or length. A failed
    /// call leaves the batch pending.
    pub fn finish(&mut self, msg: &[u8]) -> Result<CorrelatedOtReceiverBatch> {
        let what = "correlated OT corrections";
        let Some(pads) = &self.pads else {
            return Err(TwoPartyError::Protocol(
                "correlated OT batch already finished".into(),
            ));
        };
        let n = pads.messages.len();
        let (header, payload) = wire::open(
            msg,
            Kind::ExtCorrection,
            MAX_OTS_PER_BATCH,
            |c| c * Block::BYTES,
            what,
        )?;
        check_batch(header.batch, pads.batch, what)?;
        if header.count != n {
            return Err(TwoPartyError::Deserialize {
                what,
                reason: format!("{} corrections, expected {n}", header.count),
            });
        }
        let mut pads = self.pads.take().expect("checked above");
        for ((m, &c), tau) in pads
            .messages
            .iter_mut()
            .zip(&pads.choices)
            .zip(payload.chunks_exact(Block::BYTES))
        {
            if c {
                *m ^= Block::from_bytes(tau.try_into().expect("16 bytes"));
            }
        }
        Ok(CorrelatedOtReceiverBatch { pads })
    }
}

/// The OT-extension **sender** (the GC garbler): base-OT receiver during setup.
pub struct IknpSender {
    state: SenderState,
}

enum SenderState {
    AwaitingSetup {
        base: BaseOtReceiver,
        s: Block,
    },
    Ready {
        s: Block,
        prg: ColumnPrg,
        at: Position,
    },
}

impl IknpSender {
    /// Starts a session: draws the secret `s ∈ {0,1}^128`.
    pub fn new<R: CryptoRng>(rng: &mut R) -> Result<IknpSender> {
        let s = random_block(rng);
        let bits = (0..KAPPA).map(|i| (s.0 >> i) & 1 == 1).collect();
        Ok(IknpSender {
            state: SenderState::AwaitingSetup {
                base: BaseOtReceiver::new(bits)?,
                s,
            },
        })
    }

    /// Takes the receiver's first setup message and returns the reply; the sender is then ready.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if the session is already set up.
    pub fn receive_setup<R: CryptoRng>(&mut self, msg: &[u8], rng: &mut R) -> Result<Vec<u8>> {
        let SenderState::AwaitingSetup { base, s } = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "IKNP sender: the session is already set up".into(),
            ));
        };
        let (reply, mut keys) = base.receive(msg, rng)?;
        let prg = ColumnPrg::new(&keys);
        super::batch::wipe(&mut keys);
        self.state = SenderState::Ready {
            s: *s,
            prg,
            at: Position { batch: 0, block: 0 },
        };
        Ok(reply)
    }

    /// Takes a random-OT batch's columns and returns the pairs `(m⁰_j, m¹_j)`.
    ///
    /// Fails with [`TwoPartyError::Protocol`] before setup, for another kind of message or a
    /// batch out of order; [`TwoPartyError::Deserialize`] for a bad count or length. A failed
    /// call changes nothing.
    pub fn extend_random(&mut self, msg: &[u8]) -> Result<RandomOtSenderBatch> {
        let (batch, s, rows) = self.rows(msg, Kind::ExtRandom)?;
        let mut ones: Vec<Block> = rows.iter().map(|q| *q ^ s).collect();
        let mut zeros = rows;
        let h = FixedKeyHash::new();
        h.cr_many(&mut zeros);
        h.cr_many(&mut ones);
        let pairs = zeros.iter().zip(&ones).map(|(a, b)| [*a, *b]).collect();
        super::batch::wipe(&mut zeros);
        super::batch::wipe(&mut ones);
        Ok(RandomOtSenderBatch { batch, pairs })
    }

    /// Checks a correlated batch's column message without taking it: the kind, the batch it
    /// belongs to, its length and that it asks for exactly `count` transfers — what the server
    /// can refuse before it garbles the circuits the transfers are for (a few bytes of header
    /// must not buy gigabytes of garbling). [`Self::extend_correlated`] checks it all again.
    /// A well-formed message of this batch asking for another count is refused as
    /// `extend_correlated` would refuse it after taking it: its batch is spent on both sides,
    /// so the parties stay in step for the next one.
    pub fn check_correlated(&mut self, msg: &[u8], count: usize) -> Result<()> {
        let SenderState::Ready { at, .. } = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "IKNP sender: extension before the setup finished".into(),
            ));
        };
        let what = "IKNP column message";
        let (header, _) = wire::open(
            msg,
            Kind::ExtCorrelated,
            MAX_OTS_PER_BATCH,
            columns_len,
            what,
        )?;
        check_batch(header.batch, at.batch, what)?;
        if header.count == 0 {
            return Err(TwoPartyError::Deserialize {
                what,
                reason: "a batch of zero OTs".into(),
            });
        }
        if header.count != count {
            at.advance(header.count.div_ceil(128));
            return Err(TwoPartyError::Protocol(format!(
                "the client asked for {} oblivious transfers, the step needs {count}",
                header.count
            )));
        }
        Ok(())
    }

    /// Takes a correlated batch's columns; returns `m⁰_j` (with `m¹_j = m⁰_j ⊕ Δ`) and the
    /// corrections `τ_j` for [`PendingCorrelated::finish`].
    ///
    /// Fails as [`IknpSender::extend_random`].
    pub fn extend_correlated(
        &mut self,
        msg: &[u8],
        delta: Block,
    ) -> Result<(CorrelatedOtSenderBatch, Vec<u8>)> {
        let (batch, s, rows) = self.rows(msg, Kind::ExtCorrelated)?;
        let mut ones: Vec<Block> = rows.iter().map(|q| *q ^ s).collect();
        let mut zeros = rows;
        let h = FixedKeyHash::new();
        h.cr_many(&mut zeros);
        h.cr_many(&mut ones);
        let mut reply = wire::begin(Kind::ExtCorrection, batch, zeros.len(), zeros.len() * 16);
        for (z, o) in zeros.iter().zip(&ones) {
            reply.extend_from_slice(&(*z ^ *o ^ delta).to_bytes());
        }
        super::batch::wipe(&mut ones);
        Ok((
            CorrelatedOtSenderBatch {
                batch,
                delta,
                zeros,
            },
            reply,
        ))
    }

    /// Decodes the columns, forms `q_i`, transposes, and tweaks row `j` by its index:
    /// returns `(batch, s, q_j ⊕ idx_j)`.
    fn rows(&mut self, msg: &[u8], kind: Kind) -> Result<(u64, Block, Vec<Block>)> {
        let SenderState::Ready { s, prg, at } = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "IKNP sender: extension before the setup finished".into(),
            ));
        };
        let what = "IKNP column message";
        let (header, payload) = wire::open(msg, kind, MAX_OTS_PER_BATCH, columns_len, what)?;
        check_batch(header.batch, at.batch, what)?;
        if header.count == 0 {
            return Err(TwoPartyError::Deserialize {
                what,
                reason: "a batch of zero OTs".into(),
            });
        }
        let count = header.count;
        let blocks = count.div_ceil(128);
        let mut q = vec![Block::ZERO; KAPPA * blocks];
        for (i, (q_col, u_col)) in q
            .chunks_exact_mut(blocks)
            .zip(payload.chunks_exact(blocks * Block::BYTES))
            .enumerate()
        {
            if (s.0 >> i) & 1 == 1 {
                for (q, u) in q_col.iter_mut().zip(u_col.chunks_exact(Block::BYTES)) {
                    *q = Block::from_bytes(u.try_into().expect("16 bytes"));
                }
            }
            prg.xor_into(i, at.block, q_col);
        }
        let mut rows = vec![Block::ZERO; KAPPA * blocks];
        columns_to_rows(&q, blocks, &mut rows);
        super::batch::wipe(&mut q);
        rows.truncate(count);
        let first = at.first_index();
        for (j, row) in rows.iter_mut().enumerate() {
            *row ^= Block(first + j as u128);
        }
        let batch = at.batch;
        at.advance(blocks);
        Ok((batch, *s, rows))
    }
}

impl Drop for IknpSender {
    fn drop(&mut self) {
        match &mut self.state {
            SenderState::AwaitingSetup { s, .. } | SenderState::Ready { s, .. } => s.0.zeroize(),
        }
    }
}

fn check_count(count: usize) -> Result<()> {
    if count == 0 || count > MAX_OTS_PER_BATCH {
        return Err(TwoPartyError::InvalidArgument(format!(
            "OT batch size {count} is not in 1..={MAX_OTS_PER_BATCH}"
        )));
    }
    Ok(())
}

fn check_batch(got: u64, expected: u64, what: &'static str) -> Result<()> {
    if got != expected {
        return Err(TwoPartyError::Protocol(format!(
            "{what} of batch {got}, expected batch {expected} (the parties' transfer streams are out of step: \
             an offline phase failed or was abandoned on one side; open a new session)"
        )));
    }
    Ok(())
}

//! Base OT: Chou–Orlandi "The Simplest Protocol for Oblivious Transfer" (LATINCRYPT 2015,
//! ePrint 2015/267) over the Ristretto255 group, batched, semi-honest.
//!
//! With generator `G`, the sender draws `a` and sends `A = aG`; for each choice bit `b_i` the
//! receiver draws `x_i` and sends `B_i = x_i G + b_i A`. The keys are
//! $$k^0_i = H(i, A, B_i, aB_i), \quad k^1_i = H(i, A, B_i, a(B_i - A)) \quad\text{(sender)},
//!   \qquad k^{b_i}_i = H(i, A, B_i, x_i A) \quad\text{(receiver)},$$
//! since `a B_i − b_i aA = x_i aG`. `H` is SHA-256 over a domain label, the index and the
//! transcript points, truncated to 128 bits. `B_i` hides `b_i` perfectly (uniform either way);
//! the key the receiver did not choose needs `a(B_i − (1−b_i)A)`, a CDH instance.
//!
//! Every point read from the other party is decompressed (a non-canonical encoding is refused)
//! and must not be the identity. Two messages: sender → receiver (`A`), receiver → sender (`B`).

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use rand_core::CryptoRng;
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use super::wire::{self, Kind};
use crate::{Block, Result, TwoPartyError};

/// The most base OTs one exchange may carry.
pub const MAX_BASE_OTS: usize = 1 << 16;

/// Bytes of a compressed Ristretto point.
const POINT: usize = 32;

/// The base-OT sender: [`BaseOtSender::new`] gives the first message, [`BaseOtSender::receive`]
/// takes the receiver's reply and returns the key pairs `(k⁰_i, k¹_i)`.
pub struct BaseOtSender {
    state: SenderState,
}

// One sender per session: the size gap between the states costs nothing.
#[allow(clippy::large_enum_variant)]
enum SenderState {
    AwaitingChoices {
        a: Scalar,
        big_a: RistrettoPoint,
        a_bytes: [u8; POINT],
        count: usize,
    },
    Done,
}

impl BaseOtSender {
    /// Starts `count` base OTs: draws `a` and returns the message carrying `A = aG`.
    ///
    /// Fails if `count` is 0 or above [`MAX_BASE_OTS`].
    pub fn new<R: CryptoRng>(count: usize, rng: &mut R) -> Result<(BaseOtSender, Vec<u8>)> {
        check_count(count)?;
        let a = random_scalar(rng);
        let big_a = RistrettoPoint::mul_base(&a);
        let a_bytes = big_a.compress().to_bytes();
        let mut msg = wire::begin(Kind::BaseSetup, 0, count, POINT);
        msg.extend_from_slice(&a_bytes);
        let state = SenderState::AwaitingChoices {
            a,
            big_a,
            a_bytes,
            count,
        };
        Ok((BaseOtSender { state }, msg))
    }

    /// Takes the receiver's points `B_i` and returns `(k⁰_i, k¹_i)` for every `i`.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if called twice or given another kind of message,
    /// with [`TwoPartyError::Deserialize`] if the count differs from the one sent, the length is
    /// wrong, or a point does not decode or is the identity. A failed call leaves the sender
    /// waiting.
    pub fn receive(&mut self, msg: &[u8]) -> Result<Vec<[Block; 2]>> {
        let SenderState::AwaitingChoices {
            a,
            big_a,
            a_bytes,
            count,
        } = &self.state
        else {
            return Err(TwoPartyError::Protocol(
                "base OT sender: the receiver's points were already processed".into(),
            ));
        };
        let what = "base OT receiver message";
        let (header, payload) =
            wire::open(msg, Kind::BaseChoices, MAX_BASE_OTS, |n| n * POINT, what)?;
        if header.count != *count {
            return Err(TwoPartyError::Deserialize {
                what,
                reason: format!("{} points, expected {count}", header.count),
            });
        }
        let points = payload
            .chunks_exact(POINT)
            .map(|c| decode_point(c, what))
            .collect::<Result<Vec<_>>>()?;
        let a_times_a = a * big_a;
        let keys = points
            .iter()
            .zip(payload.chunks_exact(POINT))
            .enumerate()
            .map(|(i, (b, b_bytes))| {
                let ab = a * b;
                [
                    key(i, a_bytes, b_bytes, &ab),
                    key(i, a_bytes, b_bytes, &(ab - a_times_a)),
                ]
            })
            .collect();
        self.state = SenderState::Done;
        Ok(keys)
    }
}

/// The base-OT receiver: built from its choice bits; [`BaseOtReceiver::receive`] takes the
/// sender's `A` and returns the reply and the chosen keys `k^{b_i}_i`.
pub struct BaseOtReceiver {
    state: ReceiverState,
}

enum ReceiverState {
    AwaitingSetup { choices: Vec<bool> },
    Done,
}

impl BaseOtReceiver {
    /// A receiver with choice bits `choices` (1 to [`MAX_BASE_OTS`] of them).
    pub fn new(choices: Vec<bool>) -> Result<BaseOtReceiver> {
        check_count(choices.len())?;
        Ok(BaseOtReceiver {
            state: ReceiverState::AwaitingSetup { choices },
        })
    }

    /// Takes the sender's message (`A`) and returns the reply (the `B_i`) and the keys
    /// `k^{b_i}_i`.
    ///
    /// Fails with [`TwoPartyError::Protocol`] if called twice or given another kind of message,
    /// with [`TwoPartyError::Deserialize`] if the count differs from the number of choices or
    /// `A` does not decode or is the identity.
    pub fn receive<R: CryptoRng>(
        &mut self,
        msg: &[u8],
        rng: &mut R,
    ) -> Result<(Vec<u8>, Vec<Block>)> {
        let ReceiverState::AwaitingSetup { choices } = &self.state else {
            return Err(TwoPartyError::Protocol(
                "base OT receiver: the sender's point was already processed".into(),
            ));
        };
        let what = "base OT sender message";
        let (header, payload) = wire::open(msg, Kind::BaseSetup, MAX_BASE_OTS, |_| POINT, what)?;
        if header.count != choices.len() {
            return Err(TwoPartyError::Deserialize {
                what,
                reason: format!("{} base OTs, expected {}", header.count, choices.len()),
            });
        }
        let big_a = decode_point(payload, what)?;
        let a_bytes: [u8; POINT] = payload.try_into().expect("length checked");
        let mut reply = wire::begin(Kind::BaseChoices, 0, choices.len(), choices.len() * POINT);
        let mut keys = Vec::with_capacity(choices.len());
        for (i, &b) in choices.iter().enumerate() {
            let mut x = random_scalar(rng);
            let xg = RistrettoPoint::mul_base(&x);
            let big_b = if b { xg + big_a } else { xg };
            let b_bytes = big_b.compress().to_bytes();
            reply.extend_from_slice(&b_bytes);
            keys.push(key(i, &a_bytes, &b_bytes, &(x * big_a)));
            x.zeroize();
        }
        self.state = ReceiverState::Done;
        Ok((reply, keys))
    }
}

fn check_count(count: usize) -> Result<()> {
    if count == 0 || count > MAX_BASE_OTS {
        return Err(TwoPartyError::InvalidArgument(format!(
            "base OT count {count} is not in 1..={MAX_BASE_OTS}"
        )));
    }
    Ok(())
}

/// A uniform scalar from 64 random bytes reduced modulo the group order.
fn random_scalar<R: CryptoRng>(rng: &mut R) -> Scalar {
    let mut wide = [0u8; 64];
    rng.fill_bytes(&mut wide);
    let s = Scalar::from_bytes_mod_order_wide(&wide);
    wide.zeroize();
    s
}

/// A compressed Ristretto point from the other party: canonical, decompressible, not the identity.
fn decode_point(bytes: &[u8], what: &'static str) -> Result<RistrettoPoint> {
    let compressed =
        CompressedRistretto::from_slice(bytes).map_err(|_| TwoPartyError::Deserialize {
            what,
            reason: format!("a point is 32 bytes, got {}", bytes.len()),
        })?;
    let point = compressed
        .decompress()
        .ok_or_else(|| TwoPartyError::Deserialize {
            what,
            reason: "bytes that are not a Ristretto255 point".into(),
        })?;
    if point.is_identity() {
        return Err(TwoPartyError::Deserialize {
            what,
            reason: "the identity point".into(),
        });
    }
    Ok(point)
}

/// `H(i, A, B_i, P)`: SHA-256 of a domain label, the index and the three points, first 16 bytes.
fn key(index: usize, a_bytes: &[u8; POINT], b_bytes: &[u8], shared: &RistrettoPoint) -> Block {
    let mut h = Sha256::new();
    h.update(b"heinfer-2pc/base-ot/chou-orlandi/v1");
    h.update((index as u64).to_le_bytes());
    h.update(a_bytes);
    h.update(b_bytes);
    h.update(shared.compress().as_bytes());
    let digest = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    Block::from_bytes(out)
}

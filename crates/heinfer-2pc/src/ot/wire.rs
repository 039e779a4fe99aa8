//! The byte format of every OT message: a 17-byte header, then a payload whose length the header
//! fixes exactly.
//!
//! ```text
//! kind: u8 | batch: u64 LE | count: u64 LE | payload
//! ```
//!
//! `kind` says which message it is (a message of another kind is a [`TwoPartyError::Protocol`]
//! error: it arrived in a state that does not expect it); `batch` numbers the extension batches
//! of a session so that both parties use the same PRG counters and OT indices; `count` is the
//! number of OTs the payload carries. Lengths and counts are checked before anything is
//! allocated from them.

use crate::{Result, TwoPartyError};

/// Size of the header in bytes.
pub const HEADER_BYTES: usize = 17;

/// The most OTs one message may carry (2^24: a 256 MiB extension matrix). Larger batches are
/// split by the caller; the limit keeps a hostile `count` from allocating without bound.
pub const MAX_OTS_PER_BATCH: usize = 1 << 24;

/// Which message a byte string is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Base OT, sender → receiver: the point `A`.
    BaseSetup = 1,
    /// Base OT, receiver → sender: the points `B_i`.
    BaseChoices = 2,
    /// IKNP, receiver → sender: the masked columns `u_i` of a random-OT batch.
    ExtRandom = 3,
    /// IKNP, receiver → sender: the masked columns `u_i` of a correlated-OT batch.
    ExtCorrelated = 4,
    /// IKNP, sender → receiver: the correlation corrections `τ_j` of a correlated batch.
    ExtCorrection = 5,
    /// Online, receiver → sender: the bit-packed `d_j = b_j ⊕ c_j`.
    OnlineChoices = 6,
    /// Online, sender → receiver: two 16-byte corrections per OT.
    OnlinePairs = 7,
    /// Online, sender → receiver: one 16-byte correction per OT (correlated batches).
    OnlineSingle = 8,
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Which message.
    pub kind: Kind,
    /// The batch number within the session (0 for base OT).
    pub batch: u64,
    /// How many OTs the payload describes.
    pub count: usize,
}

/// Starts a message: the header, with room reserved for `payload_bytes` more.
pub fn begin(kind: Kind, batch: u64, count: usize, payload_bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + payload_bytes);
    out.push(kind as u8);
    out.extend_from_slice(&batch.to_le_bytes());
    out.extend_from_slice(&(count as u64).to_le_bytes());
    out
}

/// Splits `bytes` into its header and payload, checking that the message is of kind `expected`,
/// that `count` is at most `max_count`, and that the payload is exactly
/// `payload_len(count)` bytes.
pub fn open<'a>(
    bytes: &'a [u8],
    expected: Kind,
    max_count: usize,
    payload_len: impl Fn(usize) -> usize,
    what: &'static str,
) -> Result<(Header, &'a [u8])> {
    let bad = |reason: String| TwoPartyError::Deserialize { what, reason };
    if bytes.len() < HEADER_BYTES {
        return Err(bad(format!(
            "{} bytes is shorter than the {HEADER_BYTES}-byte header",
            bytes.len()
        )));
    }
    let kind = bytes[0];
    if kind != expected as u8 {
        return Err(TwoPartyError::Protocol(format!(
            "expected a {what} (message kind {}), got message kind {kind}",
            expected as u8
        )));
    }
    let batch = u64::from_le_bytes(bytes[1..9].try_into().expect("8 bytes"));
    let count = u64::from_le_bytes(bytes[9..17].try_into().expect("8 bytes"));
    let count = usize::try_from(count)
        .ok()
        .filter(|&c| c <= max_count)
        .ok_or_else(|| bad(format!("count {count} exceeds the limit {max_count}")))?;
    let payload = &bytes[HEADER_BYTES..];
    let want = payload_len(count);
    if payload.len() != want {
        return Err(bad(format!(
            "payload of {} bytes, expected {want} for {count} OTs",
            payload.len()
        )));
    }
    Ok((
        Header {
            kind: expected,
            batch,
            count,
        },
        payload,
    ))
}

/// Appends `bits` packed eight to a byte, least significant bit first.
pub fn pack_bits(bits: &[bool], out: &mut Vec<u8>) {
    for chunk in bits.chunks(8) {
        let byte = chunk
            .iter()
            .enumerate()
            .fold(0u8, |acc, (i, &b)| acc | (u8::from(b) << i));
        out.push(byte);
    }
}

/// Bytes needed for `n` packed bits.
pub fn packed_len(n: usize) -> usize {
    n.div_ceil(8)
}

/// Unpacks `n` bits from exactly [`packed_len`]`(n)` bytes; the padding bits of the last byte
/// must be zero (one encoding per bit string).
pub fn unpack_bits(bytes: &[u8], n: usize, what: &'static str) -> Result<Vec<bool>> {
    if bytes.len() != packed_len(n) {
        return Err(TwoPartyError::Deserialize {
            what,
            reason: format!("{} bytes for {n} bits", bytes.len()),
        });
    }
    if !n.is_multiple_of(8) {
        let last = bytes[bytes.len() - 1];
        if last >> (n % 8) != 0 {
            return Err(TwoPartyError::Deserialize {
                what,
                reason: "nonzero padding bits".into(),
            });
        }
    }
    Ok((0..n).map(|i| (bytes[i / 8] >> (i % 8)) & 1 == 1).collect())
}

//! Tests of `heinfer_2pc::ot`, one file per source file.

mod base;
mod hostile;
mod iknp;
mod online;
mod transpose;
mod wire;

use heinfer_2pc::ot::{IknpReceiver, IknpSender};
use heinfer_2pc::rng::{os_rng, random_block, seeded};
use heinfer_2pc::{Block, TwoPartyError};
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;

/// The OT sizes every correctness test runs at.
pub const SIZES: [usize; 5] = [1, 127, 128, 129, 10_000];

/// Two OS-seeded generators (sender's, receiver's).
pub fn rngs() -> (ChaCha20Rng, ChaCha20Rng) {
    (os_rng().unwrap(), os_rng().unwrap())
}

/// A set-up IKNP session.
pub fn session(srng: &mut ChaCha20Rng, rrng: &mut ChaCha20Rng) -> (IknpSender, IknpReceiver) {
    let (mut receiver, a) = IknpReceiver::new(rrng).unwrap();
    let mut sender = IknpSender::new(srng).unwrap();
    let b = sender.receive_setup(&a, srng).unwrap();
    receiver.receive_setup(&b).unwrap();
    (sender, receiver)
}

/// A seeded session, for determinism tests.
pub fn seeded_session(seed: u64) -> (IknpSender, IknpReceiver, ChaCha20Rng, ChaCha20Rng) {
    let (mut s, mut r) = (seeded(seed), seeded(seed + 1));
    let (sender, receiver) = session(&mut s, &mut r);
    (sender, receiver, s, r)
}

/// `n` random bits from `rng`.
pub fn random_bits(rng: &mut ChaCha20Rng, n: usize) -> Vec<bool> {
    (0..n).map(|_| rng.next_u32() & 1 == 1).collect()
}

/// `n` random blocks.
pub fn random_blocks(rng: &mut ChaCha20Rng, n: usize) -> Vec<Block> {
    (0..n).map(|_| random_block(rng)).collect()
}

pub fn is_protocol<T>(r: Result<T, TwoPartyError>) -> bool {
    matches!(r, Err(TwoPartyError::Protocol(_)))
}

pub fn is_deserialize<T>(r: Result<T, TwoPartyError>) -> bool {
    matches!(r, Err(TwoPartyError::Deserialize { .. }))
}

pub fn is_invalid<T>(r: Result<T, TwoPartyError>) -> bool {
    matches!(r, Err(TwoPartyError::InvalidArgument(_)))
}

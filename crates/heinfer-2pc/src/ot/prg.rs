//! The PRG that stretches each of IKNP's 128 base-OT seeds into a column: AES-128 in counter
//! mode, keyed by the seed,
//! $$G(k)_c = \mathrm{AES}_k(c), \qquad c = 0, 1, 2, \dots$$
//! Each column's key schedule is computed once per session; a batch asks for the blocks
//! `c ∈ [first, first + n)` and the session's counter moves past them, so later batches reuse
//! the seeds (and the ~128 public-key operations of the base OT) without reusing PRG output.
//! The garbler draws each chunk's input labels from one such stream under a fresh random key
//! ([`crate::gc::garble`]).

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;

use crate::Block;

/// How many counter blocks go through AES at once.
const CHUNK: usize = 64;

/// One AES-CTR stream per base-OT seed.
pub(crate) struct ColumnPrg {
    ciphers: Vec<Aes128>,
}

impl ColumnPrg {
    /// The streams of `seeds` (one column each).
    pub(crate) fn new(seeds: &[Block]) -> ColumnPrg {
        ColumnPrg {
            ciphers: seeds
                .iter()
                .map(|s| Aes128::new(&GenericArray::from(s.to_bytes())))
                .collect(),
        }
    }

    /// XORs blocks `first .. first + out.len()` of column `col`'s stream into `out`.
    pub(crate) fn xor_into(&self, col: usize, first: u64, out: &mut [Block]) {
        let cipher = &self.ciphers[col];
        let mut buf = [GenericArray::from([0u8; 16]); CHUNK];
        for (c, chunk) in out.chunks_mut(CHUNK).enumerate() {
            let start = first + (c * CHUNK) as u64;
            for (k, slot) in buf[..chunk.len()].iter_mut().enumerate() {
                *slot = GenericArray::from(u128::from(start + k as u64).to_le_bytes());
            }
            cipher.encrypt_blocks(&mut buf[..chunk.len()]);
            for (x, slot) in chunk.iter_mut().zip(buf.iter()) {
                *x ^= Block::from_bytes((*slot).into());
            }
        }
    }
}

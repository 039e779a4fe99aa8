//! The PRG that stretches each of IKNP's 128 base-OT seeds into a column: AES-128 in counter
//! mode, keyed by the seed,
//! $$G(k)_c = \mathrm{AES}_k(c), \qquad c = 0, 1, 2, \dots$$
//! Each column's key schedule is computed once per session; a batch asks for the blocks
//! `c ∈ [first, first + n)` and the session's counter moves past them, so later batches reuse
//! the seeds (and the ~128 public-key operations of the base OT) without reusing PRG output.
//! The garbler draws each chunk's input labels from one such stream under a fresh random key
//! ([`mod@crate::gc::garble`]).

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;

use crate::Block;

/// How many counter blocks go through AES at once.
const CHUNK: usize = 64;

/// One AES-CTR stream per base-OT seed.
pub(crate) struct ColumnPrg {
    ciphers: Vec<Aes128>,
    /// The same keys expanded for the VAES kernel, where the CPU has it.
    #[cfg(target_arch = "x86_64")]
    vaes: Option<Vec<crate::vaes::RoundKeys>>,
}

impl ColumnPrg {
    /// The streams of `seeds` (one column each).
    pub(crate) fn new(seeds: &[Block]) -> ColumnPrg {
        ColumnPrg {
            ciphers: seeds
                .iter()
                .map(|s| Aes128::new(&GenericArray::from(s.to_bytes())))
                .collect(),
            #[cfg(target_arch = "x86_64")]
            vaes: seeds
                .iter()
                .map(|s| crate::vaes::RoundKeys::detect(s.to_bytes()))
                .collect(),
        }
    }

    /// XORs blocks `first .. first + out.len()` of column `col`'s stream into `out`.
    pub(crate) fn xor_into(&self, col: usize, first: u64, out: &mut [Block]) {
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(keys) = &self.vaes {
            // SAFETY: the keys exist only on CPUs with AES, VAES and AVX-512F.
            done = unsafe { crate::vaes::ctr_xor(&keys[col], first, Block::as_words_mut(out)) };
        }
        let (first, out) = (first + done as u64, &mut out[done..]);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The VAES counter mode (where the CPU has it) gives the generic stream, block for block,
    /// from any first counter and for any length (bulk steps of 32 and the rest).
    #[test]
    fn the_vaes_stream_is_the_generic_one() {
        let seeds = [Block(0x0123_4567_89ab_cdef_0011_2233_4455_6677), Block(42)];
        let fast = ColumnPrg::new(&seeds);
        let generic = ColumnPrg {
            ciphers: fast.ciphers.clone(),
            #[cfg(target_arch = "x86_64")]
            vaes: None,
        };
        for (first, len) in [(0u64, 100usize), (7, 31), (1 << 40, 64), (3, 1)] {
            for col in 0..2 {
                let init: Vec<Block> = (0..len as u128).map(|i| Block(i * 0x9e37_79b9)).collect();
                let (mut a, mut b) = (init.clone(), init.clone());
                fast.xor_into(col, first, &mut a);
                generic.xor_into(col, first, &mut b);
                assert_eq!(a, b, "column {col}, first {first}, {len} blocks");
                assert_ne!(a, init);
            }
        }
    }
}

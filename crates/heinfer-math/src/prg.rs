//! AES-256 in counter mode as the random stream behind every sampler.
//!
//! The stream of a 32-byte seed `k` is `AES-256_k(0) ‖ AES-256_k(1) ‖ AES-256_k(2) ‖ …`, each
//! counter a 128-bit little-endian block: a pseudorandom generator as long as AES-256 is a
//! pseudorandom permutation (the construction of NIST SP 800-90A's CTR_DRBG without its
//! derivation function; a seed is drawn fresh from the OS for every stream that produces
//! secrets, and for every seed-compressed object). Each seed keys one stream, so a counter
//! never repeats under a key within the 2^128 blocks a stream could produce.
//!
//! Why not ChaCha20 (the choice until format version 2 of `heinfer-ckks`): the same stream
//! costs 2.6× less with AES-NI (6.1 vs 2.3 GB/s on an AMD EPYC, `rand_chacha` 0.9's AVX2
//! path), and the samplers are a tenth of a client's encryption time. The `aes` crate picks
//! AES-NI at run time and falls back to a constant-time bitsliced software AES; its key
//! schedule is wiped when the stream is dropped (`zeroize` feature), and so is the buffer
//! here.
//!
//! The stream is the same however it is read: `fill_bytes` in pieces of any size gives the
//! bytes one call would.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes256Enc, Block};
use rand_core::{CryptoRng, RngCore, SeedableRng};

/// Blocks produced per refill of the buffer (what is read in pieces smaller than a block).
const BUF_BLOCKS: usize = 8;
const BUF_BYTES: usize = 16 * BUF_BLOCKS;

/// AES-256-CTR keyed by a 32-byte seed (see the module documentation).
pub struct AesCtr {
    cipher: Aes256Enc,
    /// The same key for the VAES kernel, where the CPU has it.
    #[cfg(target_arch = "x86_64")]
    vaes: Option<crate::prg_vaes::RoundKeys>,
    /// The counter of the next block not yet produced.
    counter: u128,
    buf: [u8; BUF_BYTES],
    /// Bytes of `buf` already handed out (`BUF_BYTES`: empty).
    pos: usize,
}

impl AesCtr {
    /// Writes the next `out.len() / 16` blocks of the stream into `out` (a multiple of 16
    /// bytes): whole batches of blocks through VAES where the CPU has it (unless the low 64
    /// bits of the counter would wrap within them), the rest through the `aes` crate.
    fn blocks_into(&mut self, mut out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(keys) = &self.vaes {
            use crate::prg_vaes::BATCH_BLOCKS;
            let blocks = out.len() / 16 / BATCH_BLOCKS * BATCH_BLOCKS;
            if blocks > 0 && (self.counter as u64).checked_add(blocks as u64).is_some() {
                let (head, tail) = out.split_at_mut(blocks * 16);
                keys.ctr_into(self.counter, head);
                self.counter = self.counter.wrapping_add(blocks as u128);
                out = tail;
            }
        }
        self.blocks_into_generic(out);
    }

    /// [`Self::blocks_into`] through the `aes` crate only.
    fn blocks_into_generic(&mut self, out: &mut [u8]) {
        debug_assert_eq!(out.len() % 16, 0);
        for chunk in out.chunks_exact_mut(16) {
            chunk.copy_from_slice(&self.counter.to_le_bytes());
            self.counter = self.counter.wrapping_add(1);
        }
        // SAFETY: `Block` is `GenericArray<u8, U16>`, a `repr(transparent)` wrapper of
        // `[u8; 16]` (size 16, alignment 1), so `out` is exactly `len / 16` blocks; the view
        // does not outlive this borrow.
        let blocks = unsafe {
            std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<Block>(), out.len() / 16)
        };
        self.cipher.encrypt_blocks(blocks);
    }
}

impl SeedableRng for AesCtr {
    type Seed = [u8; 32];

    fn from_seed(seed: Self::Seed) -> Self {
        Self {
            #[cfg(target_arch = "x86_64")]
            vaes: crate::prg_vaes::RoundKeys::detect(&seed),
            cipher: Aes256Enc::new(&seed.into()),
            counter: 0,
            buf: [0; BUF_BYTES],
            pos: BUF_BYTES,
        }
    }
}

impl RngCore for AesCtr {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }

    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }

    fn fill_bytes(&mut self, mut dst: &mut [u8]) {
        // what is left of the buffered blocks first, then whole blocks straight into `dst`,
        // then a refill for the tail
        let k = (BUF_BYTES - self.pos).min(dst.len());
        dst[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        dst = &mut dst[k..];
        let whole = dst.len() / 16 * 16;
        if whole > 0 {
            let (head, tail) = dst.split_at_mut(whole);
            self.blocks_into(head);
            dst = tail;
        }
        if !dst.is_empty() {
            let mut buf = [0u8; BUF_BYTES];
            self.blocks_into(&mut buf);
            self.buf = buf;
            dst.copy_from_slice(&self.buf[..dst.len()]);
            self.pos = dst.len();
        }
    }
}

impl CryptoRng for AesCtr {}

impl Drop for AesCtr {
    fn drop(&mut self) {
        // the key schedule wipes itself (aes's `zeroize`); the buffered output and the
        // counter are wiped here
        for b in self.buf.iter_mut() {
            // SAFETY: `b` is a valid, aligned place of a plain byte.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        // SAFETY: as above, a plain integer.
        unsafe { std::ptr::write_volatile(&mut self.counter, 0) };
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::AesCtr;
    use proptest::prelude::*;
    use rand_core::{RngCore, SeedableRng};

    #[test]
    fn a_block_is_fips_197_aes_256() {
        // FIPS-197 appendix C.3: key 00 01 … 1f, plaintext 00 11 … ff
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let mut s = AesCtr::from_seed(key);
        s.counter = u128::from_le_bytes(std::array::from_fn(|i| (i as u8) * 0x11));
        let mut out = [0u8; 16];
        s.fill_bytes(&mut out);
        let want = [
            0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49,
            0x60, 0x89,
        ];
        assert_eq!(out, want);
    }

    #[test]
    fn the_stream_is_pinned() {
        // the expansion of a seed is part of the wire format: this changes only with it
        let mut s = AesCtr::from_seed([7; 32]);
        let words: Vec<u64> = (0..3).map(|_| s.next_u64()).collect();
        let mut again = AesCtr::from_seed([7; 32]);
        let mut block = [0u8; 16];
        again.fill_bytes(&mut block);
        assert_eq!(words[0].to_le_bytes(), block[..8]);
        assert_eq!(
            words,
            [
                15339380072497696010,
                11754515732646096508,
                6236372579225220697
            ],
            "the stream of a seed changes only with a format version of heinfer-ckks"
        );
    }

    /// The VAES kernel (where this CPU has it) writes the `aes` crate's bytes: from any
    /// counter, a wrapping low word included, and for lengths around its batch size.
    #[test]
    fn the_vaes_stream_is_the_aes_crates() {
        let mut os = [0u8; 32];
        getrandom::fill(&mut os).unwrap();
        for (start, len) in [
            (0u128, 16 * 1024),
            (5, 512),
            (u64::MAX as u128 - 40, 4096),
            (u64::MAX as u128 + 3, 1536),
            (u128::MAX - 10, 1024),
            (1 << 70, 16 * 33),
        ] {
            let mut fast = AesCtr::from_seed(os);
            fast.counter = start;
            let mut generic = AesCtr::from_seed(os);
            generic.counter = start;
            #[cfg(target_arch = "x86_64")]
            {
                generic.vaes = None;
            }
            let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
            fast.fill_bytes(&mut a);
            generic.fill_bytes(&mut b);
            assert!(a == b, "counter {start}, {len} bytes");
            assert_eq!(fast.counter, generic.counter);
        }
    }

    proptest! {
        #[test]
        fn any_split_of_the_reads_gives_the_same_stream(cuts in proptest::collection::vec(0usize..300, 1..12), seed in any::<[u8; 32]>()) {
            let total: usize = cuts.iter().sum();
            let mut whole = vec![0u8; total];
            AesCtr::from_seed(seed).fill_bytes(&mut whole);
            let mut s = AesCtr::from_seed(seed);
            let mut pieces = Vec::with_capacity(total);
            for &c in &cuts {
                let mut p = vec![0u8; c];
                s.fill_bytes(&mut p);
                pieces.extend(p);
            }
            prop_assert_eq!(pieces, whole);
        }
    }
}

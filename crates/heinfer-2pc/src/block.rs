//! A 128-bit block: a wire label, a hash output, a row of the OT-extension matrix.

use std::ops::{BitAnd, BitXor, BitXorAssign};

/// 128 bits, XOR-able. Little-endian when turned into bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Block(pub u128);

impl Block {
    /// The all-zero block.
    pub const ZERO: Block = Block(0);
    /// Size in bytes.
    pub const BYTES: usize = 16;

    /// The least significant bit (the point-and-permute colour of a label).
    #[inline]
    pub fn lsb(self) -> bool {
        self.0 & 1 == 1
    }

    /// Little-endian bytes.
    #[inline]
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }

    /// From little-endian bytes.
    #[inline]
    pub fn from_bytes(bytes: [u8; 16]) -> Block {
        Block(u128::from_le_bytes(bytes))
    }

    /// Reads the blocks of `bytes` (whose length must be a multiple of 16).
    pub fn read_all(bytes: &[u8], what: &'static str) -> crate::Result<Vec<Block>> {
        if !bytes.len().is_multiple_of(Self::BYTES) {
            return Err(crate::TwoPartyError::Deserialize {
                what,
                reason: format!(
                    "{} bytes is not a whole number of 16-byte blocks",
                    bytes.len()
                ),
            });
        }
        let mut out = vec![Block::ZERO; bytes.len() / Self::BYTES];
        Self::copy_from_bytes(bytes, &mut out);
        Ok(out)
    }

    /// Overwrites `out` with the blocks of `bytes` (exactly `16 · out.len()` bytes): on a
    /// little-endian target one copy of the whole buffer (a block's bytes are its u128's).
    pub(crate) fn copy_from_bytes(bytes: &[u8], out: &mut [Block]) {
        assert_eq!(bytes.len(), out.len() * Self::BYTES, "16 bytes per block");
        if cfg!(target_endian = "little") {
            Self::as_bytes_mut(out).copy_from_slice(bytes);
            return;
        }
        for (b, c) in out.iter_mut().zip(bytes.chunks_exact(Self::BYTES)) {
            *b = Block::from_bytes(c.try_into().expect("chunk of 16"));
        }
    }

    /// Appends the blocks to `out` as bytes.
    pub fn write_all(blocks: &[Block], out: &mut Vec<u8>) {
        out.reserve(blocks.len() * Self::BYTES);
        Self::write_into(blocks, out).expect("a Vec takes every write");
    }

    /// Writes the blocks as bytes to `out` (a `Vec<u8>`, or a `&mut [u8]` that advances; an
    /// error only if a slice is too short).
    pub fn write_into<W: std::io::Write>(blocks: &[Block], out: &mut W) -> std::io::Result<()> {
        if cfg!(target_endian = "little") {
            return out.write_all(Self::as_bytes(blocks));
        }
        for b in blocks {
            out.write_all(&b.to_bytes())?;
        }
        Ok(())
    }

    /// The blocks as the `u128` words they are (for the SIMD kernels).
    pub(crate) fn as_words(blocks: &[Block]) -> &[u128] {
        // SAFETY: `Block` is a `repr(transparent)` u128.
        unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const u128, blocks.len()) }
    }

    /// [`Self::as_words`], writable.
    pub(crate) fn as_words_mut(blocks: &mut [Block]) -> &mut [u128] {
        // SAFETY: `Block` is a `repr(transparent)` u128.
        unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr() as *mut u128, blocks.len()) }
    }

    /// The memory of `blocks` as bytes (their little-endian form on a little-endian target).
    fn as_bytes(blocks: &[Block]) -> &[u8] {
        // SAFETY: `Block` is a `repr(transparent)` u128 (no padding, every byte initialized);
        // the length is the slice's size in bytes and u8 has alignment 1.
        unsafe {
            std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks))
        }
    }

    /// The memory of `blocks` as writable bytes (every byte pattern is a valid u128).
    fn as_bytes_mut(blocks: &mut [Block]) -> &mut [u8] {
        // SAFETY: as in `as_bytes`; any bytes written form a valid u128.
        unsafe {
            std::slice::from_raw_parts_mut(
                blocks.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(blocks),
            )
        }
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({:032x})", self.0)
    }
}

impl BitXor for Block {
    type Output = Block;
    #[inline]
    fn bitxor(self, rhs: Block) -> Block {
        Block(self.0 ^ rhs.0)
    }
}

impl BitXorAssign for Block {
    #[inline]
    fn bitxor_assign(&mut self, rhs: Block) {
        self.0 ^= rhs.0;
    }
}

impl BitAnd for Block {
    type Output = Block;
    #[inline]
    fn bitand(self, rhs: Block) -> Block {
        Block(self.0 & rhs.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_refuse_partial_blocks() {
        let blocks = vec![Block(1), Block(u128::MAX), Block(0x0123_4567_89ab_cdef)];
        let mut bytes = Vec::new();
        Block::write_all(&blocks, &mut bytes);
        assert_eq!(Block::read_all(&bytes, "test").unwrap(), blocks);
        assert!(Block::read_all(&bytes[..17], "test").is_err());
    }
}

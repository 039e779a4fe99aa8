//! Randomness: ChaCha20 seeded from the operating system (`getrandom`). Seeded generators are
//! for tests only ([`seeded`]).

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::{Block, Result, TwoPartyError};

/// A ChaCha20 generator seeded with 32 bytes from the OS.
pub fn os_rng() -> Result<ChaCha20Rng> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| TwoPartyError::Randomness(e.to_string()))?;
    Ok(ChaCha20Rng::from_seed(seed))
}

/// A deterministic generator, for tests and known-answer vectors only.
pub fn seeded(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// A uniformly random block.
pub fn random_block<R: RngCore>(rng: &mut R) -> Block {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    Block::from_bytes(bytes)
}

/// A uniform value in `[0, p)` by rejection sampling (no modulo bias), `p ≥ 1`.
pub fn uniform_mod<R: RngCore>(rng: &mut R, p: u64) -> u64 {
    let bits = 64 - p.leading_zeros();
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    loop {
        let v = rng.next_u64() & mask;
        if v < p {
            return v;
        }
    }
}

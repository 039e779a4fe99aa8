//! A per-thread pool of word buffers, so hot paths reuse memory instead of allocating and
//! zero-filling megabytes per operation (SEAL's memory pools, in small).
//!
//! Part of `heinfer-ckks`, below the evaluator, the encryptor and key generation. Buffers come
//! back from `take` with arbitrary (initialized) contents: callers overwrite every word they
//! read. A buffer that held anything derived from the secret key or from encryption randomness
//! (the ternary `u`, the errors, `a·s`, decryption and key-generation temporaries) goes back
//! through `give_secret`, which zeroes all of its capacity first, so no later operation — and
//! no memory dump of the pool — finds secret material in it. [`stats`] shows what the current
//! thread's pool holds.

use std::cell::RefCell;
use zeroize::Zeroize;

const MAX_POOLED: usize = 24;

thread_local! {
    static POOL: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of exactly `len` words with arbitrary contents.
pub(crate) fn take(len: usize) -> Vec<u64> {
    let found = POOL.with(|p| {
        let mut p = p.borrow_mut();
        let best = p
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= len)
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i);
        best.map(|i| p.swap_remove(i))
    });
    match found {
        Some(mut v) => {
            if v.len() >= len {
                v.truncate(len);
            } else {
                v.resize(len, 0);
            }
            v
        }
        None => vec![0; len],
    }
}

/// Returns a buffer whose contents are public (ciphertext or key data) to this thread's pool.
pub(crate) fn give(v: Vec<u64>) {
    if v.capacity() == 0 {
        return;
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < MAX_POOLED {
            p.push(v);
        }
    });
}

/// Returns a buffer that held secret-derived data to this thread's pool, after zeroing every
/// word of its capacity (volatile writes the compiler cannot drop). A buffer the pool has no
/// room for is freed zeroed.
pub(crate) fn give_secret(mut v: Vec<u64>) {
    wipe(&mut v);
    give(v);
}

/// Zeroes every word of `v`, its spare capacity included (a truncated buffer keeps the words
/// it held beyond its length); the length is unchanged.
pub(crate) fn wipe(v: &mut Vec<u64>) {
    v.as_mut_slice().zeroize();
    v.spare_capacity_mut().zeroize();
}

/// What the calling thread's pool holds: the engine runs on rayon workers, so call it on
/// each of them (e.g. with `rayon::broadcast`) to see the whole pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Buffers held.
    pub buffers: usize,
    /// Words of capacity held, over all buffers.
    pub words: usize,
    /// Words (within each buffer's length) that are not zero. Buffers returned after holding
    /// secret-derived data are all zero; non-zero words come from public data.
    pub nonzero_words: usize,
}

/// The pool statistics of the calling thread.
pub fn stats() -> PoolStats {
    POOL.with(|p| {
        let p = p.borrow();
        PoolStats {
            buffers: p.len(),
            words: p.iter().map(|v| v.capacity()).sum(),
            nonzero_words: p
                .iter()
                .map(|v| v.iter().filter(|&&x| x != 0).count())
                .sum(),
        }
    })
}

/// Frees every buffer of the calling thread's pool (zeroed first).
pub fn clear() {
    POOL.with(|p| {
        for mut v in p.borrow_mut().drain(..) {
            wipe(&mut v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_buffers_come_back_zeroed_capacity_included() {
        clear();
        let mut v = take(64);
        v.iter_mut().for_each(|x| *x = 0xdead_beef);
        v.truncate(16); // 48 secret words now sit in the spare capacity
        give_secret(v);
        let s = stats();
        assert_eq!((s.buffers, s.nonzero_words), (1, 0));
        let mut again = take(16); // the same buffer: length 16, capacity 64
        assert!(again.capacity() >= 64);
        // SAFETY: u64 has no invalid values and `wipe` wrote every word of the capacity
        unsafe { again.set_len(64) };
        assert!(again.iter().all(|&x| x == 0));
        give(again);
        clear();
        assert_eq!(stats(), PoolStats::default());
    }
}

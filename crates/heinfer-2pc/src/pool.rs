//! Garbled tables' buffers kept between queries.
//!
//! A step's tables are the largest buffers of the protocol (hundreds of MB per CIFAR-A image
//! on each side). Allocated afresh for every query, each one cost the kernel's zeroing of
//! every page it touched: 70 % of the client's parsing of its garbled circuits was
//! `clear_page_erms` (`perf`, CIFAR-A), the allocator having returned the previous query's
//! buffers to the OS. The pool keeps up to [`KEEP_BYTES`] of them for the next query; the
//! garbler and the evaluator (both sides of an in-process run, or each party of a service)
//! take them back. Garbled tables are what the garbler sends in the clear, so nothing secret
//! is kept; every row of a reused buffer is written before it is read.

use std::sync::Mutex;

use crate::Block;

/// Most bytes of buffers kept (past that, the smallest go back to the allocator).
pub const KEEP_BYTES: usize = 1 << 30;
/// Buffers below this many blocks are not worth keeping (1 MiB).
const MIN_BLOCKS: usize = 1 << 16;

static POOL: Mutex<Vec<Vec<Block>>> = Mutex::new(Vec::new());

/// A vector of `len` blocks: a kept buffer with the capacity (the smallest that fits; its old
/// contents, which the caller overwrites) or a new zeroed one.
pub(crate) fn take(len: usize) -> Vec<Block> {
    if len >= MIN_BLOCKS {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let best = (0..pool.len())
            .filter(|&i| pool[i].capacity() >= len)
            .min_by_key(|&i| pool[i].capacity());
        if let Some(i) = best {
            let mut v = pool.swap_remove(i);
            drop(pool);
            if v.len() >= len {
                v.truncate(len);
            } else {
                v.resize(len, Block::ZERO);
            }
            return v;
        }
    }
    vec![Block::ZERO; len]
}

/// Gives a buffer back for a later [`take`] (kept while the pool holds under [`KEEP_BYTES`]).
pub(crate) fn give(v: Vec<Block>) {
    if v.capacity() < MIN_BLOCKS {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    pool.push(v);
    let bytes = |p: &Vec<Vec<Block>>| p.iter().map(|v| v.capacity() * Block::BYTES).sum::<usize>();
    while bytes(&pool) > KEEP_BYTES {
        let smallest = (0..pool.len())
            .min_by_key(|&i| pool[i].capacity())
            .expect("over the limit: not empty");
        pool.swap_remove(smallest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_at_the_asked_length() {
        let len = MIN_BLOCKS + 5;
        let mut v = take(len);
        assert_eq!(v.len(), len);
        v[0] = Block(7);
        let cap = v.capacity();
        give(v);
        let w = take(len - 3);
        assert_eq!(w.len(), len - 3);
        assert!(w.capacity() >= len - 3 && w.capacity() <= cap.max(len));
        let small = take(10);
        assert_eq!(small, vec![Block::ZERO; 10]);
        give(w);
        give(small);
    }
}

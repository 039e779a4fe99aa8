//! A per-thread pool of word buffers, so hot paths reuse memory instead of allocating and
//! zero-filling megabytes per operation. Buffers come back with arbitrary (initialized)
//! contents: callers overwrite every word they read.

use std::cell::RefCell;

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

/// Returns a buffer to this thread's pool.
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

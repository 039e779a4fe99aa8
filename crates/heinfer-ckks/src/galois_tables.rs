//! A bounded cache of the evaluation-form permutation tables of Galois automorphisms.
//!
//! Part of `heinfer-ckks` (parameters layer). In NTT form `σ_g` is a pure permutation of the
//! `N` evaluation points (see `heinfer_math::automorphism`): one `u32` table of `N` entries per
//! Galois element, shared by every RNS limb. Rotations, Galois-key generation and Galois-key
//! decoding look the table up by `g`.
//!
//! There are `N` odd elements below `2N`, so caching every table ever asked for could hold
//! `4N²` bytes (16 GiB at `logN = 16`), and Galois elements come from caller input (keys
//! decoded from bytes, rotation steps). The cache therefore keeps at most
//! [`GALOIS_TABLE_CACHE_CAPACITY`] tables and evicts the least recently used one. A miss costs
//! one `O(N)` table construction, negligible beside the key switch that uses the table.

use crate::error::Result;
use heinfer_math::automorphism::ntt_permutation;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most permutation tables kept per parameter set: at most `128·4N` bytes (32 MiB at
/// `logN = 16`, 4 MiB at `logN = 13`). A baby-step giant-step transform over every slot of
/// `logN = 15` uses about 2·√16384 = 256 elements and then recomputes a table now and then,
/// which is cheap (see the module documentation).
pub const GALOIS_TABLE_CACHE_CAPACITY: usize = 128;

/// Least-recently-used cache of permutation tables, keyed by Galois element.
pub(crate) struct GaloisTableCache {
    n: usize,
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `g ↦ (table, tick of its last use)`.
    entries: HashMap<u64, (Arc<Vec<u32>>, u64)>,
    clock: u64,
}

impl GaloisTableCache {
    /// An empty cache for ring degree `n` holding at most `capacity` (≥ 1) tables.
    pub(crate) fn new(n: usize, capacity: usize) -> Self {
        Self {
            n,
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // the state is a plain map: a panic elsewhere while it was held cannot leave it broken
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table of `σ_g` (`out[j] = in[table[j]]`), computed on a miss. Fails for an
    /// invalid Galois element (even, or not below `2N`).
    pub(crate) fn get(&self, g: u64) -> Result<Arc<Vec<u32>>> {
        {
            let mut s = self.lock();
            s.clock += 1;
            let now = s.clock;
            if let Some((t, used)) = s.entries.get_mut(&g) {
                *used = now;
                return Ok(t.clone());
            }
        }
        // built outside the lock: other threads keep hitting the cache meanwhile
        let table = Arc::new(ntt_permutation(self.n, g)?);
        let mut s = self.lock();
        s.clock += 1;
        let now = s.clock;
        if !s.entries.contains_key(&g) && s.entries.len() >= self.capacity {
            let oldest = s
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(&k, _)| k);
            if let Some(k) = oldest {
                s.entries.remove(&k);
            }
        }
        let entry = s.entries.entry(g).or_insert_with(|| (table, now));
        entry.1 = now;
        Ok(entry.0.clone())
    }

    /// Number of tables held.
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_table() {
        let c = GaloisTableCache::new(64, 3);
        for g in [3, 5, 7] {
            c.get(g).unwrap();
        }
        c.get(3).unwrap(); // 5 is now the oldest
        c.get(9).unwrap();
        assert_eq!(c.len(), 3);
        let held: Vec<u64> = {
            let s = c.lock();
            let mut v: Vec<u64> = s.entries.keys().copied().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(held, vec![3, 7, 9]);
        assert_eq!(*c.get(9).unwrap(), ntt_permutation(64, 9).unwrap());
    }

    #[test]
    fn invalid_elements_are_refused_and_not_cached() {
        let c = GaloisTableCache::new(64, 4);
        assert!(c.get(4).is_err());
        assert!(c.get(129).is_err());
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn every_element_of_the_ring_stays_within_capacity() {
        let n = 1024;
        let c = GaloisTableCache::new(n, GALOIS_TABLE_CACHE_CAPACITY);
        for g in (1..2 * n as u64).step_by(2) {
            c.get(g).unwrap();
            assert!(c.len() <= GALOIS_TABLE_CACHE_CAPACITY);
        }
        assert_eq!(c.len(), GALOIS_TABLE_CACHE_CAPACITY);
    }
}

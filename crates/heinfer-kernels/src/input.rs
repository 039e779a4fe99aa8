//! What the batch-axis kernels read: ciphertexts (64-bit residues) or a [`NarrowBatch`]
//! (the same residues in 32-bit words, half the memory traffic of a query's first layer).
//!
//! The kernels see one interface, [`Inputs`]: the common shape (checked once) and each
//! input's part as [`Words`], which the tile loops center, split or prefetch without caring
//! how wide the words are.

use crate::convert::simd;
use crate::error::{KernelError, Result};
use heinfer_ckks::compact::Words;
use heinfer_ckks::{Ciphertext, CkksParams, NarrowBatch};
use std::borrow::Borrow;
use std::ops::Range;

/// Level, parts and scale shared by every input of a kernel call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InputShape {
    pub level: usize,
    pub size: usize,
    pub scale: f64,
}

/// The inputs of one kernel call.
pub(crate) trait Inputs: Sync {
    /// Number of inputs.
    fn count(&self) -> usize;
    /// Checks that every input belongs to `params` and shares the first one's level, size
    /// and scale; returns that shape. Needs at least one input.
    fn shape(&self, params: &CkksParams) -> Result<InputShape>;
    /// Input `k`'s part `p`, every limb (limb `i` at `[i·N, (i+1)·N)`).
    fn words(&self, k: usize, p: usize) -> Words<'_>;
}

impl<C: Borrow<Ciphertext> + Sync> Inputs for [C] {
    fn count(&self) -> usize {
        self.len()
    }

    fn shape(&self, params: &CkksParams) -> Result<InputShape> {
        let first = self[0].borrow();
        for (k, ct) in self.iter().map(Borrow::borrow).enumerate() {
            params.check_id(ct.params_id())?;
            if ct.level() != first.level() || ct.size() != first.size() {
                return Err(KernelError::InvalidOperands(format!(
                    "input {k} is at level {} with {} parts, input 0 at level {} with {}",
                    ct.level(),
                    ct.size(),
                    first.level(),
                    first.size()
                )));
            }
            if ((ct.scale() - first.scale()) / first.scale()).abs()
                > heinfer_ckks::evaluator::SCALE_TOLERANCE
            {
                return Err(KernelError::InvalidOperands(format!(
                    "input {k} has scale {:e}, input 0 {:e}",
                    ct.scale(),
                    first.scale()
                )));
            }
        }
        Ok(InputShape {
            level: first.level(),
            size: first.size(),
            scale: first.scale(),
        })
    }

    fn words(&self, k: usize, p: usize) -> Words<'_> {
        Words::Wide(self[k].borrow().parts()[p].data())
    }
}

impl Inputs for NarrowBatch {
    fn count(&self) -> usize {
        self.len()
    }

    fn shape(&self, params: &CkksParams) -> Result<InputShape> {
        params.check_id(self.params_id())?;
        Ok(InputShape {
            level: self.level(),
            size: self.size(),
            scale: self.scale(),
        })
    }

    fn words(&self, k: usize, p: usize) -> Words<'_> {
        Words::Narrow(self.part(k, p))
    }
}

/// `dst = words[range]` centered to `(−q/2, q/2]`, as f64.
#[inline(always)]
pub(crate) fn center(words: Words<'_>, range: Range<usize>, q: u64, dst: &mut [f64]) {
    match words {
        Words::Wide(w) => simd::center(&w[range], q, dst),
        Words::Narrow(w) => simd::center32(&w[range], q, dst),
    }
}

/// `words[range]` centered and split as `hi·2^s + lo` (see `simd::split`).
#[inline(always)]
pub(crate) fn split(
    words: Words<'_>,
    range: Range<usize>,
    q: u64,
    s: u32,
    lo: &mut [f64],
    hi: &mut [f64],
) {
    match words {
        Words::Wide(w) => simd::split(&w[range], q, s, lo, hi),
        Words::Narrow(w) => simd::split32(&w[range], q, s, lo, hi),
    }
}

/// The residues `words[range]` as 64-bit words: borrowed when they are, else widened into
/// `tmp` (at least as long as the range).
#[inline(always)]
pub(crate) fn wide<'a>(words: Words<'a>, range: Range<usize>, tmp: &'a mut [u64]) -> &'a [u64] {
    match words {
        Words::Wide(w) => &w[range],
        Words::Narrow(w) => {
            let tmp = &mut tmp[..range.len()];
            for (d, &x) in tmp.iter_mut().zip(&w[range]) {
                *d = u64::from(x);
            }
            tmp
        }
    }
}

/// Asks the CPU for the cache lines of `words[range]` (see `crate::prefetch`).
#[inline(always)]
pub(crate) fn prefetch(words: Words<'_>, range: Range<usize>) {
    match words {
        Words::Wide(w) => crate::prefetch::prefetch(&w[range]),
        Words::Narrow(w) => crate::prefetch::prefetch(&w[range]),
    }
}

//! Element-wise operations over many ciphertexts, in parallel (one task per ciphertext; the
//! engine parallelizes over limbs inside each).

use crate::error::Result;
use heinfer_ckks::{Ciphertext, Evaluator, RelinKey};
use rayon::prelude::*;

/// `ct²` for every ciphertext, without relinearization (size 3 results).
pub fn square(ev: &Evaluator, cts: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
    Ok(cts
        .par_iter()
        .map(|c| ev.square(c))
        .collect::<heinfer_ckks::Result<_>>()?)
}

/// Relinearizes every size-3 ciphertext in place.
pub fn relinearize(ev: &Evaluator, cts: &mut [Ciphertext], rlk: &RelinKey) -> Result<()> {
    Ok(cts
        .par_iter_mut()
        .try_for_each(|c| ev.relinearize_assign(c, rlk))?)
}

/// Rescales every ciphertext `times` times (divides by the last `times` primes).
pub fn rescale(ev: &Evaluator, cts: &mut [Ciphertext], times: usize) -> Result<()> {
    Ok(cts
        .par_iter_mut()
        .try_for_each(|c| (0..times).try_for_each(|_| ev.rescale_assign(c)))?)
}

/// Drops every ciphertext to `level` (no scaling).
pub fn drop_to_level(ev: &Evaluator, cts: &mut [Ciphertext], level: usize) -> Result<()> {
    for c in cts.iter_mut() {
        *c = ev.drop_to_level(c, level)?;
    }
    Ok(())
}

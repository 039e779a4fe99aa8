//! Element-wise operations over many ciphertexts, in place and in parallel (one task per
//! ciphertext; the engine parallelizes over limbs inside each). Working in place matters:
//! a CryptoNets batch squares ~1 GB of ciphertexts, and fresh memory costs a page fault
//! and a kernel-zeroed page per 4 KiB.

use crate::error::Result;
use heinfer_ckks::{Ciphertext, Evaluator, RelinKey};
use rayon::prelude::*;

/// `ct²` for every ciphertext, in place, without relinearization (size-3 results).
pub fn square(ev: &Evaluator, cts: &mut [Ciphertext]) -> Result<()> {
    Ok(cts.par_iter_mut().try_for_each(|c| ev.square_assign(c))?)
}

/// Relinearizes every size-3 ciphertext in place.
pub fn relinearize(ev: &Evaluator, cts: &mut [Ciphertext], rlk: &RelinKey) -> Result<()> {
    Ok(cts
        .par_iter_mut()
        .try_for_each(|c| ev.relinearize_assign(c, rlk))?)
}

/// Divides every ciphertext by its last `times` primes at once, in place
/// ([`Evaluator::rescale_by_many_assign`]: one exact rounding by their product; every
/// ciphertext is checked first, so on an error none changes).
pub fn rescale(ev: &Evaluator, cts: &mut [Ciphertext], times: usize) -> Result<()> {
    if times == 0 {
        return Ok(());
    }
    let mut refs: Vec<&mut Ciphertext> = cts.iter_mut().collect();
    Ok(ev.rescale_by_many_assign(&mut refs, times)?)
}

/// Drops every ciphertext to `level` in place (no scaling).
pub fn drop_to_level(cts: &mut [Ciphertext], level: usize) -> Result<()> {
    for c in cts.iter_mut() {
        c.truncate_to_level(level)?;
    }
    Ok(())
}

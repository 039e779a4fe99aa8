//! Writing kernel outputs: the shared output pointer of parallel tile tasks, and the bias.

use crate::error::{KernelError, Result};
use heinfer_ckks::{Ciphertext, CkksParams};
use heinfer_math::vecops;
use rayon::prelude::*;

/// Adds `round(b_j·scale)` (times `1 + i` for complex packing) to output `j`.
pub(crate) fn add_bias(
    params: &CkksParams,
    cts: &mut [Ciphertext],
    bias: &[f64],
    complex: bool,
) -> Result<()> {
    let n = params.n();
    let level = cts.first().map_or(0, |c| c.level());
    let moduli = &params.moduli()[..=level];
    let one_plus_i: Vec<Vec<u64>> = if complex {
        moduli
            .iter()
            .enumerate()
            .map(|(i, m)| params.x_half_ntt(i).iter().map(|&x| m.add(x, 1)).collect())
            .collect()
    } else {
        Vec::new()
    };
    cts.par_iter_mut()
        .zip(bias.par_iter())
        .try_for_each(|(ct, &b)| -> Result<()> {
            if b == 0.0 {
                return Ok(());
            }
            let v = (b * ct.scale()).round();
            if v.abs() >= 2f64.powi(126) {
                return Err(KernelError::InvalidOperands(format!(
                    "bias {b} at scale {:e} exceeds 126 bits",
                    ct.scale()
                )));
            }
            let v = v as i128;
            let c0 = &mut ct.parts_mut()[0];
            for (i, m) in moduli.iter().enumerate() {
                let r = m.reduce_i128(v);
                let limb = &mut c0.data_mut()[i * n..(i + 1) * n];
                if complex {
                    vecops::mul_scalar_add_assign(limb, &one_plus_i[i], r, m.shoup(r), m);
                } else {
                    vecops::add_scalar_assign(limb, r, m.q);
                }
            }
            Ok(())
        })
}

/// A raw pointer to output data shared by the tasks of one [`LinearLayer::apply`], which
/// write disjoint ranges.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr(pub(crate) *mut u64);
// SAFETY: used only inside `apply`, whose tasks write pairwise disjoint ranges of live buffers.
unsafe impl Send for SyncPtr {}
unsafe impl Sync for SyncPtr {}

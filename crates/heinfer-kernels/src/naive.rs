//! The baseline linear layer, without the nGraph-HE2 optimizations: every weight is encoded
//! as a general plaintext (the same value in every slot, through the full encoder: FFT and
//! NTT per limb), multiplied with a general ciphertext–plaintext product, and — with
//! `rescale_each` — every product is rescaled before it is summed. The benchmarks run it
//! beside [`crate::LinearLayer`] to print the gain of each optimization as a ratio.

use crate::error::{KernelError, Result};
use heinfer_ckks::{Ciphertext, Encoder, Evaluator};
use rayon::prelude::*;

/// `out_j = Σ_k w_jk·in_k + b_j` for the rows `rows` of the dense `weights`
/// (`out_count × inputs.len()`, row-major, real values). Weights are encoded at scale
/// `q_ℓ` when `rescale_each` (so each rescaled product keeps the input scale) and at
/// `weight_scale` otherwise (then nothing is rescaled).
pub fn linear_rows(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    weights: &[f64],
    bias: &[f64],
    rows: &[usize],
    weight_scale: f64,
    rescale_each: bool,
) -> Result<Vec<Ciphertext>> {
    let k = inputs.len();
    if k == 0 || weights.len() % k != 0 || bias.len() * k != weights.len() {
        return Err(KernelError::InvalidOperands(format!(
            "{} weights, {} bias values for {k} inputs",
            weights.len(),
            bias.len()
        )));
    }
    let level = inputs[0].level();
    let slots = enc.slots();
    let w_scale = if rescale_each {
        ev.params().q()[level] as f64
    } else {
        weight_scale
    };
    rows.par_iter()
        .map(|&j| {
            let row = weights
                .get(j * k..(j + 1) * k)
                .ok_or_else(|| KernelError::InvalidOperands(format!("row {j} out of range")))?;
            let mut acc: Option<Ciphertext> = None;
            for (x, &w) in inputs.iter().zip(row) {
                if w == 0.0 {
                    continue;
                }
                let pt = enc.encode_real(&vec![w; slots], w_scale, level)?;
                let mut t = ev.mul_plain(x, &pt)?;
                if rescale_each {
                    ev.rescale_assign(&mut t)?;
                }
                match acc.as_mut() {
                    Some(a) => {
                        t.set_scale(a.scale())?;
                        ev.add_assign(a, &t)?
                    }
                    None => acc = Some(t),
                }
            }
            let mut a =
                acc.ok_or_else(|| KernelError::InvalidOperands(format!("row {j} has no weight")))?;
            let pt = enc.encode_real(&vec![bias[j]; slots], a.scale(), a.level())?;
            ev.add_plain_assign(&mut a, &pt)?;
            Ok(a)
        })
        .collect()
}

//! The baseline linear layer, without the nGraph-HE2 optimizations: every weight is encoded
//! as a general plaintext (the same value in every slot, through the full encoder: FFT and
//! NTT per limb), multiplied with a general ciphertext–plaintext product, and — with
//! `rescale_each` — every product is rescaled before it is summed. The benchmarks run it
//! beside [`crate::LinearLayer`] to print the gain of each optimization as a ratio.

use crate::error::{KernelError, Result};
use heinfer_ckks::{Ciphertext, Encoder, Evaluator, Plaintext};
use rayon::prelude::*;

/// The general plaintexts of one output row: `(input index, plaintext)` per non-zero weight.
pub type EncodedRow = Vec<(usize, Plaintext)>;

/// `out_j = Σ_k w_jk·in_k + b_j` for the rows `rows` of the dense `weights`
/// (`out_count × inputs.len()`, row-major, real values). Weights are encoded at scale
/// `q_ℓ` when `rescale_each` (so each rescaled product keeps the input scale) and at
/// `weight_scale` otherwise (then nothing is rescaled). Each row's weights are encoded when
/// the row is computed (a whole layer's general plaintexts would not fit in memory).
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
    check(inputs, weights, bias)?;
    rows.par_iter()
        .map(|&j| {
            let row = encode_row(ev, enc, inputs, weights, j, weight_scale, rescale_each)?;
            apply_row(ev, enc, inputs, &row, bias, j, rescale_each)
        })
        .collect()
}

/// The general plaintexts of the rows `rows` (see [`linear_rows`]), encoded once, as
/// nGraph-HE2 encodes a model's plaintexts at compile time: the benchmarks time
/// [`apply_rows`] alone against the optimized kernel, which also encodes ahead of time.
pub fn encode_rows(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    weights: &[f64],
    bias: &[f64],
    rows: &[usize],
    weight_scale: f64,
    rescale_each: bool,
) -> Result<Vec<EncodedRow>> {
    check(inputs, weights, bias)?;
    rows.par_iter()
        .map(|&j| encode_row(ev, enc, inputs, weights, j, weight_scale, rescale_each))
        .collect()
}

/// The rows `rows` from their plaintexts of [`encode_rows`] (same `rows`, in order).
pub fn apply_rows(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    encoded: &[EncodedRow],
    bias: &[f64],
    rows: &[usize],
    rescale_each: bool,
) -> Result<Vec<Ciphertext>> {
    if encoded.len() != rows.len() {
        return Err(KernelError::InvalidOperands(format!(
            "{} encoded rows for {} rows",
            encoded.len(),
            rows.len()
        )));
    }
    rows.par_iter()
        .zip(encoded)
        .map(|(&j, row)| apply_row(ev, enc, inputs, row, bias, j, rescale_each))
        .collect()
}

fn check(inputs: &[Ciphertext], weights: &[f64], bias: &[f64]) -> Result<()> {
    let k = inputs.len();
    if k == 0 || weights.len() % k != 0 || bias.len() * k != weights.len() {
        return Err(KernelError::InvalidOperands(format!(
            "{} weights, {} bias values for {k} inputs",
            weights.len(),
            bias.len()
        )));
    }
    Ok(())
}

fn encode_row(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    weights: &[f64],
    j: usize,
    weight_scale: f64,
    rescale_each: bool,
) -> Result<EncodedRow> {
    let k = inputs.len();
    let level = inputs[0].level();
    let w_scale = if rescale_each {
        ev.params().q()[level] as f64
    } else {
        weight_scale
    };
    let row = weights
        .get(j * k..(j + 1) * k)
        .ok_or_else(|| KernelError::InvalidOperands(format!("row {j} out of range")))?;
    let slots = enc.slots();
    let mut out = Vec::new();
    for (i, &w) in row.iter().enumerate() {
        if w != 0.0 {
            out.push((i, enc.encode_real(&vec![w; slots], w_scale, level)?));
        }
    }
    Ok(out)
}

fn apply_row(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    row: &EncodedRow,
    bias: &[f64],
    j: usize,
    rescale_each: bool,
) -> Result<Ciphertext> {
    let slots = enc.slots();
    let mut acc: Option<Ciphertext> = None;
    for (i, pt) in row {
        let x = inputs
            .get(*i)
            .ok_or_else(|| KernelError::InvalidOperands(format!("input {i} out of range")))?;
        let mut t = ev.mul_plain(x, pt)?;
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
    let mut a = acc.ok_or_else(|| KernelError::InvalidOperands(format!("row {j} has no weight")))?;
    let b = bias
        .get(j)
        .ok_or_else(|| KernelError::InvalidOperands(format!("row {j} has no bias")))?;
    let pt = enc.encode_real(&vec![*b; slots], a.scale(), a.level())?;
    ev.add_plain_assign(&mut a, &pt)?;
    Ok(a)
}

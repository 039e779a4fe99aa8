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

/// A dense layer `out_j = Σ_k w_jk·in_k + b_j` as the baseline runs it: `weights` row-major
/// (`out_count × inputs`, real values), encoded at scale `q_ℓ` when `rescale_each` (so each
/// rescaled product keeps the input scale) and at `weight_scale` otherwise (then nothing is
/// rescaled).
#[derive(Clone, Copy, Debug)]
pub struct Dense<'a> {
    /// Row-major weights.
    pub weights: &'a [f64],
    /// One bias per output row.
    pub bias: &'a [f64],
    /// Scale of the weights' plaintexts without `rescale_each`.
    pub weight_scale: f64,
    /// Rescale every product before it is summed (the baseline without lazy rescaling).
    pub rescale_each: bool,
}

/// The rows `rows` of `layer` on `inputs`, each row's weights encoded when the row is
/// computed (a whole layer's general plaintexts would not fit in memory).
pub fn linear_rows(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    layer: Dense<'_>,
    rows: &[usize],
) -> Result<Vec<Ciphertext>> {
    check(inputs, layer)?;
    rows.par_iter()
        .map(|&j| {
            apply_row(
                ev,
                enc,
                inputs,
                &encode_row(ev, enc, inputs, layer, j)?,
                layer,
                j,
            )
        })
        .collect()
}

/// The general plaintexts of the rows `rows` of `layer`, encoded once, as nGraph-HE2 encodes
/// a model's plaintexts at compile time: the benchmarks time [`apply_rows`] alone against the
/// optimized kernel, which also encodes ahead of time.
pub fn encode_rows(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    layer: Dense<'_>,
    rows: &[usize],
) -> Result<Vec<EncodedRow>> {
    check(inputs, layer)?;
    rows.par_iter()
        .map(|&j| encode_row(ev, enc, inputs, layer, j))
        .collect()
}

/// The rows `rows` from their plaintexts of [`encode_rows`] (same `rows`, in order).
pub fn apply_rows(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    encoded: &[EncodedRow],
    layer: Dense<'_>,
    rows: &[usize],
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
        .map(|(&j, row)| apply_row(ev, enc, inputs, row, layer, j))
        .collect()
}

fn check(inputs: &[Ciphertext], layer: Dense<'_>) -> Result<()> {
    let (k, w, b) = (inputs.len(), layer.weights.len(), layer.bias.len());
    if k == 0 || w % k != 0 || b * k != w {
        return Err(KernelError::InvalidOperands(format!(
            "{w} weights, {b} bias values for {k} inputs"
        )));
    }
    Ok(())
}

fn encode_row(
    ev: &Evaluator,
    enc: &Encoder,
    inputs: &[Ciphertext],
    layer: Dense<'_>,
    j: usize,
) -> Result<EncodedRow> {
    let k = inputs.len();
    let level = inputs[0].level();
    let w_scale = if layer.rescale_each {
        ev.params().q()[level] as f64
    } else {
        layer.weight_scale
    };
    let row = layer
        .weights
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
    layer: Dense<'_>,
    j: usize,
) -> Result<Ciphertext> {
    let mut acc: Option<Ciphertext> = None;
    for (i, pt) in row {
        let x = inputs
            .get(*i)
            .ok_or_else(|| KernelError::InvalidOperands(format!("input {i} out of range")))?;
        let mut t = ev.mul_plain(x, pt)?;
        if layer.rescale_each {
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
    let b = layer
        .bias
        .get(j)
        .ok_or_else(|| KernelError::InvalidOperands(format!("row {j} has no bias")))?;
    let pt = enc.encode_real(&vec![*b; enc.slots()], a.scale(), a.level())?;
    ev.add_plain_assign(&mut a, &pt)?;
    Ok(a)
}

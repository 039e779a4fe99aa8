//! Writing kernel outputs: the shared output pointer of parallel tile tasks, and the bias.

use crate::error::{KernelError, Result};
use heinfer_ckks::poly::RnsPoly;
use heinfer_ckks::{Ciphertext, CkksParams};
use heinfer_math::modulus::Modulus;
use heinfer_math::vecops;
use rayon::prelude::*;

/// How the batch is laid out in a plaintext, which decides what "add a constant to every
/// item" means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    /// One real item per slot: the constant polynomial `c`.
    Real,
    /// Two items per slot (real and imaginary parts): `c·(1 + X^{N/2})`, i.e. `c·(1 + i)`.
    Complex,
    /// One item per coefficient: `c·(1 + X + … + X^{N−1})`.
    Coefficients,
}

impl Packing {
    /// Per limb `i ≤ level`, the NTT-form polynomial a bias constant multiplies, or `None`
    /// for the constant polynomial.
    pub(crate) fn bias_vectors(self, params: &CkksParams, level: usize) -> Vec<Option<Vec<u64>>> {
        let moduli = params.moduli();
        (0..=level)
            .map(|i| match self {
                Packing::Real => None,
                Packing::Complex => Some(
                    params
                        .x_half_ntt(i)
                        .iter()
                        .map(|&x| moduli[i].add(x, 1))
                        .collect(),
                ),
                Packing::Coefficients => Some(params.ones_ntt(i).to_vec()),
            })
            .collect()
    }
}

/// Output polynomials being written by parallel tile tasks: one ciphertext of `parts` parts
/// and `limbs` limbs per output. The polynomials of the outputs a kernel computes (`written[j]`) are
/// not zero-filled first — the tasks write every word of them, and zeroing 28 MB (a
/// CryptoNets-ReLU convolution) to 118 MB (CryptoNets' chain) per call only to overwrite it
/// was a pass over memory for nothing; the others (the bias alone) are zero.
pub(crate) struct Outputs {
    bufs: Vec<Vec<Vec<u64>>>,
    len: usize,
    n: usize,
}

impl Outputs {
    /// The polynomials, once the tasks have written them.
    ///
    /// # Safety
    /// Every word `[0, n·limbs)` of every part of every output allocated as written must have
    /// been written through its pointer.
    pub(crate) unsafe fn assume_written(self) -> Vec<Vec<RnsPoly>> {
        let (len, n) = (self.len, self.n);
        self.bufs
            .into_iter()
            .map(|parts| {
                parts
                    .into_iter()
                    .map(|mut v| {
                        if v.is_empty() {
                            // SAFETY: the capacity is `len` (allocated so) and the caller
                            // guarantees every word was written.
                            unsafe { v.set_len(len) };
                        }
                        RnsPoly::from_data(v, n)
                    })
                    .collect()
            })
            .collect()
    }
}

/// The outputs (see [`Outputs`]) and the raw pointers through which the tasks write their
/// disjoint ranges.
pub(crate) fn alloc_outputs(
    written: &[bool],
    parts: usize,
    n: usize,
    limbs: usize,
) -> (Outputs, Vec<Vec<SyncPtr>>) {
    let len = n * limbs;
    let mut bufs: Vec<Vec<Vec<u64>>> = written
        .iter()
        .map(|&w| {
            (0..parts)
                .map(|_| {
                    if w {
                        Vec::with_capacity(len)
                    } else {
                        vec![0; len]
                    }
                })
                .collect()
        })
        .collect();
    let ptrs = bufs
        .iter_mut()
        .map(|ps| ps.iter_mut().map(|v| SyncPtr(v.as_mut_ptr())).collect())
        .collect();
    (Outputs { bufs, len, n }, ptrs)
}

/// The output ciphertexts at `level` and `scale`, with `bias` added to every item.
pub(crate) fn finish_outputs(
    params: &CkksParams,
    out: Vec<Vec<RnsPoly>>,
    level: usize,
    scale: f64,
    bias: Option<&[f64]>,
    packing: Packing,
) -> Result<Vec<Ciphertext>> {
    let mut cts = out
        .into_iter()
        .map(|parts| Ciphertext::from_parts(params, parts, level, scale))
        .collect::<heinfer_ckks::Result<Vec<_>>>()?;
    if let Some(b) = bias {
        add_bias(params, &mut cts, b, packing)?;
    }
    Ok(cts)
}

/// Adds `round(b_j·scale)` to every item of output `j` (see [`Packing`]).
pub(crate) fn add_bias(
    params: &CkksParams,
    cts: &mut [Ciphertext],
    bias: &[f64],
    packing: Packing,
) -> Result<()> {
    let n = params.n();
    let level = cts.first().map_or(0, |c| c.level());
    let moduli = &params.moduli()[..=level];
    let vectors = packing.bias_vectors(params, level);
    cts.par_iter_mut()
        .zip(bias.par_iter())
        .try_for_each(|(ct, &b)| -> Result<()> {
            if b == 0.0 {
                return Ok(());
            }
            let v = (b * ct.scale()).round();
            if !v.is_finite() {
                return Err(KernelError::InvalidOperands(format!(
                    "bias {b} at scale {:e} is not a finite number",
                    ct.scale()
                )));
            }
            let c0 = &mut ct.parts_mut()[0];
            for (i, m) in moduli.iter().enumerate() {
                let r = residue_of_integral(v, m);
                let limb = &mut c0.data_mut()[i * n..(i + 1) * n];
                if let Some(v) = &vectors[i] {
                    vecops::mul_scalar_add_assign(limb, v, r, m.shoup(r), m);
                } else {
                    vecops::add_scalar_assign(limb, r, m.q);
                }
            }
            Ok(())
        })
}

/// `v mod q` for an integral, finite `v` of any magnitude: exactly through `i128` below
/// `2^126`, else as `±m·2^e` (its f64 mantissa and exponent), `m·(2^e mod q)` — a product
/// scale past 126 bits (a deep lazy segment) still gets its bias.
pub(crate) fn residue_of_integral(v: f64, m: &Modulus) -> u64 {
    if v.abs() < 2f64.powi(126) {
        return m.reduce_i128(v as i128);
    }
    let bits = v.to_bits();
    let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let exp = ((bits >> 52) & 0x7ff) - 1075; // ≥ 74 here: |v| ≥ 2^126
    let r = m.mul(m.reduce(mantissa), m.pow(2, exp));
    if v < 0.0 {
        m.neg(r)
    } else {
        r
    }
}

/// A raw pointer to output data shared by the tasks of one [`LinearLayer::apply`], which
/// write disjoint ranges.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr(pub(crate) *mut u64);
// SAFETY: used only inside `apply`, whose tasks write pairwise disjoint ranges of live buffers.
unsafe impl Send for SyncPtr {}
unsafe impl Sync for SyncPtr {}

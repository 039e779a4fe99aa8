//! The batch-axis linear layer: `out_j = Σ_k w_jk·in_k + b_j` over ciphertexts whose slots
//! hold the batch, as exact integer matrix products in f64.
//!
//! ## Why it is exact
//! The weights arrive quantized: `W = round(w·Δ_w)` (integers, `Δ_w` the layer's weight
//! scale), so the output decrypts to `Δ_in·Δ_w·(w·x)` at scale `Δ_in·Δ_w`. In NTT form a
//! ciphertext–scalar product is coefficient-wise, so for every part `p`, limb `i` and
//! coefficient `c` the output residue is `Σ_k W_jk·X_k[p,i,c] mod q_i` — one integer matrix
//! product per limb. With centered residues `|X| ≤ q_i/2` every partial sum is bounded by
//! `‖W_j‖₁·q_i/2`; when that is below `2^53` the f64 fused multiply-adds of [`crate::gemm`]
//! compute it exactly and a single reduction modulo `q_i` finishes it. When it is not, each
//! residue is split into two centered digits `X = X_hi·2^s + X_lo` (`s = ⌈log2 q_i / 2⌉`)
//! and two products are combined modulo `q_i`. [`LinearLayer::apply`] refuses (never rounds
//! silently) a layer whose bound does not hold.
//!
//! ## Layout
//! Outputs are grouped by shared support: a group is a set of output rows that read the
//! same inputs (one convolution window position for all output channels, or every input of
//! a dense layer), stored as a dense block. Inputs are processed in column tiles of
//! [`TILE`] coefficients of one (part, limb): the tile of every input is converted to
//! centered f64 once and reused by every group.
//!
//! ## Bias
//! `b_j` is added exactly at the output scale: `round(b_j·Δ_in·Δ_w)` modulo each `q_i`
//! (in 127-bit integers). With complex packing every slot holds two batch items (real and
//! imaginary part), so the bias is `b_j·(1 + i)`: the constant times `1 + NTT(X^{N/2})`.

use crate::convert::{simd, split_bits};
use crate::error::{KernelError, Result};
use crate::gemm::{self, RowIndex, MR, NR};
use crate::input::{self, prefetch, InputShape, Inputs};
use crate::output::{alloc_outputs, finish_outputs, Packing, SyncPtr};
use crate::prefetch::AHEAD;
use heinfer_ckks::compact::Words;
use heinfer_ckks::{Ciphertext, CkksParams, NarrowBatch, MAX_PARTS};
use heinfer_math::vecops::{self, BarrettConst};
use heinfer_math::Modulus;
use rayon::prelude::*;
use std::borrow::Borrow;
use std::mem::MaybeUninit;

/// Coefficients per column tile (a multiple of [`NR`]; every ring degree ≥ 2^10 is a multiple).
pub const TILE: usize = 64;

/// Largest integer every partial sum must stay below for f64 to be exact.
const EXACT: f64 = 9007199254740992.0; // 2^53

/// One group of outputs that read the same inputs, as given by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSpec {
    /// Output indices (distinct, each in at most one group of the layer).
    pub rows: Vec<u32>,
    /// Input indices read by every row of the group.
    pub cols: Vec<u32>,
    /// `rows.len() × cols.len()` integer weights, row-major.
    pub weights: Vec<f64>,
}

/// A group prepared for the micro-kernel: rows split into blocks of at most [`MR`], each
/// block's weights packed input-major.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) rows: Vec<u32>,
    pub(crate) cols: RowIndex,
    pub(crate) packed: Vec<Vec<f64>>,
}

/// A batch-axis linear layer with integer weights at scale `weight_scale`.
#[derive(Debug, Clone)]
pub struct LinearLayer {
    out_count: usize,
    in_count: usize,
    pub(crate) groups: Vec<Group>,
    weight_scale: f64,
    digits: usize,
    l1_max: f64,
    nnz: usize,
    /// Whether output `j` is in a group (computed by the products; else the bias alone).
    pub(crate) computed: Vec<bool>,
    /// The outputs in no group, in order.
    idle: Vec<u32>,
}

impl LinearLayer {
    /// Checks and prepares a layer: indices in range, each output in at most one group,
    /// integer weights below `2^52` in magnitude, `digits` 1 or 2, a finite scale `≥ 1`.
    /// Outputs in no group are the bias alone.
    pub fn new(
        out_count: usize,
        in_count: usize,
        groups: Vec<GroupSpec>,
        weight_scale: f64,
        digits: usize,
    ) -> Result<Self> {
        let bad = |m: String| Err(KernelError::InvalidLayer(m));
        if !(1..=2).contains(&digits) {
            return bad(format!("digits = {digits}; 1 or 2 are supported"));
        }
        if !(weight_scale.is_finite() && weight_scale >= 1.0) {
            return bad(format!(
                "weight scale {weight_scale} is not a finite value ≥ 1"
            ));
        }
        if out_count == 0
            || in_count == 0
            || out_count > u32::MAX as usize
            || in_count > u32::MAX as usize
        {
            return bad(format!("{out_count} outputs and {in_count} inputs"));
        }
        let mut seen = vec![false; out_count];
        let mut l1_max = 0f64;
        let mut nnz = 0usize;
        let mut prepared = Vec::with_capacity(groups.len());
        for (g, spec) in groups.into_iter().enumerate() {
            let (r, c) = (spec.rows.len(), spec.cols.len());
            if r == 0 || c == 0 || spec.weights.len() != r * c {
                return bad(format!(
                    "group {g}: {r} rows × {c} columns with {} weights",
                    spec.weights.len()
                ));
            }
            if let Some(&k) = spec.cols.iter().find(|&&k| k as usize >= in_count) {
                return bad(format!(
                    "group {g} reads input {k}, the layer has {in_count}"
                ));
            }
            for &row in &spec.rows {
                if row as usize >= out_count || std::mem::replace(&mut seen[row as usize], true) {
                    return bad(format!(
                        "group {g}: output {row} is out of range or in two groups"
                    ));
                }
            }
            if let Some(w) = spec
                .weights
                .iter()
                .find(|w| !(w.is_finite() && w.fract() == 0.0 && w.abs() < 2f64.powi(52)))
            {
                return bad(format!(
                    "group {g}: weight {w} is not an integer below 2^52"
                ));
            }
            for row in spec.weights.chunks(c) {
                l1_max = l1_max.max(row.iter().map(|w| w.abs()).sum());
            }
            nnz += r * c;
            let packed = (0..r.div_ceil(MR))
                .map(|b| {
                    let rows = b * MR..((b + 1) * MR).min(r);
                    let m = rows.len();
                    let mut p = vec![0f64; c * m];
                    for (ri, row) in rows.enumerate() {
                        for k in 0..c {
                            p[k * m + ri] = spec.weights[row * c + k];
                        }
                    }
                    p
                })
                .collect();
            prepared.push(Group {
                rows: spec.rows,
                cols: RowIndex::new(spec.cols),
                packed,
            });
        }
        Ok(Self {
            out_count,
            in_count,
            groups: prepared,
            weight_scale,
            digits,
            l1_max,
            nnz,
            idle: (0..out_count as u32)
                .filter(|&j| !seen[j as usize])
                .collect(),
            computed: seen,
        })
    }

    /// Number of outputs.
    pub fn out_count(&self) -> usize {
        self.out_count
    }
    /// Number of inputs.
    pub fn in_count(&self) -> usize {
        self.in_count
    }
    /// The scale `Δ_w` of the integer weights (the output scale is `Δ_in·Δ_w`).
    pub fn weight_scale(&self) -> f64 {
        self.weight_scale
    }
    /// Digits per residue (1 or 2).
    pub fn digits(&self) -> usize {
        self.digits
    }
    /// Largest `‖W_j‖₁` over output rows.
    pub fn l1_max(&self) -> f64 {
        self.l1_max
    }
    /// Number of stored weights.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// The outputs in no group (the bias alone), in order.
    pub(crate) fn idle_rows(&self) -> &[u32] {
        &self.idle
    }

    /// Largest `|digit|` of a centered residue modulo `q` split into `digits` digits.
    pub fn digit_bound(q: u64, digits: usize) -> f64 {
        let half = (q / 2) as f64;
        if digits == 1 {
            return half;
        }
        let s = split_bits(q);
        let lo = 2f64.powi(s as i32 - 1);
        lo.max(((half + lo) / 2f64.powi(s as i32)).floor())
    }

    /// Whether every partial sum is exact in f64 for the modulus `q`.
    pub fn is_exact_for(&self, q: u64) -> bool {
        self.l1_max * Self::digit_bound(q, self.digits) < EXACT
    }

    /// Applies the layer: `out_j = Σ_k W_jk·inputs_k (+ b_j)` at scale `Δ_in·Δ_w`.
    ///
    /// Inputs must share parameters, level, size (2 or 3 parts) and scale. `bias` (one per
    /// output) is added to every item at the output scale (see [`Packing`]; complex
    /// packing). Fails with [`KernelError::Inexact`] if the f64 bound does not hold for some
    /// prime of the level.
    ///
    /// `inputs` are ciphertexts or references to them (`&[&Ciphertext]`: a caller whose
    /// ciphertexts live apart, e.g. in Python objects, gathers no copies).
    pub fn apply<C: Borrow<Ciphertext> + Sync>(
        &self,
        params: &CkksParams,
        inputs: &[C],
        bias: Option<&[f64]>,
        packing: Packing,
    ) -> Result<Vec<Ciphertext>> {
        self.apply_inner(params, inputs, bias, packing, false)
    }

    /// `out_j = Σ_k W_jk·in_k² (+ b_j)`: the square of every input fused into the product
    /// (the squared ciphertexts are computed tile by tile, never stored). Inputs have 2
    /// parts, or 3 (a square not relinearized); outputs have 3 or 5 (`2·size − 1`, not
    /// relinearized), at scale `Δ_in²·Δ_w`.
    pub fn apply_squared<C: Borrow<Ciphertext> + Sync>(
        &self,
        params: &CkksParams,
        inputs: &[C],
        bias: Option<&[f64]>,
        packing: Packing,
    ) -> Result<Vec<Ciphertext>> {
        self.apply_inner(params, inputs, bias, packing, true)
    }

    /// [`Self::apply`] (`square` false) or [`Self::apply_squared`] (`square` true) on
    /// inputs kept in 32-bit words ([`NarrowBatch`]): the same outputs, bit for bit, with
    /// half the input memory read.
    pub fn apply_narrow(
        &self,
        params: &CkksParams,
        inputs: &NarrowBatch,
        bias: Option<&[f64]>,
        packing: Packing,
        square: bool,
    ) -> Result<Vec<Ciphertext>> {
        self.apply_inner(params, inputs, bias, packing, square)
    }

    fn apply_inner<I: Inputs + ?Sized>(
        &self,
        params: &CkksParams,
        inputs: &I,
        bias: Option<&[f64]>,
        packing: Packing,
        square: bool,
    ) -> Result<Vec<Ciphertext>> {
        let first = self.check_inputs(params, inputs, bias)?;
        if square && 2 * first.size - 1 > MAX_PARTS {
            return Err(KernelError::InvalidOperands(format!(
                "a fused square needs 2- or 3-part inputs, got {} parts",
                first.size
            )));
        }
        let (level, n) = (first.level, params.n());
        let parts = if square {
            2 * first.size - 1
        } else {
            first.size
        };
        let limbs = level + 1;
        for (i, &q) in params.q()[..limbs].iter().enumerate() {
            if !self.is_exact_for(q) {
                return Err(KernelError::Inexact(format!(
                    "max row ‖W‖₁ = {:.3e} times digits of q_{i} ({:.1} bits, {} digit(s)) reaches 2^53; \
                     lower the weight scale or use 2 digits",
                    self.l1_max,
                    (q as f64).log2(),
                    self.digits
                )));
            }
        }
        let in_scale = if square {
            first.scale * first.scale
        } else {
            first.scale
        };
        let scale = in_scale * self.weight_scale;
        let (out, ptrs) = alloc_outputs(&self.computed, parts, n, limbs);
        let tiles = n / TILE;
        let moduli = params.moduli();
        let barrett: Vec<BarrettConst> = moduli[..limbs]
            .iter()
            .map(|m| BarrettConst::new(m.q))
            .collect();
        (0..parts * limbs * tiles).into_par_iter().for_each_init(
            || Buffers::new(self.in_count, self.digits),
            |buf, task| {
                // a fused square reads every input part for each output part: the parts of
                // one tile run one after the other (part innermost) so that the inputs' tile
                // (≤ 3 × K × TILE words) is read from memory once, then from the cache
                let (p, i, t) = if square {
                    let rest = task / parts;
                    (task % parts, rest / tiles, rest % tiles)
                } else {
                    let rest = task % (limbs * tiles);
                    (task / (limbs * tiles), rest / tiles, rest % tiles)
                };
                let off = i * n + t * TILE;
                self.tile(
                    inputs,
                    p,
                    off,
                    &moduli[i],
                    square.then_some((&barrett[i], first.size)),
                    buf,
                    &ptrs,
                );
            },
        );
        // SAFETY: the tasks partition parts × limbs × tiles, and each writes the NR-word
        // chunks of its tile of every computed output (every row of every group).
        let out = unsafe { out.assume_written() };
        finish_outputs(params, out, level, scale, bias, packing)
    }

    pub(crate) fn check_inputs<I: Inputs + ?Sized>(
        &self,
        params: &CkksParams,
        inputs: &I,
        bias: Option<&[f64]>,
    ) -> Result<InputShape> {
        let bad = |m: String| Err(KernelError::InvalidOperands(m));
        if inputs.count() != self.in_count {
            return bad(format!(
                "the layer reads {} ciphertexts, got {}",
                self.in_count,
                inputs.count()
            ));
        }
        if let Some(b) = bias {
            if b.len() != self.out_count || b.iter().any(|x| !x.is_finite()) {
                return bad(format!(
                    "bias needs {} finite values, got {}",
                    self.out_count,
                    b.len()
                ));
            }
        }
        if !params.n().is_multiple_of(TILE) {
            return bad(format!(
                "ring degree {} is not a multiple of {TILE}",
                params.n()
            ));
        }
        inputs.shape(params)
    }

    /// One column tile: pack the inputs' residues at `off` of part `p`, run every group,
    /// reduce and store into the outputs.
    #[allow(clippy::too_many_arguments)] // the per-task context of `apply`'s hot loop
    fn tile<I: Inputs + ?Sized>(
        &self,
        inputs: &I,
        p: usize,
        off: usize,
        m: &Modulus,
        square: Option<(&BarrettConst, usize)>,
        buf: &mut Buffers,
        out: &[Vec<SyncPtr>],
    ) {
        let q = m.q;
        let s = split_bits(q);
        let k_count = inputs.count();
        // chunk-major tile: chunk c of input k at [c·K·NR + k·NR, +NR), so the micro-kernel
        // streams consecutive inputs of one chunk through contiguous memory
        let mut sq = [0u64; TILE];
        let mut w = [[0u64; TILE]; 3];
        let range = off..off + TILE;
        for k in 0..k_count {
            if k + AHEAD < k_count {
                // every part of a fused square prefetches its inputs, the later parts too: the
                // tile (up to 3 × K × TILE words) outgrows L1, and prefetching for the first
                // part alone measured 1–3 ms slower on CryptoNets' last layer
                let read = match square {
                    Some((_, size)) => 0..size,
                    None => p..p + 1,
                };
                for part in read {
                    prefetch(inputs.words(k + AHEAD, part), range.clone());
                }
            }
            match square {
                None => {
                    let words = inputs.words(k, p);
                    for c in 0..TILE / NR {
                        let at = c * k_count * NR + k * NR;
                        let chunk = off + c * NR..off + (c + 1) * NR;
                        if self.digits == 1 {
                            input::center(words, chunk, q, &mut buf.x[at..at + NR]);
                        } else {
                            input::split(
                                words,
                                chunk,
                                q,
                                s,
                                &mut buf.x[at..at + NR],
                                &mut buf.x_hi[at..at + NR],
                            );
                        }
                    }
                }
                Some((bc, size)) => {
                    // the square's part p, computed on the fly: (a0², 2·a0·a1, a1²) at two
                    // parts, (a0², 2·a0·a1, 2·a0·a2 + a1², 2·a1·a2, a2²) at three
                    let mut a: [&[u64]; 3] = [&[]; 3];
                    for (part, (ai, wi)) in a.iter_mut().zip(w.iter_mut()).take(size).enumerate() {
                        *ai = input::wide(inputs.words(k, part), range.clone(), wi);
                    }
                    vecops::square_term(&mut sq, &a[..size], p, bc);
                    for c in 0..TILE / NR {
                        let at = c * k_count * NR + k * NR;
                        let chunk = Words::Wide(&sq[c * NR..(c + 1) * NR]);
                        if self.digits == 1 {
                            input::center(chunk, 0..NR, q, &mut buf.x[at..at + NR]);
                        } else {
                            input::split(
                                chunk,
                                0..NR,
                                q,
                                s,
                                &mut buf.x[at..at + NR],
                                &mut buf.x_hi[at..at + NR],
                            );
                        }
                    }
                }
            }
        }
        let shift = m.reduce(1u64 << s);
        let shift_shoup = m.shoup(shift);
        for c in 0..TILE / NR {
            let xs = &buf.x[c * k_count * NR..(c + 1) * k_count * NR];
            let xs_hi = if self.digits == 2 {
                &buf.x_hi[c * k_count * NR..(c + 1) * k_count * NR]
            } else {
                &buf.x_hi[..0]
            };
            for g in &self.groups {
                for (b, w) in g.packed.iter().enumerate() {
                    let rows = &g.rows[b * MR..(b * MR + MR).min(g.rows.len())];
                    let mr = rows.len();
                    gemm::block(mr, w, &g.cols, xs, NR, 0, &mut buf.y);
                    if self.digits == 2 {
                        gemm::block(mr, w, &g.cols, xs_hi, NR, 0, &mut buf.y_hi);
                        // the block's rows at once: lo + hi·2^s mod q in three vectorized calls
                        // (per row, their dispatch cost more than the arithmetic; a scalar
                        // loop here was 12 % of a CryptoNets-ReLU query)
                        let len = mr * NR;
                        simd::reduce(&buf.y[..len], q, &mut buf.r[..len]);
                        simd::reduce(&buf.y_hi[..len], q, &mut buf.r_hi[..len]);
                        vecops::mul_scalar_add_assign(
                            &mut buf.r[..len],
                            &buf.r_hi[..len],
                            shift,
                            shift_shoup,
                            m,
                        );
                    }
                    for (r, &row) in rows.iter().enumerate() {
                        // SAFETY: each (output, part, limb, column range) is written by exactly
                        // one task (tasks partition parts × limbs × tiles), inside its
                        // allocation; the words may be uninitialized (`alloc_outputs`), so
                        // they are only written.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(
                                out[row as usize][p].0.add(off + c * NR) as *mut MaybeUninit<u64>,
                                NR,
                            )
                        };
                        if self.digits == 2 {
                            for (d, &v) in dst.iter_mut().zip(&buf.r[r * NR..(r + 1) * NR]) {
                                d.write(v);
                            }
                        } else {
                            simd::reduce_into(&buf.y[r * NR..(r + 1) * NR], q, dst);
                        }
                    }
                }
            }
        }
    }
}

/// Per-thread tiles: centered inputs (low digit), high digit, one register block of output
/// for each digit, and (two digits) the block's residues of each digit.
struct Buffers {
    x: Vec<f64>,
    x_hi: Vec<f64>,
    y: Vec<f64>,
    y_hi: Vec<f64>,
    r: Vec<u64>,
    r_hi: Vec<u64>,
}

impl Buffers {
    fn new(in_count: usize, digits: usize) -> Self {
        let hi = if digits == 2 { in_count * TILE } else { 0 };
        Self {
            x: vec![0.0; in_count * TILE],
            x_hi: vec![0.0; hi],
            y: vec![0.0; MR * NR],
            y_hi: vec![0.0; MR * NR],
            r: vec![0; MR * NR],
            r_hi: vec![0; MR * NR],
        }
    }
}

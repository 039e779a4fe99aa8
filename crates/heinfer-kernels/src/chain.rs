//! A fused `linear → square → linear` chain (CryptoNets' conv → x² → dense).
//!
//! Evaluated tile by tile (one limb, [`NR`] coefficients, every part at once): the first
//! layer's outputs for parts 0 and 1 are computed and reduced, squared on the spot into the
//! three parts `(y_0², 2·y_0·y_1, y_1²)`, centered, and fed to the second layer. Neither the
//! first layer's outputs nor their squares are ever stored: for CryptoNets at logN = 13 that
//! is 0.66 GB of convolution outputs and 1 GB of squares per batch that are not written,
//! read back, or page-faulted in.

use crate::convert::simd;
use crate::error::{KernelError, Result};
use crate::gemm::{self, MR, NR};
use crate::linear::LinearLayer;
use crate::output::{alloc_outputs, finish_outputs, residue_of_integral, Packing, SyncPtr};
use crate::prefetch::{prefetch, AHEAD};
use heinfer_ckks::{Ciphertext, CkksParams};
use heinfer_math::vecops::{self, BarrettConst};
use heinfer_math::Modulus;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// `out = second(square(first(inputs) + b1)) + b2`, without storing the intermediates.
///
/// Both layers must use one digit and be exact for every prime of the level. Inputs have 2
/// parts; outputs have 3 (not relinearized), at scale `(Δ_in·Δ_w1)²·Δ_w2`. `bias1` is added
/// before the square, `bias2` after the second layer (to every item, see [`Packing`]).
pub fn square_chain(
    params: &CkksParams,
    first: &LinearLayer,
    second: &LinearLayer,
    inputs: &[Ciphertext],
    bias1: Option<&[f64]>,
    bias2: Option<&[f64]>,
    packing: Packing,
) -> Result<Vec<Ciphertext>> {
    let head = first.check_inputs(params, inputs, bias1)?;
    if head.size() != 2
        || first.digits() != 1
        || second.digits() != 1
        || second.in_count() != first.out_count()
    {
        return Err(KernelError::InvalidOperands(format!(
            "a square chain needs 2-part inputs, one digit per layer and chained sizes (got {} parts, {}→{} and {}→{})",
            head.size(),
            first.in_count(),
            first.out_count(),
            second.in_count(),
            second.out_count()
        )));
    }
    if let Some(b) = bias2 {
        if b.len() != second.out_count() {
            return Err(KernelError::InvalidOperands(format!(
                "second bias has {} values for {} outputs",
                b.len(),
                second.out_count()
            )));
        }
    }
    let (level, n) = (head.level(), params.n());
    let limbs = level + 1;
    for &q in &params.q()[..limbs] {
        if !first.is_exact_for(q) || !second.is_exact_for(q) {
            return Err(KernelError::Inexact(format!(
                "a layer of the chain is not exact for the {:.1}-bit prime {q}",
                (q as f64).log2()
            )));
        }
    }
    let mid_scale = head.scale() * first.weight_scale();
    // rounded to integers here, reduced per prime in each task (any magnitude, see
    // `residue_of_integral`)
    let b1: Option<Vec<f64>> = bias1.map(|b| b.iter().map(|&v| (v * mid_scale).round()).collect());
    if let Some(v) = b1.as_ref().and_then(|b| b.iter().find(|v| !v.is_finite())) {
        return Err(KernelError::InvalidOperands(format!(
            "the first bias at scale {mid_scale:e} is not a finite number ({v})"
        )));
    }
    let scale = mid_scale * mid_scale * second.weight_scale();
    let (out, ptrs) = alloc_outputs(&second.computed, 3, n, limbs);
    let moduli = params.moduli();
    let ones = packing.bias_vectors(params, level);
    let tiles = n / NR;
    (0..limbs * tiles).into_par_iter().for_each_init(
        || ChainBuffers::new(first.in_count(), first.out_count()),
        |buf, task| {
            let (i, t) = (task / tiles, task % tiles);
            let ctx = Tile {
                m: &moduli[i],
                off: i * n + t * NR,
                col: t * NR,
                bias1: b1.as_deref(),
                bias_vector: ones[i].as_deref(),
            };
            chain_tile(first, second, inputs, &ctx, buf, &ptrs);
        },
    );
    // SAFETY: the tasks partition limbs × tiles, and each writes its NR words of every part
    // of every computed output of the second layer.
    let out = unsafe { out.assume_written() };
    finish_outputs(params, out, level, scale, bias2, packing)
}

/// Rows of the first layer's output squared per call (8 KiB of scratch on the stack).
const SQUARE_ROWS: usize = 32;

/// Where one tile task works.
struct Tile<'a> {
    m: &'a Modulus,
    off: usize,
    col: usize,
    bias1: Option<&'a [f64]>,
    bias_vector: Option<&'a [u64]>,
}

/// Per-thread buffers: centered inputs (2 parts), first-layer residues (2 parts), centered
/// squares (3 parts), one register block of output.
struct ChainBuffers {
    x: [Vec<f64>; 2],
    u: [Vec<u64>; 2],
    s: [Vec<f64>; 3],
    y: Vec<f64>,
}

impl ChainBuffers {
    fn new(k: usize, m: usize) -> Self {
        Self {
            x: [vec![0.0; k * NR], vec![0.0; k * NR]],
            u: [vec![0; m * NR], vec![0; m * NR]],
            s: [vec![0.0; m * NR], vec![0.0; m * NR], vec![0.0; m * NR]],
            y: vec![0.0; MR * NR],
        }
    }
}

fn chain_tile(
    first: &LinearLayer,
    second: &LinearLayer,
    inputs: &[Ciphertext],
    t: &Tile<'_>,
    buf: &mut ChainBuffers,
    out: &[Vec<SyncPtr>],
) {
    let q = t.m.q;
    for (k, ct) in inputs.iter().enumerate() {
        if let Some(ahead) = inputs.get(k + AHEAD) {
            for part in &ahead.parts()[..2] {
                prefetch(&part.data()[t.off..t.off + NR]);
            }
        }
        // and this input's words of the next tile (the next task, with one thread or within a
        // worker's share), which its loads would otherwise wait for one by one again
        for part in &ct.parts()[..2] {
            if let Some(next) = part.data().get(t.off + NR..t.off + 2 * NR) {
                prefetch(next);
            }
        }
        for p in 0..2 {
            simd::center(
                &ct.parts()[p].data()[t.off..t.off + NR],
                q,
                &mut buf.x[p][k * NR..(k + 1) * NR],
            );
        }
    }
    // first layer, parts 0 and 1 → residues (rows in no group stay zero: the bias alone)
    for u in buf.u.iter_mut() {
        u.fill(0);
    }
    for p in 0..2 {
        for g in &first.groups {
            for (b, w) in g.packed.iter().enumerate() {
                let rows = &g.rows[b * MR..(b * MR + MR).min(g.rows.len())];
                gemm::block(rows.len(), w, &g.cols, &buf.x[p], NR, 0, &mut buf.y);
                for (r, &row) in rows.iter().enumerate() {
                    let row = row as usize;
                    simd::reduce(
                        &buf.y[r * NR..(r + 1) * NR],
                        q,
                        &mut buf.u[p][row * NR..(row + 1) * NR],
                    );
                }
            }
        }
    }
    if let Some(b1) = t.bias1 {
        for (row, &v) in b1.iter().enumerate() {
            let r = residue_of_integral(v, t.m);
            let dst = &mut buf.u[0][row * NR..(row + 1) * NR];
            match t.bias_vector {
                Some(v) => {
                    vecops::mul_scalar_add_assign(dst, &v[t.col..t.col + NR], r, t.m.shoup(r), t.m)
                }
                None => vecops::add_scalar_assign(dst, r, q),
            }
        }
    }
    // the square, centered for the second layer, SQUARE_ROWS rows per call (one call per row
    // of NR words paid more in dispatch than in arithmetic)
    let bc = BarrettConst::new(q);
    let mut sq = [0u64; SQUARE_ROWS * NR];
    let words = first.out_count() * NR;
    for at in (0..words).step_by(SQUARE_ROWS * NR) {
        let r = at..(at + SQUARE_ROWS * NR).min(words);
        let sq = &mut sq[..r.len()];
        let (u0, u1) = (&buf.u[0][r.clone()], &buf.u[1][r.clone()]);
        vecops::mul_into(sq, u0, u0, &bc);
        simd::center(sq, q, &mut buf.s[0][r.clone()]);
        vecops::mul_into(sq, u0, u1, &bc);
        vecops::add_self_assign(sq, q);
        simd::center(sq, q, &mut buf.s[1][r.clone()]);
        vecops::mul_into(sq, u1, u1, &bc);
        simd::center(sq, q, &mut buf.s[2][r]);
    }
    for p in 0..3 {
        for g in &second.groups {
            for (b, w) in g.packed.iter().enumerate() {
                let rows = &g.rows[b * MR..(b * MR + MR).min(g.rows.len())];
                gemm::block(rows.len(), w, &g.cols, &buf.s[p], NR, 0, &mut buf.y);
                for (r, &row) in rows.iter().enumerate() {
                    // SAFETY: tasks partition limbs × tiles; each writes its own columns of
                    // every output part, inside the allocation; the words may be
                    // uninitialized (`alloc_outputs`), so they are only written.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(
                            out[row as usize][p].0.add(t.off) as *mut MaybeUninit<u64>,
                            NR,
                        )
                    };
                    simd::reduce_into(&buf.y[r * NR..(r + 1) * NR], q, dst);
                }
            }
        }
    }
}

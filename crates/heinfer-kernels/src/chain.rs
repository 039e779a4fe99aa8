//! A fused `linear → square → linear` chain (CryptoNets' conv → x² → dense).
//!
//! Evaluated tile by tile (one limb, [`NR`] coefficients, every part at once): the first
//! layer's outputs for parts 0 and 1 are computed one register block at a time, and each
//! block is reduced, squared into the three parts `(y_0², 2·y_0·y_1, y_1²)` and centered on
//! the spot, in f64 (`simd::square_block`: exact modular arithmetic with fused
//! multiply-adds, no round trip through integer residues), then fed to the second layer.
//! Neither the first layer's outputs nor their squares are ever stored: for CryptoNets at
//! logN = 13 that is 0.66 GB of convolution outputs and 1 GB of squares per batch that are
//! not written, read back, or page-faulted in.

use crate::convert::simd::{self, Bias};
use crate::error::{KernelError, Result};
use crate::gemm::{self, MR, NR};
use crate::input::{self, prefetch, Inputs};
use crate::linear::LinearLayer;
use crate::output::{alloc_outputs, finish_outputs, residue_of_integral, Packing, SyncPtr};
use crate::prefetch::AHEAD;
use heinfer_ckks::{Ciphertext, CkksParams, NarrowBatch};
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
    chain(params, first, second, inputs, bias1, bias2, packing)
}

/// [`square_chain`] on inputs kept in 32-bit words ([`NarrowBatch`]): the same outputs, bit
/// for bit, with half the input memory read (CryptoNets' query: 308 instead of 617 MB).
pub fn square_chain_narrow(
    params: &CkksParams,
    first: &LinearLayer,
    second: &LinearLayer,
    inputs: &NarrowBatch,
    bias1: Option<&[f64]>,
    bias2: Option<&[f64]>,
    packing: Packing,
) -> Result<Vec<Ciphertext>> {
    chain(params, first, second, inputs, bias1, bias2, packing)
}

fn chain<I: Inputs + ?Sized>(
    params: &CkksParams,
    first: &LinearLayer,
    second: &LinearLayer,
    inputs: &I,
    bias1: Option<&[f64]>,
    bias2: Option<&[f64]>,
    packing: Packing,
) -> Result<Vec<Ciphertext>> {
    let head = first.check_inputs(params, inputs, bias1)?;
    if head.size != 2
        || first.digits() != 1
        || second.digits() != 1
        || second.in_count() != first.out_count()
    {
        return Err(KernelError::InvalidOperands(format!(
            "a square chain needs 2-part inputs, one digit per layer and chained sizes (got {} parts, {}→{} and {}→{})",
            head.size,
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
    let (level, n) = (head.level, params.n());
    let limbs = level + 1;
    for &q in &params.q()[..limbs] {
        if !first.is_exact_for(q) || !second.is_exact_for(q) {
            return Err(KernelError::Inexact(format!(
                "a layer of the chain is not exact for the {:.1}-bit prime {q}",
                (q as f64).log2()
            )));
        }
        // the squares' f64 modular arithmetic is exact for odd primes below 2^50
        if q >= 1 << 50 || q % 2 == 0 {
            return Err(KernelError::Inexact(format!(
                "the chain squares in f64, exact for odd primes below 2^50, not for {q}"
            )));
        }
    }
    let mid_scale = head.scale * first.weight_scale();
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
    // the first bias and the packing's vector, centered per limb, for the f64 squares
    let bias_rows: Vec<Option<Vec<f64>>> = moduli[..limbs]
        .iter()
        .map(|m| {
            b1.as_ref().map(|b| {
                b.iter()
                    .map(|&v| centered(residue_of_integral(v, m), m.q))
                    .collect()
            })
        })
        .collect();
    let vectors: Vec<Option<Vec<f64>>> = ones
        .iter()
        .zip(moduli)
        .map(|(v, m)| {
            v.as_ref()
                .map(|v| v.iter().map(|&x| centered(x, m.q)).collect())
        })
        .collect();
    let tiles = n / NR;
    (0..limbs * tiles).into_par_iter().for_each_init(
        || ChainBuffers::new(first.in_count(), first.out_count()),
        |buf, task| {
            let (i, t) = (task / tiles, task % tiles);
            let ctx = Tile {
                m: &moduli[i],
                off: i * n + t * NR,
                has_next: i * n + (t + 2) * NR <= limbs * n,
                bias1: bias_rows[i].as_deref(),
                bias_vector: vectors[i].as_deref().map(|v| &v[t * NR..(t + 1) * NR]),
            };
            chain_tile(first, second, inputs, &ctx, buf, &ptrs);
        },
    );
    // SAFETY: the tasks partition limbs × tiles, and each writes its NR words of every part
    // of every computed output of the second layer.
    let out = unsafe { out.assume_written() };
    finish_outputs(params, out, level, scale, bias2, packing)
}

/// Where one tile task works.
struct Tile<'a> {
    m: &'a Modulus,
    off: usize,
    /// Whether the inputs' parts have a tile after this one (`off + NR` onwards).
    has_next: bool,
    /// The first bias per row, centered modulo this limb's prime.
    bias1: Option<&'a [f64]>,
    /// The packing's bias vector on this tile's columns, centered (complex and coefficient
    /// packing).
    bias_vector: Option<&'a [f64]>,
}

/// Per-thread buffers: centered inputs (2 parts), centered squares (3 parts), one register
/// block of each part's first-layer output.
struct ChainBuffers {
    x: [Vec<f64>; 2],
    s: [Vec<f64>; 3],
    y: [Vec<f64>; 2],
}

impl ChainBuffers {
    fn new(k: usize, m: usize) -> Self {
        Self {
            x: [vec![0.0; k * NR], vec![0.0; k * NR]],
            s: [vec![0.0; m * NR], vec![0.0; m * NR], vec![0.0; m * NR]],
            y: [vec![0.0; MR * NR], vec![0.0; MR * NR]],
        }
    }
}

/// `v mod q`, centered in `(−q/2, q/2]` (the values `simd::square_block` adds).
fn centered(v: u64, q: u64) -> f64 {
    if v > q / 2 {
        -((q - v) as f64)
    } else {
        v as f64
    }
}

fn chain_tile<I: Inputs + ?Sized>(
    first: &LinearLayer,
    second: &LinearLayer,
    inputs: &I,
    t: &Tile<'_>,
    buf: &mut ChainBuffers,
    out: &[Vec<SyncPtr>],
) {
    let q = t.m.q;
    let count = inputs.count();
    let words = t.off..t.off + NR;
    for k in 0..count {
        if k + AHEAD < count {
            for p in 0..2 {
                prefetch(inputs.words(k + AHEAD, p), words.clone());
            }
        }
        for p in 0..2 {
            let part = inputs.words(k, p);
            // and this input's words of the next tile (the next task, with one thread or
            // within a worker's share), which its loads would otherwise wait for one by one
            if t.has_next {
                prefetch(part, t.off + NR..t.off + 2 * NR);
            }
            input::center(part, words.clone(), q, &mut buf.x[p][k * NR..(k + 1) * NR]);
        }
    }
    // first layer, block by block: parts 0 and 1, the bias, the square and the centering for
    // the second layer, in f64 (`simd::square_block`); rows in no group are the bias alone
    let bias = match (t.bias1, t.bias_vector) {
        (None, _) => Bias::None,
        (Some(b), None) => Bias::Rows(b),
        (Some(b), Some(v)) => Bias::RowsTimes(b, v),
    };
    let [s0, s1, s2] = &mut buf.s;
    for g in &first.groups {
        for (b, w) in g.packed.iter().enumerate() {
            let rows = &g.rows[b * MR..(b * MR + MR).min(g.rows.len())];
            for p in 0..2 {
                gemm::block(rows.len(), w, &g.cols, &buf.x[p], NR, 0, &mut buf.y[p]);
            }
            let len = rows.len() * NR;
            simd::square_block(
                [&buf.y[0][..len], &buf.y[1][..len]],
                rows,
                bias,
                q,
                [&mut s0[..], &mut s1[..], &mut s2[..]],
            );
        }
    }
    for rows in first.idle_rows().chunks(MR) {
        let zeros = [0.0; MR * NR];
        let len = rows.len() * NR;
        simd::square_block(
            [&zeros[..len], &zeros[..len]],
            rows,
            bias,
            q,
            [&mut s0[..], &mut s1[..], &mut s2[..]],
        );
    }
    for (p, s) in buf.s.iter().enumerate() {
        for g in &second.groups {
            for (b, w) in g.packed.iter().enumerate() {
                let rows = &g.rows[b * MR..(b * MR + MR).min(g.rows.len())];
                gemm::block(rows.len(), w, &g.cols, s, NR, 0, &mut buf.y[0]);
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
                    simd::reduce_into(&buf.y[0][r * NR..(r + 1) * NR], q, dst);
                }
            }
        }
    }
}

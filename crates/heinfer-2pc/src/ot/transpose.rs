//! Transposing bit matrices: the step that turns IKNP's 128 columns into one row per OT.
//!
//! A 128×128 bit matrix is held as 128 [`Block`]s, block `i` being row `i` and bit `j` of it
//! (least significant first) column `j`. [`transpose_128`] swaps in place with the classic
//! recursive scheme: at width `w ∈ {64, 32, …, 1}` every pair of rows `(i, i + w)` with
//! `i & w = 0` exchanges the bits `j` with `j & w ≠ 0` of row `i` and the bits `j − w` of row
//! `i + w`, i.e. the off-diagonal `w×w` sub-blocks are swapped at every scale:
//! $$\begin{pmatrix} A & B \\ C & D \end{pmatrix}^{\mathsf T}
//!   = \begin{pmatrix} A^{\mathsf T} & C^{\mathsf T} \\ B^{\mathsf T} & D^{\mathsf T} \end{pmatrix}.$$
//! That is `7 · 64` masked swaps of 128-bit rows (no per-bit work) per 16 KiB of OT rows, done
//! as 64-bit swaps on the two halves of each row (see [`transpose_128`]).

use crate::Block;

/// The masks of the six levels below 64, on one 64-bit half: bit `j` is set iff `j & w = 0`.
const M32: u64 = 0x0000_0000_FFFF_FFFF;
const M16: u64 = 0x0000_FFFF_0000_FFFF;
const M8: u64 = 0x00FF_00FF_00FF_00FF;
const M4: u64 = 0x0F0F_0F0F_0F0F_0F0F;
const M2: u64 = 0x3333_3333_3333_3333;
const M1: u64 = 0x5555_5555_5555_5555;

/// Transposes the 128×128 bit matrix `m` in place: afterwards bit `j` of `m[i]` is what bit
/// `i` of `m[j]` was.
///
/// The rows are split into their low and high 64-bit halves. Level 64 swaps the high halves of
/// rows `0..64` with the low halves of rows `64..128`; the six lower levels act on each half
/// alone, with the same row pairs, as straight-line loops over `[u64; 128]` the compiler
/// vectorises.
pub fn transpose_128(m: &mut [Block; 128]) {
    let mut lo = [0u64; 128];
    let mut hi = [0u64; 128];
    for ((l, h), b) in lo.iter_mut().zip(hi.iter_mut()).zip(m.iter()) {
        *l = b.0 as u64;
        *h = (b.0 >> 64) as u64;
    }
    let (hi_top, _) = hi.split_at_mut(64);
    let (_, lo_bottom) = lo.split_at_mut(64);
    hi_top.swap_with_slice(lo_bottom);
    for half in [&mut lo, &mut hi] {
        level::<32>(half, M32);
        level::<16>(half, M16);
        level::<8>(half, M8);
        level::<4>(half, M4);
        level::<2>(half, M2);
        level::<1>(half, M1);
    }
    for ((b, l), h) in m.iter_mut().zip(lo).zip(hi) {
        b.0 = u128::from(l) | (u128::from(h) << 64);
    }
}

/// One level of width `W` on one half: rows `i` and `i + W` (`i & W = 0`) swap the bits `j`
/// with `j & W ≠ 0` of row `i` and the bits `j − W` of row `i + W`.
#[inline(always)]
fn level<const W: usize>(a: &mut [u64; 128], mask: u64) {
    for pair in a.chunks_exact_mut(2 * W) {
        let (x, y) = pair.split_at_mut(W);
        for (x, y) in x.iter_mut().zip(y.iter_mut()) {
            let t = ((*x >> W) ^ *y) & mask;
            *x ^= t << W;
            *y ^= t;
        }
    }
}

/// Transposes a 128-column matrix stored column by column into its rows.
///
/// `columns` holds 128 columns of `blocks` blocks each (`columns[i · blocks + k]` is bits
/// `128k … 128k + 127` of column `i`); `rows` receives the `128 · blocks` rows, row `r` having
/// bit `i` equal to bit `r` of column `i`.
///
/// # Panics
/// If `columns.len() != 128 · blocks` or `rows.len() != 128 · blocks` (our own invariant,
/// never caller bytes).
pub fn columns_to_rows(columns: &[Block], blocks: usize, rows: &mut [Block]) {
    assert_eq!(
        columns.len(),
        128 * blocks,
        "128 columns of `blocks` blocks"
    );
    assert_eq!(rows.len(), 128 * blocks, "one row per bit of a column");
    let mut tile = [Block::ZERO; 128];
    for k in 0..blocks {
        for (i, t) in tile.iter_mut().enumerate() {
            *t = columns[i * blocks + k];
        }
        transpose_128(&mut tile);
        rows[128 * k..128 * (k + 1)].copy_from_slice(&tile);
    }
}

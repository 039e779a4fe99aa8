//! Transposing bit matrices: the step that turns IKNP's 128 columns into one row per OT.
//!
//! A 128×128 bit matrix is held as 128 [`Block`]s, block `i` being row `i` and bit `j` of it
//! (least significant first) column `j`. [`transpose_128`] swaps in place with the classic
//! recursive scheme: at width `w ∈ {64, 32, …, 1}` every pair of rows `(i, i + w)` with
//! `i & w = 0` exchanges the bits `j` with `j & w ≠ 0` of row `i` and the bits `j − w` of row
//! `i + w`, i.e. the off-diagonal `w×w` sub-blocks are swapped at every scale:
//! $$\begin{pmatrix} A & B \\ C & D \end{pmatrix}^{\mathsf T}
//!   = \begin{pmatrix} A^{\mathsf T} & C^{\mathsf T} \\ B^{\mathsf T} & D^{\mathsf T} \end{pmatrix}.$$
//! That is `7 · 64` masked swaps of 128-bit words (no per-bit work) per 16 KiB of OT rows.

use crate::Block;

/// The masks of the seven levels: bit `j` is set iff `j & w = 0`.
const LEVELS: [(usize, u128); 7] = [
    (64, 0x0000_0000_0000_0000_FFFF_FFFF_FFFF_FFFF),
    (32, 0x0000_0000_FFFF_FFFF_0000_0000_FFFF_FFFF),
    (16, 0x0000_FFFF_0000_FFFF_0000_FFFF_0000_FFFF),
    (8, 0x00FF_00FF_00FF_00FF_00FF_00FF_00FF_00FF),
    (4, 0x0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F),
    (2, 0x3333_3333_3333_3333_3333_3333_3333_3333),
    (1, 0x5555_5555_5555_5555_5555_5555_5555_5555),
];

/// Transposes the 128×128 bit matrix `m` in place: afterwards bit `j` of `m[i]` is what bit
/// `i` of `m[j]` was.
pub fn transpose_128(m: &mut [Block; 128]) {
    let mut a = [0u128; 128];
    for (x, b) in a.iter_mut().zip(m.iter()) {
        *x = b.0;
    }
    for &(w, mask) in &LEVELS {
        for base in (0..128).step_by(2 * w) {
            for i in base..base + w {
                let t = ((a[i] >> w) ^ a[i + w]) & mask;
                a[i] ^= t << w;
                a[i + w] ^= t;
            }
        }
    }
    for (b, x) in m.iter_mut().zip(a) {
        b.0 = x;
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

//! Label buffers shared by garbling and evaluation: one label per wire per instance, stored
//! wire-major (`labels[w · n + i]` for instance `i` of a chunk of `n`), so every gate touches
//! contiguous runs and the hashes of an AND gate go through AES as one batch.

use super::circuit::Wire;
use crate::Block;

/// Writes the labels of `wires` (instance-major in `labels`, `labels.len() / instances`
/// per instance) for instances `start .. start + n` into the wire-major buffer `lab`.
pub(crate) fn scatter(lab: &mut [Block], wires: &[Wire], labels: &[Block], start: usize, n: usize) {
    let per = wires.len();
    for (j, &w) in wires.iter().enumerate() {
        for i in 0..n {
            lab[w as usize * n + i] = labels[(start + i) * per + j];
        }
    }
}

/// `lab[o] = lab[a] ⊕ lab[b]` for the `n` instances (a free XOR gate).
pub(crate) fn xor_gate(lab: &mut [Block], a: Wire, b: Wire, o: Wire, n: usize) {
    let (a, b, o) = (a as usize * n, b as usize * n, o as usize * n);
    for i in 0..n {
        lab[o + i] = lab[a + i] ^ lab[b + i];
    }
}

/// `lab[o] = lab[a] ⊕ c` for the `n` instances (a free NOT gate: `c = Δ` for the garbler's
/// zero labels, `0` for the evaluator's labels).
pub(crate) fn not_gate(lab: &mut [Block], a: Wire, o: Wire, n: usize, c: Block) {
    let (a, o) = (a as usize * n, o as usize * n);
    for i in 0..n {
        lab[o + i] = lab[a + i] ^ c;
    }
}

//! Evaluation of half-gates garbled circuits ([`mod@super::garble`]): two hashes per AND gate,
//!
//! $$W_o = H(W_a, j) \oplus s_a T_G \oplus H(W_b, j') \oplus s_b (T_E \oplus W_a),$$
//!
//! with $s_a = \mathrm{lsb}(W_a)$, $s_b = \mathrm{lsb}(W_b)$; XOR gates XOR labels, NOT gates
//! copy them. An output bit is $\mathrm{lsb}(W) \oplus d$ with the garbler's decoding bit $d$;
//! [`evaluate_labels`] stops before decoding (outputs converted by [`super::arith`]).

use super::circuit::{Circuit, Gate};
use super::garble::{tweak_run, GarbledBatch, CHUNK};
use super::halfgates::{eval_and, Scratch};
use super::wires::{not_gate, scatter, xor_gate};
use crate::hash::FixedKeyHash;
use crate::{Block, Result, TwoPartyError};
use rayon::prelude::*;

/// Evaluates every instance of `batch`; `evaluator_labels` holds the evaluator's input labels
/// (from oblivious transfer), instance-major. Returns the output bits, instance-major.
pub fn evaluate(
    circuit: &Circuit,
    batch: &GarbledBatch,
    evaluator_labels: &[Block],
) -> Result<Vec<bool>> {
    let outs = circuit.outputs.len();
    if batch.decoding.len() != batch.instances * outs {
        return Err(TwoPartyError::InvalidArgument(format!(
            "evaluate: {} decoding bits for {} instances of {outs} outputs",
            batch.decoding.len(),
            batch.instances
        )));
    }
    let labels = evaluate_labels(circuit, batch, evaluator_labels)?;
    Ok(labels
        .iter()
        .zip(&batch.decoding)
        .map(|(l, &d)| l.lsb() ^ d)
        .collect())
}

/// Evaluates every instance of `batch` and returns the output wires' labels, instance-major,
/// without decoding them (for [`super::arith`] outputs, which the evaluator must not read).
pub fn evaluate_labels(
    circuit: &Circuit,
    batch: &GarbledBatch,
    evaluator_labels: &[Block],
) -> Result<Vec<Block>> {
    let n_all = batch.instances;
    let gi = circuit.garbler_inputs.len();
    let ei = circuit.evaluator_inputs.len();
    let ands = circuit.and_count();
    if evaluator_labels.len() != n_all * ei
        || batch.garbler_labels.len() != n_all * gi
        || batch.tables.len() != 2 * ands * n_all
    {
        return Err(TwoPartyError::InvalidArgument(format!(
            "evaluate: labels or tables do not fit {n_all} instances of the circuit"
        )));
    }
    let hash = FixedKeyHash::new();
    // chunks are independent: evaluated in parallel, each reading its own rows of the tables
    let starts: Vec<usize> = (0..n_all).step_by(CHUNK).collect();
    let parts: Vec<Vec<Block>> = starts
        .par_iter()
        .map(|&start| {
            evaluate_chunk(
                circuit,
                batch,
                evaluator_labels,
                start,
                CHUNK.min(n_all - start),
                &hash,
            )
        })
        .collect();
    Ok(parts.concat())
}

/// Output labels of instances `start..start + n` (instance-major).
fn evaluate_chunk(
    circuit: &Circuit,
    batch: &GarbledBatch,
    evaluator_labels: &[Block],
    start: usize,
    n: usize,
    hash: &FixedKeyHash,
) -> Vec<Block> {
    let (ands, outs) = (circuit.and_count(), circuit.outputs.len());
    let mut lab = vec![Block::ZERO; circuit.wires * n];
    scatter(
        &mut lab,
        &circuit.garbler_inputs,
        &batch.garbler_labels,
        start,
        n,
    );
    scatter(
        &mut lab,
        &circuit.evaluator_inputs,
        evaluator_labels,
        start,
        n,
    );
    // the garbler wrote the tables chunk by chunk, gate by gate, instance by instance
    let mut row = 2 * ands * start;
    let mut and_idx = 0;
    let mut scratch = Scratch::default();
    for g in &circuit.gates {
        match *g {
            Gate::Xor(a, b, o) => xor_gate(&mut lab, a, b, o, n),
            Gate::Not(a, o) => not_gate(&mut lab, a, o, n, Block::ZERO),
            Gate::And(a, b, o) => {
                eval_and(
                    hash,
                    &mut lab,
                    (a as usize * n, b as usize * n, o as usize * n),
                    n,
                    tweak_run(start, ands, and_idx),
                    &batch.tables[row..row + 2 * n],
                    &mut scratch,
                );
                row += 2 * n;
                and_idx += 1;
            }
        }
    }
    let mut out = vec![Block::ZERO; n * outs];
    for (k, &w) in circuit.outputs.iter().enumerate() {
        for i in 0..n {
            out[i * outs + k] = lab[w as usize * n + i];
        }
    }
    out
}

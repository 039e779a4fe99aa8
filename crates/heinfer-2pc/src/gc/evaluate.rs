//! Evaluation of half-gates garbled circuits ([`super::garble`]): two hashes per AND gate,
//!
//! $$W_o = H(W_a, j) \oplus s_a T_G \oplus H(W_b, j') \oplus s_b (T_E \oplus W_a),$$
//!
//! with $s_a = \mathrm{lsb}(W_a)$, $s_b = \mathrm{lsb}(W_b)$; XOR gates XOR labels, NOT gates
//! copy them. An output bit is $\mathrm{lsb}(W) \oplus d$ with the garbler's decoding bit $d$;
//! [`evaluate_labels`] stops before decoding (outputs converted by [`super::arith`]).

use super::circuit::{Circuit, Gate};
use super::garble::{tweaks, GarbledBatch, CHUNK};
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
    let (mut ha, mut hb, mut ta, mut tb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // the garbler wrote the tables chunk by chunk, gate by gate, instance by instance
    let mut row = 2 * ands * start;
    let mut and_idx = 0;
    for g in &circuit.gates {
        match *g {
            Gate::Xor(a, b, o) => xor_gate(&mut lab, a, b, o, n),
            Gate::Not(a, o) => not_gate(&mut lab, a, o, n, Block::ZERO),
            Gate::And(a, b, o) => {
                let (a, b, o) = (a as usize * n, b as usize * n, o as usize * n);
                ha.clear();
                hb.clear();
                ta.clear();
                tb.clear();
                for i in 0..n {
                    let (t0, t1) = tweaks(start + i, ands, and_idx);
                    ha.push(lab[a + i]);
                    hb.push(lab[b + i]);
                    ta.push(t0);
                    tb.push(t1);
                }
                hash.tccr_many(&mut ha, &ta);
                hash.tccr_many(&mut hb, &tb);
                for i in 0..n {
                    let wa = lab[a + i];
                    let tg = batch.tables[row + 2 * i];
                    let te = batch.tables[row + 2 * i + 1];
                    let wg = ha[i] ^ if wa.lsb() { tg } else { Block::ZERO };
                    let we = hb[i]
                        ^ if lab[b + i].lsb() {
                            te ^ wa
                        } else {
                            Block::ZERO
                        };
                    lab[o + i] = wg ^ we;
                }
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

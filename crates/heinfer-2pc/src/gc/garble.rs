//! Half-gates garbling (Zahur, Rosulek, Evans, "Two Halves Make a Whole", EUROCRYPT 2015)
//! with free-XOR (Kolesnikov–Schneider) and point-and-permute, many instances at once.
//!
//! The garbler draws a global offset $\Delta$ with $\mathrm{lsb}(\Delta) = 1$; wire $w$ carries
//! $W_w^0$ for 0 and $W_w^1 = W_w^0 \oplus \Delta$ for 1. XOR and NOT gates cost nothing
//! ($W_o^0 = W_a^0 \oplus W_b^0$, resp. $W_a^0 \oplus \Delta$). An AND gate with colour bits
//! $p_a = \mathrm{lsb}(W_a^0)$, $p_b = \mathrm{lsb}(W_b^0)$ and unique tweaks $j, j'$ sends two rows
//!
//! $$T_G = H(W_a^0, j) \oplus H(W_a^1, j) \oplus p_b\Delta, \qquad
//!   T_E = H(W_b^0, j') \oplus H(W_b^1, j') \oplus W_a^0,$$
//!
//! and $W_o^0 = H(W_a^0, j) \oplus p_a T_G \oplus H(W_b^0, j') \oplus p_b (T_E \oplus W_a^0)$, with
//! $H$ the tweakable correlation-robust hash [`FixedKeyHash::tccr`]. Evaluation needs two
//! hashes per AND gate ([`mod@super::evaluate`]).
//!
//! Instances are garbled gate by gate across the whole batch (labels stored wire-major), so
//! every hash call is a batch call: eight instances at a time through VAES (four blocks per
//! instruction) where the CPU has it, AES-NI on eight blocks elsewhere (`halfgates`).
//! Each chunk's input labels come from an AES-128-CTR stream under a fresh random key. Garbling
//! does not depend on the evaluator's inputs: it runs in the offline phase.

use rand_core::RngCore;
use rayon::prelude::*;
use zeroize::Zeroize;

use super::circuit::{Circuit, Gate};
use super::halfgates::{garble_and, Scratch};
use super::wires::{not_gate, scatter, xor_gate};
use crate::hash::FixedKeyHash;
use crate::ot::prg::ColumnPrg;
use crate::rng::random_block;
use crate::{Block, Result, TwoPartyError};

/// Instances garbled together (bounds the label memory: `wires · CHUNK · 16` bytes). The
/// tables travel chunk by chunk, so garbler and evaluator share this value: it is part of the
/// format ([`MAGIC`]). 256 keeps a chunk's labels in the core's cache and gives two workers
/// work from 512 instances on (measured against 4096, 2026-11-28: 1,000 ReLUs garbled in
/// 5.6–7.7 instead of 8.3–11.2 ms, on one or two threads).
pub(crate) const CHUNK: usize = 256;

/// The tweaks of AND gate `gate` (0-based among ANDs) of global instance `instance`: `2·id`
/// and `2·id + 1`, with `id = instance · and_gates + gate` unique over the batch.
#[cfg(test)]
pub(crate) fn tweaks(instance: usize, and_gates: usize, gate: usize) -> (u128, u128) {
    let id = (instance as u128) * (and_gates as u128) + gate as u128;
    (id << 1, (id << 1) | 1)
}

/// The first tweaks of AND gate `gate` for the instances `start, start + 1, …` as `(base, step)`:
/// instance `start + i` hashes with `base + i·step` and `base + i·step + 1` (see [`tweaks`]).
#[inline]
pub(crate) fn tweak_run(start: usize, and_gates: usize, gate: usize) -> (u128, u128) {
    let id = (start as u128) * (and_gates as u128) + gate as u128;
    (id << 1, (and_gates as u128) << 1)
}

/// What the garbler sends the evaluator: the garbled tables, the garbler's own input labels
/// and the output decoding bits, for `instances` copies of one circuit.
#[derive(Clone, PartialEq, Eq)]
pub struct GarbledBatch {
    /// Number of circuit instances.
    pub instances: usize,
    /// Two rows per AND gate per instance (chunk by chunk, gate-major within a chunk).
    pub tables: Vec<Block>,
    /// The label of each garbler input bit, instance-major.
    pub garbler_labels: Vec<Block>,
    /// `lsb(W⁰)` of each output wire, instance-major: output bit = `lsb(label) ⊕ decoding`.
    pub decoding: Vec<bool>,
}

impl Drop for GarbledBatch {
    /// The tables' buffer goes back to the pool for the next query's.
    fn drop(&mut self) {
        crate::pool::give(std::mem::take(&mut self.tables));
    }
}

impl std::fmt::Debug for GarbledBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GarbledBatch({} instances, {} rows)",
            self.instances,
            self.tables.len()
        )
    }
}

/// What the garbler keeps: `Δ`, the zero labels of the evaluator's input wires
/// (instance-major), which it hands to the OT sender, and the zero labels of the output wires
/// (instance-major), for outputs the evaluator must not read in the clear
/// ([`super::arith`]). Wiped on drop.
pub struct GarblerSecrets {
    /// The global offset (`lsb = 1`).
    pub delta: Block,
    /// `W⁰` of each evaluator input bit, instance-major.
    pub evaluator_zero_labels: Vec<Block>,
    /// `W⁰` of each output wire, instance-major.
    pub output_zero_labels: Vec<Block>,
}

impl Drop for GarblerSecrets {
    fn drop(&mut self) {
        self.delta.0.zeroize();
        for b in self
            .evaluator_zero_labels
            .iter_mut()
            .chain(self.output_zero_labels.iter_mut())
        {
            b.0.zeroize();
        }
    }
}

impl std::fmt::Debug for GarblerSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GarblerSecrets({} labels)",
            self.evaluator_zero_labels.len()
        )
    }
}

/// Garbles `instances` copies of `circuit`; `garbler_bits` holds the garbler's input bits,
/// instance-major (`instances × circuit.garbler_inputs.len()`).
pub fn garble<R: RngCore>(
    circuit: &Circuit,
    instances: usize,
    garbler_bits: &[bool],
    rng: &mut R,
) -> Result<(GarbledBatch, GarblerSecrets)> {
    let gi = circuit.garbler_inputs.len();
    let ei = circuit.evaluator_inputs.len();
    if garbler_bits.len() != instances * gi {
        return Err(TwoPartyError::InvalidArgument(format!(
            "garble: {} garbler bits for {instances} instances of {gi} inputs",
            garbler_bits.len()
        )));
    }
    let outs = circuit.outputs.len();
    let delta = Block(random_block(rng).0 | 1);
    // one key per chunk, drawn in order: the chunks are garbled in parallel, each drawing its
    // input labels from its own AES-128-CTR stream, and assembled in instance order (the same
    // layout as one pass)
    let starts: Vec<usize> = (0..instances).step_by(CHUNK).collect();
    let keys: Vec<Block> = starts.iter().map(|_| random_block(rng)).collect();
    let hash = FixedKeyHash::new();
    // every chunk writes its rows straight into its own part of the batch's tables (the
    // tables are most of the garbler's memory: no per-chunk copy to assemble)
    let rows_per_instance = 2 * circuit.and_count();
    // every row is written below, so a kept buffer's old rows need no zeroing
    let mut tables = crate::pool::take(rows_per_instance * instances);
    let mut parts: Vec<&mut [Block]> = Vec::with_capacity(starts.len());
    let mut rest = tables.as_mut_slice();
    for &start in &starts {
        let (part, tail) = rest.split_at_mut(rows_per_instance * CHUNK.min(instances - start));
        parts.push(part);
        rest = tail;
    }
    let chunks: Vec<Chunk> = parts
        .into_par_iter()
        .zip(starts.par_iter())
        .zip(keys.into_par_iter())
        .map(|((rows, &start), mut key)| {
            let n = CHUNK.min(instances - start);
            let chunk_prg = ColumnPrg::new(&[key]);
            key.0.zeroize();
            garble_chunk(
                circuit,
                start,
                n,
                &garbler_bits[start * gi..(start + n) * gi],
                delta,
                &hash,
                &chunk_prg,
                rows,
            )
        })
        .collect();
    let mut batch = GarbledBatch {
        instances,
        tables,
        garbler_labels: Vec::with_capacity(instances * gi),
        decoding: Vec::with_capacity(instances * outs),
    };
    let mut secrets = GarblerSecrets {
        delta,
        evaluator_zero_labels: Vec::with_capacity(instances * ei),
        output_zero_labels: Vec::with_capacity(instances * outs),
    };
    for mut c in chunks {
        batch.garbler_labels.append(&mut c.garbler_labels);
        batch.decoding.append(&mut c.decoding);
        secrets
            .evaluator_zero_labels
            .append(&mut c.evaluator_zero_labels);
        secrets.output_zero_labels.append(&mut c.output_zero_labels);
    }
    Ok((batch, secrets))
}

/// What one chunk of instances garbles to (see [`garble`]).
struct Chunk {
    garbler_labels: Vec<Block>,
    decoding: Vec<bool>,
    evaluator_zero_labels: Vec<Block>,
    output_zero_labels: Vec<Block>,
}

/// Garbles instances `start..start + n` with their garbler bits (instance-major), wire-major
/// over the chunk: every AND gate hashes its `n` instances in one batch and writes their rows
/// into `tables` (the chunk's `2·ands·n` rows, gate by gate).
#[allow(clippy::too_many_arguments)]
fn garble_chunk(
    circuit: &Circuit,
    start: usize,
    n: usize,
    bits: &[bool],
    delta: Block,
    hash: &FixedKeyHash,
    prg: &ColumnPrg,
    tables: &mut [Block],
) -> Chunk {
    let (gi, ei, outs, ands) = (
        circuit.garbler_inputs.len(),
        circuit.evaluator_inputs.len(),
        circuit.outputs.len(),
        circuit.and_count(),
    );
    let mut out = Chunk {
        garbler_labels: Vec::with_capacity(n * gi),
        decoding: vec![false; n * outs],
        evaluator_zero_labels: vec![Block::ZERO; n * ei],
        output_zero_labels: vec![Block::ZERO; n * outs],
    };
    let mut zero = vec![Block::ZERO; circuit.wires * n];
    // fresh zero labels for this chunk's inputs, instance-major like the callers' bits
    // (blocks 0 .. n·ei of the chunk's stream for the evaluator's, the next n·gi for its own)
    prg.xor_into(0, 0, &mut out.evaluator_zero_labels);
    let mut g0 = vec![Block::ZERO; n * gi];
    prg.xor_into(0, (n * ei) as u64, &mut g0);
    out.garbler_labels.extend(
        g0.iter()
            .zip(bits)
            .map(|(l, &bit)| if bit { *l ^ delta } else { *l }),
    );
    scatter(&mut zero, &circuit.garbler_inputs, &g0, 0, n);
    scatter(
        &mut zero,
        &circuit.evaluator_inputs,
        &out.evaluator_zero_labels,
        0,
        n,
    );
    g0.iter_mut().for_each(|b| b.0.zeroize());
    let mut and_idx = 0;
    let mut scratch = Scratch::default();
    for g in &circuit.gates {
        match *g {
            Gate::Xor(a, b, o) => xor_gate(&mut zero, a, b, o, n),
            Gate::Not(a, o) => not_gate(&mut zero, a, o, n, delta),
            Gate::And(a, b, o) => {
                garble_and(
                    hash,
                    &mut zero,
                    (a as usize * n, b as usize * n, o as usize * n),
                    n,
                    delta,
                    tweak_run(start, ands, and_idx),
                    &mut tables[2 * n * and_idx..2 * n * (and_idx + 1)],
                    &mut scratch,
                );
                and_idx += 1;
            }
        }
    }
    for (k, &w) in circuit.outputs.iter().enumerate() {
        for i in 0..n {
            let label = zero[w as usize * n + i];
            out.decoding[i * outs + k] = label.lsb();
            out.output_zero_labels[i * outs + k] = label;
        }
    }
    for b in &mut zero {
        b.0.zeroize();
    }
    out
}

/// Format tag of [`GarbledBatch::to_bytes`]: version 2 orders the tables in chunks of 256
/// instances (version 1, of 4096, is refused: its tables would be read in the wrong order).
const MAGIC: &[u8; 4] = b"HGC2";

impl GarbledBatch {
    /// The batch without its output decoding bits: what a garbler sends when the evaluator
    /// must not learn the outputs in the clear (it gets [`super::arith`] tables instead).
    pub fn without_decoding(mut self) -> GarbledBatch {
        self.decoding.clear();
        self
    }

    /// Bytes: magic, instances (u64 LE), tables, garbler labels, decoding bits packed LSB-first
    /// (none after [`Self::without_decoding`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_len());
        self.write_to(&mut out).expect("a Vec takes every write");
        out
    }

    /// Length of [`Self::to_bytes`].
    pub fn byte_len(&self) -> usize {
        MAGIC.len()
            + 8
            + 16 * (self.tables.len() + self.garbler_labels.len())
            + self.decoding.len().div_ceil(8)
    }

    /// Writes [`Self::to_bytes`] to `out` (a `Vec<u8>`, or the `&mut [u8]` part of a message
    /// that carries the batch among other fields: the batch is written once, in place; an
    /// error only if a slice is shorter than [`Self::byte_len`]).
    pub fn write_to<W: std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&(self.instances as u64).to_le_bytes())?;
        Block::write_into(&self.tables, out)?;
        Block::write_into(&self.garbler_labels, out)?;
        let packed: Vec<u8> = self
            .decoding
            .chunks(8)
            .map(|bits| {
                bits.iter()
                    .enumerate()
                    .fold(0u8, |b, (i, &bit)| b | u8::from(bit) << i)
            })
            .collect();
        out.write_all(&packed)
    }

    /// Parses [`Self::to_bytes`] for `circuit`, refusing any length that does not match
    /// `instances` copies of it and more than `max_instances` instances.
    pub fn from_bytes(
        bytes: &[u8],
        circuit: &Circuit,
        max_instances: usize,
    ) -> Result<GarbledBatch> {
        Self::parse(bytes, circuit, max_instances, true)
    }

    /// [`Self::from_bytes`] of a batch sent [`Self::without_decoding`].
    pub fn from_bytes_without_decoding(
        bytes: &[u8],
        circuit: &Circuit,
        max_instances: usize,
    ) -> Result<GarbledBatch> {
        Self::parse(bytes, circuit, max_instances, false)
    }

    fn parse(
        bytes: &[u8],
        circuit: &Circuit,
        max_instances: usize,
        with_decoding: bool,
    ) -> Result<GarbledBatch> {
        let bad = |reason: String| TwoPartyError::Deserialize {
            what: "garbled batch",
            reason,
        };
        if bytes.len() < 12 || &bytes[..4] != MAGIC {
            return Err(bad("missing header".into()));
        }
        let instances = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
        if instances == 0 || instances > max_instances as u64 {
            return Err(bad(format!(
                "{instances} instances (allowed 1..={max_instances})"
            )));
        }
        let n = instances as usize;
        let rows = 2 * circuit.and_count() * n;
        let labels = circuit.garbler_inputs.len() * n;
        let bits = if with_decoding {
            circuit.outputs.len() * n
        } else {
            0
        };
        let want = 12 + 16 * (rows + labels) + bits.div_ceil(8);
        if bytes.len() != want {
            return Err(bad(format!(
                "{} bytes, expected {want} for {n} instances",
                bytes.len()
            )));
        }
        let body = &bytes[12..];
        let mut tables = crate::pool::take(rows);
        Block::copy_from_bytes(&body[..16 * rows], &mut tables);
        let garbler_labels =
            Block::read_all(&body[16 * rows..16 * (rows + labels)], "garbler labels")?;
        let packed = &body[16 * (rows + labels)..];
        if !bits.is_multiple_of(8) && packed[packed.len() - 1] >> (bits % 8) != 0 {
            return Err(bad("padding bits are not zero".into()));
        }
        let decoding = (0..bits)
            .map(|i| packed[i / 8] >> (i % 8) & 1 == 1)
            .collect();
        Ok(GarbledBatch {
            instances: n,
            tables,
            garbler_labels,
            decoding,
        })
    }
}

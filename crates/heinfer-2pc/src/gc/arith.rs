//! Circuit outputs as additive shares modulo `p`, never in the clear (garbled → arithmetic).
//!
//! A circuit's outputs are the bits `v_k` of a value `y = Σ_k v_k·2^k` (the layer's result).
//! Instead of decoding bits, the garbler draws `ρ_k` uniform mod `p` per output wire and sends,
//! for the wire's two labels `W^v = W⁰ ⊕ v·Δ`, the two entries
//!
//! $$T[\\mathrm{lsb}(W^v)] = v·2^k − ρ_k + H(W^v, t) \\bmod p, \\qquad v ∈ \\{0, 1\\},$$
//!
//! with `H(W, t)` the tweakable correlation-robust hash [`FixedKeyHash::tccr`] read as a
//! 128-bit integer mod `p` (bias below `p/2^128`) and `t` a tweak unique to the wire. The
//! evaluator holds one label `W` per wire and reads `T[lsb(W)] − H(W, t) = v_k·2^k − ρ_k`;
//! summed over the wires of an instance that is `y − Σρ_k`, its share, and `Σρ_k` is the
//! garbler's. The other entry is masked by `H(W ⊕ Δ, t)`, pseudorandom without `Δ`, so the
//! evaluator learns nothing of `y` beyond its (uniform) share. Per output bit this costs two
//! entries of `⌈log2 p / 8⌉` bytes, far less than the adder mod `p` (3b + 1 AND gates, 32
//! bytes each) that re-sharing inside the circuit costs.

use rand_core::RngCore;
use rayon::prelude::*;

use crate::hash::FixedKeyHash;
use crate::rng::uniform_mod;
use crate::{Block, Result, TwoPartyError};

/// Tweaks of the output hashes: the top bit set, disjoint from the AND gates' tweaks.
const OUTPUT_TWEAK: u128 = 1 << 127;
/// Output wires hashed per parallel task.
const PAR: usize = 1 << 14;

/// The garbler's two entries per output wire, instance-major, wire-minor.
#[derive(Clone, PartialEq, Eq)]
pub struct OutputTable {
    /// Output wires per instance.
    pub outs: usize,
    /// `2 · instances · outs` entries below `p`.
    pub entries: Vec<u64>,
}

impl std::fmt::Debug for OutputTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OutputTable({} entries)", self.entries.len())
    }
}

fn hash_mod(hash: &FixedKeyHash, labels: &mut [Block], first: usize, p: u64) -> Vec<u64> {
    let tweaks: Vec<u128> = (0..labels.len())
        .map(|j| OUTPUT_TWEAK | (first + j) as u128)
        .collect();
    hash.tccr_many(labels, &tweaks);
    let r64 = (u64::MAX % p + 1) % p; // 2^64 mod p
    labels.iter().map(|b| reduce128(b.0, p, r64)).collect()
}

/// `x mod p` given `r64 = 2^64 mod p`: below 2^32 by three 64-bit divisions
/// (`x = hi·2^64 + lo`, every partial below 2^64), a fraction of a 128-bit one.
#[inline]
fn reduce128(x: u128, p: u64, r64: u64) -> u64 {
    if p < 1 << 32 {
        let (hi, lo) = ((x >> 64) as u64, x as u64);
        ((hi % p) * r64 + lo % p) % p
    } else {
        (x % u128::from(p)) as u64
    }
}

fn check(outs: usize, p: u64, labels: usize) -> Result<()> {
    if outs == 0 || outs > 63 || !labels.is_multiple_of(outs) || !(2..1 << 62).contains(&p) {
        return Err(TwoPartyError::InvalidArgument(format!(
            "{labels} output labels of {outs}-bit values modulo {p}"
        )));
    }
    Ok(())
}

/// The garbler's table for outputs with zero labels `zero` (instance-major, `outs` per
/// instance) and offset `delta`, and its shares `Σρ mod p`, one per instance.
pub fn garble_outputs<R: RngCore>(
    zero: &[Block],
    delta: Block,
    outs: usize,
    p: u64,
    rng: &mut R,
) -> Result<(OutputTable, Vec<u64>)> {
    check(outs, p, zero.len())?;
    let rho: Vec<u64> = (0..zero.len()).map(|_| uniform_mod(rng, p)).collect();
    let hash = FixedKeyHash::new();
    let chunks: Vec<Vec<u64>> = zero
        .par_chunks(PAR)
        .zip(rho.par_chunks(PAR))
        .enumerate()
        .map(|(c, (zs, rs))| {
            let first = c * PAR;
            let mut l0: Vec<Block> = zs.to_vec();
            let mut l1: Vec<Block> = zs.iter().map(|&z| z ^ delta).collect();
            let h0 = hash_mod(&hash, &mut l0, first, p);
            let h1 = hash_mod(&hash, &mut l1, first, p);
            let mut out = Vec::with_capacity(2 * zs.len());
            for (j, (&z, &r)) in zs.iter().zip(rs).enumerate() {
                let weight = (1u64 << ((first + j) % outs)) % p;
                let e0 = (p - r + h0[j]) % p; // v = 0: −ρ + H(W⁰)
                let e1 = ((weight + p - r) % p + h1[j]) % p; // v = 1: 2^k − ρ + H(W¹)
                if z.lsb() {
                    out.extend([e1, e0]);
                } else {
                    out.extend([e0, e1]);
                }
            }
            l0.iter_mut().chain(l1.iter_mut()).for_each(|b| b.0 = 0);
            out
        })
        .collect();
    let shares = rho
        .chunks(outs)
        .map(|rs| rs.iter().fold(0u64, |a, &r| (a + r) % p))
        .collect();
    Ok((
        OutputTable {
            outs,
            entries: chunks.concat(),
        },
        shares,
    ))
}

/// The evaluator's shares `y − Σρ mod p`, one per instance, from its output labels
/// (instance-major) and the garbler's table.
pub fn decode_outputs(labels: &[Block], table: &OutputTable, p: u64) -> Result<Vec<u64>> {
    check(table.outs, p, labels.len())?;
    if table.entries.len() != 2 * labels.len() {
        return Err(TwoPartyError::InvalidArgument(format!(
            "{} output entries for {} labels",
            table.entries.len(),
            labels.len()
        )));
    }
    let hash = FixedKeyHash::new();
    let parts: Vec<Vec<u64>> = labels
        .par_chunks(PAR)
        .enumerate()
        .map(|(c, ls)| {
            let first = c * PAR;
            let mut l = ls.to_vec();
            let h = hash_mod(&hash, &mut l, first, p);
            ls.iter()
                .enumerate()
                .map(|(j, w)| {
                    let e = table.entries[2 * (first + j) + usize::from(w.lsb())];
                    (e + p - h[j]) % p
                })
                .collect()
        })
        .collect();
    Ok(parts
        .concat()
        .chunks(table.outs)
        .map(|vs| vs.iter().fold(0u64, |a, &v| (a + v) % p))
        .collect())
}

impl OutputTable {
    /// Bytes per entry for modulus `p`.
    pub fn width(p: u64) -> usize {
        (64 - p.leading_zeros() as usize).div_ceil(8)
    }

    /// The entries, each in [`Self::width`] little-endian bytes.
    pub fn to_bytes(&self, p: u64) -> Vec<u8> {
        let w = Self::width(p);
        let mut out = Vec::with_capacity(w * self.entries.len());
        for &e in &self.entries {
            out.extend_from_slice(&e.to_le_bytes()[..w]);
        }
        out
    }

    /// Parses [`Self::to_bytes`] for `instances` instances of `outs` outputs modulo `p`:
    /// refuses another length and any entry not below `p`.
    pub fn from_bytes(bytes: &[u8], instances: usize, outs: usize, p: u64) -> Result<OutputTable> {
        let w = Self::width(p);
        let n = 2 * instances * outs;
        if bytes.len() != n * w {
            return Err(TwoPartyError::Deserialize {
                what: "output table",
                reason: format!(
                    "{} bytes, expected {} for {instances} instances",
                    bytes.len(),
                    n * w
                ),
            });
        }
        let entries: Vec<u64> = bytes
            .chunks(w)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..w].copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        if let Some(e) = entries.iter().find(|&&e| e >= p) {
            return Err(TwoPartyError::Deserialize {
                what: "output table",
                reason: format!("entry {e} is not below p = {p}"),
            });
        }
        Ok(OutputTable { outs, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::reduce128;

    #[test]
    fn reduce128_is_the_remainder() {
        let xs = [
            0u128,
            1,
            u128::MAX,
            u128::MAX - 1,
            1 << 64,
            (1 << 64) - 1,
            0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835,
        ];
        for p in [
            2u64,
            3,
            1_032_193,
            (1 << 32) - 5,
            (1 << 32) + 15,
            (1 << 61) - 1,
        ] {
            let r64 = (u64::MAX % p + 1) % p;
            for &x in &xs {
                assert_eq!(
                    u128::from(reduce128(x, p, r64)),
                    x % u128::from(p),
                    "{x} mod {p}"
                );
            }
        }
    }
}

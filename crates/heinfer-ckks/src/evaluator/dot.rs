//! Sums of ciphertext–plaintext products in one pass: the inner sum of a linear transform.
//!
//! A baby-step giant-step linear transform (Halevi–Shoup; GAZELLE §5; Bossuat et al.'s double
//! hoisting) computes, per giant step, `Σ_t pt_t ⊙ rot(x, b_t)`. Forming each product as a
//! new ciphertext and adding it costs an allocation and three passes over memory per term;
//! [`Evaluator::dot_plain`] and [`Evaluator::dot_plain_extended`] accumulate every product
//! into one output limb at a time (which stays in cache) and, in the extended basis, finish
//! with the single ModDown of double hoisting. [`Evaluator::dot_plain_groups`] and
//! [`Evaluator::dot_plain_extended_groups`] make many such sums over shared ciphertexts (a
//! transform's giant steps over its baby steps) in one pass, column chunk by column chunk.

use super::{same_level, same_scale, Evaluator};
use crate::ciphertext::{check_scale, Ciphertext, Plaintext};
use crate::compact::{PlainTerm, Words};
use crate::error::{CkksError, Result};
use crate::evaluator::extended::ExtendedCiphertext;
use crate::poly::{modulus_index, RnsPoly};
use heinfer_math::dot;
use rayon::prelude::*;

fn invalid(op: &'static str, reason: &str) -> CkksError {
    CkksError::InvalidOperand {
        op,
        reason: reason.into(),
    }
}

/// Column chunks per limb at least: a ciphertext has 2–4 limbs at the levels of a linear
/// layer, too few tasks to keep every thread busy (3 limbs on 2 threads leave one idle half the
/// time); 4 chunks per limb make 8–16 tasks.
const CHUNKS: usize = 4;

/// Bytes of the terms' ciphertext columns one task keeps hot while it walks every group
/// (about half of a core's L2 on the machines measured: 2 MB on AMD EPYC, 1–2 MB on Xeons).
const TASK_BYTES: usize = 1 << 20;

/// Fewest words in a column chunk.
const MIN_WIDTH: usize = 256;

/// The column chunk width for `xs` distinct ciphertexts of `parts` parts: a power of two
/// dividing `n`, at most `n / CHUNKS`, small enough that one chunk of every ciphertext fits
/// [`TASK_BYTES`] (never below [`MIN_WIDTH`]).
fn chunk_width(n: usize, xs: usize, parts: usize) -> usize {
    let mut w = (n / CHUNKS).max(1);
    while w > MIN_WIDTH && xs * parts * w * 8 > TASK_BYTES {
        w /= 2;
    }
    w
}

/// One group's sums over the terms' ciphertexts: which ciphertext each term multiplies (an
/// index into the shared list) and its plaintext.
type Group<'a, P> = (&'a [usize], &'a [&'a P]);

/// `acc_g = Σ_{t ∈ g} x_{idx_t} · pt_t` for every group `g`, part `j` and limb `i`:
/// `part(x, j, i)` is limb `i` of part `j` of ciphertext `x`, `bc(i)` the limb's Barrett
/// constant; `[group][part]` accumulators of `limbs · n` words.
///
/// One task per `(limb, column chunk)` walks every group: the chunk of every ciphertext stays
/// in cache across the groups that reuse it (a transform's baby steps serve every output and
/// giant step), and each plaintext word is read once, for both parts of a two-part ciphertext
/// ([`dot::dot2`]; other sizes part by part with [`dot::dot1`]); a limb kept in 32-bit words
/// ([`CompactPlaintext`](crate::CompactPlaintext)) through [`dot::dot2_narrow`] and
/// [`dot::dot1_narrow`], which read those words as they are.
fn grouped_sums<'a, P: PlainTerm>(
    parts: usize,
    limbs: usize,
    n: usize,
    xs: usize,
    groups: &[Group<'a, P>],
    part: impl Fn(usize, usize, usize) -> &'a [u64] + Sync,
    bc: impl Fn(usize) -> &'a heinfer_math::vecops::BarrettConst + Sync,
) -> Vec<Vec<Vec<u64>>> {
    let w = chunk_width(n, xs, parts);
    let mut acc: Vec<Vec<Vec<u64>>> = groups
        .iter()
        .map(|_| (0..parts).map(|_| vec![0u64; limbs * n]).collect())
        .collect();
    // task `c` covers words `c·w ..` of every accumulator: limb `c·w / n`, columns `c·w % n ..`
    let mut outs: Vec<Vec<&mut [u64]>> = (0..limbs * n / w)
        .map(|_| Vec::with_capacity(groups.len() * parts))
        .collect();
    for a in acc.iter_mut().flatten() {
        for (c, chunk) in a.chunks_mut(w).enumerate() {
            outs[c].push(chunk);
        }
    }
    outs.into_par_iter().enumerate().for_each(|(c, mut out)| {
        let (i, col) = ((c * w) / n, (c * w) % n);
        let cols = col..col + w;
        for ((idx, pts), out) in groups.iter().zip(out.chunks_mut(parts)) {
            let x = |j: usize| -> Vec<&[u64]> {
                idx.iter().map(|&t| &part(t, j, i)[cols.clone()]).collect()
            };
            // a limb's words are 32-bit in every plaintext of the call or in none (checked)
            match pts[0].words(i) {
                Words::Wide(_) => {
                    let b: Vec<&[u64]> = pts
                        .iter()
                        .map(|p| &wide(p.words(i))[cols.clone()])
                        .collect();
                    if let [out0, out1] = out {
                        dot::dot2(out0, out1, &b, &x(0), &x(1), bc(i));
                    } else {
                        for (j, o) in out.iter_mut().enumerate() {
                            dot::dot1(o, &x(j), &b, bc(i));
                        }
                    }
                }
                Words::Narrow(_) => {
                    let b: Vec<&[u32]> = pts
                        .iter()
                        .map(|p| &narrow(p.words(i))[cols.clone()])
                        .collect();
                    if let [out0, out1] = out {
                        dot::dot2_narrow(out0, out1, &b, &x(0), &x(1), bc(i));
                    } else {
                        for (j, o) in out.iter_mut().enumerate() {
                            dot::dot1_narrow(o, &x(j), &b, bc(i));
                        }
                    }
                }
            }
        }
    });
    acc
}

/// A limb's 64-bit words (the grouped sums checked that every plaintext has them).
fn wide(w: Words<'_>) -> &[u64] {
    match w {
        Words::Wide(v) => v,
        Words::Narrow(_) => {
            unreachable!("checked by check_groups: a limb is wide in every plaintext")
        }
    }
}

/// A limb's 32-bit words (as [`wide`]).
fn narrow(w: Words<'_>) -> &[u32] {
    match w {
        Words::Narrow(v) => v,
        Words::Wide(_) => {
            unreachable!("checked by check_groups: a limb is narrow in every plaintext")
        }
    }
}

/// What a grouped sum reads of its ciphertexts, plain or extended.
trait Summand: Sync {
    /// Checks it against the evaluator's parameters.
    fn check(&self, ev: &Evaluator) -> Result<()>;
    /// Parameters id, level and scale.
    fn head(&self) -> (u64, usize, f64);
    /// Its polynomials.
    fn parts(&self) -> &[RnsPoly];
}

impl Summand for Ciphertext {
    fn check(&self, ev: &Evaluator) -> Result<()> {
        ev.check_ct(self)
    }
    fn head(&self) -> (u64, usize, f64) {
        (self.params_id, self.level, self.scale)
    }
    fn parts(&self) -> &[RnsPoly] {
        &self.parts
    }
}

impl Summand for ExtendedCiphertext {
    fn check(&self, ev: &Evaluator) -> Result<()> {
        ev.params.check_id(self.params_id)
    }
    fn head(&self) -> (u64, usize, f64) {
        (self.params_id, self.level, self.scale)
    }
    fn parts(&self) -> &[RnsPoly] {
        &self.parts
    }
}

/// The checks of a grouped sum: at least one group, each with as many plaintexts as term
/// indices (at least one, each naming one of `xs` ciphertexts), plaintexts of these parameters
/// sharing one scale; `limbs_ok(pt)` checks a plaintext's level and limbs.
fn check_groups<P: PlainTerm>(
    ev: &Evaluator,
    op: &'static str,
    xs: usize,
    groups: &[Group<'_, P>],
    limbs_ok: impl Fn(&P) -> bool,
    limbs_reason: &str,
) -> Result<f64> {
    let p0 = match groups.first().and_then(|(_, pts)| pts.first()) {
        Some(p) => *p,
        None => return Err(invalid(op, "needs at least one group of at least one term")),
    };
    let narrow = |p: &P, i: usize| matches!(p.words(i), Words::Narrow(_));
    for (idx, pts) in groups {
        if idx.is_empty() || idx.len() != pts.len() {
            return Err(invalid(
                op,
                "each group needs as many plaintexts as terms, at least one",
            ));
        }
        if idx.iter().any(|&t| t >= xs) {
            return Err(invalid(
                op,
                "a term names a ciphertext that is not in the list",
            ));
        }
        for pt in pts.iter() {
            let (id, _, scale) = pt.head();
            ev.params.check_id(id)?;
            same_scale(op, p0.head().2, scale)?;
            if !limbs_ok(pt) {
                return Err(invalid(op, limbs_reason));
            }
            if (0..pt.limbs().min(p0.limbs())).any(|i| narrow(pt, i) != narrow(p0, i)) {
                return Err(invalid(
                    op,
                    "plaintexts whose limbs are kept in different word sizes",
                ));
            }
        }
    }
    Ok(p0.head().2)
}

impl Evaluator {
    /// `Σ_t cts[t] · pts[t]` (no rescale). All ciphertexts share level, size and scale, all
    /// plaintexts share a scale and are at the ciphertexts' level or above.
    pub fn dot_plain(&self, cts: &[&Ciphertext], pts: &[&Plaintext]) -> Result<Ciphertext> {
        let idx: Vec<usize> = (0..cts.len()).collect();
        let mut out = self.grouped("dot_plain", cts, &[(&idx, pts)], false)?;
        Ok(out.remove(0))
    }

    /// [`Evaluator::dot_plain`] for several groups of terms over one list of ciphertexts:
    /// output `g` is `Σ_t xs[groups[g].0[t]] · groups[g].1[t]`. Every group's sums are made in
    /// one pass over the ciphertexts' columns, column chunk by column chunk: the ciphertexts a
    /// transform's groups share are read from memory once, not once per group. Bit-identical
    /// to one [`Evaluator::dot_plain`] per group.
    ///
    /// The plaintexts may be [`Plaintext`]s or [`CompactPlaintext`](crate::CompactPlaintext)s
    /// (each limb below `2^32` read in half the bytes; the same result).
    pub fn dot_plain_groups<P: PlainTerm>(
        &self,
        xs: &[&Ciphertext],
        groups: &[(&[usize], &[&P])],
    ) -> Result<Vec<Ciphertext>> {
        self.grouped("dot_plain_groups", xs, groups, false)
    }

    /// `ModDown(Σ_t exts[t] · pts[t])`: the products of extended ciphertexts (from
    /// [`Evaluator::rotate_hoisted_extended`]) and extended plaintexts summed over `Q_ℓ ∪ P`,
    /// then divided by `P` once.
    pub fn dot_plain_extended(
        &self,
        exts: &[&ExtendedCiphertext],
        pts: &[&Plaintext],
    ) -> Result<Ciphertext> {
        let idx: Vec<usize> = (0..exts.len()).collect();
        let mut out = self.grouped("dot_plain_extended", exts, &[(&idx, pts)], true)?;
        Ok(out.remove(0))
    }

    /// [`Evaluator::dot_plain_extended`] for several groups of terms over one list of extended
    /// ciphertexts, in one pass over their columns (as [`Evaluator::dot_plain_groups`]), each
    /// group's sum then brought down to `Q_ℓ`. Bit-identical to one call per group.
    pub fn dot_plain_extended_groups<P: PlainTerm>(
        &self,
        xs: &[&ExtendedCiphertext],
        groups: &[(&[usize], &[&P])],
    ) -> Result<Vec<Ciphertext>> {
        self.grouped("dot_plain_extended_groups", xs, groups, true)
    }

    /// The grouped sums of [`Evaluator::dot_plain_groups`] (`extended = false`: ciphertexts
    /// and plaintexts over `Q_ℓ`, plaintexts at the level or above) and
    /// [`Evaluator::dot_plain_extended_groups`] (`true`: over `Q_ℓ ∪ P`, plaintexts at the level
    /// with the `P` limbs, each sum brought down to `Q_ℓ`).
    fn grouped<T: Summand, P: PlainTerm>(
        &self,
        op: &'static str,
        xs: &[&T],
        groups: &[Group<'_, P>],
        extended: bool,
    ) -> Result<Vec<Ciphertext>> {
        let x0 = match xs.first() {
            Some(x) => *x,
            None => return Err(invalid(op, "needs at least one ciphertext")),
        };
        let (id, level, xscale) = x0.head();
        for x in xs {
            x.check(self)?;
            let (_, l, sc) = x.head();
            same_level(op, level, l)?;
            same_scale(op, xscale, sc)?;
            if x.parts().len() != x0.parts().len() {
                return Err(invalid(op, "ciphertexts of different sizes"));
            }
        }
        let k = if extended { self.params.p().len() } else { 0 };
        let pscale = if extended {
            check_groups(self, op, xs.len(), groups, |pt| pt.head().1 == level && pt.limbs() == level + 1 + k,
                "a plaintext is not at the ciphertexts' level or has no P limbs (encode it with encode_extended)")?
        } else {
            check_groups(
                self,
                op,
                xs.len(),
                groups,
                |pt| pt.head().1 >= level && pt.limbs() == pt.head().1 + 1,
                "a plaintext is below the ciphertexts' level or extended",
            )?
        };
        let scale = xscale * pscale;
        check_scale(scale)?;
        let (n, inner) = (self.params.n(), self.params.inner());
        let acc = grouped_sums(
            x0.parts().len(),
            level + 1 + k,
            n,
            xs.len(),
            groups,
            |t, j, i| xs[t].parts()[j].limb(i),
            |i| &inner.barrett[modulus_index(&self.params, level, i)],
        );
        let finish = |a: Vec<u64>| {
            if extended {
                self.mod_down(a, level)
            } else {
                RnsPoly::from_data(a, n)
            }
        };
        // the groups' ModDowns in parallel: one at a low level has too few limbs to keep
        // every core busy, and a transform's groups (its outputs × giant steps) are many
        Ok(acc
            .into_par_iter()
            .map(|g| Ciphertext {
                params_id: id,
                parts: g.into_par_iter().map(finish).collect(),
                level,
                scale,
                seed: None,
            })
            .collect())
    }
}

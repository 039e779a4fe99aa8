//! One AND gate of a chunk of instances, garbled or evaluated ([`super::garble`],
//! [`super::evaluate`] hold the math): the labels live wire-major in `lab`
//! (`lab[w·n + i]`), the gate reads wires at offsets `a` and `b` and writes offset `o`.
//!
//! Instance `i`'s tweaks are `t_i = base + i·step` and `t_i + 1` (`base` even, `step` even:
//! see [`super::garble::tweaks`]). Where the CPU has VAES on 512-bit registers
//! ([`crate::vaes`]), eight instances go through the hashes and the gate's XORs in registers;
//! the instances left over, and every instance elsewhere, take the generic path, which
//! computes the same blocks.

use crate::hash::FixedKeyHash;
use crate::Block;

/// The generic path's hash buffers, kept across the gates of a chunk (no allocation per gate).
#[derive(Default)]
pub(crate) struct Scratch {
    ha: Vec<Block>,
    hb: Vec<Block>,
    ta: Vec<u128>,
    tb: Vec<u128>,
}

impl Scratch {
    fn clear(&mut self) {
        self.ha.clear();
        self.hb.clear();
        self.ta.clear();
        self.tb.clear();
    }
}

/// Instances per step of the VAES kernels (two registers of four labels per wire).
#[cfg(target_arch = "x86_64")]
const STEP: usize = 8;

/// The garbler's half of an AND gate for `n` instances: writes the rows `T_G, T_E` of each
/// instance into `rows` (`2n` blocks, instance by instance) and the output zero labels at `o`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn garble_and(
    hash: &FixedKeyHash,
    lab: &mut [Block],
    (a, b, o): (usize, usize, usize),
    n: usize,
    delta: Block,
    (base, step): (u128, u128),
    rows: &mut [Block],
    scratch: &mut Scratch,
) {
    assert_eq!(rows.len(), 2 * n, "two rows per instance");
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(rk) = hash.vaes_keys() {
        // SAFETY: `vaes_keys` is Some only on CPUs with AES, VAES and AVX-512F.
        done = unsafe { x86::garble(rk, lab, (a, b, o), n, delta, (base, step), rows) };
    }
    scratch.clear();
    let Scratch { ha, hb, ta, tb } = scratch;
    for i in done..n {
        let t0 = base + i as u128 * step;
        ha.extend([lab[a + i], lab[a + i] ^ delta]);
        hb.extend([lab[b + i], lab[b + i] ^ delta]);
        ta.extend([t0, t0]);
        tb.extend([t0 | 1, t0 | 1]);
    }
    hash.tccr_many(ha, ta);
    hash.tccr_many(hb, tb);
    for (k, i) in (done..n).enumerate() {
        let a0 = lab[a + i];
        let (pa, pb) = (a0.lsb(), lab[b + i].lsb());
        let tg = ha[2 * k] ^ ha[2 * k + 1] ^ if pb { delta } else { Block::ZERO };
        let wg = ha[2 * k] ^ if pa { tg } else { Block::ZERO };
        let te = hb[2 * k] ^ hb[2 * k + 1] ^ a0;
        let we = hb[2 * k] ^ if pb { te ^ a0 } else { Block::ZERO };
        lab[o + i] = wg ^ we;
        rows[2 * i] = tg;
        rows[2 * i + 1] = te;
    }
}

/// The evaluator's half of an AND gate for `n` instances, reading each instance's two rows
/// from `rows` (instance by instance) and writing the output labels at `o`.
pub(crate) fn eval_and(
    hash: &FixedKeyHash,
    lab: &mut [Block],
    (a, b, o): (usize, usize, usize),
    n: usize,
    (base, step): (u128, u128),
    rows: &[Block],
    scratch: &mut Scratch,
) {
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(rk) = hash.vaes_keys() {
        // SAFETY: `vaes_keys` is Some only on CPUs with AES, VAES and AVX-512F.
        done = unsafe { x86::eval(rk, lab, (a, b, o), n, (base, step), rows) };
    }
    scratch.clear();
    let Scratch { ha, hb, ta, tb } = scratch;
    for i in done..n {
        let t0 = base + i as u128 * step;
        ha.push(lab[a + i]);
        hb.push(lab[b + i]);
        ta.push(t0);
        tb.push(t0 | 1);
    }
    hash.tccr_many(ha, ta);
    hash.tccr_many(hb, tb);
    for (k, i) in (done..n).enumerate() {
        let wa = lab[a + i];
        let (tg, te) = (rows[2 * i], rows[2 * i + 1]);
        let wg = ha[k] ^ if wa.lsb() { tg } else { Block::ZERO };
        let we = hb[k]
            ^ if lab[b + i].lsb() {
                te ^ wa
            } else {
                Block::ZERO
            };
        lab[o + i] = wg ^ we;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::STEP;
    use crate::vaes::{colour_mask, load4, store4, tccr, RoundKeys};
    use crate::Block;
    use std::arch::x86_64::*;

    /// The tweaks `base + i·step` of instances `i .. i + 4` in one register.
    #[inline(always)]
    unsafe fn tweaks4(base: u128, step: u128, i: usize) -> __m512i {
        let t = [0, 1, 2, 3].map(|k| base + (i + k) as u128 * step);
        load4(&t)
    }

    /// What both halves of a gate read for instances `i .. i + 8`: the labels of wires `a`
    /// and `b` and the tweaks `t` and `t + 1`, two registers of four each.
    struct Step {
        av: [__m512i; 2],
        bv: [__m512i; 2],
        t0: [__m512i; 2],
        t1: [__m512i; 2],
    }

    #[inline(always)]
    unsafe fn step_inputs(
        lab: &[u128],
        (a, b): (usize, usize),
        i: usize,
        (base, step): (u128, u128),
    ) -> Step {
        let one = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
        let t0 = [tweaks4(base, step, i), tweaks4(base, step, i + 4)];
        Step {
            av: [load4(&lab[a + i..]), load4(&lab[a + i + 4..])],
            bv: [load4(&lab[b + i..]), load4(&lab[b + i + 4..])],
            t0,
            t1: [_mm512_or_si512(t0[0], one), _mm512_or_si512(t0[1], one)],
        }
    }

    /// Rows `T_G, T_E` of four instances (two registers) from their `T_G` and `T_E` registers.
    const LOW_PAIRS: [i64; 8] = [0, 1, 8, 9, 2, 3, 10, 11];
    const HIGH_PAIRS: [i64; 8] = [4, 5, 12, 13, 6, 7, 14, 15];
    /// `T_G` and `T_E` of four instances from their rows (two registers).
    const EVEN_LANES: [i64; 8] = [0, 1, 4, 5, 8, 9, 12, 13];
    const ODD_LANES: [i64; 8] = [2, 3, 6, 7, 10, 11, 14, 15];

    #[inline(always)]
    unsafe fn index(i: [i64; 8]) -> __m512i {
        // SAFETY: eight i64 (64 bytes) are readable at `i`.
        unsafe { _mm512_loadu_si512(i.as_ptr() as *const _) }
    }

    /// Garbles the first `n − n mod 8` instances; returns how many.
    ///
    /// # Safety
    /// The CPU must have AES, VAES and AVX-512F.
    #[target_feature(enable = "avx512f,vaes")]
    pub(super) unsafe fn garble(
        rk: &RoundKeys,
        lab: &mut [Block],
        (a, b, o): (usize, usize, usize),
        n: usize,
        delta: Block,
        (base, step): (u128, u128),
        rows: &mut [Block],
    ) -> usize {
        let keys = rk.broadcast();
        let d = _mm512_broadcast_i32x4(_mm_loadu_si128(&delta.0 as *const u128 as *const __m128i));
        let (lo, hi) = (index(LOW_PAIRS), index(HIGH_PAIRS));
        let lab = Block::as_words_mut(lab);
        let rows = Block::as_words_mut(rows);
        let mut i = 0;
        while i + STEP <= n {
            let Step { av, bv, t0, t1 } = step_inputs(lab, (a, b), i, (base, step));
            let mut h = [
                av[0],
                _mm512_xor_si512(av[0], d),
                av[1],
                _mm512_xor_si512(av[1], d),
                bv[0],
                _mm512_xor_si512(bv[0], d),
                bv[1],
                _mm512_xor_si512(bv[1], d),
            ];
            tccr(
                &keys,
                &mut h,
                &[t0[0], t0[0], t0[1], t0[1], t1[0], t1[0], t1[1], t1[1]],
            );
            for g in 0..2 {
                let (ha0, ha1, hb0, hb1) = (h[2 * g], h[2 * g + 1], h[4 + 2 * g], h[5 + 2 * g]);
                let (pa, pb) = (colour_mask(av[g]), colour_mask(bv[g]));
                let tg = _mm512_mask_xor_epi64(
                    _mm512_xor_si512(ha0, ha1),
                    pb,
                    _mm512_xor_si512(ha0, ha1),
                    d,
                );
                let wg = _mm512_mask_xor_epi64(ha0, pa, ha0, tg);
                let te = _mm512_xor_si512(_mm512_xor_si512(hb0, hb1), av[g]);
                let we = _mm512_mask_xor_epi64(hb0, pb, hb0, _mm512_xor_si512(te, av[g]));
                let k = i + 4 * g;
                store4(&mut lab[o + k..], _mm512_xor_si512(wg, we));
                store4(&mut rows[2 * k..], _mm512_permutex2var_epi64(tg, lo, te));
                store4(
                    &mut rows[2 * k + 4..],
                    _mm512_permutex2var_epi64(tg, hi, te),
                );
            }
            i += STEP;
        }
        i
    }

    /// Evaluates the first `n − n mod 8` instances; returns how many.
    ///
    /// # Safety
    /// The CPU must have AES, VAES and AVX-512F.
    #[target_feature(enable = "avx512f,vaes")]
    pub(super) unsafe fn eval(
        rk: &RoundKeys,
        lab: &mut [Block],
        (a, b, o): (usize, usize, usize),
        n: usize,
        (base, step): (u128, u128),
        rows: &[Block],
    ) -> usize {
        let keys = rk.broadcast();
        let (even, odd) = (index(EVEN_LANES), index(ODD_LANES));
        let lab = Block::as_words_mut(lab);
        let rows = Block::as_words(rows);
        let mut i = 0;
        while i + STEP <= n {
            let Step { av, bv, t0, t1 } = step_inputs(lab, (a, b), i, (base, step));
            let mut h = [av[0], av[1], bv[0], bv[1]];
            tccr(&keys, &mut h, &[t0[0], t0[1], t1[0], t1[1]]);
            for g in 0..2 {
                let k = i + 4 * g;
                let (r0, r1) = (load4(&rows[2 * k..]), load4(&rows[2 * k + 4..]));
                let tg = _mm512_permutex2var_epi64(r0, even, r1);
                let te = _mm512_permutex2var_epi64(r0, odd, r1);
                let wg = _mm512_mask_xor_epi64(h[g], colour_mask(av[g]), h[g], tg);
                let we = _mm512_mask_xor_epi64(
                    h[2 + g],
                    colour_mask(bv[g]),
                    h[2 + g],
                    _mm512_xor_si512(te, av[g]),
                );
                store4(&mut lab[o + k..], _mm512_xor_si512(wg, we));
            }
            i += STEP;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::garble::{tweak_run, tweaks};
    use crate::rng::{random_block, seeded};
    use rand_core::RngCore;

    /// Garbles one AND gate over `n` instances and evaluates it on random input bits, with the
    /// VAES kernels (where the CPU has them) and the generic path: the same tables, the same
    /// output labels, and the output label of `a ∧ b` on the evaluator's side.
    fn check(n: usize, start: usize) {
        let mut rng = seeded(n as u64);
        let delta = Block(random_block(&mut rng).0 | 1);
        let (a, b, o) = (0, n, 2 * n);
        let zero: Vec<Block> = (0..3 * n).map(|_| random_block(&mut rng)).collect();
        let run = tweak_run(start, 7, 3);
        let (t0, t1) = tweaks(start + 1, 7, 3);
        assert_eq!((run.0 + run.1, run.0 + run.1 + 1), (t0, t1));
        let mut outs = Vec::new();
        for hash in [FixedKeyHash::new(), FixedKeyHash::generic()] {
            let mut lab = zero.clone();
            let mut tables = vec![Block::ZERO; 2 * n];
            let mut scratch = Scratch::default();
            garble_and(
                &hash,
                &mut lab,
                (a, b, o),
                n,
                delta,
                run,
                &mut tables,
                &mut scratch,
            );
            let out0 = lab[o..].to_vec();
            // the evaluator's labels for random bits
            let bits: Vec<(bool, bool)> = (0..n)
                .map(|_| (rng.next_u32() & 1 == 1, rng.next_u32() & 1 == 1))
                .collect();
            let mut ev = vec![Block::ZERO; 3 * n];
            for (i, &(x, y)) in bits.iter().enumerate() {
                ev[a + i] = zero[a + i] ^ if x { delta } else { Block::ZERO };
                ev[b + i] = zero[b + i] ^ if y { delta } else { Block::ZERO };
            }
            eval_and(&hash, &mut ev, (a, b, o), n, run, &tables, &mut scratch);
            for (i, &(x, y)) in bits.iter().enumerate() {
                let want = out0[i] ^ if x && y { delta } else { Block::ZERO };
                assert_eq!(ev[o + i], want, "instance {i} of {n}");
            }
            outs.push((tables, out0));
        }
        assert!(
            outs[0] == outs[1],
            "VAES and generic paths differ at n = {n}"
        );
    }

    #[test]
    fn both_paths_garble_and_evaluate_the_same_gate() {
        for (n, start) in [(1, 0), (7, 3), (8, 0), (19, 256), (256, 512)] {
            check(n, start);
        }
    }
}

//! Plaintexts and keys in the narrowest words their moduli allow: less memory for the same sums.
//!
//! A latency-mode linear layer keeps thousands of encoded diagonals (LoLa's CIFAR network:
//! 16,384 per convolution, 11.8 GB in all) and reads each of them once per query in
//! [`Evaluator::dot_plain_groups`](crate::Evaluator::dot_plain_groups). The latency
//! programs' scale primes are often 26–30 bits (`q_0` and the special primes a few bits
//! more): every residue modulo a prime below `2^32` fits 32 bits exactly.
//! [`CompactPlaintext`] keeps such a limb in 32-bit words and the others in 64-bit ones
//! (LoLa's network: 7.5 GB); the grouped sums read a 32-bit limb as it is
//! (`heinfer_math::dot::dot2_narrow`, which zero-extends four words per load on AVX2 CPUs and
//! widens a few terms at a time elsewhere) — the same residues, so the same bits as the
//! [`Plaintext`]. Key-switching keys keep their polynomials the same way ([`CompactPoly`],
//! read by `heinfer_math::dot::dot1_narrow`): LoLa's 631 rotation keys take 2.2 GB instead
//! of 3.5.

use crate::ciphertext::Plaintext;
use crate::error::Result;
use crate::params::CkksParams;
use crate::poly::{modulus_index, RnsPoly};
use rayon::prelude::*;
use std::sync::Arc;

/// An encoded message (NTT form) at a level and scale, each limb in 32-bit words where its
/// modulus is below `2^32` and in 64-bit words otherwise: a [`Plaintext`] in less memory. It
/// serves the grouped sums ([`PlainTerm`]); [`CompactPlaintext::widen`] gives the
/// [`Plaintext`] back. Immutable: a clone shares the residues.
///
/// The plaintexts made together ([`crate::Encoder::encode_compact_many`]) share one buffer of
/// 64-bit words (see [`CompactPoly`]); the buffer is freed with the last of them.
#[derive(Clone, Debug)]
pub struct CompactPlaintext {
    params_id: u64,
    level: usize,
    scale: f64,
    poly: CompactPoly,
}

/// The residues of a polynomial (NTT form), each limb in 32-bit words where its modulus is
/// below `2^32` and in 64-bit words otherwise, in a buffer of 64-bit words it may share with
/// the polynomials made with it (a 32-bit limb takes `N/2` words). Immutable: a clone shares
/// the residues; the buffer is freed with the last polynomial that holds it. One allocation
/// per limb cost 31 % more resident memory than the residues (LoLa's limbs of 32 and 64 KiB),
/// one per polynomial 12–17 % (blocks of 224–288 KiB; likely the allocator's rounding to
/// 64 KiB slices, not verified); one per batch costs nothing measurable.
#[derive(Clone, Debug)]
pub struct CompactPoly {
    n: usize,
    data: Arc<Vec<u64>>,
    /// This polynomial's first word in `data`.
    offset: usize,
    layout: Arc<Layout>,
}

/// Where each limb of a polynomial lies among its words (the same for every polynomial of a
/// batch: one basis).
#[derive(Debug)]
struct Layout {
    /// Per limb: whether it is kept in 32-bit words.
    narrow: Vec<bool>,
    /// Per limb: its first word (and the polynomial's word count last).
    starts: Vec<usize>,
}

impl Layout {
    fn new(n: usize, moduli: &[u64]) -> Self {
        let narrow: Vec<bool> = moduli.iter().map(|&q| q >> 32 == 0).collect();
        let mut starts = Vec::with_capacity(narrow.len() + 1);
        let mut at = 0;
        for &nw in &narrow {
            starts.push(at);
            at += if nw { n / 2 } else { n };
        }
        starts.push(at);
        Self { narrow, starts }
    }

    fn words(&self) -> usize {
        self.starts[self.narrow.len()]
    }

    /// The limbs of the polynomial whose words are `row`, writable.
    fn parts_mut<'a>(&self, row: &'a mut [u64]) -> Vec<WordsMut<'a>> {
        let mut rest = row;
        let mut out = Vec::with_capacity(self.narrow.len());
        for (i, &nw) in self.narrow.iter().enumerate() {
            let (part, tail) = rest.split_at_mut(self.starts[i + 1] - self.starts[i]);
            rest = tail;
            out.push(if nw {
                WordsMut::Narrow(bytemuck::cast_slice_mut(part))
            } else {
                WordsMut::Wide(part)
            });
        }
        out
    }
}

impl CompactPoly {
    /// `count` polynomials of `N = n` whose limbs are modulo `moduli`, in one buffer, each
    /// filled by `fill(index, its limbs)` (in parallel).
    pub(crate) fn batch(
        n: usize,
        moduli: &[u64],
        count: usize,
        fill: impl Fn(usize, Vec<WordsMut<'_>>) -> Result<()> + Sync,
    ) -> Result<Vec<Self>> {
        let layout = Arc::new(Layout::new(n, moduli));
        let words = layout.words();
        if count == 0 || words == 0 {
            return Ok(Vec::new());
        }
        let mut data = vec![0u64; words * count];
        data.par_chunks_mut(words)
            .enumerate()
            .try_for_each(|(r, row)| fill(r, layout.parts_mut(row)))?;
        let data = Arc::new(data);
        Ok((0..count)
            .map(|r| Self {
                n,
                data: Arc::clone(&data),
                offset: r * words,
                layout: Arc::clone(&layout),
            })
            .collect())
    }

    /// The polynomials `polys` (residues modulo `moduli`, limb by limb), compacted into one
    /// buffer.
    pub(crate) fn from_polys(polys: &[&RnsPoly], moduli: &[u64]) -> Vec<Self> {
        let n = polys.first().map_or(0, |p| p.n());
        let copied = Self::batch(n, moduli, polys.len(), |r, parts| {
            for (i, part) in parts.into_iter().enumerate() {
                match part {
                    WordsMut::Wide(w) => w.copy_from_slice(polys[r].limb(i)),
                    WordsMut::Narrow(w) => narrow_into(w, polys[r].limb(i)),
                }
            }
            Ok(())
        });
        copied.unwrap_or_else(|_| unreachable!("copying residues cannot fail"))
    }

    /// Limbs.
    pub fn limbs(&self) -> usize {
        self.layout.narrow.len()
    }
    /// Limbs kept in 32-bit words.
    pub fn narrow_limbs(&self) -> usize {
        self.layout.narrow.iter().filter(|&&nw| nw).count()
    }
    /// Limb `i`'s residues.
    pub fn words(&self, i: usize) -> Words<'_> {
        let starts = &self.layout.starts;
        let part = &self.data[self.offset + starts[i]..self.offset + starts[i + 1]];
        if self.layout.narrow[i] {
            Words::Narrow(bytemuck::cast_slice(part))
        } else {
            Words::Wide(part)
        }
    }
    /// The same residues in 64-bit words.
    pub fn widen(&self) -> RnsPoly {
        let mut data = Vec::with_capacity(self.n * self.limbs());
        for i in 0..self.limbs() {
            match self.words(i) {
                Words::Wide(v) => data.extend_from_slice(v),
                Words::Narrow(v) => data.extend(v.iter().map(|&w| u64::from(w))),
            }
        }
        RnsPoly::from_data(data, self.n)
    }
}

impl PartialEq for CompactPoly {
    /// The same residues in the same words.
    fn eq(&self, other: &Self) -> bool {
        self.n == other.n
            && self.limbs() == other.limbs()
            && (0..self.limbs()).all(|i| self.words(i) == other.words(i))
    }
}

impl CompactPlaintext {
    /// The plaintext `pt` of `params` (checked), each limb in the narrowest words its
    /// modulus allows.
    pub fn new(params: &CkksParams, pt: &Plaintext) -> Result<Self> {
        params.check_id(pt.params_id())?;
        let moduli: Vec<u64> = (0..pt.poly().limbs())
            .map(|i| params.moduli()[modulus_index(params, pt.level(), i)].q)
            .collect();
        let mut one = CompactPoly::from_polys(&[pt.poly()], &moduli);
        Ok(Self {
            params_id: pt.params_id(),
            level: pt.level(),
            scale: pt.scale(),
            poly: one.remove(0),
        })
    }

    /// `count` plaintexts with `head` = (parameters id, level, scale, `N`) whose limbs are
    /// modulo `moduli`, in one buffer, each filled by `fill(index, its limbs)` (in parallel).
    pub(crate) fn batch(
        (params_id, level, scale, n): (u64, usize, f64, usize),
        moduli: &[u64],
        count: usize,
        fill: impl Fn(usize, Vec<WordsMut<'_>>) -> Result<()> + Sync,
    ) -> Result<Vec<Self>> {
        Ok(CompactPoly::batch(n, moduli, count, fill)?
            .into_iter()
            .map(|poly| Self {
                params_id,
                level,
                scale,
                poly,
            })
            .collect())
    }

    /// Level `ℓ`.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale `Δ` of the encoding.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Id of the parameter set.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }
    /// Limbs (`ℓ + 1`, and the special primes' when extended).
    pub fn limbs(&self) -> usize {
        self.poly.limbs()
    }
    /// Limbs kept in 32-bit words.
    pub fn narrow_limbs(&self) -> usize {
        self.poly.narrow_limbs()
    }
    /// Bytes of its residues: `N · (4 · narrow limbs + 8 · the others)`.
    pub fn bytes(&self) -> usize {
        self.poly.n * (8 * self.limbs() - 4 * self.narrow_limbs())
    }
    /// The same plaintext in 64-bit words.
    pub fn widen(&self) -> Plaintext {
        Plaintext {
            params_id: self.params_id,
            poly: self.poly.widen(),
            level: self.level,
            scale: self.scale,
        }
    }
}

/// `out[j] = v[j]` for residues below `2^32` (the caller's modulus is).
pub(crate) fn narrow_into(out: &mut [u32], v: &[u64]) {
    for (o, &w) in out.iter_mut().zip(v) {
        // every residue is below q < 2^32: the cast keeps it whole
        *o = w as u32;
    }
}

/// A limb's residues, writable, in the words a [`CompactPlaintext`] keeps it in.
#[derive(Debug)]
pub(crate) enum WordsMut<'a> {
    Wide(&'a mut [u64]),
    Narrow(&'a mut [u32]),
}

/// A limb's residues as a plaintext or a key stores them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Words<'a> {
    /// 64-bit words.
    Wide(&'a [u64]),
    /// 32-bit words (a modulus below `2^32`).
    Narrow(&'a [u32]),
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::Plaintext {}
    impl Sealed for super::CompactPlaintext {}
}

/// A plaintext term of a grouped sum ([`Evaluator::dot_plain_groups`](crate::Evaluator::dot_plain_groups)):
/// a [`Plaintext`] or a [`CompactPlaintext`] (sealed: these two only).
pub trait PlainTerm: sealed::Sealed + Sync {
    /// Parameters id, level and scale.
    fn head(&self) -> (u64, usize, f64);
    /// Limbs of its polynomial.
    fn limbs(&self) -> usize;
    /// Limb `i`'s residues.
    fn words(&self, i: usize) -> Words<'_>;
}

impl PlainTerm for Plaintext {
    fn head(&self) -> (u64, usize, f64) {
        (self.params_id, self.level, self.scale)
    }
    fn limbs(&self) -> usize {
        self.poly.limbs()
    }
    fn words(&self, i: usize) -> Words<'_> {
        Words::Wide(self.poly.limb(i))
    }
}

impl PlainTerm for CompactPlaintext {
    fn head(&self) -> (u64, usize, f64) {
        (self.params_id, self.level, self.scale)
    }
    fn limbs(&self) -> usize {
        self.poly.limbs()
    }
    fn words(&self, i: usize) -> Words<'_> {
        self.poly.words(i)
    }
}

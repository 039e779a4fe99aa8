//! Plaintexts in the narrowest words their moduli allow: less memory for the same sums.
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
//! [`Plaintext`].

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
/// 64-bit words, each plaintext's limbs one after the other in it (a 32-bit limb takes `N/2`
/// words); the buffer is freed with the last of them. One allocation per limb cost 31 % more
/// resident memory than the residues (LoLa's limbs of 32 and 64 KiB), one per plaintext
/// 12–17 % (the allocator rounds blocks of 224–288 KiB up to 64 KiB slices); one per batch
/// costs nothing measurable.
#[derive(Clone, Debug)]
pub struct CompactPlaintext {
    params_id: u64,
    level: usize,
    scale: f64,
    n: usize,
    data: Arc<Vec<u64>>,
    /// This plaintext's first word in `data`.
    offset: usize,
    layout: Arc<Layout>,
}

/// Where each limb of a plaintext lies among its words (the same for every plaintext of a
/// batch: one level, one basis).
#[derive(Debug)]
struct Layout {
    /// Per limb: whether it is kept in 32-bit words.
    narrow: Vec<bool>,
    /// Per limb: its first word (and the plaintext's word count last).
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

    /// The limbs of the plaintext whose words are `row`, writable.
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

impl CompactPlaintext {
    /// The plaintext `pt` of `params` (checked), each limb in the narrowest words its
    /// modulus allows.
    pub fn new(params: &CkksParams, pt: &Plaintext) -> Result<Self> {
        params.check_id(pt.params_id())?;
        let poly = pt.poly();
        let moduli: Vec<u64> = (0..poly.limbs())
            .map(|i| params.moduli()[modulus_index(params, pt.level(), i)].q)
            .collect();
        let head = (pt.params_id(), pt.level(), pt.scale(), poly.n());
        let mut one = Self::batch(head, &moduli, 1, |_, parts| {
            for (i, part) in parts.into_iter().enumerate() {
                match part {
                    WordsMut::Wide(w) => w.copy_from_slice(poly.limb(i)),
                    WordsMut::Narrow(w) => narrow_into(w, poly.limb(i)),
                }
            }
            Ok(())
        })?;
        Ok(one.remove(0))
    }

    /// `count` plaintexts with `head` = (parameters id, level, scale, `N`) whose limbs are
    /// modulo `moduli`, in one buffer, each filled by `fill(index, its limbs)` (in parallel).
    pub(crate) fn batch(
        (params_id, level, scale, n): (u64, usize, f64, usize),
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
                params_id,
                level,
                scale,
                n,
                data: Arc::clone(&data),
                offset: r * words,
                layout: Arc::clone(&layout),
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
        self.layout.narrow.len()
    }
    /// Limbs kept in 32-bit words.
    pub fn narrow_limbs(&self) -> usize {
        self.layout.narrow.iter().filter(|&&nw| nw).count()
    }
    /// Bytes of its residues: `N · (4 · narrow limbs + 8 · the others)`.
    pub fn bytes(&self) -> usize {
        self.n * (8 * self.limbs() - 4 * self.narrow_limbs())
    }
    /// The same plaintext in 64-bit words.
    pub fn widen(&self) -> Plaintext {
        let mut data = Vec::with_capacity(self.n * self.limbs());
        for i in 0..self.limbs() {
            match self.words(i) {
                Words::Wide(v) => data.extend_from_slice(v),
                Words::Narrow(v) => data.extend(v.iter().map(|&w| u64::from(w))),
            }
        }
        Plaintext {
            params_id: self.params_id,
            poly: RnsPoly::from_data(data, self.n),
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

/// A limb's residues as a plaintext stores them.
#[derive(Clone, Copy, Debug)]
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
        self.layout.narrow.len()
    }
    fn words(&self, i: usize) -> Words<'_> {
        let starts = &self.layout.starts;
        let part = &self.data[self.offset + starts[i]..self.offset + starts[i + 1]];
        if self.layout.narrow[i] {
            Words::Narrow(bytemuck::cast_slice(part))
        } else {
            Words::Wide(part)
        }
    }
}

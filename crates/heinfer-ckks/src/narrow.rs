//! A batch of ciphertexts whose residues are kept in 32-bit words: half the memory of
//! [`Ciphertext`]s for the inputs of the batch-axis kernels.
//!
//! A throughput-mode query is hundreds of two-part ciphertexts at the program's full level
//! (CryptoNets: 784 of them, 617 MB of 64-bit residues at six 30-bit primes), decoded once
//! and read once, tile by tile, by the first layer's kernel — which spends its time waiting
//! for those lines and the kernel zeroing their fresh pages. When every prime of the level
//! is below `2^32` each residue fits 32 bits exactly: [`NarrowBatch`] keeps the same residues
//! in half the words, written as each ciphertext is decoded
//! ([`ciphertext_batch_from_bytes_narrow`](crate::serialize::ciphertext_batch_from_bytes_narrow))
//! and read by the kernels as they are ([`NarrowBatch::part`]); [`NarrowBatch::widen`] gives
//! the [`Ciphertext`]s back, bit for bit (seeds included).

use crate::ciphertext::Ciphertext;
use crate::error::{CkksError, Result};
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::sampler::Seed;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Two-part ciphertexts (NTT form) sharing parameters, level and scale, each residue in a
/// 32-bit word. Stored in chunks (one per decoded message: a query's chunks join without a
/// copy, [`NarrowBatch::concat`]); ciphertext `k`'s part `p` is `(level+1)·N` consecutive
/// words, limb after limb.
#[derive(Clone, Debug)]
pub struct NarrowBatch {
    params_id: u64,
    level: usize,
    scale: f64,
    n: usize,
    chunks: Vec<Vec<u32>>,
    /// Per ciphertext: its chunk and its position in that chunk.
    index: Vec<(u32, u32)>,
    /// Per ciphertext: the seed its `c_1` expands from (a fresh secret-key encryption), kept
    /// so that it widens into the very ciphertext it was (and serializes as compactly).
    seeds: Vec<Option<Seed>>,
}

impl NarrowBatch {
    /// Whether ciphertexts at `level` fit 32-bit words: every prime of the level below `2^32`.
    pub fn fits(params: &CkksParams, level: usize) -> bool {
        level <= params.max_level() && params.q()[..=level].iter().all(|&q| q < 1 << 32)
    }

    /// A batch of `count` ciphertexts at `level` and `scale` whose words
    /// `write(scratch, k, slot)` writes for ciphertext `k` (both parts, in parallel, into
    /// memory never zeroed; `scratch`: a buffer of each worker thread's, to reuse), returning
    /// its seed. Fails unless [`Self::fits`], or with the first error of `write`.
    ///
    /// `write` must write every word of `slot` whenever it returns `Ok` (`narrow_into` does).
    pub(crate) fn fill(
        params: &CkksParams,
        count: usize,
        level: usize,
        scale: f64,
        write: impl Fn(&mut Vec<u64>, usize, &mut [MaybeUninit<u32>]) -> Result<Option<Seed>> + Sync,
    ) -> Result<Self> {
        if !Self::fits(params, level) {
            return Err(CkksError::InvalidOperand {
                op: "NarrowBatch",
                reason: format!("a prime of level {level} does not fit 32 bits"),
            });
        }
        let per = 2 * (level + 1) * params.n();
        let words = count * per;
        let mut data: Vec<u32> = Vec::with_capacity(words);
        let seeds = data.spare_capacity_mut()[..words]
            .par_chunks_exact_mut(per)
            .enumerate()
            .map_init(Vec::new, |scratch, (k, slot)| write(scratch, k, slot))
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the capacity is `words`, and every slot (they partition the first `words`
        // words) was written: `write` returned `Ok` for each, which it does only after
        // writing its whole slot.
        unsafe { data.set_len(words) };
        Ok(Self {
            params_id: params.id(),
            level,
            scale,
            n: params.n(),
            chunks: vec![data],
            index: (0..count as u32).map(|i| (0, i)).collect(),
            seeds,
        })
    }

    /// The batch of `cts` (at least one; two parts each, one level and scale, every prime of
    /// the level below `2^32`), residues copied into 32-bit words.
    pub fn from_ciphertexts(params: &CkksParams, cts: &[Ciphertext]) -> Result<Self> {
        let first = cts.first().ok_or_else(|| CkksError::InvalidOperand {
            op: "NarrowBatch",
            reason: "no ciphertext".into(),
        })?;
        let bad = |k: usize, why: String| CkksError::InvalidOperand {
            op: "NarrowBatch",
            reason: format!("ciphertext {k}: {why}"),
        };
        for (k, ct) in cts.iter().enumerate() {
            params.check_id(ct.params_id())?;
            if ct.size() != 2
                || ct.level() != first.level()
                || ((ct.scale() - first.scale()) / first.scale()).abs() > 1e-9
            {
                return Err(bad(
                    k,
                    format!(
                        "{} parts at level {} and scale {:e}; needs 2 parts at level {} and scale {:e}",
                        ct.size(),
                        ct.level(),
                        ct.scale(),
                        first.level(),
                        first.scale()
                    ),
                ));
            }
        }
        Self::fill(
            params,
            cts.len(),
            first.level(),
            first.scale(),
            |_, k, slot| {
                narrow_into(&cts[k], slot);
                Ok(cts[k].seed)
            },
        )
    }

    /// The batches joined in order, without copying their words. They must share
    /// parameters, level and scale.
    pub fn concat(batches: Vec<NarrowBatch>) -> Result<Self> {
        let mut it = batches.into_iter();
        let mut out = it.next().ok_or_else(|| CkksError::InvalidOperand {
            op: "NarrowBatch::concat",
            reason: "nothing to concatenate".into(),
        })?;
        for b in it {
            if b.params_id != out.params_id || b.level != out.level || b.scale != out.scale {
                return Err(CkksError::InvalidOperand {
                    op: "NarrowBatch::concat",
                    reason: format!(
                        "batches of different parameters, levels or scales (level {} scale {:e} vs level {} scale {:e})",
                        b.level, b.scale, out.level, out.scale
                    ),
                });
            }
            let base = out.chunks.len() as u32;
            out.index
                .extend(b.index.iter().map(|&(c, i)| (c + base, i)));
            out.chunks.extend(b.chunks);
            out.seeds.extend(b.seeds);
        }
        Ok(out)
    }

    fn words_per_ciphertext(&self) -> usize {
        2 * (self.level + 1) * self.n
    }

    /// Number of ciphertexts.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the batch holds no ciphertext.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The common level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The common scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Parts per ciphertext (always 2).
    pub fn size(&self) -> usize {
        2
    }

    /// Identifier of the parameters the ciphertexts belong to.
    pub fn params_id(&self) -> u64 {
        self.params_id
    }

    /// Ciphertext `k`'s part `p` (0 or 1): `(level+1)·N` residues, limb after limb (limb `i`
    /// at `[i·N, (i+1)·N)`), each below its prime. Panics if `k` or `p` is out of range.
    pub fn part(&self, k: usize, p: usize) -> &[u32] {
        assert!(p < 2, "a narrow ciphertext has parts 0 and 1, not {p}");
        let (c, i) = self.index[k];
        let per = self.words_per_ciphertext();
        let at = i as usize * per + p * per / 2;
        &self.chunks[c as usize][at..at + per / 2]
    }

    /// Ciphertext `k` as a [`Ciphertext`]: the one it was made from (64-bit words, the same
    /// residues, and its seed if it had one).
    pub fn ciphertext(&self, params: &CkksParams, k: usize) -> Result<Ciphertext> {
        params.check_id(self.params_id)?;
        let parts = (0..2)
            .map(|p| {
                let data = self.part(k, p).iter().map(|&x| u64::from(x)).collect();
                RnsPoly::from_data(data, self.n)
            })
            .collect();
        let mut ct = Ciphertext::from_parts(params, parts, self.level, self.scale)?;
        ct.seed = self.seeds[k];
        Ok(ct)
    }

    /// Every ciphertext as a [`Ciphertext`], in order (in parallel).
    pub fn widen(&self, params: &CkksParams) -> Result<Vec<Ciphertext>> {
        (0..self.len())
            .into_par_iter()
            .map(|k| self.ciphertext(params, k))
            .collect()
    }
}

/// Writes a two-part ciphertext's residues (each below `2^32`) into `slot`, part after part:
/// every word of it (panics if the ciphertext's parts do not fill it exactly).
pub(crate) fn narrow_into(ct: &Ciphertext, slot: &mut [MaybeUninit<u32>]) {
    let half = slot.len() / 2;
    assert!(
        ct.size() == 2 && 2 * half == slot.len(),
        "a narrow slot holds two parts"
    );
    for (dst, part) in slot.chunks_exact_mut(half).zip(ct.parts()) {
        narrow_words(part.data(), dst);
    }
}

/// `dst = src` in 32-bit words, every word of `dst` written (every residue below `2^32`;
/// panics unless the lengths are equal). On AVX-512 CPUs eight at a time with non-temporal
/// stores: a narrow batch is hundreds of megabytes written once and read later by the
/// kernels, so its lines go to memory without being read first.
pub(crate) fn narrow_words(src: &[u64], dst: &mut [MaybeUninit<u32>]) {
    assert_eq!(src.len(), dst.len(), "a narrow copy needs equal lengths");
    #[cfg(target_arch = "x86_64")]
    let done = if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        unsafe { narrow_stream(src, dst) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    debug_assert!(src[..done].iter().all(|&x| x < 1 << 32));
    for (d, &x) in dst[done..].iter_mut().zip(&src[done..]) {
        debug_assert!(x < 1 << 32);
        d.write(x as u32);
    }
}

/// `dst = src` as 32-bit words (every residue below `2^32`), eight at a time with
/// non-temporal stores: the words go to memory without reading their lines first (a
/// query's narrow batch is hundreds of megabytes, written once, read later by the kernels).
/// Returns how many words it wrote (a multiple of eight; 0 unless `dst` is 32-byte aligned);
/// the caller writes the rest. The stores are fenced before it returns.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
#[cfg(target_arch = "x86_64")]
unsafe fn narrow_stream(src: &[u64], dst: &mut [std::mem::MaybeUninit<u32>]) -> usize {
    let len = src.len().min(dst.len());
    if !(dst.as_ptr() as usize).is_multiple_of(32) {
        return 0;
    }
    let whole = len / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: `i + 8 ≤ len` for both slices; the store address is 32-byte aligned (the
        // start is, and every step is 32 bytes).
        unsafe {
            let v = std::arch::x86_64::_mm512_loadu_si512(src.as_ptr().add(i).cast());
            std::arch::x86_64::_mm256_stream_si256(
                dst.as_mut_ptr().add(i).cast(),
                std::arch::x86_64::_mm512_cvtepi64_epi32(v),
            );
        }
    }
    std::arch::x86_64::_mm_sfence();
    whole
}

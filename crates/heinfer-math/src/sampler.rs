//! Samplers for secrets, errors and uniform polynomials, driven by AES-256-CTR ([`crate::prg`]).
//!
//! Every stream is seeded from the operating system (`getrandom`) unless a seed is given
//! explicitly — which happens only to *expand* a public uniform polynomial from the 32-byte
//! seed stored in a seed-compressed ciphertext or key. Secret material never comes from a
//! caller-chosen seed outside test code.
//!
//! * Uniform mod `q`: rejection sampling on the top bits of 64-bit words (no modulo bias).
//! * Ternary secret: uniform in `{−1, 0, 1}`, one byte of the stream per coefficient,
//!   rejection on values ≥ 255.
//! * Error: discrete Gaussian of parameter σ = 3.19 (`ERROR_STDDEV`), tail-cut at 6σ, sampled
//!   by inversion of a 64-bit cumulative distribution table (CDT) of
//!   `P(|e| = k) ∝ exp(−k²/2σ²)`, `k ≤ 19`, plus a random sign (0 counted once).

use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use crate::prg::AesCtr;
use rand_core::{RngCore, SeedableRng};

/// Standard deviation of the error distribution (HomomorphicEncryption.org standard).
pub const ERROR_STDDEV: f64 = 3.19;
/// Error samples are rejected beyond this many standard deviations.
pub const ERROR_TAIL_CUT: f64 = 6.0;

/// A 32-byte seed (an AES-256 key, [`crate::prg`]).
pub type Seed = [u8; 32];

/// Draws a fresh seed from the operating system.
pub fn os_seed() -> Result<Seed> {
    let mut s = [0u8; 32];
    getrandom::fill(&mut s).map_err(|e| MathError::Entropy(e.to_string()))?;
    Ok(s)
}

/// A random stream (AES-256-CTR). Its state (key schedule, counter, buffered output) is
/// wiped when it is dropped: an OS-seeded stream produces secrets and encryption randomness.
pub struct Sampler {
    rng: AesCtr,
}

impl Sampler {
    /// A stream seeded from the operating system.
    pub fn from_os() -> Result<Self> {
        Ok(Self {
            rng: AesCtr::from_seed(os_seed()?),
        })
    }

    /// A stream expanded from a given seed (public randomness, or tests).
    pub fn from_seed(seed: Seed) -> Self {
        Self {
            rng: AesCtr::from_seed(seed),
        }
    }

    /// A fresh 32-byte seed drawn from this stream.
    pub fn seed(&mut self) -> Seed {
        let mut s = [0u8; 32];
        self.rng.fill_bytes(&mut s);
        s
    }

    /// Fills `out` with uniform residues modulo `m` (rejection sampling, no bias).
    ///
    /// The words are drawn in bulk, exactly as many as still needed each round: the stream
    /// is consumed word by word in the same order as one word per coefficient would, so a
    /// seed expands to the same polynomial.
    pub fn uniform_into(&mut self, out: &mut [u64], m: &Modulus) {
        let bits = 64 - m.q.leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut filled = 0;
        while filled < out.len() {
            self.words(&mut out[filled..]);
            filled = keep_below(out, filled, mask, m.q);
        }
    }

    /// Fills `out` with the next `out.len()` 64-bit words of the stream (little-endian, as
    /// `next_u64` reads them).
    fn words(&mut self, out: &mut [u64]) {
        // SAFETY: a `[u64]` is valid as `8 · len` initialized bytes (no padding, any bit
        // pattern is a valid u64), and the byte view does not outlive this borrow.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(out),
            )
        };
        self.rng.fill_bytes(bytes);
        for w in out.iter_mut() {
            *w = u64::from_le(*w);
        }
    }

    /// `n` ternary values in `{−1, 0, 1}`.
    pub fn ternary(&mut self, n: usize) -> Vec<i8> {
        let mut out = Vec::with_capacity(n);
        let mut buf = [0u8; 64];
        while out.len() < n {
            self.rng.fill_bytes(&mut buf);
            for &b in &buf {
                if b < 255 && out.len() < n {
                    out.push((b % 3) as i8 - 1);
                }
            }
        }
        out
    }

    /// `n` discrete-Gaussian error values (σ = 3.19, |e| ≤ 6σ), one 64-bit word each.
    pub fn gaussian(&mut self, n: usize) -> Vec<i64> {
        let table = cdt();
        let mut out = Vec::with_capacity(n);
        let mut buf = [0u64; 64];
        let mut left = n;
        while left > 0 {
            let k = left.min(buf.len());
            self.words(&mut buf[..k]);
            let start = out.len();
            out.resize(start + k, 0);
            invert_cdt(table, &buf[..k], &mut out[start..]);
            left -= k;
        }
        // the words decided the secret errors: overwrite them
        for w in buf.iter_mut() {
            // SAFETY: `w` is a valid, aligned place of a plain integer.
            unsafe { std::ptr::write_volatile(w, 0) };
        }
        out
    }
}

/// The error of each word `r`: the top bit is the sign, the other 63 bits `u` index the CDT,
/// `|e|` = the number of table entries `≤ u` (the table increases) — counted without a
/// branch, so that the time does not depend on the secret sample (a binary search's branches
/// would). AVX2 compares four words per instruction where the CPU has it; both paths give
/// the same errors.
fn invert_cdt(table: &[u64], words: &[u64], out: &mut [i64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked just above).
        unsafe { invert_cdt_avx2(table, words, out) };
        return;
    }
    invert_cdt_scalar(table, words, out);
}

fn invert_cdt_scalar(table: &[u64], words: &[u64], out: &mut [i64]) {
    for (e, &r) in out.iter_mut().zip(words) {
        let u = r & (u64::MAX >> 1);
        let mag = table.iter().map(|&c| i64::from(c <= u)).sum::<i64>();
        *e = if r >> 63 == 1 { -mag } else { mag };
    }
}

/// [`invert_cdt_scalar`], four words at a time: every entry and every `u` is below 2^63, so
/// the signed 64-bit comparison of AVX2 orders them as unsigned numbers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn invert_cdt_avx2(table: &[u64], words: &[u64], out: &mut [i64]) {
    use std::arch::x86_64::*;
    let n = words.len().min(out.len());
    let low = _mm256_set1_epi64x(i64::MAX);
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n ≤ words.len(), out.len(): unaligned loads and stores in bounds.
        let r = unsafe { _mm256_loadu_si256(words.as_ptr().add(i).cast()) };
        let u = _mm256_and_si256(r, low);
        let mut mag = _mm256_setzero_si256();
        for &c in table {
            // c > u: all ones; c ≤ u: zero → subtract (c > u) − 1 = add 1 when c ≤ u
            let gt = _mm256_cmpgt_epi64(_mm256_set1_epi64x(c as i64), u);
            mag = _mm256_add_epi64(mag, _mm256_add_epi64(gt, _mm256_set1_epi64x(1)));
        }
        // the sign: −mag where the top bit of r is set (mag ⊕ s − s with s = 0 or −1)
        let sign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), r);
        let e = _mm256_sub_epi64(_mm256_xor_si256(mag, sign), sign);
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), e) };
        i += 4;
    }
    invert_cdt_scalar(table, &words[i..n], &mut out[i..n]);
}

/// Cumulative table of `|e|` for the discrete Gaussian, scaled to 2^63: entry `k` is
/// `2^63·P(|e| ≤ k)`, where `P(|e| = 0) = ρ(0)/Z`, `P(|e| = k) = 2ρ(k)/Z` and the sign is drawn
/// separately (so a sampled 0 with either sign is still 0).
fn cdt() -> &'static [u64] {
    static TABLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let bound = (ERROR_STDDEV * ERROR_TAIL_CUT).floor() as i64;
        let rho = |k: i64| (-((k * k) as f64) / (2.0 * ERROR_STDDEV * ERROR_STDDEV)).exp();
        let weights: Vec<f64> = (0..=bound)
            .map(|k| if k == 0 { rho(0) } else { 2.0 * rho(k) })
            .collect();
        let z: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let scale = (1u64 << 63) as f64;
        let mut t: Vec<u64> = weights
            .iter()
            .map(|w| {
                acc += w / z;
                (acc * scale).min(scale - 1.0) as u64
            })
            .collect();
        // the last entry covers everything: no sample beyond the tail cut
        *t.last_mut().expect("non-empty") = u64::MAX >> 1;
        t
    })
}

/// Rejection sampling's compaction: masks `out[from..]` to `mask` and moves the words below
/// `q` down over the rejected ones, in order; returns how many words of `out` are now kept.
/// Groups of eight without a rejection (nearly all: `q` is close to `mask + 1`) are masked
/// and copied whole, so the loop vectorizes (compiled for AVX-512 where the CPU has it: the
/// unsigned 64-bit comparison is one instruction there); a group with one goes word by word.
fn keep_below(out: &mut [u64], from: usize, mask: u64, q: u64) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        #[target_feature(enable = "avx512f")]
        unsafe fn fast(out: &mut [u64], from: usize, mask: u64, q: u64) -> usize {
            keep_below_body(out, from, mask, q)
        }
        // SAFETY: the CPU supports AVX-512F (checked just above).
        return unsafe { fast(out, from, mask, q) };
    }
    keep_below_body(out, from, mask, q)
}

#[inline(always)]
fn keep_below_body(out: &mut [u64], from: usize, mask: u64, q: u64) -> usize {
    let mut kept = from;
    let mut r = from;
    while r + 8 <= out.len() {
        let mut g = [0u64; 8];
        g.copy_from_slice(&out[r..r + 8]);
        g.iter_mut().for_each(|v| *v &= mask);
        if g.iter().fold(false, |bad, &v| bad | (v >= q)) {
            for v in g {
                out[kept] = v;
                kept += usize::from(v < q);
            }
        } else {
            out[kept..kept + 8].copy_from_slice(&g);
            kept += 8;
        }
        r += 8;
    }
    for r in r..out.len() {
        let v = out[r] & mask;
        out[kept] = v;
        kept += usize::from(v < q);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejection_keeps_the_words_below_q_in_order() {
        // a prime just above a power of two rejects about half of the masked words: groups
        // with and without rejections, at every start offset and tail length
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for (q, mask) in [
            ((1u64 << 20) + 7, (1u64 << 21) - 1),
            ((1 << 30) - 35, (1 << 30) - 1),
        ] {
            for len in [0usize, 5, 8, 64, 67, 1000] {
                for from in [0, 3.min(len), len / 2] {
                    let words: Vec<u64> = (0..len)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            x
                        })
                        .collect();
                    let mut want = words[..from].to_vec();
                    want.extend(words[from..].iter().map(|&v| v & mask).filter(|&v| v < q));
                    let mut got = words.clone();
                    let kept = super::keep_below(&mut got, from, mask, q);
                    assert_eq!(&got[..kept], &want[..], "q {q}, {len} words from {from}");
                }
            }
        }
    }

    #[test]
    fn distributions_have_the_documented_moments() {
        let mut s = Sampler::from_seed([7; 32]);
        let e = s.gaussian(200_000);
        let mean = e.iter().sum::<i64>() as f64 / e.len() as f64;
        let var = e.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / e.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!(
            (var.sqrt() - ERROR_STDDEV).abs() < 0.05,
            "stddev {}",
            var.sqrt()
        );
        assert!(
            e.iter().any(|&x| x < -8) && e.iter().any(|&x| x > 8),
            "both tails are sampled"
        );
        assert!(e
            .iter()
            .all(|&x| (x as f64).abs() <= ERROR_STDDEV * ERROR_TAIL_CUT + 0.5));
        let t = s.ternary(30_000);
        for v in [-1i8, 0, 1] {
            let c = t.iter().filter(|&&x| x == v).count();
            assert!((c as f64 / 30_000.0 - 1.0 / 3.0).abs() < 0.02);
        }
        let m = Modulus::new(1_000_003);
        let mut u = vec![0; 50_000];
        s.uniform_into(&mut u, &m);
        assert!(u.iter().all(|&x| x < m.q));
        let mean = u.iter().map(|&x| x as f64).sum::<f64>() / u.len() as f64;
        assert!((mean / m.q as f64 - 0.5).abs() < 0.01);
    }

    #[test]
    fn the_gaussian_inverts_the_table_exactly() {
        // the branchless count equals the CDT's inversion by binary search, sample by sample
        let table = cdt();
        let mut rng = AesCtr::from_seed([3; 32]);
        let e = Sampler::from_seed([3; 32]).gaussian(20_000);
        for &x in &e {
            let r = rng.next_u64();
            let mag = table.partition_point(|&c| c <= (r & (u64::MAX >> 1))) as i64;
            assert_eq!(x, if r >> 63 == 1 { -mag } else { mag });
        }
    }

    #[test]
    fn both_cdt_paths_give_the_same_errors() {
        let mut words = vec![0u64; 4099];
        Sampler::from_seed([5; 32]).words(&mut words);
        // the edges: each table entry, one below and one above, with either sign
        for &c in cdt() {
            for v in [
                c.saturating_sub(1),
                c,
                c.saturating_add(1) & (u64::MAX >> 1),
            ] {
                words.extend([v, v | 1 << 63]);
            }
        }
        let (mut a, mut b) = (vec![0; words.len()], vec![0; words.len()]);
        invert_cdt(cdt(), &words, &mut a);
        invert_cdt_scalar(cdt(), &words, &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn uniform_words_in_bulk_expand_a_seed_as_word_by_word() {
        // the reference: one word per draw, rejected words skipped (the stream's meaning)
        for q in [97u64, 1_000_003, (1 << 41) + 1, (1 << 61) - 1] {
            let m = Modulus::new(q);
            let mask = u64::MAX >> m.q.leading_zeros();
            let mut rng = AesCtr::from_seed([9; 32]);
            let want: Vec<u64> = (0..3000)
                .map(|_| loop {
                    let v = rng.next_u64() & mask;
                    if v < q {
                        break v;
                    }
                })
                .collect();
            let mut s = Sampler::from_seed([9; 32]);
            let mut got = vec![0; 3000];
            s.uniform_into(&mut got, &m);
            assert_eq!(got, want, "q = {q}");
            assert_eq!(s.seed(), Sampler { rng }.seed(), "the same words consumed");
        }
    }

    #[test]
    fn same_seed_same_stream_os_seeds_differ() {
        let m = Modulus::new(97);
        let (mut a, mut b) = (vec![0; 16], vec![0; 16]);
        Sampler::from_seed([1; 32]).uniform_into(&mut a, &m);
        Sampler::from_seed([1; 32]).uniform_into(&mut b, &m);
        assert_eq!(a, b);
        assert_ne!(os_seed().unwrap(), os_seed().unwrap());
    }
}

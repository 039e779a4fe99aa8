//! AES-256-CTR several blocks per instruction (VAES) for [`crate::prg`].
//!
//! The `aes` crate runs AES-NI on 128-bit registers, one block per `aesenc`. CPUs with VAES
//! run the same rounds on two blocks per `vaesenc` on 256-bit registers (AMD Zen 3) and on
//! four on 512-bit ones where they also have AVX-512 (AMD Zen 4, Intel Ice Lake and later).
//! Measured on 1 MiB fills: 16.6 GB/s against the crate's 6.0 GB/s on a Zen 4 (512-bit),
//! 8.3–10.4 against 4.7–6.0 GB/s on a Zen 3 (256-bit). The bytes are the crate's, bit for
//! bit: the same AES-256 round keys (the FIPS-197 key expansion with `aeskeygenassist`) on
//! the same little-endian counter blocks, tested against the crate here (each width this CPU
//! runs) and in [`crate::prg`]'s tests.
//!
//! [`RoundKeys::detect`] returns the expanded key only where the CPU has `aes` and `vaes`
//! (with `avx512f` for the 512-bit kernel, else `avx2` for the 256-bit one) and
//! `HEINFER_NO_VAES` is not set; elsewhere the stream takes the crate's path.

use std::arch::x86_64::*;

/// Blocks per loop iteration: eight registers of four blocks, so eight independent `vaesenc`
/// chains hide the instruction's latency.
pub(crate) const BATCH_BLOCKS: usize = 4 * LANES;
const LANES: usize = 8;

/// AES-256's fifteen round keys (FIPS-197 §5.2), wiped when dropped: a stream's seed, and so
/// its key, may produce secrets; and the register width the kernel runs at.
pub(crate) struct RoundKeys([u128; 15], Width);

/// The VAES kernel's register width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Width {
    /// Two blocks per `vaesenc` (AVX2).
    Ymm,
    /// Four blocks per `vaesenc` (AVX-512).
    Zmm,
}

impl Drop for RoundKeys {
    fn drop(&mut self) {
        for k in self.0.iter_mut() {
            // SAFETY: `k` is a valid, aligned place of a plain integer.
            unsafe { std::ptr::write_volatile(k, 0) };
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

impl RoundKeys {
    /// The round keys of `key` if this CPU runs VAES, else `None`.
    pub(crate) fn detect(key: &[u8; 32]) -> Option<RoundKeys> {
        // SAFETY: `available` is `Some` only on CPUs with AES-NI.
        available().map(|w| RoundKeys(unsafe { expand(key) }, w))
    }

    /// Writes the blocks `AES_k(counter + i)`, `i < out.len() / 16`, into `out` (a multiple
    /// of [`BATCH_BLOCKS`] blocks), the counter a 128-bit little-endian block. The caller
    /// guarantees that the low 64 bits of the counter do not wrap within those blocks.
    pub(crate) fn ctr_into(&self, counter: u128, out: &mut [u8]) {
        debug_assert_eq!(out.len() % (16 * BATCH_BLOCKS), 0);
        debug_assert!((counter as u64)
            .checked_add((out.len() / 16) as u64)
            .is_some());
        // SAFETY: a `RoundKeys` exists only with a width `widths()` found on this CPU (aes
        // and vaes, with avx512f for Zmm and avx2 for Ymm).
        unsafe {
            match self.1 {
                Width::Zmm => ctr(&self.0, counter, out),
                Width::Ymm => ctr_ymm(&self.0, counter, out),
            }
        }
    }
}

/// The widest VAES kernel this CPU runs, unless `HEINFER_NO_VAES` is set (read once per
/// process).
fn available() -> Option<Width> {
    static AVAILABLE: std::sync::OnceLock<Option<Width>> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if std::env::var_os("HEINFER_NO_VAES").is_some() {
            return None;
        }
        widths().last().copied()
    })
}

/// Every VAES kernel width this CPU runs, narrowest first.
fn widths() -> Vec<Width> {
    let mut out = Vec::new();
    if is_x86_feature_detected!("aes") && is_x86_feature_detected!("vaes") {
        if is_x86_feature_detected!("avx2") {
            out.push(Width::Ymm);
        }
        if is_x86_feature_detected!("avx512f") {
            out.push(Width::Zmm);
        }
    }
    out
}

/// `prev ⊕ (prev ≪ 32) ⊕ (prev ≪ 64) ⊕ (prev ≪ 96) ⊕ word`, `word` broadcast from lane
/// `LANE` of `gen` (3 for the words that go through `RotWord`/`SubWord`/`Rcon`, 2 for the
/// AES-256 step that only substitutes).
#[inline]
#[target_feature(enable = "aes")]
fn schedule_step<const LANE: i32>(prev: __m128i, gen: __m128i) -> __m128i {
    let gen = _mm_shuffle_epi32::<LANE>(gen);
    let mut k = prev;
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    _mm_xor_si128(k, gen)
}

/// The AES-256 key expansion with `aeskeygenassist`.
#[target_feature(enable = "aes")]
unsafe fn expand(key: &[u8; 32]) -> [u128; 15] {
    let mut k = [_mm_setzero_si128(); 15];
    k[0] = _mm_loadu_si128(key.as_ptr() as *const __m128i);
    k[1] = _mm_loadu_si128(key.as_ptr().add(16) as *const __m128i);
    macro_rules! pair {
        ($i:expr, $rcon:expr) => {
            k[$i] = schedule_step::<0xff>(k[$i - 2], _mm_aeskeygenassist_si128::<$rcon>(k[$i - 1]));
            k[$i + 1] = schedule_step::<0xaa>(k[$i - 1], _mm_aeskeygenassist_si128::<0>(k[$i]));
        };
    }
    pair!(2, 0x01);
    pair!(4, 0x02);
    pair!(6, 0x04);
    pair!(8, 0x08);
    pair!(10, 0x10);
    pair!(12, 0x20);
    k[14] = schedule_step::<0xff>(k[12], _mm_aeskeygenassist_si128::<0x40>(k[13]));
    let mut out = [0u128; 15];
    for (o, v) in out.iter_mut().zip(k.iter_mut()) {
        _mm_storeu_si128(o as *mut u128 as *mut __m128i, *v);
        *v = _mm_setzero_si128();
    }
    out
}

/// The counter-mode kernel of [`RoundKeys::ctr_into`] on 512-bit registers.
#[target_feature(enable = "avx512f,vaes,aes")]
unsafe fn ctr(rk: &[u128; 15], counter: u128, out: &mut [u8]) {
    let mut k = [_mm512_setzero_si512(); 15];
    for (r, key) in k.iter_mut().zip(rk) {
        *r = _mm512_broadcast_i32x4(_mm_loadu_si128(key as *const u128 as *const __m128i));
    }
    let (lo, hi) = (counter as u64 as i64, (counter >> 64) as u64 as i64);
    // lane j holds counter + j (64-bit words: low, high per 128-bit lane)
    let mut c = _mm512_add_epi64(
        _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo),
        _mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0),
    );
    let four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
    let dst = out.as_mut_ptr() as *mut __m512i;
    for batch in 0..out.len() / (16 * BATCH_BLOCKS) {
        let mut x = [_mm512_setzero_si512(); LANES];
        for v in x.iter_mut() {
            *v = _mm512_xor_si512(c, k[0]);
            c = _mm512_add_epi64(c, four);
        }
        for key in &k[1..14] {
            for v in x.iter_mut() {
                *v = _mm512_aesenc_epi128(*v, *key);
            }
        }
        for (j, v) in x.iter().enumerate() {
            _mm512_storeu_si512(
                dst.add(batch * LANES + j),
                _mm512_aesenclast_epi128(*v, k[14]),
            );
        }
    }
    // the broadcast round keys leave no copy behind on the stack
    for r in k.iter_mut() {
        std::ptr::write_volatile(r, _mm512_setzero_si512());
    }
}

/// The counter-mode kernel of [`RoundKeys::ctr_into`] on 256-bit registers: two blocks per
/// register, eight registers per iteration, two iterations per [`BATCH_BLOCKS`].
#[target_feature(enable = "avx2,vaes,aes")]
unsafe fn ctr_ymm(rk: &[u128; 15], counter: u128, out: &mut [u8]) {
    let mut k = [_mm256_setzero_si256(); 15];
    for (r, key) in k.iter_mut().zip(rk) {
        *r = _mm256_broadcastsi128_si256(_mm_loadu_si128(key as *const u128 as *const __m128i));
    }
    let (lo, hi) = (counter as u64 as i64, (counter >> 64) as u64 as i64);
    // lane j holds counter + j (64-bit words: low, high per 128-bit lane)
    let mut c = _mm256_add_epi64(
        _mm256_set_epi64x(hi, lo, hi, lo),
        _mm256_set_epi64x(0, 1, 0, 0),
    );
    let two = _mm256_set_epi64x(0, 2, 0, 2);
    let dst = out.as_mut_ptr() as *mut __m256i;
    for batch in 0..out.len() / (32 * LANES) {
        let mut x = [_mm256_setzero_si256(); LANES];
        for v in x.iter_mut() {
            *v = _mm256_xor_si256(c, k[0]);
            c = _mm256_add_epi64(c, two);
        }
        for key in &k[1..14] {
            for v in x.iter_mut() {
                *v = _mm256_aesenc_epi128(*v, *key);
            }
        }
        for (j, v) in x.iter().enumerate() {
            _mm256_storeu_si256(
                dst.add(batch * LANES + j),
                _mm256_aesenclast_epi128(*v, k[14]),
            );
        }
    }
    // the broadcast round keys leave no copy behind on the stack
    for r in k.iter_mut() {
        std::ptr::write_volatile(r, _mm256_setzero_si256());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::{BlockEncrypt, KeyInit};

    /// Every width this CPU runs writes the `aes` crate's blocks, from counters whose low
    /// word is near its end (without wrapping, as the caller guarantees) and for one to
    /// three batches; the wide kernel is timed against the narrow one and the crate with
    /// `-- --ignored --nocapture` (`throughput_of_each_width`).
    #[test]
    fn each_width_is_the_aes_crate() {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).unwrap();
        let cipher = aes::Aes256Enc::new(&key.into());
        // SAFETY: run only where `widths()` found AES-NI.
        let rk = if widths().is_empty() {
            return;
        } else {
            unsafe { expand(&key) }
        };
        for w in widths() {
            let keys = RoundKeys(rk, w);
            for (start, batches) in [
                (0u128, 1usize),
                (7, 2),
                (u64::MAX as u128 - 96, 3),
                (5 << 64, 1),
            ] {
                let mut out = vec![0u8; 16 * BATCH_BLOCKS * batches];
                keys.ctr_into(start, &mut out);
                for (i, block) in out.chunks_exact(16).enumerate() {
                    let mut b = (start + i as u128).to_le_bytes().into();
                    cipher.encrypt_block(&mut b);
                    assert_eq!(block, b.as_slice(), "{w:?}, counter {start} + {i}");
                }
            }
        }
    }

    #[test]
    #[ignore]
    fn throughput_of_each_width() {
        let key = [7u8; 32];
        let cipher = aes::Aes256Enc::new(&key.into());
        let mut out = vec![0u8; 1 << 20];
        let mut gbs = |f: &mut dyn FnMut(&mut [u8])| {
            let mut best = f64::MAX;
            for _ in 0..50 {
                let t = std::time::Instant::now();
                f(&mut out);
                best = best.min(t.elapsed().as_secs_f64());
            }
            (1 << 20) as f64 / best / 1e9
        };
        let crate_gbs = gbs(&mut |o: &mut [u8]| {
            let blocks = unsafe {
                std::slice::from_raw_parts_mut(o.as_mut_ptr().cast::<aes::Block>(), o.len() / 16)
            };
            cipher.encrypt_blocks(blocks);
        });
        println!("aes crate: {crate_gbs:.1} GB/s");
        for w in widths() {
            // SAFETY: `widths()` found AES-NI.
            let keys = RoundKeys(unsafe { expand(&key) }, w);
            let g = gbs(&mut |o: &mut [u8]| keys.ctr_into(0, o));
            println!("{w:?}: {g:.1} GB/s");
        }
    }
}

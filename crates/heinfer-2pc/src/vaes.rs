//! Fixed-key AES-128 four blocks per instruction (VAES on 512-bit registers), for the hashes of
//! garbling and evaluation ([`crate::gc::halfgates`]).
//!
//! The `aes` crate pipelines AES-NI on 128-bit registers, one block per instruction. CPUs with
//! VAES and AVX-512 (AMD Zen 4, Intel Ice Lake and later) run the same rounds on four blocks
//! per `vaesenc`; with the labels kept in registers between the two permutations of the
//! tweakable hash and the gate's XORs, an AND gate costs a fraction of the generic path's time
//! (docs/benchmarks-history.md, "Garbling and OT on VAES"). The result is bit for bit the generic path's: the same
//! AES-128 under the same round keys (tested against the `aes` crate and FIPS-197).
//!
//! [`RoundKeys::detect`] returns the expanded key only where the CPU has `aes`, `vaes` and
//! `avx512f`; elsewhere callers take the generic path. The small helpers (`permute`, `tccr`,
//! `load4`, …) are `unsafe` and always inlined, without features of their own: they may only
//! be called from a function compiled with `avx512f` and `vaes` (every kernel here is), into
//! which they and their intrinsics inline — a helper with its own `#[target_feature]` was
//! left out of line by the compiler and cost a tenth of a step's time (measured).

use std::arch::x86_64::*;

/// AES-128's eleven round keys (FIPS-197 §5.2), little-endian `u128` like [`crate::Block`].
/// Wiped when dropped: the keys of IKNP's column streams and of the garbler's label streams
/// are secrets (the fixed key of the hash is public).
#[derive(Clone)]
pub(crate) struct RoundKeys([u128; 11]);

impl Drop for RoundKeys {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl std::fmt::Debug for RoundKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoundKeys(…)")
    }
}

impl RoundKeys {
    /// The round keys of `key` if this CPU runs VAES on 512-bit registers, else `None`.
    pub(crate) fn detect(key: [u8; 16]) -> Option<RoundKeys> {
        // SAFETY: `available` is true only on CPUs with AES-NI.
        available().then(|| unsafe { expand(key) })
    }

    /// Each round key in all four 128-bit lanes.
    ///
    /// # Safety
    /// The CPU must have `avx512f` (guaranteed by [`Self::detect`]).
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn broadcast(&self) -> [__m512i; 11] {
        let mut out = [_mm512_setzero_si512(); 11];
        for (o, k) in out.iter_mut().zip(&self.0) {
            *o = _mm512_broadcast_i32x4(_mm_loadu_si128(k as *const u128 as *const __m128i));
        }
        out
    }
}

/// Whether the VAES kernels run here: the CPU has `aes`, `vaes` and `avx512f`, and
/// `HEINFER_NO_VAES` is not set (read once per process: every hash and stream asks).
fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        std::env::var_os("HEINFER_NO_VAES").is_none()
            && is_x86_feature_detected!("aes")
            && is_x86_feature_detected!("vaes")
            && is_x86_feature_detected!("avx512f")
    })
}

/// One step of the AES-128 key schedule: `gen` is `aeskeygenassist(prev, rcon)`.
#[inline]
#[target_feature(enable = "aes")]
fn schedule_step(prev: __m128i, gen: __m128i) -> __m128i {
    let gen = _mm_shuffle_epi32::<0xff>(gen);
    let mut k = prev;
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    _mm_xor_si128(k, gen)
}

/// The AES-128 key expansion with `aeskeygenassist`.
#[target_feature(enable = "aes")]
unsafe fn expand(key: [u8; 16]) -> RoundKeys {
    let mut k = [_mm_setzero_si128(); 11];
    k[0] = _mm_loadu_si128(key.as_ptr() as *const __m128i);
    macro_rules! step {
        ($i:expr, $rcon:expr) => {
            k[$i] = schedule_step(k[$i - 1], _mm_aeskeygenassist_si128::<$rcon>(k[$i - 1]));
        };
    }
    step!(1, 0x01);
    step!(2, 0x02);
    step!(3, 0x04);
    step!(4, 0x08);
    step!(5, 0x10);
    step!(6, 0x20);
    step!(7, 0x40);
    step!(8, 0x80);
    step!(9, 0x1b);
    step!(10, 0x36);
    let mut out = [0u128; 11];
    for (o, v) in out.iter_mut().zip(k) {
        _mm_storeu_si128(o as *mut u128 as *mut __m128i, v);
    }
    RoundKeys(out)
}

/// `π` (AES-128 under `rk`) on every 128-bit lane of every register, in place; the `K`
/// registers go through each round together so the `vaesenc` latencies overlap.
#[inline(always)]
pub(crate) unsafe fn permute<const K: usize>(rk: &[__m512i; 11], x: &mut [__m512i; K]) {
    for v in x.iter_mut() {
        *v = _mm512_xor_si512(*v, rk[0]);
    }
    for key in &rk[1..10] {
        for v in x.iter_mut() {
            *v = _mm512_aesenc_epi128(*v, *key);
        }
    }
    for v in x.iter_mut() {
        *v = _mm512_aesenclast_epi128(*v, rk[10]);
    }
}

/// The tweakable hash `TCCR(x, t) = π(π(x) ⊕ t) ⊕ π(x)` of every lane of `x` with the tweak of
/// the same lane of `t`, in place ([`crate::hash::FixedKeyHash::tccr`]).
#[inline(always)]
pub(crate) unsafe fn tccr<const K: usize>(
    rk: &[__m512i; 11],
    x: &mut [__m512i; K],
    t: &[__m512i; K],
) {
    permute(rk, x);
    let first = *x;
    for (v, tw) in x.iter_mut().zip(t) {
        *v = _mm512_xor_si512(*v, *tw);
    }
    permute(rk, x);
    for (v, f) in x.iter_mut().zip(first) {
        *v = _mm512_xor_si512(*v, f);
    }
}

/// Blocks per step of the bulk kernels below (eight registers of four).
const BULK: usize = 32;

/// `out[i] ⊕= AES_rk(first + i)` (the counter as a little-endian `u128`) for the first
/// `out.len() − out.len() mod 32` blocks of `out`; returns how many.
///
/// # Safety
/// The CPU must have AES, VAES and AVX-512F (guaranteed by [`RoundKeys::detect`]).
#[target_feature(enable = "avx512f,vaes")]
pub(crate) unsafe fn ctr_xor(rk: &RoundKeys, first: u64, out: &mut [u128]) -> usize {
    let keys = rk.broadcast();
    // lane k of register r counts first + 4r + k (low 64 bits; the counter never nears 2^64)
    let lanes = _mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0);
    let mut done = 0;
    while done + BULK <= out.len() {
        let mut x = [_mm512_setzero_si512(); 8];
        for (r, v) in x.iter_mut().enumerate() {
            let c = first.wrapping_add((done + 4 * r) as u64) as i64;
            *v = _mm512_add_epi64(_mm512_set_epi64(0, c, 0, c, 0, c, 0, c), lanes);
        }
        permute(&keys, &mut x);
        for (r, v) in x.iter().enumerate() {
            let at = &mut out[done + 4 * r..];
            store4(at, _mm512_xor_si512(load4(at), *v));
        }
        done += BULK;
    }
    done
}

/// The correlation-robust hash `π(σ(x)) ⊕ σ(x)` ([`crate::hash::FixedKeyHash::cr`]) of the
/// first `xs.len() − xs.len() mod 32` blocks, in place; returns how many.
///
/// # Safety
/// The CPU must have AES, VAES and AVX-512F (guaranteed by [`RoundKeys::detect`]).
#[target_feature(enable = "avx512f,vaes")]
pub(crate) unsafe fn cr(rk: &RoundKeys, xs: &mut [u128]) -> usize {
    let keys = rk.broadcast();
    let high = _mm512_set_epi64(-1, 0, -1, 0, -1, 0, -1, 0);
    let mut done = 0;
    while done + BULK <= xs.len() {
        let mut x = [_mm512_setzero_si512(); 8];
        for (r, v) in x.iter_mut().enumerate() {
            let w = load4(&xs[done + 4 * r..]);
            // σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L: the halves swapped, the high one XORed back
            *v = _mm512_xor_si512(_mm512_shuffle_epi32::<0x4E>(w), _mm512_and_si512(w, high));
        }
        let sig = x;
        permute(&keys, &mut x);
        for (r, v) in x.iter().enumerate() {
            store4(&mut xs[done + 4 * r..], _mm512_xor_si512(*v, sig[r]));
        }
        done += BULK;
    }
    done
}

/// `TCCR(xs[i], tweaks[i])` ([`crate::hash::FixedKeyHash::tccr`]) for the first
/// `xs.len() − xs.len() mod 32` blocks, in place; returns how many.
///
/// # Safety
/// The CPU must have AES, VAES and AVX-512F (guaranteed by [`RoundKeys::detect`]), and
/// `tweaks` must be as long as `xs`.
#[target_feature(enable = "avx512f,vaes")]
pub(crate) unsafe fn tccr_bulk(rk: &RoundKeys, xs: &mut [u128], tweaks: &[u128]) -> usize {
    assert_eq!(xs.len(), tweaks.len());
    let keys = rk.broadcast();
    let mut done = 0;
    while done + BULK <= xs.len() {
        let mut x = [_mm512_setzero_si512(); 8];
        let mut t = [_mm512_setzero_si512(); 8];
        for r in 0..8 {
            x[r] = load4(&xs[done + 4 * r..]);
            t[r] = load4(&tweaks[done + 4 * r..]);
        }
        tccr(&keys, &mut x, &t);
        for (r, v) in x.iter().enumerate() {
            store4(&mut xs[done + 4 * r..], *v);
        }
        done += BULK;
    }
    done
}

/// The 8-bit mask of the 64-bit halves of the lanes of `x` whose label has colour bit 1
/// (`lsb`): both halves of a lane set together, for the masked XORs of a half gate.
#[inline(always)]
pub(crate) unsafe fn colour_mask(x: __m512i) -> __mmask8 {
    let low_bit = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
    let k = _mm512_test_epi64_mask(x, low_bit);
    k | (k << 1)
}

/// Four blocks from `src` (at least four long) into one register.
#[inline(always)]
pub(crate) unsafe fn load4(src: &[u128]) -> __m512i {
    assert!(src.len() >= 4);
    // SAFETY: four u128 (64 bytes) are readable at `src` (checked above); unaligned load.
    unsafe { _mm512_loadu_si512(src.as_ptr() as *const _) }
}

/// One register into the first four blocks of `dst`.
#[inline(always)]
pub(crate) unsafe fn store4(dst: &mut [u128], v: __m512i) {
    assert!(dst.len() >= 4);
    // SAFETY: four u128 (64 bytes) are writable at `dst` (checked above); unaligned store.
    unsafe { _mm512_storeu_si512(dst.as_mut_ptr() as *mut _, v) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::generic_array::GenericArray;
    use aes::cipher::{BlockEncrypt, KeyInit};

    #[target_feature(enable = "avx512f,vaes")]
    fn encrypt4(rk: &RoundKeys, blocks: &mut [u128; 4]) {
        // SAFETY: the caller checked the features through `detect`; this function enables them.
        unsafe {
            let keys = rk.broadcast();
            let mut x = [load4(blocks)];
            permute(&keys, &mut x);
            store4(blocks, x[0]);
        }
    }

    #[test]
    fn fips197_and_the_aes_crate_agree_with_vaes() {
        let key = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        let Some(rk) = RoundKeys::detect(key) else {
            eprintln!("no VAES on this CPU: nothing to compare");
            return;
        };
        // FIPS-197 Appendix C.1 in lane 0, three more blocks checked against the `aes` crate
        let plain = u128::from_le_bytes([
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff,
        ]);
        let mut blocks = [
            plain,
            1,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ];
        let inputs = blocks;
        // SAFETY: `detect` returned keys, so the CPU has the features.
        unsafe { encrypt4(&rk, &mut blocks) };
        let expect = [
            0x69u8, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
            0xc5, 0x5a,
        ];
        assert_eq!(blocks[0].to_le_bytes(), expect);
        let cipher = aes::Aes128::new(&GenericArray::from(key));
        for (x, y) in inputs.iter().zip(blocks) {
            let mut b = GenericArray::from(x.to_le_bytes());
            cipher.encrypt_block(&mut b);
            assert_eq!(u128::from_le_bytes(b.into()), y);
        }
    }
}

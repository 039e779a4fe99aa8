//! Residue unpacking with AVX-512 (see `pack.rs` for the layout): a group of eight residues
//! of `b` bits is `b` bytes, loaded with one masked load; residue `j` starts at group bit
//! `o = j·b`, in word `k = ⌊o/64⌋` at shift `s = o mod 64`, so
//!
//! ```text
//! x_j = ((w_k >> s) | (w_{k+1} << (64 − s))) & (2^b − 1)
//! ```
//!
//! is two word permutations, two variable shifts, an or and an and for all eight lanes (a
//! shift by 64 gives 0, so a residue within one word needs no special case), and the range
//! check one unsigned comparison. The scalar code (one specialization per width) remains for
//! other CPUs and for the last residues of a limb.

use super::pack::Unpack;
use std::arch::x86_64::*;

/// Whether [`unpack_groups`] can run on this CPU (cached by the standard library).
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// Appends the `groups · 8` residues of `bits` bits (1..=64) packed in `src` (at least
/// `groups · bits` bytes) to `out`, checking each below `q`; the first one that is not is
/// the error (with its index in the limb), and what was appended is then unspecified.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW ([`available`]).
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn unpack_groups(
    src: &[u8],
    bits: usize,
    q: u64,
    groups: usize,
    out: &mut Vec<u64>,
) -> Result<(), Unpack> {
    assert!((1..=64).contains(&bits) && src.len() >= groups * bits);
    let (mut lo, mut hi, mut right, mut left) = ([0i64; 8], [0i64; 8], [0i64; 8], [0i64; 8]);
    for j in 0..8 {
        let o = j * bits;
        lo[j] = (o / 64) as i64;
        hi[j] = (o / 64 + 1).min(7) as i64;
        right[j] = (o % 64) as i64;
        left[j] = 64 - (o % 64) as i64;
    }
    let lo = _mm512_loadu_si512(lo.as_ptr().cast());
    let hi = _mm512_loadu_si512(hi.as_ptr().cast());
    let right = _mm512_loadu_si512(right.as_ptr().cast());
    let left = _mm512_loadu_si512(left.as_ptr().cast());
    let mask = _mm512_set1_epi64(if bits == 64 { -1 } else { (1i64 << bits) - 1 });
    let vq = _mm512_set1_epi64(q as i64);
    let bytes: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    out.reserve(groups * 8);
    let start = out.len();
    let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u64>();
    for g in 0..groups {
        // SAFETY: bytes [g·bits, (g+1)·bits) are inside `src` (checked above); the masked
        // load reads no other byte.
        let w = _mm512_maskz_loadu_epi8(bytes, src.as_ptr().add(g * bits).cast());
        let x = _mm512_or_si512(
            _mm512_srlv_epi64(_mm512_permutexvar_epi64(lo, w), right),
            _mm512_sllv_epi64(_mm512_permutexvar_epi64(hi, w), left),
        );
        let x = _mm512_and_si512(x, mask);
        if _mm512_cmpge_epu64_mask(x, vq) != 0 {
            let mut v = [0u64; 8];
            _mm512_storeu_si512(v.as_mut_ptr().cast(), x);
            let j = v
                .iter()
                .position(|&x| x >= q)
                .expect("an offending residue");
            out.set_len(start + 8 * g);
            return Err(Unpack::Residue {
                index: 8 * g + j,
                value: v[j],
            });
        }
        // SAFETY: `out` has room for `groups · 8` more words (reserved above).
        _mm512_storeu_si512(dst.add(8 * g).cast(), x);
    }
    // SAFETY: the loop wrote words `start .. start + groups·8`.
    out.set_len(start + groups * 8);
    Ok(())
}

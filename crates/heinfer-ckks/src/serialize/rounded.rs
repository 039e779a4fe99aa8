//! Rounded ciphertexts: a ciphertext that is only going to be decrypted travels without the
//! low bits of its coefficients.
//!
//! Part of the serialization layer of `heinfer-ckks`. A ciphertext `(c_0, …, c_{k−1})` at
//! level `ℓ` decrypts to `Σ_i c_i·s^i = m + e (mod Q)`, `Q = q_0⋯q_ℓ`; in full its residues take
//! `Σ_t ⌈log2 q_t⌉` bits per coefficient. Rounded, part `i` drops `j_i` bits: each coefficient
//! `c ∈ [0, Q)` (composed from its residues by Garner's algorithm) travels as
//! `v = ⌊c / 2^{j_i}⌋` in `K_i = b_Q − j_i` bits (`b_Q` the bit length of `Q`), and the receiver
//! takes `c̃ = v·2^{j_i} + ⌊2^{j_i − 1}⌋`, so `c̃ − c = δ` with `|δ| ≤ 2^{j_i−1}`.
//!
//! **The error has mean zero.** With the low bits `r = c mod 2^j` uniform, `δ = 2^{j−1} − r`
//! runs over `−2^{j−1}+1, …, 2^{j−1}`: mean `+1/2`, the same in every coefficient. A constant
//! polynomial `½·Σ_k X^k` is far from harmless in CKKS: at the root `ζ = e^{iπ/N}` of slot 0 it
//! is `1/(1 − ζ) ≈ N/π`, and multiplied by `s(ζ)` (the `c_1` part) it put a key-dependent
//! offset of about `(N/π)·√(2N/3)/2` integer units on slot 0 of every decrypted result —
//! measured at `N = 2^13` and 28-bit scales: 0.3–3 released precisions on a latency-mode
//! network's first output, the same for every query of a session. So the sender breaks the
//! tie: when `r = 0` (`δ` would be `+2^{j−1}`) and bit `j` of `c` is set, it sends `v − 1`
//! (`δ = −2^{j−1}`); the error set is then symmetric and, since bit `j` of a ciphertext
//! coefficient is as uniform as its low bits, of mean zero, with the same variance. The
//! receiver's formula is unchanged. Decryption
//! gains `Σ_i δ_i·s^i`; with the uniform ternary secret (each coefficient of `s` has variance
//! `2/3`, each of `s²` about `8N/9` — twice `N·(2/3)²`, since `s_a·s_b` and `s_b·s_a` are the
//! same product — and in general each of `s^i` about `i!·(2/3)^i·N^{i−1}`) and `δ` uniform
//! (the coefficients of a ciphertext are), the added error has, per coefficient, the variance
//!
//! ```text
//! σ² = Σ_i w_i²·4^{j_i} / 12,   w_i² = i!·(2/3)^i·N^i:
//!    = (4^{j_0} + (2N/3)·4^{j_1} + (8N²/9)·4^{j_2} + (16N³/9)·4^{j_3} + (128N⁴/27)·4^{j_4}) / 12.
//! ```
//!
//! [`rounding_drop_bits`] picks the `j_i` for a bound on `σ`; the caller derives that bound from
//! the precision the receiver needs. Rounding is public post-processing of a ciphertext (no key
//! is involved), so it changes nothing about what the ciphertext hides.
//!
//! Layout, after the common ciphertext fields with the seed flag [`ROUNDED_FLAG`]: one byte
//! `j_i` per part, then per part the `N` values `v` at `K_i` bits, bit-packed as residues are
//! ([`super::pack`]); values wider than 63 bits travel as two packed streams, the low
//! `⌊K_i/2⌋` bits, then the high `⌈K_i/2⌉`. Decoding checks `b_Q ≤ 126`, `j_i < b_Q`, that every
//! `v ≤ ⌊(Q−1)/2^{j_i}⌋` (the one canonical form), the padding, and that no part drops more
//! bits than the caller allows.

use super::pack::{pack_residues, packed_len, unpack_residues, Unpack};
use super::wire::{poly_wire_bytes, Reader, Writer};
use super::{ciphertext_to_bytes, ciphertext_wire_bytes, Kind};
use crate::ciphertext::{Ciphertext, MAX_PARTS};
use crate::error::{CkksError, Result};
use crate::keygen::basis_indices;
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::Modulus;

/// Seed-flag value of a rounded ciphertext.
pub(super) const ROUNDED_FLAG: u8 = 2;
/// Largest bit length of `Q` a rounded ciphertext supports: its coefficients are composed in
/// 128-bit words (and split in two packed streams of at most 63 bits).
pub const MAX_ROUNDED_Q_BITS: u32 = 126;

/// Garner's constants of the primes of one level.
struct Crt {
    moduli: Vec<Modulus>,
    /// `M_t = q_0⋯q_{t−1}` (`M_0 = 1`).
    prefix: Vec<u128>,
    /// `(M_t mod q_t)^{−1} mod q_t` and its Shoup constant (`t ≥ 1`).
    inv: Vec<(u64, u64)>,
    /// `Q − 1`.
    top: u128,
    /// Bit length of `Q`.
    bits: u32,
}

impl Crt {
    /// The composition at `level`, or `None` when `Q` has more than [`MAX_ROUNDED_Q_BITS`] bits.
    fn new(params: &CkksParams, level: usize) -> Option<Self> {
        let moduli = params.moduli()[..=level].to_vec();
        let mut prefix = Vec::with_capacity(moduli.len());
        let mut inv = Vec::with_capacity(moduli.len());
        let mut m: u128 = 1;
        for md in &moduli {
            prefix.push(m);
            let r = md.reduce_u128(m);
            let i = if r == 0 { 0 } else { md.inv(r) };
            inv.push((i, md.shoup(i)));
            m = m.checked_mul(md.q as u128)?;
        }
        let bits = 128 - m.leading_zeros();
        (bits <= MAX_ROUNDED_Q_BITS).then(|| Self {
            moduli,
            prefix,
            inv,
            top: m - 1,
            bits,
        })
    }

    /// `c mod Q` from the residues `r_t = limbs[t·n + k]` of coefficient `k`, for every `k`.
    fn compose(&self, limbs: &[u64], n: usize, out: &mut [u128]) {
        for (k, o) in out.iter_mut().enumerate() {
            let mut x = limbs[k] as u128;
            for t in 1..self.moduli.len() {
                let md = &self.moduli[t];
                let d = md.sub(limbs[t * n + k], md.reduce_u128(x));
                let (w, ws) = self.inv[t];
                x += self.prefix[t] * md.mul_shoup(d, w, ws) as u128;
            }
            *o = x;
        }
    }
}

/// Low bits a rounded ciphertext of `size` polynomials at `level` may drop per polynomial so
/// that the error it adds to each decrypted coefficient has a standard deviation of at most
/// `max_std` (in units of the coefficients: divide by the scale for values). Each polynomial
/// gets an equal share of the variance (see the module documentation); all zeros when `Q` is
/// too wide to round (more than [`MAX_ROUNDED_Q_BITS`] bits) or `max_std` too small.
pub fn rounding_drop_bits(
    params: &CkksParams,
    level: usize,
    size: usize,
    max_std: f64,
) -> Result<Vec<u32>> {
    if level > params.max_level() {
        return Err(CkksError::LevelOutOfRange {
            level,
            max: params.max_level(),
        });
    }
    if !(2..=MAX_PARTS).contains(&size) || max_std.is_nan() || max_std < 0.0 {
        return Err(CkksError::InvalidOperand {
            op: "choose the bits a rounded ciphertext drops",
            reason: format!(
                "a ciphertext has 2 to {MAX_PARTS} polynomials (got {size}) and the bound is a \
                 non-negative standard deviation (got {max_std})"
            ),
        });
    }
    let Some(crt) = Crt::new(params, level) else {
        return Ok(vec![0; size]);
    };
    let n = params.n() as f64;
    // w_i = √(i!·(2/3)^i·N^i): the deviation of a coefficient of δ·s^i per unit of δ's
    let weights = (0..size).scan(1.0f64, |w2, i| {
        if i > 0 {
            *w2 *= i as f64 * (2.0 / 3.0) * n;
        }
        Some(w2.sqrt())
    });
    Ok(weights
        .map(|w| {
            let j = (max_std * 12f64.sqrt() / ((size as f64).sqrt() * w))
                .log2()
                .floor();
            j.clamp(0.0, (crt.bits - 1) as f64) as u32
        })
        .collect())
}

/// Serializes a ciphertext that is only going to be decrypted with polynomial `i` rounded to
/// drop `drop[i]` low bits of every coefficient (see [`rounding_drop_bits`] for the error this
/// adds and how to bound it): `⌈log2 Q⌉ − drop[i]` bits per coefficient instead of the
/// residues' `Σ ⌈log2 q_t⌉`. All-zero `drop`: the ordinary form. Fails when `Q` exceeds
/// [`MAX_ROUNDED_Q_BITS`] bits, for a count per polynomial that does not match, or a count
/// not below `⌈log2 Q⌉`.
pub fn ciphertext_to_bytes_rounded(
    params: &CkksParams,
    ct: &Ciphertext,
    drop: &[u32],
) -> Result<Vec<u8>> {
    if drop.iter().all(|&j| j == 0) && drop.len() == ct.parts.len() {
        return ciphertext_to_bytes(params, ct);
    }
    params.check_id(ct.params_id)?;
    let capacity =
        rounded_ciphertext_wire_bytes(params, ct.level, ct.parts.len(), drop).unwrap_or(0);
    let mut w = Writer::with_capacity(Kind::Ciphertext, ct.params_id, capacity);
    w.u32(ct.level as u32);
    w.f64(ct.scale);
    w.u8(ct.parts.len() as u8);
    write_rounded(&mut w, params, ct, drop)?;
    Ok(w.buf)
}

/// Exact length of [`ciphertext_to_bytes_rounded`] for `size` polynomials at `level` dropping
/// `drop` bits (the ordinary length when nothing is dropped or `Q` is too wide to round).
pub fn rounded_ciphertext_wire_bytes(
    params: &CkksParams,
    level: usize,
    size: usize,
    drop: &[u32],
) -> Result<usize> {
    let full = ciphertext_wire_bytes(params, level, size)?;
    match rounded_q_bits(params, level) {
        Some(bits)
            if drop.len() == size
                && drop.iter().any(|&j| j > 0)
                && drop.iter().all(|&j| j < bits) =>
        {
            let poly = poly_wire_bytes(params, &basis_indices(params, level, false));
            Ok(full - size * poly + rounded_parts_bytes(params.n(), bits, drop))
        }
        _ => Ok(full),
    }
}

/// Bit widths of the packed streams of `k`-bit values: one stream up to 63 bits, else two.
fn streams(k: u32) -> (u32, u32) {
    if k <= 63 {
        (k, 0)
    } else {
        (k / 2, k - k / 2)
    }
}

/// Bytes of the rounded parts of a ciphertext (after the common fields and the seed flag).
pub(super) fn rounded_parts_bytes(n: usize, q_bits: u32, drop: &[u32]) -> usize {
    drop.len()
        + drop
            .iter()
            .map(|&j| {
                let (lo, hi) = streams(q_bits - j);
                packed_len(n, lo) + if hi > 0 { packed_len(n, hi) } else { 0 }
            })
            .sum::<usize>()
}

/// Bit length of `Q` at `level` when a ciphertext there can be rounded (at most
/// [`MAX_ROUNDED_Q_BITS`]), `None` when it is too wide.
pub fn rounded_q_bits(params: &CkksParams, level: usize) -> Option<u32> {
    Crt::new(params, level).map(|c| c.bits)
}

/// Writes the seed flag, the dropped bits and the rounded parts of `ct` (see the module
/// documentation). Fails when `Q` is too wide, when `drop` does not give one count per part, or
/// when a count is not below `b_Q`.
pub(super) fn write_rounded(
    w: &mut Writer,
    params: &CkksParams,
    ct: &Ciphertext,
    drop: &[u32],
) -> Result<()> {
    let bad = |reason: String| CkksError::InvalidOperand {
        op: "round a ciphertext",
        reason,
    };
    let crt = Crt::new(params, ct.level).ok_or_else(|| {
        bad(format!(
            "Q at level {} exceeds {MAX_ROUNDED_Q_BITS} bits",
            ct.level
        ))
    })?;
    if drop.len() != ct.parts.len() || drop.iter().any(|&j| j >= crt.bits) {
        return Err(bad(format!(
            "{drop:?}: one count per polynomial ({}), each below the {} bits of Q",
            ct.parts.len(),
            crt.bits
        )));
    }
    let n = params.n();
    w.u8(ROUNDED_FLAG);
    for &j in drop {
        w.u8(j as u8);
    }
    w.buf
        .reserve(rounded_parts_bytes(n, crt.bits, drop) - drop.len());
    let mut coeffs = vec![0u64; n * (ct.level + 1)];
    if ct.level == 0 {
        // one prime: the coefficient is the residue, and every value fits one stream
        for (p, &j) in ct.parts.iter().zip(drop) {
            coeffs.copy_from_slice(p.data());
            params.ntt(0).inverse(&mut coeffs);
            coeffs
                .iter_mut()
                .for_each(|c| *c = drop_bits(*c as u128, j) as u64);
            pack_residues(&coeffs, crt.bits - j, &mut w.buf);
        }
        return Ok(());
    }
    let mut vals = vec![0u128; n];
    let (mut lo_vals, mut hi_vals) = (vec![0u64; n], vec![0u64; n]);
    for (p, &j) in ct.parts.iter().zip(drop) {
        coeffs.copy_from_slice(p.data());
        for (t, limb) in coeffs.chunks_exact_mut(n).enumerate() {
            params.ntt(t).inverse(limb);
        }
        crt.compose(&coeffs, n, &mut vals);
        let (lo, hi) = streams(crt.bits - j);
        for ((v, l), h) in vals.iter().zip(&mut lo_vals).zip(&mut hi_vals) {
            let x = drop_bits(*v, j);
            *l = (x & ((1u128 << lo) - 1)) as u64;
            *h = (x >> lo) as u64;
        }
        pack_residues(&lo_vals, lo, &mut w.buf);
        if hi > 0 {
            pack_residues(&hi_vals, hi, &mut w.buf);
        }
    }
    Ok(())
}

/// `⌊c / 2^j⌋`, less one when the dropped bits are all zero and bit `j` of `c` is set (an odd
/// quotient, so the result stays non-negative): the tie-break that gives the receiver's error
/// `c̃ − c` mean zero (see the module documentation).
#[inline]
fn drop_bits(c: u128, j: u32) -> u128 {
    let v = c >> j;
    let tie = j > 0 && c & ((1u128 << j) - 1) == 0 && v & 1 == 1;
    v - tie as u128
}

/// Reads the dropped bits and the rounded parts of a ciphertext of `size` polynomials at
/// `level` (after its seed flag), checking them (see the module documentation) and that part
/// `i` drops at most `max_drop[i]` bits (an empty `max_drop`: no rounded ciphertext accepted).
/// With `build`, returns the polynomials in evaluation form; otherwise only checks.
pub(super) fn read_rounded(
    r: &mut Reader<'_>,
    params: &CkksParams,
    level: usize,
    size: usize,
    max_drop: &[u32],
    build: bool,
) -> Result<Vec<RnsPoly>> {
    if max_drop.is_empty() {
        return Err(
            r.err("a rounded ciphertext (low bits dropped) where only full ones are accepted")
        );
    }
    let crt = Crt::new(params, level).ok_or_else(|| {
        r.err(format!(
            "a rounded ciphertext at level {level}, where Q exceeds {MAX_ROUNDED_Q_BITS} bits"
        ))
    })?;
    let mut drop = Vec::with_capacity(size);
    for i in 0..size {
        let j = r.u8()? as u32;
        let allowed = max_drop.get(i).copied().unwrap_or(0);
        if j >= crt.bits || j > allowed {
            return Err(r.err(format!(
                "polynomial {i} drops {j} low bits (at most {allowed} allowed, Q has {} bits)",
                crt.bits
            )));
        }
        drop.push(j);
    }
    let n = params.n();
    let need = rounded_parts_bytes(n, crt.bits, &drop) - size;
    if r.remaining() < need {
        return Err(r.err(format!("truncated: needed {need} more bytes")));
    }
    let mut polys = Vec::with_capacity(if build { size } else { 0 });
    let (mut lo_vals, mut hi_vals) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (i, &j) in drop.iter().enumerate() {
        let (lo, hi) = streams(crt.bits - j);
        lo_vals.clear();
        hi_vals.clear();
        read_stream(r, lo, n, &mut lo_vals, i)?;
        let top = crt.top >> j;
        let half = if j > 0 { 1u128 << (j - 1) } else { 0 };
        if level == 0 {
            // one prime q: v·2^j ≤ q − 1 and the offset is below q, so c̃ < 2q
            let (q, top, half) = (crt.moduli[0].q, top as u64, half as u64);
            if lo_vals.iter().fold(false, |bad, &v| bad | (v > top)) {
                return Err(r.err(format!(
                    "polynomial {i}: a rounded coefficient is not below Q (not the canonical form)"
                )));
            }
            if build {
                let mut data = std::mem::take(&mut lo_vals);
                for v in data.iter_mut() {
                    let c = (*v << j) + half;
                    *v = if c >= q { c - q } else { c };
                }
                params.ntt(0).forward(&mut data);
                polys.push(RnsPoly::from_data(data, n));
            }
            continue;
        }
        if hi > 0 {
            read_stream(r, hi, n, &mut hi_vals, i)?;
        } else {
            hi_vals.resize(n, 0);
        }
        let mut data = if build {
            vec![0u64; n * (level + 1)]
        } else {
            Vec::new()
        };
        for k in 0..n {
            let v = lo_vals[k] as u128 | (hi_vals[k] as u128) << lo;
            if v > top {
                return Err(r.err(format!(
                    "polynomial {i}: a rounded coefficient is not below Q (not the canonical form)"
                )));
            }
            if build {
                let c = (v << j) + half;
                for (t, md) in crt.moduli.iter().enumerate() {
                    data[t * n + k] = md.reduce_u128(c);
                }
            }
        }
        if build {
            for (t, limb) in data.chunks_exact_mut(n).enumerate() {
                params.ntt(t).forward(limb);
            }
            polys.push(RnsPoly::from_data(data, n));
        }
    }
    Ok(polys)
}

/// Unpacks one stream of `n` values of `bits` bits into `out`.
fn read_stream(
    r: &mut Reader<'_>,
    bits: u32,
    n: usize,
    out: &mut Vec<u64>,
    part: usize,
) -> Result<()> {
    let src = r.take(packed_len(n, bits))?;
    unpack_residues(src, bits, 1u64 << bits, n, out).map_err(|e| match e {
        Unpack::Residue { value, .. } => r.err(format!(
            "polynomial {part}: value {value} exceeds {bits} bits"
        )),
        Unpack::Padding => r.err("non-zero padding bits"),
    })
}

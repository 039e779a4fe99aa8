//! Residue bit packing: a limb's residues below a `b`-bit modulus stored in `b` bits each
//! ([`pack_residues`], [`unpack_residues`]), the byte layer under [`super::wire`]'s
//! `Writer::poly` and `Reader::poly`.

// The layout is documented on `pack_residues`.
//
// Fast path. Eight residues take `8·b` bits, exactly `b` bytes, so the stream splits into
// byte-aligned groups: group `g` holds residues `8g..8g+8` in bytes `[g·b, (g+1)·b)`. Within a
// group the `b` bytes are handled as little-endian words `w_0, …, w_7` (only `⌈b/8⌉` are used;
// the last is zero-padded when `8 ∤ b`). Residue `j` of the group starts at group bit `o = j·b`:
// with `k = ⌊o/64⌋` and `s = o mod 64`,
//
//   x_j = ((w_k >> s) | (w_{k+1} << (64 − s))) & (2^b − 1),
//
// where the second term appears only when `s + b > 64` (the residue straddles two words).
// Packing is the transpose: `w_k |= x_j << s` and, when straddling, `w_{k+1} |= x_j >> (64 − s)`.
// The width is a const generic, one instance per `b` in 1..=64 (see `by_width!`), so every `k`,
// `s`, straddle test and mask is a compile-time constant: a residue costs a shift or two, an or
// and an and, with whole 64-bit loads and stores (the byte-at-a-time loop with a 128-bit
// accumulator this replaced was 8–16× slower; `benches/wire.rs`). The last `c mod 8` residues
// go through the same group code on a zero-padded copy, so there is one code path per width.

/// Bit width of residues modulo `q`: the bit length of `q` (1..=64 for `q ≥ 1`).
pub(super) fn modulus_bits(q: u64) -> u32 {
    64 - q.leading_zeros()
}

/// Bytes taken by `count` residues of `bits` bits: `⌈count·bits/8⌉`.
pub(super) fn packed_len(count: usize, bits: u32) -> usize {
    (count * bits as usize).div_ceil(8)
}

/// `2^bits − 1` (all ones for 64 bits).
const fn low_mask(bits: usize) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Why [`unpack_residues`] refused its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unpack {
    /// Residue number `index` (the first offending one) is `value ≥ q`.
    Residue { index: usize, value: u64 },
    /// The padding bits at the end of the last byte are not all zero.
    Padding,
}

/// Calls `$f::<B>(args…)` with the const generic `B` equal to the run-time width `$bits`
/// (1..=64), so each width gets its own fully specialized code.
macro_rules! by_width {
    ($bits:expr, $f:ident $args:tt) => {
        by_width!(@arms $bits, $f, $args;
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
            33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
            61 62 63 64)
    };
    (@arms $bits:expr, $f:ident, $args:tt; $($b:literal)*) => {
        match $bits {
            $($b => $f::<$b> $args,)*
            b => panic!("residue width {b} is outside 1..=64"),
        }
    };
}

/// Appends `vals` packed at `bits` bits each to `out`: [`packed_len`]`(vals.len(), bits)`
/// bytes, padding bits zero.
///
/// Layout: the values `x_0, x_1, …, x_{c−1}` (for a limb: residues below `q < 2^b`, `b` the
/// bit length of `q`, 1..=64) form one little-endian bit stream. Value `j` occupies stream
/// bits `[j·b, (j+1)·b)`, least significant bit first, and stream bit `t` is bit `t mod 8` of
/// byte `⌊t/8⌋`; read as one little-endian integer, the bytes are `Σ_j x_j·2^{j·b}`. That
/// takes `⌈c·b/8⌉` bytes, and the bits of the last byte above `c·b` (padding) are zero.
///
/// Every value must be below `2^bits` (residues are below their modulus); higher bits are
/// dropped, so a bad value can never spill into its neighbours.
pub(super) fn pack_residues(vals: &[u64], bits: u32, out: &mut Vec<u8>) {
    // grow, then overwrite in place: the limb-sized zero fill stays in cache and is cheaper
    // than appending group by group (measured 2× slower)
    let start = out.len();
    out.resize(start + packed_len(vals.len(), bits), 0);
    by_width!(bits, pack_fixed(vals, &mut out[start..]))
}

/// Appends the `count` residues of `bits` bits packed in `src` to `out`, checking that each is
/// below `q` and that the padding bits are zero. `src` must be exactly
/// [`packed_len`]`(count, bits)` bytes long. On error, what was appended is unspecified.
pub(super) fn unpack_residues(
    src: &[u8],
    bits: u32,
    q: u64,
    count: usize,
    out: &mut Vec<u64>,
) -> std::result::Result<(), Unpack> {
    assert_eq!(src.len(), packed_len(count, bits), "packed length");
    out.reserve(count);
    let mut done = 0; // residues unpacked eight at a time with AVX-512
    #[cfg(target_arch = "x86_64")]
    if super::pack_avx512::available() {
        let b = bits as usize;
        // SAFETY: the CPU supports AVX-512F and AVX-512BW (checked just above).
        unsafe { super::pack_avx512::unpack_groups(src, b, q, count / 8, out)? };
        done = count / 8 * 8;
    }
    let rest = &src[done / 8 * bits as usize..];
    by_width!(bits, unpack_fixed(rest, q, count - done, done, out))?;
    let used = (count * bits as usize % 8) as u32;
    match src.last() {
        Some(&last) if used != 0 && last >> used != 0 => Err(Unpack::Padding),
        _ => Ok(()),
    }
}

/// [`pack_residues`] for the width `B` into `out` of exactly [`packed_len`] bytes: whole groups
/// of 8 residues → `B` bytes each, then the tail.
fn pack_fixed<const B: usize>(vals: &[u64], out: &mut [u8]) {
    let (head, rest) = out.split_at_mut(vals.len() / 8 * B);
    let mut groups = vals.chunks_exact(8);
    for (v, dst) in (&mut groups).zip(head.chunks_exact_mut(B)) {
        let w = pack8::<B>(v.try_into().expect("8 residues"));
        store_group::<B>(&w, dst.try_into().expect("B bytes"));
    }
    let tail = groups.remainder();
    if !tail.is_empty() {
        // zero residues pack to zero bits, so the padding comes out zero
        let mut v = [0u64; 8];
        v[..tail.len()].copy_from_slice(tail);
        let mut bytes = [0u8; B];
        store_group::<B>(&pack8::<B>(&v), &mut bytes);
        rest.copy_from_slice(&bytes[..rest.len()]);
    }
}

/// [`unpack_residues`] for the width `B`, without the padding check: `count` residues from
/// `src`, the first of which is residue `base` of the limb (for the error's index).
fn unpack_fixed<const B: usize>(
    src: &[u8],
    q: u64,
    count: usize,
    base: usize,
    out: &mut Vec<u64>,
) -> std::result::Result<(), Unpack> {
    let full = count / 8;
    let (head, rest) = src.split_at(full * B);
    for (g, s) in head.chunks_exact(B).enumerate() {
        let v = unpack8::<B>(&load_group::<B>(s.try_into().expect("B bytes")));
        check_below(&v, q, base + 8 * g)?;
        out.extend_from_slice(&v);
    }
    let tail = count % 8;
    if tail != 0 {
        let mut bytes = [0u8; B];
        bytes[..rest.len()].copy_from_slice(rest);
        let v = unpack8::<B>(&load_group::<B>(&bytes));
        check_below(&v[..tail], q, base + 8 * full)?;
        out.extend_from_slice(&v[..tail]);
    }
    Ok(())
}

/// The range check of every residue read: all of `v` below `q`, else the first offender (its
/// index in the limb is `first + position`). Branch-free over the group; one branch per group.
#[inline(always)]
fn check_below(v: &[u64], q: u64, first: usize) -> std::result::Result<(), Unpack> {
    if v.iter().fold(false, |bad, &x| bad | (x >= q)) {
        let (j, &value) = v
            .iter()
            .enumerate()
            .find(|&(_, &x)| x >= q)
            .expect("an offending residue");
        return Err(Unpack::Residue {
            index: first + j,
            value,
        });
    }
    Ok(())
}

/// Places 8 residues at `B` bits each into the group words (see the layout notes above).
#[inline(always)]
fn pack8<const B: usize>(v: &[u64; 8]) -> [u64; 8] {
    let mask = low_mask(B);
    let mut w = [0u64; 8];
    for (j, &x) in v.iter().enumerate() {
        let x = x & mask;
        let o = j * B;
        let (k, s) = (o / 64, o % 64);
        w[k] |= x << s;
        if s + B > 64 {
            w[k + 1] |= x >> (64 - s);
        }
    }
    w
}

/// Extracts the 8 residues of `B` bits from the group words (see the layout notes above).
#[inline(always)]
fn unpack8<const B: usize>(w: &[u64; 8]) -> [u64; 8] {
    let mask = low_mask(B);
    let mut v = [0u64; 8];
    for (j, x) in v.iter_mut().enumerate() {
        let o = j * B;
        let (k, s) = (o / 64, o % 64);
        let mut t = w[k] >> s;
        if s + B > 64 {
            t |= w[k + 1] << (64 - s);
        }
        *x = t & mask;
    }
    v
}

/// Reads the `B` bytes of a group as little-endian words `w_0..w_{⌈B/8⌉−1}`, the last one
/// zero-padded when `8 ∤ B`.
#[inline(always)]
fn load_group<const B: usize>(src: &[u8; B]) -> [u64; 8] {
    let (full, rem) = (B / 8, B % 8);
    let mut w = [0u64; 8];
    for (k, wk) in w.iter_mut().enumerate().take(full) {
        *wk = u64::from_le_bytes(src[8 * k..8 * k + 8].try_into().expect("8"));
    }
    if rem != 0 {
        w[full] = if B >= 8 {
            // one load of the group's last 8 bytes; drop the `8 − rem` that belong to w_{full−1}
            u64::from_le_bytes(src[B - 8..B].try_into().expect("8")) >> (8 * (8 - rem))
        } else {
            src.iter()
                .enumerate()
                .fold(0, |t, (i, &b)| t | (b as u64) << (8 * i))
        };
    }
    w
}

/// Writes the group words as `B` little-endian bytes (the inverse of [`load_group`]; the bits
/// of `w` beyond `8·B` must be zero, as [`pack8`] leaves them).
#[inline(always)]
fn store_group<const B: usize>(w: &[u64; 8], dst: &mut [u8; B]) {
    let (full, rem) = (B / 8, B % 8);
    for (k, wk) in w.iter().enumerate().take(full) {
        dst[8 * k..8 * k + 8].copy_from_slice(&wk.to_le_bytes());
    }
    if rem != 0 {
        if B >= 8 {
            // one store of the group's last 8 bytes: the top `8 − rem` bytes of w_{full−1}
            // (rewritten unchanged), then the low `rem` bytes of w_full
            let t = (w[full - 1] >> (8 * rem)) | (w[full] << (8 * (8 - rem)));
            dst[B - 8..B].copy_from_slice(&t.to_le_bytes());
        } else {
            for (i, b) in dst.iter_mut().enumerate() {
                *b = (w[0] >> (8 * i)) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The straightforward bytewise packer (the original implementation), as the reference.
    fn ref_pack(vals: &[u64], bits: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut acc: u128 = 0;
        let mut nacc = 0u32;
        for &x in vals {
            acc |= (x as u128) << nacc;
            nacc += bits;
            while nacc >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                nacc -= 8;
            }
        }
        if nacc > 0 {
            out.push(acc as u8);
        }
        out
    }

    /// The straightforward bytewise unpacker with its checks (the original implementation).
    fn ref_unpack(
        src: &[u8],
        bits: u32,
        q: u64,
        count: usize,
    ) -> std::result::Result<Vec<u64>, Unpack> {
        assert_eq!(src.len(), (count * bits as usize).div_ceil(8));
        let mask = (1u128 << bits) - 1;
        let (mut acc, mut nacc, mut it) = (0u128, 0u32, src.iter());
        let mut out = Vec::with_capacity(count);
        for index in 0..count {
            while nacc < bits {
                acc |= (*it.next().unwrap() as u128) << nacc;
                nacc += 8;
            }
            let value = (acc & mask) as u64;
            acc >>= bits;
            nacc -= bits;
            if value >= q {
                return Err(Unpack::Residue { index, value });
            }
            out.push(value);
        }
        if acc != 0 {
            return Err(Unpack::Padding);
        }
        Ok(out)
    }

    /// splitmix64
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// A modulus of exactly `bits` bits and `count` residues below it; the residues come from
    /// three regimes so the top bits (where straddling bugs show) are well exercised.
    fn case(bits: u32, count: usize, seed: u64) -> (u64, Vec<u64>) {
        let mut r = rng(seed);
        let top = 1u64 << (bits - 1);
        let q = match r() % 3 {
            0 => top | low_mask(bits as usize), // 2^bits − 1
            1 => top,                           // 2^(bits−1)
            _ => top | (r() & (top - 1)),
        };
        let vals = (0..count)
            .map(|_| match r() % 4 {
                0 => q - 1,
                1 => 0,
                _ => r() % q,
            })
            .collect();
        (q, vals)
    }

    /// Appends after a prefix, as [`Writer::poly`] does after the header, and strips it.
    fn pack(vals: &[u64], bits: u32) -> Vec<u8> {
        let mut out = vec![0xa5; 3];
        pack_residues(vals, bits, &mut out);
        assert_eq!(out.len(), 3 + packed_len(vals.len(), bits));
        out.split_off(3)
    }

    fn unpack(
        src: &[u8],
        bits: u32,
        q: u64,
        count: usize,
    ) -> std::result::Result<Vec<u64>, Unpack> {
        let mut out = vec![0xdead; 5];
        unpack_residues(src, bits, q, count, &mut out)?;
        assert_eq!(out.len(), 5 + count);
        Ok(out.split_off(5))
    }

    /// Packs, compares with the reference bytes, unpacks; then corrupts a residue and the
    /// padding and checks that both readers refuse them the same way.
    fn check(bits: u32, count: usize, seed: u64) {
        let (q, vals) = case(bits, count, seed);
        let bytes = pack(&vals, bits);
        assert_eq!(bytes, ref_pack(&vals, bits), "bits={bits} count={count}");
        assert_eq!(unpack(&bytes, bits, q, count), Ok(vals.clone()));

        let mut r = rng(!seed);
        if count > 0 {
            // an out-of-range residue somewhere (`q < 2^bits`, so `[q, 2^bits)` is never empty),
            // plus maybe a second one later: the first is reported
            let mut bad = vals.clone();
            let at = (r() % count as u64) as usize;
            let over = q + r() % (low_mask(bits as usize) - q + 1);
            bad[at] = over;
            if r() & 1 == 0 && at + 1 < count {
                bad[count - 1] = low_mask(bits as usize);
            }
            let bb = ref_pack(&bad, bits);
            let got = unpack(&bb, bits, q, count);
            assert_eq!(got, ref_unpack(&bb, bits, q, count));
            assert_eq!(
                got,
                Err(Unpack::Residue {
                    index: at,
                    value: over
                })
            );
        }
        let used = count * bits as usize % 8;
        if used != 0 {
            let mut padded = bytes.clone();
            let pad_bit = used + (r() % (8 - used as u64)) as usize;
            *padded.last_mut().unwrap() |= 1 << pad_bit;
            assert_eq!(unpack(&padded, bits, q, count), Err(Unpack::Padding));
            assert_eq!(ref_unpack(&padded, bits, q, count), Err(Unpack::Padding));
        }
    }

    #[test]
    fn every_width_and_short_length_matches_the_reference() {
        for bits in 1..=64 {
            for count in (0..=40).chain([63, 64, 65, 1000, 8192]) {
                check(bits, count, bits as u64 * 1_000_003 + count as u64);
            }
        }
    }

    /// The scalar groups, which `unpack_residues` leaves to the tail on a CPU with AVX-512,
    /// against the reference at every width (values and the first offender's index).
    #[test]
    fn scalar_groups_match_the_reference() {
        for bits in 1..=64u32 {
            for count in [8usize, 24, 1000] {
                let (q, mut vals) = case(bits, count, bits as u64 * 7 + count as u64);
                let bytes = ref_pack(&vals, bits);
                let mut out = Vec::new();
                by_width!(bits, unpack_fixed(&bytes, q, count, 0, &mut out)).unwrap();
                assert_eq!(out, vals, "bits={bits} count={count}");
                vals[count / 2 + 1] = low_mask(bits as usize);
                let bad = ref_pack(&vals, bits);
                let got = by_width!(bits, unpack_fixed(&bad, q, count, 0, &mut Vec::new()));
                let want = ref_unpack(&bad, bits, q, count).map(|_| ());
                assert_eq!(got, want, "bits={bits} count={count}: the offender");
            }
        }
    }

    #[test]
    fn high_bits_are_dropped_not_spilled() {
        // values at or above 2^bits cannot occur (residues are below q), but must not corrupt
        // their neighbours if they did
        for bits in 1..64 {
            let vals = [u64::MAX, 0, u64::MAX, 0, 0, 1, 0, u64::MAX, 0, 3];
            let masked: Vec<u64> = vals.iter().map(|&x| x & low_mask(bits as usize)).collect();
            assert_eq!(pack(&vals, bits), ref_pack(&masked, bits));
        }
    }

    proptest! {
        #[test]
        fn random_residues_round_trip(bits in 1u32..=64, count in 0usize..600, seed in any::<u64>()) {
            check(bits, count, seed);
        }
    }
}

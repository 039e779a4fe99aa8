//! Batches of ciphertexts as one message, and the exact wire sizes of messages.
//!
//! Part of the serialization layer of `heinfer-ckks`. A batch is `b"HEBT"`, a u16 version, a
//! u32 count, then per ciphertext a u32 length and the ciphertext in its own validated format
//! ([`super::ciphertext_to_bytes`]). Every ciphertext of a batch shares parameters, level,
//! size and scale (one per tensor element of a batch-axis layout).
//!
//! The sizes let a protocol derive the limit of every message from a public program before
//! any byte arrives: they are exact for the objects [`super`] writes (a ciphertext without
//! seed compression; a seed-compressed one is smaller).

use super::pack::packed_len;
use super::wire::poly_wire_bytes;
use super::{
    ciphertext_check, ciphertext_from_bytes_rounded, ciphertext_narrow_into, ciphertext_to_bytes,
    ciphertext_to_bytes_rounded, rounded_ciphertext_wire_bytes, CiphertextShape, HEADER_BYTES,
    SEED_BYTES,
};
use crate::ciphertext::{Ciphertext, MAX_PARTS};
use crate::error::{CkksError, Result};
use crate::keygen::basis_indices;
use crate::narrow::{narrow_into, NarrowBatch};
use crate::params::CkksParams;
use rayon::prelude::*;

/// Magic of a serialized batch.
pub const BATCH_MAGIC: &[u8; 4] = b"HEBT";
/// Current batch format version.
pub const BATCH_VERSION: u16 = 1;
/// Bytes before the first ciphertext: magic, version, count.
pub const BATCH_HEADER_BYTES: usize = 10;
/// Bytes of a ciphertext after the common header: level (u32), scale (f64), size (u8), seed
/// flag (u8).
const CIPHERTEXT_FIELDS_BYTES: usize = 4 + 8 + 1 + 1;

fn batch_err(reason: impl Into<String>) -> CkksError {
    CkksError::Deserialize {
        what: "ciphertext batch",
        reason: reason.into(),
    }
}

/// Writes a batch's header — magic, version and `count` — into `head`, its first
/// [`BATCH_HEADER_BYTES`] bytes: what [`BatchParts::write_into`] writes first, for writers that
/// fill the ciphertexts' slots themselves (the client's encryption straight to bytes).
///
/// # Panics
/// If `head` is not [`BATCH_HEADER_BYTES`] long (a caller's sizing bug, not an input).
pub fn write_batch_header(head: &mut [u8], count: u32) {
    assert_eq!(head.len(), BATCH_HEADER_BYTES, "a batch header's buffer");
    head[..4].copy_from_slice(BATCH_MAGIC);
    head[4..6].copy_from_slice(&BATCH_VERSION.to_le_bytes());
    head[6..].copy_from_slice(&count.to_le_bytes());
}

/// Writes one serialized ciphertext into its slot of a batch: its length (u32), then its
/// bytes. A slot of another length than `4 + bytes.len()` — a ciphertext whose size differs
/// from the one planned — is an error, and nothing is written.
pub fn write_batch_slot(slot: &mut [u8], bytes: &[u8]) -> Result<()> {
    if bytes.len() + 4 != slot.len() {
        return Err(CkksError::InvalidOperand {
            op: "serialize a ciphertext batch",
            reason: format!(
                "a ciphertext took {} bytes, {} were planned",
                bytes.len(),
                slot.len().saturating_sub(4)
            ),
        });
    }
    slot[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    slot[4..].copy_from_slice(bytes);
    Ok(())
}

/// `a · b + c` without overflow, or an error naming `what`.
fn checked(what: &str, a: usize, b: usize, c: usize) -> Result<usize> {
    a.checked_mul(b)
        .and_then(|x| x.checked_add(c))
        .ok_or_else(|| CkksError::InvalidParameters(format!("{what}: the size overflows")))
}

/// Exact length of [`ciphertext_to_bytes`] for a ciphertext of `size` polynomials (2 to 5) at
/// `level`, without seed compression (a fresh secret-key encryption is smaller: its second
/// polynomial travels as a 32-byte seed).
///
/// Fails with [`CkksError::LevelOutOfRange`] above the top level and
/// [`CkksError::InvalidOperand`] for a size outside 2 to [`MAX_PARTS`].
pub fn ciphertext_wire_bytes(params: &CkksParams, level: usize, size: usize) -> Result<usize> {
    if level > params.max_level() {
        return Err(CkksError::LevelOutOfRange {
            level,
            max: params.max_level(),
        });
    }
    if !(2..=MAX_PARTS).contains(&size) {
        return Err(CkksError::InvalidOperand {
            op: "size a ciphertext",
            reason: format!("a ciphertext has 2 to {MAX_PARTS} polynomials, not {size}"),
        });
    }
    let poly = poly_wire_bytes(params, &basis_indices(params, level, false));
    Ok(HEADER_BYTES + CIPHERTEXT_FIELDS_BYTES + size * poly)
}

/// The smallest valid serialized ciphertext of `params` whose polynomial `i` may drop at most
/// `max_drop[i]` bits: seed-compressed at level 0, or — when rounding is allowed — rounded with
/// two polynomials, each at least `max(1, b_0 − max_drop[i])` bits per coefficient (`b_0` the
/// bit length of `q_0`; a higher level's `Q` only has more bits to keep).
fn min_ciphertext_bytes(params: &CkksParams, max_drop: &[u32]) -> usize {
    let n = params.n();
    let bits = 64 - params.q()[0].leading_zeros();
    let seeded = packed_len(n, bits) + SEED_BYTES;
    let rounded = if max_drop.len() >= 2 && max_drop[..2].iter().any(|&j| j > 0) {
        2 + max_drop[..2]
            .iter()
            .map(|&j| packed_len(n, bits.saturating_sub(j).max(1)))
            .sum::<usize>()
    } else {
        usize::MAX
    };
    HEADER_BYTES + CIPHERTEXT_FIELDS_BYTES + seeded.min(rounded)
}

/// Exact length of [`ciphertext_batch_to_bytes`] for `count` ciphertexts of `size`
/// polynomials at `level`, none seed-compressed (an upper bound for seed-compressed ones).
///
/// Fails like [`ciphertext_wire_bytes`], with [`CkksError::InvalidOperand`] for an empty
/// batch, and with [`CkksError::InvalidParameters`] when the size overflows.
pub fn ciphertext_batch_wire_bytes(
    params: &CkksParams,
    count: usize,
    level: usize,
    size: usize,
) -> Result<usize> {
    if count == 0 {
        return Err(CkksError::InvalidOperand {
            op: "size a ciphertext batch",
            reason: "a batch holds at least one ciphertext".into(),
        });
    }
    let one = ciphertext_wire_bytes(params, level, size)?;
    checked("ciphertext batch", count, 4 + one, BATCH_HEADER_BYTES)
}

/// Serializes ciphertexts (in parallel) as one batch message. Fails for an empty batch and
/// for ciphertexts of other parameters.
pub fn ciphertext_batch_to_bytes(params: &CkksParams, cts: &[Ciphertext]) -> Result<Vec<u8>> {
    ciphertext_batch_parts(params, cts, None)?.to_vec()
}

/// [`ciphertext_batch_to_bytes`] with every ciphertext rounded
/// ([`super::ciphertext_to_bytes_rounded`]: polynomial `i` drops `drop[i]` low bits), for
/// ciphertexts that are only going to be decrypted.
pub fn ciphertext_batch_to_bytes_rounded(
    params: &CkksParams,
    cts: &[Ciphertext],
    drop: &[u32],
) -> Result<Vec<u8>> {
    ciphertext_batch_parts(params, cts, Some(drop))?.to_vec()
}

/// A batch sized but not yet written: its [`len`](Self::len) is known before any ciphertext
/// is serialized, so a caller writes it straight into a buffer it sizes itself (the
/// protocol's message, after its header). [`write_into`](Self::write_into) serializes the
/// ciphertexts in parallel, each into a buffer of its own that is freed (and reused by the
/// allocator) before the next, then copied to its place: no second copy of the whole batch
/// is ever alive. [`write_into`](Self::write_into) and [`to_vec`](Self::to_vec) give the
/// bytes of [`ciphertext_batch_to_bytes`] (or its rounded form).
pub struct BatchParts<'a> {
    params: &'a CkksParams,
    cts: &'a [Ciphertext],
    drop: Option<&'a [u32]>,
    /// Serialized length of each ciphertext.
    sizes: Vec<usize>,
}

/// Serialized length of `ct` as [`ciphertext_to_bytes`] (`drop` none or all zeros) or
/// [`ciphertext_to_bytes_rounded`] writes it (drops the latter refuses give the length it
/// would have; writing then fails).
fn serialized_len(params: &CkksParams, ct: &Ciphertext, drop: Option<&[u32]>) -> Result<usize> {
    let size = ct.parts.len();
    match drop {
        Some(d) if !(d.len() == size && d.iter().all(|&j| j == 0)) => {
            rounded_ciphertext_wire_bytes(params, ct.level, size, d)
        }
        _ => {
            let poly = poly_wire_bytes(params, &basis_indices(params, ct.level, false));
            let polys = match (&ct.seed, size) {
                (Some(_), 2) => poly + SEED_BYTES,
                _ => size * poly,
            };
            Ok(HEADER_BYTES + CIPHERTEXT_FIELDS_BYTES + polys)
        }
    }
}

/// Sizes every ciphertext of a batch for serialization (rounded with `drop` when given, see
/// [`ciphertext_batch_to_bytes_rounded`]). Fails for an empty batch, more ciphertexts than
/// the format counts and ciphertexts of other parameters; a rounding the parameters refuse
/// fails when written.
pub fn ciphertext_batch_parts<'a>(
    params: &'a CkksParams,
    cts: &'a [Ciphertext],
    drop: Option<&'a [u32]>,
) -> Result<BatchParts<'a>> {
    if cts.is_empty() {
        return Err(CkksError::InvalidOperand {
            op: "serialize a ciphertext batch",
            reason: "the batch is empty".into(),
        });
    }
    if u32::try_from(cts.len()).is_err() {
        return Err(CkksError::InvalidOperand {
            op: "serialize a ciphertext batch",
            reason: format!("{} ciphertexts exceed the format's u32 count", cts.len()),
        });
    }
    let sizes = cts
        .iter()
        .map(|c| {
            params.check_id(c.params_id)?;
            serialized_len(params, c, drop)
        })
        .collect::<Result<_>>()?;
    Ok(BatchParts {
        params,
        cts,
        drop,
        sizes,
    })
}

impl BatchParts<'_> {
    /// Bytes of the framed batch: header, then each ciphertext with its length prefix.
    pub fn len(&self) -> usize {
        BATCH_HEADER_BYTES + self.sizes.iter().map(|n| 4 + n).sum::<usize>()
    }

    /// Always false: a batch holds at least one ciphertext.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// Writes the framed batch into `out`, which must be exactly [`len`](Self::len) bytes,
    /// every byte of it. Fails as the ciphertexts' serialization does (a rounding the
    /// parameters refuse), leaving `out` partly written.
    ///
    /// # Panics
    /// If `out.len() != self.len()` (a caller's sizing bug, not an input).
    pub fn write_into(&self, out: &mut [u8]) -> Result<()> {
        assert_eq!(
            out.len(),
            self.len(),
            "a batch's buffer must be sized by len()"
        );
        let count = self.sizes.len() as u32; // checked against u32 when built
        let (head, mut rest) = out.split_at_mut(BATCH_HEADER_BYTES);
        write_batch_header(head, count);
        let mut slots = Vec::with_capacity(self.sizes.len());
        for &n in &self.sizes {
            let (slot, tail) = rest.split_at_mut(4 + n);
            slots.push(slot);
            rest = tail;
        }
        slots
            .into_par_iter()
            .zip(self.cts.par_iter())
            .try_for_each(|(slot, ct)| {
                let bytes = match self.drop {
                    Some(d) => ciphertext_to_bytes_rounded(self.params, ct, d)?,
                    None => ciphertext_to_bytes(self.params, ct)?,
                };
                write_batch_slot(slot, &bytes)
            })
    }

    /// The framed batch in a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; self.len()];
        self.write_into(&mut out)?;
        Ok(out)
    }
}

/// Checks a batch's framing — total ≤ `max_bytes`, header, `1 ≤ count ≤ max_count`, the count
/// against the bytes actually present (before anything is allocated for it), every
/// ciphertext's length prefix, no trailing byte — and returns the ciphertexts' byte slices.
fn batch_slices<'a>(
    params: &CkksParams,
    bytes: &'a [u8],
    max_bytes: usize,
    max_count: usize,
    max_drop: &[u32],
) -> Result<Vec<&'a [u8]>> {
    if bytes.len() > max_bytes {
        return Err(batch_err(format!(
            "{} bytes exceed the limit of {max_bytes}",
            bytes.len()
        )));
    }
    if bytes.len() < BATCH_HEADER_BYTES || &bytes[..4] != BATCH_MAGIC {
        return Err(batch_err("bad magic (not a heinfer ciphertext batch)"));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != BATCH_VERSION {
        return Err(batch_err(format!(
            "version {version}, this build reads {BATCH_VERSION}"
        )));
    }
    let count = u32::from_le_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
    if count == 0 || count > max_count {
        return Err(batch_err(format!(
            "{count} ciphertexts (allowed 1..={max_count})"
        )));
    }
    // every ciphertext takes its length prefix and at least the smallest valid body
    let room = (bytes.len() - BATCH_HEADER_BYTES) / (4 + min_ciphertext_bytes(params, max_drop));
    if count > room {
        return Err(batch_err(format!(
            "{count} ciphertexts cannot fit in {} bytes (at most {room})",
            bytes.len()
        )));
    }
    let mut slices = Vec::with_capacity(count);
    let mut pos = BATCH_HEADER_BYTES;
    for i in 0..count {
        let len_bytes = bytes
            .get(pos..pos + 4)
            .ok_or_else(|| batch_err(format!("truncated before ciphertext {i}")))?;
        let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        let end = (pos + 4).saturating_add(len as usize);
        let body = bytes
            .get(pos + 4..end)
            .ok_or_else(|| batch_err(format!("ciphertext {i} is truncated")))?;
        slices.push(body);
        pos = end;
    }
    if pos != bytes.len() {
        return Err(batch_err(format!("{} trailing bytes", bytes.len() - pos)));
    }
    Ok(slices)
}

/// Decodes and validates a batch: total ≤ `max_bytes`, header, `1 ≤ count ≤ max_count`, the
/// count against the bytes actually present (before anything is allocated for it), every
/// ciphertext (decoded in parallel, each fully validated) and that all share level, size and
/// scale. Every failure is [`CkksError::Deserialize`].
pub fn ciphertext_batch_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    max_count: usize,
) -> Result<Vec<Ciphertext>> {
    ciphertext_batch_from_bytes_rounded(params, bytes, max_bytes, max_count, &[])
}

/// [`ciphertext_batch_from_bytes`] accepting rounded ciphertexts whose polynomial `i` drops at
/// most `max_drop[i]` low bits (see [`super::ciphertext_from_bytes_rounded`]; an empty
/// `max_drop` accepts none).
pub fn ciphertext_batch_from_bytes_rounded(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    max_count: usize,
    max_drop: &[u32],
) -> Result<Vec<Ciphertext>> {
    let slices = batch_slices(params, bytes, max_bytes, max_count, max_drop)?;
    decode_slices(params, &slices, max_bytes, max_drop, None)
}

/// Decodes every ciphertext of `slices` (in parallel; the first one is `first` when given,
/// already decoded) and checks that they share level, size and scale.
fn decode_slices(
    params: &CkksParams,
    slices: &[&[u8]],
    max_bytes: usize,
    max_drop: &[u32],
    first: Option<Ciphertext>,
) -> Result<Vec<Ciphertext>> {
    let rest: Vec<Ciphertext> = slices[usize::from(first.is_some())..]
        .par_iter()
        .map(|s| ciphertext_from_bytes_rounded(params, s, max_bytes, max_drop))
        .collect::<Result<_>>()?;
    let cts: Vec<Ciphertext> = first.into_iter().chain(rest).collect();
    check_uniform(cts.iter().map(|c| (c.level(), c.size(), c.scale()))).map_err(batch_err)?;
    Ok(cts)
}

/// A decoded batch: its ciphertexts, or the same residues in 32-bit words.
#[derive(Debug)]
pub enum DecodedBatch {
    /// Ciphertexts in 64-bit words.
    Wide(Vec<Ciphertext>),
    /// Two-part ciphertexts whose level's primes are all below `2^32`, in 32-bit words.
    Narrow(NarrowBatch),
}

/// [`ciphertext_batch_from_bytes`] keeping the residues in 32-bit words ([`NarrowBatch`])
/// when the ciphertexts allow it — two parts, every prime of their level below `2^32` —
/// and as ciphertexts otherwise. The same checks and errors; each ciphertext is decoded as
/// usual, then copied into its 32-bit words while it is still in cache.
pub fn ciphertext_batch_from_bytes_narrow(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    max_count: usize,
) -> Result<DecodedBatch> {
    let slices = batch_slices(params, bytes, max_bytes, max_count, &[])?;
    let first = ciphertext_from_bytes_rounded(params, slices[0], max_bytes, &[])?;
    let shape = |c: &Ciphertext| (c.level(), c.size(), c.scale());
    let head = shape(&first);
    if head.1 != 2 || !NarrowBatch::fits(params, head.0) {
        return decode_slices(params, &slices, max_bytes, &[], Some(first)).map(DecodedBatch::Wide);
    }
    let out = NarrowBatch::fill(params, slices.len(), head.0, head.2, |scratch, k, slot| {
        if k == 0 {
            narrow_into(&first, slot);
            return Ok(first.seed);
        }
        ciphertext_narrow_into(params, slices[k], max_bytes, (k, head), slot, scratch)
    })?;
    Ok(DecodedBatch::Narrow(out))
}

/// Validates a batch exactly as [`ciphertext_batch_from_bytes`] does (every check, every
/// residue; see [`super::ciphertext_check`]) without building the ciphertexts, and returns
/// their count and common shape: what a party that forwards the bytes, unchanged, to the
/// process that decodes them needs to know (about a third of the decoding's cost for
/// seed-compressed ciphertexts, which are not expanded). Fails as decoding would.
pub fn ciphertext_batch_check(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    max_count: usize,
) -> Result<(usize, CiphertextShape)> {
    let slices = batch_slices(params, bytes, max_bytes, max_count, &[])?;
    let shapes: Vec<CiphertextShape> = slices
        .par_chunks(64)
        .map(|chunk| {
            let mut scratch = Vec::new();
            chunk
                .iter()
                .map(|s| ciphertext_check(params, s, max_bytes, &mut scratch))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    check_uniform(shapes.iter().map(|s| (s.level, s.size, s.scale))).map_err(batch_err)?;
    Ok((shapes.len(), shapes[0]))
}

/// Checks that every ciphertext (given as its level, size and scale) shares the first one's
/// level, size and scale (relative difference at most `1e-9`); the error names the first
/// that does not.
pub fn check_uniform(
    shapes: impl IntoIterator<Item = (usize, usize, f64)>,
) -> std::result::Result<(), String> {
    let mut it = shapes.into_iter();
    let Some(f) = it.next() else {
        return Ok(());
    };
    match it.enumerate().find_map(|(i, c)| differs(i + 1, c, f)) {
        Some(m) => Err(m),
        None => Ok(()),
    }
}

/// The message of [`check_uniform`] when ciphertext `k` (shape `c`) differs from ciphertext 0
/// (shape `f`); `None` when it does not.
pub(super) fn differs(k: usize, c: (usize, usize, f64), f: (usize, usize, f64)) -> Option<String> {
    (c.0 != f.0 || c.1 != f.1 || ((c.2 - f.2) / f.2).abs() > 1e-9).then(|| {
        format!(
            "ciphertext {k} differs from ciphertext 0 in level, size or scale \
             ({} {} {:e} vs {} {} {:e})",
            c.0, c.1, c.2, f.0, f.1, f.2
        )
    })
}

/// Exact length of [`super::relin_key_to_bytes`]: header, digit count, then per digit `b`
/// over `Q ∪ P` and the seed of `a`. Fails for parameters without special primes (no
/// relinearization key exists).
pub fn relin_key_wire_bytes(params: &CkksParams) -> Result<usize> {
    Ok(HEADER_BYTES + switching_key_wire_bytes(params)?)
}

/// Exact length of [`super::galois_keys_to_bytes`] for `count` keys (each: element, digit
/// count, digits). Fails for parameters without special primes and for more keys than
/// there are non-identity Galois elements (`N − 1`).
pub fn galois_keys_wire_bytes(params: &CkksParams, count: usize) -> Result<usize> {
    if count >= params.n() {
        return Err(CkksError::InvalidOperand {
            op: "size Galois keys",
            reason: format!(
                "{count} keys: a ring of degree {} has {} non-identity Galois elements",
                params.n(),
                params.n() - 1
            ),
        });
    }
    let one = 8 + switching_key_wire_bytes(params)?;
    checked("Galois keys", count, one, HEADER_BYTES + 4)
}

/// One switching key without header: digit count (u32) and `β` × (`b`, seed).
pub(super) fn switching_key_wire_bytes(params: &CkksParams) -> Result<usize> {
    if params.p().is_empty() {
        return Err(CkksError::InvalidParameters(
            "these parameters have no special primes, hence no key-switching keys".into(),
        ));
    }
    let digit =
        poly_wire_bytes(params, &basis_indices(params, params.max_level(), true)) + SEED_BYTES;
    Ok(4 + params.beta() * digit)
}

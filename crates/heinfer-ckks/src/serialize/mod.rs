//! Versioned, validated binary serialization of every engine object.
//!
//! Layout (little-endian): a 16-byte header — magic `b"HEIN"`, format version (u16), object
//! kind (u8), flags (u8), parameter-set id (u64) — then the payload. Residues are bit-packed at
//! the width of their prime (a 40-bit limb takes 40 bits per coefficient, not 64). A fresh
//! secret-key ciphertext and every key store their uniform half as a 32-byte seed.
//!
//! Decoding never trusts its input: it checks the size limit, header, version, kind,
//! parameter id, every count against the parameters, that every residue is below its
//! modulus, and that no bytes are left over. Any failure is [`CkksError::Deserialize`].

use crate::ciphertext::{check_scale, Ciphertext, Plaintext, MAX_PARTS};
use crate::error::{CkksError, Result};
use crate::keygen::{basis_indices, expand_uniform};
use crate::narrow::narrow_words;
use crate::params::{CkksParams, CkksParamsLiteral};
use crate::security::SecurityLevel;
use heinfer_math::sampler::{Sampler, Seed};
use std::mem::MaybeUninit;

mod batch;
mod keys;
mod pack;
#[cfg(target_arch = "x86_64")]
mod pack_avx512;
mod rounded;
mod wire;

pub use batch::{
    check_uniform, ciphertext_batch_check, ciphertext_batch_from_bytes,
    ciphertext_batch_from_bytes_narrow, ciphertext_batch_from_bytes_rounded,
    ciphertext_batch_parts, ciphertext_batch_to_bytes, ciphertext_batch_to_bytes_rounded,
    ciphertext_batch_wire_bytes, ciphertext_wire_bytes, galois_keys_wire_bytes,
    relin_key_wire_bytes, write_batch_header, write_batch_slot, BatchParts, DecodedBatch,
    BATCH_HEADER_BYTES, BATCH_MAGIC, BATCH_VERSION,
};
pub use keys::{
    fresh_galois_keys_bytes, fresh_galois_keys_into, fresh_galois_keys_len, galois_key_from_bytes,
    galois_key_to_bytes, galois_keys_from_bytes, galois_keys_to_bytes, public_key_from_bytes,
    public_key_to_bytes, relin_key_from_bytes, relin_key_to_bytes, secret_key_from_bytes,
    secret_key_to_bytes,
};
pub use rounded::{
    ciphertext_to_bytes_rounded, rounded_ciphertext_wire_bytes, rounded_q_bits, rounding_drop_bits,
    MAX_ROUNDED_Q_BITS,
};
use wire::{open, open_for, poly_wire_bytes, Reader, Writer};

/// Format magic.
pub const MAGIC: &[u8; 4] = b"HEIN";
/// Current format version. Version 2 expands seeds with AES-256-CTR
/// ([`heinfer_math::prg`]); version 1 expanded them with ChaCha20, so its seed-compressed
/// objects would decode to other polynomials: it is refused, with that reason.
pub const FORMAT_VERSION: u16 = 2;
/// Default decoding size limit (1 GiB).
pub const DEFAULT_MAX_BYTES: usize = 1 << 30;
/// Bytes of the common header: magic, version, kind, flags, parameter id.
pub const HEADER_BYTES: usize = 16;
/// Bytes of the seed that stands for a uniform polynomial.
pub const SEED_BYTES: usize = 32;

/// Kinds of serialized objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// [`CkksParamsLiteral`] (header id = the id the literal builds to).
    Params = 1,
    /// [`Plaintext`].
    Plaintext = 2,
    /// [`Ciphertext`].
    Ciphertext = 3,
    /// [`SecretKey`](crate::keys::SecretKey).
    SecretKey = 4,
    /// [`PublicKey`](crate::keys::PublicKey).
    PublicKey = 5,
    /// [`RelinKey`](crate::keys::RelinKey).
    RelinKey = 6,
    /// [`GaloisKey`](crate::keys::GaloisKey).
    GaloisKey = 7,
    /// [`GaloisKeys`](crate::keys::GaloisKeys).
    GaloisKeys = 8,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Params => "parameters",
            Kind::Plaintext => "plaintext",
            Kind::Ciphertext => "ciphertext",
            Kind::SecretKey => "secret key",
            Kind::PublicKey => "public key",
            Kind::RelinKey => "relinearization key",
            Kind::GaloisKey => "Galois key",
            Kind::GaloisKeys => "Galois keys",
        }
    }
}

/// Serializes a parameter literal (its header carries the id it builds to).
pub fn params_to_bytes(params: &CkksParams) -> Vec<u8> {
    let lit = params.literal();
    let mut w = Writer::new(Kind::Params, params.id());
    w.u32(lit.log_n);
    w.u32(lit.log_q.len() as u32);
    lit.log_q.iter().for_each(|&b| w.u8(b as u8));
    w.u32(lit.log_p.len() as u32);
    lit.log_p.iter().for_each(|&b| w.u8(b as u8));
    w.u32(lit.log_scale);
    w.u32(lit.digits.unwrap_or(0) as u32);
    w.u32(lit.security.bits());
    w.buf
}

/// Decodes and *checks* parameters (the security table applies; the insecure test level is
/// accepted only when `allow_insecure`).
pub fn params_from_bytes(bytes: &[u8], allow_insecure: bool) -> Result<CkksParams> {
    let (mut r, id) = open(bytes, Kind::Params, 1 << 16)?;
    let log_n = r.u32()?;
    let nq = r.u32()? as usize;
    if nq == 0 || nq > 64 {
        return Err(r.err(format!("{nq} Q primes")));
    }
    let log_q = (0..nq)
        .map(|_| r.u8().map(u32::from))
        .collect::<Result<Vec<_>>>()?;
    let np = r.u32()? as usize;
    if np > 64 {
        return Err(r.err(format!("{np} P primes")));
    }
    let log_p = (0..np)
        .map(|_| r.u8().map(u32::from))
        .collect::<Result<Vec<_>>>()?;
    let log_scale = r.u32()?;
    let digits = r.u32()? as usize;
    let sec = r.u32()?;
    r.finish()?;
    // 0 encodes the insecure test level on the wire; user-facing parsing never accepts it
    let security = match sec {
        0 => SecurityLevel::InsecureTestOnly,
        b => SecurityLevel::from_bits(b)
            .ok_or_else(|| r.err(format!("unknown security level {b}")))?,
    };
    if security == SecurityLevel::InsecureTestOnly && !allow_insecure {
        return Err(r.err("these parameters are insecure test parameters"));
    }
    let lit = CkksParamsLiteral {
        log_n,
        log_q,
        log_p,
        log_scale,
        digits: (digits > 0).then_some(digits),
        security,
    };
    match CkksParams::build_expecting(lit, Some(id)) {
        Err(CkksError::ParamsMismatch { expected, found }) => Err(r.err(format!(
            "header id {expected:#018x} does not match the parameters it describes ({found:#018x})"
        ))),
        other => other,
    }
}

/// Serializes a plaintext.
pub fn plaintext_to_bytes(params: &CkksParams, pt: &Plaintext) -> Result<Vec<u8>> {
    params.check_id(pt.params_id)?;
    let mut w = Writer::new(Kind::Plaintext, pt.params_id);
    let extended = pt.poly.limbs() > pt.level + 1;
    w.u32(pt.level as u32);
    w.u8(extended as u8);
    w.f64(pt.scale);
    w.poly(params, &pt.poly, &basis_indices(params, pt.level, extended));
    Ok(w.buf)
}

/// Decodes a plaintext for `params`.
pub fn plaintext_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<Plaintext> {
    let mut r = open_for(params, bytes, Kind::Plaintext, max_bytes)?;
    let level = read_level(&mut r, params)?;
    let extended = match r.u8()? {
        0 => false,
        1 => true,
        v => return Err(r.err(format!("bad extended flag {v}"))),
    };
    let scale = read_scale(&mut r)?;
    let poly = r.poly(params, &basis_indices(params, level, extended))?;
    r.finish()?;
    Ok(Plaintext {
        params_id: params.id(),
        poly,
        level,
        scale,
    })
}

fn read_level(r: &mut Reader<'_>, params: &CkksParams) -> Result<usize> {
    let level = r.u32()? as usize;
    if level > params.max_level() {
        return Err(r.err(format!(
            "level {level} exceeds the top level {}",
            params.max_level()
        )));
    }
    Ok(level)
}

fn read_scale(r: &mut Reader<'_>) -> Result<f64> {
    let scale = r.f64()?;
    check_scale(scale).map_err(|e| r.err(e.to_string()))?;
    Ok(scale)
}

/// Serializes a ciphertext (seed-compressed when it is a fresh secret-key encryption).
pub fn ciphertext_to_bytes(params: &CkksParams, ct: &Ciphertext) -> Result<Vec<u8>> {
    params.check_id(ct.params_id)?;
    let idx = basis_indices(params, ct.level, false);
    let polys = match (&ct.seed, ct.parts.len()) {
        (Some(_), 2) => poly_wire_bytes(params, &idx) + SEED_BYTES,
        (_, size) => size * poly_wire_bytes(params, &idx),
    };
    // header, level, scale, size, seed flag
    let capacity = HEADER_BYTES + 4 + 8 + 1 + 1 + polys;
    let mut w = Writer::with_capacity(Kind::Ciphertext, ct.params_id, capacity);
    w.u32(ct.level as u32);
    w.f64(ct.scale);
    w.u8(ct.parts.len() as u8);
    match (&ct.seed, ct.parts.len()) {
        (Some(seed), 2) => {
            w.u8(1);
            w.poly(params, &ct.parts[0], &idx);
            w.bytes(seed);
        }
        _ => {
            w.u8(0);
            for p in &ct.parts {
                w.poly(params, p, &idx);
            }
        }
    }
    Ok(w.buf)
}

/// Level, scale and size of a serialized ciphertext, as [`ciphertext_check`] found them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CiphertextShape {
    /// Level (number of `q` primes − 1).
    pub level: usize,
    /// Scale `Δ`.
    pub scale: f64,
    /// Number of polynomials (2 to [`MAX_PARTS`]).
    pub size: usize,
}

/// How a serialized ciphertext's polynomials travel (its seed flag).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Every polynomial's residues.
    Full,
    /// The first of two polynomials, the second as a 32-byte seed.
    Seeded,
    /// Every polynomial rounded (see [`rounded`]).
    Rounded,
}

/// Reads a ciphertext's fields after the header: level, scale, size, the basis of its
/// polynomials and the form they travel in.
fn read_ciphertext_fields(
    r: &mut Reader<'_>,
    params: &CkksParams,
) -> Result<(CiphertextShape, Vec<usize>, Form)> {
    let level = read_level(r, params)?;
    let scale = read_scale(r)?;
    let size = r.u8()? as usize;
    if !(2..=MAX_PARTS).contains(&size) {
        return Err(r.err(format!(
            "ciphertext size {size} (expected 2 to {MAX_PARTS})"
        )));
    }
    let form = match r.u8()? {
        1 if size == 2 => Form::Seeded,
        0 => Form::Full,
        rounded::ROUNDED_FLAG => Form::Rounded,
        v => return Err(r.err(format!("bad seed flag {v}"))),
    };
    let shape = CiphertextShape { level, scale, size };
    Ok((shape, basis_indices(params, level, false), form))
}

/// Decodes a ciphertext for `params`. A rounded ciphertext (see
/// [`ciphertext_to_bytes_rounded`]) is refused: use [`ciphertext_from_bytes_rounded`] where
/// one is expected.
pub fn ciphertext_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<Ciphertext> {
    ciphertext_from_bytes_rounded(params, bytes, max_bytes, &[])
}

/// Decodes a ciphertext for `params`, accepting a rounded one whose polynomial `i` drops at
/// most `max_drop[i]` low bits (an empty `max_drop` accepts none). A rounded ciphertext comes
/// back in the ordinary form, its coefficients `v·2^j + 2^{j−1}` (see [`rounding_drop_bits`]).
pub fn ciphertext_from_bytes_rounded(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    max_drop: &[u32],
) -> Result<Ciphertext> {
    let mut r = open_for(params, bytes, Kind::Ciphertext, max_bytes)?;
    let (shape, idx, form) = read_ciphertext_fields(&mut r, params)?;
    let (parts, seed) = match form {
        Form::Seeded => {
            let c0 = r.poly(params, &idx)?;
            let seed = r.seed()?;
            (vec![c0, expand_uniform(params, seed, &idx)], Some(seed))
        }
        Form::Full => {
            let parts = (0..shape.size)
                .map(|_| r.poly(params, &idx))
                .collect::<Result<Vec<_>>>()?;
            (parts, None)
        }
        Form::Rounded => (
            rounded::read_rounded(&mut r, params, shape.level, shape.size, max_drop, true)?,
            None,
        ),
    };
    r.finish()?;
    Ok(Ciphertext {
        params_id: params.id(),
        parts,
        level: shape.level,
        scale: shape.scale,
        seed,
    })
}

/// Decodes a two-part ciphertext (seed-compressed or whole; a rounded one is refused, as by
/// [`ciphertext_from_bytes`]) straight into the 32-bit words `slot` — `c_0`'s limbs, then
/// `c_1`'s, every word written on success — with the checks of [`ciphertext_from_bytes`].
/// Its level, size and scale must be `want` (else the error names ciphertext `k`, as
/// [`check_uniform`] would), and every prime of the level below `2^32` (the caller's
/// [`NarrowBatch`](crate::NarrowBatch) checked it). `scratch` holds one part's 64-bit
/// residues in between (reused by the caller); a seed expands limb by limb, the stream
/// [`ciphertext_from_bytes`] reads. Returns the seed, if any.
pub(crate) fn ciphertext_narrow_into(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    (k, want): (usize, (usize, usize, f64)),
    slot: &mut [MaybeUninit<u32>],
    scratch: &mut Vec<u64>,
) -> Result<Option<Seed>> {
    let mut r = open_for(params, bytes, Kind::Ciphertext, max_bytes)?;
    let (shape, idx, form) = read_ciphertext_fields(&mut r, params)?;
    if matches!(form, Form::Rounded) {
        // refused with the reason decoding gives
        let refused = ciphertext_from_bytes(params, bytes, max_bytes).err();
        return Err(refused.unwrap_or_else(|| CkksError::Deserialize {
            what: "ciphertext",
            reason: "a rounded ciphertext where none is accepted".into(),
        }));
    }
    if let Some(m) = batch::differs(k, (shape.level, shape.size, shape.scale), want) {
        return Err(CkksError::Deserialize {
            what: "ciphertext batch",
            reason: m,
        });
    }
    let n = params.n();
    let (s0, s1) = slot.split_at_mut(slot.len() / 2);
    assert!(
        s0.len() == n * idx.len() && s1.len() == s0.len(),
        "a slot holds two parts"
    );
    scratch.clear();
    r.poly_into(params, &idx, scratch)?;
    narrow_words(scratch, s0);
    let seed = match form {
        Form::Seeded => {
            let seed = r.seed()?;
            let mut sampler = Sampler::from_seed(seed);
            let inner = params.inner();
            scratch.resize(n, 0);
            for (&mi, dst) in idx.iter().zip(s1.chunks_exact_mut(n)) {
                sampler.uniform_into(scratch, &inner.moduli[mi]);
                narrow_words(scratch, dst);
            }
            Some(seed)
        }
        _ => {
            scratch.clear();
            r.poly_into(params, &idx, scratch)?;
            narrow_words(scratch, s1);
            None
        }
    };
    r.finish()?;
    Ok(seed)
}

/// Validates a serialized ciphertext exactly as [`ciphertext_from_bytes`] does — header,
/// parameters, level, scale, size, every residue below its modulus, no trailing byte — but
/// builds nothing: the residues are unpacked into `scratch` (reused by the caller) and a
/// seed is not expanded (any seed expands to a valid polynomial). For a party that forwards
/// the bytes to the process that will decode them (a cluster's front end).
pub fn ciphertext_check(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
    scratch: &mut Vec<u64>,
) -> Result<CiphertextShape> {
    let mut r = open_for(params, bytes, Kind::Ciphertext, max_bytes)?;
    let (shape, idx, form) = read_ciphertext_fields(&mut r, params)?;
    match form {
        Form::Rounded => {
            rounded::read_rounded(&mut r, params, shape.level, shape.size, &[], false)?;
        }
        Form::Seeded | Form::Full => {
            let polys = if form == Form::Seeded { 1 } else { shape.size };
            for _ in 0..polys {
                scratch.clear();
                r.poly_into(params, &idx, scratch)?;
            }
            if form == Form::Seeded {
                r.seed()?;
            }
        }
    }
    r.finish()?;
    Ok(shape)
}

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

use crate::ciphertext::{check_scale, Ciphertext, Plaintext};
use crate::error::{CkksError, Result};
use crate::keygen::{
    basis_indices, expand_uniform, inverse_galois_element, permute_poly, KeyGenerator,
};
use crate::keys::{GaloisKey, GaloisKeys, PublicKey, RelinKey, SecretKey, SwitchingKey};
use crate::params::{CkksParams, CkksParamsLiteral};
use crate::security::SecurityLevel;
use heinfer_math::automorphism::check_galois_element;

mod batch;
mod pack;
mod rounded;
mod wire;

pub use batch::{
    check_uniform, ciphertext_batch_check, ciphertext_batch_from_bytes,
    ciphertext_batch_from_bytes_rounded, ciphertext_batch_parts, ciphertext_batch_to_bytes,
    ciphertext_batch_to_bytes_rounded, ciphertext_batch_wire_bytes, ciphertext_wire_bytes,
    galois_keys_wire_bytes, relin_key_wire_bytes, BatchParts, BATCH_HEADER_BYTES, BATCH_MAGIC,
    BATCH_VERSION,
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
    /// [`SecretKey`].
    SecretKey = 4,
    /// [`PublicKey`].
    PublicKey = 5,
    /// [`RelinKey`].
    RelinKey = 6,
    /// [`GaloisKey`].
    GaloisKey = 7,
    /// [`GaloisKeys`].
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
    /// Number of polynomials (2 or 3).
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
    if !(2..=3).contains(&size) {
        return Err(r.err(format!("ciphertext size {size} (expected 2 or 3)")));
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

/// Serializes the secret key (2 bits per ternary coefficient). Client-side only.
///
/// The buffer is allocated at its final size, so no reallocation leaves a partial copy of the
/// key behind; the caller should wipe the result when done (e.g. `zeroize::Zeroizing`).
pub fn secret_key_to_bytes(sk: &SecretKey) -> Vec<u8> {
    let mut w = Writer::new(Kind::SecretKey, sk.params_id);
    w.buf.reserve_exact(sk.coeffs.len().div_ceil(4));
    for chunk in sk.coeffs.chunks(4) {
        let mut b = 0u8;
        for (k, &c) in chunk.iter().enumerate() {
            let code = match c {
                0 => 0u8,
                1 => 1,
                _ => 2,
            };
            b |= code << (2 * k);
        }
        w.u8(b);
    }
    w.buf
}

/// Decodes a secret key for `params`.
pub fn secret_key_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<SecretKey> {
    let mut r = open_for(params, bytes, Kind::SecretKey, max_bytes)?;
    let n = params.n();
    let src = r.take(n / 4)?;
    // the secret: zeroed if decoding fails half-way (on success it moves into the key)
    let mut coeffs = zeroize::Zeroizing::new(Vec::with_capacity(n));
    for &b in src {
        for k in 0..4 {
            coeffs.push(match (b >> (2 * k)) & 3 {
                0 => 0i8,
                1 => 1,
                2 => -1,
                _ => return Err(r.err("invalid ternary code 3")),
            });
        }
    }
    r.finish()?;
    Ok(
        KeyGenerator::from_ternary_coeffs(params, std::mem::take(&mut *coeffs))
            .secret_key()
            .clone(),
    )
}

/// Serializes a public key as `(b, seed)`.
pub fn public_key_to_bytes(params: &CkksParams, pk: &PublicKey) -> Result<Vec<u8>> {
    params.check_id(pk.params_id)?;
    let mut w = Writer::new(Kind::PublicKey, pk.params_id);
    w.poly(
        params,
        &pk.b,
        &basis_indices(params, params.max_level(), true),
    );
    w.bytes(&pk.seed);
    Ok(w.buf)
}

/// Decodes a public key for `params`.
pub fn public_key_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<PublicKey> {
    let mut r = open_for(params, bytes, Kind::PublicKey, max_bytes)?;
    let idx = basis_indices(params, params.max_level(), true);
    let b = r.poly(params, &idx)?;
    let seed = r.seed()?;
    r.finish()?;
    Ok(PublicKey {
        params_id: params.id(),
        b,
        a: expand_uniform(params, seed, &idx),
        seed,
    })
}

fn write_switching_key(w: &mut Writer, params: &CkksParams, k: &SwitchingKey) {
    let idx = basis_indices(params, params.max_level(), true);
    w.u32(k.b.len() as u32);
    for (b, seed) in k.b.iter().zip(&k.seeds) {
        w.poly(params, b, &idx);
        w.bytes(seed);
    }
}

/// Reads a switching key; `permute` is the table applied to each expanded `a` (Galois keys).
fn read_switching_key(
    r: &mut Reader<'_>,
    params: &CkksParams,
    permute: Option<&[u32]>,
) -> Result<SwitchingKey> {
    let idx = basis_indices(params, params.max_level(), true);
    let digits = r.u32()? as usize;
    if digits != params.beta() {
        return Err(r.err(format!(
            "{digits} key-switching digits, these parameters use {}",
            params.beta()
        )));
    }
    let (mut bs, mut as_, mut seeds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..digits {
        bs.push(r.poly(params, &idx)?);
        let seed = r.seed()?;
        let mut a = expand_uniform(params, seed, &idx);
        if let Some(t) = permute {
            permute_poly(&mut a, t);
        }
        as_.push(a);
        seeds.push(seed);
    }
    Ok(SwitchingKey {
        params_id: params.id(),
        b: bs,
        a: as_,
        seeds,
    })
}

/// Serializes a relinearization key.
pub fn relin_key_to_bytes(params: &CkksParams, k: &RelinKey) -> Result<Vec<u8>> {
    params.check_id(k.0.params_id)?;
    let mut w = Writer::new(Kind::RelinKey, k.0.params_id);
    write_switching_key(&mut w, params, &k.0);
    Ok(w.buf)
}

/// Decodes a relinearization key.
pub fn relin_key_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<RelinKey> {
    let mut r = open_for(params, bytes, Kind::RelinKey, max_bytes)?;
    let k = read_switching_key(&mut r, params, None)?;
    r.finish()?;
    Ok(RelinKey(k))
}

fn write_galois_key(w: &mut Writer, params: &CkksParams, k: &GaloisKey) {
    w.u64(k.galois_element);
    write_switching_key(w, params, &k.key);
}

fn read_galois_key(r: &mut Reader<'_>, params: &CkksParams) -> Result<GaloisKey> {
    let g = r.u64()?;
    check_galois_element(g, params.n()).map_err(|e| r.err(e.to_string()))?;
    if g == 1 {
        return Err(r.err("Galois element 1 is the identity"));
    }
    let inv = params.galois_table(inverse_galois_element(g, params.n()))?;
    let key = read_switching_key(r, params, Some(&inv))?;
    Ok(GaloisKey {
        galois_element: g,
        key,
    })
}

/// Serializes one Galois key (`b` is stored pre-permuted, as held in memory).
pub fn galois_key_to_bytes(params: &CkksParams, k: &GaloisKey) -> Result<Vec<u8>> {
    params.check_id(k.key.params_id)?;
    let mut w = Writer::new(Kind::GaloisKey, k.key.params_id);
    write_galois_key(&mut w, params, k);
    Ok(w.buf)
}

/// Decodes one Galois key.
pub fn galois_key_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<GaloisKey> {
    let mut r = open_for(params, bytes, Kind::GaloisKey, max_bytes)?;
    let k = read_galois_key(&mut r, params)?;
    r.finish()?;
    Ok(k)
}

/// Serializes a set of Galois keys.
pub fn galois_keys_to_bytes(params: &CkksParams, keys: &GaloisKeys) -> Result<Vec<u8>> {
    keys.check(params)?;
    let mut w = Writer::new(Kind::GaloisKeys, params.id());
    w.u32(keys.len() as u32);
    for k in keys.keys.values() {
        write_galois_key(&mut w, params, k);
    }
    Ok(w.buf)
}

/// Fresh Galois keys of `kg` for rotations by `steps` (and conjugation), serialized exactly as
/// [`galois_keys_to_bytes`] writes `kg.galois_keys(steps, conjugate)` (same layout and
/// length, other randomness), without holding the set: each key is generated in parallel,
/// written into its place in the output and dropped. A key in memory holds its uniform half
/// expanded (twice its serialized size), so a client that only sends its keys touches a third
/// of the memory it would through `galois_keys` + `galois_keys_to_bytes`.
pub fn fresh_galois_keys_bytes(
    kg: &KeyGenerator,
    steps: &[i64],
    conjugate: bool,
) -> Result<Vec<u8>> {
    let mut out = vec![0u8; fresh_galois_keys_len(kg, steps, conjugate)?];
    fresh_galois_keys_into(kg, steps, conjugate, &mut out)?;
    Ok(out)
}

/// The length of [`fresh_galois_keys_bytes`]`(kg, steps, conjugate)`.
pub fn fresh_galois_keys_len(kg: &KeyGenerator, steps: &[i64], conjugate: bool) -> Result<usize> {
    galois_keys_wire_bytes(kg.params(), kg.galois_elements(steps, conjugate).len())
}

/// [`fresh_galois_keys_bytes`] into `out`, which must be exactly
/// [`fresh_galois_keys_len`] bytes long (a buffer the caller owns, e.g. a Python `bytes`).
pub fn fresh_galois_keys_into(
    kg: &KeyGenerator,
    steps: &[i64],
    conjugate: bool,
    out: &mut [u8],
) -> Result<()> {
    use rayon::prelude::*;
    let params = kg.params();
    let elems = kg.galois_elements(steps, conjugate);
    let one = 8 + batch::switching_key_wire_bytes(params)?;
    let total = galois_keys_wire_bytes(params, elems.len())?;
    let invalid = |reason: String| CkksError::InvalidOperand {
        op: "serialize Galois keys",
        reason,
    };
    if out.len() != total {
        return Err(invalid(format!(
            "{} bytes of room for {total} bytes of keys",
            out.len()
        )));
    }
    let mut w = Writer::new(Kind::GaloisKeys, params.id());
    w.u32(elems.len() as u32);
    let (head, body) = out.split_at_mut(w.buf.len());
    head.copy_from_slice(&w.buf);
    body.par_chunks_mut(one)
        .zip(elems.par_iter())
        .try_for_each(|(dst, &g)| {
            let key = kg.galois_key(g)?;
            let mut kw = Writer {
                buf: Vec::with_capacity(one),
            };
            write_galois_key(&mut kw, params, &key);
            if kw.buf.len() != one {
                return Err(invalid(format!(
                    "a key took {} bytes, expected {one}",
                    kw.buf.len()
                )));
            }
            dst.copy_from_slice(&kw.buf);
            Ok(())
        })
}

/// Decodes a set of Galois keys (duplicates are refused).
pub fn galois_keys_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<GaloisKeys> {
    let mut r = open_for(params, bytes, Kind::GaloisKeys, max_bytes)?;
    let count = r.u32()? as usize;
    if count > params.n() {
        return Err(r.err(format!(
            "{count} keys is more than there are Galois elements"
        )));
    }
    // every key has the same size: refuse a count the bytes cannot hold before any work
    let one = 8 + batch::switching_key_wire_bytes(params)?;
    if count.saturating_mul(one) > r.remaining() {
        return Err(r.err(format!(
            "truncated: {count} keys need {} bytes, {} present",
            count.saturating_mul(one),
            r.remaining()
        )));
    }
    // every key takes exactly `one` bytes: they are parsed in parallel (expanding each `a`
    // from its seed is most of the work), each checked to end where its record ends
    let body = r.take(count * one)?;
    r.finish()?;
    let parsed: Vec<GaloisKey> = {
        use rayon::prelude::*;
        body.par_chunks(one)
            .map(|rec| {
                let mut kr = r.part(rec);
                let k = read_galois_key(&mut kr, params)?;
                kr.finish()?;
                Ok(k)
            })
            .collect::<Result<_>>()?
    };
    // one encoding per key set: every writer lists the keys by increasing Galois element, so
    // anything else (a duplicate, or keys out of order) is refused rather than re-ordered
    let mut keys = GaloisKeys::new();
    let mut last = 0u64;
    for k in parsed {
        if k.galois_element <= last {
            let what = if k.galois_element == last {
                "duplicate key for"
            } else {
                "keys out of order at"
            };
            return Err(r.err(format!(
                "{what} Galois element {} (after {last})",
                k.galois_element
            )));
        }
        last = k.galois_element;
        keys.insert(k);
    }
    Ok(keys)
}

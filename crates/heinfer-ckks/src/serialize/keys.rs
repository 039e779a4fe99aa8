//! Keys: the secret key (client-side only), the public key, and the switching keys
//! (relinearization and Galois), each with its uniform half stored as a seed.
//!
//! Decoding validates as every other object does ([`super`]): header, parameter id, counts,
//! every residue below its modulus, no bytes left over; a key set is parsed in parallel and
//! refused when its Galois elements repeat or are out of order.

use super::batch::{self, galois_keys_wire_bytes};
use super::wire::{open_for, Reader, Writer};
use super::Kind;
use crate::error::{CkksError, Result};
use crate::keygen::{
    basis_indices, expand_uniform, inverse_galois_element, permute_poly, KeyGenerator,
};
use crate::keys::{GaloisKey, GaloisKeys, PublicKey, RelinKey, SecretKey, SwitchingKey};
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::automorphism::check_galois_element;
use heinfer_math::sampler::Seed;

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
    if coeffs.iter().all(|&c| c == 0) {
        // s = 0 makes every encryption transparent: no key generator draws it
        return Err(r.err("an all-zero secret key"));
    }
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
    let b: Vec<RnsPoly> = k.b.iter().map(|p| p.widen()).collect();
    write_digits(w, params, &b, &k.seeds);
}

/// A switching key's digits as the wire carries them: `β`, then each `b_j` and `a_j`'s seed.
fn write_digits(w: &mut Writer, params: &CkksParams, b: &[RnsPoly], seeds: &[Seed]) {
    let idx = basis_indices(params, params.max_level(), true);
    w.u32(b.len() as u32);
    for (b, seed) in b.iter().zip(seeds) {
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
    Ok(SwitchingKey::new(params, bs, as_, seeds))
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
            // the wire's half only: no `a_j` permuted, nothing compacted
            let (b, seeds) = kg.galois_key_wire(g)?;
            let mut kw = Writer {
                buf: Vec::with_capacity(one),
            };
            kw.u64(g);
            write_digits(&mut kw, params, &b, &seeds);
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

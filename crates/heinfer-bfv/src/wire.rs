//! BFV ciphertexts on the wire: the engine's validated ciphertext format (header, version,
//! parameter id, every residue below its modulus; seed-compressed fresh encryptions), plus
//! BFV's own checks on what decodes: the top level and scale 1.

use crate::decrypt::check_ciphertext;
use crate::error::{BfvError, Result};
use crate::params::BfvParams;
use heinfer_ckks::serialize;
use heinfer_ckks::Ciphertext;

/// Serializes a BFV ciphertext.
pub fn ciphertext_to_bytes(params: &BfvParams, ct: &Ciphertext) -> Result<Vec<u8>> {
    check_ciphertext(params, ct, "serialize")?;
    Ok(serialize::ciphertext_to_bytes(params.rlwe(), ct)?)
}

/// Decodes a BFV ciphertext of `params` from at most `max_bytes` bytes; refuses anything else.
pub fn ciphertext_from_bytes(
    params: &BfvParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<Ciphertext> {
    let ct = serialize::ciphertext_from_bytes(params.rlwe(), bytes, max_bytes)?;
    check_ciphertext(params, &ct, "decode").map_err(|e| BfvError::Deserialize {
        what: "BFV ciphertext",
        reason: e.to_string(),
    })?;
    Ok(ct)
}

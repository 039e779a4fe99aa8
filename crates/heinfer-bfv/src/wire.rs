//! BFV ciphertexts on the wire: the engine's validated ciphertext format (header, version,
//! parameter id, every residue below its modulus; seed-compressed fresh encryptions), plus
//! BFV's own checks on what decodes: two parts and scale 1, at the top level or, for a result
//! the server compacted ([`crate::Rerandomizer::rerandomize_compact`]), a lower one (the
//! evaluator refuses those).

use crate::decrypt::check_result;
use crate::error::{BfvError, Result};
use crate::params::BfvParams;
use heinfer_ckks::serialize;
use heinfer_ckks::Ciphertext;

/// Serializes a BFV ciphertext.
pub fn ciphertext_to_bytes(params: &BfvParams, ct: &Ciphertext) -> Result<Vec<u8>> {
    check_result(params, ct, "serialize")?;
    Ok(serialize::ciphertext_to_bytes(params.rlwe(), ct)?)
}

/// Decodes a BFV ciphertext of `params` from at most `max_bytes` bytes; refuses anything else.
pub fn ciphertext_from_bytes(
    params: &BfvParams,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<Ciphertext> {
    let ct = serialize::ciphertext_from_bytes(params.rlwe(), bytes, max_bytes)?;
    check_result(params, &ct, "decode").map_err(|e| BfvError::Deserialize {
        what: "BFV ciphertext",
        reason: e.to_string(),
    })?;
    Ok(ct)
}

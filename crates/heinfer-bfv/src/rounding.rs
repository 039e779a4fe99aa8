//! Rounded results: a flooded, compacted result is only going to be decrypted, so it travels
//! without the low bits of its coefficients.
//!
//! After [`crate::Rerandomizer::rerandomize_compact`] a result at level `ℓ` (modulus `Q_ℓ`,
//! `Δ_ℓ = ⌊Q_ℓ/p⌋`) decrypts with an error of at most
//!
//! ```text
//! E_b = 2^{b+1}·Q_ℓ/Q + N + p + 1        (flooding 2^b over an error below 2^b, then the switch)
//! ```
//!
//! which [`compact_level`] keeps below `Δ_ℓ/2^4`. The engine's rounded form
//! ([`heinfer_ckks::serialize::ciphertext_to_bytes_rounded`]) sends part `i` without `j_i` low
//! bits and adds `δ_i` with `|δ_i| ≤ 2^{j_i−1}` per coefficient; decryption computes
//! `c_0 + c_1·s`, so the error grows by at most `2^{j_0−1} + ‖s‖_1·2^{j_1−1}`, and
//! `‖s‖_1 ≤ N` for the engine's ternary secrets. [`result_drop_bits`] spends what is left
//! below `Δ_ℓ/2^3`, half on each part:
//!
//! ```text
//! R = Δ_ℓ/2^3 − E_b,   2^{j_0−1} ≤ R/2,   N·2^{j_1−1} ≤ R/2,
//! ```
//!
//! so `E_b` plus the rounding stays below `Δ_ℓ/8` (two bits of margin under the `Δ_ℓ/2` at which
//! decryption fails; worst-case bounds throughout, no probability). At the protocol's
//! parameters (N = 2^13, one 50-bit prime left, p ≈ 2^20, flooding 2^113–2^124) that is
//! `j_0 = 26–27`, `j_1 = 13–14`: 23–24 + 36–37 bits per coefficient instead of 50 + 50. Rounding is public post-processing of the
//! flooded ciphertext, so it hides exactly what the ciphertext hides.
//!
//! Both parties derive the bits from the public program (the layer's flooding `b`): the server
//! writes with them ([`result_to_bytes`]), the client refuses a result at another level or
//! rounded beyond them ([`result_from_bytes`]).

use crate::error::{BfvError, Result};
use crate::params::BfvParams;
use heinfer_ckks::serialize;
use heinfer_ckks::Ciphertext;

/// The lowest level `ℓ` at which a ciphertext flooded with `2^b` (and an error below `2^b`
/// before it) still decrypts after switching down: `E_b < Δ_ℓ/2^4` (see the module
/// documentation). The top level when none is lower.
pub fn compact_level(params: &BfvParams, b: u32) -> usize {
    let q = params.rlwe().q();
    let log_q: f64 = q.iter().map(|&x| (x as f64).log2()).sum();
    let log_p = (params.plain_modulus() as f64).log2();
    let mut log_ql = 0.0;
    for (l, &ql) in q.iter().enumerate() {
        log_ql += (ql as f64).log2();
        if error_bound(params, b, log_ql, log_q).log2() <= log_ql - log_p - 4.0 {
            return l;
        }
    }
    params.level()
}

/// `E_b` at a level of `log2 Q_ℓ = log_ql` (the top's `log2 Q = log_q`).
fn error_bound(params: &BfvParams, b: u32, log_ql: f64, log_q: f64) -> f64 {
    (f64::from(b) + 1.0 + log_ql - log_q).exp2()
        + params.n() as f64
        + params.plain_modulus() as f64
        + 1.0
}

/// Low bits `[j_0, j_1]` a result flooded with `2^b` drops from `c_0` and `c_1` at its
/// [`compact_level`] (see the module documentation); `[0, 0]` when the margin is too small or
/// `Q_ℓ` too wide for the rounded form.
pub fn result_drop_bits(params: &BfvParams, b: u32) -> [u32; 2] {
    let level = compact_level(params, b);
    let rlwe = params.rlwe();
    let Some(q_bits) = serialize::rounded_q_bits(rlwe, level) else {
        return [0, 0];
    };
    let q = rlwe.q();
    let log_q: f64 = q.iter().map(|&x| (x as f64).log2()).sum();
    let log_ql: f64 = q[..=level].iter().map(|&x| (x as f64).log2()).sum();
    let log_delta = log_ql - (params.plain_modulus() as f64).log2();
    let budget = (log_delta - 3.0).exp2() - error_bound(params, b, log_ql, log_q);
    if budget < 2.0 {
        return [0, 0];
    }
    // 2^{j−1} ≤ R/2 ⇔ j ≤ log2 R; the floor of a log is kept one below a power of two it
    // might reach by rounding
    let log_r = budget.log2() - 1e-9;
    let j0 = log_r.floor().max(0.0) as u32;
    let j1 = (log_r - (params.n() as f64).log2()).floor().max(0.0) as u32;
    [j0.min(q_bits - 1), j1.min(q_bits - 1)]
}

/// Serializes a result flooded with `2^b` and switched down to [`compact_level`]`(b)`, rounded
/// by [`result_drop_bits`]`(b)`. Fails for a ciphertext at another level.
pub fn result_to_bytes(params: &BfvParams, ct: &Ciphertext, b: u32) -> Result<Vec<u8>> {
    check_level(params, ct, b, "serialize a result")?;
    Ok(serialize::ciphertext_to_bytes_rounded(
        params.rlwe(),
        ct,
        &result_drop_bits(params, b),
    )?)
}

/// Decodes a result of a layer flooded with `2^b` from at most `max_bytes` bytes: at
/// [`compact_level`]`(b)`, each part rounded by at most [`result_drop_bits`]`(b)` (or not at
/// all), every residue checked as for any ciphertext. Refuses anything else.
pub fn result_from_bytes(
    params: &BfvParams,
    bytes: &[u8],
    max_bytes: usize,
    b: u32,
) -> Result<Ciphertext> {
    let ct = serialize::ciphertext_from_bytes_rounded(
        params.rlwe(),
        bytes,
        max_bytes,
        &result_drop_bits(params, b),
    )
    .map_err(|e| BfvError::Deserialize {
        what: "BFV result",
        reason: e.to_string(),
    })?;
    crate::decrypt::check_result(params, &ct, "decode a result").map_err(|e| {
        BfvError::Deserialize {
            what: "BFV result",
            reason: e.to_string(),
        }
    })?;
    check_level(params, &ct, b, "decode a result").map_err(|e| BfvError::Deserialize {
        what: "BFV result",
        reason: e.to_string(),
    })?;
    Ok(ct)
}

/// Exact length of [`result_to_bytes`] for a layer flooded with `2^b`.
pub fn result_wire_bytes(params: &BfvParams, b: u32) -> Result<usize> {
    Ok(serialize::rounded_ciphertext_wire_bytes(
        params.rlwe(),
        compact_level(params, b),
        2,
        &result_drop_bits(params, b),
    )?)
}

fn check_level(params: &BfvParams, ct: &Ciphertext, b: u32, op: &str) -> Result<()> {
    let want = compact_level(params, b);
    if ct.level() != want {
        return Err(BfvError::ParamsMismatch(format!(
            "{op}: a result flooded with 2^{b} is at level {want}, got level {}",
            ct.level()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{presets, BatchEncoder, Decryptor, Rerandomizer};
    use heinfer_ckks::{Encryptor, KeyGenerator};

    #[test]
    fn protocol_parameters_drop_the_bits_of_the_module_documentation() {
        let params = BfvParams::new(presets::pn13_plain20()).unwrap();
        // the flooding of the protocol's layers: 2^113 to 2^124
        for (b, bits) in [(113, [27, 14]), (124, [26, 13])] {
            assert_eq!(compact_level(&params, b), 0, "b = {b}");
            assert_eq!(result_drop_bits(&params, b), bits, "b = {b}");
        }
        // at every flooding: the bound plus the rounding stays below Δ_ℓ/8
        let rr_max = (params.log_q() - (params.plain_modulus() as f64).log2()).floor() as u32 - 5;
        for b in 60..=rr_max.min(crate::MAX_FLOOD_BITS) {
            let level = compact_level(&params, b);
            let log_ql: f64 = params.rlwe().q()[..=level]
                .iter()
                .map(|&x| (x as f64).log2())
                .sum();
            let delta = (log_ql - (params.plain_modulus() as f64).log2()).exp2();
            let [j0, j1] = result_drop_bits(&params, b);
            let rounding = (f64::from(j0) - 1.0).exp2() * f64::from((j0 > 0) as u8)
                + params.n() as f64 * (f64::from(j1) - 1.0).exp2() * f64::from((j1 > 0) as u8);
            let e = error_bound(&params, b, log_ql, params.log_q());
            assert!(
                e + rounding <= delta / 8.0,
                "b = {b}: {e} + {rounding} > Δ/8 = {}",
                delta / 8.0
            );
        }
        let full = heinfer_ckks::serialize::ciphertext_wire_bytes(params.rlwe(), 0, 2).unwrap();
        let rounded = result_wire_bytes(&params, 120).unwrap();
        assert!(rounded * 100 < full * 62, "{rounded} of {full} bytes");
    }

    /// Rounded as far as the bits allow, every slot still decrypts exactly (at a small
    /// flooding, the most rounding; at the largest, the top level, which is not rounded).
    #[test]
    fn rounded_results_decrypt_exactly() {
        let params = BfvParams::new(presets::pn13_plain20()).unwrap();
        let kg = KeyGenerator::new(params.rlwe()).unwrap();
        let enc = BatchEncoder::new(&params);
        let p = params.plain_modulus();
        let values: Vec<u64> = (0..params.n() as u64).map(|i| (i * 7919 + 3) % p).collect();
        let ct = Encryptor::new(params.rlwe(), &kg.public_key().unwrap())
            .unwrap()
            .encrypt(&enc.encode(&values).unwrap())
            .unwrap();
        let rr = Rerandomizer::new(&params, &kg.public_key().unwrap()).unwrap();
        let dec = Decryptor::new(&params, kg.secret_key()).unwrap();
        for b in [100, rr.max_flood_bits()] {
            let c = rr.rerandomize_compact(&ct, b).unwrap();
            let bytes = result_to_bytes(&params, &c, b).unwrap();
            assert_eq!(bytes.len(), result_wire_bytes(&params, b).unwrap());
            let back = result_from_bytes(&params, &bytes, 1 << 22, b).unwrap();
            assert_eq!(dec.decrypt(&back).unwrap(), values, "b = {b}");
        }
    }

    #[test]
    fn a_result_at_another_level_or_rounded_beyond_its_bits_is_refused() {
        let params = BfvParams::new(presets::pn13_plain20()).unwrap();
        let kg = KeyGenerator::new(params.rlwe()).unwrap();
        let enc = BatchEncoder::new(&params);
        let ct = Encryptor::new(params.rlwe(), &kg.public_key().unwrap())
            .unwrap()
            .encrypt(&enc.encode(&[1, 2, 3]).unwrap())
            .unwrap();
        let rr = Rerandomizer::new(&params, &kg.public_key().unwrap()).unwrap();
        // the top level where the program says level 0
        let full = rr.rerandomize(&ct, 120).unwrap();
        assert!(result_to_bytes(&params, &full, 120).is_err());
        let bytes = crate::ciphertext_to_bytes(&params, &full).unwrap();
        let err = result_from_bytes(&params, &bytes, 1 << 22, 120).unwrap_err();
        assert!(err.to_string().contains("level"), "{err}");
        // one bit more than the bits allow
        let c = rr.rerandomize_compact(&ct, 120).unwrap();
        let [j0, j1] = result_drop_bits(&params, 120);
        let over =
            heinfer_ckks::serialize::ciphertext_to_bytes_rounded(params.rlwe(), &c, &[j0, j1 + 1])
                .unwrap();
        assert!(result_from_bytes(&params, &over, 1 << 22, 120).is_err());
        // an unrounded result at the right level is accepted
        let plain = crate::ciphertext_to_bytes(&params, &c).unwrap();
        assert!(result_from_bytes(&params, &plain, 1 << 22, 120).is_ok());
    }
}

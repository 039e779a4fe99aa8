//! The kernels on inputs kept in 32-bit words (`NarrowBatch`): every output bit for bit the
//! same as on the ciphertexts they came from.

mod common;
use common::{layer, Rng};
use heinfer_ckks::{Ciphertext, CkksParams, Encoder, KeyGenerator, NarrowBatch};
use heinfer_kernels::chain::{square_chain, square_chain_narrow};
use heinfer_kernels::Packing;

/// Insecure parameters with three primes of `bits` bits.
fn params(bits: u32) -> CkksParams {
    common::params(vec![bits; 3])
}

fn inputs(p: &CkksParams, k: usize, rng: &mut Rng) -> Vec<Ciphertext> {
    let kg = KeyGenerator::new(p).unwrap();
    let enc = Encoder::new(p);
    (0..k)
        .map(|_| {
            let v: Vec<f64> = (0..p.slots()).map(|_| rng.next()).collect();
            kg.encrypt_symmetric(&enc.encode_real(&v, 2f64.powi(20), 2).unwrap())
                .unwrap()
        })
        .collect()
}

#[test]
fn linear_layers_read_narrow_inputs_bit_for_bit() {
    let p = params(30);
    let mut rng = Rng(0x5eed_0f1a_7e00);
    let cts = inputs(&p, 11, &mut rng);
    let narrow = NarrowBatch::from_ciphertexts(&p, &cts).unwrap();
    assert!(
        narrow.widen(&p).unwrap() == cts,
        "widening gives the ciphertexts back"
    );
    let bias: Vec<f64> = (0..7).map(|_| rng.next()).collect();
    for digits in [1, 2] {
        let lay = layer(7, 11, digits, &mut rng);
        for packing in [Packing::Real, Packing::Complex] {
            let wide = lay.apply(&p, &cts, Some(&bias), packing).unwrap();
            let got = lay
                .apply_narrow(&p, &narrow, Some(&bias), packing, false)
                .unwrap();
            assert!(got == wide, "{digits} digit(s), {packing:?}");
            let wide = lay.apply_squared(&p, &cts, None, packing).unwrap();
            let got = lay.apply_narrow(&p, &narrow, None, packing, true).unwrap();
            assert!(got == wide, "{digits} digit(s), {packing:?}, squared");
        }
    }
}

#[test]
fn the_square_chain_reads_narrow_inputs_bit_for_bit() {
    let p = params(30);
    let mut rng = Rng(0xc4a1_2b0e);
    let cts = inputs(&p, 13, &mut rng);
    let narrow = NarrowBatch::from_ciphertexts(&p, &cts).unwrap();
    let (first, second) = (layer(40, 13, 1, &mut rng), layer(5, 40, 1, &mut rng));
    let b1: Vec<f64> = (0..40).map(|_| rng.next()).collect();
    let b2: Vec<f64> = (0..5).map(|_| rng.next()).collect();
    for packing in [Packing::Real, Packing::Complex, Packing::Coefficients] {
        let wide = square_chain(&p, &first, &second, &cts, Some(&b1), Some(&b2), packing).unwrap();
        let got = square_chain_narrow(&p, &first, &second, &narrow, Some(&b1), Some(&b2), packing)
            .unwrap();
        assert!(got == wide, "{packing:?}");
    }
    // the narrow inputs are checked like the wide ones: count and parameters
    let short = NarrowBatch::from_ciphertexts(&p, &cts[..12]).unwrap();
    assert!(square_chain_narrow(&p, &first, &second, &short, None, None, Packing::Real).is_err());
    let other = params(31);
    let err = square_chain_narrow(&other, &first, &second, &narrow, None, None, Packing::Real);
    assert!(err.is_err(), "inputs of other parameters are refused");
}

#[test]
fn only_primes_below_two_to_the_32_narrow() {
    let p = params(40);
    let cts = inputs(&p, 2, &mut Rng(7));
    assert!(!NarrowBatch::fits(&p, p.max_level()));
    let err = NarrowBatch::from_ciphertexts(&p, &cts).unwrap_err();
    assert!(err.to_string().contains("32 bits"), "{err}");
}

//! Encoder: round trips, complex packing, capacity and overflow checks.
mod common;
use common::*;
use heinfer_ckks::*;
use num_complex::Complex64;

#[test]
fn real_round_trip_logn10() {
    let params = presets::insecure_logn10().unwrap();
    let enc = Encoder::new(&params);
    let v = vector(params.slots(), 1);
    for level in [0, params.max_level()] {
        let pt = enc.encode_real(&v, params.default_scale(), level).unwrap();
        let back = enc.decode_real(&pt).unwrap();
        assert_precision(&format!("encode/decode level {level}"), &back, &v, 25.0);
    }
}

#[test]
fn complex_round_trip_and_partial_vectors() {
    let params = presets::insecure_logn12().unwrap();
    let enc = Encoder::new(&params);
    let re = vector(100, 2);
    let im = vector(100, 3);
    let z: Vec<Complex64> = re
        .iter()
        .zip(&im)
        .map(|(&a, &b)| Complex64::new(a, b))
        .collect();
    let pt = enc.encode(&z, params.default_scale(), 2).unwrap();
    let back = enc.decode(&pt).unwrap();
    let br: Vec<f64> = back[..100].iter().map(|c| c.re).collect();
    let bi: Vec<f64> = back[..100].iter().map(|c| c.im).collect();
    assert_precision("complex re", &br, &re, 28.0);
    assert_precision("complex im", &bi, &im, 28.0);
    assert!(
        back[100..].iter().all(|c| c.norm() < 1e-7),
        "padding decodes to zero"
    );
}

#[test]
fn refuses_what_does_not_fit() {
    let params = presets::insecure_logn10().unwrap();
    let enc = Encoder::new(&params);
    let too_many = vec![0.5; params.slots() + 1];
    assert!(matches!(
        enc.encode_real(&too_many, 1e6, 0),
        Err(CkksError::Encoding(_))
    ));
    assert!(matches!(
        enc.encode_real(&[f64::NAN], 1e6, 0),
        Err(CkksError::Encoding(_))
    ));
    // 2^35 scale · 2^20 value overflows the 50-bit base prime at level 0
    assert!(matches!(
        enc.encode_real(&vec![1e6; params.slots()], params.default_scale(), 0),
        Err(CkksError::Encoding(_))
    ));
    assert!(matches!(
        enc.encode_real(&[1.0], -1.0, 0),
        Err(CkksError::InvalidScale(_))
    ));
    assert!(matches!(
        enc.encode_real(&[1.0], 1e6, 9),
        Err(CkksError::LevelOutOfRange { level: 9, max: 3 })
    ));
}

/// A message at a scale far above two limbs (2^100 over 30-bit primes) decodes through the
/// multi-limb reconstruction; negative values come back negative.
#[test]
fn decode_reconstructs_over_many_limbs() {
    let params = CkksParams::new_insecure_for_tests(CkksParamsLiteral {
        log_n: 10,
        log_q: vec![30; 6],
        log_p: vec![],
        log_scale: 25,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    })
    .unwrap();
    let enc = Encoder::new(&params);
    let v: Vec<f64> = vector(params.slots(), 7).iter().map(|x| 50.0 * x).collect();
    let pt = enc.encode_real(&v, 2f64.powi(100), 5).unwrap();
    let back = enc.decode_real(&pt).unwrap();
    assert_precision("decode at scale 2^100", &back, &v, 40.0);
}

/// `encrypt_values` (encode and encrypt in one pass) decrypts to the values, seed-compressed.
#[test]
fn encrypt_values_round_trip() {
    let params = presets::insecure_logn12().unwrap();
    let kg = KeyGenerator::new(&params).unwrap();
    let enc = Encoder::new(&params);
    let dec = Decryptor::new(&params, kg.secret_key()).unwrap();
    let v = vector(params.slots(), 4);
    let z: Vec<Complex64> = v.iter().map(|&x| Complex64::new(x, -x)).collect();
    for level in [0, params.max_level()] {
        let ct = kg
            .encrypt_values(&enc, &z, params.default_scale(), level)
            .unwrap();
        assert!(ct.is_seed_compressed() && ct.level() == level);
        let back = enc.decode(&dec.decrypt(&ct).unwrap()).unwrap();
        let re: Vec<f64> = back.iter().map(|c| c.re).collect();
        let im: Vec<f64> = back.iter().map(|c| -c.im).collect();
        assert_precision("encrypt_values re", &re, &v, 20.0);
        assert_precision("encrypt_values im", &im, &v, 20.0);
    }
}

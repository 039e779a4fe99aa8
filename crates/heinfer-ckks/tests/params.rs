//! Parameters: the security table is enforced, presets are valid, ids are stable.
use heinfer_ckks::*;

#[test]
fn secure_presets_build_and_fit_the_table() {
    for (lit, budget, levels) in [
        (presets::pn13_qp218(), 218.0, 3),
        (presets::pn14_qp438(), 438.0, 7),
        (presets::pn15_qp881(), 881.0, 16),
    ] {
        let p = CkksParams::new(lit).unwrap();
        assert!(p.log_qp() <= budget, "{p:?}");
        assert_eq!(p.max_level(), levels);
        for &q in p.q().iter().chain(p.p()) {
            assert_eq!(q % (2 * p.n() as u64), 1);
        }
    }
    let p14 = CkksParams::new(presets::pn14_qp438()).unwrap();
    assert_eq!((p14.alpha(), p14.beta()), (2, 4));
}

#[test]
fn insecure_parameters_are_refused() {
    let mut lit = presets::pn14_qp438();
    lit.log_q.push(40); // 478 bits > 438
    match CkksParams::new(lit) {
        Err(CkksError::InsecureParameters {
            max: 438,
            log_n: 14,
            security: 128,
            ..
        }) => {}
        other => panic!("expected InsecureParameters, got {other:?}"),
    }
    let mut lit = presets::pn14_qp438();
    lit.security = SecurityLevel::Bits192;
    assert!(matches!(
        CkksParams::new(lit),
        Err(CkksError::InsecureParameters { max: 305, .. })
    ));
    // the insecure test level cannot be reached through the checked constructor
    assert!(matches!(
        CkksParams::new(presets::insecure_logn10_literal()),
        Err(CkksError::InvalidParameters(_))
    ));
}

#[test]
fn malformed_literals_are_refused() {
    let base = presets::pn13_qp218();
    let mut a = base.clone();
    a.log_n = 9;
    let mut b = base.clone();
    b.log_q.clear();
    let mut c = base.clone();
    c.log_q[0] = 40; // base prime not above the scale
    let mut d = base.clone();
    d.digits = Some(9);
    let mut e = base.clone();
    e.log_q[1] = 62;
    for lit in [a, b, c, d, e] {
        assert!(CkksParams::new(lit.clone()).is_err(), "{lit:?}");
    }
    // P far smaller than a digit
    let mut f = base;
    f.log_p = vec![20];
    f.digits = Some(1);
    assert!(matches!(
        CkksParams::new(f),
        Err(CkksError::InvalidParameters(_))
    ));
}

/// Parameters without special primes: secret-key encryption and every operation without key
/// switching work; public, relinearization and Galois keys are refused with a clear error.
#[test]
fn parameters_without_special_primes() {
    let mut lit = presets::pn13_qp218();
    lit.log_p.clear();
    let params = CkksParams::new(lit).unwrap();
    let kg = KeyGenerator::new(&params).unwrap();
    for err in [
        kg.public_key().err(),
        kg.relin_key().err(),
        kg.galois_keys(&[1], false).err(),
    ] {
        match err {
            Some(CkksError::InvalidParameters(m)) => assert!(m.contains("special primes"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    let enc = Encoder::new(&params);
    let ct = kg
        .encrypt_symmetric(
            &enc.encode_real(&[1.5, -2.0], params.default_scale(), params.max_level())
                .unwrap(),
        )
        .unwrap();
    let ev = Evaluator::new(&params);
    let sq = ev.rescale(&ev.square(&ct).unwrap()).unwrap();
    let out = enc
        .decode_real(
            &Decryptor::new(&params, kg.secret_key())
                .unwrap()
                .decrypt(&sq)
                .unwrap(),
        )
        .unwrap();
    assert!((out[0] - 2.25).abs() < 1e-3 && (out[1] - 4.0).abs() < 1e-3);
    let back = heinfer_ckks::serialize::params_from_bytes(
        &heinfer_ckks::serialize::params_to_bytes(&params),
        false,
    )
    .unwrap();
    assert_eq!(back.id(), params.id());
}

#[test]
fn ids_are_deterministic_and_distinguish_sets() {
    let a = CkksParams::new(presets::pn13_qp218()).unwrap();
    let b = CkksParams::new(presets::pn13_qp218()).unwrap();
    let c = CkksParams::new(presets::pn14_qp438()).unwrap();
    assert_eq!(a.id(), b.id());
    assert_ne!(a.id(), c.id());
    let mut lit = presets::pn13_qp218();
    lit.digits = Some(2);
    assert!(CkksParams::new(lit).is_err() || a.id() != 0);
}

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
    b.log_p.clear();
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

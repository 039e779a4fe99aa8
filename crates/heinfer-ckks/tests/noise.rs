//! Measured noise against the model the compiler budgets with (`heinfer_ckks::noise`).
mod common;
use common::*;
use heinfer_ckks::noise::NoiseModel;
use heinfer_ckks::*;

fn std_err(got: &[f64], want: &[f64]) -> f64 {
    let v: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).powi(2))
        .sum::<f64>()
        / got.len() as f64;
    v.sqrt()
}

#[test]
fn fresh_rescale_and_key_switch_noise_match_the_model() {
    // a small scale makes the noise dominate the encoding error
    let mut lit = presets::insecure_logn12_literal();
    lit.log_scale = 12;
    lit.log_q = vec![45, 40, 40];
    let params = CkksParams::new_insecure_for_tests(lit).unwrap();
    let f = Fixture::new(params, &[1]);
    let model = NoiseModel::new(&f.params);
    let scale = f.params.default_scale();
    let x = vector(f.params.slots(), 4);
    let ct = f.encrypt(&x);
    let fresh = std_err(&f.decrypt(&ct), &x);
    let predicted = model.fresh(scale);
    eprintln!("fresh: measured {fresh:e}, model {predicted:e}");
    assert!(fresh > predicted / 2.0 && fresh < predicted * 2.0);

    let pt = f.enc.encode_real(&x, scale, f.params.max_level()).unwrap();
    let sym = std_err(&f.decrypt(&f.kg.encrypt_symmetric(&pt).unwrap()), &x);
    let predicted = model.fresh_symmetric(scale);
    eprintln!("fresh symmetric: measured {sym:e}, model {predicted:e}");
    assert!(sym > predicted / 2.0 && sym < predicted * 2.0);

    let rot = f.ev.rotate(&ct, 1, &f.gks).unwrap();
    let want: Vec<f64> = (0..x.len()).map(|i| x[(i + 1) % x.len()]).collect();
    let after = std_err(&f.decrypt(&rot), &want);
    let ks = model.key_switch(ct.level(), scale);
    let predicted = (model.fresh(scale).powi(2) + ks.powi(2)).sqrt();
    eprintln!("rotate: measured {after:e}, model {predicted:e} (key switch alone {ks:e})");
    assert!(after > predicted / 2.0 && after < predicted * 2.0);

    // rescale by q_L of a product with a constant at scale q_L: rounding noise at the old scale
    let ql = f.params.q()[f.params.max_level()] as f64;
    let r =
        f.ev.rescale(&f.ev.mul_const(&ct, 1.0, ql).unwrap())
            .unwrap();
    let measured = std_err(&f.decrypt(&r), &x);
    let predicted = (model.fresh(scale).powi(2) + model.rescale(r.scale()).powi(2)).sqrt();
    eprintln!("rescale: measured {measured:e}, model {predicted:e}");
    assert!(measured > predicted / 2.0 && measured < predicted * 2.0);
}

#[test]
fn key_switch_noise_dominates_with_a_small_p_and_matches_the_model() {
    // P six bits smaller than each digit: the key-switching term is ~30x the fresh noise
    let lit = CkksParamsLiteral {
        log_n: 12,
        log_q: vec![40, 40, 40],
        log_p: vec![34],
        log_scale: 25,
        digits: Some(3),
        security: SecurityLevel::InsecureTestOnly,
    };
    let f = Fixture::new(CkksParams::new_insecure_for_tests(lit).unwrap(), &[1]);
    let model = NoiseModel::new(&f.params);
    let scale = f.params.default_scale();
    let x = vector(f.params.slots(), 5);
    let ct = f.encrypt(&x);
    let rot = f.ev.rotate(&ct, 1, &f.gks).unwrap();
    let want: Vec<f64> = (0..x.len()).map(|i| x[(i + 1) % x.len()]).collect();
    let measured = std_err(&f.decrypt(&rot), &want);
    let ks = model.key_switch(ct.level(), scale);
    assert!(ks > 10.0 * model.fresh(scale));
    let predicted = (model.fresh(scale).powi(2) + ks.powi(2)).sqrt();
    eprintln!("small-P rotate: measured {measured:e}, model {predicted:e}");
    // balanced digits: no term fixed per key (with digits in [0, Q_j) their mean times the
    // key's error made runs scatter by 3x from one key to the next)
    assert!(measured > predicted / 1.5 && measured < predicted * 1.5);
}

#[test]
fn fresh_noise_with_several_special_primes_is_still_rounding_only() {
    // k = 3 special primes: the ModDown after public-key encryption must round exactly
    let lit = CkksParamsLiteral {
        log_n: 12,
        log_q: vec![45, 40],
        log_p: vec![30, 30, 30],
        log_scale: 20,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    };
    let f = Fixture::new(CkksParams::new_insecure_for_tests(lit).unwrap(), &[]);
    let model = NoiseModel::new(&f.params);
    let scale = f.params.default_scale();
    let x = vector(f.params.slots(), 6);
    let measured = std_err(&f.decrypt(&f.encrypt(&x)), &x);
    let predicted = model.fresh(scale);
    eprintln!("fresh with k=3: measured {measured:e}, model {predicted:e}");
    assert!(measured > predicted / 2.0 && measured < predicted * 2.0);
}

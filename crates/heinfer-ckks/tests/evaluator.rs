//! Evaluator: precision after each operation (min/mean bits reported, floors asserted),
//! rotations against `np.roll`-style references, and refusals of mismatched operands.
mod common;
use common::*;
use heinfer_ckks::*;
use num_complex::Complex64;
use std::sync::OnceLock;

fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        Fixture::new(
            presets::insecure_logn12().unwrap(),
            &[1, 2, 3, 5, -1, -7, 100],
        )
    })
}

fn fx_alpha2() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new(presets::insecure_logn10().unwrap(), &[1, 2, 3, 4, 8, -1]))
}

fn roll(v: &[f64], k: i64) -> Vec<f64> {
    let n = v.len() as i64;
    (0..n)
        .map(|i| v[((i + k).rem_euclid(n)) as usize])
        .collect()
}

#[test]
fn encrypt_decrypt_at_every_level_and_symmetric() {
    let f = fx();
    let x = vector(f.params.slots(), 10);
    for level in 0..=f.params.max_level() {
        let pt = f
            .enc
            .encode_real(&x, f.params.default_scale(), level)
            .unwrap();
        let ct = f.encryptor.encrypt(&pt).unwrap();
        assert_eq!(ct.level(), level);
        assert_precision(
            &format!("logN=12 encrypt/decrypt level {level}"),
            &f.decrypt(&ct),
            &x,
            22.0,
        );
        let cs = f.kg.encrypt_symmetric(&pt).unwrap();
        assert!(cs.is_seed_compressed());
        assert_precision(
            &format!("logN=12 symmetric level {level}"),
            &f.decrypt(&cs),
            &x,
            22.0,
        );
    }
}

#[test]
fn add_sub_neg_plain_and_constants() {
    let f = fx();
    let (x, y) = (vector(f.params.slots(), 1), vector(f.params.slots(), 2));
    let (cx, cy) = (f.encrypt(&x), f.encrypt(&y));
    let sum: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let diff: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    assert_precision("add", &f.decrypt(&f.ev.add(&cx, &cy).unwrap()), &sum, 21.0);
    assert_precision("sub", &f.decrypt(&f.ev.sub(&cx, &cy).unwrap()), &diff, 21.0);
    let neg: Vec<f64> = x.iter().map(|a| -a).collect();
    assert_precision("neg", &f.decrypt(&f.ev.neg(&cx).unwrap()), &neg, 21.0);
    let py = f
        .enc
        .encode_real(&y, f.params.default_scale(), f.params.max_level())
        .unwrap();
    assert_precision(
        "add_plain",
        &f.decrypt(&f.ev.add_plain(&cx, &py).unwrap()),
        &sum,
        21.0,
    );
    assert_precision(
        "sub_plain",
        &f.decrypt(&f.ev.sub_plain(&cx, &py).unwrap()),
        &diff,
        21.0,
    );
    let plus: Vec<f64> = x.iter().map(|a| a + 0.25).collect();
    assert_precision(
        "add_const",
        &f.decrypt(&f.ev.add_const(&cx, 0.25).unwrap()),
        &plus,
        21.0,
    );
    let prod: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    let mp = f.ev.rescale(&f.ev.mul_plain(&cx, &py).unwrap()).unwrap();
    assert_precision("mul_plain+rescale", &f.decrypt(&mp), &prod, 20.0);
    let scaled: Vec<f64> = x.iter().map(|a| a * -0.7).collect();
    let ql = f.params.q()[f.params.max_level()] as f64;
    let mc = f.ev.mul_const(&cx, -0.7, ql).unwrap();
    let mc = f.ev.rescale(&mc).unwrap();
    assert!(
        (mc.scale() - f.params.default_scale()).abs() < 1e-6,
        "const at scale q_l restores the scale"
    );
    assert_precision("mul_const+rescale", &f.decrypt(&mc), &scaled, 20.0);
}

#[test]
fn complex_constants_and_packing() {
    let f = fx();
    let (a, b) = (vector(f.params.slots(), 3), vector(f.params.slots(), 4));
    let z: Vec<Complex64> = a
        .iter()
        .zip(&b)
        .map(|(&r, &i)| Complex64::new(r, i))
        .collect();
    let pt = f
        .enc
        .encode(&z, f.params.default_scale(), f.params.max_level())
        .unwrap();
    let ct = f.encryptor.encrypt(&pt).unwrap();
    let w = Complex64::new(0.3, -1.2);
    let r =
        f.ev.rescale(
            &f.ev
                .mul_const_complex(&ct, w.re, w.im, f.params.default_scale())
                .unwrap(),
        )
        .unwrap();
    let got = f.decrypt_complex(&r);
    let want: Vec<Complex64> = z.iter().map(|v| v * w).collect();
    let (gr, wr): (Vec<f64>, Vec<f64>) = (
        got.iter().map(|c| c.re).collect(),
        want.iter().map(|c| c.re).collect(),
    );
    let (gi, wi): (Vec<f64>, Vec<f64>) = (
        got.iter().map(|c| c.im).collect(),
        want.iter().map(|c| c.im).collect(),
    );
    assert_precision("mul_const_complex re", &gr, &wr, 19.0);
    assert_precision("mul_const_complex im", &gi, &wi, 19.0);
    let c = f.ev.add_const_complex(&ct, 0.5, -0.25).unwrap();
    let got = f.decrypt_complex(&c);
    let gi: Vec<f64> = got.iter().map(|c| c.im).collect();
    let wi: Vec<f64> = b.iter().map(|v| v - 0.25).collect();
    assert_precision("add_const_complex im", &gi, &wi, 20.0);
    // conjugation flips the imaginary parts
    let cj = f.ev.conjugate(&ct, &f.gks).unwrap();
    let got = f.decrypt_complex(&cj);
    let gi: Vec<f64> = got.iter().map(|c| c.im).collect();
    let wi: Vec<f64> = b.iter().map(|v| -v).collect();
    assert_precision("conjugate im", &gi, &wi, 19.0);
}

#[test]
fn mul_relin_square_rescale_through_all_levels() {
    for f in [fx(), fx_alpha2()] {
        let x = vector(f.params.slots(), 5);
        let mut ct = f.encrypt(&x);
        let mut want = x.clone();
        let label = format!("logN={} alpha={}", f.params.log_n(), f.params.alpha());
        while ct.level() > 0 {
            let sq = if ct.level() % 2 == 0 {
                f.ev.relinearize(&f.ev.square(&ct).unwrap(), &f.rlk)
                    .unwrap()
            } else {
                f.ev.mul_relin(&ct, &ct, &f.rlk).unwrap()
            };
            ct = f.ev.rescale(&sq).unwrap();
            want = want.iter().map(|v| v * v).collect();
            assert_precision(
                &format!("{label} square level {}", ct.level()),
                &f.decrypt(&ct),
                &want,
                12.0,
            );
        }
        assert!(matches!(
            f.ev.rescale(&ct),
            Err(CkksError::LevelTooLow { .. })
        ));
    }
}

#[test]
fn rotations_match_roll_and_hoisting_agrees() {
    for f in [fx(), fx_alpha2()] {
        let x = vector(f.params.slots(), 6);
        let ct = f.encrypt(&x);
        let steps = f.key_steps();
        assert!(!steps.is_empty());
        let hoisted = f.ev.rotate_hoisted(&ct, &steps, &f.gks).unwrap();
        for (&k, h) in steps.iter().zip(&hoisted) {
            let r = f.ev.rotate(&ct, k, &f.gks).unwrap();
            // plain rotation (fused ModUp + inner product) and hoisted rotation (shared
            // decomposition) compute the same thing: the same bits
            assert_same_bits(&format!("rotate {k} vs hoisted"), &r, h);
            let want = roll(&x, k);
            assert_precision(
                &format!("logN={} rotate {k}", f.params.log_n()),
                &f.decrypt(&r),
                &want,
                19.0,
            );
            assert_precision(
                &format!("logN={} hoisted {k}", f.params.log_n()),
                &f.decrypt(h),
                &want,
                19.0,
            );
        }
        assert!(matches!(
            f.ev.rotate(&ct, 11, &f.gks),
            Err(CkksError::MissingGaloisKey(_))
        ));
        assert_precision(
            "rotate 0",
            &f.decrypt(&f.ev.rotate(&ct, 0, &f.gks).unwrap()),
            &x,
            19.0,
        );
    }
}

#[test]
fn rotate_many_is_rotate_on_each() {
    let f = fx();
    let x = vector(f.params.slots(), 8);
    let y = vector(f.params.slots(), 9);
    let (cx, cy) = (f.encrypt(&x), f.encrypt(&y));
    let steps: Vec<i64> = f.key_steps().into_iter().chain([0]).collect();
    let cts: Vec<&Ciphertext> = (0..steps.len())
        .map(|i| if i % 2 == 0 { &cx } else { &cy })
        .collect();
    let many = f.ev.rotate_many(&cts, &steps, &f.gks).unwrap();
    assert_eq!(many.len(), steps.len());
    for ((&k, ct), m) in steps.iter().zip(&cts).zip(&many) {
        let r = f.ev.rotate(ct, k, &f.gks).unwrap();
        assert_same_bits(&format!("rotate {k} vs rotate_many"), &r, m);
    }
    assert!(matches!(
        f.ev.rotate_many(&cts, &steps[1..], &f.gks),
        Err(CkksError::InvalidOperand {
            op: "rotate_many",
            ..
        })
    ));
    assert!(matches!(
        f.ev.rotate_many(&[&cx], &[11], &f.gks),
        Err(CkksError::MissingGaloisKey(_))
    ));
}

#[test]
fn fold_is_rotate_and_add_in_order() {
    let f = fx();
    let x = vector(f.params.slots(), 11);
    let y = vector(f.params.slots(), 12);
    let (cx, cy) = (f.encrypt(&x), f.encrypt(&y));
    let steps = [1i64, 2, 5, -7];
    let folded = f.ev.fold(&[&cx, &cy], &steps, &f.gks).unwrap();
    assert_eq!(folded.len(), 2);
    for (ct, (v, got)) in [&cx, &cy].iter().zip([&x, &y].iter().zip(&folded)) {
        let mut acc = (*ct).clone();
        let mut want = v.to_vec();
        for &s in &steps {
            let r = f.ev.rotate(&acc, s, &f.gks).unwrap();
            f.ev.add_assign(&mut acc, &r).unwrap();
            let rolled = roll(&want, s);
            want.iter_mut().zip(rolled).for_each(|(w, r)| *w += r);
        }
        assert_same_bits("fold vs rotate and add", &acc, got);
        assert_precision("fold", &f.decrypt(got), &want, 14.0);
    }
    // no steps: a copy; no ciphertexts: nothing
    assert_same_bits("fold []", &cx, &f.ev.fold(&[&cx], &[], &f.gks).unwrap()[0]);
    assert!(f.ev.fold(&[], &steps, &f.gks).unwrap().is_empty());
    assert!(matches!(
        f.ev.fold(&[&cx], &[1, 11], &f.gks),
        Err(CkksError::MissingGaloisKey(_))
    ));
}

#[test]
fn extended_hoisting_sums_with_one_mod_down() {
    let f = fx_alpha2();
    let x = vector(f.params.slots(), 7);
    let ct = f.encrypt(&x);
    let steps = [0i64, 1, 2, 3];
    let coeffs = [0.5, -0.25, 0.125, 1.0];
    let ext = f.ev.rotate_hoisted_extended(&ct, &steps, &f.gks).unwrap();
    let scale = f.params.default_scale();
    let mut acc: Option<ExtendedCiphertext> = None;
    for (e, &c) in ext.iter().zip(&coeffs) {
        let t = f.ev.mul_const_extended(e, c, scale).unwrap();
        match acc.as_mut() {
            None => acc = Some(t),
            Some(a) => f.ev.add_extended_assign(a, &t).unwrap(),
        }
    }
    let out =
        f.ev.rescale(&f.ev.mod_down_extended(&acc.unwrap()).unwrap())
            .unwrap();
    let want: Vec<f64> = (0..x.len())
        .map(|i| {
            steps
                .iter()
                .zip(&coeffs)
                .map(|(&k, &c)| c * roll(&x, k)[i])
                .sum()
        })
        .collect();
    assert_precision("extended BSGS sum", &f.decrypt(&out), &want, 18.0);
    // with plaintext diagonals encoded with P limbs
    let diag = vector(f.params.slots(), 8);
    let pt = f
        .enc
        .encode_extended(
            &diag
                .iter()
                .map(|&d| Complex64::new(d, 0.0))
                .collect::<Vec<_>>(),
            scale,
            ct.level(),
        )
        .unwrap();
    let m = f.ev.mul_plain_extended(&ext[1], &pt).unwrap();
    let out = f.ev.rescale(&f.ev.mod_down_extended(&m).unwrap()).unwrap();
    let want: Vec<f64> = roll(&x, 1).iter().zip(&diag).map(|(a, b)| a * b).collect();
    assert_precision("extended mul_plain", &f.decrypt(&out), &want, 18.0);
}

#[test]
fn dot_products_equal_the_sum_of_products() {
    let f = fx_alpha2();
    let n = f.params.slots();
    let x = vector(n, 11);
    let ct = f.encrypt(&x);
    let scale = f.params.default_scale();
    let cplx = |v: &[f64]| {
        v.iter()
            .map(|&d| Complex64::new(d, 0.0))
            .collect::<Vec<_>>()
    };
    let diags: Vec<Vec<f64>> = (0..3).map(|k| vector(n, 20 + k)).collect();
    let steps = [0i64, 1, 3];
    // extended basis: Σ_t rot(x, k_t) ⊙ d_t with one ModDown
    let ext = f.ev.rotate_hoisted_extended(&ct, &steps, &f.gks).unwrap();
    let pts: Vec<_> = diags
        .iter()
        .map(|d| f.enc.encode_extended(&cplx(d), scale, ct.level()).unwrap())
        .collect();
    let out =
        f.ev.dot_plain_extended(
            &ext.iter().collect::<Vec<_>>(),
            &pts.iter().collect::<Vec<_>>(),
        )
        .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| (0..3).map(|t| roll(&x, steps[t])[i] * diags[t][i]).sum())
        .collect();
    assert_precision(
        "dot_plain_extended",
        &f.decrypt(&f.ev.rescale(&out).unwrap()),
        &want,
        17.0,
    );
    // ordinary basis: Σ_t x_t ⊙ d_t
    let cts: Vec<_> = (0..3).map(|k| f.encrypt(&vector(n, 30 + k))).collect();
    let pts: Vec<_> = diags
        .iter()
        .map(|d| f.enc.encode(&cplx(d), scale, ct.level()).unwrap())
        .collect();
    let out =
        f.ev.dot_plain(
            &cts.iter().collect::<Vec<_>>(),
            &pts.iter().collect::<Vec<_>>(),
        )
        .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| {
            (0..3)
                .map(|t| vector(n, 30 + t as u64)[i] * diags[t][i])
                .sum()
        })
        .collect();
    assert_precision(
        "dot_plain",
        &f.decrypt(&f.ev.rescale(&out).unwrap()),
        &want,
        17.0,
    );
    // refusals: empty, length mismatch, mixed levels, plaintext without P limbs
    assert!(f.ev.dot_plain(&[], &[]).is_err());
    assert!(f.ev.dot_plain(&[&cts[0]], &[]).is_err());
    let low = f.ev.drop_level(&cts[1], 1).unwrap();
    assert!(matches!(
        f.ev.dot_plain(&[&cts[0], &low], &[&pts[0], &pts[1]]),
        Err(CkksError::LevelMismatch { .. })
    ));
    assert!(f.ev.dot_plain_extended(&[&ext[0]], &[&pts[0]]).is_err());
}

#[test]
fn dot_plain_is_bit_identical_to_products_and_sums() {
    // exact modular arithmetic: the fused sum equals the products added one by one, for
    // 2- and 3-part ciphertexts; 20 terms cross the kernels' lazy-reduction chunks
    let f = fx();
    let n = f.params.slots();
    let scale = f.params.default_scale();
    let cplx = |v: &[f64]| {
        v.iter()
            .map(|&d| Complex64::new(d, 0.0))
            .collect::<Vec<_>>()
    };
    let two: Vec<_> = (0..20).map(|k| f.encrypt(&vector(n, 40 + k))).collect();
    let three: Vec<_> = two[..4].iter().map(|c| f.ev.square(c).unwrap()).collect();
    for cts in [&two[..], &three[..]] {
        let level = cts[0].level();
        let pts: Vec<_> = (0..cts.len())
            .map(|k| {
                f.enc
                    .encode(&cplx(&vector(n, 70 + k as u64)), scale, level)
                    .unwrap()
            })
            .collect();
        let got =
            f.ev.dot_plain(
                &cts.iter().collect::<Vec<_>>(),
                &pts.iter().collect::<Vec<_>>(),
            )
            .unwrap();
        let mut want = f.ev.mul_plain(&cts[0], &pts[0]).unwrap();
        for (c, p) in cts.iter().zip(&pts).skip(1) {
            f.ev.add_assign(&mut want, &f.ev.mul_plain(c, p).unwrap())
                .unwrap();
        }
        assert_same_bits(&format!("{} parts", cts[0].parts().len()), &got, &want);
    }
}

#[test]
fn mismatches_are_errors_not_panics() {
    let f = fx();
    let x = vector(8, 9);
    let a = f.encrypt(&x);
    let low = f.ev.drop_level(&a, 1).unwrap();
    assert!(matches!(
        f.ev.add(&a, &low),
        Err(CkksError::LevelMismatch { .. })
    ));
    let mut other_scale = a.clone();
    other_scale.set_scale(a.scale() * 2.0).unwrap();
    assert!(matches!(
        f.ev.add(&a, &other_scale),
        Err(CkksError::ScaleMismatch { .. })
    ));
    let prod = f.ev.mul(&a, &a).unwrap();
    assert!(matches!(
        f.ev.mul(&prod, &a),
        Err(CkksError::InvalidOperand { .. })
    ));
    assert!(matches!(
        f.ev.rotate(&prod, 1, &f.gks),
        Err(CkksError::InvalidOperand { .. })
    ));
    let pt_low = f.enc.encode_real(&x, f.params.default_scale(), 0).unwrap();
    assert!(matches!(
        f.ev.mul_plain(&a, &pt_low),
        Err(CkksError::LevelTooLow { .. })
    ));
    let other = Fixture::new(presets::insecure_logn10().unwrap(), &[]);
    let b = other.encrypt(&x);
    assert!(matches!(
        f.ev.add(&a, &b),
        Err(CkksError::ParamsMismatch { .. })
    ));
    assert!(matches!(
        f.decryptor.decrypt(&b),
        Err(CkksError::ParamsMismatch { .. })
    ));
    assert!(matches!(
        f.ev.relinearize(&prod, &other.rlk),
        Err(CkksError::ParamsMismatch { .. })
    ));
    assert!(matches!(
        f.ev.drop_level(&a, 99),
        Err(CkksError::LevelTooLow { .. })
    ));
    assert!(matches!(
        f.ev.mul_const(&a, f64::INFINITY, 1.0),
        Err(CkksError::Encoding(_))
    ));
}

/// A rescale by two primes at once rounds `c/(q_5·q_4)` exactly: within 1 of two rescales in
/// a row in every coefficient of every limb (`|⌊⌊c/a⌉/b⌉ − ⌊c/(ab)⌉| ≤ 1`, and equal but for
/// a chance of ~1/q_4 per coefficient), at the same level
/// and scale, decrypting to the same product; in a batch as one by one; refused below its
/// primes and for zero primes.
#[test]
fn rescale_by_two_primes_rounds_once_within_one_of_two_rescales() {
    let f = fx();
    let x = vector(f.params.slots(), 11);
    let top = f.params.max_level();
    let pt = f.enc.encode_real(&x, 2f64.powi(60), top).unwrap();
    let sq =
        f.ev.relinearize(
            &f.ev.square(&f.encryptor.encrypt(&pt).unwrap()).unwrap(),
            &f.rlk,
        )
        .unwrap();
    let twice = f.ev.rescale(&f.ev.rescale(&sq).unwrap()).unwrap();
    let mut once = sq.clone();
    f.ev.rescale_by_assign(&mut once, 2).unwrap();
    assert_eq!((once.level(), once.scale()), (twice.level(), twice.scale()));
    let n = f.params.n();
    for (a, b) in once.parts().iter().zip(twice.parts()) {
        for (i, &q) in f.params.q()[..=once.level()].iter().enumerate() {
            let plan = heinfer_math::NttPlan::new(n, q).unwrap();
            let (mut ca, mut cb) = (a.limb(i).to_vec(), b.limb(i).to_vec());
            plan.inverse(&mut ca);
            plan.inverse(&mut cb);
            for (&u, &v) in ca.iter().zip(&cb) {
                let d = (u + q - v) % q;
                assert!(d <= 1 || d == q - 1, "limb {i}: differs by {d}");
            }
        }
    }
    let want: Vec<f64> = x.iter().map(|v| v * v).collect();
    assert_precision("rescale by two primes", &f.decrypt(&once), &want, 14.0);
    assert_precision("two rescales", &f.decrypt(&twice), &want, 14.0);
    let (mut c1, mut c2) = (sq.clone(), sq.clone());
    f.ev.rescale_by_many_assign(&mut [&mut c1, &mut c2], 2)
        .unwrap();
    assert_same_bits("batch", &c1, &once);
    assert_same_bits("batch", &c2, &once);
    let mut low = f.encrypt(&x);
    assert!(matches!(
        f.ev.rescale_by_assign(&mut low, top + 1),
        Err(CkksError::LevelTooLow { .. })
    ));
    let mut any = f.encrypt(&x);
    assert!(matches!(
        f.ev.rescale_by_assign(&mut any, 0),
        Err(CkksError::InvalidOperand { .. })
    ));
    assert_eq!(any.level(), top);
}

/// A random vector (`seed`) encoded at the top level and its seed-compressed symmetric
/// encryption.
fn seeded_at_top(f: &Fixture, seed: u64) -> (Plaintext, Ciphertext) {
    let x = vector(f.params.slots(), seed);
    let pt = f
        .enc
        .encode_real(&x, f.params.default_scale(), f.params.max_level())
        .unwrap();
    let ct = f.kg.encrypt_symmetric(&pt).unwrap();
    assert!(ct.is_seed_compressed());
    (pt, ct)
}

/// A rescale is `(c_i − [c]_{q_ℓ})·q_ℓ^{-1}` in every coefficient of every limb that stays,
/// with `[c]_{q_ℓ}` the centred residue of the dropped limb (checked in coefficient form with
/// u128 arithmetic); `rescale` and `rescale_assign` give the same bits, and a seed-compressed
/// input comes out without its seed (its `c_1` is no longer the seed's expansion).
#[test]
fn rescale_subtracts_the_centred_last_residue_and_divides_exactly() {
    let f = fx();
    let top = f.params.max_level();
    let (pt, seeded) = seeded_at_top(f, 12);
    let ct = f.ev.mul_plain(&seeded, &pt).unwrap();
    let n = f.params.n();
    let qs = f.params.q();
    let ql = qs[top];
    let to_coeffs = |limb: &[u64], q: u64| {
        let plan = heinfer_math::NttPlan::new(n, q).unwrap();
        let mut v = limb.to_vec();
        plan.inverse(&mut v);
        v
    };
    for input in [&ct, &seeded] {
        let out = f.ev.rescale(input).unwrap();
        let mut same = input.clone();
        f.ev.rescale_assign(&mut same).unwrap();
        assert_same_bits("rescale vs rescale_assign", &out, &same);
        assert!(!out.is_seed_compressed() && !same.is_seed_compressed());
        assert_eq!(out.level(), top - 1);
        for (p_in, p_out) in input.parts().iter().zip(out.parts()) {
            let last = to_coeffs(p_in.limb(top), ql);
            for (i, &q) in qs[..top].iter().enumerate() {
                let (c, o) = (to_coeffs(p_in.limb(i), q), to_coeffs(p_out.limb(i), q));
                for j in 0..n {
                    // centred residue r ∈ (−q_ℓ/2, q_ℓ/2], taken mod q
                    let r = if last[j] > ql / 2 {
                        (q as u128 - ((ql - last[j]) as u128 % q as u128)) % q as u128
                    } else {
                        last[j] as u128 % q as u128
                    };
                    let lhs = o[j] as u128 * (ql as u128 % q as u128) % q as u128;
                    let rhs = (c[j] as u128 + q as u128 - r) % q as u128;
                    assert_eq!(lhs, rhs, "limb {i}, coefficient {j}");
                }
            }
        }
    }
}

#[test]
fn drop_level_keeps_the_low_limbs_as_they_are_and_drops_the_seed() {
    let f = fx();
    let top = f.params.max_level();
    let (_, seeded) = seeded_at_top(f, 13);
    for levels in 0..=top {
        let low = f.ev.drop_level(&seeded, levels).unwrap();
        let kept = top - levels;
        assert_eq!(low.level(), kept);
        assert_eq!(low.scale(), seeded.scale());
        assert!(
            !low.is_seed_compressed(),
            "a truncated c_1 is not the seed's expansion"
        );
        for (p_in, p_out) in seeded.parts().iter().zip(low.parts()) {
            assert_eq!(p_out.limbs(), kept + 1);
            for i in 0..=kept {
                assert_eq!(p_out.limb(i), p_in.limb(i), "{levels} dropped, limb {i}");
            }
        }
        let same = f.ev.drop_to_level(&seeded, kept).unwrap();
        assert_same_bits("drop_level vs drop_to_level", &low, &same);
    }
}

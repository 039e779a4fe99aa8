//! Squares not relinearized (`evaluator/mul.rs`): a 3-part ciphertext squares to five parts,
//! decrypted with `s³` and `s⁴`, to the values a relinearized square gives; five parts go no
//! further than decryption, a rescale or the wire.
mod common;
use common::*;
use heinfer_ckks::*;
use std::sync::OnceLock;

fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new(presets::insecure_logn12().unwrap(), &[1]))
}

/// `(x, Enc(x)², rescaled)`: a square not relinearized, three parts.
fn squared(seed: u64) -> (Vec<f64>, Ciphertext) {
    let f = fx();
    let x = vector(f.params.slots(), seed);
    let sq = f.ev.rescale(&f.ev.square(&f.encrypt(&x)).unwrap()).unwrap();
    assert_eq!(sq.size(), 3);
    (x, sq)
}

#[test]
fn a_square_of_a_square_decrypts_to_the_fourth_power() {
    let f = fx();
    let (x, sq) = squared(21);
    let quartic = f.ev.square(&sq).unwrap();
    assert_eq!(quartic.size(), MAX_PARTS);
    assert_eq!(quartic.scale(), sq.scale() * sq.scale());
    let want: Vec<f64> = x.iter().map(|v| v.powi(4)).collect();
    let got = f.decrypt(&quartic);
    // over 400 keys: worst slot 19.5–21.9 bits, mean 25.6–26.0 bits
    assert_precision("x⁴ from five parts", &got, &want, 17.0);
    // relinearizing first gives the same values (to the relinearization's error)
    let relin =
        f.ev.square(&f.ev.relinearize(&sq, &f.rlk).unwrap())
            .unwrap();
    assert_eq!(relin.size(), 3);
    assert_precision(
        "five parts against relinearized",
        &got,
        &f.decrypt(&relin),
        18.0,
    );
    // in place: the same bits; and after a rescale, the same values
    let mut inplace = sq.clone();
    f.ev.square_assign(&mut inplace).unwrap();
    assert_same_bits("square_assign of three parts", &inplace, &quartic);
    // a rescale works on five parts, but its rounding of c_4 comes back multiplied by s⁴
    // (|s(ζ)|⁴ ≈ (2N/3)² ≈ 2^23 at N = 2^12): mean 12.6–13.0 bits against 25.6–26.0
    // unrescaled over 400 keys, which is why the compiler leaves a square unrelinearized only
    // where nothing rescales after it. The worst slot is heavy-tailed (|s(ζ)|⁴ at the largest
    // of 2,048 roots: 4.7–8.3 bits over the same keys), so only the mean is held to a floor.
    let lower = f.ev.rescale(&quartic).unwrap();
    assert_eq!(lower.size(), MAX_PARTS);
    let rescaled = f.decrypt(&lower);
    assert_precision("x⁴ rescaled", &rescaled, &want, 1.0);
    let (mean_rescaled, mean_kept) = (
        precision_bits(&rescaled, &want).1,
        precision_bits(&got, &want).1,
    );
    assert!(
        mean_rescaled >= 11.0 && mean_kept - mean_rescaled >= 10.0,
        "mean bits: {mean_rescaled:.1} rescaled, {mean_kept:.1} kept"
    );
}

#[test]
fn every_part_is_the_coefficient_of_its_power() {
    // c_k = Σ_{i+j=k} a_i a_j, checked against products of the parts taken one by one
    let f = fx();
    let (_, sq) = squared(22);
    let quartic = f.ev.square(&sq).unwrap();
    let a = sq.parts();
    for (t, &qt) in f.params.q()[..=sq.level()].iter().enumerate() {
        let m = u128::from(qt);
        for c in [0usize, 1, 777, f.params.n() - 1] {
            let v = |i: usize| u128::from(a[i].limb(t)[c]);
            let want = [
                v(0) * v(0) % m,
                2 * (v(0) * v(1) % m) % m,
                (2 * (v(0) * v(2) % m) + v(1) * v(1) % m) % m,
                2 * (v(1) * v(2) % m) % m,
                v(2) * v(2) % m,
            ];
            for (k, w) in want.iter().enumerate() {
                assert_eq!(
                    u128::from(quartic.parts()[k].limb(t)[c]),
                    *w,
                    "part {k}, limb {t}, coefficient {c}"
                );
            }
        }
    }
}

#[test]
fn five_parts_go_no_further() {
    let f = fx();
    let (_, sq) = squared(23);
    let quartic = f.ev.square(&sq).unwrap();
    let reason = |r: Result<Ciphertext>| match r {
        Err(CkksError::InvalidOperand { reason, .. }) => reason,
        other => panic!("expected InvalidOperand, got {other:?}"),
    };
    assert!(reason(f.ev.square(&quartic)).contains("squares to 9 parts"));
    let mut again = quartic.clone();
    assert!(f.ev.square_assign(&mut again).is_err());
    assert_eq!(again, quartic, "a refused square changes nothing");
    assert!(reason(f.ev.relinearize(&quartic, &f.rlk)).contains("relinearization takes 3"));
    assert!(reason(f.ev.mul(&sq, &sq)).contains("size 2"));
    let parts = quartic.parts().to_vec();
    let mut six = parts.clone();
    six.push(parts[0].clone());
    assert!(Ciphertext::from_parts(&f.params, six, quartic.level(), quartic.scale()).is_err());
    assert_eq!(
        Ciphertext::from_parts(&f.params, parts, quartic.level(), quartic.scale()).unwrap(),
        quartic
    );
}

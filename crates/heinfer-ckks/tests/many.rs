//! Ops on many ciphertexts in one call (`rotate_hoisted_many`, `rotate_hoisted_extended_many`,
//! `rescale_many_assign`): bit-identical to the op on each, and refusals that leave every
//! ciphertext as it was.
mod common;
use common::*;
use heinfer_ckks::*;
use std::sync::OnceLock;

fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new(presets::insecure_logn12().unwrap(), &[1, 2, 3, 5]))
}

/// Three ciphertexts at different levels (the last at level 0), with rotation steps of
/// different counts each, including the identity and repeats.
fn inputs(f: &Fixture) -> (Vec<Ciphertext>, Vec<Vec<i64>>) {
    let top = f.params.max_level();
    let cts = vec![
        f.encrypt(&vector(f.params.slots(), 21)),
        f.ev.drop_to_level(&f.encrypt(&vector(f.params.slots(), 22)), top - 1)
            .unwrap(),
        f.ev.drop_to_level(&f.encrypt(&vector(f.params.slots(), 23)), 0)
            .unwrap(),
    ];
    let steps = vec![vec![1, 2, 3, 5, 0], vec![3], vec![0, 5, 5, 1]];
    (cts, steps)
}

#[test]
fn rotate_hoisted_many_is_rotate_hoisted_on_each() {
    let f = fx();
    let (cts, steps) = inputs(f);
    let refs: Vec<&Ciphertext> = cts.iter().collect();
    let many = f.ev.rotate_hoisted_many(&refs, &steps, &f.gks).unwrap();
    assert_eq!(many.len(), cts.len());
    for ((ct, s), got) in cts.iter().zip(&steps).zip(&many) {
        let want = f.ev.rotate_hoisted(ct, s, &f.gks).unwrap();
        assert_eq!(got.len(), s.len());
        for ((k, w), g) in s.iter().zip(&want).zip(got) {
            assert_same_bits(&format!("level {} rotate {k}", ct.level()), w, g);
        }
    }
}

#[test]
fn rotate_hoisted_extended_many_is_rotate_hoisted_extended_on_each() {
    let f = fx();
    let (cts, steps) = inputs(f);
    let refs: Vec<&Ciphertext> = cts.iter().collect();
    let many =
        f.ev.rotate_hoisted_extended_many(&refs, &steps, &f.gks)
            .unwrap();
    assert_eq!(many.len(), cts.len());
    for ((ct, s), got) in cts.iter().zip(&steps).zip(&many) {
        let want = f.ev.rotate_hoisted_extended(ct, s, &f.gks).unwrap();
        assert_eq!(got.len(), s.len());
        for ((k, w), g) in s.iter().zip(&want).zip(got) {
            assert_eq!((w.level(), w.scale()), (g.level(), g.scale()));
            // the extended form has no public residues: compare what ModDown makes of it
            let (w, g) = (
                f.ev.mod_down_extended(w).unwrap(),
                f.ev.mod_down_extended(g).unwrap(),
            );
            assert_same_bits(&format!("level {} extended rotate {k}", ct.level()), &w, &g);
        }
    }
}

#[test]
fn hoisted_many_refuses_mismatched_counts_and_missing_keys() {
    let f = fx();
    let (cts, steps) = inputs(f);
    let refs: Vec<&Ciphertext> = cts.iter().collect();
    for op in ["rotate_hoisted_many", "rotate_hoisted_extended_many"] {
        let short = if op == "rotate_hoisted_many" {
            f.ev.rotate_hoisted_many(&refs, &steps[1..], &f.gks)
                .map(|_| ())
        } else {
            f.ev.rotate_hoisted_extended_many(&refs, &steps[1..], &f.gks)
                .map(|_| ())
        };
        assert!(
            matches!(short, Err(CkksError::InvalidOperand { op: o, .. }) if o == op),
            "{op}: {short:?}"
        );
    }
    let missing = vec![vec![1], vec![11], vec![2]];
    assert!(matches!(
        f.ev.rotate_hoisted_many(&refs, &missing, &f.gks),
        Err(CkksError::MissingGaloisKey(_))
    ));
    assert!(matches!(
        f.ev.rotate_hoisted_extended_many(&refs, &missing, &f.gks),
        Err(CkksError::MissingGaloisKey(_))
    ));
}

#[test]
fn rescale_many_assign_is_rescale_assign_on_each() {
    let f = fx();
    let (cts, _) = inputs(f);
    let mut many: Vec<Ciphertext> = cts[..2].to_vec();
    let mut refs: Vec<&mut Ciphertext> = many.iter_mut().collect();
    f.ev.rescale_many_assign(&mut refs).unwrap();
    for (ct, got) in cts.iter().zip(&many) {
        let mut want = ct.clone();
        f.ev.rescale_assign(&mut want).unwrap();
        assert_eq!((want.level(), want.scale()), (got.level(), got.scale()));
        assert_same_bits(&format!("rescale at level {}", ct.level()), &want, got);
    }
}

#[test]
fn rescale_many_assign_changes_nothing_when_one_cannot_be_rescaled() {
    let f = fx();
    // the last input is at level 0: nothing to divide by
    let (cts, _) = inputs(f);
    let mut many = cts.clone();
    let mut refs: Vec<&mut Ciphertext> = many.iter_mut().collect();
    assert!(matches!(
        f.ev.rescale_many_assign(&mut refs),
        Err(CkksError::LevelTooLow { op: "rescale", .. })
    ));
    for (ct, kept) in cts.iter().zip(&many) {
        assert_eq!((ct.level(), ct.scale()), (kept.level(), kept.scale()));
        assert_same_bits("untouched after a refused rescale", ct, kept);
    }
}

//! Grouped plaintext sums (`dot_plain_groups`, `dot_plain_extended_groups`): bit-identical to
//! one `dot_plain` / `dot_plain_extended` per group, whatever the groups share, and refusals of
//! malformed groups.
mod common;
use common::*;
use heinfer_ckks::*;
use num_complex::Complex64;
use std::sync::OnceLock;

fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new(presets::insecure_logn12().unwrap(), &[1, 2, 3, 5]))
}

fn cplx(v: &[f64]) -> Vec<Complex64> {
    v.iter().map(|&d| Complex64::new(d, 0.0)).collect()
}

/// Groups over `xs` ciphertexts: overlapping, repeated and single terms; 20 terms cross the
/// kernels' lazy-reduction chunks.
fn group_terms(xs: usize) -> Vec<Vec<usize>> {
    vec![
        (0..xs).collect(),
        vec![xs - 1],
        vec![0, 0, 2],
        (0..20).map(|t| (t * 7) % xs).collect(),
    ]
}

/// One plaintext per term of each group, distinct values, at `level` (with the `P` limbs when
/// `extended`).
fn plaintexts(
    f: &Fixture,
    terms: &[Vec<usize>],
    seed: u64,
    level: usize,
    extended: bool,
) -> Vec<Vec<Plaintext>> {
    let (n, scale) = (f.params.slots(), f.params.default_scale());
    let one = |g: usize, t: usize| {
        let v = cplx(&vector(n, seed + 100 * g as u64 + t as u64));
        if extended {
            f.enc.encode_extended(&v, scale, level).unwrap()
        } else {
            f.enc.encode(&v, scale, level).unwrap()
        }
    };
    terms
        .iter()
        .enumerate()
        .map(|(g, idx)| (0..idx.len()).map(|t| one(g, t)).collect())
        .collect()
}

/// `(terms, plaintexts)` pairs as the engine takes them.
fn pairs<'a>(
    terms: &'a [Vec<usize>],
    refs: &'a [Vec<&'a Plaintext>],
) -> Vec<(&'a [usize], &'a [&'a Plaintext])> {
    terms
        .iter()
        .zip(refs)
        .map(|(t, p)| (t.as_slice(), p.as_slice()))
        .collect()
}

#[test]
fn grouped_sums_equal_one_sum_per_group() {
    let f = fx();
    let n = f.params.slots();
    let two: Vec<_> = (0..5).map(|k| f.encrypt(&vector(n, 10 + k))).collect();
    let three: Vec<_> = two[..3].iter().map(|c| f.ev.square(c).unwrap()).collect();
    for xs in [&two[..], &three[..]] {
        let terms = group_terms(xs.len());
        let pts = plaintexts(f, &terms, 0, xs[0].level(), false);
        let refs: Vec<Vec<&Plaintext>> = pts.iter().map(|g| g.iter().collect()).collect();
        let groups = pairs(&terms, &refs);
        let xr: Vec<&Ciphertext> = xs.iter().collect();
        let got = f.ev.dot_plain_groups(&xr, &groups).unwrap();
        assert_eq!(got.len(), groups.len());
        for (g, (idx, p)) in groups.iter().enumerate() {
            let cts: Vec<&Ciphertext> = idx.iter().map(|&t| xr[t]).collect();
            let want = f.ev.dot_plain(&cts, p).unwrap();
            let label = format!("{} parts, group {g}", xs[0].parts().len());
            assert_same_bits(&label, &got[g], &want);
        }
    }
}

#[test]
fn grouped_extended_sums_equal_one_sum_per_group() {
    let f = fx();
    let ct = f.encrypt(&vector(f.params.slots(), 3));
    let xs =
        f.ev.rotate_hoisted_extended(&ct, &[0, 1, 2, 3, 5], &f.gks)
            .unwrap();
    let terms = group_terms(xs.len());
    let pts = plaintexts(f, &terms, 500, ct.level(), true);
    let refs: Vec<Vec<&Plaintext>> = pts.iter().map(|g| g.iter().collect()).collect();
    let groups = pairs(&terms, &refs);
    let xr: Vec<&ExtendedCiphertext> = xs.iter().collect();
    let got = f.ev.dot_plain_extended_groups(&xr, &groups).unwrap();
    for (g, (idx, p)) in groups.iter().enumerate() {
        let exts: Vec<&ExtendedCiphertext> = idx.iter().map(|&t| xr[t]).collect();
        let want = f.ev.dot_plain_extended(&exts, p).unwrap();
        assert_same_bits(&format!("extended group {g}"), &got[g], &want);
    }
}

#[test]
fn malformed_groups_are_refused() {
    let f = fx();
    let n = f.params.slots();
    let scale = f.params.default_scale();
    let a = f.encrypt(&vector(n, 1));
    let b = f.encrypt(&vector(n, 2));
    let pt = f
        .enc
        .encode(&cplx(&vector(n, 3)), scale, a.level())
        .unwrap();
    let low = f.ev.drop_level(&b, 1).unwrap();
    let invalid = |r: Result<Vec<Ciphertext>>| matches!(r, Err(CkksError::InvalidOperand { .. }));
    // no ciphertext, no group, an empty group, counts that differ, an index out of the list
    assert!(invalid(f.ev.dot_plain_groups(&[], &[(&[0], &[&pt])])));
    assert!(invalid(f.ev.dot_plain_groups::<Plaintext>(&[&a], &[])));
    assert!(invalid(
        f.ev.dot_plain_groups::<Plaintext>(&[&a], &[(&[], &[])])
    ));
    assert!(invalid(f.ev.dot_plain_groups(&[&a], &[(&[0, 0], &[&pt])])));
    assert!(invalid(f.ev.dot_plain_groups(&[&a, &b], &[(&[2], &[&pt])])));
    // ciphertexts at different levels; a plaintext with P limbs where none belong
    assert!(matches!(
        f.ev.dot_plain_groups(&[&a, &low], &[(&[0], &[&pt])]),
        Err(CkksError::LevelMismatch { .. })
    ));
    let ext_pt = f
        .enc
        .encode_extended(&cplx(&vector(n, 4)), scale, a.level())
        .unwrap();
    assert!(invalid(f.ev.dot_plain_groups(&[&a], &[(&[0], &[&ext_pt])])));
    // extended sums need extended plaintexts
    let xs = f.ev.rotate_hoisted_extended(&a, &[1], &f.gks).unwrap();
    assert!(invalid(
        f.ev.dot_plain_extended_groups(&[&xs[0]], &[(&[0], &[&pt])])
    ));
}

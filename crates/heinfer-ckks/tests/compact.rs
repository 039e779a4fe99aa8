//! Plaintexts in the narrowest words their moduli allow (`CompactPlaintext`): the same grouped
//! sums, bit for bit, as the 64-bit plaintexts they came from, every residue kept.
mod common;
use common::*;
use heinfer_ckks::*;
use num_complex::Complex64;
use std::sync::OnceLock;

/// INSECURE, tests only: logN = 12 with 28-bit scale primes and a 34-bit `q_0` and special
/// prime, as latency programs choose them: limbs of both widths.
fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let lit = CkksParamsLiteral {
            log_n: 12,
            log_q: vec![34, 28, 28, 28],
            log_p: vec![34],
            log_scale: 28,
            digits: None,
            security: SecurityLevel::InsecureTestOnly,
        };
        Fixture::new(
            CkksParams::new_insecure_for_tests(lit).unwrap(),
            &[1, 2, 3, 5],
        )
    })
}

fn cplx(v: &[f64]) -> Vec<Complex64> {
    v.iter().map(|&d| Complex64::new(d, 0.0)).collect()
}

/// Groups over `xs` ciphertexts (overlapping, repeated, single terms; 20 terms cross the
/// kernels' lazy-reduction chunks) and one plaintext per term, wide.
fn groups(
    f: &Fixture,
    xs: usize,
    level: usize,
    extended: bool,
) -> Vec<(Vec<usize>, Vec<Plaintext>)> {
    let (n, scale) = (f.params.slots(), f.params.default_scale());
    let terms = [
        (0..xs).collect::<Vec<_>>(),
        vec![xs - 1],
        vec![0, 0, 2],
        (0..20).map(|t| (t * 7) % xs).collect(),
    ];
    terms
        .into_iter()
        .enumerate()
        .map(|(g, idx)| {
            let pts = (0..idx.len())
                .map(|t| {
                    let v = cplx(&vector(n, 1000 + 100 * g as u64 + t as u64));
                    if extended {
                        f.enc.encode_extended(&v, scale, level).unwrap()
                    } else {
                        f.enc.encode(&v, scale, level).unwrap()
                    }
                })
                .collect();
            (idx, pts)
        })
        .collect()
}

fn compacted(f: &Fixture, gs: &[(Vec<usize>, Vec<Plaintext>)]) -> Vec<Vec<CompactPlaintext>> {
    gs.iter()
        .map(|(_, pts)| {
            pts.iter()
                .map(|p| CompactPlaintext::new(&f.params, p).unwrap())
                .collect()
        })
        .collect()
}

fn pairs<'a, P>(
    gs: &'a [(Vec<usize>, Vec<Plaintext>)],
    refs: &'a [Vec<&'a P>],
) -> Vec<(&'a [usize], &'a [&'a P])> {
    gs.iter()
        .zip(refs)
        .map(|((t, _), p)| (t.as_slice(), p.as_slice()))
        .collect()
}

#[test]
fn compact_grouped_sums_are_the_wide_ones_bit_for_bit() {
    let f = fx();
    let n = f.params.slots();
    let two: Vec<_> = (0..5).map(|k| f.encrypt(&vector(n, 10 + k))).collect();
    let three: Vec<_> = two[..3].iter().map(|c| f.ev.square(c).unwrap()).collect();
    for xs in [&two[..], &three[..]] {
        let gs = groups(f, xs.len(), xs[0].level(), false);
        let compact = compacted(f, &gs);
        let wide_refs: Vec<Vec<&Plaintext>> = gs.iter().map(|(_, p)| p.iter().collect()).collect();
        let compact_refs: Vec<Vec<&CompactPlaintext>> =
            compact.iter().map(|g| g.iter().collect()).collect();
        let xr: Vec<&Ciphertext> = xs.iter().collect();
        let want = f.ev.dot_plain_groups(&xr, &pairs(&gs, &wide_refs)).unwrap();
        let got =
            f.ev.dot_plain_groups(&xr, &pairs(&gs, &compact_refs))
                .unwrap();
        for (g, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_same_bits(&format!("{} parts, group {g}", xs[0].parts().len()), a, b);
        }
    }
}

#[test]
fn compact_extended_sums_are_the_wide_ones_bit_for_bit() {
    let f = fx();
    let ct = f.encrypt(&vector(f.params.slots(), 3));
    let xs =
        f.ev.rotate_hoisted_extended(&ct, &[0, 1, 2, 3, 5], &f.gks)
            .unwrap();
    let gs = groups(f, xs.len(), ct.level(), true);
    let compact = compacted(f, &gs);
    let wide_refs: Vec<Vec<&Plaintext>> = gs.iter().map(|(_, p)| p.iter().collect()).collect();
    let compact_refs: Vec<Vec<&CompactPlaintext>> =
        compact.iter().map(|g| g.iter().collect()).collect();
    let xr: Vec<&ExtendedCiphertext> = xs.iter().collect();
    let want =
        f.ev.dot_plain_extended_groups(&xr, &pairs(&gs, &wide_refs))
            .unwrap();
    let got =
        f.ev.dot_plain_extended_groups(&xr, &pairs(&gs, &compact_refs))
            .unwrap();
    for (g, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_same_bits(&format!("extended group {g}"), a, b);
    }
}

#[test]
fn compacting_keeps_every_residue_and_narrows_the_small_moduli_only() {
    let f = fx();
    let v = cplx(&vector(f.params.slots(), 7));
    let scale = f.params.default_scale();
    let pt = f.enc.encode(&v, scale, 2).unwrap();
    let c = CompactPlaintext::new(&f.params, &pt).unwrap();
    // limbs q_0 (34 bits, 64-bit words), q_1, q_2 (28 bits, 32-bit words)
    assert_eq!((c.level(), c.limbs(), c.narrow_limbs()), (2, 3, 2));
    assert_eq!(c.bytes(), 4096 * (8 + 4 + 4));
    assert_eq!(c.widen().poly(), pt.poly());
    assert_eq!((c.scale(), c.params_id()), (pt.scale(), pt.params_id()));
    // extended: the 34-bit special prime stays wide
    let ext = f.enc.encode_extended(&v, scale, 1).unwrap();
    let ce = CompactPlaintext::new(&f.params, &ext).unwrap();
    assert_eq!((ce.limbs(), ce.narrow_limbs()), (3, 1));
    assert_eq!(ce.widen().poly(), ext.poly());
    // 35- and 50-bit primes: nothing to narrow, every residue kept
    let wide = presets::insecure_logn10().unwrap();
    let big = Encoder::new(&wide)
        .encode_real(&[0.5; 8], wide.default_scale(), wide.max_level())
        .unwrap();
    let cb = CompactPlaintext::new(&wide, &big).unwrap();
    assert_eq!(cb.narrow_limbs(), 0);
    assert_eq!(cb.widen().poly(), big.poly());
    // a plaintext of other parameters is refused
    assert!(CompactPlaintext::new(&f.params, &big).is_err());
}

#[test]
fn compact_plaintexts_of_other_parameters_or_levels_are_refused() {
    let f = fx();
    let n = f.params.slots();
    let a = f.encrypt(&vector(n, 1));
    let scale = f.params.default_scale();
    let pt1 = f.enc.encode(&cplx(&vector(n, 2)), scale, 1).unwrap();
    let low = CompactPlaintext::new(&f.params, &pt1).unwrap();
    assert!(matches!(
        f.ev.dot_plain_groups(&[&a], &[(&[0], &[&low])]),
        Err(CkksError::InvalidOperand { .. })
    ));
    let other = Fixture::new(
        CkksParams::new_insecure_for_tests(CkksParamsLiteral {
            log_q: vec![34, 29, 28, 28],
            ..f.params.literal().clone()
        })
        .unwrap(),
        &[],
    );
    let pt = other
        .enc
        .encode(&cplx(&vector(n, 3)), scale, a.level())
        .unwrap();
    let stranger = CompactPlaintext::new(&other.params, &pt).unwrap();
    assert!(f
        .ev
        .dot_plain_groups(&[&a], &[(&[0], &[&stranger])])
        .is_err());
}

#[test]
fn encoding_straight_into_compact_words_gives_the_residues_of_the_64_bit_encoding() {
    let f = fx();
    let scale = f.params.default_scale();
    let rows: Vec<Vec<Complex64>> = (0..5)
        .map(|r| cplx(&vector(f.params.slots(), 40 + r)))
        .collect();
    for (level, extended) in [(3, false), (3, true), (0, true), (1, false)] {
        let many = f
            .enc
            .encode_compact_many(&rows, scale, level, extended)
            .unwrap();
        assert_eq!(many.len(), rows.len());
        for (r, (c, z)) in many.iter().zip(&rows).enumerate() {
            let want = if extended {
                f.enc.encode_extended(z, scale, level).unwrap()
            } else {
                f.enc.encode(z, scale, level).unwrap()
            };
            let what = format!("row {r} level {level} extended {extended}");
            assert_eq!(c.widen().poly(), want.poly(), "{what}");
            assert_eq!(
                (c.level(), c.scale(), c.params_id()),
                (level, scale, f.params.id())
            );
            // a clone shares the words and outlives the batch
            let kept = c.clone();
            assert_eq!(kept.widen().poly(), want.poly(), "{what}");
        }
        let one = f
            .enc
            .encode_compact(&rows[1], scale, level, extended)
            .unwrap();
        assert_eq!(one.widen().poly(), many[1].widen().poly());
    }
    // the plaintexts of a batch outlive each other in any order
    let mut many = f.enc.encode_compact_many(&rows, scale, 2, true).unwrap();
    let last = many.pop().unwrap();
    drop(many);
    let want = f.enc.encode_extended(&rows[4], scale, 2).unwrap();
    assert_eq!(last.widen().poly(), want.poly());
    // one bad row fails the call; no rows, no plaintexts
    let mut bad = rows.clone();
    bad[3][7] = Complex64::new(f64::NAN, 0.0);
    assert!(matches!(
        f.enc.encode_compact_many(&bad, scale, 3, false),
        Err(CkksError::Encoding(_))
    ));
    let none: Vec<Vec<Complex64>> = Vec::new();
    assert!(f
        .enc
        .encode_compact_many(&none, scale, 3, false)
        .unwrap()
        .is_empty());
}

#[test]
fn compact_encoding_agrees_whichever_transform_a_narrow_limb_runs() {
    // a 32-bit prime beside 28-bit ones: tfhe-ntt's 32-bit transform has no Shoup products at
    // 32 bits and loses the timing there on AVX2 machines, so both of the encoder's narrow
    // paths (in the 32-bit words, in a 64-bit scratch limb) run wherever they differ
    let params = CkksParams::new_insecure_for_tests(CkksParamsLiteral {
        log_q: vec![34, 32, 28],
        ..fx().params.literal().clone()
    })
    .unwrap();
    let enc = Encoder::new(&params);
    let scale = params.default_scale();
    let rows: Vec<Vec<Complex64>> = (0..3)
        .map(|r| cplx(&vector(params.slots(), 60 + r)))
        .collect();
    for extended in [false, true] {
        let many = enc.encode_compact_many(&rows, scale, 2, extended).unwrap();
        for (c, z) in many.iter().zip(&rows) {
            let want = if extended {
                enc.encode_extended(z, scale, 2).unwrap()
            } else {
                enc.encode(z, scale, 2).unwrap()
            };
            assert_eq!(c.widen().poly(), want.poly(), "extended {extended}");
        }
    }
}

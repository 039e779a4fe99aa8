//! The batch-axis linear layer against the plaintext matrix product.

mod common;
use common::{params, Rng};
use heinfer_ckks::{Decryptor, Encoder, KeyGenerator};
use heinfer_kernels::linear::{GroupSpec, LinearLayer};
use heinfer_kernels::{KernelError, Packing};
use num_complex::Complex64;

/// Runs a random layer (two groups: a dense block and a sparse one) and compares with numpy-
/// style plaintext arithmetic.
fn check(log_q: Vec<u32>, digits: usize, weight_bits: i32, complex: bool) {
    let p = params(log_q);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let dec = Decryptor::new(&p, kg.secret_key()).unwrap();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let (k, m, slots) = (37usize, 9usize, p.slots());
    let level = p.max_level();
    let x: Vec<Vec<Complex64>> = (0..k)
        .map(|_| {
            (0..slots)
                .map(|_| Complex64::new(rng.next(), if complex { rng.next() } else { 0.0 }))
                .collect()
        })
        .collect();
    let scale = 2f64.powi(22);
    let cts: Vec<_> = x
        .iter()
        .map(|v| {
            kg.encrypt_symmetric(&enc.encode(v, scale, level).unwrap())
                .unwrap()
        })
        .collect();
    let ws = 2f64.powi(weight_bits);
    let w: Vec<f64> = (0..m * k).map(|_| (rng.next() * ws).round()).collect();
    let bias: Vec<f64> = (0..m).map(|_| rng.next()).collect();
    // rows 0..6 dense over all inputs, rows 6..8 over inputs {3, 5, 30}; row 8 in no group
    let sparse_cols = [3u32, 5, 30];
    let groups = vec![
        GroupSpec {
            rows: (0..6).collect(),
            cols: (0..k as u32).collect(),
            weights: w[..6 * k].to_vec(),
        },
        GroupSpec {
            rows: vec![6, 7],
            cols: sparse_cols.to_vec(),
            weights: [6usize, 7]
                .iter()
                .flat_map(|&r| sparse_cols.iter().map(move |&c| (r, c)))
                .map(|(r, c)| w[r * k + c as usize])
                .collect(),
        },
    ];
    let layer = LinearLayer::new(m, k, groups, ws, digits).unwrap();
    let out = layer
        .apply(
            &p,
            &cts,
            Some(&bias),
            if complex {
                Packing::Complex
            } else {
                Packing::Real
            },
        )
        .unwrap();
    assert_eq!(out.len(), m);
    let mut worst = 0f64;
    for j in 0..m {
        let got = enc.decode(&dec.decrypt(&out[j]).unwrap()).unwrap();
        let cols: Vec<usize> = match j {
            0..=5 => (0..k).collect(),
            6 | 7 => sparse_cols.iter().map(|&c| c as usize).collect(),
            _ => vec![],
        };
        for s in 0..slots {
            let mut want: Complex64 = cols.iter().map(|&c| x[c][s] * (w[j * k + c] / ws)).sum();
            want += Complex64::new(bias[j], if complex { bias[j] } else { 0.0 });
            worst = worst.max((got[s] - want).norm());
        }
    }
    assert!(worst < 1e-3, "worst error {worst}");
}

#[test]
fn one_digit_30_bit_primes_real() {
    check(vec![30, 30], 1, 12, false);
}

#[test]
fn one_digit_complex_bias() {
    check(vec![30, 30], 1, 12, true);
}

#[test]
fn two_digits_50_bit_prime() {
    check(vec![50], 2, 16, true);
}

#[test]
fn inexact_layers_are_refused() {
    let p = params(vec![50]);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let ct = kg
        .encrypt_symmetric(&enc.encode_real(&[1.0], 2f64.powi(20), 0).unwrap())
        .unwrap();
    // one digit of a 50-bit prime times weights of 2^10: 2^59 > 2^53
    let layer = LinearLayer::new(
        1,
        1,
        vec![GroupSpec {
            rows: vec![0],
            cols: vec![0],
            weights: vec![1024.0],
        }],
        1024.0,
        1,
    )
    .unwrap();
    assert!(matches!(
        layer.apply(&p, &[ct], None, Packing::Real),
        Err(KernelError::Inexact(_))
    ));
}

#[test]
fn malformed_layers_are_refused() {
    let g = |rows: Vec<u32>, cols: Vec<u32>, weights: Vec<f64>| {
        vec![GroupSpec {
            rows,
            cols,
            weights,
        }]
    };
    assert!(LinearLayer::new(2, 2, g(vec![0, 1], vec![0], vec![1.0]), 1.0, 1).is_err());
    assert!(LinearLayer::new(2, 2, g(vec![0], vec![2], vec![1.0]), 1.0, 1).is_err());
    assert!(LinearLayer::new(2, 2, g(vec![0], vec![0], vec![0.5]), 1.0, 1).is_err());
    assert!(LinearLayer::new(2, 2, g(vec![0], vec![0], vec![f64::NAN]), 1.0, 1).is_err());
    assert!(LinearLayer::new(2, 2, g(vec![0], vec![0], vec![1.0]), 1.0, 3).is_err());
    let two = vec![
        GroupSpec {
            rows: vec![0],
            cols: vec![0],
            weights: vec![1.0],
        },
        GroupSpec {
            rows: vec![0],
            cols: vec![1],
            weights: vec![1.0],
        },
    ];
    assert!(LinearLayer::new(2, 2, two, 1.0, 1).is_err());
}

/// The fused square: `Σ_k W_jk·x_k²` from 2-part inputs, 3-part outputs at scale `Δ²·Δ_w`.
#[test]
fn fused_square_matches_square_then_linear() {
    let p = params(vec![30, 30, 30]);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let dec = Decryptor::new(&p, kg.secret_key()).unwrap();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let (k, m, slots) = (20usize, 7usize, p.slots());
    let x: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..slots).map(|_| rng.next()).collect())
        .collect();
    let cts: Vec<_> = x
        .iter()
        .map(|v| {
            kg.encrypt_symmetric(&enc.encode_real(v, 2f64.powi(20), 2).unwrap())
                .unwrap()
        })
        .collect();
    let ws = 2f64.powi(10);
    let w: Vec<f64> = (0..m * k).map(|_| (rng.next() * ws).round()).collect();
    let layer = LinearLayer::new(
        m,
        k,
        vec![GroupSpec {
            rows: (0..m as u32).collect(),
            cols: (0..k as u32).collect(),
            weights: w.clone(),
        }],
        ws,
        1,
    )
    .unwrap();
    let out = layer.apply_squared(&p, &cts, None, Packing::Real).unwrap();
    assert_eq!(out[0].size(), 3);
    assert!((out[0].scale() - 2f64.powi(50)).abs() < 1.0);
    for j in 0..m {
        let got = enc.decode_real(&dec.decrypt(&out[j]).unwrap()).unwrap();
        for s in 0..slots {
            let want: f64 = (0..k).map(|c| x[c][s] * x[c][s] * w[j * k + c] / ws).sum();
            // inputs at Δ = 2^20 carry a fresh error of std ≈ 1.4e-4 per slot; squared (×2x)
            // and summed over 20 weighted terms, ≈ 4e-4 per output: the largest of 7 × slots
            // outputs reached 1.02e-3 in CI, so the bound is 4e-3 (10σ), far below a wrong term
            assert!(
                (got[s] - want).abs() < 4e-3,
                "output {j} slot {s}: {} vs {want}",
                got[s]
            );
        }
    }
    let three = layer.apply(
        &p,
        &out.iter().take(0).cloned().collect::<Vec<_>>(),
        None,
        Packing::Real,
    );
    assert!(three.is_err());
}

/// The fused chain equals linear → square → linear evaluated step by step (same residues):
/// 30-bit primes (the throughput presets) and 40-bit ones, real packing and complex packing
/// (the first bias times the packing's vector).
#[test]
fn square_chain_matches_the_steps() {
    for bits in [30, 40] {
        for packing in [Packing::Real, Packing::Complex] {
            square_chain_case(bits, packing);
        }
    }
}

fn square_chain_case(bits: u32, packing: Packing) {
    use heinfer_kernels::chain::square_chain;
    let p = params(vec![bits; 3]);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let dec = Decryptor::new(&p, kg.secret_key()).unwrap();
    let mut rng = Rng(0x0bad_cafe_f00d_1234);
    let (k, m1, m2, slots) = (12usize, 41usize, 4usize, p.slots());
    let x: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..slots).map(|_| rng.next()).collect())
        .collect();
    let cts: Vec<_> = x
        .iter()
        .map(|v| {
            kg.encrypt_symmetric(&enc.encode_real(v, 2f64.powi(20), 2).unwrap())
                .unwrap()
        })
        .collect();
    let w1: Vec<f64> = (0..m1 * k).map(|_| (rng.next() * 256.0).round()).collect();
    let w2: Vec<f64> = (0..m2 * m1).map(|_| (rng.next() * 256.0).round()).collect();
    let b1: Vec<f64> = (0..m1).map(|_| rng.next()).collect();
    let b2: Vec<f64> = (0..m2).map(|_| rng.next()).collect();
    // first layer: rows 0..40 dense; row 40 in no group (bias only); 41 rows square in two
    // calls of 32 rows and one of 9
    let first = LinearLayer::new(
        m1,
        k,
        vec![GroupSpec {
            rows: (0..40).collect(),
            cols: (0..k as u32).collect(),
            weights: w1[..40 * k].to_vec(),
        }],
        256.0,
        1,
    )
    .unwrap();
    let second = LinearLayer::new(
        m2,
        m1,
        vec![GroupSpec {
            rows: (0..m2 as u32).collect(),
            cols: (0..m1 as u32).collect(),
            weights: w2.clone(),
        }],
        256.0,
        1,
    )
    .unwrap();
    let fused = square_chain(&p, &first, &second, &cts, Some(&b1), Some(&b2), packing).unwrap();
    let mid = first.apply(&p, &cts, Some(&b1), packing).unwrap();
    let steps = second.apply_squared(&p, &mid, Some(&b2), packing).unwrap();
    assert_eq!(
        fused, steps,
        "{bits}-bit primes, {packing:?}: fused chain and step-by-step evaluation differ"
    );
    let unbiased = square_chain(&p, &first, &second, &cts, None, None, packing).unwrap();
    let mid = first.apply(&p, &cts, None, packing).unwrap();
    let steps = second.apply_squared(&p, &mid, None, packing).unwrap();
    assert_eq!(
        unbiased, steps,
        "{bits}-bit primes, {packing:?}, no bias: the two differ"
    );
    if packing != Packing::Real {
        return; // the decoded check below reads real slots
    }
    let got = enc.decode_real(&dec.decrypt(&fused[1]).unwrap()).unwrap();
    for s in 0..slots {
        let h: Vec<f64> = (0..m1)
            .map(|j| {
                if j < 40 {
                    (0..k).map(|c| x[c][s] * w1[j * k + c] / 256.0).sum::<f64>() + b1[j]
                } else {
                    b1[j]
                }
            })
            .collect();
        let want: f64 = (0..m1)
            .map(|j| h[j] * h[j] * w2[m1 + j] / 256.0)
            .sum::<f64>()
            + b2[1];
        assert!(
            (got[s] - want).abs() < 1e-2,
            "slot {s}: {} vs {want}",
            got[s]
        );
    }
}

/// Coefficient packing: items in coefficients; the layer and the bias act on each.
#[test]
fn coefficient_packing_bias() {
    let p = params(vec![30, 30]);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let dec = Decryptor::new(&p, kg.secret_key()).unwrap();
    let mut rng = Rng(77);
    let n = p.n();
    let x: Vec<Vec<f64>> = (0..5)
        .map(|_| (0..n).map(|_| rng.next()).collect())
        .collect();
    let cts: Vec<_> = x
        .iter()
        .map(|v| kg.encrypt_coefficients(&enc, v, 2f64.powi(24), 1).unwrap())
        .collect();
    let w: Vec<f64> = (0..10).map(|_| (rng.next() * 1024.0).round()).collect();
    let layer = LinearLayer::new(
        2,
        5,
        vec![GroupSpec {
            rows: vec![0, 1],
            cols: (0..5).collect(),
            weights: w.clone(),
        }],
        1024.0,
        1,
    )
    .unwrap();
    let out = layer
        .apply(&p, &cts, Some(&[0.25, -3.0]), Packing::Coefficients)
        .unwrap();
    for (j, b) in [0.25, -3.0].iter().enumerate() {
        let got = enc
            .decode_coefficients(&dec.decrypt(&out[j]).unwrap())
            .unwrap();
        for c in 0..n {
            let want: f64 = (0..5).map(|k| x[k][c] * w[j * 5 + k] / 1024.0).sum::<f64>() + b;
            assert!(
                (got[c] - want).abs() < 1e-4,
                "coefficient {c}: {} vs {want}",
                got[c]
            );
        }
    }
}

/// A product scale past 126 bits (a deep lazy segment: here 2^22 inputs × 2^110 weights) still
/// gets its bias: `round(b·Δ)` is reduced from its f64 mantissa and exponent.
#[test]
fn bias_at_a_product_scale_past_126_bits() {
    let p = params(vec![60, 60, 60]);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let dec = Decryptor::new(&p, kg.secret_key()).unwrap();
    let mut rng = Rng(5);
    let x: Vec<Vec<Complex64>> = (0..3)
        .map(|_| {
            (0..p.slots())
                .map(|_| Complex64::new(rng.next(), 0.0))
                .collect()
        })
        .collect();
    let cts: Vec<_> = x
        .iter()
        .map(|v| {
            kg.encrypt_symmetric(&enc.encode(v, 2f64.powi(22), 2).unwrap())
                .unwrap()
        })
        .collect();
    let ws = 2f64.powi(110);
    // weights 2^-108·{1, −2, 3}: a sum far below the bias at this precision
    let layer = LinearLayer::new(
        2,
        3,
        vec![GroupSpec {
            rows: vec![0, 1],
            cols: (0..3).collect(),
            weights: vec![4.0, -8.0, 12.0, 0.0, 4.0, -4.0],
        }],
        ws,
        2,
    )
    .unwrap();
    let bias = [0.75, -2.5];
    let out = layer.apply(&p, &cts, Some(&bias), Packing::Real).unwrap();
    for (j, &b) in bias.iter().enumerate() {
        assert!(out[j].scale() > 2f64.powi(126));
        let got = enc.decode(&dec.decrypt(&out[j]).unwrap()).unwrap();
        let worst = got.iter().map(|g| (g.re - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-6, "output {j}: off by {worst} from the bias {b}");
    }
}

/// A chain whose layers are exact for primes of 2^50 and above is refused with a clear error
/// (its squares are computed in f64, exact for odd primes below 2^50), not answered wrongly.
#[test]
fn square_chain_refuses_primes_its_f64_squares_cannot_hold() {
    use heinfer_kernels::chain::square_chain;
    let p = params(vec![52, 52]);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let cts: Vec<_> = (0..2)
        .map(|_| {
            kg.encrypt_symmetric(&enc.encode_real(&[0.5], 2f64.powi(20), 1).unwrap())
                .unwrap()
        })
        .collect();
    let layer = |out: usize, inp: usize| {
        LinearLayer::new(
            out,
            inp,
            vec![GroupSpec {
                rows: (0..out as u32).collect(),
                cols: (0..inp as u32).collect(),
                weights: vec![1.0; out * inp],
            }],
            1.0,
            1,
        )
        .unwrap()
    };
    let (first, second) = (layer(2, 2), layer(1, 2));
    assert!(
        first.is_exact_for(p.q()[0]),
        "the GEMM alone would be exact"
    );
    let err = square_chain(&p, &first, &second, &cts, None, None, Packing::Real).unwrap_err();
    assert!(err.to_string().contains("below 2^50"), "{err}");
}

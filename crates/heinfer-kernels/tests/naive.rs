//! The baseline linear layer: encoded once and applied (what the benchmarks time) gives the
//! same ciphertexts as encoding row by row, and both decrypt to the plaintext product.

use heinfer_ckks::{
    CkksParams, CkksParamsLiteral, Decryptor, Encoder, Evaluator, KeyGenerator, SecurityLevel,
};
use heinfer_kernels::naive;

fn params() -> CkksParams {
    CkksParams::new_insecure_for_tests(CkksParamsLiteral {
        log_n: 10,
        log_q: vec![40, 30],
        log_p: vec![],
        log_scale: 30,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    })
    .unwrap()
}

#[test]
fn encoded_once_equals_encoded_per_row_and_the_plaintext_product() {
    let p = params();
    let kg = KeyGenerator::new(&p).unwrap();
    let (enc, ev) = (Encoder::new(&p), Evaluator::new(&p));
    let dec = Decryptor::new(&p, kg.secret_key()).unwrap();
    let (k, m, slots) = (5usize, 4usize, p.slots());
    let x: Vec<Vec<f64>> = (0..k)
        .map(|i| {
            (0..slots)
                .map(|s| ((i * 7 + s) % 11) as f64 / 11.0 - 0.5)
                .collect()
        })
        .collect();
    let cts: Vec<_> = x
        .iter()
        .map(|v| {
            kg.encrypt_symmetric(&enc.encode_real(v, 2f64.powi(26), 1).unwrap())
                .unwrap()
        })
        .collect();
    let w: Vec<f64> = (0..m * k).map(|i| [0.0, 3.0, -2.0, 5.0][i % 4]).collect();
    let b: Vec<f64> = (0..m).map(|j| j as f64 / 4.0).collect();
    let rows = [0usize, 2, 3];
    for rescale_each in [false, true] {
        let layer = naive::Dense {
            weights: &w,
            bias: &b,
            weight_scale: 1.0,
            rescale_each,
        };
        let direct = naive::linear_rows(&ev, &enc, &cts, layer, &rows).unwrap();
        let encoded = naive::encode_rows(&ev, &enc, &cts, layer, &rows).unwrap();
        let applied = naive::apply_rows(&ev, &enc, &cts, &encoded, layer, &rows).unwrap();
        for ((d, a), &j) in direct.iter().zip(&applied).zip(&rows) {
            let (vd, va) = (
                enc.decode_real(&dec.decrypt(d).unwrap()).unwrap(),
                enc.decode_real(&dec.decrypt(a).unwrap()).unwrap(),
            );
            for s in 0..slots {
                let want: f64 = (0..k).map(|i| w[j * k + i] * x[i][s]).sum::<f64>() + b[j];
                assert!(
                    (va[s] - want).abs() < 1e-3,
                    "row {j} slot {s}: {} vs {want}",
                    va[s]
                );
                assert!((vd[s] - va[s]).abs() < 1e-3);
            }
        }
    }
    let layer = naive::Dense {
        weights: &w,
        bias: &b,
        weight_scale: 1.0,
        rescale_each: false,
    };
    let wrong = naive::apply_rows(&ev, &enc, &cts, &[], layer, &rows);
    assert!(
        wrong.is_err(),
        "a count of encoded rows that differs from the rows is refused"
    );
}

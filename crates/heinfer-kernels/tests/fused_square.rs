//! The fused square of inputs that are squares not relinearized (three parts): five-part
//! outputs, bit for bit those of squaring each input (`Evaluator::square`) and then applying
//! the layer; five-part inputs are refused.

mod common;
use common::{layer, Rng};
use heinfer_ckks::{Ciphertext, CkksParams, Encoder, Evaluator, KeyGenerator, MAX_PARTS};
use heinfer_kernels::Packing;

/// `k` squares not relinearized (three parts) at level 2.
fn squares(p: &CkksParams, k: usize, rng: &mut Rng) -> Vec<Ciphertext> {
    let kg = KeyGenerator::new(p).unwrap();
    let (enc, ev) = (Encoder::new(p), Evaluator::new(p));
    (0..k)
        .map(|_| {
            let v: Vec<f64> = (0..p.slots()).map(|_| rng.next()).collect();
            let ct = kg
                .encrypt_symmetric(&enc.encode_real(&v, 2f64.powi(20), 2).unwrap())
                .unwrap();
            ev.square(&ct).unwrap()
        })
        .collect()
}

#[test]
fn a_fused_square_of_three_parts_is_the_square_then_the_layer() {
    for (bits, digits) in [(30, 1), (50, 2)] {
        let p = common::params(vec![bits; 3]);
        let mut rng = Rng(0x5a_0e_3f + u64::from(bits));
        let cts = squares(&p, 9, &mut rng);
        let ev = Evaluator::new(&p);
        let fourth: Vec<Ciphertext> = cts.iter().map(|c| ev.square(c).unwrap()).collect();
        assert_eq!(fourth[0].size(), MAX_PARTS);
        let bias: Vec<f64> = (0..6).map(|_| rng.next()).collect();
        let lay = layer(6, 9, digits, &mut rng);
        for packing in [Packing::Real, Packing::Complex, Packing::Coefficients] {
            let fused = lay.apply_squared(&p, &cts, Some(&bias), packing).unwrap();
            let steps = lay.apply(&p, &fourth, Some(&bias), packing).unwrap();
            assert_eq!(fused[0].size(), MAX_PARTS);
            assert_eq!(fused[0].scale(), cts[0].scale().powi(2) * 256.0);
            assert!(
                fused == steps,
                "{bits}-bit primes, {digits} digit(s), {packing:?}"
            );
        }
        let refused = lay.apply_squared(&p, &fourth, None, Packing::Real);
        let msg = format!("{:?}", refused.unwrap_err());
        assert!(msg.contains("2- or 3-part inputs, got 5"), "{msg}");
    }
}

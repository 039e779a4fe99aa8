//! Garbled circuits: garbled evaluation equals plaintext evaluation (gates, random circuits,
//! every layer circuit exhaustively on small moduli), and the wire format refuses bad bytes.

use heinfer_2pc::gc::arith::{decode_outputs, garble_outputs, OutputTable};
use heinfer_2pc::gc::layers::{Layer, LayerCircuit};
use heinfer_2pc::gc::{
    evaluate, evaluate_labels, garble, Builder, Circuit, GarbledBatch, GarblerSecrets,
};
use heinfer_2pc::rng::{os_rng, seeded};
use heinfer_2pc::Block;
use rand_core::RngCore;

/// The evaluator's labels as an oblivious transfer would deliver them.
fn labels_for(secrets: &GarblerSecrets, bits: &[bool]) -> Vec<Block> {
    secrets
        .evaluator_zero_labels
        .iter()
        .zip(bits)
        .map(|(&l, &b)| if b { l ^ secrets.delta } else { l })
        .collect()
}

fn run_garbled(c: &Circuit, n: usize, g: &[bool], e: &[bool], seed: u64) -> Vec<bool> {
    let mut rng = seeded(seed);
    let (batch, secrets) = garble(c, n, g, &mut rng).unwrap();
    evaluate(c, &batch, &labels_for(&secrets, e)).unwrap()
}

#[test]
fn single_gates_follow_their_truth_tables() {
    for kind in 0..3 {
        let mut b = Builder::new();
        let x = b.garbler_input(1)[0];
        let y = b.evaluator_input(1)[0];
        let o = match kind {
            0 => b.and(x, y),
            1 => b.xor(x, y),
            _ => b.not(y),
        };
        let c = b.finish(vec![o]);
        // all four combinations as four instances of one batch, and again one by one
        let g = [false, false, true, true];
        let e = [false, true, false, true];
        let got = run_garbled(&c, 4, &g, &e, kind);
        for i in 0..4 {
            let want = c.eval_plain(&[g[i]], &[e[i]])[0];
            assert_eq!(got[i], want, "gate {kind} inputs {} {}", g[i], e[i]);
            assert_eq!(
                run_garbled(&c, 1, &[g[i]], &[e[i]], 100 + i as u64),
                vec![want]
            );
        }
    }
}

fn random_circuit(rng: &mut impl RngCore, gates: usize) -> Circuit {
    let mut b = Builder::new();
    let mut wires = b.garbler_input(4);
    wires.extend(b.evaluator_input(4));
    for _ in 0..gates {
        let a = wires[(rng.next_u32() as usize) % wires.len()];
        let c = wires[(rng.next_u32() as usize) % wires.len()];
        let o = match rng.next_u32() % 3 {
            0 => b.and(a, c),
            1 => b.xor(a, c),
            _ => b.not(a),
        };
        wires.push(o);
    }
    let outs = wires[wires.len() - 6..].to_vec();
    b.finish(outs)
}

#[test]
fn random_circuits_match_plain_evaluation() {
    let mut rng = seeded(7);
    for trial in 0..40 {
        let c = random_circuit(&mut rng, 60);
        let n = 1 + (trial % 5) * 3;
        let g: Vec<bool> = (0..4 * n).map(|_| rng.next_u32() & 1 == 1).collect();
        let e: Vec<bool> = (0..4 * n).map(|_| rng.next_u32() & 1 == 1).collect();
        let got = run_garbled(&c, n, &g, &e, trial as u64);
        let outs = c.outputs.len();
        for i in 0..n {
            let want = c.eval_plain(&g[4 * i..4 * i + 4], &e[4 * i..4 * i + 4]);
            assert_eq!(
                &got[outs * i..outs * (i + 1)],
                &want[..],
                "trial {trial} instance {i}"
            );
        }
    }
}

/// Garbles every instance of `lc` at once and compares with the reference, twice: decoding
/// the output bits, and as shares through the output table (`gc::arith`), the step's way.
/// Every pair `(c, s)` of shares mod `p`: the client's in the first vector, the server's in
/// the second.
fn all_share_pairs(p: u64) -> (Vec<u64>, Vec<u64>) {
    (0..p).flat_map(|a| (0..p).map(move |b| (a, b))).unzip()
}

fn check_layer(lc: &LayerCircuit, c: &[u64], s: &[u64], seed: u64) {
    let k = lc.arity();
    let n = c.len() / k;
    let mut rng = seeded(seed);
    let (batch, secrets) = garble(&lc.circuit, n, &lc.garbler_bits(s).unwrap(), &mut rng).unwrap();
    let labels = labels_for(&secrets, &lc.evaluator_bits(c).unwrap());
    let z = lc.decode(&evaluate(&lc.circuit, &batch, &labels).unwrap());
    let (table, rho) = garble_outputs(
        &secrets.output_zero_labels,
        secrets.delta,
        lc.output_bits(),
        lc.p,
        &mut rng,
    )
    .unwrap();
    let out = evaluate_labels(&lc.circuit, &batch, &labels).unwrap();
    let shares = decode_outputs(&out, &table, lc.p).unwrap();
    for i in 0..n {
        let want = lc.reference(&c[k * i..k * (i + 1)], &s[k * i..k * (i + 1)]);
        let what = format!(
            "p={} shift={} c={:?} s={:?}",
            lc.p,
            lc.shift,
            &c[k * i..k * (i + 1)],
            &s[k * i..k * (i + 1)]
        );
        assert_eq!(z[i], want, "decoded: {what}");
        let y = (shares[i] + rho[i] + lc.p - lc.output_offset()) % lc.p;
        assert_eq!(y, want, "shared: {what}");
    }
}

#[test]
fn relu_on_every_share_pair_of_small_moduli() {
    for p in [13u64, 31, 61] {
        for shift in [0usize, 1, 3] {
            let lc = LayerCircuit::new(Layer::Relu, p, shift).unwrap();
            let (c, s) = all_share_pairs(p);
            check_layer(&lc, &c, &s, p + shift as u64);
        }
    }
}

#[test]
fn relu_reference_is_relu_of_the_signed_value() {
    let lc = LayerCircuit::new(Layer::Relu, 61, 2).unwrap();
    // x = 20 → 5; x = −3 (58) → 0
    assert_eq!(lc.reference(&[15], &[5]), 5);
    assert_eq!(lc.reference(&[50], &[8]), 0);
}

#[test]
fn truncate_on_every_share_pair_of_small_moduli() {
    for p in [13u64, 31, 61] {
        for shift in [0usize, 1, 2, 3]
            .into_iter()
            .filter(|&k| ((p - 1) / 2) >> k > 0)
        {
            let lc = LayerCircuit::new(Layer::Truncate, p, shift).unwrap();
            let (c, s) = all_share_pairs(p);
            check_layer(&lc, &c, &s, 3 * p + shift as u64);
        }
    }
}

#[test]
fn truncate_reference_is_the_signed_floor_in_range() {
    let p = 61u64;
    let h = (p - 1) / 2;
    for shift in 0..4usize {
        let lc = LayerCircuit::new(Layer::Truncate, p, shift).unwrap();
        let range = (h >> shift << shift) as i64; // H = K·2^shift: −H ≤ x ≤ (p−1)/2 is exact
        for x in -range..=h as i64 {
            let share = 17u64;
            let c = (x.rem_euclid(p as i64) as u64 + p - share) % p;
            let want = x.div_euclid(1 << shift).rem_euclid(p as i64) as u64;
            assert_eq!(lc.reference(&[c], &[share]), want, "x={x} shift={shift}");
        }
    }
}

#[test]
fn clip_on_every_share_pair_of_small_moduli() {
    for p in [13u64, 31, 61] {
        let h = ((p - 1) / 2) as i64;
        for shift in [0usize, 1, 2]
            .into_iter()
            .filter(|&k| ((p - 1) / 2) >> k > 0)
        {
            let big_h = h >> shift << shift;
            for (lo, hi) in [
                (0, h / 2),
                (-big_h, big_h / 3),
                (1, 1),
                (-2, 3),
                (0, p as i64 - big_h - 1),
            ] {
                let lc = LayerCircuit::new(Layer::Clip { lo, hi }, p, shift).unwrap();
                let (c, s) = all_share_pairs(p);
                check_layer(&lc, &c, &s, 7 * p + shift as u64);
            }
        }
    }
}

#[test]
fn clip_reference_is_the_clamped_signed_floor_in_range() {
    let p = 61u64;
    let h = 30i64;
    for shift in 0..3usize {
        let big_h = h >> shift << shift; // −H ≤ x ≤ (p−1)/2 is exact
        for (lo, hi) in [(0i64, 12i64), (-8, 5), (0, 0)] {
            let lc = LayerCircuit::new(Layer::Clip { lo, hi }, p, shift).unwrap();
            for x in -big_h..=h {
                let share = 17u64;
                let c = (x.rem_euclid(p as i64) as u64 + p - share) % p;
                let want = x.clamp(lo, hi).div_euclid(1 << shift).rem_euclid(p as i64) as u64;
                assert_eq!(
                    lc.reference(&[c], &[share]),
                    want,
                    "x={x} [{lo}, {hi}] shift={shift}"
                );
            }
        }
    }
}

#[test]
fn maxpool_relu_on_every_window_of_a_small_modulus() {
    let p = 13u64;
    for (window, shift) in [(2usize, 0usize), (4, 1)] {
        let lc = LayerCircuit::new(Layer::MaxPoolRelu { window }, p, shift).unwrap();
        let (mut c, mut s) = (vec![], vec![]);
        let mut rng = seeded(window as u64);
        // every combination of reconstructed values (random splits into shares)
        let combos = (p as usize).pow(window as u32).min(30_000);
        for idx in 0..combos {
            let mut rest = idx;
            for _ in 0..window {
                let x = (rest % p as usize) as u64;
                rest /= p as usize;
                let share = rng.next_u64() % p;
                c.push((x + p - share) % p);
                s.push(share);
            }
        }
        check_layer(&lc, &c, &s, 5);
    }
}

#[test]
fn layers_at_20_and_36_bits_on_random_shares() {
    let mut rng = seeded(11);
    for (p, shift) in [
        (5_324_801u64, 0usize),
        (5_324_801, 10),
        (68_718_428_161, 12),
    ] {
        for layer in [
            Layer::Relu,
            Layer::MaxPoolRelu { window: 4 },
            Layer::Truncate,
            Layer::Clip { lo: 0, hi: 6 << 10 },
            Layer::Clip {
                lo: -5000,
                hi: 70_000,
            },
        ] {
            let lc = LayerCircuit::new(layer, p, shift).unwrap();
            let n = 300;
            let k = lc.arity();
            let c: Vec<u64> = (0..n * k).map(|_| rng.next_u64() % p).collect();
            let s: Vec<u64> = (0..n * k).map(|_| rng.next_u64() % p).collect();
            check_layer(&lc, &c, &s, p);
        }
    }
}

#[test]
fn and_gate_counts_are_the_documented_ones() {
    let b = 23; // bits of 5,324,801
    let ands = |layer, shift| {
        LayerCircuit::new(layer, 5_324_801, shift)
            .unwrap()
            .circuit
            .and_count()
    };
    assert_eq!(ands(Layer::Relu, 0), 5 * b + 1);
    assert_eq!(ands(Layer::Relu, 7), 5 * b + 1 - 7);
    assert_eq!(ands(Layer::Truncate, 3), 3 * b + 1 - 3);
    assert_eq!(
        ands(Layer::Clip { lo: 0, hi: 6 << 12 }, 4),
        7 * b + 1 - 2 * 4
    );
    let k = 4;
    assert_eq!(
        ands(Layer::MaxPoolRelu { window: k }, 5),
        (3 * b + 1) * k + 2 * b * (k - 1) + 2 * b - 5
    );
    let want = (3 * b + 1) * k + 2 * b * (k - 1) + 2 * b;
    assert_eq!(
        LayerCircuit::new(Layer::MaxPoolRelu { window: k }, 5_324_801, 0)
            .unwrap()
            .circuit
            .and_count(),
        want
    );
}

#[test]
fn bad_arguments_are_errors() {
    assert!(LayerCircuit::new(Layer::Relu, 16, 0).is_err());
    assert!(LayerCircuit::new(Layer::Relu, 13, 4).is_err());
    assert!(LayerCircuit::new(Layer::MaxPoolRelu { window: 1 }, 13, 0).is_err());
    assert!(LayerCircuit::new(Layer::Truncate, 13, 3).is_err()); // (13−1)/2 >> 3 = 0
    assert!(LayerCircuit::new(Layer::Clip { lo: 3, hi: 2 }, 61, 0).is_err()); // lo > hi
    assert!(LayerCircuit::new(Layer::Clip { lo: 0, hi: 31 }, 61, 0).is_err()); // hi ≥ p − H = 31
    assert!(LayerCircuit::new(Layer::Clip { lo: -29, hi: 0 }, 61, 2).is_err()); // lo < −H = −28
    assert!(LayerCircuit::new(Layer::Clip { lo: 0, hi: 1 }, 13, 3).is_err()); // K = 0
    let lc = LayerCircuit::new(Layer::Relu, 13, 0).unwrap();
    assert!(lc.evaluator_bits(&[13]).is_err());
    assert!(lc.garbler_bits(&[1, 13]).is_err());
    let (batch, secrets) = garble(
        &lc.circuit,
        2,
        &lc.garbler_bits(&[1, 2]).unwrap(),
        &mut seeded(1),
    )
    .unwrap();
    assert!(evaluate(&lc.circuit, &batch, &[Block::ZERO; 3]).is_err());
    assert!(evaluate(&lc.circuit, &batch.without_decoding(), &[Block::ZERO; 2]).is_err());
    // output tables: wrong widths and entries not below p are refused
    let (table, _) = garble_outputs(
        &secrets.output_zero_labels,
        secrets.delta,
        lc.output_bits(),
        13,
        &mut seeded(2),
    )
    .unwrap();
    let bytes = table.to_bytes(13);
    assert_eq!(
        OutputTable::from_bytes(&bytes, 2, lc.output_bits(), 13).unwrap(),
        table
    );
    assert!(OutputTable::from_bytes(&bytes[1..], 2, lc.output_bits(), 13).is_err());
    let mut big = bytes.clone();
    big[0] = 13;
    assert!(OutputTable::from_bytes(&big, 2, lc.output_bits(), 13).is_err());
    assert!(decode_outputs(&[Block::ZERO; 3], &table, 13).is_err());
}

#[test]
fn wire_format_round_trips_and_refuses_bad_bytes() {
    let lc = LayerCircuit::new(Layer::Relu, 31, 1).unwrap();
    let (batch, _) = garble(
        &lc.circuit,
        3,
        &lc.garbler_bits(&[1, 2, 3]).unwrap(),
        &mut seeded(2),
    )
    .unwrap();
    let bytes = batch.to_bytes();
    assert_eq!(
        GarbledBatch::from_bytes(&bytes, &lc.circuit, 3).unwrap(),
        batch
    );
    assert!(
        GarbledBatch::from_bytes(&bytes, &lc.circuit, 2).is_err(),
        "too many instances"
    );
    assert!(GarbledBatch::from_bytes(&bytes[..bytes.len() - 1], &lc.circuit, 3).is_err());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(GarbledBatch::from_bytes(&longer, &lc.circuit, 3).is_err());
    let mut magic = bytes.clone();
    magic[0] ^= 1;
    assert!(GarbledBatch::from_bytes(&magic, &lc.circuit, 3).is_err());
    let mut count = bytes.clone();
    count[4] = 0xff;
    assert!(GarbledBatch::from_bytes(&count, &lc.circuit, 1 << 20).is_err());
    let other = LayerCircuit::new(Layer::MaxPoolRelu { window: 2 }, 31, 1).unwrap();
    assert!(
        GarbledBatch::from_bytes(&bytes, &other.circuit, 3).is_err(),
        "another circuit"
    );
    for cut in [0, 5, 11, 12, 100] {
        assert!(GarbledBatch::from_bytes(&bytes[..cut.min(bytes.len())], &lc.circuit, 3).is_err());
    }
}

#[test]
fn garbling_draws_fresh_labels_from_the_os() {
    let lc = LayerCircuit::new(Layer::Relu, 31, 0).unwrap();
    let bits = lc.garbler_bits(&[1]).unwrap();
    let (a, sa) = garble(&lc.circuit, 1, &bits, &mut os_rng().unwrap()).unwrap();
    let (b, sb) = garble(&lc.circuit, 1, &bits, &mut os_rng().unwrap()).unwrap();
    assert_ne!(a.tables, b.tables);
    assert_ne!(sa.delta, sb.delta);
    assert!(sa.delta.lsb() && sb.delta.lsb());
}

/// Batches over several chunks (4,096 instances each), garbled and evaluated in parallel and
/// assembled in instance order: every instance still matches plaintext evaluation.
#[test]
fn batches_of_several_parallel_chunks_keep_instance_order() {
    let mut rng = seeded(11);
    let c = random_circuit(&mut rng, 40);
    let n = 2 * 4096 + 37;
    let g: Vec<bool> = (0..4 * n).map(|_| rng.next_u32() & 1 == 1).collect();
    let e: Vec<bool> = (0..4 * n).map(|_| rng.next_u32() & 1 == 1).collect();
    let got = run_garbled(&c, n, &g, &e, 3);
    let outs = c.outputs.len();
    for i in (0..n).step_by(97).chain([4095, 4096, 8191, 8192, n - 1]) {
        let want = c.eval_plain(&g[4 * i..4 * i + 4], &e[4 * i..4 * i + 4]);
        assert_eq!(&got[outs * i..outs * (i + 1)], &want[..], "instance {i}");
    }
}

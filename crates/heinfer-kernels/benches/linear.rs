//! Throughput of the batch-axis linear layer on CryptoNets' shapes:
//! `cargo bench -p heinfer-kernels --bench linear -- [logN] [limbs] [parts]`.
//! Prints milliseconds per layer and the effective rate of integer multiply-adds.

use heinfer_ckks::poly::RnsPoly;
use heinfer_ckks::{Ciphertext, CkksParams, CkksParamsLiteral, SecurityLevel};
use heinfer_kernels::linear::{GroupSpec, LinearLayer};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let log_n = *args.first().unwrap_or(&13) as u32;
    let limbs = *args.get(1).unwrap_or(&6);
    let parts = *args.get(2).unwrap_or(&3);
    let p = CkksParams::new(CkksParamsLiteral {
        log_n,
        log_q: vec![30; limbs],
        log_p: vec![],
        log_scale: 20,
        digits: None,
        security: SecurityLevel::Bits128,
    })
    .expect("parameters");
    let n = p.n();
    let mut s = 88172645463325252u64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut cts = |count: usize| -> Vec<Ciphertext> {
        (0..count)
            .map(|_| {
                let parts = (0..parts)
                    .map(|_| {
                        let mut poly = RnsPoly::zero(n, limbs);
                        for (i, x) in poly.data_mut().iter_mut().enumerate() {
                            *x = rnd() % p.q()[i / n];
                        }
                        poly
                    })
                    .collect();
                Ciphertext::from_parts(&p, parts, limbs - 1, 2f64.powi(20)).unwrap()
            })
            .collect()
    };
    let fc_in = cts(845);
    let fc = LinearLayer::new(
        100,
        845,
        vec![GroupSpec {
            rows: (0..100).collect(),
            cols: (0..845).collect(),
            weights: (0..84500)
                .map(|i| ((i * 7919) % 4001) as f64 - 2000.0)
                .collect(),
        }],
        2000.0,
        1,
    )
    .unwrap();
    // conv 5×5 stride 2, 5 channels, on 28×28 with padding 1 → 13×13 positions
    let conv_in = cts(784);
    let mut groups = Vec::new();
    for oy in 0..13 {
        for ox in 0..13 {
            let mut cols = Vec::new();
            for ky in 0..5 {
                for kx in 0..5 {
                    let (y, x) = (2 * oy + ky, 2 * ox + kx);
                    if (1..=28).contains(&y) && (1..=28).contains(&x) {
                        cols.push(((y - 1) * 28 + (x - 1)) as u32);
                    }
                }
            }
            let rows: Vec<u32> = (0..5).map(|c| (c * 169 + oy * 13 + ox) as u32).collect();
            let weights = (0..rows.len() * cols.len())
                .map(|i| ((i * 31) % 2001) as f64 - 1000.0)
                .collect();
            groups.push(GroupSpec {
                rows,
                cols,
                weights,
            });
        }
    }
    let conv = LinearLayer::new(845, 784, groups, 1000.0, 1).unwrap();
    let only_conv = std::env::var("ONLY_CONV").is_ok();
    for (name, layer, inputs) in [
        ("conv 28x28 5x5 s2 ->845", &conv, &conv_in),
        ("fc 845->100", &fc, &fc_in),
    ] {
        if only_conv && name.starts_with("fc") {
            continue;
        }
        let _ = layer.apply(&p, inputs, None, false).unwrap();
        let reps = 3;
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(layer.apply(&p, inputs, None, false).unwrap());
        }
        let secs = t.elapsed().as_secs_f64() / reps as f64;
        let fma = layer.nnz() as f64 * (parts * limbs * n) as f64;
        println!(
            "{name}: logN={log_n} limbs={limbs} parts={parts}: {:.1} ms, {:.2} G multiply-adds/s, {:.3} µs per image-slot",
            secs * 1e3,
            fma / secs / 1e9,
            secs * 1e6 / p.slots() as f64
        );
    }
}

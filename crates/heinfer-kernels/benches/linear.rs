//! Throughput of the batch-axis linear layer on CryptoNets' shapes, measured with criterion:
//! `cargo bench -p heinfer-kernels --bench linear [-- FILTER]`.
//!
//! Ids carry the shape and the parameters, e.g.
//! `linear/conv28x28_5x5_s2_to845/logN=13/limbs=6x30bit/parts=3/digits=1`; the throughput is
//! in f64 multiply-adds (`elem/s`: non-zero weights × parts × limbs × N × digits per layer).
//! `HEINFER_BENCH_LOGN` (default 13), `HEINFER_BENCH_LIMBS` (6), `HEINFER_BENCH_PARTS` (3),
//! `HEINFER_BENCH_PRIME_BITS` (30) and `HEINFER_BENCH_DIGITS` (1; 50-bit primes need 2)
//! change the parameters; `ONLY_CONV=1` skips the dense layer.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use heinfer_ckks::poly::RnsPoly;
use heinfer_ckks::{Ciphertext, CkksParams, CkksParamsLiteral, SecurityLevel};
use heinfer_kernels::linear::{GroupSpec, LinearLayer};
use heinfer_kernels::Packing;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../../heinfer-math/benches/support/env.rs"]
mod env;

/// The one number in environment variable `name`, or `default` when it is unset.
fn env_number(name: &str, default: usize) -> usize {
    env::env_list(name, &[default])[0]
}

fn layers(c: &mut Criterion) {
    let log_n = env_number("HEINFER_BENCH_LOGN", 13) as u32;
    let limbs = env_number("HEINFER_BENCH_LIMBS", 6);
    let parts = env_number("HEINFER_BENCH_PARTS", 3);
    // 50-bit primes need two digits per residue (CryptoNets-ReLU's 42-bit prime, MobileNetV2)
    let prime_bits = env_number("HEINFER_BENCH_PRIME_BITS", 30) as u32;
    let digits = env_number("HEINFER_BENCH_DIGITS", 1);
    let p = CkksParams::new(CkksParamsLiteral {
        log_n,
        log_q: vec![prime_bits; limbs],
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
        digits,
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
    let conv = LinearLayer::new(845, 784, groups, 1000.0, digits).unwrap();
    let only_conv = std::env::var("ONLY_CONV").is_ok();
    let mut g = c.benchmark_group("linear");
    for (name, layer, inputs) in [
        ("conv28x28_5x5_s2_to845", &conv, &conv_in),
        ("fc_845_to100", &fc, &fc_in),
    ] {
        if only_conv && name.starts_with("fc") {
            continue;
        }
        let fma = layer.nnz() as u64 * (parts * limbs * n * digits) as u64;
        g.throughput(Throughput::Elements(fma));
        g.bench_function(
            format!(
                "{name}/logN={log_n}/limbs={limbs}x{prime_bits}bit/parts={parts}/digits={digits}"
            ),
            |b| {
                b.iter(|| {
                    std::hint::black_box(layer.apply(&p, inputs, None, Packing::Real).unwrap())
                })
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = layers
}
criterion_main!(benches);

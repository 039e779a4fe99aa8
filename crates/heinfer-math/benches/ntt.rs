//! NTT and element-wise kernel timings, measured with criterion:
//! `cargo bench -p heinfer-math --bench ntt [-- FILTER]`.
//!
//! Ids carry the parameters and the kernel: `ntt/forward/fma/logN=14/q=40bit` against
//! `ntt/forward/tfhe-ntt/logN=14/q=40bit` (the plan's choice is printed first), and
//! `vecops/mul/Ifma/logN=14/q=40bit` for every element-wise kernel family this CPU runs
//! (portable, AVX-512, IFMA); a prime below 2^32 also times `ntt/forward/tfhe-ntt-u32/…`, the
//! 32-bit transform. `HEINFER_BENCH_LOGN` (default `13,14`) and `HEINFER_BENCH_BITS` (default
//! `30,40,50,60`) pick the ring degrees and prime sizes.
use criterion::{criterion_group, criterion_main, Criterion};
use heinfer_math::vecops;
use heinfer_math::{dot, primes::generate_primes, Modulus, NttPlan};
use std::hint::black_box;
use std::time::Duration;

#[path = "support/env.rs"]
mod env;
use env::env_list;

fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn kernels(c: &mut Criterion) {
    let families = vecops::available_kernels();
    let chosen = vecops::kernel();
    println!(
        "cpu: {} | element-wise families: {families:?} | chosen: {chosen:?}",
        cpu()
    );
    for logn in env_list("HEINFER_BENCH_LOGN", &[13, 14]) {
        let n = 1usize << logn;
        for bits in env_list("HEINFER_BENCH_BITS", &[30, 40, 50, 60]) {
            let tag = format!("logN={logn}/q={bits}bit");
            let q = generate_primes(&[bits as u32], 2 * n as u64, &[]).unwrap()[0];
            let plan = NttPlan::new(n, q).unwrap();
            println!("{tag}: the plan runs {:?}", plan.kernel());
            let m = Modulus::new(q);
            let bc = vecops::BarrettConst::new(q);
            let mut a: Vec<u64> = (0..n as u64).map(|i| (i * 7919) % q).collect();
            let b: Vec<u64> = (0..n as u64).map(|i| (i * 104729) % q).collect();
            let mut acc = vec![0u64; n];
            let mut acc1 = vec![0u64; n];

            let mut g = c.benchmark_group("ntt");
            if plan.forward_fma(&mut a.clone()) {
                g.bench_function(format!("forward/fma/{tag}"), |bn| {
                    bn.iter(|| plan.forward_fma(black_box(&mut a)))
                });
                g.bench_function(format!("inverse/fma/{tag}"), |bn| {
                    bn.iter(|| plan.inverse_fma(black_box(&mut a)))
                });
            }
            if plan.forward_u32(&mut a.clone()) {
                g.bench_function(format!("forward/tfhe-ntt-u32/{tag}"), |bn| {
                    bn.iter(|| plan.forward_u32(black_box(&mut a)))
                });
                g.bench_function(format!("inverse/tfhe-ntt-u32/{tag}"), |bn| {
                    bn.iter(|| plan.inverse_u32(black_box(&mut a)))
                });
            }
            g.bench_function(format!("forward/tfhe-ntt/{tag}"), |bn| {
                bn.iter(|| plan.forward_reference(black_box(&mut a)))
            });
            g.bench_function(format!("inverse/tfhe-ntt/{tag}"), |bn| {
                bn.iter(|| plan.inverse_reference(black_box(&mut a)))
            });
            g.bench_function(format!("mul_accumulate/tfhe-ntt/{tag}"), |bn| {
                bn.iter(|| plan.mul_accumulate(black_box(&mut acc), &a, &b))
            });
            g.finish();

            let w = 12345 % q;
            let ws = m.shoup(w);
            let digits: Vec<Vec<u64>> = (0..8u64)
                .map(|j| (0..n as u64).map(|i| (i * 31 + j * 977) % q).collect())
                .collect();
            let refs: Vec<&[u64]> = digits.iter().map(|v| v.as_slice()).collect();
            let mut g = c.benchmark_group("vecops");
            for &k in &families {
                vecops::set_kernel(k);
                let id = |op: &str| format!("{op}/{k:?}/{tag}");
                g.bench_function(id("mul"), |bn| {
                    bn.iter(|| vecops::mul_assign(black_box(&mut a), &b, &bc))
                });
                g.bench_function(id("mac"), |bn| {
                    bn.iter(|| vecops::mul_add_assign(black_box(&mut acc), &a, &b, &bc))
                });
                g.bench_function(id("shoup"), |bn| {
                    bn.iter(|| vecops::mul_scalar_assign(black_box(&mut a), w, ws, &m))
                });
                g.bench_function(id("shoup_mac"), |bn| {
                    bn.iter(|| vecops::mul_scalar_add_assign(black_box(&mut acc), &a, w, ws, &m))
                });
                g.bench_function(id("add"), |bn| {
                    bn.iter(|| vecops::add_assign(black_box(&mut a), &b, q))
                });
                g.bench_function(id("dot2/beta=4"), |bn| {
                    bn.iter(|| {
                        dot::dot2(&mut acc, &mut acc1, &refs[..4], &refs[4..], &refs[..4], &bc)
                    })
                });
                g.bench_function(id("shoup_sum/terms=2"), |bn| {
                    bn.iter(|| {
                        vecops::mul_scalar_sum_into(
                            black_box(&mut acc),
                            &refs[..2],
                            &[(w, ws); 2],
                            &m,
                        )
                    })
                });
                g.bench_function(id("dot2/beta=8"), |bn| {
                    bn.iter(|| dot::dot2(&mut acc, &mut acc1, &refs, &refs, &refs, &bc))
                });
                if k == vecops::VecKernel::Avx2 && (21..=30).contains(&bits) {
                    // the double-precision sums the 32-bit integer ones replace at this size
                    dot::set_narrow_sums(false);
                    g.bench_function(id("dot2-f64/beta=4"), |bn| {
                        bn.iter(|| {
                            dot::dot2(&mut acc, &mut acc1, &refs[..4], &refs[4..], &refs[..4], &bc)
                        })
                    });
                    g.bench_function(id("dot2-f64/beta=8"), |bn| {
                        bn.iter(|| dot::dot2(&mut acc, &mut acc1, &refs, &refs, &refs, &bc))
                    });
                    dot::set_narrow_sums(true);
                }
            }
            vecops::set_kernel(chosen);
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = kernels
}
criterion_main!(benches);

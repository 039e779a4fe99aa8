//! NTT and element-wise kernel timings at N = 2^13 and 2^14: FMA transforms against
//! `tfhe-ntt`, and every element-wise kernel family this CPU runs (portable, AVX-512, IFMA)
//! interleaved in the same process (rounds of A, B, C, …; the fastest round is reported, so a
//! burst of load on a shared machine favours no family): `cargo bench -p heinfer-math --bench ntt`.
use heinfer_math::vecops::{self, VecKernel};
use heinfer_math::{dot, primes::generate_primes, Modulus, NttPlan};
use std::time::Instant;

/// Mean µs per call over `reps` calls (after one warm-up call).
fn time<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / reps as f64
}

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

const OPS: [&str; 7] = [
    "mul",
    "mac",
    "shoup",
    "shoup_mac",
    "add",
    "dot2/β=4",
    "dot2/β=8",
];

fn main() {
    let families = vecops::available_kernels();
    println!(
        "cpu: {} | families: {families:?} | chosen: {:?}",
        cpu(),
        vecops::kernel()
    );
    let chosen = vecops::kernel();
    for logn in [13u32, 14] {
        let n = 1usize << logn;
        for bits in [40u32, 50, 60] {
            let q = generate_primes(&[bits], 2 * n as u64, &[]).unwrap()[0];
            let plan = NttPlan::new(n, q).unwrap();
            let m = Modulus::new(q);
            let bc = vecops::BarrettConst::new(q);
            let mut a: Vec<u64> = (0..n as u64).map(|i| (i * 7919) % q).collect();
            let b: Vec<u64> = (0..n as u64).map(|i| (i * 104729) % q).collect();
            let fwd = time(200, || {
                plan.forward_fma(&mut a);
            });
            let fwd_ref = time(200, || plan.forward_reference(&mut a));
            let inv_ref = time(200, || plan.inverse_reference(&mut a));
            let inv = time(200, || {
                plan.inverse_fma(&mut a);
            });
            let mut acc = vec![0u64; n];
            let mac_tfhe = time(200, || plan.mul_accumulate(&mut acc, &a, &b));
            let has_fma = plan.forward_fma(&mut a.clone());
            println!(
                "logN={logn} q={bits}-bit NTT (chosen {:?}): fma fwd {} inv {} | tfhe-ntt fwd {fwd_ref:.1} inv {inv_ref:.1} | tfhe-ntt mac {mac_tfhe:.1} µs",
                plan.kernel(),
                if has_fma { format!("{fwd:.1}") } else { "-".into() },
                if has_fma { format!("{inv:.1}") } else { "-".into() }
            );
            let w = 12345 % q;
            let ws = m.shoup(w);
            let digits: Vec<Vec<u64>> = (0..8u64)
                .map(|j| (0..n as u64).map(|i| (i * 31 + j * 977) % q).collect())
                .collect();
            let refs: Vec<&[u64]> = digits.iter().map(|v| v.as_slice()).collect();
            let mut acc1 = vec![0u64; n];
            let mut best = vec![[f64::INFINITY; OPS.len()]; families.len()];
            for _round in 0..5 {
                for (fi, &k) in families.iter().enumerate() {
                    vecops::set_kernel(k);
                    let t = [
                        time(100, || vecops::mul_assign(&mut a, &b, &bc)),
                        time(100, || vecops::mul_add_assign(&mut acc, &a, &b, &bc)),
                        time(100, || vecops::mul_scalar_assign(&mut a, w, ws, &m)),
                        time(100, || {
                            vecops::mul_scalar_add_assign(&mut acc, &a, w, ws, &m)
                        }),
                        time(100, || vecops::add_assign(&mut a, &b, q)),
                        time(50, || {
                            dot::dot2(&mut acc, &mut acc1, &refs[..4], &refs[4..], &refs[..4], &bc)
                        }),
                        time(50, || {
                            dot::dot2(&mut acc, &mut acc1, &refs, &refs, &refs, &bc)
                        }),
                    ];
                    for (o, v) in best[fi].iter_mut().zip(t) {
                        *o = o.min(v);
                    }
                }
            }
            for (fi, k) in families.iter().enumerate() {
                let cells: Vec<String> = OPS
                    .iter()
                    .zip(best[fi])
                    .map(|(name, v)| format!("{name} {v:.1}"))
                    .collect();
                println!("  logN={logn} q={bits}-bit {k:?}: {} µs", cells.join(", "));
            }
        }
    }
    vecops::set_kernel(chosen);
    let _ = VecKernel::Portable;
}

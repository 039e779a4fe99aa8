//! NTT and element-wise kernel timings at N = 2^14, FMA kernels against `tfhe-ntt` in the same
//! process: `cargo bench -p heinfer-math --bench ntt`.
use heinfer_math::{primes::generate_primes, vecops, Modulus, NttPlan};
use std::time::Instant;

fn time<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / reps as f64
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    println!("pulp V4 available: {:?}", tfhe_ntt_v4());
    let n = 1 << 14;
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
        let mul = time(200, || vecops::mul_assign(&mut a, &b, &bc));
        let mut acc = vec![0u64; n];
        let mac = time(200, || vecops::mul_add_assign(&mut acc, &a, &b, &bc));
        let mac2 = time(200, || plan.mul_accumulate(&mut acc, &a, &b));
        let w = 12345 % q;
        let sh = time(200, || vecops::mul_scalar_assign(&mut a, w, m.shoup(w), &m));
        let add = time(200, || vecops::add_assign(&mut a, &b, q));
        let has_fma = plan.forward_fma(&mut a.clone());
        println!("{bits}-bit N=2^14 (chosen: {:?}): fma fwd {} inv {}, tfhe-ntt fwd {fwd_ref:.1} inv {inv_ref:.1} us, mul {mul:.1}, mac {mac:.1}, tfhe mac {mac2:.1}, shoup {sh:.1}, add {add:.1}", plan.kernel(),
            if has_fma { format!("{fwd:.1}") } else { "-".into() }, if has_fma { format!("{inv:.1}") } else { "-".into() });
    }
}

fn tfhe_ntt_v4() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512cd")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

//! Primitive timings at the secure presets (std-timer harness, medians of repeated runs):
//! `cargo bench -p heinfer-ckks --bench ckks -- [logN] [threads] [op]`. With an `op`
//! (`encode`, `rotate`, `hoisted`, `mul_relin`) it loops that operation only, for profilers.
//! Names carry the parameters, e.g. `ckks/rotate/logN=14/L=7`.
use heinfer_ckks::*;

mod common;
use common::median_us;

fn main() {
    // `cargo bench` passes `--bench`; keep only positional arguments
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let logn: u32 = args.first().and_then(|s| s.parse().ok()).unwrap_or(14);
    let threads: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let only: Option<String> = args.get(2).cloned();
    let lit = match logn {
        13 => presets::pn13_qp218(),
        14 => presets::pn14_qp438(),
        _ => presets::pn15_qp881(),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let params = CkksParams::new(lit).unwrap();
        println!("{params:?}, threads={threads}");
        let tag = format!("logN={}/L={}", params.log_n(), params.max_level());
        let kg = KeyGenerator::new(&params).unwrap();
        let pk = kg.public_key().unwrap();
        let rlk = kg.relin_key().unwrap();
        let steps: Vec<i64> = (1..=16).collect();
        let gks = kg.galois_keys(&steps, true).unwrap();
        let enc = Encoder::new(&params);
        let encryptor = Encryptor::new(&params, &pk).unwrap();
        let decryptor = Decryptor::new(&params, kg.secret_key()).unwrap();
        let ev = Evaluator::new(&params);
        let x: Vec<f64> = (0..params.slots())
            .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
            .collect();
        let s = params.default_scale();
        let l = params.max_level();
        let reps = 20;
        let pt = enc.encode_real(&x, s, l).unwrap();
        let ct = encryptor.encrypt(&pt).unwrap();
        let prod = ev.mul_relin(&ct, &ct, &rlk).unwrap();
        if only.as_deref() == Some("encrypt") {
            for _ in 0..300 {
                encryptor.encrypt(&pt).unwrap();
            }
            return;
        }
        if only.as_deref() == Some("encode") {
            for _ in 0..1000 {
                enc.encode_real(&x, s, l).unwrap();
            }
            return;
        }
        if only.as_deref() == Some("hoisted") {
            for _ in 0..40 {
                ev.rotate_hoisted(&ct, &steps, &gks).unwrap();
            }
            return;
        }
        if only.as_deref() == Some("rotate") {
            for _ in 0..600 {
                ev.rotate(&ct, 1, &gks).unwrap();
            }
            return;
        }
        if only.as_deref() == Some("mul_relin") {
            for _ in 0..600 {
                ev.mul_relin(&ct, &ct, &rlk).unwrap();
            }
            return;
        }
        println!(
            "ckks/encode/{tag}: {:9.1} us",
            median_us(reps, || {
                enc.encode_real(&x, s, l).unwrap();
            })
        );
        println!(
            "ckks/encrypt/{tag}: {:9.1} us",
            median_us(reps, || {
                encryptor.encrypt(&pt).unwrap();
            })
        );
        let zs: Vec<num_complex::Complex64> = x
            .iter()
            .map(|&v| num_complex::Complex64::new(v, 0.0))
            .collect();
        println!(
            "ckks/encrypt_values_sk/{tag}: {:9.1} us",
            median_us(reps, || {
                kg.encrypt_values(&enc, &zs, s, l).unwrap();
            })
        );
        println!(
            "ckks/decrypt/{tag}: {:9.1} us",
            median_us(reps, || {
                decryptor.decrypt(&ct).unwrap();
            })
        );
        let dp = decryptor.decrypt(&ct).unwrap();
        println!(
            "ckks/decode/{tag}: {:9.1} us",
            median_us(reps, || {
                enc.decode(&dp).unwrap();
            })
        );
        println!(
            "ckks/add/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.add(&ct, &ct).unwrap();
            })
        );
        println!(
            "ckks/mul_plain/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.mul_plain(&ct, &pt).unwrap();
            })
        );
        println!(
            "ckks/mul_const/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.mul_const(&ct, 0.7, s).unwrap();
            })
        );
        println!(
            "ckks/mul_relin/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.mul_relin(&ct, &ct, &rlk).unwrap();
            })
        );
        println!(
            "ckks/rescale/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.rescale(&prod).unwrap();
            })
        );
        println!(
            "ckks/rotate/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.rotate(&ct, 1, &gks).unwrap();
            })
        );
        println!(
            "ckks/rotate_hoisted_per_rotation/{tag}/r=16: {:9.1} us",
            median_us(5, || {
                ev.rotate_hoisted(&ct, &steps, &gks).unwrap();
            }) / 16.0
        );
        println!(
            "ckks/conjugate/{tag}: {:9.1} us",
            median_us(reps, || {
                ev.conjugate(&ct, &gks).unwrap();
            })
        );
    });
}

//! Per-ciphertext client costs at a small ring (the client-aided ReLU network's parameters):
//! `cargo run --release -p heinfer-ckks --example client_ops -- [logN] [limbs] [bits]`.
use heinfer_ckks::*;
use num_complex::Complex64;
use std::time::Instant;

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (log_n, limbs, bits) = (
        *args.first().unwrap_or(&11),
        *args.get(1).unwrap_or(&1),
        *args.get(2).unwrap_or(&50),
    );
    let params = CkksParams::new(CkksParamsLiteral {
        log_n,
        log_q: vec![bits; limbs as usize],
        log_p: vec![],
        log_scale: bits - 1,
        digits: None,
        security: SecurityLevel::Bits128,
    })
    .unwrap();
    let kg = KeyGenerator::new(&params).unwrap();
    let enc = Encoder::new(&params);
    let dec = Decryptor::new(&params, kg.secret_key()).unwrap();
    let z: Vec<Complex64> = (0..params.slots())
        .map(|i| Complex64::new((i % 7) as f64 / 7.0, 0.5))
        .collect();
    let level = params.max_level();
    let reps = 2000;
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        t.elapsed().as_secs_f64() * 1e6 / reps as f64
    };
    let ct = kg.encrypt_values(&enc, &z, 2f64.powi(24), level).unwrap();
    let pt = dec.decrypt(&ct).unwrap();
    let mut s = heinfer_math::sampler::Sampler::from_os().unwrap();
    println!("logN={log_n} limbs={limbs} bits={bits}");
    println!(
        "  encrypt_values {:7.1} µs",
        time(&mut || drop(kg.encrypt_values(&enc, &z, 2f64.powi(24), level).unwrap()))
    );
    println!(
        "  encode         {:7.1} µs",
        time(&mut || drop(enc.encode(&z, 2f64.powi(24), level).unwrap()))
    );
    println!(
        "  gaussian       {:7.1} µs",
        time(&mut || drop(s.gaussian(params.n())))
    );
    println!(
        "  decrypt        {:7.1} µs",
        time(&mut || drop(dec.decrypt(&ct).unwrap()))
    );
    println!(
        "  decode         {:7.1} µs",
        time(&mut || drop(enc.decode(&pt).unwrap()))
    );
    let reals: Vec<f64> = (0..params.n()).map(|i| (i % 7) as f64 / 7.0).collect();
    println!(
        "  encrypt_coefficients {:7.1} µs",
        time(&mut || drop(
            kg.encrypt_coefficients(&enc, &reals, 2f64.powi(24), level)
                .unwrap()
        ))
    );
    println!(
        "  decode_coefficients  {:7.1} µs",
        time(&mut || drop(enc.decode_coefficients(&pt).unwrap()))
    );
    let mut a = vec![0u64; params.n()];
    let m = params.moduli()[0];
    println!(
        "  uniform (1 limb)     {:7.1} µs",
        time(&mut || s.uniform_into(&mut a, &m))
    );
}

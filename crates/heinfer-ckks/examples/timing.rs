//! Quick single-thread timings of the primitives at a preset: `cargo run --release --example timing -- 14`.
use heinfer_ckks::*;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn median_us<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let logn: u32 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(14);
    let only: Option<String> = std::env::args().nth(3);
    let threads: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(1);
    let lit = match logn {
        13 => presets::pn13_qp218(),
        14 => presets::pn14_qp438(),
        _ => presets::pn15_qp881(),
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let params = CkksParams::new(lit).unwrap();
        println!("{params:?}");
        let kg = KeyGenerator::new(&params).unwrap();
        let pk = kg.public_key().unwrap();
        let rlk = kg.relin_key().unwrap();
        let steps: Vec<i64> = (1..=16).collect();
        let gks = kg.galois_keys(&steps, true).unwrap();
        let enc = Encoder::new(&params);
        let encryptor = Encryptor::new(&params, &pk).unwrap();
        let decryptor = Decryptor::new(&params, kg.secret_key()).unwrap();
        let ev = Evaluator::new(&params);
        let x: Vec<f64> = (0..params.slots()).map(|i| ((i * 7919) % 1000) as f64 / 1000.0).collect();
        let s = params.default_scale();
        let l = params.max_level();
        let reps = 20;
        let pt = enc.encode_real(&x, s, l).unwrap();
        let ct = encryptor.encrypt(&pt).unwrap();
        let prod = ev.mul_relin(&ct, &ct, &rlk).unwrap();
        if only.as_deref() == Some("rotate") {
            for _ in 0..600 { ev.rotate(&ct, 1, &gks).unwrap(); }
            return;
        }
        if only.as_deref() == Some("mul_relin") {
            for _ in 0..600 { ev.mul_relin(&ct, &ct, &rlk).unwrap(); }
            return;
        }
        println!("encode     {:9.1} us", median_us(reps, || { enc.encode_real(&x, s, l).unwrap(); }));
        println!("encrypt    {:9.1} us", median_us(reps, || { encryptor.encrypt(&pt).unwrap(); }));
        println!("decrypt    {:9.1} us", median_us(reps, || { decryptor.decrypt(&ct).unwrap(); }));
        let dp = decryptor.decrypt(&ct).unwrap();
        println!("decode     {:9.1} us", median_us(reps, || { enc.decode(&dp).unwrap(); }));
        println!("add        {:9.1} us", median_us(reps, || { ev.add(&ct, &ct).unwrap(); }));
        println!("mul_plain  {:9.1} us", median_us(reps, || { ev.mul_plain(&ct, &pt).unwrap(); }));
        println!("mul_const  {:9.1} us", median_us(reps, || { ev.mul_const(&ct, 0.7, s).unwrap(); }));
        println!("mul_relin  {:9.1} us", median_us(reps, || { ev.mul_relin(&ct, &ct, &rlk).unwrap(); }));
        println!("rescale    {:9.1} us", median_us(reps, || { ev.rescale(&prod).unwrap(); }));
        println!("rotate     {:9.1} us", median_us(reps, || { ev.rotate(&ct, 1, &gks).unwrap(); }));
        println!("hoisted/16 {:9.1} us", median_us(5, || { ev.rotate_hoisted(&ct, &steps, &gks).unwrap(); }) / 16.0);
        println!("conjugate  {:9.1} us", median_us(reps, || { ev.conjugate(&ct, &gks).unwrap(); }));
        let c = ct.part(0).clone();
        let inner_ntt = || {};
        inner_ntt();
        let _ = c;
    });
}

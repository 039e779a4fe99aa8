//! CKKS primitives at the secure presets, measured with criterion:
//! `cargo bench -p heinfer-ckks --bench ckks [-- FILTER]`.
//!
//! Ids carry the parameters, e.g. `ckks/rotate/logN=14/L=7/threads=1`; the hoisted rotation
//! (`ckks/rotate_hoisted/…/r=16`) times 16 rotations of one ciphertext and reports them as
//! elements per second, so its time per rotation is the time divided by 16.
//! `HEINFER_BENCH_LOGN` (default `13,14`; `15` for PN15_QP881) and `HEINFER_BENCH_THREADS`
//! (default `1,2`) pick the ring degrees and pool sizes. Every operation runs through
//! `ThreadPool::install`, as the Python bindings run it. For a profiler, criterion's own
//! mode loops one benchmark without analysis:
//! `cargo bench -p heinfer-ckks --bench ckks -- --profile-time 10 rotate/logN=14/L=7/threads=1`.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use heinfer_ckks::*;
use std::hint::black_box;

mod common;
use common::{config, env_list};

fn primitives(c: &mut Criterion) {
    for logn in env_list("HEINFER_BENCH_LOGN", &[13, 14]) {
        for threads in env_list("HEINFER_BENCH_THREADS", &[1, 2]) {
            one_set(c, logn, threads);
        }
    }
}

fn one_set(c: &mut Criterion, logn: usize, threads: usize) {
    let lit = match logn {
        13 => presets::pn13_qp218(),
        14 => presets::pn14_qp438(),
        15 => presets::pn15_qp881(),
        other => panic!("HEINFER_BENCH_LOGN: no secure preset for logN = {other} (13, 14, 15)"),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    let on = |f: &mut (dyn FnMut() + Send)| pool.install(f);
    let params = CkksParams::new(lit).expect("secure preset");
    let tag = format!(
        "logN={}/L={}/threads={threads}",
        params.log_n(),
        params.max_level()
    );
    let steps: Vec<i64> = (1..=16).collect();
    let (kg, pk, rlk, gks) = pool.install(|| {
        let kg = KeyGenerator::new(&params).unwrap();
        let pk = kg.public_key().unwrap();
        let rlk = kg.relin_key().unwrap();
        let gks = kg.galois_keys(&steps, true).unwrap();
        (kg, pk, rlk, gks)
    });
    let enc = Encoder::new(&params);
    let encryptor = Encryptor::new(&params, &pk).unwrap();
    let decryptor = Decryptor::new(&params, kg.secret_key()).unwrap();
    let ev = Evaluator::new(&params);
    let x: Vec<f64> = (0..params.slots())
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
        .collect();
    let s = params.default_scale();
    let l = params.max_level();
    let pt = enc.encode_real(&x, s, l).unwrap();
    let ct = pool.install(|| encryptor.encrypt(&pt).unwrap());
    let prod = pool.install(|| ev.mul_relin(&ct, &ct, &rlk).unwrap());
    let dp = decryptor.decrypt(&ct).unwrap();

    let mut g = c.benchmark_group("ckks");
    let mut bench = |name: &str, f: &mut (dyn FnMut() + Send)| {
        g.bench_function(format!("{name}/{tag}"), |b| b.iter(|| on(&mut *f)));
    };
    bench("encode", &mut || {
        black_box(enc.encode_real(&x, s, l).unwrap());
    });
    bench("encrypt", &mut || {
        black_box(encryptor.encrypt(&pt).unwrap());
    });
    bench("decrypt", &mut || {
        black_box(decryptor.decrypt(&ct).unwrap());
    });
    bench("decode", &mut || {
        black_box(enc.decode(&dp).unwrap());
    });
    bench("add", &mut || {
        black_box(ev.add(&ct, &ct).unwrap());
    });
    bench("mul_plain", &mut || {
        black_box(ev.mul_plain(&ct, &pt).unwrap());
    });
    bench("mul_const", &mut || {
        black_box(ev.mul_const(&ct, 0.7, s).unwrap());
    });
    bench("mul_relin", &mut || {
        black_box(ev.mul_relin(&ct, &ct, &rlk).unwrap());
    });
    bench("rescale", &mut || {
        black_box(ev.rescale(&prod).unwrap());
    });
    bench("rotate", &mut || {
        black_box(ev.rotate(&ct, 1, &gks).unwrap());
    });
    bench("conjugate", &mut || {
        black_box(ev.conjugate(&ct, &gks).unwrap());
    });
    g.throughput(Throughput::Elements(steps.len() as u64));
    g.bench_function(format!("rotate_hoisted/{tag}/r={}", steps.len()), |b| {
        b.iter(|| on(&mut || drop(black_box(ev.rotate_hoisted(&ct, &steps, &gks).unwrap()))))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = primitives
}
criterion_main!(benches);

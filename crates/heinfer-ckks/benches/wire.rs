//! Timings of the wire format's residue packing, measured with criterion:
//! `cargo bench -p heinfer-ckks --bench wire`. Throughput is reported in bytes of output
//! (packing) or input (unpacking).
//!
//! * `pack`/`unpack` `bits=B`: one plaintext at logN = 13 with six `B`-bit primes
//!   (6 × 8192 residues), through [`plaintext_to_bytes`] / [`plaintext_from_bytes`]: almost
//!   all of that time is the bit packing (the header is a few bytes).
//! * `ct_to_bytes`/`ct_from_bytes`: a seed-compressed fresh symmetric ciphertext at logN = 13
//!   with six 30-bit primes (one packed part + a seed; decoding also expands the seed).
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use heinfer_ckks::serialize::*;
use heinfer_ckks::*;
use std::hint::black_box;

mod common;
use common::config;

fn params(bits: u32) -> CkksParams {
    CkksParams::new_insecure_for_tests(CkksParamsLiteral {
        log_n: 13,
        log_q: vec![bits; 6],
        log_p: vec![],
        log_scale: bits - 5,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    })
    .unwrap()
}

fn wire(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire");
    for bits in [30u32, 50] {
        let p = params(bits);
        let enc = Encoder::new(&p);
        let x: Vec<f64> = (0..p.slots()).map(|i| (i % 97) as f64 / 97.0).collect();
        // an NTT-domain plaintext: residues spread over all of [0, q)
        let pt = enc
            .encode_real(&x, p.default_scale(), p.max_level())
            .unwrap();
        let bytes = plaintext_to_bytes(&p, &pt).unwrap();
        assert_eq!(
            plaintext_from_bytes(&p, &bytes, DEFAULT_MAX_BYTES).unwrap(),
            pt
        );
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("pack/bits={bits}/6x8192"), |b| {
            b.iter(|| black_box(plaintext_to_bytes(&p, black_box(&pt)).unwrap()))
        });
        g.bench_function(format!("unpack/bits={bits}/6x8192"), |b| {
            b.iter(|| {
                black_box(plaintext_from_bytes(&p, black_box(&bytes), DEFAULT_MAX_BYTES).unwrap())
            })
        });
    }
    let p = params(30);
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let x: Vec<f64> = (0..p.slots()).map(|i| (i % 89) as f64 / 89.0).collect();
    let pt = enc
        .encode_real(&x, p.default_scale(), p.max_level())
        .unwrap();
    let ct = kg.encrypt_symmetric(&pt).unwrap();
    let bytes = ciphertext_to_bytes(&p, &ct).unwrap();
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("ct_to_bytes/seeded/bits=30/6x8192", |b| {
        b.iter(|| black_box(ciphertext_to_bytes(&p, black_box(&ct)).unwrap()))
    });
    g.bench_function("ct_from_bytes/seeded/bits=30/6x8192", |b| {
        b.iter(|| {
            black_box(ciphertext_from_bytes(&p, black_box(&bytes), DEFAULT_MAX_BYTES).unwrap())
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = wire
}
criterion_main!(benches);

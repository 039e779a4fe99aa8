//! Buffers that held secret-derived data (encryption's `u` and errors, `a·s`, key-generation
//! temporaries) come back to the scratch pool zeroed; public buffers are not wiped (the
//! control that shows the check can see data).
mod common;
use common::*;
use heinfer_ckks::scratch::{self, PoolStats};
use heinfer_ckks::*;
use num_complex::Complex64;
use rayon::ThreadPoolBuilder;

/// Runs `f` on a fresh pool of `threads` workers and returns the sum of their scratch pools.
fn pooled_after<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> (T, PoolStats) {
    let pool = ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let out = pool.install(f);
    let total =
        pool.broadcast(|_| scratch::stats())
            .into_iter()
            .fold(PoolStats::default(), |a, s| PoolStats {
                buffers: a.buffers + s.buffers,
                words: a.words + s.words,
                nonzero_words: a.nonzero_words + s.nonzero_words,
            });
    (out, total)
}

#[test]
fn the_pool_holds_only_zeroed_buffers_after_encryption_and_key_generation() {
    let params = presets::insecure_logn10().unwrap();
    let kg = KeyGenerator::new(&params).unwrap();
    let pk = kg.public_key().unwrap();
    let enc = Encoder::new(&params);
    let x = vector(params.slots(), 3);
    let level = params.max_level();
    let pt = enc.encode_real(&x, params.default_scale(), level).unwrap();
    let encryptor = Encryptor::new(&params, &pk).unwrap();
    let decryptor = Decryptor::new(&params, kg.secret_key()).unwrap();
    let z: Vec<Complex64> = x.iter().map(|&v| Complex64::new(v, 0.0)).collect();

    for threads in [1, 2] {
        let (ct, s) = pooled_after(threads, || encryptor.encrypt(&pt).unwrap());
        assert!(
            s.buffers > 0,
            "public-key encryption pooled nothing ({threads} threads)"
        );
        assert_eq!(
            s.nonzero_words, 0,
            "public-key encryption, {threads} threads: {s:?}"
        );
        let out = enc.decode_real(&decryptor.decrypt(&ct).unwrap()).unwrap();
        assert!(
            (out[0] - x[0]).abs() < 1e-3,
            "the ciphertext is still right"
        );

        let (_, s) = pooled_after(threads, || kg.encrypt_symmetric(&pt).unwrap());
        assert!(s.buffers > 0 && s.nonzero_words == 0, "symmetric: {s:?}");

        let (_, s) = pooled_after(threads, || {
            kg.encrypt_values(&enc, &z, params.default_scale(), level)
                .unwrap()
        });
        assert!(
            s.buffers > 0 && s.nonzero_words == 0,
            "encrypt_values: {s:?}"
        );

        let (_, s) = pooled_after(threads, || {
            (kg.relin_key().unwrap(), kg.galois_keys(&[1], true).unwrap())
        });
        assert!(
            s.buffers > 0 && s.nonzero_words == 0,
            "key generation: {s:?}"
        );
    }
}

#[test]
fn public_buffers_are_pooled_as_they_are() {
    // the control: a rotation returns ciphertext-sized public buffers unwiped, and the
    // statistics see their contents
    let f = Fixture::new(presets::insecure_logn10().unwrap(), &[1]);
    let ct = f.encrypt(&vector(f.params.slots(), 5));
    let (_, s) = pooled_after(1, || f.ev.rotate(&ct, 1, &f.gks).unwrap());
    assert!(s.nonzero_words > 0, "{s:?}");
}

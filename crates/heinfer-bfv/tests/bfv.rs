//! BFV against plaintext arithmetic mod p: encoding, encryption (public and secret key),
//! exact decryption, additions, plaintext and scalar products, rotations (plain, hoisted, row
//! swap), dot products, flooding, serialization, and the errors of bad parameters and bad
//! ciphertexts. Insecure N = 1024 parameters except where the secure preset is named.

use heinfer_bfv::{
    ciphertext_from_bytes, ciphertext_to_bytes, flood_bits, plain_primes, presets, BatchEncoder,
    BfvError, BfvEvaluator, BfvParams, BfvParamsLiteral, Decryptor, Rerandomizer,
};
use heinfer_ckks::{Ciphertext, Encryptor, Evaluator, KeyGenerator, SecurityLevel};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

struct Setup {
    params: BfvParams,
    kg: KeyGenerator,
    enc: BatchEncoder,
    ev: BfvEvaluator,
    dec: Decryptor,
    pk_enc: Encryptor,
}

fn setup() -> Setup {
    let params = presets::insecure_logn10().unwrap();
    let kg = KeyGenerator::new(params.rlwe()).unwrap();
    let pk_enc = Encryptor::new(params.rlwe(), &kg.public_key().unwrap()).unwrap();
    Setup {
        enc: BatchEncoder::new(&params),
        ev: BfvEvaluator::new(&params),
        dec: Decryptor::new(&params, kg.secret_key()).unwrap(),
        params,
        kg,
        pk_enc,
    }
}

fn random_slots(rng: &mut ChaCha20Rng, n: usize, p: u64) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64() % p).collect()
}

impl Setup {
    fn p(&self) -> u64 {
        self.params.plain_modulus()
    }
    fn encrypt(&self, v: &[u64]) -> Ciphertext {
        self.pk_enc.encrypt(&self.enc.encode(v).unwrap()).unwrap()
    }
    fn encrypt_sk(&self, v: &[u64]) -> Ciphertext {
        self.kg
            .encrypt_symmetric(&self.enc.encode(v).unwrap())
            .unwrap()
    }
}

#[test]
fn slots_round_trip_through_coefficients() {
    let s = setup();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let v = random_slots(&mut rng, s.params.slots(), s.p());
    let c = s.enc.slots_to_coefficients(&v).unwrap();
    assert_ne!(c, v);
    assert_eq!(s.enc.coefficients_to_slots(c), v);
}

#[test]
fn multipliers_encoded_together_equal_those_encoded_one_by_one() {
    let s = setup();
    let (n, p) = (s.params.n(), s.params.plain_modulus());
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let cols = n / 2;
    let rows: Vec<i64> = (0..3 * cols)
        .map(|_| (rng.next_u64() % p) as i64 - (p / 2) as i64)
        .collect();
    let together = s.enc.encode_multipliers(&rows, cols).unwrap();
    assert_eq!(together.len(), 3);
    for (m, row) in together.iter().zip(rows.chunks(cols)) {
        assert_eq!(
            *m,
            s.enc.encode_multiplier(&s.enc.reduce_signed(row)).unwrap()
        );
    }
    assert!(s.enc.encode_multipliers(&rows[..cols + 1], cols).is_err());
    assert!(s.enc.encode_multipliers(&[0; 4], n + 1).is_err());
}

#[test]
fn constant_slots_are_a_constant_polynomial() {
    // every slot 7 ⇔ m(X) = 7: the slot map covers all N roots exactly once
    let s = setup();
    let c = s
        .enc
        .slots_to_coefficients(&vec![7; s.params.slots()])
        .unwrap();
    assert_eq!(c[0], 7);
    assert!(c[1..].iter().all(|&x| x == 0));
}

#[test]
fn public_and_secret_key_encryptions_decrypt_exactly() {
    let s = setup();
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let v = random_slots(&mut rng, s.params.slots(), s.p());
    for ct in [s.encrypt(&v), s.encrypt_sk(&v)] {
        assert_eq!(s.dec.decrypt(&ct).unwrap(), v);
        let budget = s.dec.noise_budget(&ct).unwrap();
        // log2 Q ≈ 100: the invariant noise (p·e − (Q mod p)·m)/Q of a fresh encryption is
        // dominated by (Q mod p)·m < p² = 2^40, which leaves about 59 bits
        assert!(budget > 55.0 && budget < 62.0, "budget {budget}");
    }
    let extremes = vec![s.p() - 1; 10];
    assert_eq!(
        &s.dec.decrypt(&s.encrypt(&extremes)).unwrap()[..10],
        &extremes[..]
    );
}

#[test]
fn additions_and_products_match_slot_arithmetic_mod_p() {
    let s = setup();
    let p = s.p();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let n = s.params.slots();
    let (a, b, w) = (
        random_slots(&mut rng, n, p),
        random_slots(&mut rng, n, p),
        random_slots(&mut rng, n, p),
    );
    let (ca, cb) = (s.encrypt(&a), s.encrypt_sk(&b));
    let m = |x: u64, y: u64| (x as u128 * y as u128 % p as u128) as u64;
    let sum: Vec<u64> = a.iter().zip(&b).map(|(x, y)| (x + y) % p).collect();
    assert_eq!(s.dec.decrypt(&s.ev.add(&ca, &cb).unwrap()).unwrap(), sum);
    let diff: Vec<u64> = a.iter().zip(&b).map(|(x, y)| (x + p - y) % p).collect();
    assert_eq!(s.dec.decrypt(&s.ev.sub(&ca, &cb).unwrap()).unwrap(), diff);
    let plus: Vec<u64> = a.iter().zip(&w).map(|(x, y)| (x + y) % p).collect();
    assert_eq!(
        s.dec
            .decrypt(&s.ev.add_plain(&ca, &s.enc.encode(&w).unwrap()).unwrap())
            .unwrap(),
        plus
    );
    let prod: Vec<u64> = a.iter().zip(&w).map(|(&x, &y)| m(x, y)).collect();
    let cp =
        s.ev.mul_plain(&ca, &s.enc.encode_multiplier(&w).unwrap())
            .unwrap();
    assert_eq!(s.dec.decrypt(&cp).unwrap(), prod);
    // a full-size multiplier costs about log2(N·p/2) ≈ 29 bits of budget, no more
    let lost = s.dec.noise_budget(&ca).unwrap() - s.dec.noise_budget(&cp).unwrap();
    assert!(lost > 15.0 && lost < 35.0, "mul_plain used {lost} bits");
    for c in [0, 1, 5, p - 1, p / 2, p / 2 + 1] {
        let want: Vec<u64> = a.iter().map(|&x| m(x, c)).collect();
        assert_eq!(
            s.dec.decrypt(&s.ev.mul_scalar(&ca, c).unwrap()).unwrap(),
            want,
            "scalar {c}"
        );
    }
}

#[test]
fn dot_products_sum_slot_products() {
    let s = setup();
    let p = s.p();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let n = s.params.slots();
    let xs: Vec<Vec<u64>> = (0..5).map(|_| random_slots(&mut rng, n, p)).collect();
    let ws: Vec<Vec<u64>> = (0..5).map(|_| random_slots(&mut rng, n, p)).collect();
    let cts: Vec<Ciphertext> = xs.iter().map(|x| s.encrypt(x)).collect();
    let ms: Vec<_> = ws
        .iter()
        .map(|w| s.enc.encode_multiplier(w).unwrap())
        .collect();
    let got =
        s.ev.dot_plain(
            &cts.iter().collect::<Vec<_>>(),
            &ms.iter().collect::<Vec<_>>(),
        )
        .unwrap();
    let want: Vec<u64> = (0..n)
        .map(|j| {
            (0..5).fold(0u128, |acc, i| {
                (acc + xs[i][j] as u128 * ws[i][j] as u128) % p as u128
            }) as u64
        })
        .collect();
    assert_eq!(s.dec.decrypt(&got).unwrap(), want);
}

fn rotate_rows(v: &[u64], k: i64) -> Vec<u64> {
    let h = v.len() / 2;
    let k = k.rem_euclid(h as i64) as usize;
    let mut out = Vec::with_capacity(v.len());
    for row in v.chunks(h) {
        out.extend(row[k..].iter().chain(&row[..k]));
    }
    out
}

#[test]
fn rotations_rotate_each_row_and_swap_exchanges_them() {
    let s = setup();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let n = s.params.slots();
    let v = random_slots(&mut rng, n, s.p());
    let ct = s.encrypt(&v);
    let steps = [1i64, 3, -2, 100, 511];
    let keys = s.kg.galois_keys(&steps, true).unwrap();
    for &k in &steps {
        let r = s.ev.rotate_rows(&ct, k, &keys).unwrap();
        assert_eq!(s.dec.decrypt(&r).unwrap(), rotate_rows(&v, k), "step {k}");
    }
    let hoisted = s.ev.rotate_rows_hoisted(&ct, &steps, &keys).unwrap();
    for (r, &k) in hoisted.iter().zip(&steps) {
        assert_eq!(
            s.dec.decrypt(r).unwrap(),
            rotate_rows(&v, k),
            "hoisted step {k}"
        );
    }
    let swapped: Vec<u64> = v[n / 2..].iter().chain(&v[..n / 2]).copied().collect();
    assert_eq!(
        s.dec.decrypt(&s.ev.swap_rows(&ct, &keys).unwrap()).unwrap(),
        swapped
    );
    assert!(matches!(
        s.ev.rotate_rows(&ct, 2, &keys),
        Err(BfvError::Engine(heinfer_ckks::CkksError::MissingGaloisKey(
            _
        )))
    ));
}

#[test]
fn flooding_keeps_the_message_and_spends_the_budget() {
    let s = setup();
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let v = random_slots(&mut rng, s.params.slots(), s.p());
    let ct =
        s.ev.mul_plain(&s.encrypt(&v), &s.enc.encode_multiplier(&v).unwrap())
            .unwrap();
    let rr = Rerandomizer::new(&s.params, &s.kg.public_key().unwrap()).unwrap();
    let max = rr.max_flood_bits();
    assert!(max >= 55, "Δ ≈ 2^80 leaves {max} flooding bits");
    let flooded = rr.rerandomize(&ct, max).unwrap();
    assert_eq!(
        s.dec.decrypt(&flooded).unwrap(),
        s.dec.decrypt(&ct).unwrap()
    );
    let budget = s.dec.noise_budget(&flooded).unwrap();
    // noise ≈ 2^max against Δ/2: between 1 and 4 bits left
    assert!(
        (0.5..5.0).contains(&budget),
        "budget after flooding {budget}"
    );
    assert!(matches!(
        rr.rerandomize(&ct, max + 1),
        Err(BfvError::InvalidParameters(_))
    ));
    assert_ne!(flooded.parts()[1], ct.parts()[1], "c_1 is re-randomized");
    assert_eq!(flood_bits(20, 13, 40), 73);
}

/// The client's view of `Enc(x)·w` for a weight set it does not know, as the distance of its
/// decryption error from zero. Without flooding, small weights (all 1) and full-size weights
/// are told apart by 15+ bits of noise; flooded (and switched down to fewer primes, as results
/// are sent), their noise is the same to within a bit, on every trial.
#[test]
fn flooding_hides_the_weights_from_the_decrypting_client() {
    let s = setup();
    let p = s.p();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let n = s.params.slots();
    let rr = Rerandomizer::new(&s.params, &s.kg.public_key().unwrap()).unwrap();
    let x = random_slots(&mut rng, n, p);
    let small = s.enc.encode_multiplier(&vec![1; n]).unwrap();
    let large = s
        .enc
        .encode_multiplier(&random_slots(&mut rng, n, p))
        .unwrap();
    let b = flood_bits(40, s.params.log_n(), 10).min(rr.max_flood_bits());
    for trial in 0..4 {
        let ct = s.encrypt(&x);
        let (cs, cl) = (
            s.ev.mul_plain(&ct, &small).unwrap(),
            s.ev.mul_plain(&ct, &large).unwrap(),
        );
        let gap = s.dec.noise_budget(&cs).unwrap() - s.dec.noise_budget(&cl).unwrap();
        assert!(gap > 15.0, "trial {trial}: unflooded gap {gap}");
        let (fs, fl) = (
            rr.rerandomize(&cs, b).unwrap(),
            rr.rerandomize(&cl, b).unwrap(),
        );
        let gap = s.dec.noise_budget(&fs).unwrap() - s.dec.noise_budget(&fl).unwrap();
        assert!(gap.abs() < 1.0, "trial {trial}: flooded gap {gap}");
        // what the protocol sends: flooded, then switched down to fewer primes
        let (fs, fl) = (
            rr.rerandomize_compact(&cs, b).unwrap(),
            rr.rerandomize_compact(&cl, b).unwrap(),
        );
        assert!(fs.level() < s.params.level() && fs.level() == fl.level());
        let gap = s.dec.noise_budget(&fs).unwrap() - s.dec.noise_budget(&fl).unwrap();
        assert!(
            gap.abs() < 1.0,
            "trial {trial}: flooded and switched gap {gap}"
        );
    }
}

#[test]
fn ciphertexts_round_trip_and_bad_ones_are_refused() {
    let s = setup();
    let ct = s.encrypt(&[1, 2, 3]);
    let bytes = ciphertext_to_bytes(&s.params, &ct).unwrap();
    let back = ciphertext_from_bytes(&s.params, &bytes, bytes.len()).unwrap();
    assert_eq!(&s.dec.decrypt(&back).unwrap()[..3], &[1, 2, 3]);
    let sk_ct = s.encrypt_sk(&[4]);
    let sk_bytes = ciphertext_to_bytes(&s.params, &sk_ct).unwrap();
    assert!(sk_bytes.len() < bytes.len() * 6 / 10, "seed-compressed");
    assert_eq!(
        s.dec
            .decrypt(&ciphertext_from_bytes(&s.params, &sk_bytes, usize::MAX).unwrap())
            .unwrap()[0],
        4
    );
    assert!(ciphertext_from_bytes(&s.params, &bytes[..bytes.len() - 1], usize::MAX).is_err());
    assert!(ciphertext_from_bytes(&s.params, &bytes, bytes.len() - 1).is_err());
    // a lower level decodes (a compacted result) but is never computed on
    let ev = Evaluator::new(s.params.rlwe());
    let low = ev.drop_level(&ct, 1).unwrap();
    let low_bytes = heinfer_ckks::serialize::ciphertext_to_bytes(s.params.rlwe(), &low).unwrap();
    let low = ciphertext_from_bytes(&s.params, &low_bytes, usize::MAX).unwrap();
    assert!(matches!(
        s.ev.add(&low, &low),
        Err(BfvError::ParamsMismatch(_))
    ));
    let mut scaled = ct.clone();
    scaled.set_scale(2.0).unwrap();
    assert!(matches!(
        s.ev.add(&scaled, &ct),
        Err(BfvError::ParamsMismatch(_))
    ));
    assert!(matches!(
        s.dec.decrypt(&scaled),
        Err(BfvError::ParamsMismatch(_))
    ));
}

#[test]
fn encoding_refuses_values_it_cannot_hold() {
    let s = setup();
    assert!(matches!(s.enc.encode(&[s.p()]), Err(BfvError::Encoding(_))));
    assert!(matches!(
        s.enc.encode(&vec![0; s.params.slots() + 1]),
        Err(BfvError::Encoding(_))
    ));
    let ct = s.encrypt(&[1]);
    assert!(matches!(
        s.ev.mul_scalar(&ct, s.p()),
        Err(BfvError::Encoding(_))
    ));
    assert_eq!(s.enc.reduce_signed(&[-1, 5]), vec![s.p() - 1, 5]);
}

#[test]
fn parameters_are_checked() {
    let ok = presets::pn13_plain20();
    let params = BfvParams::new(ok.clone()).unwrap();
    assert_eq!((params.n(), params.plain_modulus()), (8192, 1_032_193));
    assert!(params.log_q() > 149.0);
    let bad = |f: fn(&mut BfvParamsLiteral)| {
        let mut lit = ok.clone();
        f(&mut lit);
        BfvParams::new(lit)
    };
    // p ≢ 1 (mod 2N), composite (3 · 27,307), over 40 bits
    assert!(matches!(
        bad(|l| l.plain_modulus = 1_032_193 + 2),
        Err(BfvError::InvalidParameters(_))
    ));
    assert!(matches!(
        bad(|l| l.plain_modulus = 16384 * 5 + 1),
        Err(BfvError::InvalidParameters(_))
    ));
    assert!(matches!(
        bad(|l| l.plain_modulus = plain_primes(13, 41, 1)[0]),
        Err(BfvError::InvalidParameters(_))
    ));
    assert!(matches!(
        bad(|l| l.log_p.clear()),
        Err(BfvError::InvalidParameters(_))
    ));
    // over the security table: 4 × 50 + 50 > 218 at N = 8192
    assert!(matches!(
        bad(|l| l.log_q.push(50)),
        Err(BfvError::Engine(
            heinfer_ckks::CkksError::InsecureParameters { .. }
        ))
    ));
    assert!(matches!(
        bad(|l| l.security = SecurityLevel::InsecureTestOnly),
        Err(BfvError::InvalidParameters(_))
    ));
    let primes = plain_primes(13, 20, 3);
    assert_eq!(primes[0], 1_032_193);
    assert!(primes.iter().all(|&p| p % 16384 == 1 && p < 1 << 20));
    // different p, different id, and a ciphertext of one is refused by the other's decryptor
    let other = BfvParams::new(BfvParamsLiteral {
        plain_modulus: primes[1],
        ..ok
    })
    .unwrap();
    assert_ne!(other.id(), params.id());
}

/// The secure preset's parties and `Enc(x)·w` for random slots `x`, `w`: returns the
/// parameters, an evaluator, the client's decryptor, a re-randomizer with its public key,
/// the product and its expected slots `x·w mod p`.
fn secure_product(
    seed: u64,
) -> (
    BfvParams,
    BfvEvaluator,
    Decryptor,
    Rerandomizer,
    Ciphertext,
    Vec<u64>,
) {
    let params = BfvParams::new(presets::pn13_plain20()).unwrap();
    let kg = KeyGenerator::new(params.rlwe()).unwrap();
    let pk = kg.public_key().unwrap();
    let enc = BatchEncoder::new(&params);
    let ev = BfvEvaluator::new(&params);
    let dec = Decryptor::new(&params, kg.secret_key()).unwrap();
    let rr = Rerandomizer::new(&params, &pk).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let p = params.plain_modulus();
    let (x, w) = (
        random_slots(&mut rng, 8192, p),
        random_slots(&mut rng, 8192, p),
    );
    let ct = Encryptor::new(params.rlwe(), &pk)
        .unwrap()
        .encrypt(&enc.encode(&x).unwrap())
        .unwrap();
    let prod = ev
        .mul_plain(&ct, &enc.encode_multiplier(&w).unwrap())
        .unwrap();
    let want: Vec<u64> = x
        .iter()
        .zip(&w)
        .map(|(&a, &b)| (a as u128 * b as u128 % p as u128) as u64)
        .collect();
    (params, ev, dec, rr, prod, want)
}

#[test]
fn secure_preset_runs_a_flooded_product() {
    let (_, _, dec, rr, prod, want) = secure_product(8);
    // a worst-case bound of 2^64 on the product's noise, 40 statistical bits
    let b = flood_bits(64, 13, 40);
    assert!(b <= rr.max_flood_bits(), "{b} > {}", rr.max_flood_bits());
    let out = dec.decrypt(&rr.rerandomize(&prod, b).unwrap()).unwrap();
    assert_eq!(out, want);
}

#[test]
fn compact_results_decrypt_at_the_lowest_level_that_holds_the_flooding() {
    let (params, ev, dec, rr, prod, want) = secure_product(9);
    assert_eq!(dec.decrypt(&prod).unwrap(), want);
    let full = ciphertext_to_bytes(&params, &prod).unwrap().len();
    let max = rr.max_flood_bits();
    // three 50-bit primes: one prime holds every flooding these parameters allow (2^125 is
    // 2^26 after switching, 3 bits below Δ_0/2 = 2^29)
    assert_eq!(rr.compact_level(110), 0);
    assert_eq!(rr.compact_level(max), 0);
    for b in [flood_bits(64, 13, 40), 120, max] {
        let out = rr.rerandomize_compact(&prod, b).unwrap();
        assert_eq!(out.level(), rr.compact_level(b));
        assert_eq!(dec.decrypt(&out).unwrap(), want, "flooding 2^{b}");
        // the worst case leaves 3 bits of margin; a random flooding leaves at least that
        let budget = dec.noise_budget(&out).unwrap();
        assert!(
            budget > 2.0,
            "2^{b}: {budget} bits left at level {}",
            out.level()
        );
        let bytes = ciphertext_to_bytes(&params, &out).unwrap();
        assert!(
            bytes.len() * 3 <= full * (out.level() + 1) + 256,
            "{} of {full} bytes",
            bytes.len()
        );
        let back = ciphertext_from_bytes(&params, &bytes, 1 << 22).unwrap();
        assert_eq!(dec.decrypt(&back).unwrap(), want);
        // a compacted result is only decrypted: computing on it is refused
        assert!(matches!(
            ev.add(&back, &back),
            Err(BfvError::ParamsMismatch(_))
        ));
    }
}

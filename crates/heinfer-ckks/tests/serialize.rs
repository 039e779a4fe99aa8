//! Serialization: round trips of every object, refusals of bad bytes, and the pin test.
mod common;
use common::*;
use heinfer_ckks::serialize::*;
use heinfer_ckks::*;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new(presets::insecure_logn10().unwrap(), &[1, 5]))
}

const MAX: usize = DEFAULT_MAX_BYTES;

#[test]
fn every_object_round_trips_and_still_works() {
    let f = fx();
    let p = &f.params;
    let back = params_from_bytes(&params_to_bytes(p), true).unwrap();
    assert_eq!(back.id(), p.id());
    assert!(
        params_from_bytes(&params_to_bytes(p), false).is_err(),
        "insecure params need opt-in"
    );

    let x = vector(p.slots(), 1);
    let pt = f.enc.encode_real(&x, p.default_scale(), 2).unwrap();
    assert_eq!(
        plaintext_from_bytes(p, &plaintext_to_bytes(p, &pt).unwrap(), MAX).unwrap(),
        pt
    );
    let ct = f.encryptor.encrypt(&pt).unwrap();
    assert_eq!(
        ciphertext_from_bytes(p, &ciphertext_to_bytes(p, &ct).unwrap(), MAX).unwrap(),
        ct
    );
    let sym = f.kg.encrypt_symmetric(&pt).unwrap();
    let sym_bytes = ciphertext_to_bytes(p, &sym).unwrap();
    assert!(
        sym_bytes.len() < ciphertext_to_bytes(p, &ct).unwrap().len() * 6 / 10,
        "seed compression halves the bytes"
    );
    assert_eq!(ciphertext_from_bytes(p, &sym_bytes, MAX).unwrap(), sym);
    let prod = f.ev.mul(&ct, &ct).unwrap();
    assert_eq!(
        ciphertext_from_bytes(p, &ciphertext_to_bytes(p, &prod).unwrap(), MAX).unwrap(),
        prod
    );
    // a square of a square, not relinearized: five parts (at a scale whose fourth power fits Q)
    let small = f
        .encryptor
        .encrypt(&f.enc.encode_real(&x, 2f64.powi(20), 2).unwrap())
        .unwrap();
    let quartic = f.ev.square(&f.ev.square(&small).unwrap()).unwrap();
    assert_eq!(quartic.size(), 5);
    assert_eq!(
        ciphertext_from_bytes(p, &ciphertext_to_bytes(p, &quartic).unwrap(), MAX).unwrap(),
        quartic
    );
    // the buffer is sized exactly up front (no copies of a growing vector)
    for c in [&ct, &sym, &prod, &quartic] {
        let b = ciphertext_to_bytes(p, c).unwrap();
        assert_eq!(
            b.capacity(),
            b.len(),
            "{} parts, {} bytes",
            c.size(),
            b.len()
        );
    }

    let sk = secret_key_from_bytes(p, &secret_key_to_bytes(f.kg.secret_key()), MAX).unwrap();
    let dec = Decryptor::new(p, &sk).unwrap();
    assert_precision(
        "decrypt with reloaded sk",
        &f.enc.decode_real(&dec.decrypt(&ct).unwrap()).unwrap(),
        &x,
        20.0,
    );

    let pk = public_key_from_bytes(p, &public_key_to_bytes(p, &f.pk).unwrap(), MAX).unwrap();
    assert_eq!(pk, f.pk);
    let rlk = relin_key_from_bytes(p, &relin_key_to_bytes(p, &f.rlk).unwrap(), MAX).unwrap();
    assert_eq!(rlk, f.rlk);
    let gks = galois_keys_from_bytes(p, &galois_keys_to_bytes(p, &f.gks).unwrap(), MAX).unwrap();
    assert_eq!(gks, f.gks);
    let g = f.gks.elements()[0];
    let one = galois_key_from_bytes(
        p,
        &galois_key_to_bytes(p, f.gks.get(g).unwrap()).unwrap(),
        MAX,
    )
    .unwrap();
    assert_eq!(&one, f.gks.get(g).unwrap());
    // reloaded keys still compute correctly
    let r = f.ev.rotate(&ct, 1, &gks).unwrap();
    let want: Vec<f64> = (0..x.len()).map(|i| x[(i + 1) % x.len()]).collect();
    assert_precision("rotate with reloaded keys", &f.decrypt(&r), &want, 18.0);
}

#[test]
fn fresh_galois_keys_bytes_are_galois_keys_to_bytes_of_fresh_keys() {
    let f = fx();
    let p = &f.params;
    // duplicates, a step that is the identity (0) and conjugation, as galois_keys takes them
    let steps = [1, -3, 5, 1, 0];
    let bytes = fresh_galois_keys_bytes(&f.kg, &steps, true).unwrap();
    let made = f.kg.galois_keys(&steps, true).unwrap();
    let want = galois_keys_to_bytes(p, &made).unwrap();
    assert_eq!(bytes.len(), want.len());
    assert_eq!(bytes[..20], want[..20], "header and count");
    let gks = galois_keys_from_bytes(p, &bytes, MAX).unwrap();
    assert_eq!(gks.elements(), made.elements());
    assert_ne!(gks, made, "fresh randomness");
    let x = vector(p.slots(), 3);
    let ct = f.encrypt(&x);
    for k in [1i64, -3, 5] {
        let r = f.ev.rotate(&ct, k, &gks).unwrap();
        let n = x.len() as i64;
        let want: Vec<f64> = (0..n).map(|i| x[(i + k).rem_euclid(n) as usize]).collect();
        assert_precision("rotate with streamed keys", &f.decrypt(&r), &want, 18.0);
    }
    let c = f.ev.conjugate(&ct, &gks).unwrap();
    assert_precision("conjugate with streamed keys", &f.decrypt(&c), &x, 18.0);
    // no steps: an empty set
    let none = fresh_galois_keys_bytes(&f.kg, &[0], false).unwrap();
    assert_eq!(galois_keys_from_bytes(p, &none, MAX).unwrap().len(), 0);
}

#[test]
fn galois_key_sets_have_one_encoding() {
    // keys listed by increasing Galois element: swapped or repeated records are refused, not
    // re-ordered (a decoder that accepted them would make two byte strings for one key set)
    let f = fx();
    let p = &f.params;
    let bytes = galois_keys_to_bytes(p, &f.gks).unwrap();
    let n = f.gks.len();
    assert!(n >= 2);
    let one = (bytes.len() - 20) / n;
    let (head, body) = bytes.split_at(20);
    let mut swapped = head.to_vec();
    swapped.extend_from_slice(&body[one..2 * one]);
    swapped.extend_from_slice(&body[..one]);
    swapped.extend_from_slice(&body[2 * one..]);
    expect_deserialize(galois_keys_from_bytes(p, &swapped, MAX), "out of order");
    let mut repeated = head.to_vec();
    repeated.extend_from_slice(&body[..one]);
    repeated.extend_from_slice(&body[..one]);
    repeated.extend_from_slice(&body[2 * one..]);
    expect_deserialize(galois_keys_from_bytes(p, &repeated, MAX), "duplicate");
}

fn expect_deserialize_error<T: std::fmt::Debug>(r: Result<T>, label: &str) {
    match r {
        Err(CkksError::Deserialize { .. }) => {}
        other => panic!("{label}: expected a Deserialize error, got {other:?}"),
    }
}

#[test]
fn bad_bytes_are_refused() {
    let f = fx();
    let p = &f.params;
    let ct = f.encrypt(&vector(16, 2));
    let good = ciphertext_to_bytes(p, &ct).unwrap();
    for cut in [0, 3, 15, 16, 30, good.len() / 2, good.len() - 1] {
        expect_deserialize_error(
            ciphertext_from_bytes(p, &good[..cut], MAX),
            &format!("truncated at {cut}"),
        );
    }
    let mut long = good.clone();
    long.push(0);
    expect_deserialize_error(ciphertext_from_bytes(p, &long, MAX), "trailing byte");
    expect_deserialize_error(
        ciphertext_from_bytes(p, &good, good.len() - 1),
        "over the size limit",
    );
    let mut bad_magic = good.clone();
    bad_magic[0] ^= 1;
    expect_deserialize_error(ciphertext_from_bytes(p, &bad_magic, MAX), "magic");
    let mut bad_version = good.clone();
    bad_version[4] = 99;
    expect_deserialize_error(ciphertext_from_bytes(p, &bad_version, MAX), "version");
    expect_deserialize_error(plaintext_from_bytes(p, &good, MAX), "wrong kind");
    // serializing an object with parameters it does not belong to is refused too
    let other_fx = presets::insecure_logn12().unwrap();
    assert!(matches!(
        ciphertext_to_bytes(&other_fx, &ct),
        Err(CkksError::ParamsMismatch { .. })
    ));
    let other = presets::insecure_logn12().unwrap();
    expect_deserialize_error(
        ciphertext_from_bytes(&other, &good, MAX),
        "wrong parameters",
    );
    let mut bad_level = good.clone();
    bad_level[16] = 77;
    expect_deserialize_error(ciphertext_from_bytes(p, &bad_level, MAX), "level");
    let mut bad_scale = good.clone();
    bad_scale[20..28].copy_from_slice(&f64::NAN.to_le_bytes());
    expect_deserialize_error(ciphertext_from_bytes(p, &bad_scale, MAX), "scale");
    // a residue at or above its modulus: set the first packed residue to all ones
    let mut big = good.clone();
    for b in &mut big[30..37] {
        *b = 0xff;
    }
    expect_deserialize_error(ciphertext_from_bytes(p, &big, MAX), "residue above modulus");
}

#[test]
fn random_corruption_never_panics() {
    let f = fx();
    let p = &f.params;
    let good = ciphertext_to_bytes(p, &f.encrypt(&vector(16, 3))).unwrap();
    let keys = galois_keys_to_bytes(p, &f.gks).unwrap();
    let mut next = xorshift(0x1234_5678_9abc_def0u64);
    for _ in 0..300 {
        for src in [&good, &keys] {
            let b = corrupt(src, &mut next);
            // either a clean error or a valid object; never a panic
            let _ = ciphertext_from_bytes(p, &b, MAX);
            let _ = galois_keys_from_bytes(p, &b, MAX);
            let _ = public_key_from_bytes(p, &b, MAX);
            let _ = secret_key_from_bytes(p, &b, MAX);
            let _ = params_from_bytes(&b, true);
        }
    }
}

/// The wire format is frozen: these hashes change only with a deliberate format change
/// (bump `FORMAT_VERSION` and update them).
#[test]
fn pin_the_encoding_of_fixed_objects() {
    let p = CkksParams::new(presets::pn13_qp218()).unwrap();
    let params_hash = hex(&Sha256::digest(params_to_bytes(&p)));
    let enc = Encoder::new(&p);
    let x: Vec<f64> = (0..64).map(|i| i as f64 / 64.0 - 0.5).collect();
    let pt = enc.encode_real(&x, 2f64.powi(40), 2).unwrap();
    let pt_hash = hex(&Sha256::digest(plaintext_to_bytes(&p, &pt).unwrap()));
    eprintln!(
        "params {params_hash}\nplaintext {pt_hash}\nid {:#018x}",
        p.id()
    );
    assert_eq!(format!("{:#018x}", p.id()), PINNED_ID);
    assert_eq!(params_hash, PINNED_PARAMS);
    assert_eq!(pt_hash, PINNED_PLAINTEXT);
}

/// Objects of format version 1 (seeds expanded under ChaCha20) are refused with the reason,
/// not decoded into other polynomials.
#[test]
fn version_1_objects_are_refused_with_the_reason() {
    let p = presets::insecure_logn10().unwrap();
    let kg = KeyGenerator::new(&p).unwrap();
    let enc = Encoder::new(&p);
    let pt = enc
        .encode_real(&[0.5; 4], p.default_scale(), p.max_level())
        .unwrap();
    let mut b = ciphertext_to_bytes(&p, &kg.encrypt_symmetric(&pt).unwrap()).unwrap();
    assert_eq!(u16::from_le_bytes([b[4], b[5]]), FORMAT_VERSION);
    b[4..6].copy_from_slice(&1u16.to_le_bytes());
    match ciphertext_from_bytes(&p, &b, DEFAULT_MAX_BYTES) {
        Err(CkksError::Deserialize { reason, .. }) => {
            assert!(reason.contains("ChaCha20"), "{reason}")
        }
        other => panic!("a version-1 ciphertext was not refused: {other:?}"),
    }
}

const PINNED_ID: &str = "0x5a68a281fc731235";
const PINNED_PARAMS: &str = "b0fa3799c93f210354291154558f1b32a5c955306f8f38a47b24e0dfc3098d10";
const PINNED_PLAINTEXT: &str = "c3e684aa67e8e39b5a55ae08d48f30fda637d76b68de8e69bd84c28e006df6b5";

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

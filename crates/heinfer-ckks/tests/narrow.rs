//! Batches decoded into 32-bit words (`NarrowBatch`): the same residues as the ciphertexts,
//! the same checks and errors, and ciphertexts whenever the words would not hold them.
mod common;
use common::*;
use heinfer_ckks::serialize::*;
use heinfer_ckks::*;

const MAX: usize = DEFAULT_MAX_BYTES;

fn params(bits: u32) -> CkksParams {
    CkksParams::new_insecure_for_tests(CkksParamsLiteral {
        log_n: 10,
        log_q: vec![bits; 3],
        log_p: vec![bits],
        log_scale: 20,
        digits: None,
        security: SecurityLevel::InsecureTestOnly,
    })
    .unwrap()
}

/// `count` ciphertexts at `level`: seed-compressed (secret-key) ones, and public-key ones
/// (both parts on the wire) when `public`.
fn batch(p: &CkksParams, count: usize, level: usize, public: bool) -> Vec<Ciphertext> {
    let kg = KeyGenerator::new(p).unwrap();
    let enc = Encoder::new(p);
    let pk_enc = Encryptor::new(p, &kg.public_key().unwrap()).unwrap();
    (0..count)
        .map(|i| {
            let pt = enc
                .encode_real(&vector(p.slots(), i as u64), 2f64.powi(20), level)
                .unwrap();
            if public {
                pk_enc.encrypt(&pt).unwrap()
            } else {
                kg.encrypt_symmetric(&pt).unwrap()
            }
        })
        .collect()
}

/// The same ciphertext: residues, level, scale and seed (`PartialEq`).
fn residues_equal(a: &Ciphertext, b: &Ciphertext) -> bool {
    a == b
}

#[test]
fn narrow_batches_hold_the_decoded_residues() {
    let p = params(30);
    for public in [false, true] {
        for level in [0, 2] {
            let cts = batch(&p, 5, level, public);
            let bytes = ciphertext_batch_to_bytes(&p, &cts).unwrap();
            let DecodedBatch::Narrow(n) =
                ciphertext_batch_from_bytes_narrow(&p, &bytes, MAX, 5).unwrap()
            else {
                panic!("30-bit primes decode narrow");
            };
            assert_eq!((n.len(), n.level(), n.size()), (5, level, 2));
            let back = n.widen(&p).unwrap();
            assert!(
                back.iter().zip(&cts).all(|(a, b)| residues_equal(a, b)),
                "public {public}, level {level}"
            );
            // joined without a copy, in order
            let twice = NarrowBatch::concat(vec![n.clone(), n]).unwrap();
            assert_eq!(twice.len(), 10);
            assert_eq!(twice.part(7, 1), twice.part(2, 1));
            assert!(residues_equal(&twice.ciphertext(&p, 9).unwrap(), &cts[4]));
            assert_eq!(
                twice.ciphertext(&p, 9).unwrap().is_seed_compressed(),
                !public
            );
        }
    }
}

#[test]
fn narrow_decoding_checks_what_decoding_checks() {
    let p = params(30);
    let bytes = ciphertext_batch_to_bytes(&p, &batch(&p, 3, 2, false)).unwrap();
    expect_deserialize(
        ciphertext_batch_from_bytes_narrow(&p, &bytes, MAX, 2),
        "ciphertexts",
    );
    expect_deserialize(
        ciphertext_batch_from_bytes_narrow(&p, &bytes[..bytes.len() - 1], MAX, 3),
        "truncated",
    );
    expect_deserialize(
        ciphertext_batch_from_bytes_narrow(&p, &bytes, 100, 3),
        "limit",
    );
    // a ciphertext whose level differs from the first one's is refused
    let mut mixed = batch(&p, 2, 2, true);
    mixed.extend(batch(&p, 1, 1, true));
    let bytes = ciphertext_batch_to_bytes(&p, &mixed).unwrap();
    expect_deserialize(
        ciphertext_batch_from_bytes_narrow(&p, &bytes, MAX, 3),
        "differs",
    );
    // a rounded ciphertext (only results travel rounded) is refused, first or not
    let (plain, rounded) = (
        ciphertext_batch_to_bytes(&p, &mixed[..2]).unwrap(),
        ciphertext_batch_to_bytes_rounded(&p, &mixed[..2], &[4, 2]).unwrap(),
    );
    for spliced in [splice(&plain, &rounded), splice(&rounded, &plain)] {
        let narrow = ciphertext_batch_from_bytes_narrow(&p, &spliced, MAX, 2).unwrap_err();
        let wide = ciphertext_batch_from_bytes(&p, &spliced, MAX, 2).unwrap_err();
        assert_eq!(narrow.to_string(), wide.to_string());
    }
    let other = params(31);
    assert!(ciphertext_batch_from_bytes_narrow(&other, &bytes, MAX, 3).is_err());
    // batches of different levels do not join
    let a = NarrowBatch::from_ciphertexts(&p, &batch(&p, 1, 2, false)).unwrap();
    let b = NarrowBatch::from_ciphertexts(&p, &batch(&p, 1, 1, false)).unwrap();
    assert!(NarrowBatch::concat(vec![a, b]).is_err());
}

/// A batch of two: `a`'s first ciphertext and `b`'s second (each a length and a body).
fn splice(a: &[u8], b: &[u8]) -> Vec<u8> {
    let entry = |bytes: &[u8], i: usize| {
        let mut pos = BATCH_HEADER_BYTES;
        for _ in 0..i {
            pos += 4 + u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        }
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        bytes[pos..pos + 4 + len].to_vec()
    };
    let mut out = a[..BATCH_HEADER_BYTES].to_vec();
    out.extend(entry(a, 0));
    out.extend(entry(b, 1));
    out
}

#[test]
fn primes_of_32_bits_or_more_decode_wide() {
    let p = params(40);
    let cts = batch(&p, 2, 2, false);
    let bytes = ciphertext_batch_to_bytes(&p, &cts).unwrap();
    match ciphertext_batch_from_bytes_narrow(&p, &bytes, MAX, 2).unwrap() {
        DecodedBatch::Wide(back) => {
            assert!(back.iter().zip(&cts).all(|(a, b)| residues_equal(a, b)))
        }
        DecodedBatch::Narrow(_) => panic!("40-bit residues cannot be 32-bit words"),
    }
}

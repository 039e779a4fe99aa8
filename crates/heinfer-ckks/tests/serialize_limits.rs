//! Counts decoded from bytes are checked against the bytes present before anything is
//! allocated for them, and the wire sizes a protocol derives its limits from are exact.
mod common;
use common::*;
use heinfer_ckks::serialize::*;
use heinfer_ckks::*;
use std::sync::OnceLock;

fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new(presets::insecure_logn10().unwrap(), &[1, 2, 5]))
}

const MAX: usize = DEFAULT_MAX_BYTES;

fn batch(level: usize, count: usize) -> Vec<Ciphertext> {
    let f = fx();
    (0..count)
        .map(|i| {
            let ct = f.encrypt(&vector(f.params.slots(), i as u64));
            f.ev.drop_to_level(&ct, level).unwrap()
        })
        .collect()
}

fn with_count(bytes: &[u8], at: usize, count: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at..at + 4].copy_from_slice(&count.to_le_bytes());
    b
}

#[test]
fn batches_round_trip_and_refuse_mixed_levels() {
    let p = &fx().params;
    let cts = batch(1, 3);
    let bytes = ciphertext_batch_to_bytes(p, &cts).unwrap();
    assert_eq!(&bytes[..4], BATCH_MAGIC);
    let back = ciphertext_batch_from_bytes(p, &bytes, MAX, 3).unwrap();
    assert_eq!(back, cts);
    expect_deserialize(
        ciphertext_batch_from_bytes(p, &bytes, MAX, 2),
        "allowed 1..=2",
    );
    let mut mixed = batch(1, 2);
    mixed.extend(batch(0, 1));
    let bytes = ciphertext_batch_to_bytes(p, &mixed).unwrap();
    expect_deserialize(ciphertext_batch_from_bytes(p, &bytes, MAX, 3), "differs");
    assert!(ciphertext_batch_to_bytes(p, &[]).is_err());
}

/// The framed batch written by hand: header, then each ciphertext's own bytes with their
/// length.
fn framed(cts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = BATCH_MAGIC.to_vec();
    out.extend_from_slice(&BATCH_VERSION.to_le_bytes());
    out.extend_from_slice(&(cts.len() as u32).to_le_bytes());
    for c in cts {
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        out.extend_from_slice(c);
    }
    out
}

#[test]
fn batch_parts_write_the_batch_bytes_into_a_sized_buffer() {
    let f = fx();
    let p = &f.params;
    // a seed-compressed fresh encryption beside evaluated ciphertexts: sizes differ
    let pt = f
        .enc
        .encode_real(&vector(p.slots(), 9), p.default_scale(), 2)
        .unwrap();
    let mut cts = vec![f.kg.encrypt_symmetric(&pt).unwrap()];
    cts.extend(batch(2, 4));
    let drop = rounding_drop_bits(p, 2, 2, 1e6).unwrap();
    assert!(drop.iter().all(|&j| j > 0), "{drop:?}");
    for d in [None, Some(drop.as_slice()), Some(&[0, 0][..])] {
        let each: Vec<Vec<u8>> = cts
            .iter()
            .map(|c| match d {
                None => ciphertext_to_bytes(p, c).unwrap(),
                Some(d) => ciphertext_to_bytes_rounded(p, c, d).unwrap(),
            })
            .collect();
        let want = framed(&each);
        let parts = ciphertext_batch_parts(p, &cts, d).unwrap();
        assert_eq!(parts.len(), want.len(), "{d:?}");
        assert!(!parts.is_empty());
        let mut buf = vec![0xAA; parts.len()];
        parts.write_into(&mut buf).unwrap();
        assert_eq!(buf, want, "{d:?}");
        assert_eq!(parts.to_vec().unwrap(), want);
        let whole = match d {
            None => ciphertext_batch_to_bytes(p, &cts).unwrap(),
            Some(d) => ciphertext_batch_to_bytes_rounded(p, &cts, d).unwrap(),
        };
        assert_eq!(whole, want);
    }
    assert!(ciphertext_batch_parts(p, &[], None).is_err());
    // a rounding the parameters refuse (a count per polynomial, each below the bits of Q):
    // an error when written, never a panic or a short buffer
    let bad = [200u32, 0];
    let parts = ciphertext_batch_parts(p, &cts, Some(&bad)).unwrap();
    let mut buf = vec![0; parts.len()];
    assert!(parts.write_into(&mut buf).is_err());
    assert!(ciphertext_batch_to_bytes_rounded(p, &cts, &bad).is_err());
}

/// The two pieces a writer that fills the slots itself uses: the header, and a slot that
/// takes only a ciphertext of its planned length (another is refused, the slot untouched).
#[test]
fn batch_headers_and_slots_are_written_as_the_format_says() {
    let mut head = [0u8; BATCH_HEADER_BYTES];
    write_batch_header(&mut head, 7);
    assert_eq!(
        head.to_vec(),
        framed(&vec![Vec::new(); 7])[..BATCH_HEADER_BYTES]
    );
    let mut slot = [0xAAu8; 4 + 5];
    write_batch_slot(&mut slot, b"hello").unwrap();
    assert_eq!(slot.to_vec(), [&5u32.to_le_bytes()[..], b"hello"].concat());
    let mut short = [0xAAu8; 4 + 4];
    let e = write_batch_slot(&mut short, b"hello").unwrap_err();
    assert!(
        e.to_string().contains("took 5 bytes, 4 were planned"),
        "{e}"
    );
    assert!(short.iter().all(|&b| b == 0xAA));
}

#[test]
fn forged_batch_counts_are_refused_before_allocation() {
    let p = &fx().params;
    let bytes = ciphertext_batch_to_bytes(p, &batch(0, 2)).unwrap();
    // u32::MAX slices would be 64 GiB of bookkeeping: refused from the byte count alone
    for forged in [u32::MAX, 1 << 28, 1000] {
        let b = with_count(&bytes, 6, forged);
        expect_deserialize(
            ciphertext_batch_from_bytes(p, &b, MAX, usize::MAX),
            "cannot fit",
        );
    }
    // counts that fit the bytes but not the lengths that follow
    expect_deserialize(
        ciphertext_batch_from_bytes(p, &with_count(&bytes, 6, 3), MAX, usize::MAX),
        "truncated",
    );
    let mut short = with_count(&bytes, 6, 2);
    short.truncate(short.len() - 1);
    assert!(ciphertext_batch_from_bytes(p, &short, MAX, usize::MAX).is_err());
    // a forged length prefix cannot overflow the position arithmetic
    let mut b = bytes.clone();
    b[10..14].copy_from_slice(&u32::MAX.to_le_bytes());
    expect_deserialize(ciphertext_batch_from_bytes(p, &b, MAX, 2), "truncated");
}

#[test]
fn forged_galois_key_counts_and_levels_are_refused() {
    let f = fx();
    let p = &f.params;
    let gk = galois_keys_to_bytes(p, &f.gks).unwrap();
    for forged in [p.n() as u32, 5, 1 << 31] {
        assert!(galois_keys_from_bytes(p, &with_count(&gk, 16, forged), MAX).is_err());
    }
    expect_deserialize(
        galois_keys_from_bytes(p, &with_count(&gk, 16, p.n() as u32), MAX),
        "truncated",
    );
    // a ciphertext header claiming the top level over a level-0 body
    let ct = ciphertext_to_bytes(p, &batch(0, 1)[0]).unwrap();
    let forged = with_count(&ct, 16, p.max_level() as u32);
    expect_deserialize(ciphertext_from_bytes(p, &forged, MAX), "truncated");
}

#[test]
fn wire_sizes_are_exact() {
    let f = fx();
    let p = &f.params;
    for level in 0..=p.max_level() {
        let ct = batch(level, 1).remove(0);
        let bytes = ciphertext_to_bytes(p, &ct).unwrap();
        assert_eq!(
            bytes.len(),
            ciphertext_wire_bytes(p, level, 2).unwrap(),
            "level {level}"
        );
        // a product at a scale Q_ℓ holds (at level 0, 2^35 squared would not)
        let small = f
            .encryptor
            .encrypt(
                &f.enc
                    .encode_real(&vector(p.slots(), 1), 2f64.powi(10), level)
                    .unwrap(),
            )
            .unwrap();
        let three = f.ev.mul(&small, &small).unwrap();
        assert_eq!(
            ciphertext_to_bytes(p, &three).unwrap().len(),
            ciphertext_wire_bytes(p, level, 3).unwrap()
        );
        for count in [1, 3] {
            let b = ciphertext_batch_to_bytes(p, &batch(level, count)).unwrap();
            assert_eq!(
                b.len(),
                ciphertext_batch_wire_bytes(p, count, level, 2).unwrap()
            );
        }
    }
    // a seed-compressed ciphertext is smaller than the bound
    let pt = f.enc.encode_real(&[1.0], p.default_scale(), 1).unwrap();
    let seeded = f.kg.encrypt_symmetric(&pt).unwrap();
    assert!(
        ciphertext_to_bytes(p, &seeded).unwrap().len() < ciphertext_wire_bytes(p, 1, 2).unwrap()
    );

    assert_eq!(
        relin_key_to_bytes(p, &f.rlk).unwrap().len(),
        relin_key_wire_bytes(p).unwrap()
    );
    for steps in [&[][..], &[1][..], &[1, 2, 5, -3][..]] {
        let keys = f.kg.galois_keys(steps, false).unwrap();
        assert_eq!(
            galois_keys_to_bytes(p, &keys).unwrap().len(),
            galois_keys_wire_bytes(p, keys.len()).unwrap()
        );
    }

    assert!(ciphertext_wire_bytes(p, p.max_level() + 1, 2).is_err());
    assert!(ciphertext_wire_bytes(p, 0, 6).is_err()); // 2 to MAX_PARTS = 5
    assert!(ciphertext_wire_bytes(p, 0, 1).is_err());
    assert!(ciphertext_batch_wire_bytes(p, 0, 0, 2).is_err());
    assert!(ciphertext_batch_wire_bytes(p, usize::MAX, 0, 2).is_err());
    assert!(galois_keys_wire_bytes(p, p.n()).is_err());
}

/// A batch of a seed-compressed fresh encryption and a two-polynomial one, as bytes.
fn mixed_seed_batch() -> Vec<u8> {
    let f = fx();
    let p = &f.params;
    let pt = f
        .enc
        .encode_real(&vector(p.slots(), 9), p.default_scale(), 1)
        .unwrap();
    let seeded = f.kg.encrypt_symmetric(&pt).unwrap();
    ciphertext_batch_to_bytes(p, &[seeded, batch(1, 1).remove(0)]).unwrap()
}

#[test]
fn checking_a_batch_finds_its_shape_without_decoding_it() {
    let p = &fx().params;
    let bytes = mixed_seed_batch();
    let cts = ciphertext_batch_from_bytes(p, &bytes, MAX, 2).unwrap();
    // the first ciphertext travels seed-compressed
    assert!(bytes.len() < ciphertext_batch_wire_bytes(p, 2, 1, 2).unwrap());
    let (count, shape) = ciphertext_batch_check(p, &bytes, MAX, 2).unwrap();
    assert_eq!(count, 2);
    assert_eq!(
        (shape.level, shape.size, shape.scale),
        (cts[0].level(), cts[0].size(), cts[0].scale())
    );
    expect_deserialize(ciphertext_batch_check(p, &bytes, MAX, 1), "allowed 1..=1");
    expect_deserialize(
        ciphertext_batch_check(p, &bytes, 100, 2),
        "exceed the limit",
    );
    let mut mixed = batch(1, 2);
    mixed.extend(batch(0, 1));
    let b = ciphertext_batch_to_bytes(p, &mixed).unwrap();
    expect_deserialize(ciphertext_batch_check(p, &b, MAX, 3), "differs");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    /// Checking refuses exactly the bytes decoding refuses: any byte of a batch (header,
    /// fields, residues, seed, lengths) overwritten, or the batch cut short.
    #[test]
    fn checking_refuses_what_decoding_refuses(at in 0usize..1 << 20, value in proptest::prelude::any::<u8>(), cut in proptest::prelude::any::<bool>()) {
        let p = &fx().params;
        let mut bytes = mixed_seed_batch();
        let at = at % bytes.len();
        if cut {
            bytes.truncate(at);
        } else {
            bytes[at] = value;
        }
        let decoded = ciphertext_batch_from_bytes(p, &bytes, MAX, 4);
        let checked = ciphertext_batch_check(p, &bytes, MAX, 4);
        proptest::prop_assert_eq!(decoded.is_ok(), checked.is_ok(), "byte {} set to {} (cut {}): {:?} vs {:?}", at, value, cut, decoded.as_ref().err(), checked.as_ref().err());
        if let (Ok(cts), Ok((count, shape))) = (decoded, checked) {
            proptest::prop_assert_eq!(count, cts.len());
            proptest::prop_assert_eq!((shape.level, shape.size), (cts[0].level(), cts[0].size()));
        }
    }
}

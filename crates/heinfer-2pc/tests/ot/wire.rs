use heinfer_2pc::ot::wire::{self, Kind, HEADER_BYTES};

use super::{is_deserialize, is_protocol};

#[test]
fn header_round_trips_and_lengths_are_exact() {
    let mut msg = wire::begin(Kind::ExtRandom, 7, 3, 48);
    msg.extend_from_slice(&[5u8; 48]);
    let (h, payload) = wire::open(&msg, Kind::ExtRandom, 10, |n| 16 * n, "t").unwrap();
    assert_eq!((h.kind, h.batch, h.count), (Kind::ExtRandom, 7, 3));
    assert_eq!(payload, &[5u8; 48][..]);
    assert!(is_deserialize(wire::open(
        &msg[..msg.len() - 1],
        Kind::ExtRandom,
        10,
        |n| 16 * n,
        "t"
    )));
    assert!(is_deserialize(wire::open(
        &msg[..HEADER_BYTES - 1],
        Kind::ExtRandom,
        10,
        |n| 16 * n,
        "t"
    )));
    assert!(is_deserialize(wire::open(
        &msg,
        Kind::ExtRandom,
        2,
        |n| 16 * n,
        "t"
    )));
    assert!(is_protocol(wire::open(
        &msg,
        Kind::ExtCorrelated,
        10,
        |n| 16 * n,
        "t"
    )));
    let mut huge = msg.clone();
    huge[9..17].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(is_deserialize(wire::open(
        &huge,
        Kind::ExtRandom,
        1 << 24,
        |n| 16 * n,
        "t"
    )));
}

#[test]
fn bits_round_trip_and_padding_must_be_zero() {
    for n in [0usize, 1, 7, 8, 9, 100] {
        let bits: Vec<bool> = (0..n).map(|i| (i * 7 + 3) % 5 < 2).collect();
        let mut packed = Vec::new();
        wire::pack_bits(&bits, &mut packed);
        assert_eq!(packed.len(), wire::packed_len(n));
        assert_eq!(wire::unpack_bits(&packed, n, "t").unwrap(), bits);
        if n % 8 != 0 {
            let mut bad = packed.clone();
            *bad.last_mut().unwrap() |= 0x80;
            assert!(is_deserialize(wire::unpack_bits(&bad, n, "t")));
        }
        packed.push(0);
        assert!(is_deserialize(wire::unpack_bits(&packed, n, "t")));
    }
}

use heinfer_2pc::ot::wire::HEADER_BYTES;
use heinfer_2pc::ot::{BaseOtReceiver, BaseOtSender};
use heinfer_2pc::rng::seeded;

use super::{is_deserialize, is_invalid, is_protocol, random_bits, rngs, SIZES};

#[test]
fn receiver_gets_exactly_the_chosen_key() {
    for n in SIZES {
        let (mut srng, mut rrng) = rngs();
        let choices = random_bits(&mut rrng, n);
        let (mut sender, a) = BaseOtSender::new(n, &mut srng).unwrap();
        let mut receiver = BaseOtReceiver::new(choices.clone()).unwrap();
        let (b, chosen) = receiver.receive(&a, &mut rrng).unwrap();
        assert_eq!(b.len(), HEADER_BYTES + 32 * n, "n = {n}");
        let keys = sender.receive(&b).unwrap();
        assert_eq!(keys.len(), n);
        for j in 0..n {
            let c = usize::from(choices[j]);
            assert_eq!(chosen[j], keys[j][c], "n = {n}, j = {j}");
            assert_ne!(chosen[j], keys[j][1 - c], "n = {n}, j = {j}");
        }
        if n > 1 {
            assert_ne!(keys[0][0], keys[1][0], "keys differ across indices");
        }
    }
}

#[test]
fn seeded_runs_are_deterministic() {
    let run = || {
        let (mut srng, mut rrng) = (seeded(1), seeded(2));
        let (mut sender, a) = BaseOtSender::new(5, &mut srng).unwrap();
        let mut receiver = BaseOtReceiver::new(vec![true, false, true, true, false]).unwrap();
        let (b, chosen) = receiver.receive(&a, &mut rrng).unwrap();
        let keys = sender.receive(&b).unwrap();
        (a, b, chosen, keys)
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_counts_are_refused() {
    let mut rng = seeded(3);
    assert!(is_invalid(BaseOtSender::new(0, &mut rng)));
    assert!(is_invalid(BaseOtSender::new((1 << 16) + 1, &mut rng)));
    assert!(is_invalid(BaseOtReceiver::new(vec![])));
}

#[test]
fn malformed_sender_message_is_refused_and_the_receiver_can_retry() {
    let (mut srng, mut rrng) = rngs();
    let (_, a) = BaseOtSender::new(3, &mut srng).unwrap();
    let mut receiver = BaseOtReceiver::new(vec![true, false, true]).unwrap();
    // Truncated, empty, too long.
    assert!(is_deserialize(
        receiver.receive(&a[..a.len() - 1], &mut rrng)
    ));
    assert!(is_deserialize(receiver.receive(&[], &mut rrng)));
    let mut long = a.clone();
    long.push(0);
    assert!(is_deserialize(receiver.receive(&long, &mut rrng)));
    // Wrong count.
    let (_, a4) = BaseOtSender::new(4, &mut srng).unwrap();
    assert!(is_deserialize(receiver.receive(&a4, &mut rrng)));
    // Not a point (non-canonical bytes), and the identity (all zeros).
    let mut bad = a.clone();
    bad[HEADER_BYTES..].fill(0xff);
    assert!(is_deserialize(receiver.receive(&bad, &mut rrng)));
    bad[HEADER_BYTES..].fill(0);
    assert!(is_deserialize(receiver.receive(&bad, &mut rrng)));
    // Wrong kind of message.
    let mut kind = a.clone();
    kind[0] = 2;
    assert!(is_protocol(receiver.receive(&kind, &mut rrng)));
    // The good message still works, once.
    receiver.receive(&a, &mut rrng).unwrap();
    assert!(is_protocol(receiver.receive(&a, &mut rrng)));
}

#[test]
fn malformed_receiver_message_is_refused_and_the_sender_can_retry() {
    let (mut srng, mut rrng) = rngs();
    let (mut sender, a) = BaseOtSender::new(3, &mut srng).unwrap();
    let mut receiver = BaseOtReceiver::new(vec![false, true, true]).unwrap();
    let (b, chosen) = receiver.receive(&a, &mut rrng).unwrap();
    assert!(is_deserialize(sender.receive(&b[..b.len() - 1])));
    assert!(is_deserialize(sender.receive(&b[..HEADER_BYTES + 32])));
    for fill in [0xffu8, 0x00] {
        let mut bad = b.clone();
        bad[HEADER_BYTES + 32..HEADER_BYTES + 64].fill(fill);
        assert!(is_deserialize(sender.receive(&bad)));
    }
    // A count that disagrees with the first message, with a matching length.
    let mut other = BaseOtReceiver::new(vec![true, true]).unwrap();
    let (_, a2) = BaseOtSender::new(2, &mut srng).unwrap();
    let (b2, _) = other.receive(&a2, &mut rrng).unwrap();
    assert!(is_deserialize(sender.receive(&b2)));
    assert!(is_protocol(sender.receive(&a)));
    let keys = sender.receive(&b).unwrap();
    assert_eq!(chosen[1], keys[1][1]);
    assert!(is_protocol(sender.receive(&b)));
}

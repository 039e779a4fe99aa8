use heinfer_2pc::ot::wire::HEADER_BYTES;
use heinfer_2pc::ot::{IknpReceiver, IknpSender};
use heinfer_2pc::rng::random_block;

use super::{is_deserialize, is_invalid, is_protocol, rngs, seeded_session, session, SIZES};

#[test]
fn random_ot_receiver_gets_exactly_its_choice() {
    let (mut srng, mut rrng) = rngs();
    let (mut sender, mut receiver) = session(&mut srng, &mut rrng);
    for n in SIZES {
        let (mine, msg) = receiver.extend_random(n, &mut rrng).unwrap();
        assert_eq!(msg.len(), HEADER_BYTES + 16 * 128 * n.div_ceil(128));
        let theirs = sender.extend_random(&msg).unwrap();
        assert_eq!((mine.len(), theirs.len()), (n, n));
        assert_eq!(mine.batch(), theirs.batch());
        for j in 0..n {
            let c = usize::from(mine.choices()[j]);
            assert_eq!(mine.messages()[j], theirs.pairs()[j][c], "n = {n}, j = {j}");
            assert_ne!(
                mine.messages()[j],
                theirs.pairs()[j][1 - c],
                "n = {n}, j = {j}"
            );
        }
        if n == 10_000 {
            let ones = mine.choices().iter().filter(|&&c| c).count();
            assert!(
                (4_500..5_500).contains(&ones),
                "{ones} ones in 10,000 random choices"
            );
        }
    }
}

#[test]
fn correlated_ot_receiver_gets_zero_or_zero_xor_delta() {
    let (mut srng, mut rrng) = rngs();
    let (mut sender, mut receiver) = session(&mut srng, &mut rrng);
    let delta = random_block(&mut srng);
    for n in SIZES {
        let (mut pending, msg) = receiver.extend_correlated(n, &mut rrng).unwrap();
        let (theirs, tau) = sender.extend_correlated(&msg, delta).unwrap();
        assert_eq!(tau.len(), HEADER_BYTES + 16 * n);
        let mine = pending.finish(&tau).unwrap();
        assert_eq!(theirs.delta(), delta);
        for j in 0..n {
            let zero = theirs.zeros()[j];
            let (got, other) = if mine.choices()[j] {
                (zero ^ delta, zero)
            } else {
                (zero, zero ^ delta)
            };
            assert_eq!(mine.messages()[j], got, "n = {n}, j = {j}");
            assert_ne!(mine.messages()[j], other);
        }
        assert!(is_protocol(pending.finish(&tau)));
    }
}

#[test]
fn later_batches_reuse_the_base_ots_but_never_the_pads() {
    let (mut srng, mut rrng) = rngs();
    let (mut sender, mut receiver) = session(&mut srng, &mut rrng);
    let (r0, m0) = receiver.extend_random(200, &mut rrng).unwrap();
    let (r1, m1) = receiver.extend_random(200, &mut rrng).unwrap();
    let s0 = sender.extend_random(&m0).unwrap();
    let s1 = sender.extend_random(&m1).unwrap();
    assert_eq!((s0.batch(), s1.batch()), (0, 1));
    for j in 0..200 {
        assert_eq!(
            r1.messages()[j],
            s1.pairs()[j][usize::from(r1.choices()[j])]
        );
        assert_ne!(s0.pairs()[j][0], s1.pairs()[j][0]);
        assert_ne!(r0.messages()[j], r1.messages()[j]);
    }
}

#[test]
fn out_of_order_calls_are_refused() {
    let (mut srng, mut rrng) = rngs();
    let (mut receiver, a) = IknpReceiver::new(&mut rrng).unwrap();
    let mut sender = IknpSender::new(&mut srng).unwrap();
    // Before setup.
    assert!(is_protocol(receiver.extend_random(10, &mut rrng)));
    assert!(is_protocol(sender.extend_random(&a)));
    let b = sender.receive_setup(&a, &mut srng).unwrap();
    assert!(is_protocol(sender.receive_setup(&a, &mut srng)));
    receiver.receive_setup(&b).unwrap();
    assert!(is_protocol(receiver.receive_setup(&b)));
    // Batches out of order, replayed, or of the other flavour.
    let (_, m0) = receiver.extend_random(10, &mut rrng).unwrap();
    let (mut pending, m1) = receiver.extend_correlated(10, &mut rrng).unwrap();
    assert!(is_protocol(
        sender.extend_correlated(&m1, random_block(&mut srng))
    ));
    assert!(is_protocol(
        sender.extend_correlated(&m0, random_block(&mut srng))
    ));
    sender.extend_random(&m0).unwrap();
    assert!(is_protocol(sender.extend_random(&m0)));
    assert!(is_protocol(sender.extend_random(&m1)));
    let (_, tau) = sender
        .extend_correlated(&m1, random_block(&mut srng))
        .unwrap();
    assert!(is_protocol(pending.finish(&m0)));
    pending.finish(&tau).unwrap();
}

#[test]
fn malformed_messages_are_refused_and_change_nothing() {
    let (mut srng, mut rrng) = rngs();
    let (mut sender, mut receiver) = session(&mut srng, &mut rrng);
    assert!(is_invalid(receiver.extend_random(0, &mut rrng)));
    assert!(is_invalid(receiver.extend_random((1 << 24) + 1, &mut rrng)));
    let (mine, msg) = receiver.extend_random(129, &mut rrng).unwrap();
    assert!(is_deserialize(sender.extend_random(&msg[..msg.len() - 1])));
    assert!(is_deserialize(
        sender.extend_random(&msg[..HEADER_BYTES - 3])
    ));
    let mut long = msg.clone();
    long.extend_from_slice(&[0u8; 16]);
    assert!(is_deserialize(sender.extend_random(&long)));
    // A count that disagrees with the length, a count of zero, a huge count.
    for count in [257u64, 0, u64::MAX] {
        let mut bad = msg.clone();
        bad[9..17].copy_from_slice(&count.to_le_bytes());
        assert!(is_deserialize(sender.extend_random(&bad)), "count {count}");
    }
    let theirs = sender.extend_random(&msg).unwrap();
    assert_eq!(
        mine.messages()[128],
        theirs.pairs()[128][usize::from(mine.choices()[128])]
    );

    let delta = random_block(&mut srng);
    let (mut pending, msg) = receiver.extend_correlated(10, &mut rrng).unwrap();
    let (theirs, tau) = sender.extend_correlated(&msg, delta).unwrap();
    assert!(is_deserialize(pending.finish(&tau[..tau.len() - 16])));
    let mut bad = tau.clone();
    bad[9..17].copy_from_slice(&9u64.to_le_bytes());
    assert!(is_deserialize(pending.finish(&bad)));
    let mine = pending.finish(&tau).unwrap();
    assert_eq!(
        mine.messages()[3],
        theirs.zeros()[3]
            ^ if mine.choices()[3] {
                delta
            } else {
                Default::default()
            }
    );
}

#[test]
fn seeded_sessions_are_deterministic() {
    let run = || {
        let (mut sender, mut receiver, mut srng, mut rrng) = seeded_session(11);
        let (mine, msg) = receiver.extend_random(300, &mut rrng).unwrap();
        let theirs = sender.extend_random(&msg).unwrap();
        let delta = random_block(&mut srng);
        let (mut pending, msg2) = receiver.extend_correlated(50, &mut rrng).unwrap();
        let (ctheirs, tau) = sender.extend_correlated(&msg2, delta).unwrap();
        let cmine = pending.finish(&tau).unwrap();
        (
            msg,
            tau,
            mine.messages().to_vec(),
            mine.choices().to_vec(),
            theirs.pairs().to_vec(),
            cmine.messages().to_vec(),
            ctheirs.zeros().to_vec(),
        )
    };
    assert_eq!(run(), run());
    let (_, mut r2, _, mut rr) = seeded_session(12);
    let (a, _) = r2.extend_random(10, &mut rr).unwrap();
    let (_, mut r3, _, mut rr3) = seeded_session(11);
    let (b, _) = r3.extend_random(10, &mut rr3).unwrap();
    assert_ne!(
        a.messages(),
        b.messages(),
        "different seeds, different pads"
    );
}

#[test]
fn batches_print_sizes_not_pads() {
    let (mut srng, mut rrng) = rngs();
    let (mut sender, mut receiver) = session(&mut srng, &mut rrng);
    let (mine, msg) = receiver.extend_random(3, &mut rrng).unwrap();
    let theirs = sender.extend_random(&msg).unwrap();
    let shown = format!("{mine:?} {theirs:?}");
    assert!(shown.contains("3 OTs"), "{shown}");
    for b in mine
        .messages()
        .iter()
        .chain(theirs.pairs().iter().flatten())
    {
        assert!(!shown.contains(&format!("{:032x}", b.0)), "{shown}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Any batch sizes, several batches per session: the receiver always gets `m^{c_j}_j`.
    #[test]
    fn any_sizes_in_any_session(seed in 0u64..1_000_000, sizes in proptest::collection::vec(1usize..700, 1..4)) {
        let (mut sender, mut receiver, _, mut rrng) = seeded_session(seed);
        for n in sizes {
            let (mine, msg) = receiver.extend_random(n, &mut rrng).unwrap();
            let theirs = sender.extend_random(&msg).unwrap();
            for j in 0..n {
                let c = usize::from(mine.choices()[j]);
                proptest::prop_assert_eq!(mine.messages()[j], theirs.pairs()[j][c]);
                proptest::prop_assert_ne!(mine.messages()[j], theirs.pairs()[j][1 - c]);
            }
        }
    }
}

//! Bytes from a hostile or broken peer: every entry point returns an error (or, for a
//! well-formed header with arbitrary payload, a value), never panics, and leaves the party able
//! to finish the honest exchange.

use heinfer_2pc::ot::wire::{self, Kind};
use heinfer_2pc::ot::{BaseOtReceiver, BaseOtSender, ChosenOtReceiver, ChosenOtSender};
use heinfer_2pc::rng::seeded;
use heinfer_2pc::Block;
use proptest::prelude::*;

use super::{random_bits, seeded_session};

/// Arbitrary bytes, or a header of the right kind (batch 0, small count) before arbitrary bytes.
fn message(kind: Kind) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        (0usize..4, prop::collection::vec(any::<u8>(), 0..200)).prop_map(move |(count, tail)| {
            let mut m = wire::begin(kind, 0, count, tail.len());
            m.extend_from_slice(&tail);
            m
        }),
        (0u64..3, 0usize..3).prop_map(move |(batch, count)| {
            let mut m = wire::begin(kind, batch, count, 0);
            m.resize(m.len() + 32 * count.max(1), 0xa5);
            m
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn base_ot_parties_survive_any_bytes(
        to_receiver in message(Kind::BaseSetup),
        to_sender in message(Kind::BaseChoices),
    ) {
        let (mut srng, mut rrng) = (seeded(1), seeded(2));
        let (mut sender, a) = BaseOtSender::new(2, &mut srng).unwrap();
        let mut receiver = BaseOtReceiver::new(vec![true, false]).unwrap();
        let bad_r = receiver.receive(&to_receiver, &mut rrng).is_err();
        let bad_s = sender.receive(&to_sender).is_err();
        if bad_r {
            let (b, chosen) = receiver.receive(&a, &mut rrng).unwrap();
            if bad_s {
                prop_assert_eq!(sender.receive(&b).unwrap()[0][1], chosen[0]);
            }
        }
    }

    #[test]
    fn iknp_and_online_parties_survive_any_bytes(
        columns in message(Kind::ExtRandom),
        corrections in message(Kind::ExtCorrection),
        choices in message(Kind::OnlineChoices),
        labels in message(Kind::OnlineSingle),
    ) {
        let (mut sender, mut receiver, mut srng, mut rrng) = seeded_session(5);
        let _ = sender.extend_random(&columns);
        let _ = sender.extend_correlated(&columns, Block(7));
        // Whatever happened, an honest correlated batch still works (at the sender's batch).
        let (mut pending, u) = receiver.extend_correlated(3, &mut rrng).unwrap();
        // Hostile bytes that happen to be well formed (right kind, batch, count and length)
        // are accepted, as they would be from an honest peer; then the batch is over.
        let well_formed = pending.finish(&corrections).is_ok();
        let theirs = match sender.extend_correlated(&u, Block(7)) {
            _ if well_formed => None,
            Ok((theirs, tau)) => {
                let mine = pending.finish(&tau).unwrap();
                Some((theirs, mine))
            }
            Err(_) => None, // the hostile bytes took batch 0, as a real peer's would
        };
        if let Some((theirs, mine)) = theirs {
            let mut os = ChosenOtSender::from_correlated(theirs);
            let mut or = ChosenOtReceiver::from_correlated(mine);
            let bits = random_bits(&mut srng, 3);
            let _ = os.send_labels(&choices, &[Block(1); 3], Block(7));
            let d = or.choose(&bits).unwrap();
            if or.receive(&labels).is_ok() {
                return Ok(()); // well formed by chance: the batch is over
            }
            if let Ok(y) = os.send_labels(&d, &[Block(1); 3], Block(7)) {
                let got = or.receive(&y).unwrap();
                prop_assert_eq!(got[2], if bits[2] { Block(6) } else { Block(1) });
            }
        }
    }
}

use heinfer_2pc::ot::wire::HEADER_BYTES;
use heinfer_2pc::ot::{ChosenOtReceiver, ChosenOtSender, IknpReceiver, IknpSender};
use heinfer_2pc::rng::random_block;
use heinfer_2pc::Block;
use rand_chacha::ChaCha20Rng;

use super::{
    is_deserialize, is_invalid, is_protocol, random_bits, random_blocks, rngs, session, SIZES,
};

struct Parties {
    sender: IknpSender,
    receiver: IknpReceiver,
    srng: ChaCha20Rng,
    rrng: ChaCha20Rng,
}

fn parties() -> Parties {
    let (mut srng, mut rrng) = rngs();
    let (sender, receiver) = session(&mut srng, &mut rrng);
    Parties {
        sender,
        receiver,
        srng,
        rrng,
    }
}

impl Parties {
    fn random(&mut self, n: usize) -> (ChosenOtSender, ChosenOtReceiver) {
        let (mine, msg) = self.receiver.extend_random(n, &mut self.rrng).unwrap();
        let theirs = self.sender.extend_random(&msg).unwrap();
        (
            ChosenOtSender::from_random(theirs),
            ChosenOtReceiver::from_random(mine),
        )
    }

    fn correlated(&mut self, n: usize, delta: Block) -> (ChosenOtSender, ChosenOtReceiver) {
        let (mut pending, msg) = self.receiver.extend_correlated(n, &mut self.rrng).unwrap();
        let (theirs, tau) = self.sender.extend_correlated(&msg, delta).unwrap();
        let mine = pending.finish(&tau).unwrap();
        (
            ChosenOtSender::from_correlated(theirs),
            ChosenOtReceiver::from_correlated(mine),
        )
    }
}

#[test]
fn chosen_pairs_over_random_ot() {
    let mut p = parties();
    for n in SIZES {
        let (mut sender, mut receiver) = p.random(n);
        let bits = random_bits(&mut p.rrng, n);
        let pairs: Vec<[Block; 2]> = (0..n)
            .map(|_| [random_block(&mut p.srng), random_block(&mut p.srng)])
            .collect();
        let d = receiver.choose(&bits).unwrap();
        assert_eq!(d.len(), HEADER_BYTES + n.div_ceil(8));
        let y = sender.send_pairs(&d, &pairs).unwrap();
        assert_eq!(y.len(), HEADER_BYTES + 32 * n);
        let got = receiver.receive(&y).unwrap();
        for j in 0..n {
            let b = usize::from(bits[j]);
            assert_eq!(got[j], pairs[j][b], "n = {n}, j = {j}");
            assert_ne!(got[j], pairs[j][1 - b]);
        }
    }
}

#[test]
fn labels_over_correlated_ot_cost_one_block() {
    let mut p = parties();
    let delta = random_block(&mut p.srng);
    for n in SIZES {
        let (mut sender, mut receiver) = p.correlated(n, delta);
        let bits = random_bits(&mut p.rrng, n);
        let label0 = random_blocks(&mut p.srng, n);
        let d = receiver.choose(&bits).unwrap();
        let y = sender.send_labels(&d, &label0, delta).unwrap();
        assert_eq!(y.len(), HEADER_BYTES + 16 * n);
        let got = receiver.receive(&y).unwrap();
        for j in 0..n {
            let (want, other) = if bits[j] {
                (label0[j] ^ delta, label0[j])
            } else {
                (label0[j], label0[j] ^ delta)
            };
            assert_eq!(got[j], want, "n = {n}, j = {j}");
            assert_ne!(got[j], other);
        }
    }
}

#[test]
fn labels_over_random_ot_cost_two_blocks() {
    let mut p = parties();
    let delta = random_block(&mut p.srng);
    let (mut sender, mut receiver) = p.random(129);
    let bits = random_bits(&mut p.rrng, 129);
    let label0 = random_blocks(&mut p.srng, 129);
    let y = sender
        .send_labels(&receiver.choose(&bits).unwrap(), &label0, delta)
        .unwrap();
    assert_eq!(y.len(), HEADER_BYTES + 32 * 129);
    let got = receiver.receive(&y).unwrap();
    for j in 0..129 {
        assert_eq!(
            got[j],
            if bits[j] {
                label0[j] ^ delta
            } else {
                label0[j]
            }
        );
    }
}

#[test]
fn out_of_order_and_repeated_calls_are_refused() {
    let mut p = parties();
    let delta = random_block(&mut p.srng);
    let (mut sender, mut receiver) = p.correlated(20, delta);
    let label0 = random_blocks(&mut p.srng, 20);
    let bits = random_bits(&mut p.rrng, 20);
    assert!(is_protocol(receiver.receive(&[0u8; HEADER_BYTES])));
    assert!(is_invalid(receiver.choose(&bits[..19])));
    let d = receiver.choose(&bits).unwrap();
    assert!(is_protocol(receiver.choose(&bits)));
    assert!(is_invalid(
        sender.send_pairs(&d, &vec![[Block::ZERO; 2]; 20])
    ));
    assert!(is_invalid(sender.send_labels(
        &d,
        &label0,
        delta ^ Block(1)
    )));
    assert!(is_invalid(sender.send_labels(&d, &label0[..19], delta)));
    let y = sender.send_labels(&d, &label0, delta).unwrap();
    assert!(is_protocol(sender.send_labels(&d, &label0, delta)));
    receiver.receive(&y).unwrap();
    assert!(is_protocol(receiver.receive(&y)));

    // Messages of another batch, or of the other flavour.
    let (mut s1, mut r1) = p.random(20);
    let (mut s2, mut r2) = p.random(20);
    let d1 = r1.choose(&bits).unwrap();
    let d2 = r2.choose(&bits).unwrap();
    assert!(is_protocol(s1.send_pairs(&d2, &vec![[Block::ZERO; 2]; 20])));
    let y1 = s1
        .send_pairs(&d1, &vec![[Block::ZERO, Block(1)]; 20])
        .unwrap();
    assert!(is_protocol(r2.receive(&y1)));
    let y2 = s2
        .send_pairs(&d2, &vec![[Block::ZERO, Block(1)]; 20])
        .unwrap();
    let got = r2.receive(&y2).unwrap();
    assert_eq!(got[0], Block(u128::from(bits[0])));
    let (mut s3, mut r3) = p.correlated(20, delta);
    let d3 = r3.choose(&bits).unwrap();
    let _ = s3.send_labels(&d3, &label0, delta).unwrap();
    assert!(
        is_protocol(r3.receive(&y1)),
        "pairs sent to a correlated receiver"
    );
}

#[test]
fn malformed_online_messages_are_refused() {
    let mut p = parties();
    let (mut sender, mut receiver) = p.random(13);
    let bits = random_bits(&mut p.rrng, 13);
    let pairs = vec![[Block(5), Block(6)]; 13];
    let d = receiver.choose(&bits).unwrap();
    assert!(is_deserialize(sender.send_pairs(&d[..d.len() - 1], &pairs)));
    let mut pad = d.clone();
    *pad.last_mut().unwrap() |= 0x80; // bit 15 of 13: padding
    assert!(is_deserialize(sender.send_pairs(&pad, &pairs)));
    let mut count = d.clone();
    count[9..17].copy_from_slice(&12u64.to_le_bytes());
    assert!(is_deserialize(sender.send_pairs(&count, &pairs)));
    let y = sender.send_pairs(&d, &pairs).unwrap();
    assert!(is_deserialize(receiver.receive(&y[..y.len() - 1])));
    assert!(is_deserialize(receiver.receive(&y[..5])));
    let mut bad = y.clone();
    bad[9..17].copy_from_slice(&14u64.to_le_bytes());
    assert!(is_deserialize(receiver.receive(&bad)));
    let got = receiver.receive(&y).unwrap();
    assert_eq!(got[12], Block(if bits[12] { 6 } else { 5 }));
}

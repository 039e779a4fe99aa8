//! One non-linear step end to end: shares in, the garbled layer, shares out that reconstruct
//! to the layer's result; out-of-order messages are refused.

use heinfer_2pc::gc::layers::{Layer, LayerCircuit};
use heinfer_2pc::nonlinear::{ClientSession, ServerSession};
use heinfer_2pc::rng::{os_rng, seeded};
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;

const P: u64 = 5_324_801;

fn signed(v: u64) -> i64 {
    if v > (P - 1) / 2 {
        v as i64 - P as i64
    } else {
        v as i64
    }
}

/// A client and a server session after the set-up, with their OS-seeded generators.
fn sessions() -> (ClientSession, ServerSession, ChaCha20Rng, ChaCha20Rng) {
    let mut crng = os_rng().unwrap();
    let mut srng = os_rng().unwrap();
    let (mut client, m1) = ClientSession::new(&mut crng).unwrap();
    let (server, m2) = ServerSession::new(&m1, &mut srng).unwrap();
    client.finish_setup(&m2).unwrap();
    (client, server, crng, srng)
}

/// The chi-square cut-off over 15 degrees of freedom at p = 1e-9: a uniform sampler fails once
/// in a billion runs (at p = 0.001, 37.7, one of 150 runs of the suite failed: 43.3 for the
/// output shares); a real bias shows far above it (values on half of `[0, P)`: 16,000 over
/// 16,000 draws).
const CHI2_CUTOFF: f64 = 73.6;

/// Chi-square of `values` over 16 equal bins of `[0, P)`.
fn chi2_16(values: &[u64]) -> f64 {
    let mut bins = [0f64; 16];
    for &v in values {
        bins[(v as u128 * 16 / P as u128) as usize] += 1.0;
    }
    let e = values.len() as f64 / 16.0;
    bins.iter().map(|&o| (o - e) * (o - e) / e).sum()
}

#[test]
fn relu_and_maxpool_steps_reconstruct_the_layer() {
    let (mut client, mut server, mut crng, mut srng) = sessions();
    let mut data = seeded(3);
    for (layer, shift) in [
        (Layer::Relu, 0),
        (Layer::Relu, 7),
        (Layer::MaxPoolRelu { window: 4 }, 5),
    ] {
        let lc = LayerCircuit::new(layer, P, shift).unwrap();
        let n = 500;
        let k = lc.arity();
        // the values the server holds encrypted: signed, below (p−1)/2 in magnitude
        let x: Vec<u64> = (0..n * k).map(|_| data.next_u64() % P).collect();
        let (mut cstep, off1) = client.offline(&lc, n, &mut crng).unwrap();
        let (mut sstep, off2) = server.offline(&lc, n, &off1, &mut srng).unwrap();
        cstep.receive_offline(&off2).unwrap();
        // the server masks Enc(x) with r; the client decrypts its share
        let c: Vec<u64> = x
            .iter()
            .zip(sstep.masks())
            .map(|(&v, &r)| (v + r) % P)
            .collect();
        let choices = cstep.choose(&c).unwrap();
        let labels = sstep.labels(&choices).unwrap();
        let z = cstep.finish(&labels).unwrap();
        let s_out = sstep.output_shares();
        for i in 0..n {
            let y = (z[i] + s_out[i]) % P;
            let want = x[i * k..(i + 1) * k]
                .iter()
                .map(|&v| signed(v))
                .max()
                .unwrap()
                .max(0) as u64
                >> shift;
            assert_eq!(y, want, "{layer:?} instance {i}");
        }
        // the second use of a finished step is refused
        assert!(sstep.labels(&choices).is_err());
        assert!(cstep.finish(&labels).is_err());
    }
}

/// Max-pooling over overlapping windows (3 wide, stride 2, on a row of 9 values; the last
/// window padded by repeating its first value): inputs that read one value share its mask,
/// so the client's one share of a value serves every window that holds it.
#[test]
fn overlapping_windows_share_one_mask_per_value() {
    let (mut client, mut server, mut crng, mut srng) = sessions();
    let lc = LayerCircuit::new(Layer::MaxPoolRelu { window: 3 }, P, 2).unwrap();
    let windows: [[u32; 3]; 5] = [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6, 7, 8], [8, 8, 8]];
    let sources: Vec<u32> = windows.iter().flatten().copied().collect();
    let mut data = seeded(9);
    let values: Vec<u64> = (0..9).map(|_| data.next_u64() % P).collect();
    let x: Vec<u64> = sources.iter().map(|&v| values[v as usize]).collect();
    let n = windows.len();
    let (mut cstep, off1) = client.offline(&lc, n, &mut crng).unwrap();
    let (mut sstep, off2) = server
        .offline_with_sources(&lc, n, Some(&sources), &off1, &mut srng)
        .unwrap();
    cstep.receive_offline(&off2).unwrap();
    let r = sstep.masks().to_vec();
    for (i, &a) in sources.iter().enumerate() {
        for (j, &b) in sources.iter().enumerate() {
            assert_eq!(a == b, r[i] == r[j], "inputs {i} and {j}");
        }
    }
    let c: Vec<u64> = x.iter().zip(&r).map(|(&v, &m)| (v + m) % P).collect();
    let choices = cstep.choose(&c).unwrap();
    let z = cstep.finish(&sstep.labels(&choices).unwrap()).unwrap();
    let s_out = sstep.output_shares();
    for (i, w) in windows.iter().enumerate() {
        let want = w
            .iter()
            .map(|&v| signed(values[v as usize]))
            .max()
            .unwrap()
            .max(0) as u64
            >> 2;
        assert_eq!((z[i] + s_out[i]) % P, want, "window {i}");
    }
    // sources of the wrong length, or numbered beyond the inputs, are refused by name
    let (_c, off1) = client.offline(&lc, n, &mut crng).unwrap();
    let short = server.offline_with_sources(&lc, n, Some(&sources[1..]), &off1, &mut srng);
    assert!(short.err().unwrap().to_string().contains("14 sources"));
    let mut wide = sources.clone();
    wide[0] = 15;
    let (_c, off1) = client.offline(&lc, n, &mut crng).unwrap();
    let e = server.offline_with_sources(&lc, n, Some(&wide), &off1, &mut srng);
    assert!(e.err().unwrap().to_string().contains("source 15"));
}

#[test]
fn client_shares_are_uniform_mod_p() {
    // the client's view of x = 0 everywhere: c = r must look uniform (chi-square on 16 bins)
    let (mut client, mut server, mut crng, mut srng) = sessions();
    let lc = LayerCircuit::new(Layer::Relu, P, 0).unwrap();
    let n = 16_000;
    let (_cstep, off1) = client.offline(&lc, n, &mut crng).unwrap();
    let (sstep, _) = server.offline(&lc, n, &off1, &mut srng).unwrap();
    let chi2 = chi2_16(sstep.masks());
    assert!(
        chi2 < CHI2_CUTOFF,
        "chi-square {chi2:.1} over 15 degrees of freedom (p = 1e-9 cut-off {CHI2_CUTOFF})"
    );
    // and the output shares too
    let chi2 = chi2_16(&sstep.output_shares());
    assert!(chi2 < CHI2_CUTOFF, "output shares: chi-square {chi2:.1}");
}

#[test]
fn out_of_order_and_malformed_messages_are_refused() {
    let mut crng = seeded(1);
    let mut srng = seeded(2);
    let (mut client, m1) = ClientSession::new(&mut crng).unwrap();
    let (mut server, m2) = ServerSession::new(&m1, &mut srng).unwrap();
    client.finish_setup(&m2).unwrap();
    let lc = LayerCircuit::new(Layer::Relu, P, 0).unwrap();
    let (mut cstep, off1) = client.offline(&lc, 10, &mut crng).unwrap();
    // choices before the offline reply
    assert!(cstep.choose(&[0; 10]).is_err());
    // a server that garbles a different number of instances: refused before the garbling
    // (a few bytes must not buy gigabytes of circuits), the batch spent on both sides
    let e = server.offline(&lc, 11, &off1, &mut srng).err().unwrap();
    assert!(
        e.to_string()
            .contains("oblivious transfers, the step needs"),
        "{e}"
    );
    let (mut cstep2, off1b) = client.offline(&lc, 10, &mut crng).unwrap();
    let (mut sstep, off2) = server.offline(&lc, 10, &off1b, &mut srng).unwrap();
    assert!(
        cstep.receive_offline(&off2).is_err(),
        "another step's reply"
    );
    assert!(
        cstep2.receive_offline(&off2[..off2.len() - 1]).is_err(),
        "truncated"
    );
    assert!(cstep2.receive_offline(&[0u8; 4]).is_err());
    cstep2.receive_offline(&off2).unwrap();
    assert!(cstep2.receive_offline(&off2).is_err(), "twice");
    assert!(cstep2.choose(&[P; 10]).is_err(), "a share not below p");
    assert!(cstep2.choose(&[0; 9]).is_err(), "wrong count");
    let ch = cstep2.choose(&[1; 10]).unwrap();
    assert!(cstep2.choose(&[1; 10]).is_err(), "choices twice");
    let lab = sstep.labels(&ch).unwrap();
    assert!(cstep2.finish(&lab[..lab.len() - 3]).is_err());
    assert_eq!(cstep2.finish(&lab).unwrap().len(), 10);
}

/// The client's output shares for one and the same result (x = 0 everywhere, so y = 0): never
/// the result itself, uniform mod p (the circuit's output bits are not decoded, the output
/// table masks each with a fresh ρ).
#[test]
fn client_output_shares_hide_the_result() {
    // every circuit kind: ReLU, a clip (ReLU6-style bounds), the truncation alone
    for layer in [
        Layer::Relu,
        Layer::Clip { lo: 0, hi: 6 << 10 },
        Layer::Truncate,
    ] {
        let (mut client, mut server, mut crng, mut srng) = sessions();
        let lc = LayerCircuit::new(layer, P, 3).unwrap();
        let n = 16_000;
        let (mut cstep, off1) = client.offline(&lc, n, &mut crng).unwrap();
        let (mut sstep, off2) = server.offline(&lc, n, &off1, &mut srng).unwrap();
        cstep.receive_offline(&off2).unwrap();
        let c: Vec<u64> = sstep.masks().to_vec(); // x = 0
        let choices = cstep.choose(&c).unwrap();
        let z = cstep.finish(&sstep.labels(&choices).unwrap()).unwrap();
        let s = sstep.output_shares();
        // the result: 0 for ReLU and the truncation, the clip's lower bound (0) here
        assert!(
            z.iter().zip(&s).all(|(&a, &b)| (a + b) % P == 0),
            "{layer:?}"
        );
        let chi2 = chi2_16(&z);
        assert!(
            chi2 < CHI2_CUTOFF,
            "{layer:?} client shares: chi-square {chi2:.1}"
        );
    }
}

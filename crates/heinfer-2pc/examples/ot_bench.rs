//! Measures the OT layer in process (one thread, both parties in turn): base OT ×128, and IKNP
//! batches of 20,000 and 200,000 OTs (×1000 and ×10,000 ReLUs at 20 bits), offline and online,
//! random and correlated. Each figure is the median of `REPS` runs; "ms" covers the named
//! party's calls only (no transport), "bytes" the messages each way, headers included.
//!
//! `cargo run -p heinfer-2pc --release --example ot_bench`

use std::time::Instant;

use heinfer_2pc::ot::transpose::columns_to_rows;
use heinfer_2pc::ot::{
    BaseOtReceiver, BaseOtSender, ChosenOtReceiver, ChosenOtSender, IknpReceiver, IknpSender,
};
use heinfer_2pc::rng::{os_rng, random_block};
use heinfer_2pc::{Block, Result};
use rand_core::RngCore;

const REPS: usize = 5;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    xs[xs.len() / 2]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Runs `f` `REPS` times; each run returns (times in ms, bytes); returns medians and the bytes.
fn measure<const N: usize>(
    mut f: impl FnMut() -> Result<([f64; N], [usize; 2])>,
) -> Result<([f64; N], [usize; 2])> {
    let mut runs = Vec::new();
    let mut bytes = [0; 2];
    for _ in 0..REPS {
        let (t, b) = f()?;
        runs.push(t);
        bytes = b;
    }
    let mut out = [0.0; N];
    for (k, o) in out.iter_mut().enumerate() {
        *o = median(runs.iter().map(|r| r[k]).collect());
    }
    Ok((out, bytes))
}

fn main() -> Result<()> {
    let mut srng = os_rng()?;
    let mut rrng = os_rng()?;
    println!("reps {REPS}, median; R = OT receiver (evaluator), S = OT sender (garbler)");

    let (t, b) = measure(|| {
        let choices: Vec<bool> = (0..128).map(|_| rrng.next_u32() & 1 == 1).collect();
        let t0 = Instant::now();
        let (mut sender, a) = BaseOtSender::new(128, &mut srng)?;
        let mut ts = ms(t0);
        let t1 = Instant::now();
        let mut receiver = BaseOtReceiver::new(choices)?;
        let (reply, _) = receiver.receive(&a, &mut rrng)?;
        let tr = ms(t1);
        let t2 = Instant::now();
        sender.receive(&reply)?;
        ts += ms(t2);
        Ok(([ts, tr], [a.len(), reply.len()]))
    })?;
    println!(
        "base OT x128 (= IKNP setup): S {:.2} ms, R {:.2} ms; S->R {} B, R->S {} B",
        t[0], t[1], b[0], b[1]
    );

    let (mut sender, mut receiver) = {
        let (mut receiver, a) = IknpReceiver::new(&mut rrng)?;
        let mut sender = IknpSender::new(&mut srng)?;
        let b = sender.receive_setup(&a, &mut srng)?;
        receiver.receive_setup(&b)?;
        (sender, receiver)
    };
    let delta = random_block(&mut srng);

    for n in [20_000usize, 200_000] {
        let bits: Vec<bool> = (0..n).map(|_| rrng.next_u32() & 1 == 1).collect();
        let pairs: Vec<[Block; 2]> = (0..n)
            .map(|_| [random_block(&mut srng), random_block(&mut srng)])
            .collect();
        let label0: Vec<Block> = pairs.iter().map(|p| p[0]).collect();

        // Random OT offline + chosen pairs online.
        let (t, b) = measure(|| {
            let t0 = Instant::now();
            let (mine, u) = receiver.extend_random(n, &mut rrng)?;
            let r_off = ms(t0);
            let t1 = Instant::now();
            let theirs = sender.extend_random(&u)?;
            let s_off = ms(t1);
            let (mut os, mut or) = (
                ChosenOtSender::from_random(theirs),
                ChosenOtReceiver::from_random(mine),
            );
            let t2 = Instant::now();
            let d = or.choose(&bits)?;
            let mut r_on = ms(t2);
            let t3 = Instant::now();
            let y = os.send_pairs(&d, &pairs)?;
            let s_on = ms(t3);
            let t4 = Instant::now();
            let got = or.receive(&y)?;
            r_on += ms(t4);
            assert_eq!(got[n - 1], pairs[n - 1][usize::from(bits[n - 1])]);
            Ok((
                [r_off, s_off, r_on, s_on],
                [u.len(), d.len() + (y.len() << 32)],
            ))
        })?;
        println!(
            "n={n:>7} random OT  offline: R {:>7.2} ms, S {:>7.2} ms, R->S {:>9} B | online pairs: R {:>6.2} ms, S {:>6.2} ms, R->S {:>6} B, S->R {:>9} B",
            t[0], t[1], b[0], t[2], t[3], b[1] & 0xffff_ffff, b[1] >> 32
        );

        // Correlated OT offline + labels online.
        let (t, b) = measure(|| {
            let t0 = Instant::now();
            let (mut pending, u) = receiver.extend_correlated(n, &mut rrng)?;
            let mut r_off = ms(t0);
            let t1 = Instant::now();
            let (theirs, tau) = sender.extend_correlated(&u, delta)?;
            let s_off = ms(t1);
            let t2 = Instant::now();
            let mine = pending.finish(&tau)?;
            r_off += ms(t2);
            let (mut os, mut or) = (
                ChosenOtSender::from_correlated(theirs),
                ChosenOtReceiver::from_correlated(mine),
            );
            let t3 = Instant::now();
            let d = or.choose(&bits)?;
            let mut r_on = ms(t3);
            let t4 = Instant::now();
            let y = os.send_labels(&d, &label0, delta)?;
            let s_on = ms(t4);
            let t5 = Instant::now();
            let got = or.receive(&y)?;
            r_on += ms(t5);
            assert_eq!(
                got[0],
                if bits[0] {
                    label0[0] ^ delta
                } else {
                    label0[0]
                }
            );
            Ok((
                [r_off, s_off, r_on, s_on],
                [u.len() + (tau.len() << 32), d.len() + (y.len() << 32)],
            ))
        })?;
        println!(
            "n={n:>7} corr. OT   offline: R {:>7.2} ms, S {:>7.2} ms, R->S {:>9} B, S->R {:>9} B | online labels: R {:>6.2} ms, S {:>6.2} ms, R->S {:>6} B, S->R {:>9} B",
            t[0], t[1], b[0] & 0xffff_ffff, b[0] >> 32, t[2], t[3], b[1] & 0xffff_ffff, b[1] >> 32
        );
    }
    // The transpose alone, at 200,000 OTs (1,563 tiles of 128×128 bits).
    let blocks = 200_000usize.div_ceil(128);
    let columns: Vec<Block> = (0..128 * blocks).map(|_| random_block(&mut srng)).collect();
    let mut rows = vec![Block::ZERO; 128 * blocks];
    let (t, _) = measure(|| {
        let t0 = Instant::now();
        columns_to_rows(&columns, blocks, &mut rows);
        Ok(([ms(t0)], [0, 0]))
    })?;
    println!("transpose of the 200,000 x 128 matrix: {:.2} ms", t[0]);
    Ok(())
}

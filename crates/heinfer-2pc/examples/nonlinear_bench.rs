//! Times GAZELLE's non-linear layers (§8, Table 10): ReLU ×1,000 and ×10,000 and fused
//! max-pool 2×2 + ReLU ×1,000, at a 20-bit plaintext modulus, both parties in one process,
//! one thread. Offline = OT extension request + garbling + OT corrections + parsing the garbled
//! circuits; online = OT choices + labels + evaluation. Bytes are the messages both ways.
//! Session set-up (128 base OTs, once per session) is reported apart.
//!
//! `cargo run -p heinfer-2pc --release --example nonlinear_bench [-- reps]`; prints one JSON line.

use std::time::Instant;

use heinfer_2pc::gc::layers::{Layer, LayerCircuit};
use heinfer_2pc::nonlinear::{ClientSession, ServerSession};
use heinfer_2pc::rng::os_rng;
use rand_core::RngCore;

/// 20 bits, ≡ 1 mod 8192 (BFV batching at n ≤ 4096).
const P: u64 = 1_032_193;

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let mut crng = os_rng().unwrap();
    let mut srng = os_rng().unwrap();
    let t = Instant::now();
    let (mut client, m1) = ClientSession::new(&mut crng).unwrap();
    let (mut server, m2) = ServerSession::new(&m1, &mut srng).unwrap();
    client.finish_setup(&m2).unwrap();
    let setup_ms = t.elapsed().as_secs_f64() * 1e3;
    let setup_bytes = m1.len() + m2.len();
    let mut rows = Vec::new();
    for (name, layer, n) in [
        ("relu", Layer::Relu, 1000usize),
        ("relu", Layer::Relu, 10_000),
        ("maxpool", Layer::MaxPoolRelu { window: 4 }, 1000),
    ] {
        let lc = LayerCircuit::new(layer, P, 0).unwrap();
        let mut offline = Vec::new();
        let mut online = Vec::new();
        let (mut off_b, mut on_b) = (0, 0);
        for _ in 0..reps {
            let x: Vec<u64> = (0..n * lc.arity()).map(|_| crng.next_u64() % P).collect();
            let t = Instant::now();
            let (mut cs, o1) = client.offline(&lc, n, &mut crng).unwrap();
            let (mut ss, o2) = server.offline(&lc, n, &o1, &mut srng).unwrap();
            cs.receive_offline(&o2).unwrap();
            offline.push(t.elapsed().as_secs_f64() * 1e3);
            let c: Vec<u64> = x
                .iter()
                .zip(ss.masks())
                .map(|(&v, &r)| (v + r) % P)
                .collect();
            let t = Instant::now();
            let ch = cs.choose(&c).unwrap();
            let lab = ss.labels(&ch).unwrap();
            let z = cs.finish(&lab).unwrap();
            online.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(z.len(), n);
            off_b = o1.len() + o2.len();
            on_b = ch.len() + lab.len();
        }
        offline.sort_by(f64::total_cmp);
        online.sort_by(f64::total_cmp);
        rows.push(format!(
            "\"{name}_{n}\": {{\"offline_ms\": {:.1}, \"online_ms\": {:.1}, \"offline_mb\": {:.2}, \"online_mb\": {:.2}, \"and_gates\": {}}}",
            offline[reps / 2],
            online[reps / 2],
            off_b as f64 / 1e6,
            on_b as f64 / 1e6,
            lc.circuit.and_count()
        ));
    }
    println!(
        "{{\"p\": {P}, \"bits\": 20, \"reps\": {reps}, \"setup_ms\": {setup_ms:.1}, \"setup_bytes\": {setup_bytes}, {}}}",
        rows.join(", ")
    );
}

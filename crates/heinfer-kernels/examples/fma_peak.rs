//! Measures the micro-kernel's multiply-add rate with operands in L1 (machine peak check):
//! `cargo run --release -p heinfer-kernels --example fma_peak`.
fn main() {
    use heinfer_kernels::gemm::{block, RowIndex, MR, NR};
    let k = 64;
    let xt: Vec<f64> = (0..k * NR).map(|i| (i % 97) as f64).collect();
    let w: Vec<f64> = (0..k * MR).map(|i| (i % 13) as f64).collect();
    let idx = RowIndex::new((0..k as u32).collect());
    let mut out = vec![0f64; MR * NR];
    let reps = 200_000;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        block(MR, &w, &idx, &xt, NR, 0, &mut out);
        std::hint::black_box(&mut out);
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{:.2} G multiply-adds/s",
        (reps * k * MR * NR) as f64 / s / 1e9
    );
}

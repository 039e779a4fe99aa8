//! # heinfer-kernels — homomorphic circuits over the CKKS engine
//!
//! Third layer of heinfer (see `ARCHITECTURE.md`), built on `heinfer-ckks`:
//!
//! * [`linear`]: the batch-axis linear layer. Every tensor element is one ciphertext whose
//!   slots hold the batch, weights are scalars, so output `j` is `Σ_k w_jk·ct_k + b_j`.
//!   Limb by limb this is an **integer matrix product** `Y = W·X mod q_i` with `W` the
//!   integer-quantized weights (`w_jk·Δ_w` rounded) and `X` the centered residues of the
//!   input ciphertexts; it is evaluated exactly in f64 by an AVX-512 micro-kernel
//!   ([`gemm`]) as long as every partial sum stays below `2^53`, which the layer checks
//!   before running (splitting residues into two digits when one is not enough).
//! * [`batch`]: element-wise operations over many ciphertexts (square, relinearize,
//!   rescale) run in parallel.
//! * [`naive`]: the baseline the benchmarks compare against — one general plaintext
//!   multiplication per weight, optionally a rescale after every multiplication.

pub mod batch;
pub mod chain;
mod convert;
pub mod error;
pub mod gemm;
mod input;
pub mod linear;
pub mod naive;
mod output;
mod prefetch;

pub use error::{KernelError, Result};
pub use linear::LinearLayer;
pub use output::Packing;

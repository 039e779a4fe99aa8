//! # heinfer-math — the arithmetic layer of heinfer
//!
//! Lowest layer of the engine (see `ARCHITECTURE.md`): modular arithmetic over word-size
//! primes, deterministic NTT-friendly prime generation, the negacyclic NTT over
//! `Z_q[X]/(X^N+1)`, Galois automorphisms in evaluation form, vectorized element-wise kernels,
//! residue-number-system (RNS) basis conversion, and OS-seeded samplers.
//!
//! Nothing here knows about CKKS; `heinfer-ckks` builds the scheme on top.

pub mod automorphism;
pub mod dot;
#[cfg(target_arch = "x86_64")]
mod dot_avx2_narrow;
pub mod error;
pub mod modulus;
pub mod ntt;
mod ntt_fma;
mod ntt_fma_avx2;
pub mod prg;
#[cfg(target_arch = "x86_64")]
mod prg_vaes;
pub mod primes;
pub mod rns;
pub mod sampler;
pub mod vec_kernel;
pub mod vecops;
#[cfg(target_arch = "x86_64")]
mod vecops_avx2;
#[cfg(target_arch = "x86_64")]
mod vecops_avx512;
#[cfg(target_arch = "x86_64")]
mod vecops_ifma;

pub use error::{MathError, Result};
pub use modulus::Modulus;
pub use ntt::{NttKernel, NttPlan};

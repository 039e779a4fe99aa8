//! # heinfer-bfv — exact arithmetic mod `p` on encrypted vectors
//!
//! The packed additively homomorphic encryption of GAZELLE's two-party protocol (§3–4): BFV
//! (Brakerski / Fan–Vercauteren) with SIMD batching over a plaintext prime `p ≡ 1 (mod 2N)`.
//! It runs on the engine's RLWE machinery — [`heinfer_ckks::CkksParams`] for the ring, the
//! primes and the security table, [`heinfer_ckks::KeyGenerator`] for secret, public and Galois
//! keys, the evaluator's additions, hybrid key switching, rotations, hoisting and fused dot
//! products, and its serialization — so there is one implementation of each for both
//! schemes. BFV adds only what differs: the plaintext modulus and its batching
//! ([`BatchEncoder`]), the `Δ = ⌊Q/p⌋` encoding, exact decryption by scale-and-round
//! ([`Decryptor`]), and noise flooding for circuit privacy ([`Rerandomizer`]).
//!
//! A BFV ciphertext is an engine [`Ciphertext`] at the top level with scale 1; operations
//! check both.
//!
//! ```
//! use heinfer_bfv::{presets, BatchEncoder, BfvEvaluator, Decryptor};
//! use heinfer_ckks::{Encryptor, KeyGenerator};
//! let params = presets::insecure_logn10().unwrap();
//! let kg = KeyGenerator::new(params.rlwe()).unwrap();
//! let enc = BatchEncoder::new(&params);
//! let ct = Encryptor::new(params.rlwe(), &kg.public_key().unwrap()).unwrap()
//!     .encrypt(&enc.encode(&[1, 2, 3]).unwrap()).unwrap();
//! let ev = BfvEvaluator::new(&params);
//! let twice = ev.mul_plain(&ct, &enc.encode_multiplier(&[2, 2, 1_032_192]).unwrap()).unwrap();
//! let out = Decryptor::new(&params, kg.secret_key()).unwrap().decrypt(&twice).unwrap();
//! assert_eq!(&out[..4], &[2, 4, 1_032_193 - 3, 0]);
//! ```

pub mod decrypt;
pub mod encoder;
pub mod error;
pub mod evaluator;
pub mod flood;
pub mod params;
pub mod presets;
pub mod rounding;
pub mod wire;

pub use decrypt::Decryptor;
pub use encoder::{BatchEncoder, Multiplier};
pub use error::{BfvError, Result};
pub use evaluator::BfvEvaluator;
pub use flood::{flood_bits, Rerandomizer, MAX_FLOOD_BITS, STATISTICAL_BITS};
pub use heinfer_ckks::{Ciphertext, Plaintext};
pub use params::{plain_primes, BfvParams, BfvParamsLiteral};
pub use rounding::{
    compact_level, result_drop_bits, result_from_bytes, result_to_bytes, result_wire_bytes,
};
pub use wire::{ciphertext_from_bytes, ciphertext_to_bytes};

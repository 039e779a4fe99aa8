//! # heinfer-ckks — the RNS-CKKS engine of heinfer
//!
//! Second layer of the engine (see `ARCHITECTURE.md`), built on `heinfer-math`: the full-RNS
//! variant of CKKS (Cheon–Han–Kim–Kim–Song, SAC 2018) with hybrid key switching, as in SEAL,
//! OpenFHE and Lattigo, specified in `CKKS.md`.
//!
//! ```
//! use heinfer_ckks::{presets, Encoder, Encryptor, Decryptor, Evaluator, KeyGenerator};
//! let params = presets::insecure_logn10().unwrap();
//! let kg = KeyGenerator::new(&params).unwrap();
//! let enc = Encoder::new(&params);
//! let pt = enc.encode_real(&[1.0, 2.0, 3.0], params.default_scale(), params.max_level()).unwrap();
//! let ct = Encryptor::new(&params, &kg.public_key().unwrap()).unwrap().encrypt(&pt).unwrap();
//! let ev = Evaluator::new(&params);
//! let ct2 = ev.add(&ct, &ct).unwrap();
//! let out = enc.decode_real(&Decryptor::new(&params, kg.secret_key()).unwrap().decrypt(&ct2).unwrap()).unwrap();
//! assert!((out[2] - 6.0).abs() < 1e-3);
//! ```

pub mod ciphertext;
pub mod compact;
pub mod encoder;
pub mod encryptor;
pub mod error;
pub mod evaluator;
pub(crate) mod fft;
pub mod galois_tables;
pub mod keygen;
pub mod keys;
pub mod narrow;
pub mod noise;
pub mod params;
pub mod poly;
pub mod presets;
pub(crate) mod scaled;
pub mod scratch;
pub mod security;
pub mod serialize;

pub use ciphertext::{Ciphertext, Plaintext, MAX_PARTS};
pub use compact::{CompactPlaintext, PlainTerm};
pub use encoder::Encoder;
pub use encryptor::{Decryptor, Encryptor};
pub use error::{CkksError, Result};
pub use evaluator::{Evaluator, ExtendedCiphertext};
pub use heinfer_math::automorphism::{conjugation_galois_element, rotation_galois_element};
pub use keygen::KeyGenerator;
pub use keys::{GaloisKey, GaloisKeys, PublicKey, RelinKey, SecretKey, SwitchingKey};
pub use narrow::NarrowBatch;
pub use params::{CkksParams, CkksParamsLiteral};
pub use security::SecurityLevel;

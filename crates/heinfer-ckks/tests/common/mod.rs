//! Shared fixtures for the engine's integration tests.
#![allow(dead_code)]

use heinfer_ckks::*;
use num_complex::Complex64;

/// Keys and helpers for one parameter set.
pub struct Fixture {
    pub params: CkksParams,
    pub kg: KeyGenerator,
    pub pk: PublicKey,
    pub rlk: RelinKey,
    pub gks: GaloisKeys,
    pub enc: Encoder,
    pub encryptor: Encryptor,
    pub decryptor: Decryptor,
    pub ev: Evaluator,
}

impl Fixture {
    pub fn new(params: CkksParams, rotations: &[i64]) -> Self {
        let kg = KeyGenerator::new(&params).unwrap();
        let pk = kg.public_key().unwrap();
        let rlk = kg.relin_key().unwrap();
        let gks = kg.galois_keys(rotations, true).unwrap();
        let enc = Encoder::new(&params);
        let encryptor = Encryptor::new(&params, &pk).unwrap();
        let decryptor = Decryptor::new(&params, kg.secret_key()).unwrap();
        let ev = Evaluator::new(&params);
        Self {
            params,
            kg,
            pk,
            rlk,
            gks,
            enc,
            encryptor,
            decryptor,
            ev,
        }
    }

    pub fn encrypt(&self, v: &[f64]) -> Ciphertext {
        let pt = self
            .enc
            .encode_real(v, self.params.default_scale(), self.params.max_level())
            .unwrap();
        self.encryptor.encrypt(&pt).unwrap()
    }

    pub fn decrypt(&self, ct: &Ciphertext) -> Vec<f64> {
        self.enc
            .decode_real(&self.decryptor.decrypt(ct).unwrap())
            .unwrap()
    }

    pub fn decrypt_complex(&self, ct: &Ciphertext) -> Vec<Complex64> {
        self.enc
            .decode(&self.decryptor.decrypt(ct).unwrap())
            .unwrap()
    }

    /// The rotation steps (in `(-N/2, N/2)`) the fixture's Galois keys serve.
    pub fn key_steps(&self) -> Vec<i64> {
        let slots = self.params.slots() as i64;
        self.gks
            .elements()
            .iter()
            .filter_map(|&g| {
                (-slots..slots).find(|&k| {
                    heinfer_math::automorphism::rotation_galois_element(k, self.params.n()) == g
                })
            })
            .collect()
    }
}

/// Asserts that two ciphertexts hold the same residues, part by part and limb by limb.
pub fn assert_same_bits(label: &str, a: &Ciphertext, b: &Ciphertext) {
    assert_eq!(a.parts().len(), b.parts().len(), "{label}: parts");
    for (pa, pb) in a.parts().iter().zip(b.parts()) {
        for l in 0..pa.limbs() {
            assert_eq!(pa.limb(l), pb.limb(l), "{label}, limb {l}");
        }
    }
}

/// Deterministic test vector in [-1, 1].
pub fn vector(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

/// (min, mean) bits of precision: −log2 of the max and of the mean absolute error.
pub fn precision_bits(got: &[f64], want: &[f64]) -> (f64, f64) {
    assert_eq!(got.len(), want.len());
    let errs: Vec<f64> = got.iter().zip(want).map(|(g, w)| (g - w).abs()).collect();
    let max = errs.iter().cloned().fold(0.0, f64::max).max(1e-300);
    let mean = (errs.iter().sum::<f64>() / errs.len() as f64).max(1e-300);
    (-max.log2(), -mean.log2())
}

/// Asserts a precision floor and reports it.
pub fn assert_precision(label: &str, got: &[f64], want: &[f64], min_bits: f64) {
    let (min, mean) = precision_bits(got, want);
    eprintln!("{label}: precision min {min:.1} bits, mean {mean:.1} bits");
    assert!(min >= min_bits, "{label}: {min:.1} bits < floor {min_bits}");
}

/// Fails unless `r` is a `Deserialize` error whose reason contains `needle`.
pub fn expect_deserialize<T: std::fmt::Debug>(r: Result<T>, needle: &str) {
    match r {
        Err(CkksError::Deserialize { reason, .. }) => {
            assert!(reason.contains(needle), "{reason:?} lacks {needle:?}")
        }
        other => panic!("expected a Deserialize error with {needle:?}, got {other:?}"),
    }
}

/// A deterministic xorshift64 stream from `seed` (non-zero): corruption positions and bits.
pub fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// `bytes` with 1–4 random bits flipped and, one time in three, cut at a random length.
pub fn corrupt(bytes: &[u8], next: &mut impl FnMut() -> u64) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for _ in 0..(1 + next() % 4) {
        let i = (next() as usize) % b.len();
        b[i] ^= 1 << (next() % 8);
    }
    if next().is_multiple_of(3) {
        b.truncate((next() as usize) % b.len());
    }
    b
}

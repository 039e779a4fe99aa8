//! Fixed-key AES as a hash (Guo, Katz, Wang, Yu: "Efficient and Secure Multiparty Computation
//! from Fixed-Key Block Ciphers", S&P 2020, §5–7). `π` is AES-128 under a fixed public key; with
//! AES-NI each call costs a few cycles, and the batch forms pipeline eight blocks at a time.
//!
//! * Correlation-robust hash (IKNP's `H`): $\mathrm{CR}(x) = \pi(\sigma(x)) \oplus \sigma(x)$,
//!   with the linear orthomorphism $\sigma(x_L \| x_R) = (x_L \oplus x_R) \| x_L$.
//! * Tweakable circular correlation-robust hash (half-gates' `H(x, j)`):
//!   $\mathrm{TCCR}(x, j) = \pi(\pi(x) \oplus j) \oplus \pi(x)$.

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;

use crate::Block;

/// The public key of `π`: the first 16 bytes of the SHA-256 of "heinfer-2pc fixed-key AES".
/// Any fixed, public value works; it is fixed so that both parties agree without a message.
const FIXED_KEY: [u8; 16] = [
    0x61, 0x0b, 0x2c, 0x7e, 0x91, 0x3f, 0xd4, 0x58, 0xa2, 0x17, 0xc9, 0x6e, 0x05, 0xb3, 0x48, 0xfd,
];

/// How many blocks go through AES at once in the batch forms.
const LANES: usize = 8;

/// The fixed-key permutation `π` and the hashes built on it.
#[derive(Clone)]
pub struct FixedKeyHash {
    cipher: Aes128,
    /// `π`'s round keys where the CPU runs VAES on 512-bit registers (the half gates and the
    /// bulk hashes use them).
    #[cfg(target_arch = "x86_64")]
    vaes: Option<crate::vaes::RoundKeys>,
}

impl Default for FixedKeyHash {
    fn default() -> Self {
        Self::new()
    }
}

impl FixedKeyHash {
    /// `π` under the fixed public key.
    pub fn new() -> Self {
        FixedKeyHash {
            cipher: Aes128::new(&GenericArray::from(FIXED_KEY)),
            #[cfg(target_arch = "x86_64")]
            vaes: crate::vaes::RoundKeys::detect(FIXED_KEY),
        }
    }

    /// `π` without the VAES kernels, to test them against the generic path.
    #[cfg(test)]
    pub(crate) fn generic() -> Self {
        FixedKeyHash {
            cipher: Aes128::new(&GenericArray::from(FIXED_KEY)),
            #[cfg(target_arch = "x86_64")]
            vaes: None,
        }
    }

    /// `π`'s round keys for the VAES kernels, if this CPU has them (`HEINFER_NO_VAES` set in
    /// the environment turns them off, to compare both paths).
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub(crate) fn vaes_keys(&self) -> Option<&crate::vaes::RoundKeys> {
        self.vaes.as_ref()
    }

    /// `π(x)`.
    #[inline]
    pub fn permute(&self, x: Block) -> Block {
        let mut b = GenericArray::from(x.to_bytes());
        self.cipher.encrypt_block(&mut b);
        Block::from_bytes(b.into())
    }

    /// `π` on every block of `xs`, in place (eight at a time).
    pub fn permute_many(&self, xs: &mut [Block]) {
        for chunk in xs.chunks_mut(LANES) {
            let mut buf = load(chunk);
            self.cipher.encrypt_blocks(&mut buf[..chunk.len()]);
            store(&buf, chunk, |_, y| y);
        }
    }

    /// The orthomorphism `σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L` (high half first).
    #[inline]
    pub fn sigma(x: Block) -> Block {
        let hi = x.0 >> 64;
        let lo = x.0 & u128::from(u64::MAX);
        Block(((hi ^ lo) << 64) | hi)
    }

    /// The correlation-robust hash `CR(x) = π(σ(x)) ⊕ σ(x)`.
    #[inline]
    pub fn cr(&self, x: Block) -> Block {
        let s = Self::sigma(x);
        self.permute(s) ^ s
    }

    /// `CR` on every block of `xs`, in place (32 at a time on VAES, else eight; no copy of
    /// `xs`).
    pub fn cr_many(&self, xs: &mut [Block]) {
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = &self.vaes {
            // SAFETY: `vaes` is Some only on CPUs with AES, VAES and AVX-512F.
            done = unsafe { crate::vaes::cr(rk, Block::as_words_mut(xs)) };
        }
        for chunk in xs[done..].chunks_mut(LANES) {
            let mut sig = [Block::ZERO; LANES];
            for (s, x) in sig.iter_mut().zip(chunk.iter()) {
                *s = Self::sigma(*x);
            }
            let mut buf = load(&sig[..chunk.len()]);
            self.cipher.encrypt_blocks(&mut buf[..chunk.len()]);
            store(&buf, chunk, |i, y| y ^ sig[i]);
        }
    }

    /// The tweakable hash `TCCR(x, j) = π(π(x) ⊕ j) ⊕ π(x)`.
    #[inline]
    pub fn tccr(&self, x: Block, tweak: u128) -> Block {
        let p = self.permute(x);
        self.permute(p ^ Block(tweak)) ^ p
    }

    /// `TCCR(xs[i], tweaks[i])` for every `i`, in place: 32 blocks at a time on VAES, else
    /// both permutations of eight blocks at a time in one stack buffer (no copy of `xs`, no
    /// allocation).
    pub fn tccr_many(&self, xs: &mut [Block], tweaks: &[u128]) {
        assert_eq!(xs.len(), tweaks.len(), "one tweak per block");
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = &self.vaes {
            // SAFETY: `vaes` is Some only on CPUs with AES, VAES and AVX-512F; equal lengths.
            done = unsafe { crate::vaes::tccr_bulk(rk, Block::as_words_mut(xs), tweaks) };
        }
        let (xs, tweaks) = (&mut xs[done..], &tweaks[done..]);
        for (chunk, tw) in xs.chunks_mut(LANES).zip(tweaks.chunks(LANES)) {
            let n = chunk.len();
            let mut buf = load(chunk);
            self.cipher.encrypt_blocks(&mut buf[..n]);
            let mut first = [Block::ZERO; LANES];
            for i in 0..n {
                first[i] = Block::from_bytes(buf[i].into());
                buf[i] = GenericArray::from((first[i] ^ Block(tw[i])).to_bytes());
            }
            self.cipher.encrypt_blocks(&mut buf[..n]);
            store(&buf, chunk, |i, y| y ^ first[i]);
        }
    }
}

/// Up to [`LANES`] blocks as AES blocks (the rest zero).
#[inline]
fn load(xs: &[Block]) -> [GenericArray<u8, aes::cipher::consts::U16>; LANES] {
    let mut buf = [GenericArray::from([0u8; 16]); LANES];
    for (slot, x) in buf.iter_mut().zip(xs) {
        *slot = GenericArray::from(x.to_bytes());
    }
    buf
}

/// `xs[i] ← f(i, buf[i])` for the blocks of `xs`.
#[inline]
fn store(
    buf: &[GenericArray<u8, aes::cipher::consts::U16>; LANES],
    xs: &mut [Block],
    f: impl Fn(usize, Block) -> Block,
) {
    for (i, x) in xs.iter_mut().enumerate() {
        *x = f(i, Block::from_bytes(buf[i].into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vaes_hashes_are_the_generic_ones() {
        let xs: Vec<Block> = (0..101u128)
            .map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ (i << 64)))
            .collect();
        let (mut fast, mut generic) = (xs.clone(), xs.clone());
        FixedKeyHash::new().cr_many(&mut fast);
        FixedKeyHash::generic().cr_many(&mut generic);
        assert_eq!(fast, generic);
        let h = FixedKeyHash::generic();
        assert!(xs.iter().zip(&fast).all(|(x, y)| h.cr(*x) == *y));
        let tweaks: Vec<u128> = (0..101u128).map(|i| i * 7 + (i << 90)).collect();
        let (mut fast, mut generic) = (xs.clone(), xs.clone());
        FixedKeyHash::new().tccr_many(&mut fast, &tweaks);
        h.tccr_many(&mut generic, &tweaks);
        assert_eq!(fast, generic);
        assert!((0..xs.len()).all(|i| h.tccr(xs[i], tweaks[i]) == fast[i]));
    }

    #[test]
    fn batch_forms_agree_with_single_calls() {
        let h = FixedKeyHash::new();
        let xs: Vec<Block> = (0..19u128)
            .map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)))
            .collect();
        let tweaks: Vec<u128> = (0..19u128).map(|i| i * 3 + 1).collect();
        let mut perm = xs.clone();
        h.permute_many(&mut perm);
        let mut cr = xs.clone();
        h.cr_many(&mut cr);
        let mut tccr = xs.clone();
        h.tccr_many(&mut tccr, &tweaks);
        for i in 0..xs.len() {
            assert_eq!(perm[i], h.permute(xs[i]));
            assert_eq!(cr[i], h.cr(xs[i]));
            assert_eq!(tccr[i], h.tccr(xs[i], tweaks[i]));
        }
    }

    #[test]
    fn sigma_is_linear_and_a_bijection_on_samples() {
        let a = Block(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
        let b = Block(0xffff_0000_ffff_0000_1111_2222_3333_4444);
        assert_eq!(
            FixedKeyHash::sigma(a ^ b),
            FixedKeyHash::sigma(a) ^ FixedKeyHash::sigma(b)
        );
        assert_ne!(FixedKeyHash::sigma(a), FixedKeyHash::sigma(b));
        // σ(x) ⊕ x is also a bijection (orthomorphism): distinct inputs, distinct outputs.
        assert_ne!(FixedKeyHash::sigma(a) ^ a, FixedKeyHash::sigma(b) ^ b);
    }

    #[test]
    fn aes_known_answer_fips197() {
        // FIPS-197 Appendix C.1 under its own key: checks that `permute` is AES-128.
        let key = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        let cipher = Aes128::new(&GenericArray::from(key));
        let mut b = GenericArray::from([
            0x00u8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff,
        ]);
        cipher.encrypt_block(&mut b);
        let expect = [
            0x69u8, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
            0xc5, 0x5a,
        ];
        assert_eq!(b.as_slice(), &expect);
    }
}

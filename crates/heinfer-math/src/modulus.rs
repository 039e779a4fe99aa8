//! Scalar arithmetic modulo a word-size prime `q < 2^61`.
//!
//! Products use a 128-bit Barrett reduction; multiplication by a constant known in advance uses
//! Shoup's trick: with `w' = ⌊w·2^64/q⌋`, `x·w mod q = x·w − ⌊x·w'/2^64⌋·q` (− q once more if
//! needed), which costs two multiplications and no division.

/// A prime modulus with its precomputed reduction constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modulus {
    /// The modulus `q`.
    pub q: u64,
    /// `⌊2^128 / q⌋` split as (high, low) 64-bit words, for Barrett reduction of 128-bit values.
    barrett_hi: u64,
    barrett_lo: u64,
}

impl Modulus {
    /// Builds the reduction constants of `q` (`2 ≤ q < 2^62`).
    pub fn new(q: u64) -> Self {
        assert!((2..(1u64 << 62)).contains(&q), "modulus out of range: {q}");
        // ⌊(2^128 − 1) / q⌋ equals ⌊2^128 / q⌋ because q is not a power of two when prime (q = 2 aside).
        let r = u128::MAX / q as u128;
        Self {
            q,
            barrett_hi: (r >> 64) as u64,
            barrett_lo: r as u64,
        }
    }

    /// `x mod q` for a 128-bit `x` (Barrett with `r = ⌊2^128/q⌋`; the quotient estimate is
    /// off by at most 2, corrected by subtraction).
    #[inline(always)]
    pub fn reduce_u128(&self, x: u128) -> u64 {
        const M: u128 = u64::MAX as u128;
        let (x_hi, x_lo) = ((x >> 64) as u64, x as u64);
        let t = (x_lo as u128 * self.barrett_lo as u128) >> 64;
        let a = x_lo as u128 * self.barrett_hi as u128;
        let b = x_hi as u128 * self.barrett_lo as u128;
        let carry = ((a & M) + (b & M) + t) >> 64;
        let quot = (x_hi as u128 * self.barrett_hi as u128) + (a >> 64) + (b >> 64) + carry;
        let mut r = x.wrapping_sub(quot.wrapping_mul(self.q as u128)) as u64;
        while r >= self.q {
            r -= self.q;
        }
        r
    }

    /// `x mod q` for any 64-bit `x`.
    #[inline(always)]
    pub fn reduce(&self, x: u64) -> u64 {
        if x < self.q {
            x
        } else {
            self.reduce_u64(x)
        }
    }

    /// `x mod q` for any 64-bit `x` without a division: Barrett with `⌊2^64/q⌋` (the high word
    /// of the 128-bit constant), whose quotient is short by at most 1, so one subtraction
    /// corrects it.
    #[inline(always)]
    pub fn reduce_u64(&self, x: u64) -> u64 {
        let quot = ((x as u128 * self.barrett_hi as u128) >> 64) as u64;
        let r = x - quot * self.q;
        if r >= self.q {
            r - self.q
        } else {
            r
        }
    }

    /// `x mod q` for a signed `x` ([`Self::reduce_u64`] of `|x|`, negated for a negative `x`;
    /// `rem_euclid` divides, ~10× slower). Branch-free: the signs of a slot vector are random,
    /// and a branch on them mispredicted half the time.
    #[inline(always)]
    pub fn reduce_i64(&self, x: i64) -> u64 {
        let r = self.reduce_u64(x.unsigned_abs());
        // all ones when x < 0 and r ≠ 0: then q − r = r + (q − 2r) (mod 2^64)
        let flip = ((x >> 63) as u64) & u64::from(r != 0).wrapping_neg();
        r.wrapping_add(flip & self.q.wrapping_sub(r.wrapping_mul(2)))
    }

    /// `x mod q` for a signed 128-bit `x`: `|x|` by [`Self::reduce_u128`] (Barrett, no
    /// 128-bit division: `rem_euclid` on `i128` calls the runtime's slow division), negated
    /// for a negative `x`.
    #[inline(always)]
    pub fn reduce_i128(&self, x: i128) -> u64 {
        let r = self.reduce_u128(x.unsigned_abs());
        if x < 0 && r != 0 {
            self.q - r
        } else {
            r
        }
    }

    /// `(a + b) mod q` for `a, b < q`.
    #[inline(always)]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        let s = a + b;
        if s >= self.q {
            s - self.q
        } else {
            s
        }
    }

    /// `(a − b) mod q` for `a, b < q`.
    #[inline(always)]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        if a >= b {
            a - b
        } else {
            a + self.q - b
        }
    }

    /// `−a mod q` for `a < q`.
    #[inline(always)]
    pub fn neg(&self, a: u64) -> u64 {
        if a == 0 {
            0
        } else {
            self.q - a
        }
    }

    /// `a·b mod q`.
    #[inline(always)]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce_u128(a as u128 * b as u128)
    }

    /// Shoup companion `⌊w·2^64/q⌋` of a constant `w < q`.
    #[inline(always)]
    pub fn shoup(&self, w: u64) -> u64 {
        (((w as u128) << 64) / self.q as u128) as u64
    }

    /// `x·w mod q` with the Shoup companion `w_shoup` of `w` (`x` any 64-bit value).
    #[inline(always)]
    pub fn mul_shoup(&self, x: u64, w: u64, w_shoup: u64) -> u64 {
        let hi = ((x as u128 * w_shoup as u128) >> 64) as u64;
        let r = x.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(self.q));
        if r >= self.q {
            r - self.q
        } else {
            r
        }
    }

    /// `a^e mod q`.
    pub fn pow(&self, mut a: u64, mut e: u64) -> u64 {
        let mut r = 1 % self.q;
        a %= self.q;
        while e > 0 {
            if e & 1 == 1 {
                r = self.mul(r, a);
            }
            a = self.mul(a, a);
            e >>= 1;
        }
        r
    }

    /// `a^{-1} mod q` for prime `q` and `a ≢ 0` (Fermat).
    pub fn inv(&self, a: u64) -> u64 {
        self.pow(a, self.q - 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn barrett_matches_u128_rem(q in 2u64..(1u64 << 61), a in any::<u128>()) {
            let m = Modulus::new(q | 1);
            prop_assert_eq!(m.reduce_u128(a), (a % (q | 1) as u128) as u64);
        }

        #[test]
        fn signed_reduction_matches_rem_euclid(q in 2u64..(1u64 << 61), a in any::<i128>(), small in any::<i64>()) {
            let m = Modulus::new(q | 1);
            for x in [a, small as i128, i128::MIN, i128::MAX, -1, 0, -((q | 1) as i128)] {
                prop_assert_eq!(m.reduce_i128(x), x.rem_euclid((q | 1) as i128) as u64);
            }
        }

        #[test]
        fn word_reductions_match_rem(q in 2u64..(1u64 << 62), x in any::<u64>(), y in any::<i64>()) {
            let q = (q | 1).min((1u64 << 62) - 1);
            let m = Modulus::new(q);
            for x in [x, 0, 1, q - 1, q, q + 1, u64::MAX, u64::MAX - 1] {
                prop_assert_eq!(m.reduce_u64(x), x % q);
                prop_assert_eq!(m.reduce(x), x % q);
            }
            for y in [y, i64::MIN, i64::MAX, -1, 0, -(q as i64), q as i64] {
                prop_assert_eq!(m.reduce_i64(y), y.rem_euclid(q as i64) as u64);
            }
        }

        #[test]
        fn shoup_matches_mul(q in 3u64..(1u64 << 61), x in any::<u64>(), w in any::<u64>()) {
            let q = q | 1;
            let m = Modulus::new(q);
            let w = w % q;
            let x = x % q;
            prop_assert_eq!(m.mul_shoup(x, w, m.shoup(w)), ((x as u128 * w as u128) % q as u128) as u64);
        }
    }
}

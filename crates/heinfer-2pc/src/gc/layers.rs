//! The circuits of GAZELLE's non-linear layers on additive shares modulo an odd prime `p`
//! (GAZELLE §4, Figure 5), with the truncation of a fixed-point plan fused in.
//!
//! The evaluator (client) holds shares `c`, the garbler (server) shares `s` with
//! `x = c + s mod p` read as signed (`x > (p−1)/2` is negative). The circuit reconstructs `x`,
//! applies the layer and truncates by `shift` bits (`⌊y / 2^shift⌋`; the plan folds half an ulp
//! into the bias so this is a rounding). Its `b − shift` output bits are never decoded: they
//! become additive shares mod `p` through the garbler's output table ([`super::arith`]), so
//! the client's new share is `y − ρ` and the server's `ρ` (less [`LayerCircuit::output_offset`]),
//! both uniform to the other party. That replaces a re-sharing adder mod `p` inside the
//! circuit (3b + 1 AND gates) by two table entries per output bit.
//!
//! * ReLU: `x = c + s mod p` (3b + 1 AND gates), sign `h < x` with `h = (p−1)/2` (b), zeroing
//!   of the bits above the truncation (b − shift): `5b + 1 − shift` AND gates, 101 at b = 20
//!   without truncation, 89 with a 12-bit one.
//! * Max-pooling of `k` values fused with ReLU: the server shifts its shares by `h`
//!   (`s' = s + h`, free), so each reconstructed `v = x + h mod p` maps the signed range onto
//!   `[0, p)` in order; a comparison tree takes the maximum (2b per comparison), then
//!   `y = v ≥ h ? v − h : 0` (2b − shift): `(3b + 1)k + 2b(k − 1) + 2b − shift` AND gates,
//!   404 at b = 20, k = 4 and no truncation. `ReLU(max(x)) = max(ReLU(x))`, so a ReLU
//!   followed by max-pooling is this one circuit.
//! * Truncation alone (before GAZELLE's AHE square, which cannot truncate): the server shifts
//!   its shares by `H = K·2^shift` with `K = ⌊(p−1)/2 / 2^shift⌋` (free), so `v = x + H` is
//!   `x` moved onto `[0, p)` for `−H ≤ x < p − H`; `⌊v / 2^shift⌋ = ⌊x / 2^shift⌋ + K` is
//!   wiring, and the server takes `K` off its share: one addition mod `p` whose reduction
//!   selects only the bits above the truncation, `3b + 1 − shift` AND gates, 49 at b = 20 and
//!   a 12-bit truncation.
//! * Clipping to `[lo, hi]` (ReLU6 is `[0, 6·2^f]`): the server shifts its shares by `H` as for
//!   the truncation, so `v = x + H` is ordered on `[0, p)`; two comparisons with the public
//!   constants `lo + H` and `hi + H` (b each) and two multiplexers on the bits above the
//!   truncation clamp `v`, whose bits above `shift` are `⌊clamp(x)/2^shift⌋ + K`: `7b + 1 −
//!   2·shift` AND gates, 117 at b = 20 and a 12-bit truncation.

use super::circuit::{from_bits, to_bits, Builder, Circuit, Wire};
use crate::{Result, TwoPartyError};

/// Which non-linear layer a circuit computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// `ReLU(x)`, one value per instance.
    Relu,
    /// `ReLU(max(x_1, …, x_k))` over a window of `k ≥ 2` values per instance.
    MaxPoolRelu {
        /// Values per window.
        window: usize,
    },
    /// `⌊x / 2^shift⌋` of the signed value, nothing else (the square protocol's truncation).
    Truncate,
    /// `⌊min(max(x, lo), hi) / 2^shift⌋`, with `−H ≤ lo ≤ hi < p − H` (`H = K·2^shift`, see
    /// [`LayerCircuit::output_offset`]): ONNX's `Clip`, e.g. ReLU6.
    Clip {
        /// The lower bound, a signed integer at the input's fixed-point scale.
        lo: i64,
        /// The upper bound, likewise.
        hi: i64,
    },
}

/// A layer's circuit for one plaintext modulus and truncation, with its input encodings.
#[derive(Debug, Clone)]
pub struct LayerCircuit {
    /// The layer.
    pub layer: Layer,
    /// The plaintext modulus (odd prime, below 2^62).
    pub p: u64,
    /// Bits per share: `⌈log2 p⌉`.
    pub bits: usize,
    /// The truncation in bits applied to the result.
    pub shift: usize,
    /// The boolean circuit.
    pub circuit: Circuit,
}

impl LayerCircuit {
    /// The circuit of `layer` modulo `p` with truncation `shift`.
    pub fn new(layer: Layer, p: u64, shift: usize) -> Result<LayerCircuit> {
        if p < 5 || p.is_multiple_of(2) || p >= 1 << 62 {
            return Err(TwoPartyError::InvalidArgument(format!(
                "plaintext modulus {p} must be odd, in [5, 2^62)"
            )));
        }
        let bits = 64 - p.leading_zeros() as usize;
        if shift >= bits {
            return Err(TwoPartyError::InvalidArgument(format!(
                "truncation of {shift} bits leaves nothing of {bits}-bit values"
            )));
        }
        let k = match layer {
            Layer::Relu | Layer::Truncate | Layer::Clip { .. } => 1,
            Layer::MaxPoolRelu { window } if window >= 2 => window,
            Layer::MaxPoolRelu { window } => {
                return Err(TwoPartyError::InvalidArgument(format!(
                    "max-pooling window of {window} values"
                )))
            }
        };
        let h = (p - 1) / 2;
        let mut b = Builder::new();
        let s: Vec<Vec<Wire>> = (0..k).map(|_| b.garbler_input(bits)).collect();
        let c: Vec<Vec<Wire>> = (0..k).map(|_| b.evaluator_input(bits)).collect();
        // only the bits above the truncation are computed past the last comparison: the
        // zeroing (and truncation's reduction) skip the `shift` low bits
        let yt = match layer {
            Layer::Relu => {
                let x = b.add_mod(&c[0], &s[0], p);
                let hw = b.constant(h, bits);
                let neg = b.less_than(&hw, &x);
                b.zero_if(neg, &x[shift..])
            }
            Layer::MaxPoolRelu { .. } => {
                let mut mx = b.add_mod(&c[0], &s[0], p);
                for i in 1..k {
                    let v = b.add_mod(&c[i], &s[i], p);
                    let lt = b.less_than(&mx, &v);
                    mx = b.mux(lt, &v, &mx);
                }
                let hw = b.constant(h, bits);
                let (d, below) = b.sub(&mx, &hw);
                b.zero_if(below, &d[shift..])
            }
            Layer::Truncate => {
                check_offset(p, shift)?;
                b.add_mod_from(&c[0], &s[0], p, shift)
            }
            Layer::Clip { lo, hi } => {
                let big_h = (check_offset(p, shift)? << shift) as i128;
                if lo > hi || (lo as i128) < -big_h || hi as i128 >= p as i128 - big_h {
                    return Err(TwoPartyError::InvalidArgument(format!(
                        "clipping to [{lo}, {hi}] needs −{big_h} ≤ lo ≤ hi < {} modulo {p}",
                        p as i128 - big_h
                    )));
                }
                let v = b.add_mod(&c[0], &s[0], p);
                let low = b.constant((lo as i128 + big_h) as u64, bits);
                let high = b.constant((hi as i128 + big_h) as u64, bits);
                let below = b.less_than(&v, &low);
                let above = b.less_than(&high, &v);
                let y = b.mux(below, &low[shift..], &v[shift..]);
                b.mux(above, &high[shift..], &y)
            }
        };
        // the truncated value's bits, shared through the output table, never decoded
        Ok(LayerCircuit {
            layer,
            p,
            bits,
            shift,
            circuit: b.finish(yt),
        })
    }

    /// Values per instance (1 for ReLU, the window for max-pooling).
    pub fn arity(&self) -> usize {
        match self.layer {
            Layer::Relu | Layer::Truncate | Layer::Clip { .. } => 1,
            Layer::MaxPoolRelu { window } => window,
        }
    }

    fn check(&self, values: &[u64], what: &str) -> Result<()> {
        if let Some(v) = values.iter().find(|&&v| v >= self.p) {
            return Err(TwoPartyError::InvalidArgument(format!(
                "{what} {v} is not below p = {}",
                self.p
            )));
        }
        Ok(())
    }

    /// The evaluator's input bits for its shares `c` (`arity` per instance, each `< p`).
    pub fn evaluator_bits(&self, c: &[u64]) -> Result<Vec<bool>> {
        self.check(c, "client share")?;
        Ok(c.iter().flat_map(|&v| to_bits(v, self.bits)).collect())
    }

    /// The garbler's input bits for its shares `s` (`arity` per instance); max-pooling
    /// shifts the shares by `(p−1)/2` here, truncation by `K·2^shift`.
    pub fn garbler_bits(&self, s: &[u64]) -> Result<Vec<bool>> {
        self.check(s, "server share")?;
        let k = self.arity();
        if !s.len().is_multiple_of(k) {
            return Err(TwoPartyError::InvalidArgument(format!(
                "{} shares for instances of {k} values",
                s.len()
            )));
        }
        let bias = match self.layer {
            Layer::Relu => 0,
            Layer::MaxPoolRelu { .. } => (self.p - 1) / 2,
            Layer::Truncate | Layer::Clip { .. } => self.truncation_offset() << self.shift,
        };
        Ok(s.iter()
            .flat_map(|&v| to_bits((v + bias) % self.p, self.bits))
            .collect())
    }

    /// What the circuit's output value exceeds the layer's result by (`K = ⌊(p−1)/2 /
    /// 2^shift⌋` for truncation and clipping, which reconstruct `x + H` with `H = K·2^shift`;
    /// 0 otherwise): the server takes it off its output share.
    pub fn output_offset(&self) -> u64 {
        match self.layer {
            Layer::Truncate | Layer::Clip { .. } => self.truncation_offset(),
            _ => 0,
        }
    }

    /// Output bits per instance (`b − shift`).
    pub fn output_bits(&self) -> usize {
        self.bits - self.shift
    }

    /// `K = ⌊(p−1)/2 / 2^shift⌋`: truncation reconstructs `x + K·2^shift`, in `[0, p)` for
    /// every signed `x` the plan allows.
    fn truncation_offset(&self) -> u64 {
        ((self.p - 1) / 2) >> self.shift
    }

    /// The layer's results from the circuit's output bits in the clear (one value per
    /// instance, less [`Self::output_offset`]): for tests that evaluate with decoding bits.
    pub fn decode(&self, out: &[bool]) -> Vec<u64> {
        let off = self.output_offset();
        out.chunks(self.output_bits())
            .map(|b| (from_bits(b) + self.p - off) % self.p)
            .collect()
    }

    /// What the step computes, in the clear (the tests' reference): the layer's result mod `p`.
    pub fn reference(&self, c: &[u64], s: &[u64]) -> u64 {
        let p = self.p;
        let h = (p - 1) / 2;
        let signed = |x: u64| {
            if x > h {
                x as i128 - p as i128
            } else {
                x as i128
            }
        };
        let x = c
            .iter()
            .zip(s)
            .map(|(&a, &b)| signed((a + b) % p))
            .max()
            .expect("one value");
        if let Layer::Clip { lo, hi } = self.layer {
            // what the circuit computes for every input: v = x + H modulo p, clamped
            let big_h = (self.truncation_offset() << self.shift) as i128;
            let v = (x + big_h)
                .rem_euclid(p as i128)
                .clamp(lo as i128 + big_h, hi as i128 + big_h) as u64;
            return ((v >> self.shift) + p - self.truncation_offset()) % p;
        }
        if self.layer == Layer::Truncate {
            let h = (self.truncation_offset() << self.shift) as i128;
            if x < -h || x >= p as i128 - h {
                // outside the range the circuit is defined on: v = x + H wraps modulo p
                let v = ((x + h).rem_euclid(p as i128) as u64) >> self.shift;
                return (v + p - self.truncation_offset()) % p;
            }
            return x.div_euclid(1i128 << self.shift).rem_euclid(p as i128) as u64;
        }
        (x.max(0) as u64) >> self.shift
    }
}

/// `K = ⌊(p−1)/2 / 2^shift⌋`, refused when 0 (no signed range is left after the truncation).
fn check_offset(p: u64, shift: usize) -> Result<u64> {
    let k = ((p - 1) / 2) >> shift;
    if k == 0 {
        return Err(TwoPartyError::InvalidArgument(format!(
            "truncation of {shift} bits leaves no signed range modulo {p}"
        )));
    }
    Ok(k)
}

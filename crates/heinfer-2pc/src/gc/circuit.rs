//! Boolean circuits over XOR, AND and NOT gates, and a builder with word-level arithmetic.
//!
//! Wires are numbered densely. Inputs belong to the garbler (the server) or to the evaluator
//! (the client). XOR and NOT are free under free-XOR; only AND gates cost garbled rows, so the
//! word operations are written to use as few as possible:
//!
//! * full adder with one AND: $s = a \oplus b \oplus c$, $c' = c \oplus ((a \oplus c) \wedge (b \oplus c))$;
//! * subtraction $a - b = a + \bar b + 1$ (its borrow is the complement of the carry out);
//! * multiplexer with one AND per bit: $y \oplus (s \wedge (x \oplus y))$;
//! * constants cost nothing: $w \oplus w = 0$ for any wire $w$, and $\neg 0 = 1$.
//!
//! Words are little-endian `Vec<Wire>` (bit 0 first).

/// A wire index.
pub type Wire = u32;

/// One gate: `out = a ⊕ b`, `out = a ∧ b` or `out = ¬a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// `out = a ⊕ b` (free).
    Xor(Wire, Wire, Wire),
    /// `out = a ∧ b` (two garbled rows).
    And(Wire, Wire, Wire),
    /// `out = ¬a` (free).
    Not(Wire, Wire),
}

/// A finished circuit: the gates in evaluation order, who owns which input, the outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circuit {
    /// Number of wires (inputs and gate outputs).
    pub wires: usize,
    /// The garbler's input wires, in the order its input bits are given.
    pub garbler_inputs: Vec<Wire>,
    /// The evaluator's input wires, in the order its input bits are given.
    pub evaluator_inputs: Vec<Wire>,
    /// Gates in topological order.
    pub gates: Vec<Gate>,
    /// Output wires, in the order output bits are returned.
    pub outputs: Vec<Wire>,
}

impl Circuit {
    /// Number of AND gates (each costs 32 bytes of garbled table).
    pub fn and_count(&self) -> usize {
        self.gates
            .iter()
            .filter(|g| matches!(g, Gate::And(..)))
            .count()
    }

    /// Evaluates the circuit in the clear (the reference the garbled evaluation must match).
    /// `garbler` and `evaluator` hold one bit per input wire.
    pub fn eval_plain(&self, garbler: &[bool], evaluator: &[bool]) -> Vec<bool> {
        assert_eq!(
            garbler.len(),
            self.garbler_inputs.len(),
            "garbler input bits"
        );
        assert_eq!(
            evaluator.len(),
            self.evaluator_inputs.len(),
            "evaluator input bits"
        );
        let mut v = vec![false; self.wires];
        for (&w, &b) in self.garbler_inputs.iter().zip(garbler) {
            v[w as usize] = b;
        }
        for (&w, &b) in self.evaluator_inputs.iter().zip(evaluator) {
            v[w as usize] = b;
        }
        for g in &self.gates {
            match *g {
                Gate::Xor(a, b, o) => v[o as usize] = v[a as usize] ^ v[b as usize],
                Gate::And(a, b, o) => v[o as usize] = v[a as usize] & v[b as usize],
                Gate::Not(a, o) => v[o as usize] = !v[a as usize],
            }
        }
        self.outputs.iter().map(|&w| v[w as usize]).collect()
    }
}

/// Builds a [`Circuit`] gate by gate, with word-level helpers.
#[derive(Debug, Default)]
pub struct Builder {
    wires: u32,
    garbler_inputs: Vec<Wire>,
    evaluator_inputs: Vec<Wire>,
    gates: Vec<Gate>,
    zero: Option<Wire>,
}

impl Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    fn wire(&mut self) -> Wire {
        let w = self.wires;
        self.wires += 1;
        w
    }

    /// `bits` new input wires of the garbler (a word, little-endian).
    pub fn garbler_input(&mut self, bits: usize) -> Vec<Wire> {
        let ws: Vec<Wire> = (0..bits).map(|_| self.wire()).collect();
        self.garbler_inputs.extend(&ws);
        ws
    }

    /// `bits` new input wires of the evaluator (a word, little-endian).
    pub fn evaluator_input(&mut self, bits: usize) -> Vec<Wire> {
        let ws: Vec<Wire> = (0..bits).map(|_| self.wire()).collect();
        self.evaluator_inputs.extend(&ws);
        ws
    }

    /// `a ⊕ b`.
    pub fn xor(&mut self, a: Wire, b: Wire) -> Wire {
        let o = self.wire();
        self.gates.push(Gate::Xor(a, b, o));
        o
    }

    /// `a ∧ b`.
    pub fn and(&mut self, a: Wire, b: Wire) -> Wire {
        let o = self.wire();
        self.gates.push(Gate::And(a, b, o));
        o
    }

    /// `¬a`.
    pub fn not(&mut self, a: Wire) -> Wire {
        let o = self.wire();
        self.gates.push(Gate::Not(a, o));
        o
    }

    /// The constant 0 (`w ⊕ w` of the first input wire; free). Needs one input first.
    pub fn zero(&mut self) -> Wire {
        if let Some(z) = self.zero {
            return z;
        }
        assert!(
            self.wires > 0,
            "declare an input before asking for a constant"
        );
        let z = self.xor(0, 0);
        self.zero = Some(z);
        z
    }

    /// The constant `value` as a `bits`-bit word (free).
    pub fn constant(&mut self, value: u64, bits: usize) -> Vec<Wire> {
        let zero = self.zero();
        let one = self.not(zero);
        (0..bits)
            .map(|i| if value >> i & 1 == 1 { one } else { zero })
            .collect()
    }

    /// `a + b + carry_in` for words of equal width `n`: the `n` sum bits and the carry out
    /// (`n` AND gates).
    pub fn add_with_carry(&mut self, a: &[Wire], b: &[Wire], carry_in: Wire) -> (Vec<Wire>, Wire) {
        assert_eq!(a.len(), b.len(), "add: word widths differ");
        let mut c = carry_in;
        let mut sum = Vec::with_capacity(a.len());
        for (&x, &y) in a.iter().zip(b) {
            let xc = self.xor(x, c);
            let yc = self.xor(y, c);
            sum.push(self.xor(xc, y));
            let t = self.and(xc, yc);
            c = self.xor(c, t);
        }
        (sum, c)
    }

    /// `a − b` for words of equal width: the difference mod `2^n` and the borrow (1 when
    /// `a < b`), with `n` AND gates.
    pub fn sub(&mut self, a: &[Wire], b: &[Wire]) -> (Vec<Wire>, Wire) {
        let nb: Vec<Wire> = b.iter().map(|&w| self.not(w)).collect();
        let zero = self.zero();
        let one = self.not(zero);
        let (d, carry) = self.add_with_carry(a, &nb, one);
        let borrow = self.not(carry);
        (d, borrow)
    }

    /// `sel ? x : y`, bit by bit (one AND per bit).
    pub fn mux(&mut self, sel: Wire, x: &[Wire], y: &[Wire]) -> Vec<Wire> {
        assert_eq!(x.len(), y.len(), "mux: word widths differ");
        x.iter()
            .zip(y)
            .map(|(&a, &b)| {
                let d = self.xor(a, b);
                let t = self.and(sel, d);
                self.xor(b, t)
            })
            .collect()
    }

    /// `(a + b) mod p` for `a, b < p` given as `n`-bit words with `p < 2^n` (3n + 1 AND gates):
    /// the sum over `n + 1` bits, minus `p`, and a multiplexer on the borrow.
    pub fn add_mod(&mut self, a: &[Wire], b: &[Wire], p: u64) -> Vec<Wire> {
        self.add_mod_from(a, b, p, 0)
    }

    /// Bits `from..n` of `(a + b) mod p` (`3n + 1 − from` AND gates: the multiplexer selects
    /// only the bits asked for).
    pub fn add_mod_from(&mut self, a: &[Wire], b: &[Wire], p: u64, from: usize) -> Vec<Wire> {
        let n = a.len();
        assert!(n < 64 && p < (1u64 << n), "add_mod: p must fit the word");
        assert!(from <= n, "add_mod_from: bit {from} of {n}");
        let zero = self.zero();
        let (mut t, carry) = self.add_with_carry(a, b, zero);
        t.push(carry);
        let pw = self.constant(p, n + 1);
        let (u, borrow) = self.sub(&t, &pw);
        // borrow = 1: t < p, keep t; else t − p (< p < 2^n)
        self.mux(borrow, &t[from..n], &u[from..n])
    }

    /// `a < b` (unsigned, equal widths): the borrow of `a − b` (n AND gates).
    pub fn less_than(&mut self, a: &[Wire], b: &[Wire]) -> Wire {
        let (_, borrow) = self.sub(a, b);
        borrow
    }

    /// `w ∧ ¬s` on every bit of `w` (zeroes the word when `s` is 1; n AND gates).
    pub fn zero_if(&mut self, s: Wire, w: &[Wire]) -> Vec<Wire> {
        let ns = self.not(s);
        w.iter().map(|&x| self.and(x, ns)).collect()
    }

    /// The circuit with `outputs` as its outputs.
    pub fn finish(self, outputs: Vec<Wire>) -> Circuit {
        Circuit {
            wires: self.wires as usize,
            garbler_inputs: self.garbler_inputs,
            evaluator_inputs: self.evaluator_inputs,
            gates: self.gates,
            outputs,
        }
    }
}

/// The `bits` low bits of `value`, little-endian.
pub fn to_bits(value: u64, bits: usize) -> impl Iterator<Item = bool> {
    (0..bits).map(move |i| value >> i & 1 == 1)
}

/// The value of little-endian `bits`.
pub fn from_bits(bits: &[bool]) -> u64 {
    bits.iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 1) | u64::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word_op(bits: usize, f: impl Fn(&mut Builder, &[Wire], &[Wire]) -> Vec<Wire>) -> Circuit {
        let mut b = Builder::new();
        let x = b.garbler_input(bits);
        let y = b.evaluator_input(bits);
        let out = f(&mut b, &x, &y);
        b.finish(out)
    }

    fn run(c: &Circuit, x: u64, y: u64, bits: usize) -> u64 {
        let gx: Vec<bool> = to_bits(x, bits).collect();
        let ey: Vec<bool> = to_bits(y, bits).collect();
        from_bits(&c.eval_plain(&gx, &ey))
    }

    #[test]
    fn add_sub_mux_and_compare_on_every_5_bit_pair() {
        let n = 5;
        let add = word_op(n, |b, x, y| {
            let z = b.zero();
            let (mut s, c) = b.add_with_carry(x, y, z);
            s.push(c);
            s
        });
        let sub = word_op(n, |b, x, y| {
            let (mut d, borrow) = b.sub(x, y);
            d.push(borrow);
            d
        });
        let lt = word_op(n, |b, x, y| vec![b.less_than(x, y)]);
        let mux = word_op(n, |b, x, y| {
            let s = x[0];
            b.mux(s, x, y)
        });
        assert_eq!(add.and_count(), n);
        assert_eq!(sub.and_count(), n);
        assert_eq!(mux.and_count(), n);
        for x in 0..32u64 {
            for y in 0..32u64 {
                assert_eq!(run(&add, x, y, n), x + y);
                assert_eq!(
                    run(&sub, x, y, n),
                    (x.wrapping_sub(y) & 31) | (u64::from(x < y) << 5)
                );
                assert_eq!(run(&lt, x, y, n), u64::from(x < y));
                assert_eq!(run(&mux, x, y, n), if x & 1 == 1 { x } else { y });
            }
        }
    }

    #[test]
    fn add_mod_p_on_every_pair() {
        for p in [13u64, 31, 61] {
            let n = 64 - p.leading_zeros() as usize;
            let c = word_op(n, |b, x, y| b.add_mod(x, y, p));
            assert_eq!(c.and_count(), 3 * n + 1);
            for x in 0..p {
                for y in 0..p {
                    assert_eq!(run(&c, x, y, n), (x + y) % p, "p={p} x={x} y={y}");
                }
            }
        }
    }

    #[test]
    fn constants_are_free_and_right() {
        let mut b = Builder::new();
        let _ = b.garbler_input(1);
        let k = b.constant(0b1011, 4);
        let c = b.finish(k);
        assert_eq!(c.and_count(), 0);
        for g in [false, true] {
            assert_eq!(from_bits(&c.eval_plain(&[g], &[])), 0b1011);
        }
    }
}

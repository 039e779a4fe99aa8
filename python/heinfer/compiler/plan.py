"""Throughput-mode planning: scales, rescales, levels and parameters of every segment.

A *segment* is a run of :class:`Linear` and :class:`Square` ops that the server evaluates
without the client. For each candidate prime size ``b`` and ring degree, the planner:

1. picks every linear layer's weight scale ``Δ_w = 2^e`` and digit count so that the integer
   product of ``heinfer_kernels::linear`` is exact in f64 (``‖W_j‖₁·Δ_w·(largest digit) <
   2^52``) while the largest weight keeps ``weight_bits`` bits;
2. tracks ``log2`` of the scale through the segment (``+e`` per linear layer, ``×2`` per
   square) and the bits each value needs, ``log2(scale) + log2(bound) + guard``;
3. places the rescales — **lazy rescaling** generalized (nGraph-HE2 §3.3.1): every subset of
   the points between two ops is considered, by dynamic programming over the cut points
   (:mod:`heinfer.compiler.rescale_search`, polynomial in the segment length), each rescale
   dividing by as many primes as bring the
   scale back to the input scale, never before a decryption or a client step; limbs that no
   later value needs are dropped as early as possible (free), so the client encrypts at the
   lowest level that suffices (depth-aware encoding, §3.3.2, with scalar weights at every
   level for free);
4. costs the plan with per-coefficient unit costs of the kernels and keeps the cheapest plan
   whose modulus fits the security bound.

Squares leave 3-part ciphertexts; they are relinearized only when squared again (lazy
relinearization: a linear layer is linear in each part, so it runs on 3 parts). The last
square of a segment may skip even that (an *open tail*): squared unrelinearized it leaves
5 parts, which only linear layers follow and the client decrypts with ``s³`` and ``s⁴`` —
no key switch, no relinearization key, but nothing may rescale after it (the rounding of the
last part would come back multiplied by ``s⁴``). Both plans are costed; the cheaper is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heinfer.compiler.cost import BATCH_UNITS
from heinfer.compiler.ir import Linear, Square
from heinfer.compiler.rescale_search import search_cuts
from heinfer.errors import CompileError

__all__ = ["GUARD_BITS", "LayerPlan", "SegmentPlan", "max_log_qp", "plan_segment"]

#: Bits kept above a value's bound for the sign and the noise.
GUARD_BITS = 2.0

#: HomomorphicEncryption.org table (ternary secrets), as in ``heinfer-ckks``.
_MAX_LOG_QP = {
    128: {11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772},
    192: {11: 37, 12: 75, 13: 152, 14: 305, 15: 611},
    256: {11: 29, 12: 58, 13: 118, 14: 237, 15: 476},
}

# The planner compares candidate plans (prime sizes, ring degrees, rescale placements) before
# any parameter exists to measure, so it prices them with the analytic batch-axis units of the
# one cost model (heinfer.compiler.cost.BATCH_UNITS: ns per ring coefficient and limb).
UNIT_FMA = BATCH_UNITS["gemm_mac"]
UNIT_SQUARE = BATCH_UNITS["batch_square"]
UNIT_RESCALE = BATCH_UNITS["batch_rescale"]
UNIT_RELIN = BATCH_UNITS["batch_relin"]
UNIT_ENCRYPT = BATCH_UNITS["batch_encrypt"]
UNIT_DECRYPT = BATCH_UNITS["batch_decrypt"]
UNIT_GEMM_IO = BATCH_UNITS["gemm_io"]
UNIT_BYTE = BATCH_UNITS["wire_byte"]

#: What a layer in two digits pays per digit over one in one digit (see BATCH_UNITS).
UNIT_TWO_DIGIT = BATCH_UNITS["gemm_two_digit"]


def max_log_qp(log_n: int, security: int) -> int | None:
    """Largest ``log2(QP)`` for ``N = 2^log_n`` at ``security`` bits, or ``None``."""
    return _MAX_LOG_QP.get(security, {}).get(log_n)


@dataclass(frozen=True)
class LayerPlan:
    """Weight scale exponent and digits of one linear layer."""

    exponent: int
    digits: int


@dataclass(frozen=True)
class SegmentPlan:
    """The plan of one segment for one prime size: limbs at every op, rescales, cost."""

    prime_bits: int
    layers: tuple[LayerPlan | None, ...]
    rescales: tuple[int, ...]  # primes divided after op t (0: none)
    limbs: tuple[int, ...]  # limbs each op runs on
    relin_before: tuple[bool, ...]
    top_limbs: int
    end_limbs: int
    end_parts: int
    cost: float  # per ring coefficient
    log_scales: tuple[float, ...]  # log2 scale at each op output (before its rescale)

    @property
    def needs_relin(self) -> bool:
        """Whether the segment relinearizes (then the parameters need a special prime)."""
        return any(self.relin_before)


def _digit_bits(prime_bits: int, digits: int) -> float:
    """log2 of the largest centered digit of a residue modulo a ``prime_bits``-bit prime."""
    return prime_bits - 1.0 if digits == 1 else math.ceil(prime_bits / 2)


def layer_plan(op: Linear, prime_bits: int, weight_bits: int, hide: float) -> LayerPlan:
    """Weight scale and digits for ``op`` (weights possibly scaled by up to ``hide``)."""
    w = abs(op.matrix)
    l1 = float(np.asarray(w.sum(axis=1)).max()) * hide if op.nnz else 0.0
    wmax = float(w.max()) * hide if op.nnz else 0.0
    if wmax == 0.0:
        return LayerPlan(0, 1)
    target = weight_bits - math.ceil(math.log2(wmax))
    for digits in (1, 2):
        room = math.floor(52.0 - _digit_bits(prime_bits, digits) - math.log2(l1))
        if room >= target or (digits == 1 and room >= target - 2):
            return LayerPlan(min(room, target), digits)
    room = math.floor(52.0 - _digit_bits(prime_bits, 2) - math.log2(l1))
    if room + math.ceil(math.log2(wmax)) < 8:
        raise CompileError(
            f"layer {op.name!r}: ‖W‖₁ = {l1:.3g} is too large for exact evaluation with "
            f"{prime_bits}-bit primes (fewer than 8 bits of weight precision)"
        )
    return LayerPlan(room, 2)


def plan_segment(
    ops: list,
    bounds: list[float],
    log_input_scale: float,
    prime_bits: int,
    weight_bits: int,
    hides: list[float],
    lazy: bool = True,
) -> SegmentPlan:
    """The cheapest plan of a segment with ``prime_bits``-bit primes.

    ``bounds[t]`` bounds ``|value|`` after op ``t`` (``bounds[-1]`` of the segment input is not
    needed: the input is encrypted at its scale). ``hides[t]``: largest factor the hiding
    scales multiply op ``t``'s weights by (1 when none). ``lazy=False`` is the baseline:
    weights at scale ``≈ q`` and one rescale after every op, the last one included.
    """
    b = float(prime_bits)
    n_ops = len(ops)
    layers = tuple(
        layer_plan(op, prime_bits, weight_bits, hides[t]) if isinstance(op, Linear) else None
        for t, op in enumerate(ops)
    )
    if not lazy:
        layers = tuple(LayerPlan(prime_bits, 1) if lp else None for lp in layers)
    if not lazy:
        plan = _simulate(ops, bounds, log_input_scale, b, layers, frozenset(range(n_ops)), lazy)
    else:
        cuts = search_cuts(
            n_ops, log_input_scale, b, *_search_model(ops, bounds, log_input_scale, b, layers)
        )
        chosen = frozenset(t for t, k in enumerate(cuts.primes) if k) if cuts else None
        plan = (
            None
            if chosen is None
            else _simulate(ops, bounds, log_input_scale, b, layers, chosen, lazy)
        )
    if plan is None:
        raise CompileError(
            "no rescale schedule keeps the scale of this segment above its input scale"
        )
    tail = _open_tail(ops) if lazy else None
    if tail is not None:
        open_plan = _plan_open_tail(ops, bounds, log_input_scale, b, layers, tail)
        # cheaper, and on no more limbs (the modulus must fit the security bound as well)
        if open_plan is not None and open_plan.cost < plan.cost and open_plan.top_limbs <= plan.top_limbs:
            plan = open_plan
    return plan


def _open_tail(ops) -> int | None:
    """The index of the segment's last square when it may stay unrelinearized: it squares a
    square not yet relinearized and only linear layers follow it; else ``None``."""
    squares = [t for t, op in enumerate(ops) if isinstance(op, Square)]
    if not squares:
        return None
    last = squares[-1]
    if not all(isinstance(op, Linear) for op in ops[last + 1 :]):
        return None
    parts_at, _ = _parts(ops[:last])
    return last if parts_at and parts_at[-1] == 3 else None


def _plan_open_tail(ops, bounds, s_in, b, layers, tail: int) -> SegmentPlan | None:
    """The cheapest plan whose square ``tail`` is not relinearized, with no rescale from
    there on (``None`` when the scale cannot stay unrescaled that long)."""
    advance, primes, op_cost, in_cost, out_cost = _search_model(ops, bounds, s_in, b, layers, tail)

    def no_late_cut(t: int, limbs: int, k: int) -> float:
        return math.inf if k and t >= tail else op_cost(t, limbs, k)

    cuts = search_cuts(len(ops), s_in, b, advance, primes, no_late_cut, in_cost, out_cost)
    if cuts is None or any(cuts.primes[tail:]):
        return None
    chosen = frozenset(t for t, k in enumerate(cuts.primes) if k)
    return _simulate(ops, bounds, s_in, b, layers, chosen, True, tail)


def _parts(ops, tail: int | None = None) -> tuple[list[int], list[bool]]:
    """Ciphertext parts at each op's output and whether it relinearizes first (lazy relin).
    Op ``tail`` (an open tail, :func:`_open_tail`) squares its 3 parts into 5 instead."""
    parts, parts_at, relin = 2, [], []
    for t, op in enumerate(ops):
        r = isinstance(op, Square) and parts == 3 and t != tail
        if isinstance(op, Square):
            parts = 2 * (2 if r else parts) - 1
        relin.append(r)
        parts_at.append(parts)
    return parts_at, relin


def _advance(op, layer: LayerPlan | None, s: float) -> float:
    """log2 scale after ``op`` from ``s`` before it (a square doubles, a layer adds ``e``)."""
    return 2 * s if isinstance(op, Square) else s + layer.exponent


def _need(s: float, bound: float, b: float) -> int:
    """Limbs a value of bound ``bound`` at log2 scale ``s`` needs."""
    return math.ceil((s + math.log2(bound) + GUARD_BITS) / b)


def _op_cost(op, layer, limbs: int, parts: int, relin: bool, k: int) -> float:
    """Cost of ``op`` on ``limbs`` limbs and ``parts`` parts, then a rescale by ``k`` primes."""
    cost = 0.0
    if isinstance(op, Linear):
        cost += UNIT_FMA * op.nnz * parts * limbs * (1.0 if layer.digits == 1 else 2.0 * UNIT_TWO_DIGIT)
        # the kernel's reduction and packing: per output and input element
        cost += UNIT_GEMM_IO * (op.matrix.shape[0] + op.matrix.shape[1]) * parts * limbs
    else:
        size = int(np.prod(op.shape))
        if relin:
            cost += UNIT_RELIN * size * limbs * (limbs + 1)
        # three products per coefficient of a 2-part square, six of a 3-part one (5 parts)
        cost += UNIT_SQUARE * size * limbs * (2.0 if parts == 5 else 1.0)
    if k:
        cost += UNIT_RESCALE * op_out_size(op) * parts * (limbs + k)
    return cost


def _in_cost(op, b: float, limbs: int) -> float:
    """Encrypting and sending the segment's input at ``limbs`` limbs."""
    n = op_in_size(op)
    return UNIT_ENCRYPT * n * limbs + UNIT_BYTE * b / 8 * (n * limbs)


def _out_cost(op, b: float, limbs: int, parts: int) -> float:
    """Sending and decrypting the segment's output at ``limbs`` limbs."""
    n = op_out_size(op)
    return UNIT_DECRYPT * n * limbs * parts + UNIT_BYTE * b / 8 * n * limbs * parts


def _search_model(ops, bounds, s_in, b, layers, tail: int | None = None) -> tuple:
    """The callbacks of :func:`search_cuts` for this segment (lazy rescaling; ``tail``: the
    open tail's square, :func:`_parts`)."""
    parts_at, relin = _parts(ops, tail)

    def advance(t: int, s: float) -> tuple[float, int]:
        s = _advance(ops[t], layers[t], s)
        return s, _need(s, bounds[t], b)

    def primes(s: float) -> int:
        return math.floor((s - s_in + 1.0) / b)

    def op_cost(t: int, limbs: int, k: int) -> float:
        return _op_cost(ops[t], layers[t], limbs, parts_at[t], relin[t], k)

    return (
        advance,
        primes,
        op_cost,
        lambda limbs: _in_cost(ops[0], b, limbs),
        lambda limbs: _out_cost(ops[-1], b, limbs, parts_at[-1]),
    )


def _simulate(ops, bounds, s_in, b, layers, chosen, lazy, tail: int | None = None) -> SegmentPlan | None:
    """Scales, limbs and cost of one rescale schedule (``None`` if it underflows; ``tail``:
    the open tail's square, :func:`_parts`)."""
    n_ops = len(ops)
    parts_at, relin = _parts(ops, tail)
    s = s_in
    scales, rescales, need = [], [], []
    for t, op in enumerate(ops):
        s = _advance(op, layers[t], s)
        scales.append(s)
        need.append(_need(s, bounds[t], b))
        k = 0
        if t in chosen:
            k = 1 if not lazy else math.floor((s - s_in + 1.0) / b)
            if k < 1:
                return None
            s -= k * b
        rescales.append(k)
    # limbs each op runs on: enough for every later requirement plus the primes rescaled away
    limbs = [0] * n_ops
    limbs[-1] = max(need[-1], rescales[-1] + 1)
    for t in range(n_ops - 2, -1, -1):
        limbs[t] = max(need[t], limbs[t + 1] + rescales[t])
    cost = sum(
        _op_cost(op, layers[t], limbs[t], parts_at[t], relin[t], rescales[t])
        for t, op in enumerate(ops)
    )
    cost += _in_cost(ops[0], b, limbs[0]) + _out_cost(ops[-1], b, limbs[-1], parts_at[-1])
    return SegmentPlan(
        prime_bits=int(b),
        layers=layers,
        rescales=tuple(rescales),
        limbs=tuple(limbs),
        relin_before=tuple(relin),
        top_limbs=limbs[0],
        end_limbs=limbs[-1],
        end_parts=parts_at[-1],
        cost=cost,
        log_scales=tuple(scales),
    )


def op_in_size(op) -> int:
    """Number of input values of a Linear or Square op."""
    return int(op.matrix.shape[1]) if isinstance(op, Linear) else int(np.prod(op.shape))


def op_out_size(op) -> int:
    """Number of output values of a Linear or Square op."""
    return int(op.matrix.shape[0]) if isinstance(op, Linear) else int(np.prod(op.shape))

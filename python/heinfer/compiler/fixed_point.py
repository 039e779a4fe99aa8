"""Fixed-point plans for the two-party protocol (GAZELLE §4): integers modulo ``p`` everywhere.

Layer: ``heinfer.compiler`` (pure numpy).

BFV computes exactly on integers mod a plaintext modulus ``p``, and the garbled circuits
reconstruct, compare and truncate those integers. A real value ``v`` of a tensor with ``f``
fractional bits travels as ``round(v·2^f)``, stored mod ``p`` in ``[0, p)`` and read as signed
(values above ``(p−1)/2`` are negative). A :class:`Linear` ``y = W x + b`` runs on integers:

.. math::  Y = \\bar W X + \\bar b, \\quad \\bar W = \\mathrm{round}(W 2^{f_w}),\\
           \\bar b = \\mathrm{round}(b\\,2^{f_x + f_w}),

so ``Y`` has ``f_x + f_w`` fractional bits. The garbled circuit of the next non-linear step
(ReLU, max-pooling, both fused) truncates by ``shift = f_x + f_w − f_next`` bits
(``⌊max(Y, 0) / 2^shift⌋``), which gives the next layer its ``f_next`` fractional bits; half an
ulp added to the bias makes that floor a rounding at no cost in the circuit. A square step
truncates to ``g`` bits in its circuit (``⌊Y / 2^shift⌋``, signed) and squares with AHE: the
next layer's input has ``f_next = 2g`` fractional bits, so the plan gives it an even split.

The plan keeps every value inside the signed range: ``bound·2^{f} < (p−1)/2 / 2`` (one bit of
head-room over the planned bound ``bound``, which is the larger of the calibrated maximum
times the compiler's headroom and is checked by :func:`simulate`). Within that budget it
splits the bits of each layer between its input and its weights to minimise the predicted
root-mean-square rounding error (``‖W_i‖₂·2^{−f_x} + ‖x‖₂·2^{−f_w}``). :func:`simulate` runs a
plan exactly as the protocol does — mod ``p``, with the circuits' truncation — so tests and
the compiler can compare it with float inference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction, Graph, Linear, Square
from heinfer.errors import CompileError, UnsupportedOperatorError
from heinfer.program.modular import MAX_MODULUS_BITS, matmul_mod
from heinfer.program.two_party import clip_range

__all__ = ["FixedPointLayer", "FixedPointPlan", "plan_fixed_point", "simulate"]

#: Client functions a step evaluates between two linear layers (a square: a truncation
#: circuit, then GAZELLE's AHE square protocol; a clip: its own circuit, e.g. ReLU6).
CIRCUIT_KINDS = frozenset({"relu", "maxpool", "sumpool", "square", "clip"})
#: Client functions allowed as the last op: applied by the client to its output in the clear.
OUTPUT_KINDS = frozenset({"softmax", "sigmoid", "tanh", "relu", "maxpool", "clip", "leaky_relu"})


@dataclass(frozen=True)
class FixedPointLayer:
    """One linear layer in fixed point, and the circuit step that follows it.

    ``in_frac`` / ``weight_frac``: fractional bits of the input and the weights (the output
    has their sum). ``weights`` (``int64`` CSR) and ``bias`` (``int64``) are the rounded
    integers, signed. ``step``: the client functions that follow (kinds, in order: ``relu``,
    ``maxpool`` or both, or none before the output); ``shift``: the truncation they apply.
    ``bound``: the planned largest ``|value|`` of the output in real units.
    """

    name: str
    in_frac: int
    weight_frac: int
    weights: sp.csr_matrix
    bias: np.ndarray
    bound: float
    step: tuple[ClientFunction, ...]
    shift: int

    @property
    def out_frac(self) -> int:
        """Fractional bits of the layer's integer output (before the step's truncation)."""
        return self.in_frac + self.weight_frac

    def clip_bounds(self, p: int) -> tuple[int, int] | None:
        """The step's clip (``Clip`` between linear layers: ``[min, max]``, either optional) as
        the circuit's integer bounds at :attr:`out_frac` fractional bits, half an ulp of the
        truncation added as the bias carries it (``⌊clamp(y + h, lo + h, hi + h)/2^s⌋`` rounds
        ``clamp(y, lo, hi)``), limited to what the circuit holds modulo ``p``
        (:func:`~heinfer.program.two_party.clip_range`: every value the plan allows lies
        inside). ``None`` without a clip."""
        fn = next((f for f in self.step if f.kind == "clip"), None)
        if fn is None:
            return None
        h = 1 << (self.shift - 1) if self.shift > 0 else 0
        low, high = clip_range(p, self.shift)
        lo, hi = fn.attrs["min"], fn.attrs["max"]
        lo_i = low if lo is None else max(low, int(np.rint(lo * 2.0**self.out_frac)) + h)
        hi_i = high if hi is None else min(high, int(np.rint(hi * 2.0**self.out_frac)) + h)
        if lo_i > hi_i:
            raise CompileError(f"two-party protocol: the clip after {self.name!r} to [{lo}, {hi}] is empty in fixed point")
        return lo_i, hi_i


@dataclass(frozen=True)
class FixedPointPlan:
    """A network as fixed-point layers mod ``p``; ``output`` is the trailing client function
    (softmax, …) the client applies to its decrypted output, if any."""

    p: int
    input_frac: int
    layers: tuple[FixedPointLayer, ...]
    output: ClientFunction | None

    @property
    def output_frac(self) -> int:
        """Fractional bits of the integers the client decrypts at the end."""
        return self.layers[-1].out_frac - self.layers[-1].shift


def as_client_square(op):
    """An IR :class:`Square` as the client function ``square`` (a two-party step); other ops
    unchanged."""
    return ClientFunction(op.name, "square", {}, op.in_shape, op.out_shape) if isinstance(op, Square) else op


def _groups(ops: list) -> list[tuple[Linear, list[ClientFunction]]]:
    """Splits a chain into (Linear, following client functions); refuses what has no circuit."""
    out: list[tuple[Linear, list[ClientFunction]]] = []
    for i, op in enumerate(map(as_client_square, ops)):
        if isinstance(op, Linear):
            out.append((op, []))
        elif not out:
            raise UnsupportedOperatorError(
                f"two-party protocol: {op.kind} {op.name!r} before any linear layer is not "
                "supported yet"
            )
        else:
            last = i == len(ops) - 1
            if op.kind not in CIRCUIT_KINDS and not (last and op.kind in OUTPUT_KINDS):
                raise UnsupportedOperatorError(
                    f"two-party protocol: {op.kind} {op.name!r} between linear layers has no "
                    "garbled circuit yet (ReLU and max-pooling do)"
                )
            out[-1][1].append(op)
            if op.kind == "square" and len(out[-1][1]) > 1:
                raise UnsupportedOperatorError(
                    f"two-party protocol: square {op.name!r} next to another function between "
                    "linear layers is not supported yet"
                )
    if not out:
        raise CompileError("two-party protocol: the network has no linear layer")
    return out


def _best_split(
    layer: Linear, total: int, in_cap: int, x_l2: float, root: float | None = None
) -> tuple[int, int]:
    """``(f_x, f_w)`` with ``f_x + f_w = total`` and ``f_x ≤ in_cap`` minimising the predicted
    root-mean-square rounding error of an output, ``(‖W_i‖₂·2^{−f_x} + ‖x‖₂·2^{−f_w})/√12``
    (independent rounding errors, uniform in half an ulp; largest row norm). After a square
    (``root``: the root-mean-square of the value squared) ``f_x = 2g`` is even and the input's
    error is that of ``z²`` with ``z`` rounded to ``g`` bits, ``2·z·2^{−g}``."""
    w_l2 = float(np.sqrt(np.asarray(layer.matrix.multiply(layer.matrix).sum(axis=1)).max(initial=0.0)))
    best = None
    for f_x in range(0, min(total, in_cap) + 1, 1 if root is None else 2):
        f_w = total - f_x
        x_err = 2.0**-f_x if root is None else 2.0 * root * 2.0 ** -(f_x // 2)
        err = w_l2 * x_err + x_l2 * 2.0**-f_w
        if best is None or err < best[0]:
            best = (err, f_x, f_w)
    assert best is not None
    return best[1], best[2]


def plan_fixed_point(
    graph: Graph, bounds: list[float], p: int, calibration: np.ndarray | None = None
) -> FixedPointPlan:
    """Plans fractional bits and truncations for ``graph`` (a chain) modulo the prime ``p``.

    ``bounds``: the compiler's planned ``|value|`` bound for the input and every op's output
    (``compiler.ranges.tensor_bounds``). ``calibration`` (optional): sample inputs, used for
    the input 1-norms that weigh the rounding error. Raises :class:`CompileError` when a layer
    cannot keep even one fractional bit, and :class:`UnsupportedOperatorError` for ops that
    have no circuit yet.
    """
    if p < 5 or p % 2 == 0:
        raise CompileError(f"plaintext modulus {p} must be an odd prime")
    usable = int(math.floor(math.log2((p - 1) / 2))) - 1  # one bit of head-room
    groups = _groups(graph.ops)
    index = {id(op): i for i, op in enumerate(graph.ops)}
    x = None if calibration is None else np.asarray(calibration, np.float64).reshape(len(calibration), -1)
    layers: list[FixedPointLayer] = []
    in_cap = usable  # the first input: the client encodes at any precision
    input_frac = None
    for g, (lin, step) in enumerate(groups):
        in_bound = bounds[index[id(lin)]]
        out_bound = bounds[index[id(lin)] + 1]
        total = usable - max(0, math.ceil(math.log2(max(out_bound, 2.0**-30))))
        in_room = usable - max(0, math.ceil(math.log2(max(in_bound, 2.0**-30))))
        if total < 1 or in_room < 0:
            raise CompileError(
                f"two-party protocol: layer {lin.name!r} (|output| ≤ {out_bound:.3g}) does not "
                f"fit a {p.bit_length()}-bit plaintext modulus with any precision; "
                "choose a larger plaintext modulus"
            )
        x_l2 = (
            float(np.sqrt((x * x).sum(axis=1).max()))
            if x is not None
            else in_bound * math.sqrt(lin.matrix.shape[1])
        )
        squared = bool(layers) and [f.kind for f in layers[-1].step] == ["square"]
        # after a square the input has 2g fractional bits for the circuit's g ≤ the output's
        root = None
        if squared:  # the RMS of the value the square step rounds: √(mean of its square)
            root = float(np.sqrt(x.mean())) if x is not None else math.sqrt(in_bound)
        f_x, f_w = _best_split(lin, total, min(2 * in_cap if squared else in_cap, in_room), x_l2, root)
        if input_frac is None:
            input_frac = f_x
        elif layers:
            prev = layers[-1]
            shift = prev.out_frac - (f_x // 2 if squared else f_x)
            # round half up for free: ⌊(ReLU(y) + h)/2^s⌋ = ⌊ReLU(y + h)/2^s⌋ for h = 2^(s−1)
            # (both are 0 for y < 0), and max(x + h) = max(x) + h: h goes into the bias (a
            # square's truncation is ⌊(y + h)/2^s⌋ itself)
            bias = prev.bias + (1 << (shift - 1) if shift > 0 else 0)
            layers[-1] = replace(prev, shift=shift, bias=bias)
        weights = lin.matrix.copy()  # sparse: never densified
        weights.data = np.rint(weights.data * 2.0**f_w)
        weights = sp.csr_matrix(weights, dtype=np.int64)
        weights.eliminate_zeros()
        bias = np.rint(lin.bias * 2.0 ** (f_x + f_w)).astype(np.int64)
        last = g == len(groups) - 1
        circuit = tuple(s for s in step if s.kind in CIRCUIT_KINDS) if not last else ()
        layers.append(FixedPointLayer(lin.name, f_x, f_w, weights, bias, out_bound, circuit, 0))
        if x is not None:
            x = lin.apply(x)
            for s in circuit:
                x = s.apply(x)
        in_cap = f_x + f_w  # a truncation can only lower the precision
    # the output: the client decrypts the last layer's integers (no truncation needed)
    tail = groups[-1][1]
    if len(tail) > 1:
        raise UnsupportedOperatorError(
            "two-party protocol: more than one client function after the last linear layer"
        )
    assert input_frac is not None
    return FixedPointPlan(p, input_frac, tuple(layers), tail[0] if tail else None)


def _signed(v: np.ndarray, p: int) -> np.ndarray:
    return np.where(v > (p - 1) // 2, v - p, v)


def simulate(plan: FixedPointPlan, x: np.ndarray, check: bool = True) -> np.ndarray:
    """Runs ``plan`` on inputs ``x`` (batch, …) exactly as the protocol computes: integers mod
    ``p``, each step's circuit (ReLU, max-pooling) on the signed values, truncated by its
    shift. Returns the real outputs (before the trailing client function). With ``check``,
    raises :class:`CompileError` when a value leaves the signed range (the plan's bound was
    exceeded: the protocol would wrap around)."""
    p = plan.p
    if p >= 1 << MAX_MODULUS_BITS:
        raise CompileError(f"simulate: plaintext moduli of more than {MAX_MODULUS_BITS} bits are not supported")
    half = (p - 1) // 2
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    v = np.rint(x * 2.0**plan.input_frac).astype(np.int64)
    if check and np.abs(v).max(initial=0) > half:
        raise CompileError("simulate: an input exceeds the planned range")
    v %= p
    for layer in plan.layers:
        y = (matmul_mod(layer.weights, v, p) + layer.bias) % p
        s = _signed(y, p)
        if check:
            exact = np.asarray(layer.weights @ _signed(v, p).T.astype(np.float64)).T + layer.bias
            if np.abs(exact).max(initial=0) > half:
                raise CompileError(
                    f"simulate: layer {layer.name!r} wraps around modulo p (|value| "
                    f"{np.abs(exact).max():.3g} > {half}); its planned bound {layer.bound:.3g} "
                    "was exceeded"
                )
        squares = [fn.kind for fn in layer.step] == ["square"]
        for fn in layer.step:  # exact on integers below 2^53
            if fn.kind == "clip":  # at the integers' scale, as the circuit clamps; kept values pass
                before, after = fn.keep
                s = s.copy()
                s[:, before : s.shape[1] - after] = np.clip(s[:, before : s.shape[1] - after], *layer.clip_bounds(p))
            elif fn.kind not in ("sumpool", "square"):
                s = np.rint(fn.apply(s.astype(np.float64))).astype(np.int64)
        s = s >> layer.shift  # floor division by 2^shift, as the circuit truncates
        if squares:  # the AHE square of the truncated value
            s = s * s
            if check and np.abs(s).max(initial=0) > half:
                raise CompileError(f"simulate: the square after {layer.name!r} wraps around modulo p")
        for fn in layer.step:  # a sum-pool after the circuit: each party sums its own shares
            if fn.kind == "sumpool":
                s = np.rint(fn.apply(s.astype(np.float64))).astype(np.int64)
        v = s % p
    return _signed(v, p).astype(np.float64) / 2.0**plan.output_frac

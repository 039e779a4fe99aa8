"""Choosing the two-party protocol's BFV parameters for a network.

Layer: ``heinfer.compiler`` (pure: the primes come from the caller).

GAZELLE's parameters (a 20-bit plaintext modulus ``p``, one ring, a fixed ciphertext modulus)
suit its small networks; a deep one (MobileNetV2: a dozen truncations, depthwise layers with
large weights) needs more fractional bits than 20-bit shares hold, and a larger ``p`` needs
more flooding (a linear layer's error grows with ``N·p²``), so a larger ``Q`` and at times a
larger ring. Two choices, in this order:

1. **The plaintext modulus**, from precision: the fixed-point plan at each size of
   :data:`PLAIN_BITS` in turn is simulated exactly (integers mod ``p``, the circuits'
   truncations: :func:`heinfer.compiler.fixed_point.simulate`) on the first
   :data:`CHECK_ITEMS` calibration inputs and compared with the model in float64 (up to 36
   bits; 28 with square steps: :data:`SQUARE_MAX_BITS`); the first
   size whose worst item is within :data:`MAX_REL_ERROR` of its largest output and whose
   items keep the model's largest output in at least :data:`MIN_AGREEMENT` of cases is kept
   (the widest when none is: the compiler's :class:`~heinfer.errors.PrecisionWarning` says
   so). The plan alone decides this — no layout search — so a size costs one simulation.
2. **The ciphertext modulus and ring**, from the flooding each layer needs (known only after
   its layout, so the program is compiled and, when a layer's flooding does not fit,
   compiled again with the modulus that holds it: :func:`ring_for_flood`): the fewest
   :data:`PRIME_BITS`-bit primes (the size the engine's fastest kernels and the exact
   batch-axis kernel take) with one special prime, in the smallest ring whose security table
   (128 bits by default) holds them.

A network that fits GAZELLE's parameters keeps them (``DEFAULT_BFV``, the benchmarks' rows).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from heinfer.compiler.fixed_point import simulate
from heinfer.compiler.ir import Graph, Square
from heinfer.compiler.latency.two_party import DEFAULT_BFV, fixed_point_front, max_flood_bits
from heinfer.compiler.plan import max_log_qp
from heinfer.errors import CompileError, FloodBudgetError

__all__ = [
    "CHECK_ITEMS", "MAX_REL_ERROR", "MIN_AGREEMENT", "PLAIN_BITS", "PRIME_BITS", "SQUARE_MAX_BITS", "PlainChoice", "choose_bfv", "choose_plain_bits",
    "plan_error", "ring_for_flood",
]

#: Plaintext modulus sizes tried, smallest first: GAZELLE's 20 bits, then wider ones. A network
#: with a square step stops at :data:`SQUARE_MAX_BITS`.
PLAIN_BITS = (20, 24, 28, 32, 36)
#: The widest plaintext modulus with square steps: GAZELLE's square protocol multiplies the
#: server's weights by ``2b`` in the engine's exact kernels and squares shares in 64-bit
#: integers, which hold the products of 31-bit residues.
SQUARE_MAX_BITS = 31
#: Bits of each ciphertext and special prime the compiler picks.
PRIME_BITS = 50
#: Calibration inputs the plan is simulated on.
CHECK_ITEMS = 16
#: A plan is precise enough when every simulated item's largest output error is at most this
#: fraction of its largest output …
MAX_REL_ERROR = 0.5
#: … and at least this fraction of the items keep the model's largest output (classifiers).
MIN_AGREEMENT = 0.9
#: Compiles with a grown modulus before giving up (each growth holds the widest layer seen).
MAX_ATTEMPTS = 4


@dataclass(frozen=True)
class PlainChoice:
    """The plaintext modulus chosen and why: ``errors`` maps each size tried to its simulated
    ``(worst relative error, agreement or None)``."""

    bits: int
    errors: dict[int, tuple[float, float | None]]

    def record(self) -> dict:
        """The choice as a JSON-friendly record (``program.meta["bfv_choice"]``)."""
        return {
            "plain_bits": self.bits,
            "simulated": {str(b): {"rel_error": r, "agreement": a} for b, (r, a) in self.errors.items()},
            "items": CHECK_ITEMS,
        }


def plan_error(graph: Graph, calibration: np.ndarray, input_bound: float | None, headroom: float, p: int) -> tuple[float, float | None]:
    """``(worst relative error, agreement)`` of the fixed-point plan at ``p`` against the model,
    simulated exactly on the first :data:`CHECK_ITEMS` calibration inputs (agreement ``None``
    for a single output). A plan that does not fit ``p`` at all counts as infinitely wrong."""
    try:
        _, pre, _, post, plan = fixed_point_front(graph, calibration, input_bound, headroom, p)
    except CompileError:
        return math.inf, 0.0
    x = np.asarray(calibration, dtype=np.float64)[:CHECK_ITEMS]
    want = graph.run(x).reshape(len(x), -1)
    y = x.reshape(len(x), -1)
    for f in pre:
        y = f.apply(y)
    got = simulate(plan, y, check=False)
    for f in post:
        got = f.apply(got)
    got = np.asarray(got).reshape(len(x), -1)
    rel = float((np.abs(got - want).max(axis=1) / np.maximum(np.abs(want).max(axis=1), 1e-300)).max())
    agree = float((got.argmax(axis=1) == want.argmax(axis=1)).mean()) if want.shape[1] > 1 else None
    return rel, agree


def choose_plain_bits(
    graph: Graph, calibration: np.ndarray, input_bound: float | None, headroom: float, prime_for: Callable[[int], int]
) -> PlainChoice:
    """The smallest size of :data:`PLAIN_BITS` whose plan is precise enough (module
    documentation), the widest when none is. ``prime_for(bits)`` gives the plaintext prime of
    that size (20 bits: GAZELLE's, the default parameters')."""
    errors: dict[int, tuple[float, float | None]] = {}
    squares = any(isinstance(op, Square) for op in graph.ops)
    sizes = [b for b in PLAIN_BITS if not squares or b <= SQUARE_MAX_BITS]
    for bits in sizes:
        p = int(DEFAULT_BFV["plain_modulus"]) if bits == 20 else prime_for(bits)
        rel, agree = errors[bits] = plan_error(graph, calibration, input_bound, headroom, p)
        if rel <= MAX_REL_ERROR and (agree is None or agree >= MIN_AGREEMENT):
            return PlainChoice(bits, errors)
    return PlainChoice(sizes[-1], errors)


def ring_for_flood(p: int, flood: int, log_n_min: int = 13, security: int = 128, prime_bits: int = PRIME_BITS) -> dict | None:
    """The BFV parameters (a dict as :data:`DEFAULT_BFV`) that decrypt through flooding of
    ``2^flood`` with plaintext modulus ``p``: the fewest ``prime_bits``-bit primes ``k`` with
    ``max_flood_bits ≥ flood`` and one special prime, in the smallest ring from
    ``2^log_n_min`` whose security table holds ``(k + 1)·prime_bits`` bits and whose ``2N``
    divides ``p − 1``. ``None`` when no ring up to ``2^15`` does."""
    for log_n in range(log_n_min, 16):
        limit = max_log_qp(log_n, security)
        if limit is None or (p - 1) % (2 << log_n):
            continue
        for k in range(2, limit // prime_bits):  # one prime never holds a flood (2^(40 + log2 N) and more)
            bfv = {"log_n": log_n, "log_q": [prime_bits] * k, "log_p": [prime_bits], "plain_modulus": int(p), "security": security}
            if max_flood_bits(bfv) >= flood and (k + 1) * prime_bits <= limit:
                return bfv
    return None


def choose_bfv(compile_with: Callable[[dict], object], p: int, security: int = 128):
    """Compiles with ``compile_with(bfv)`` under parameters grown until every layer's flooding
    fits (module documentation): first :data:`DEFAULT_BFV`'s shape with ``p`` (GAZELLE's own
    parameters when ``p`` is theirs; above 128-bit security the smallest ring that holds as
    much flooding), then :func:`ring_for_flood` of the widest flooding the
    last attempt needed. Returns the program; raises :class:`~heinfer.errors.FloodBudgetError`
    when no ring up to ``2^15`` whose ``2N`` divides ``p − 1`` holds it."""
    bfv = {**DEFAULT_BFV, "plain_modulus": int(p), "security": security}
    if (len(bfv["log_q"]) + len(bfv["log_p"])) * PRIME_BITS > (max_log_qp(bfv["log_n"], security) or 0):
        # a higher security level: a ring that holds as much flooding as GAZELLE's shape
        want = max_flood_bits(bfv)
        bfv = ring_for_flood(p, want, security=security)
        if bfv is None:
            raise FloodBudgetError(
                f"two-party protocol: no BFV ring up to N = 2^15 holds 2^{want} of flooding at {security}-bit security "
                f"with a plaintext modulus p = {p} (2N must divide p − 1)", bits=want, limit=0,
            )
    for _ in range(MAX_ATTEMPTS):
        try:
            return compile_with(bfv)
        except FloodBudgetError as e:
            grown = ring_for_flood(p, e.bits, int(bfv["log_n"]), security)
            if grown is None or grown == bfv:
                raise FloodBudgetError(
                    f"{e} — and no BFV ring up to N = 2^15 with {PRIME_BITS}-bit primes holds 2^{e.bits} at a "
                    f"{p.bit_length()}-bit plaintext modulus", bits=e.bits, limit=e.limit,
                ) from None
            bfv = grown
    raise FloodBudgetError(f"two-party protocol: the flooding did not settle in {MAX_ATTEMPTS} compilations", bits=0, limit=0)

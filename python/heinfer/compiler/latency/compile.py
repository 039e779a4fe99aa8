"""Compiling a graph for latency mode: graph → a :class:`~heinfer.program.Program` in the slot layout.

Layer: ``heinfer.compiler`` (pure Python + numpy; the cost table is passed in). Passes:

1. the throughput front end: :func:`~heinfer.compiler.pools.pools_to_client` (an average
   pool after a client step is summed by the client), :func:`~heinfer.compiler.fuse.fold_linear`,
   :func:`~heinfer.compiler.throughput.split_segments`, value ranges;
2. :func:`choose_parameters` — one level per linear layer and per square (a plaintext
   product at scale ``q_ℓ`` followed by a rescale keeps the scale), the largest scale that
   fits the smallest secure ring;
3. the **packing search** (:mod:`heinfer.compiler.latency.search`) per layer, with costs
   micro-benchmarked for those parameters (``cost_fn``);
4. the program: gather maps, lowered transforms, placements, exact rotation-key list —
   widened to ``items`` lanes when a query carries several items
   (:mod:`heinfer.compiler.latency.lanes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from heinfer.compiler.fuse import fold_linear
from heinfer.compiler.ir import Graph, Linear, Square
from heinfer.compiler.cost import CostTable, analytic_costs, messages_cost, square_cost
from heinfer.compiler.latency.lanes import widen_gather, widen_placement, widen_transform
from heinfer.compiler.latency.search import (
    STRATEGIES, KernelChoice, LatencyStep, build_kernel, input_candidates, output_candidates, price_kernel,
)
from heinfer.compiler.plan import max_log_qp
from heinfer.compiler.pools import pools_to_client
from heinfer.compiler.ranges import calibrated_bounds, check_precision_bits
from heinfer.compiler.throughput import split_segments
from heinfer.errors import CompileError
from heinfer.program import Layout, Program, Segment, Step
from heinfer.program.ops import Linear as OpLinear
from heinfer.program.ops import Relinearize, Rescale
from heinfer.program.ops import Square as OpSquare

__all__ = ["LatencyOptions", "compile_latency", "choose_parameters"]


@dataclass(frozen=True)
class LatencyOptions:
    """Options of latency mode. ``security``: 128/192/256 bits. ``scale_bits``: candidate
    bits of the scale (the primes ``q_1..q_L`` and ``Δ``), largest first; the first that fits
    the smallest secure ring wins. ``headroom``: factor over calibrated maxima.
    ``precision_bits``: decrypted values are released rounded to ``bound · 2^-bits``.
    ``strategy``: ``None`` runs the packing search; a name of :data:`STRATEGIES` applies one
    fixed kernel rule (method and giant-step modulus) to every layer (the benchmarks'
    baselines), with every layout still open to it (LoLa's expanded input and stacked copies,
    chosen by cost). ``log_n``: force a ring degree. ``items``: items per query (a power of
    two), each in its own lane of every ciphertext (:mod:`heinfer.compiler.latency.lanes`):
    the layouts are searched for ``N/(2·items)`` slots and the ring grows if they need more."""

    security: int = 128
    scale_bits: tuple[int, ...] = (40, 36, 33, 30, 28)
    headroom: float = 4.0
    precision_bits: int = 16
    strategy: str | None = None
    log_n: int | None = None
    items: int = 1


def choose_parameters(depth: int, out_bound: float, options: LatencyOptions, min_slots: int = 1) -> dict:
    """The smallest ring (≥ ``2·min_slots``) and largest scale such that ``depth`` levels,
    a base prime holding ``out_bound`` at the scale, and one special prime as large as the
    largest prime fit the security bound."""
    out_bits = max(1, math.ceil(math.log2(max(out_bound, 1.0)))) + 2
    rings = [options.log_n] if options.log_n else range(max(12, math.ceil(math.log2(2 * min_slots))), 17)
    for log_n in rings:
        limit = max_log_qp(log_n, options.security)
        for s in options.scale_bits:
            q0 = s + out_bits  # holds |output| · Δ with a bit of margin
            if q0 > 60:
                continue  # engine primes stay below 2^61: a smaller scale must do
            log_q = [q0] + [s] * depth
            log_p = [max(log_q)]
            if limit and sum(log_q) + sum(log_p) <= limit:
                return {"log_n": log_n, "log_q": log_q, "log_p": log_p, "log_scale": s, "security": options.security}
    raise CompileError(f"no {options.security}-bit parameters hold {depth} levels at a scale of at least {min(options.scale_bits)} bits")


def compile_latency(
    graph: Graph,
    calibration: np.ndarray | None = None,
    input_bound: float | None = None,
    options: LatencyOptions = LatencyOptions(),
    cost_fn: Callable[[dict], CostTable] | None = None,
) -> Program:
    """Compiles ``graph`` for single-item latency (see the module documentation).

    ``cost_fn(params) → CostTable`` measures primitive costs for the chosen parameters
    (``heinfer.compile`` passes :func:`heinfer.runtime.costs.measure_costs`); without it the
    analytic NTT-count model is used."""
    if options.security not in (128, 192, 256):
        raise CompileError(f"security must be 128, 192 or 256 bits, got {options.security}")
    check_precision_bits(options.precision_bits)
    bits = options.scale_bits
    if not isinstance(bits, (tuple, list)) or not bits or not all(isinstance(b, int) and 20 <= b <= 58 for b in bits):
        raise CompileError(f"scale_bits must be a non-empty tuple of integers from 20 to 58, largest first, got {bits!r}")
    if options.strategy is not None and options.strategy not in STRATEGIES:
        raise CompileError(f"unknown strategy {options.strategy!r}: one of {sorted(STRATEGIES)}")
    items = options.items
    if not isinstance(items, int) or isinstance(items, bool) or items < 1 or items & (items - 1):
        raise CompileError(f"items must be a power of two (items per query, one per lane of the slots), got {items!r}")
    g = fold_linear(pools_to_client(graph))
    calibration, input_bound, bounds = calibrated_bounds(g, calibration, input_bound, options.headroom)
    pos = {id(op): i + 1 for i, op in enumerate(g.ops)}
    pre, seg_ops, step_fns, post = split_segments(g.ops)
    depth = max(len(ops) for ops in seg_ops)
    seg_out_bounds = [bounds[pos[id(ops[-1])]] for ops in seg_ops]
    widest = max(max(_in_size(op), _out_size(op)) for ops in seg_ops for op in ops)
    # each item's share of the slots: as one item's layers wider than 4,096 values, a lane too
    # narrow for a layer spreads it over more ciphertexts (the largest ring: 2^15 slots)
    min_slots = min((1 if options.log_n else min(widest, 4096)) * items, 1 << 15)
    params = choose_parameters(depth, max(seg_out_bounds), options, min_slots=min_slots)
    levels = len(params["log_q"])
    costs = cost_fn(params) if cost_fn else analytic_costs(params["log_n"], levels, len(params["log_p"]))
    if items > 1 << (params["log_n"] - 2):
        raise CompileError(f"{items} items per query leave fewer than 2 slots per item in N = 2^{params['log_n']}")
    slots = (1 << (params["log_n"] - 1)) // items  # each item's lane
    # the last segment's results travel rounded (heinfer.program.rounding), the steps as they are
    lowered = [_segment(ops, slots, costs, options.strategy, k == len(seg_ops) - 1) for k, ops in enumerate(seg_ops)]
    scale = float(2 ** params["log_scale"])
    segments, layers, plans = [], [], {}
    for k, (ops, (gather, steps, placement, total)) in enumerate(zip(seg_ops, lowered)):
        seg_ops_typed: list = []
        for st in steps:
            if st.op == "transform":
                layers.append(st.transform)
                plans[f"{k}.{len(seg_ops_typed)}"] = st.plan
                seg_ops_typed.append(OpLinear(len(layers) - 1, (len(seg_ops_typed),)))
            else:
                plans[f"{k}.{len(seg_ops_typed)}"] = st.plan
                for op in (OpSquare, Relinearize):
                    seg_ops_typed.append(op((len(seg_ops_typed),)))
                seg_ops_typed.append(Rescale(1, (len(seg_ops_typed),)))
        bound = seg_out_bounds[k] * 2.0
        if items > 1:
            gather, placement = widen_gather(gather, items), widen_placement(placement, items)
        segments.append(Segment(
            Layout("slots", "slots", gather), _in_size(ops[0]), len(ops), scale, seg_ops_typed, _out_size(ops[-1]),
            0, scale, bound, bound * 2.0**-options.precision_bits, placement, total,
        ))
    if items > 1:
        layers = [widen_transform(t, items) for t in layers]
    rotations = sorted({s for lay in layers for s in lay.rotation_steps()})
    needs_relin = any(isinstance(op, Relinearize) for seg in segments for op in seg.ops)
    return Program(
        params=params,
        **graph.io(),
        # what the client encrypts: the input after its client functions (a sum-pool of the
        # input is up to k times the input; bounds[len(pre)], as throughput mode does)
        input_bound=float(bounds[len(pre)]) * options.headroom,
        pre=pre,
        segments=segments,
        steps=[Step(list(fns), segments[k].out_size, segments[k + 1].in_size) for k, fns in enumerate(step_fns)],
        post=post,
        needs_relin_key=needs_relin,
        rotation_steps=rotations,
        meta={"mode": "latency", "strategy": options.strategy or "search", "levels": levels, "cost_source": costs.get("source", "analytic") if isinstance(costs, dict) else "analytic"},
        layers=layers,
        plans=plans,
        lanes=items,
    )


def _in_size(op) -> int:
    return int(np.prod(op.in_shape))


def _out_size(op) -> int:
    return int(np.prod(op.out_shape))


def _segment(ops: list, slots: int, costs: CostTable, strategy: str | None, last: bool = False) -> tuple:
    """``(gather map, steps, output placement, predicted server seconds)`` of one segment:
    every client input layout is priced with the whole segment (the cheapest kernel per layer
    given the placement and whether its other slots are zero), and the cheapest total wins —
    client encryptions included. ``last``: the program's last segment (its results are sent
    rounded)."""
    best = None
    for cand in input_candidates(ops[0], slots, len(ops), costs, strategy):
        steps, total = _lower(ops, cand, slots, costs, strategy, rounded=last)
        total_with_client = total + cand["encrypt_s"]
        if best is None or total_with_client < best[0]:
            best = (total_with_client, cand, steps, total)
    _, cand, (steps, placement), total = best
    return cand["gather"], steps, placement, total


#: Partial layouts of a segment kept after each layer (cheapest first) by :func:`_lower`.
BEAM = 3


def _lower(
    ops: list, cand: dict, slots: int, costs: CostTable, strategy: str | None,
    hoistings: tuple[str, ...] | None = None, out_ct_s: float = 0.0, rounded: bool = False,
):
    """``((steps, output placement), predicted server seconds)`` of a segment on one input layout.

    Each linear layer may leave its output dense or on the segment's aligned grid
    (:func:`~heinfer.compiler.latency.search.output_candidates`); the :data:`BEAM` cheapest
    partial lowerings go on to the next layer, since a cheap output can make the next layer
    dear (a strided layer's grid costs the layers after it more ciphertexts). Kernels are
    priced along the way and only the winner's are built (plaintexts can take gigabytes).
    ``hoistings``: as :func:`~heinfer.compiler.latency.search.price_kernel`'s. ``out_ct_s``:
    seconds per result ciphertext beyond serializing it (the two-party protocol's link and
    re-randomization), so the output placement is chosen with them. ``rounded``: the outputs
    are sent rounded (:func:`~heinfer.compiler.cost.messages_cost`)."""
    level = len(ops)
    # (predicted seconds, steps or kernel choices, placement, clean, ciphertexts)
    states = [(0.0, [], cand["placement"], True, len(cand["gather"]))]
    for i, op in enumerate(ops):
        grown = []
        outs = output_candidates(op, cand.get("fine"), slots) if isinstance(op, Linear) else []  # same for every state
        for total, steps, placement, clean, n_cts in states:
            if isinstance(op, Linear):
                if i == 0 and "step" in cand:
                    step = cand["step"]
                    grown.append((total + step.plan["predicted_s"], [*steps, step], cand["out"], cand["clean"], step.transform.n_out))
                    continue
                for out in outs:
                    ch = price_kernel(op, placement, level, costs, strategy, clean, out, hoistings)
                    grown.append((total + ch.seconds, [*steps, ch], ch.placement, ch.clean, ch.n_out))
            elif isinstance(op, Square):
                t = square_cost(n_cts, level, costs)
                step = LatencyStep("square", level, None, {"layer": op.name, "kind": "square", "cts": n_cts, "predicted_s": t})
                grown.append((total + t, [*steps, step], placement, clean, n_cts))
            else:  # pragma: no cover - split_segments leaves only Linear and Square
                raise CompileError(f"latency mode cannot place {type(op).__name__} {op.name!r} on the server")
        states = sorted(grown, key=lambda s: s[0])[:BEAM]
        level -= 1
    # what the server's timer also covers: parsing the inputs, serializing the results
    final = [(t + messages_cost(len(cand["gather"]), len(ops), n, level, costs, rounded) + n * out_ct_s, steps, p) for t, steps, p, _, n in states]
    total, steps, placement = min(final, key=lambda s: s[0])
    built = [build_kernel(s) if isinstance(s, KernelChoice) else s for s in steps]
    return (built, placement), total

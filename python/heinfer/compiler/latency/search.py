"""The packing search: every legal kernel of a layer, costed, the cheapest kept.

Layer: ``heinfer.compiler`` (pure numpy). Generalizes packing-configurations §IV-C to every
layer of a segment: for a linear layer the candidates are the kernels of
:mod:`heinfer.compiler.latency.kernels` — generalized diagonals and GAZELLE's hybrid — with
every giant-step modulus ``M ∈ {1, 2, 4, …, S}`` (``M = S``: input rotations only, ``M = 1``:
output rotations only, in between: baby-step giant-step), and for the first layer of a
segment the client-side input layouts (dense, or LoLa's expanded convolution representation
with ``t`` taps per ciphertext, whose extra ciphertexts cost client encryptions). Every
candidate's primitive operations are counted exactly (without building its plaintexts) and
priced with the measured :data:`~heinfer.compiler.cost.CostTable`; a layer's output is
dense (conversions such as the hybrid's fold are part of the kernel's price) or on the
segment's aligned grid (:mod:`.grids`, :func:`output_candidates`), and the segment's
lowering keeps the cheapest few (:func:`~heinfer.compiler.latency.compile._lower`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from heinfer.compiler.ir import Linear
from heinfer.compiler.latency import grids, kernels
from heinfer.compiler.cost import CostTable, price
from heinfer.compiler.latency.layout import Placement, dense_input
from heinfer.program.transform import HOISTINGS, OP_KINDS, Transform, single_hoisting, split
from heinfer.errors import CompileError

__all__ = [
    "KernelChoice", "LatencyStep", "STRATEGIES", "build_kernel", "candidate_counts", "choose_kernel", "input_candidates",
    "output_candidates", "price_kernel",
]


@dataclass(eq=False)
class LatencyStep:
    """One lowered server step of a slot-layout segment at input level ``level``: ``op`` is
    ``"transform"`` (``transform`` set) or ``"square"``; ``plan`` records what the search chose
    (kernel, modulus, copies, predicted seconds) for :func:`heinfer.explain`."""

    op: str
    level: int
    transform: Transform | None = None
    plan: dict = field(default_factory=dict)

#: Fixed strategies (one kernel for every layer; the search's baselines).
STRATEGIES = {
    "input_rotations": "generalized diagonals, every rotation on the input (hoisted), M = S",
    "output_rotations": "generalized diagonals, every rotation on the output, M = 1",
    "bsgs": "generalized diagonals, baby-step giant-step with M ≈ √(#diagonals)",
    "hybrid": "GAZELLE's hybrid where it applies, else baby-step giant-step",
}


def _moduli(slots: int) -> list[int]:
    """Giant-step moduli to try: ``1, 2, …, S`` with non-negative baby steps, and the same
    with non-positive ones (:func:`~heinfer.program.transform.split`)."""
    pos = [1 << i for i in range(int(math.log2(slots)) + 1)]
    return pos + [-m for m in pos[1:-1]]


def candidate_counts(
    o: np.ndarray, a: np.ndarray, d: np.ndarray, fold: int, n_out: int, slots: int, modulus: int, replicate: int = 0, n_in: int = 1
) -> dict[str, int]:
    """The operation counts of :meth:`Transform.counts` for the diagonals ``(o, a, d)``
    (unique triples) split with giant-step ``modulus``, with ``fold`` fold steps and
    ``replicate`` replication steps — without building plaintexts."""
    b, g = split(d, modulus, slots)
    grp = o * slots + g
    order = np.lexsort((b, a, grp))
    grp, a, b = grp[order], a[order], b[order]
    c = dict.fromkeys(OP_KINDS, 0)
    uniq, start, count = np.unique(grp, return_index=True, return_counts=True)
    ext_group = np.maximum.reduceat((b != 0).astype(np.int64), start) > 0 if len(grp) else np.zeros(0, bool)
    ext_mask = np.repeat(ext_group, count)
    c["mul_plain_ext"] = int(ext_mask.sum())
    c["mul_plain"] = int((~ext_mask).sum())
    c["mod_down"] = int(ext_group.sum())
    c["dot"] = int((~ext_group).sum())
    c["rotate"] = int(((uniq % slots) != 0).sum())
    outs = len(np.unique(uniq // slots))
    c["add"] = len(uniq) - outs
    ab = np.unique(a[ext_mask] * slots + b[ext_mask])
    aa, bb = ab // slots, ab % slots
    c["rotate_ext"] = int((bb != 0).sum())
    c["decompose"] = len(np.unique(aa[bb != 0]))
    c["times_p"] = len(np.unique(aa[bb == 0]))
    c["fold"] = fold * n_out
    c["replicate"] = replicate * n_in
    return c


#: Largest key range :func:`_keys` marks in a table instead of sorting (``np.unique``).
_TABLE_KEYS = 1 << 27


def _keys(in_ct, in_slot, out_ct, out_slot, slots, n_in):
    """The unique ``(output ct, input ct, diagonal)`` triples of the products, in linear time
    when their range fits a table (a convolution has tens of millions of products)."""
    d = (in_slot - out_slot) % slots
    key = (out_ct * n_in + in_ct) * slots + d
    span = (int(out_ct.max(initial=0)) + 1) * n_in * slots
    if span <= _TABLE_KEYS:
        present = np.zeros(span, bool)
        present[key] = True
        key = np.flatnonzero(present)
    else:
        key = np.unique(key)
    return key // slots // n_in, (key // slots) % n_in, key % slots


def _geometry(op: Linear, inp: Placement, method: str, copies: int = 1, out: Placement | None = None):
    """``(in_ct, in_slot, out_ct, out_slot, n_out_cts, fold steps, replication steps)`` of a
    kernel (the diagonal method to ``out``, default dense), or ``None`` when it does not apply."""
    m = op.matrix
    if method == "diagonal":
        rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
        cols = m.indices.astype(np.int64)
        out = Placement.dense(m.shape[0], inp.slots) if out is None else out
        return inp.ct[cols], inp.slot[cols], out.ct[rows], out.slot[rows], out.n_cts, (), ()
    if out is not None:
        return None  # the hybrid method has its own output placement
    geo = kernels.hybrid_geometry(m, inp, copies)
    if geo is None:
        return None
    rows, in_ct, in_slot, target, _, fold, replicate = geo
    return in_ct, in_slot, np.zeros_like(rows), target, 1, fold, replicate


def _strategy_moduli(strategy: str | None, n_diag: int, slots: int) -> list[int]:
    if strategy is None:
        return _moduli(slots)
    if strategy == "input_rotations":
        return [slots]
    if strategy == "output_rotations":
        return [1]
    return [1 << max(0, round(math.log2(max(math.sqrt(n_diag), 1))))]


@dataclass(eq=False)
class KernelChoice:
    """The search's choice for one layer, priced but not built (its plaintexts can take
    gigabytes): :func:`build_kernel` lowers it. ``placement``/``n_out``: where the output
    lands; ``clean``: whether the output is zero outside it."""

    op: Linear
    inp: Placement
    level: int
    method: str
    modulus: int
    copies: int
    out: Placement | None
    counts: dict
    seconds: float
    placement: Placement
    n_out: int
    clean: bool
    hoisting: str = "double"


def price_kernel(
    op: Linear, inp: Placement, level: int, costs: CostTable, strategy: str | None = None, clean: bool = False,
    out: Placement | None = None, hoistings: tuple[str, ...] | None = None,
) -> KernelChoice:
    """The cheapest kernel for ``op`` on input placement ``inp`` (or the fixed ``strategy``),
    priced without building it. ``clean``: the input is zero outside its placement, so the
    hybrid method may replicate it (LoLa's stacking). ``out``: the output placement to reach
    (an aligned grid, :mod:`.grids`; the diagonal method only), default the dense one or the
    hybrid's. ``hoistings``: the ways the executor may run the baby steps
    (:data:`~heinfer.program.transform.HOISTINGS`); default both for the search and double
    hoisting for a fixed strategy (the papers' baselines)."""
    bias = bool(np.any(op.bias))
    ways = _hoistings(strategy, hoistings)
    best = None
    methods = {None: ["diagonal", "hybrid"], "hybrid": ["hybrid", "diagonal"]}.get(strategy, ["diagonal"])
    for method in methods:
        copies_list = [1]
        if method == "hybrid" and clean and inp.n_cts == 1:  # LoLa's stacked copies, any strategy
            copies_list += [1 << i for i in range(1, int(math.log2(inp.slots)))]
        found = False
        for copies in copies_list:
            geo = _geometry(op, inp, method, copies, out)
            if geo is None:
                continue
            found = True
            ic, isl, oc, osl, n_out, fold, rep = geo
            o, a, d = _keys(ic, isl, oc, osl, inp.slots, inp.n_cts)
            for mod in _strategy_moduli(strategy, len(d), inp.slots):
                c = candidate_counts(o, a, d, len(fold), n_out, inp.slots, mod, len(rep), inp.n_cts)
                for hoisting in ways:
                    counts = c if hoisting == "double" else single_hoisting(c)
                    t = price(counts, level, costs, n_out, bias)
                    if best is None or t < best[0]:
                        best = (t, method, mod, counts, copies, hoisting)
        if strategy == "hybrid" and found:
            break  # hybrid applies: keep it
    if best is None:
        raise CompileError(f"no latency kernel applies to layer {op.name!r}")
    t, method, mod, c, copies, hoisting = best
    rows = op.matrix.shape[0]
    if method == "hybrid":  # output r at slot r of one ciphertext (kernels.hybrid)
        placed = Placement(1, inp.slots, np.zeros(rows, np.int64), np.arange(rows, dtype=np.int64))
    else:
        placed = Placement.dense(rows, inp.slots) if out is None else out
    return KernelChoice(op, inp, level, method, mod, copies, out, c, t, placed, placed.n_cts, method == "diagonal", hoisting)


def _hoistings(strategy: str | None, hoistings: tuple[str, ...] | None) -> tuple[str, ...]:
    """The hoistings :func:`price_kernel` tries (see there)."""
    if hoistings is None:
        return HOISTINGS if strategy is None else ("double",)
    if not hoistings or any(h not in HOISTINGS for h in hoistings):
        raise CompileError(f"hoistings {hoistings!r}: expected a non-empty subset of {HOISTINGS}")
    return tuple(hoistings)


def build_kernel(choice: KernelChoice) -> LatencyStep:
    """The lowered transform of a :func:`price_kernel` choice, with its plan."""
    ch, op = choice, choice.op
    if ch.method == "hybrid":
        trans, placed = kernels.hybrid(op.matrix, op.bias, ch.inp, ch.modulus, ch.copies)
    else:
        trans, placed = kernels.diagonal(op.matrix, op.bias, ch.inp, ch.modulus, ch.out)
    if not grids.same(placed, ch.placement):  # pragma: no cover - the pricing's placement is the kernel's
        raise CompileError(f"layer {op.name!r}: the kernel's output placement is not the one priced")
    trans = replace(trans, hoisting=ch.hoisting)
    output = "dense" if ch.out is None else "aligned"
    plan = _plan(op, ch.method, ch.modulus, ch.counts, ch.seconds, trans, ch.level, copies=ch.copies, output=output, hoisting=ch.hoisting)
    return LatencyStep("transform", ch.level, trans, plan)


def choose_kernel(
    op: Linear, inp: Placement, level: int, costs: CostTable, strategy: str | None = None, clean: bool = False,
    out: Placement | None = None, hoistings: tuple[str, ...] | None = None,
) -> tuple[LatencyStep, Placement, bool]:
    """:func:`price_kernel`, built: ``(step, output placement, whether the output is clean)``."""
    choice = price_kernel(op, inp, level, costs, strategy, clean, out, hoistings)
    return build_kernel(choice), choice.placement, choice.clean


def _plan(op: Linear, method: str, mod: int, counts: dict, t: float, trans, level: int, **extra) -> dict:
    return {
        "layer": op.name, "kind": "linear", "method": method, "giant_modulus": mod, "level": level,
        "shape": [int(v) for v in op.matrix.shape], "in_cts": trans.n_in, "out_cts": trans.n_out,
        "rotations": int(counts["rotate_ext"] + counts["rotate"] + counts["fold"] + counts.get("replicate", 0)),
        "key_switches": int(counts["decompose"] + counts["rotate"] + counts["fold"] + counts.get("replicate", 0)),
        "plaintexts": len(trans.terms), "predicted_s": float(t), **extra,
    }


def input_candidates(
    first, slots: int, level: int, costs: CostTable, strategy: str | None, hoistings: tuple[str, ...] | None = None,
) -> list[dict]:
    """The client's input layouts for a segment starting with ``first``, each a dict with
    ``gather`` (the map the client fills), ``placement`` (of the input), ``encrypt_s`` (the
    client's encryptions) and, for LoLa's expanded representation, ``step``/``out``/``clean``
    (the first layer's kernel, fixed by the layout). The caller prices each with the rest of
    the segment, since a layout that leaves partial sums (not clean) can make the next layer
    dearer. Besides the dense layout, an image input (or several) is offered on its aligned
    grid (:mod:`.grids`); ``fine`` is that grid, which the segment's layers may keep.
    ``hoistings``: as :func:`price_kernel`'s, for the expanded layout's kernel (default double
    hoisting)."""
    ways = ("double",) if hoistings is None else _hoistings(strategy, hoistings)
    matrix = getattr(first, "matrix", None)
    if matrix is not None and matrix.nnz == 0:
        raise CompileError(  # not NotSupportedYetError: mode="auto" then keeps throughput mode
            f"layer {first.name!r} has no non-zero weight (with the two-party protocol: none survives rounding to "
            "its fixed point): its output is its bias alone, a constant layer latency mode does not place yet"
        )
    n = int(np.prod(first.in_shape))
    gather, place = dense_input(n, slots)
    enc = costs.get("encrypt", [0.0] * (level + 1))[level]
    parts = grids.tensor_parts(first.in_shape, getattr(first, "in_parts", ()))
    fine = grids.finest(parts)
    out = [{"gather": gather, "placement": place, "encrypt_s": enc * len(gather), "fine": fine}]
    for grid in grids.candidates(parts, fine, slots):  # every tensor on the finest grid
        g = np.full((grid.n_cts, slots), -1, dtype=np.int64)
        g[grid.ct, grid.slot] = np.arange(n)
        out.append({"gather": g, "placement": grid, "encrypt_s": enc * len(g), "fine": fine})
    if not isinstance(first, Linear) or first.matrix.shape[0] > slots // 2:
        return out  # LoLa's expanded input below: offered to fixed strategies too
    rows = first.matrix.shape[0]
    bias = bool(np.any(first.bias))
    taps = int(np.diff(first.matrix.indptr).max(initial=1))
    t = 1
    while t <= min(slots // rows, taps) or (t == 1):
        for fold in (False, True):
            if fold and t == 1:
                continue
            g, trans, out_e = kernels.expanded(first.matrix, first.bias, slots, slots, t, fold)
            o, a, d = trans.terms[:, 0], trans.terms[:, 2], (trans.terms[:, 1] + trans.terms[:, 3]) % slots
            best = None
            for mod in [1] if fold else _strategy_moduli(strategy, len(d), slots):
                c2 = candidate_counts(o, a, d, len(trans.fold), 1, slots, mod)
                for hoisting in ways:
                    c = c2 if hoisting == "double" else single_hoisting(c2)
                    cost = price(c, level, costs, 1, bias)
                    if best is None or cost < best[0]:
                        best = (cost, mod, c, hoisting)
            cost, mod, c, hoisting = best
            if not fold:
                g, trans, out_e = kernels.expanded(first.matrix, first.bias, slots, mod, t)
            trans = replace(trans, hoisting=hoisting)
            plan = _plan(first, "expanded" + ("+fold" if fold else ""), mod, c, cost, trans, level, taps_per_ct=t, client_cts=len(g), hoisting=hoisting)
            dummy = Placement(len(g), slots, np.zeros(0, np.int64), np.zeros(0, np.int64))
            out.append({
                "gather": g, "placement": dummy, "encrypt_s": enc * len(g), "fine": fine,
                "step": LatencyStep("transform", level, trans, plan), "out": out_e, "clean": not fold,
            })
        t *= 2
    return out


def output_candidates(op: Linear, fine: tuple[int, int] | None, slots: int) -> list[Placement | None]:
    """The output placements the search tries for ``op``: dense (``None``, or the hybrid's),
    and its aligned placements on the segment's grid ``fine`` that differ from it."""
    return [None, *grids.candidates(grids.tensor_parts(op.out_shape, op.out_parts), fine, slots)]

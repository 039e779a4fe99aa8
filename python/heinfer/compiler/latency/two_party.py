"""Compiling a graph for GAZELLE's two-party protocol: fixed point, then latency mode's layouts.

Layer: ``heinfer.compiler`` (pure numpy). Passes:

1. latency mode's front end (:func:`~heinfer.compiler.fuse.fold_linear`, segments, value
   ranges; adjacent linear layers always merged: one BFV transform per step), then :func:`~heinfer.compiler.fixed_point.plan_fixed_point`: every linear layer
   as integers mod ``p`` and the truncation of each circuit step;
2. each quantized layer through latency mode's **packing search** (the same input layouts,
   kernels and transforms as CKKS — integer weights stay integers in the diagonals, which the
   compiler checks), on the BFV ring's ``N/2`` slots of one row;
3. what the parties can do without the server's keys moves out of each transform: the
   replication of its inputs into the client's input layout, its final folds onto the
   shares (:func:`_to_shares`, :mod:`heinfer.program.share_folds`);
4. the circuit steps: ReLU, a clip (ONNX ``Clip``, e.g. ReLU6), or max-pooling fused with
   ReLU, with their windows as indices into the previous layer's outputs; values that live
   across the step (a residual skip) pass through a truncation circuit of their own;
5. the noise budget: a worst-case bound on each layer's BFV error, so the server floods it
   with 40 bits of statistical distance (:func:`flood_bits_for`).

A square activation is a step too: a truncation circuit, then GAZELLE's AHE square protocol
(the client encrypts its share ``a`` and ``a²``; the server adds ``2b·a + b²`` for its share
``b`` — the cross term as the next layer with the diagonals scaled by ``2b``, so no product
adds noise to the input; ``a²`` and ``a`` travel in the two rows of the same ciphertexts, and
one run computes both parts).

Max-pooling windows may overlap and be padded (a padded entry repeats a value of its window;
inputs that read one value share its mask). Client functions before the first layer run on
the client in the clear before it encodes its input. Not supported yet (a clear error names
them): a max-pool without a ReLU before or after it, a square next to another function or
with values passing through its step.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from heinfer.compiler.fixed_point import FixedPointLayer, as_client_square, plan_fixed_point
from heinfer.compiler.fuse import fold_linear, merge_linear
from heinfer.compiler.ir import Graph, Linear, Square
from heinfer.compiler.latency.compile import LatencyOptions, _lower
from heinfer.compiler.latency.search import input_candidates
from heinfer.compiler.pools import pools_to_client
from heinfer.compiler.ranges import calibrated_bounds
from heinfer.compiler.throughput import split_segments
from heinfer.compiler.two_party_cost import analytic_two_party_costs, ciphertext_bytes, result_bytes
from heinfer.errors import CompileError, FloodBudgetError, NotSupportedYetError
from heinfer.program.placement import Placement
from heinfer.program.share_folds import fold_problem, replicated_gather
from heinfer.program.transform import Transform
from heinfer.program.two_party import TwoPartyProgram, TwoPartySegment, TwoPartyStep

__all__ = [
    "DEFAULT_BFV", "MAX_FLOOD_BITS", "STATISTICAL_BITS", "check_flood", "compile_two_party", "fixed_point_front", "flood_bits_for",
    "key_switch_bits", "max_flood_bits", "noise_bits", "two_party_program", "two_party_steps",
]

#: The BFV parameters of the protocol (``heinfer.bfv.PN13_PLAIN20``): N = 8192, three 50-bit
#: primes, one special prime, p = 1,032,193 — the share modulus of the garbled circuits.
DEFAULT_BFV = {"log_n": 13, "log_q": [50, 50, 50], "log_p": [50], "plain_modulus": 1_032_193, "security": 128}
#: Statistical distance of flooding: 2^-40 (GAZELLE's choice).
STATISTICAL_BITS = 40
#: The Gaussian's tail cut: ``6σ`` with ``σ = 3.19`` (``B_e``).
ERROR_BOUND = 6 * 3.19
#: Bound on a fresh secret-key encryption's error: the Gaussian's 6σ tail cut, 19.1 < 2^5.
FRESH_BITS = 5
#: The widest flooding the engine draws (``heinfer.bfv.MAX_FLOOD_BITS``; a test checks they
#: agree): ``U[−2^b, 2^b)`` as a 125-bit high part and a 64-bit low part.
MAX_FLOOD_BITS = 189


def key_switch_bits(bfv: dict) -> int:
    """``⌈log2⌉`` of a bound on one key switch's error per coefficient (a rotation) with the
    parameters ``bfv``: hybrid key switching splits ``Q`` into ``β`` digits of ``α`` primes and
    sums ``β`` products ``[d_j]·e_j`` before dividing by ``P``. The approximate ModUp lifts each
    digit to ``[0, (α+1)·D)`` (``D`` its modulus), so the error is at most
    ``β·(α+1)·N·D·B_e/P + (1 + N)/2`` (ModDown's rounding with a ternary secret). The engine picks
    the largest ``α`` whose digits stay below ``P`` (``D/P ≤ 1``), else one prime per digit:
    ``β·(α+1) ≤ 2L`` and ``D/P ≤ max(1, 2^(b_max − Σ(b_P − 1)))`` for ``L`` primes of at most
    ``b_max`` bits — a bound from the bit sizes alone. At GAZELLE-like sizes (N = 2^13, three
    50-bit primes, one special) 21 bits."""
    n = 1 << int(bfv["log_n"])
    log_q, log_p = [int(b) for b in bfv["log_q"]], [int(b) for b in bfv["log_p"]]
    ratio = max(1.0, 2.0 ** (max(log_q) - sum(b - 1 for b in log_p)))
    return math.ceil(math.log2(2 * len(log_q) * n * ratio * ERROR_BOUND + (1 + n) / 2))


def noise_bits(t: Transform, bfv: dict) -> int:
    """``⌈log2⌉`` of a worst-case bound on the error of one output of transform ``t`` run on
    fresh encryptions under the parameters ``bfv``: replication and rotations add
    key-switching errors (:func:`key_switch_bits`), each product multiplies by at most
    ``N·p/2`` and adds BFV's ``(Q mod p)·k ≤ N·p²/2`` term (which depends on the weights, so it
    is flooded too), giant steps and folds add and double."""
    n, p = 1 << int(bfv["log_n"]), int(bfv["plain_modulus"])
    ks = 2.0 ** key_switch_bits(bfv)
    e = 2.0**FRESH_BITS
    for _ in t.replicate:
        e = 2 * e + ks
    e_baby = e + ks
    per_term = n * (p / 2) * e_baby + n * p * p / 2
    terms = max(1, int(np.bincount(t.terms[:, 0], minlength=t.n_out).max())) if len(t.terms) else 1
    total = terms * per_term + ks
    for _ in t.fold:
        total = 2 * total + ks
    return math.ceil(math.log2(total)) + 1


def flood_bits_for(noise: int, log_n: int, stat_bits: int = STATISTICAL_BITS) -> int:
    """Flooding exponent for an error below ``2^noise`` (see :mod:`heinfer_bfv::flood`)."""
    return noise + stat_bits + log_n


def check_flood(floods: dict[str, int], limit: int) -> None:
    """Raises :class:`~heinfer.errors.FloodBudgetError` when a layer's flooding (``floods``:
    layer name → bits) exceeds ``2^limit``; the error names the widest layer and its bits."""
    if not floods:
        return
    name = max(floods, key=floods.get)
    if floods[name] > limit:
        raise FloodBudgetError(
            f"two-party protocol: layer {name!r} needs 2^{floods[name]} of flooding, more than the BFV "
            f"parameters hold (2^{limit}); choose a larger ciphertext modulus",
            bits=floods[name], limit=limit,
        )


def max_flood_bits(bfv: dict) -> int:
    """The largest flooding exponent the parameters decrypt through, from the primes' sizes
    alone: at most the engine's ``Rerandomizer.max_flood_bits`` (``⌊log2(Q/p)⌋ − 5`` on the
    actual primes, the largest of each size, so ``log2 Q`` is a hair below ``Σ b``), and a
    bit under it for GAZELLE's three primes (``⌊Σ(b − 1) − log2 p⌋ − 3``: 124 bits)."""
    log_p = math.log2(bfv["plain_modulus"])
    lower = int(math.floor(sum(bfv["log_q"]) - len(bfv["log_q"]) - log_p)) - 3  # a b-bit prime is at least 2^(b−1)
    engine = int(math.floor(sum(bfv["log_q"]) - 1e-6 - log_p)) - 5
    return min(lower, engine, MAX_FLOOD_BITS)


def compile_two_party(
    graph: Graph,
    calibration: np.ndarray | None = None,
    input_bound: float | None = None,
    options: LatencyOptions = LatencyOptions(),
    bfv: dict | None = None,
    bandwidth: float = 125e6,
) -> TwoPartyProgram:
    """Compiles ``graph`` (a chain of linear layers, ReLUs and max-pools) for the two-party
    protocol. Raises :class:`NotSupportedYetError` for the shapes listed in the module
    documentation and :class:`CompileError` when a layer does not fit the plaintext modulus
    or :class:`~heinfer.errors.FloodBudgetError` when its flooding does not fit the ciphertext
    modulus (after every layer is planned: the error names the widest). ``bandwidth`` (bytes/s) prices the
    ciphertexts of each candidate layout on the wire: the default is GAZELLE's 1 Gbit/s LAN;
    a slow link favours layouts with fewer ciphertexts over faster compute."""
    if not bandwidth > 0:
        raise CompileError(f"bandwidth must be positive bytes per second, got {bandwidth!r}")
    bfv = dict(bfv or DEFAULT_BFV)
    p, log_n = int(bfv["plain_modulus"]), int(bfv["log_n"])
    input_bound, pre, seg_ops, post, plan = fixed_point_front(graph, calibration, input_bound, options.headroom, p)
    slots = 1 << (log_n - 1)
    # compute priced in real seconds: the layouts trade it against the link's
    costs = analytic_two_party_costs(bfv)
    # the parties replicate and fold on their own (_to_shares): the search prices both at 0,
    # and prices them again where a layout's folds cannot leave the server
    shares = {**costs, "fold_weight": [0.0] * len(bfv["log_q"])}
    segments, layers, plans, floods = [], [], {}, {}
    for k, (ops, fl) in enumerate(zip(seg_ops, plan.layers)):
        lin = ops[0]
        quantized = Linear(lin.name, fl.weights.astype(np.float64), fl.bias.astype(np.float64), lin.in_shape, lin.out_shape)
        squared = k > 0 and [f.kind for f in plan.layers[k - 1].step] == ["square"]
        for table in (shares, costs):
            gather, steps, placement = _segment_two_party(
                quantized, slots, table, options.strategy, ciphertext_bytes(bfv) / bandwidth,
                result_bytes(bfv) / bandwidth, squared
            )
            t = steps[0].transform
            _check_integral(t, lin.name)
            gather, t, fold = _to_shares(t, np.asarray(gather), placement)
            if not t.fold:
                break
        # two inputs per ciphertext, one in each row of the slots (a squared input fills both)
        pairs = not squared and t.n_in >= 2
        # after a square (Enc(a²) in row 0, Enc(a) with the diagonals scaled by 2b in row 1) or
        # with row pairs, one run of the transform computes both rows' parts (each multiplier
        # still a centered lift) and the parties sum the rows on their shares: no more noise
        b = floods[lin.name] = flood_bits_for(noise_bits(t, bfv), log_n)
        layers.append(t)
        plans[str(k)] = {**steps[0].plan, "flood_bits": b, "in_frac": fl.in_frac, "weight_frac": fl.weight_frac}
        segments.append(TwoPartySegment(gather, int(np.prod(lin.in_shape)), int(np.prod(lin.out_shape)), placement, b, fold, pairs))
    check_flood(floods, max_flood_bits(bfv))
    rotations = sorted({s for t in layers for s in t.rotation_steps()})
    return two_party_program(graph, bfv, plan, float(input_bound) * options.headroom, segments, post, layers, plans, rotations, pre=pre)


def fixed_point_front(graph: Graph, calibration: np.ndarray | None, input_bound: float | None, headroom: float, p: int) -> tuple:
    """The passes both modes share: pools after ReLUs to the circuit steps, linear layers folded
    and merged (one per step), squares as steps, calibrated bounds and the fixed-point plan.
    Returns ``(input bound, leading client functions, segment ops, trailing client functions,
    plan)``. Client functions before the first linear layer run on the client in the clear,
    before it encodes its input (as in the CKKS modes): the plan starts at the first layer,
    on the calibration inputs passed through them, and the input bound is the planned bound
    of the first layer's input."""
    g = _merge_all_linear(fold_linear(pools_to_client(graph, after=frozenset({"relu", "clip"}))))
    if p >= 1 << 31 and any(isinstance(op, Square) for op in g.ops):
        raise NotSupportedYetError(
            f"two-party protocol: a square activation with a {p.bit_length()}-bit plaintext modulus (the square "
            "protocol's products are exact below 2^31; use a plaintext modulus of at most 31 bits)"
        )
    g = replace(g, ops=[as_client_square(op) for op in g.ops])  # squares are steps between layers
    calibration, input_bound, bounds = calibrated_bounds(g, calibration, input_bound, headroom)
    pre, seg_ops, _, post = split_segments(g.ops)
    assert all(len(ops) == 1 and isinstance(ops[0], Linear) for ops in seg_ops)  # merged above
    if pre:
        bounds = bounds[len(pre) :]  # the first layer's input onwards
        input_bound = bounds[0]
        if calibration is not None:
            calibration = calibration.reshape(len(calibration), -1)
            for f in pre:
                calibration = f.apply(calibration)
        g = replace(g, ops=g.ops[len(pre) :], input_shape=tuple(pre[-1].out_shape))
    return input_bound, pre, seg_ops, post, plan_fixed_point(g, bounds, p, calibration)


def two_party_program(
    graph: Graph, bfv: dict, plan, input_bound: float, segments: list, post: list, layers: list, plans: dict,
    rotation_steps: list[int], mode: str = "latency", batch_capacity: int = 1, pre: list | None = None,
) -> TwoPartyProgram:
    """The program of either mode: the graph's names and shapes, the plan's fractions, the
    client functions before the first layer (``pre``), the segments with the circuit steps
    between them (:func:`two_party_steps`) and the layers."""
    return TwoPartyProgram(
        bfv=bfv,
        **graph.io(),
        input_frac=plan.input_frac,
        output_frac=plan.layers[-1].out_frac,
        input_bound=input_bound,
        pre=list(pre or []),
        segments=segments,
        steps=two_party_steps(plan, segments),
        post=list(post),
        rotation_steps=rotation_steps,
        layers=layers,
        meta={"mode": mode, "protocol": "two-party", "plans": plans},
        mode=mode,
        batch_capacity=batch_capacity,
    )


def two_party_steps(plan, segments: list[TwoPartySegment]) -> list[TwoPartyStep]:
    """The circuit steps between the segments, checked against their sizes."""
    steps_out = [_step(fl, segments[k].out_size, plan.p) for k, fl in enumerate(plan.layers[:-1])]
    for k, st in enumerate(steps_out):
        if st.out_size != segments[k + 1].in_size:
            raise CompileError(f"two-party protocol: step {k} yields {st.out_size} values, layer {k + 1} takes {segments[k + 1].in_size}")
    return steps_out


#: How BFV runs a transform's baby steps: :class:`~heinfer.runtime.bfv_transform.BfvLayer`
#: brings each hoisted rotation back to ``Q`` before its products (single hoisting), so the
#: search prices that way only, for every strategy.
BFV_HOISTING = ("single",)


def _segment_two_party(op: Linear, slots: int, costs, strategy, ct_seconds: float, result_seconds: float, squared: bool = False) -> tuple:
    """Latency mode's layout choice (:func:`heinfer.compiler.latency.compile._segment`) with the
    ciphertexts priced on the wire too: the client's inputs (``ct_seconds`` per full
    ciphertext; seed-compressed, half of it) and the server's results (``result_seconds``:
    switched down to one prime after flooding and rounded) — both parties wait for them.
    A result also costs its re-randomization (an encryption of zero) and the client's
    decryption; the output placement is chosen with these prices, not after. ``squared``:
    the input is a square, whose two parts travel in the two rows of each ciphertext
    (:meth:`~heinfer.program.two_party.TwoPartyProgram.rows_packed`): one run of the
    transform; the parties add the rows of their shares. Otherwise two or more inputs travel
    two per ciphertext (``row_pairs``): half the uploads and encryptions, summed the same way.
    The compute is priced in real seconds (:func:`~heinfer.compiler.two_party_cost.ntt_seconds`): with the analytic table's
    ranking unit (~25× a real transform) the halved uploads looked cheap enough to choose a
    100-ciphertext input for MiniONN MNIST's second layer, measured 17 % more bytes and
    14–27 % more time than the layout it replaced."""
    best = None
    out_ct_s = result_seconds + costs["encrypt"][0] + costs["decrypt"][0]
    for cand in input_candidates(op, slots, 1, costs, strategy, BFV_HOISTING):
        n_in = len(cand["gather"])
        # both rows in use (a square, or row pairs): the parties sum them on their shares, free
        steps, total = _lower([op], cand, slots, costs, strategy, BFV_HOISTING, out_ct_s)
        wire = n_in if squared or n_in < 2 else -(-n_in // 2)
        score = total + cand["encrypt_s"] * wire / n_in + wire / 2 * ct_seconds
        if best is None or score < best[0]:
            best = (score, cand, steps)
    _, cand, (steps, placement) = best
    return cand["gather"], steps, placement


def _to_shares(t: Transform, gather: np.ndarray, placement: Placement) -> tuple[np.ndarray, Transform, tuple[int, ...]]:
    """``(gather, transform, folds on shares)``: what the parties can do on their own, moved
    out of the server's transform (each was a key switch per step on the server). The
    replication of the clean inputs (LoLa's stacking) becomes the client's input layout (it
    encrypts the copies); the final folds run on both parties' shares
    (:mod:`heinfer.program.share_folds`) when every orbit holds its own output position once
    and no other (and the bias sits at the output positions only), else they stay."""
    if len(t.replicate):
        gather = replicated_gather(gather, tuple(int(r) for r in t.replicate), t.slots)
        t = replace(t, replicate=())
    fold = tuple(int(s) for s in t.fold)
    at_outputs = np.zeros((t.n_out, t.slots), dtype=bool)
    at_outputs[placement.ct, placement.slot] = True
    if not fold or fold_problem(placement, fold) is not None or (t.bias is not None and np.any(np.asarray(t.bias)[~at_outputs])):
        return gather, t, ()
    return gather, replace(t, fold=()), fold


def _merge_all_linear(g: Graph) -> Graph:
    """Adjacent linear layers merged even when the product is denser (a mean-pool before a
    convolution): between two garbled-circuit steps BFV runs one transform, since a second
    one would multiply the noise by another ``N·p/2`` — more than flooding leaves room for."""
    ops: list = []
    for op in g.ops:
        if isinstance(op, Linear) and ops and isinstance(ops[-1], Linear):
            ops[-1] = merge_linear(ops[-1], op, force=True)
        else:
            ops.append(op)
    return replace(g, ops=ops)


def _check_integral(t: Transform, name: str) -> None:
    for what, v in (("weights", t.vectors), ("bias", t.bias)):
        if v is not None and not np.array_equal(v, np.rint(v)):
            raise CompileError(f"two-party protocol: layer {name!r}: the lowered {what} are not integers")  # pragma: no cover


def _fill_padding(groups: np.ndarray, name: str) -> np.ndarray:
    """Max-pooling windows without padding entries: a padded position (``-1``, ``-∞`` in
    ONNX's max-pool) repeats its window's first value, which leaves the window's maximum
    unchanged (``max(a, a, b) = max(a, b)``). Overlapping windows keep their shared entries:
    the server draws one mask per value (``TwoPartyStep.sources``)."""
    pad = groups < 0
    if pad.all(axis=1).any():
        raise CompileError(f"two-party protocol: layer {name!r}: a max-pooling window holds padding only")
    first = groups[np.arange(len(groups)), np.argmax(~pad, axis=1)]
    return np.where(pad, first[:, None], groups)


def _step(fl: FixedPointLayer, n_in: int, p: int) -> TwoPartyStep:
    """Layer ``fl``'s circuit step on its ``n_in`` outputs modulo ``p``; values its functions
    keep (a tensor living across the step) pass through a truncation of their own."""
    pools = [f for f in fl.step if f.kind == "sumpool"]
    kinds = [f.kind for f in fl.step if f.kind != "sumpool"]
    if len(pools) > 1 or (pools and fl.step[-1] is not pools[0]):
        raise NotSupportedYetError(f"two-party protocol: layer {fl.name!r}: a sum-pool must be the step's last function")
    keeps = {f.keep for f in fl.step}
    if len(keeps) > 1:
        raise NotSupportedYetError(f"two-party protocol: layer {fl.name!r}: the step's functions pass different values through")
    keep = keeps.pop() if keeps else (0, 0)
    before, after = keep
    pool = np.asarray(pools[0].groups, dtype=np.int64) if pools else None
    if kinds in (["relu"], ["square"], ["clip"]):
        if pool is not None and kinds == ["square"]:  # pragma: no cover - pools follow ReLUs and clips only
            raise NotSupportedYetError(f"two-party protocol: layer {fl.name!r}: a pool after a square is not supported yet")
        if sum(keep) and kinds == ["square"]:
            raise NotSupportedYetError(f"two-party protocol: layer {fl.name!r}: a square with values passing through is not supported yet")
        lo, hi = fl.clip_bounds(p) if kinds == ["clip"] else (0, 0)
        groups = np.arange(before, n_in - after, dtype=np.int64).reshape(-1, 1)
        return TwoPartyStep(kinds[0], fl.shift, n_in, groups, pool, lo, hi, keep)
    if pool is not None:
        raise NotSupportedYetError(f"two-party protocol: layer {fl.name!r}: a pool after a max-pool is not supported yet")
    if sorted(kinds) == ["maxpool", "relu"]:
        groups = next(f for f in fl.step if f.kind == "maxpool").groups
        groups = _fill_padding(np.asarray(groups, dtype=np.int64), fl.name) + before  # the maxpool indexes its slice
        return TwoPartyStep("maxpool_relu", fl.shift, n_in, groups, keep=keep)
    raise NotSupportedYetError(
        f"two-party protocol: the step after {fl.name!r} ({' → '.join(kinds) or 'none'}) has no garbled circuit yet "
        "(ReLU, a clip such as ReLU6, or max-pooling next to a ReLU)"
    )

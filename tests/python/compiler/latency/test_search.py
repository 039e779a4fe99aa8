"""The packing search (``heinfer.compiler.latency.search``) and the parameter choice.

* Under any cost table (random ones from hypothesis, and extreme ones: rotations, hoisted
  rotations, extended-basis products or encryptions made very expensive), the search's kernel
  costs exactly the minimum of :func:`~heinfer.compiler.cost.transform_cost` over every
  candidate built with the kernels themselves — diagonals and the hybrid at every giant-step
  modulus, stacked copies on clean inputs, LoLa's expanded input with every ``t`` — and its
  predicted time is the cost of the transform it returns.
* Fixed strategies give what they say; the plan dict has every field, consistent with the
  transform, in plain JSON types.
* :func:`~heinfer.compiler.latency.compile.choose_parameters` fits the HomomorphicEncryption.org
  bound (:func:`heinfer.compiler.plan.max_log_qp`), takes the smallest ring and then the
  largest scale, and refuses depths no secure ring holds with :class:`CompileError`.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler.cost import KINDS, analytic_costs, transform_cost
from heinfer.compiler.ir import Graph, Linear
from heinfer.compiler.latency import grids, kernels
from heinfer.compiler.latency.compile import LatencyOptions, choose_parameters, compile_latency
from heinfer.compiler.latency.layout import Placement, dense_input
from heinfer.compiler.latency.search import STRATEGIES, choose_kernel, input_candidates
from heinfer.compiler.onnx_import import load_onnx
from heinfer.compiler.plan import max_log_qp
from heinfer.errors import CompileError
from heinfer.program.transform import HOISTINGS, Transform
from hypothesis import given, settings
from hypothesis import strategies as st

from .. import onnx_models as om

S = 64
LEVEL = 1


# ---------------------------------------------------------------------------------- layers
def _conv(side: int, k: int, stride: int, channels: int, pad: int = 0, seed: int = 0) -> Linear:
    """A ``k×k`` convolution of a ``1×side×side`` image as a :class:`Linear`."""
    out = (side + 2 * pad - k) // stride + 1
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(channels, k, k))
    rows, cols, vals = [], [], []
    for c in range(channels):
        for i in range(out):
            for j in range(out):
                for di in range(k):
                    for dj in range(k):
                        y, x = i * stride + di - pad, j * stride + dj - pad
                        if 0 <= y < side and 0 <= x < side:
                            rows.append((c * out + i) * out + j)
                            cols.append(y * side + x)
                            vals.append(w[c, di, dj])
    m = sp.csr_matrix((vals, (rows, cols)), shape=(channels * out * out, side * side))
    return Linear(
        f"conv{side}k{k}s{stride}",
        m,
        rng.normal(size=m.shape[0]),
        (1, side, side),
        (channels, out, out),
    )


def _dense(rows: int, cols: int, seed: int = 0, bias: bool = True) -> Linear:
    rng = np.random.default_rng(seed)
    b = rng.normal(size=rows) if bias else np.zeros(rows)
    return Linear(
        f"dense{rows}x{cols}", sp.csr_matrix(rng.normal(size=(rows, cols))), b, (cols,), (rows,)
    )


OPS = {
    "conv-8x8-k3": _conv(8, 3, 1, 1),  # 36 × 64, 9 taps a row: too many rows to expand
    "conv-6x6-k3-c2": _conv(6, 3, 1, 2),  # 32 × 36: expands with up to 2 taps a ciphertext
    "conv-8x8-k3-s2-p1": _conv(8, 3, 2, 2, pad=1),  # 32 × 64, strided and padded
    "dense-10x40": _dense(10, 40),  # squat: hybrid applies
    "dense-40x40-no-bias": _dense(40, 40, seed=1, bias=False),
    "dense-70x150": _dense(70, 150, seed=2),  # several ciphertexts in and out
}


def _table(base: float = 1e-9, levels: int = 3, **kinds: float) -> dict:
    """A cost table: every primitive ``base`` seconds at every level, except ``kinds``."""
    return {k: [kinds.get(k, base)] * levels for k in KINDS}


def _moduli(slots: int) -> list[int]:
    """Every giant-step modulus the search tries: ``1, 2, …, S`` and ``−2, …, −S/2`` (baby
    steps below zero)."""
    pos = [1 << i for i in range(int(math.log2(slots)) + 1)]
    return pos + [-m for m in pos[1:-1]]


def _kernel_candidates(
    op: Linear, inp: Placement, clean: bool
) -> list[tuple[str, int, int, object]]:
    """Every kernel the search may choose for ``op`` on ``inp``, built with the kernels:
    ``(method, giant modulus, copies, transform)``."""
    out = []
    copies = [1] + (
        [1 << i for i in range(1, int(math.log2(inp.slots)))] if clean and inp.n_cts == 1 else []
    )
    for m in _moduli(inp.slots):
        out += [("diagonal", m, 1, t) for t in _hoistings(kernels.diagonal(op.matrix, op.bias, inp, m)[0])]
        for c in copies:
            res = kernels.hybrid(op.matrix, op.bias, inp, m, c)
            if res is not None:
                out += [("hybrid", m, c, t) for t in _hoistings(res[0])]
    return out


def _hoistings(t: Transform) -> list[Transform]:
    """``t`` run with double hoisting and with single hoisting."""
    return [replace(t, hoisting=h) for h in HOISTINGS]


def _expanded_candidates(op: Linear, slots: int) -> list[tuple[np.ndarray, object]]:
    """LoLa's expanded first layer with ``t = 1, 2, 4, …`` taps per ciphertext, rotated onto
    the output at every giant-step modulus or folded in place: ``(gather, transform)``."""
    rows = op.matrix.shape[0]
    if rows > slots // 2:
        return []
    taps = int(np.diff(op.matrix.indptr).max())
    out, t = [], 1
    while t <= min(slots // rows, taps) or t == 1:
        for m in _moduli(slots):
            g, trans, _ = kernels.expanded(op.matrix, op.bias, slots, m, t)
            out.append((g, trans))
        if t > 1:
            g, trans, _ = kernels.expanded(op.matrix, op.bias, slots, 1, t, fold=True)
            out.append((g, trans))
        t *= 2
    return out


def _compile_one(op: Linear, costs: dict, strategy: str | None = None):
    """``op`` alone as a graph, compiled with the cost table ``costs`` (every level alike):
    ``(program, the table at the program's levels)``."""
    g = Graph("x", op.in_shape, "y", op.out_shape, [op])
    used = {}

    def cost_fn(params: dict) -> dict:
        used.update({k: [v[0]] * len(params["log_q"]) for k, v in costs.items()})
        return used

    prog = compile_latency(
        g, input_bound=1.0, options=LatencyOptions(strategy=strategy), cost_fn=cost_fn
    )
    return prog, used


def _first_step(prog) -> SimpleNamespace:
    """The first layer of the first segment: its transform (the server's weights) and the
    search's plan for it."""
    op = prog.segments[0].ops[0]
    return SimpleNamespace(transform=prog.layers[op.layer], plan=prog.plans["0.0"])


def _client_and_server_s(prog, costs: dict) -> float:
    """The first segment's predicted server seconds plus the client's encryptions."""
    seg = prog.segments[0]
    return seg.predicted_s + costs["encrypt"][seg.input_level] * seg.n_input_cts


def _cheapest_one_layer_segment(op: Linear, costs: dict, slots: int) -> float:
    """Brute force: every input layout with every kernel of the first layer; per input
    ciphertext the client's encryption and the server's parsing, per output the server's
    serialization, rounded (the program's results are), and one message each way."""
    level = 1
    per_in = costs["encrypt"][level] + costs["ct_in"][level]

    def server(t) -> float:
        per_out = costs["ct_out"][level - 1] + costs["ct_round"][level - 1]
        return transform_cost(t, level, costs) + per_out * t.n_out + costs["message"][level - 1]

    gather, place = dense_input(op.matrix.shape[1], slots)
    dense = min(server(t) for *_, t in _kernel_candidates(op, place, True))
    expanded = [server(t) + per_in * len(g) for g, t in _expanded_candidates(op, slots)]
    # the aligned grid (input, output or both) with the diagonal method at every modulus
    grid_in, grid_out = _aligned(op, slots)
    grid = [
        min(server(t) for t in _hoistings(kernels.diagonal(op.matrix, op.bias, inp, m, out)[0])) + per_in * inp.n_cts
        for inp in [place, *grid_in]
        for out in [None, *grid_out]
        if inp is not place or out is not None
        for m in _moduli(slots)
    ]
    return min([dense + per_in * len(gather), *expanded, *grid])


def _aligned(op: Linear, slots: int) -> tuple[list[Placement], list[Placement]]:
    """The aligned input and output placements of a one-layer segment, where they differ
    from the dense ones (built with :mod:`~heinfer.compiler.latency.grids`)."""
    fine = grids.finest(grids.tensor_parts(op.in_shape))
    found = []
    for shape in (op.in_shape, op.out_shape):
        ps = [grids.aligned(grids.tensor_parts(shape), fine, slots, pow2) for pow2 in (True, False)]
        ps = [p for p in ps if p is not None and not grids.same(p, Placement.dense(p.size, slots))]
        found.append([p for i, p in enumerate(ps) if not any(grids.same(p, q) for q in ps[:i])])
    return found[0], found[1]


# ---------------------------------------------------------------------------------- the cheapest
_COSTS = st.fixed_dictionaries({k: st.floats(-9, -3).map(lambda e: [10.0**e] * 3) for k in KINDS})


@pytest.mark.parametrize("way", HOISTINGS)
@settings(max_examples=6, deadline=None)
@given(costs=_COSTS)
def test_a_single_hoisting_is_the_cheapest_candidate_run_that_way(way: str, costs: dict) -> None:
    """``hoistings=(way,)`` (BFV runs single-hoisted only): the choice runs ``way`` and is
    the cheapest candidate run ``way``, whatever the other way would cost."""
    for name, op in OPS.items():
        inp = Placement.dense(op.matrix.shape[1], S)
        step, _, _ = choose_kernel(op, inp, LEVEL, costs, None, True, hoistings=(way,))
        prices = [transform_cost(t, LEVEL, costs) for *_, t in _kernel_candidates(op, inp, True) if t.hoisting == way]
        assert step.transform.hoisting == way and step.plan["hoisting"] == way, name
        assert step.plan["predicted_s"] == pytest.approx(min(prices), rel=1e-12), name


@pytest.mark.parametrize("bad", [(), ("triple",), ("single", "none")])
def test_unknown_hoistings_are_refused(bad: tuple) -> None:
    op = OPS["dense-10x40"]
    with pytest.raises(CompileError, match="hoistings"):
        choose_kernel(op, Placement.dense(op.matrix.shape[1], S), LEVEL, _table(), hoistings=bad)


@pytest.mark.parametrize("name", list(OPS))
@settings(max_examples=12, deadline=None)
@given(costs=_COSTS, clean=st.booleans())
def test_choose_kernel_is_the_cheapest_candidate(name: str, costs: dict, clean: bool) -> None:
    op = OPS[name]
    inp = Placement.dense(op.matrix.shape[1], S)
    step, _, out_clean = choose_kernel(op, inp, LEVEL, costs, None, clean)
    prices = [transform_cost(t, LEVEL, costs) for *_, t in _kernel_candidates(op, inp, clean)]
    assert step.plan["predicted_s"] == pytest.approx(min(prices), rel=1e-12)
    assert transform_cost(step.transform, LEVEL, costs) == pytest.approx(
        step.plan["predicted_s"], rel=1e-12
    )
    assert out_clean == (step.plan["method"] == "diagonal")
    if step.plan.get("copies", 1) > 1:
        assert clean, "stacked copies need a clean input"


@pytest.mark.parametrize(
    "name", ["conv-8x8-k3", "conv-6x6-k3-c2", "conv-8x8-k3-s2-p1", "dense-10x40"]
)
@settings(max_examples=6, deadline=None)
@given(costs=_COSTS)
def test_the_input_layout_is_the_cheapest(name: str, costs: dict) -> None:
    """A one-layer segment: the dense input with the best kernel, or the expanded input with
    every ``t`` and modulus (rotated or folded) — client encryptions included."""
    op = OPS[name]
    prog, used = _compile_one(op, costs)
    got = _client_and_server_s(prog, used)
    assert got == pytest.approx(_cheapest_one_layer_segment(op, used, prog.slots), rel=1e-12)
    step = _first_step(prog)
    assert transform_cost(step.transform, 1, used) == pytest.approx(
        step.plan["predicted_s"], rel=1e-12
    )
    if step.plan["method"].startswith("expanded"):
        assert step.plan["client_cts"] == prog.segments[0].n_input_cts == step.transform.n_in
    else:
        layouts = [dense_input(op.matrix.shape[1], prog.slots)[0]]
        for p in _aligned(op, prog.slots)[0]:
            g = np.full((p.n_cts, prog.slots), -1, dtype=np.int64)
            g[p.ct, p.slot] = np.arange(p.size)
            layouts.append(g)
        gather = prog.segments[0].layout.gather
        assert any(g.shape == gather.shape and np.array_equal(g, gather) for g in layouts)


@pytest.mark.parametrize("name", ["conv-6x6-k3-c2", "conv-8x8-k3-s2-p1", "dense-10x40"])
def test_input_candidates_compute_the_first_layer(name: str) -> None:
    """Every input layout the search prices, with its fixed first kernel, gives ``A x + b``."""
    op = OPS[name]
    cands = input_candidates(op, S, LEVEL, analytic_costs(12, 3, 1), None)
    gather, _ = dense_input(op.matrix.shape[1], S)
    np.testing.assert_array_equal(cands[0]["gather"], gather)
    assert "step" not in cands[0]
    methods = set()
    x = np.random.default_rng(0).normal(size=op.matrix.shape[1])
    for cand in cands:
        g = cand["gather"]
        assert (
            g.dtype == np.int64
            and g.shape[1] == S
            and g.min() >= -1
            and g.max() < op.matrix.shape[1]
        )
        assert cand["encrypt_s"] == pytest.approx(
            analytic_costs(12, 3, 1)["encrypt"][LEVEL] * len(g)
        )
        if "step" not in cand:
            continue
        step, out = cand["step"], cand["out"]
        methods.add(step.plan["method"])
        assert cand["clean"] == (step.plan["method"] == "expanded")
        assert step.transform.n_in == len(g) == step.plan["client_cts"]
        slots = np.where(g >= 0, x[np.maximum(g, 0)], 0.0)
        np.testing.assert_allclose(
            out.gather(step.transform.simulate(slots)), op.matrix @ x + op.bias, atol=1e-9
        )
    assert methods == {"expanded", "expanded+fold"}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_fixed_strategies_get_every_input_layout_under_their_kernel_rule(strategy: str) -> None:
    """A fixed strategy is a baseline of the search: it may use LoLa's expanded input too (the
    search is credited only with what it picks), with the strategy's giant-step rule."""
    rule = {"input_rotations": S, "output_rotations": 1}
    for op in OPS.values():
        search = input_candidates(op, S, LEVEL, analytic_costs(12, 3, 1), None)
        fixed = input_candidates(op, S, LEVEL, analytic_costs(12, 3, 1), strategy)
        assert len(fixed) == len(search) and "step" not in fixed[0]
        for cand in fixed[1:]:
            plan = cand["step"].plan
            if plan["method"] == "expanded" and strategy in rule:
                assert plan["giant_modulus"] == rule[strategy]


def test_expensive_hoisted_rotations_give_output_rotations() -> None:
    """Baby steps (decomposition + hoisted rotations) very expensive: no baby step, ``M = 1``."""
    costs = _table(rotate_ext=1.0, decompose=1.0)
    for name, op in OPS.items():
        step, _, _ = choose_kernel(op, Placement.dense(op.matrix.shape[1], S), LEVEL, costs)
        c = step.transform.counts()
        assert c["rotate_ext"] == c["decompose"] == 0, name
        assert step.transform.babies() == {}, name
        assert step.plan["giant_modulus"] == 1, name


def test_expensive_rotations_give_input_rotations() -> None:
    """Full rotations (giant steps, folds, replication) very expensive: only hoisted baby
    steps remain — generalized diagonals with ``M ≥`` every diagonal (GAZELLE's input
    rotations)."""
    costs = _table(rotate=1.0, rotate_many=1.0)
    for name, op in OPS.items():
        step, _, _ = choose_kernel(op, Placement.dense(op.matrix.shape[1], S), LEVEL, costs)
        c = step.transform.counts()
        assert c["rotate"] == c["fold"] == c["replicate"] == 0, name
        assert step.plan["method"] == "diagonal", name
        assert (step.transform.terms[:, 1] == 0).all(), name


def test_every_rotation_expensive_gives_the_expanded_input() -> None:
    """With every kind of rotation very expensive and encryptions cheap, LoLa's expanded input
    with one tap per ciphertext needs no rotation at all."""
    costs = _table(rotate=1.0, rotate_many=1.0, rotate_ext=1.0, decompose=1.0)
    for name in ("conv-6x6-k3-c2", "conv-8x8-k3-s2-p1", "dense-10x40"):
        op = OPS[name]
        prog, _ = _compile_one(op, costs)
        step = _first_step(prog)
        assert step.plan["method"] == "expanded" and step.plan["taps_per_ct"] == 1, name
        assert step.plan["rotations"] == step.plan["key_switches"] == 0, name
        assert step.transform.rotation_steps() == set() and prog.rotation_steps == [], name
        assert prog.segments[0].n_input_cts == int(np.diff(op.matrix.indptr).max())


def test_expensive_encryptions_keep_the_dense_input() -> None:
    costs = _table(encrypt=1.0)
    op = OPS["conv-8x8-k3"]  # 36 rows, 9 taps: expanded needs 9 ciphertexts at 64 slots, 1 at 2048
    prog, _ = _compile_one(op, costs)
    assert prog.segments[0].n_input_cts == 1
    np.testing.assert_array_equal(prog.segments[0].layout.gather, dense_input(64, prog.slots)[0])
    assert not _first_step(prog).plan["method"].startswith("expanded")


def test_expensive_extended_products_avoid_the_extended_basis() -> None:
    costs = _table(mul_plain_ext=1.0)
    for name, op in OPS.items():
        step, _, _ = choose_kernel(op, Placement.dense(op.matrix.shape[1], S), LEVEL, costs)
        assert step.transform.counts()["mul_plain_ext"] == 0, name


@pytest.mark.parametrize("name", list(OPS))
def test_expensive_plaintext_products_give_the_fewest_plaintexts(name: str) -> None:
    costs = _table(mul_plain=1.0, mul_plain_ext=1.0)
    op = OPS[name]
    inp = Placement.dense(op.matrix.shape[1], S)
    step, _, _ = choose_kernel(op, inp, LEVEL, costs, None, clean=True)
    fewest = min(len(t.terms) for *_, t in _kernel_candidates(op, inp, True))
    assert step.plan["plaintexts"] == len(step.transform.terms) == fewest


# ---------------------------------------------------------------------------------- strategies
def _n_diagonals(op: Linear, inp: Placement, method: str) -> int:
    if method == "diagonal":
        t = kernels.diagonal(op.matrix, op.bias, inp, S)[0]
    else:
        t = kernels.hybrid(op.matrix, op.bias, inp, S)[0]
    return len(np.unique(t.terms[:, [0, 2, 3]], axis=0))  # with M = S, (o, a, b = d)


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_fixed_strategies_give_what_they_say(name: str, strategy: str) -> None:
    op = OPS[name]
    inp = Placement.dense(op.matrix.shape[1], S)
    costs = analytic_costs(12, 3, 1)
    step, _, _ = choose_kernel(op, inp, LEVEL, costs, strategy, clean=True)
    plan = step.plan
    hybrid_applies = kernels.hybrid(op.matrix, op.bias, inp, 1) is not None
    method = "hybrid" if strategy == "hybrid" and hybrid_applies else "diagonal"
    assert plan["method"] == method
    assert plan.get("copies", 1) == 1  # stacking is the search's, not a baseline's
    if strategy == "input_rotations":
        assert plan["giant_modulus"] == S and step.transform.counts()["rotate"] == 0
    elif strategy == "output_rotations":
        assert plan["giant_modulus"] == 1 and step.transform.babies() == {}
    else:  # bsgs, and hybrid: M ≈ √(#diagonals)
        n = _n_diagonals(op, inp, method)
        assert plan["giant_modulus"] == 1 << max(0, round(math.log2(max(math.sqrt(n), 1))))


def _with_client(prog) -> float:
    """What the search minimizes: the server's predicted seconds and the client's encryption
    of every input ciphertext (a layout with fewer client ciphertexts may cost the server more)."""
    p = prog.params
    costs = analytic_costs(p["log_n"], len(p["log_q"]), len(p["log_p"]))
    return prog.predicted_s + sum(seg.n_input_cts * costs["encrypt"][seg.input_level] for seg in prog.segments)


def test_the_search_is_never_slower_than_a_fixed_strategy() -> None:
    """Per layer the search's candidates include every fixed strategy's kernel, so its plan is
    predicted at most as slow as each of them applied to every layer, client encryptions
    included."""
    for model, shape in [
        (om.cryptonets((1, 12, 12)), (1, 12, 12)),
        (om.mlp((16, 12, 8, 4), act="square"), (16,)),
    ]:
        g = load_onnx(model)
        cal = om.random_input(shape, 16, seed=2)
        search = _with_client(compile_latency(g, cal))
        for strategy in STRATEGIES:
            fixed = _with_client(compile_latency(g, cal, options=LatencyOptions(strategy=strategy)))
            assert search <= fixed * (1 + 1e-12), strategy


@pytest.mark.parametrize("strategy", ["fastest", "", "BSGS"])
def test_unknown_strategy_is_refused(strategy: str) -> None:
    g = load_onnx(om.mlp((8, 4), act=None))
    with pytest.raises(CompileError, match="strategy"):
        compile_latency(g, om.random_input((8,), 4), options=LatencyOptions(strategy=strategy))


# ---------------------------------------------------------------------------------- the plan
PLAN_FIELDS = {
    "layer",
    "kind",
    "method",
    "giant_modulus",
    "level",
    "shape",
    "in_cts",
    "out_cts",
    "rotations",
    "key_switches",
    "plaintexts",
    "predicted_s",
}


def _check_plan(step, op: Linear, level: int) -> None:
    plan, t = step.plan, step.transform
    assert PLAN_FIELDS <= set(plan)
    assert json.loads(json.dumps(plan)) == plan  # plain JSON types (the program manifest)
    c = t.counts()
    assert (
        plan["layer"] == op.name
        and plan["kind"] == "linear"
        and plan["level"] == level == step.level
    )
    assert plan["shape"] == list(op.matrix.shape)
    assert (plan["in_cts"], plan["out_cts"]) == (t.n_in, t.n_out)
    assert plan["rotations"] == c["rotate_ext"] + c["rotate"] + c["fold"] + c["replicate"]
    assert plan["key_switches"] == c["decompose"] + c["rotate"] + c["fold"] + c["replicate"]
    assert plan["plaintexts"] == len(t.terms)
    assert plan["predicted_s"] > 0 and isinstance(plan["predicted_s"], float)
    assert step.op == "transform"


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("strategy", [None, *sorted(STRATEGIES)])
def test_plan_fields(name: str, strategy: str | None) -> None:
    op = OPS[name]
    costs = analytic_costs(12, 3, 1)
    step, _, _ = choose_kernel(
        op, Placement.dense(op.matrix.shape[1], S), LEVEL, costs, strategy, True
    )
    _check_plan(step, op, LEVEL)
    assert step.plan["method"] in ("diagonal", "hybrid")


def test_plan_fields_of_the_expanded_input() -> None:
    op = OPS["conv-6x6-k3-c2"]
    for cand in input_candidates(op, S, LEVEL, analytic_costs(12, 3, 1), None)[1:]:
        _check_plan(cand["step"], op, LEVEL)
        assert cand["step"].plan["method"] in ("expanded", "expanded+fold")
        assert {"taps_per_ct", "client_cts"} <= set(cand["step"].plan)


# ---------------------------------------------------------------------------------- parameters
def _fits(p: dict, security: int) -> bool:
    limit = max_log_qp(p["log_n"], security)
    return limit is not None and sum(p["log_q"]) + sum(p["log_p"]) <= limit


@settings(max_examples=150, deadline=None)
@given(
    depth=st.integers(0, 14),
    log_bound=st.floats(-10, 12),
    security=st.sampled_from([128, 192, 256]),
    min_slots=st.sampled_from([1, 100, 2048, 4096, 5000]),
)
def test_choose_parameters_fits_the_security_bound(depth, log_bound, security, min_slots) -> None:
    options = LatencyOptions(security=security)
    bound = 2.0**log_bound
    try:
        p = choose_parameters(depth, bound, options, min_slots=min_slots)
    except CompileError:
        # then not even the smallest scale fits the largest ring of the table
        floor = max(12, math.ceil(math.log2(2 * min_slots)))
        for log_n in range(floor, 17):
            for s in options.scale_bits:
                q0 = min(s + max(1, math.ceil(log_bound)) + 2, 60)
                limit = max_log_qp(log_n, security)
                assert not (limit and q0 + s * depth + max(q0, s) <= limit and q0 > s)
        return
    assert set(p) == {"log_n", "log_q", "log_p", "log_scale", "security"}
    assert p["security"] == security and _fits(p, security)
    s = p["log_scale"]
    assert s in options.scale_bits
    assert len(p["log_q"]) == depth + 1 and p["log_q"][1:] == [s] * depth
    assert p["log_p"] == [max(p["log_q"])]
    assert s < p["log_q"][0] <= 60
    assert p["log_q"][0] >= s + max(0, math.ceil(log_bound)) + 1, "the base prime holds the output"
    assert 1 << (p["log_n"] - 1) >= min(min_slots, 1 << 15)
    assert p["log_n"] >= 12
    # the smallest ring: the one below (if allowed) holds no scale
    if p["log_n"] > max(12, math.ceil(math.log2(2 * min_slots))):
        with pytest.raises(CompileError):
            choose_parameters(depth, bound, LatencyOptions(security=security, log_n=p["log_n"] - 1))
    # the largest scale in that ring
    for bigger in [b for b in options.scale_bits if b > s]:
        with pytest.raises(CompileError):
            choose_parameters(
                depth,
                bound,
                LatencyOptions(security=security, log_n=p["log_n"], scale_bits=(bigger,)),
            )


@pytest.mark.parametrize("log_bound", [20, 30])
def test_choose_parameters_base_prime_holds_large_outputs(log_bound: int) -> None:
    p = choose_parameters(1, 2.0**log_bound, LatencyOptions())
    assert p["log_q"][0] >= p["log_scale"] + log_bound + 1


@pytest.mark.parametrize(
    ("depth", "options"),
    [
        (70, LatencyOptions()),  # 70 · 28 bits > 1772
        (40, LatencyOptions(security=256)),
        (3, LatencyOptions(log_n=12)),  # 3 levels do not fit 109 bits
        (0, LatencyOptions(log_n=11)),  # not even the base and special primes
        (1, LatencyOptions(security=192, log_n=16)),  # no table entry: never "secure"
        (2, LatencyOptions(scale_bits=(60,))),  # the base prime must exceed the scale
    ],
)
def test_choose_parameters_refuses_impossible_depths(depth: int, options: LatencyOptions) -> None:
    with pytest.raises(CompileError, match="levels"):
        choose_parameters(depth, 1.0, options)


def test_choose_parameters_known_answers() -> None:
    assert choose_parameters(1, 1.0, LatencyOptions()) == {
        "log_n": 12,
        "log_q": [36, 33],
        "log_p": [36],
        "log_scale": 33,
        "security": 128,
    }
    p = choose_parameters(5, 1.0, LatencyOptions())
    assert p["log_n"] == 13 and _fits(p, 128)
    assert choose_parameters(1, 1.0, LatencyOptions(), min_slots=5000)["log_n"] == 14


@pytest.mark.parametrize("security", [100, 0, 512])
def test_compile_refuses_unknown_security_levels(security: int) -> None:
    g = load_onnx(om.mlp((8, 4), act=None))
    with pytest.raises(CompileError, match="security"):
        compile_latency(g, om.random_input((8,), 4), options=LatencyOptions(security=security))

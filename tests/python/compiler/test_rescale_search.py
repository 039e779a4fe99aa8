"""The rescale search (``heinfer.compiler.rescale_search``) against the exhaustive oracle.

The planner used to try every subset of the cut points of a segment. That search lives on
here only as the oracle: on random small segments (random op sequences, widths, weights,
bounds, input scales and prime sizes) the dynamic program must return the same cost and, up
to ties, the same schedule. The generic search is also checked on random abstract cost models
(costs that have nothing to do with CKKS), so the recurrence is tested beyond the planner's
own cost model.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import scipy.sparse as sp
from heinfer.compiler import Linear, Square
from heinfer.compiler.plan import _open_tail, _simulate, layer_plan, plan_segment
from heinfer.compiler.rescale_search import search_cuts
from heinfer.errors import CompileError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _exhaustive(ops, bounds, s_in, b, weight_bits):
    """The old planner: every subset of the cut points, first strictly cheapest kept; then,
    when the last square may stay open (``_open_tail``), the cheapest schedule without a cut
    from that square on, kept if cheaper on no more limbs."""
    layers = tuple(
        layer_plan(op, b, weight_bits, 1.0) if isinstance(op, Linear) else None for op in ops
    )
    tail = _open_tail(ops)
    best = best_open = None
    for mask in itertools.product((0, 1), repeat=len(ops) - 1):
        chosen = frozenset(t for t, bit in enumerate(mask) if bit)
        plan = _simulate(ops, bounds, s_in, float(b), layers, chosen, True)
        if plan is not None and (best is None or plan.cost < best.cost):
            best = plan
        if tail is not None and not any(mask[tail:]):
            plan = _simulate(ops, bounds, s_in, float(b), layers, chosen, True, tail)
            if plan is not None and (best_open is None or plan.cost < best_open.cost):
                best_open = plan
    if best is not None and best_open is not None and best_open.cost < best.cost and best_open.top_limbs <= best.top_limbs:
        return best_open
    return best


@st.composite
def _segments(draw):
    n = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    ops = []
    for i in range(n):
        width = draw(st.integers(1, 6))
        if draw(st.booleans()):
            ops.append(Square(f"s{i}", (width,)))
            continue
        n_in = int(np.prod(ops[-1].out_shape)) if ops else draw(st.integers(1, 6))
        dense = rng.normal(0, draw(st.floats(0.01, 4.0)), (width, n_in))
        dense[rng.random(dense.shape) < 0.3] = 0.0
        ops.append(Linear(f"l{i}", sp.csr_matrix(dense), np.zeros(width), (n_in,), (width,)))
    for i in range(1, n):  # squares keep the width of what comes before
        if isinstance(ops[i], Square):
            ops[i] = Square(ops[i].name, ops[i - 1].out_shape)
    bounds = [draw(st.floats(0.01, 1e4)) for _ in range(n)]
    s_in = draw(st.sampled_from([10.0, 17.0, 20.0, 24.5, 30.0, 40.0]))
    b = draw(st.integers(20, 60))
    return ops, bounds, s_in, b


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_segments())
def test_dynamic_program_equals_exhaustive_search(segment) -> None:
    ops, bounds, s_in, b = segment
    try:
        oracle = _exhaustive(ops, bounds, s_in, b, 16)
    except CompileError:  # a layer too wide for exact products: the planner refuses it too
        oracle = "refused"
    if oracle == "refused" or oracle is None:
        try:
            plan_segment(ops, bounds, s_in, b, 16, [1.0] * len(ops))
        except CompileError:
            return
        raise AssertionError("the planner found a plan the oracle did not")
    plan = plan_segment(ops, bounds, s_in, b, 16, [1.0] * len(ops))
    assert math.isclose(plan.cost, oracle.cost, rel_tol=1e-12)
    if plan.rescales != oracle.rescales:  # only a tie may pick another schedule
        assert math.isclose(plan.cost, oracle.cost, rel_tol=1e-12, abs_tol=0.0)
    else:
        assert plan.limbs == oracle.limbs and plan.cost == oracle.cost


@st.composite
def _abstract_models(draw):
    """Random cost models: integer scale steps, random needs, random positive costs."""
    n = draw(st.integers(1, 10))
    b = draw(st.integers(2, 9))
    gains = [draw(st.integers(0, 12)) for _ in range(n)]
    doubles = [draw(st.booleans()) for _ in range(n)]
    unit = [draw(st.floats(0.1, 10.0)) for _ in range(n)]
    quad = [draw(st.floats(0.0, 2.0)) for _ in range(n)]
    cut = [draw(st.floats(0.0, 5.0)) for _ in range(n)]
    enc, dec = draw(st.floats(0.0, 5.0)), draw(st.floats(0.0, 5.0))
    s_in = float(draw(st.integers(1, 8)))

    def advance(t, s):
        s = 2 * s if doubles[t] else s + gains[t]
        return s, math.ceil((s + 1) / b)

    def primes(s):
        return math.floor((s - s_in + 1.0) / b)

    def op_cost(t, limbs, k):
        return unit[t] * limbs + quad[t] * limbs * limbs + (cut[t] * (limbs + k) if k else 0.0)

    return n, s_in, b, advance, primes, op_cost, (lambda L: enc * L), (lambda L: dec * L)


def _abstract_exhaustive(n, s_in, b, advance, primes, op_cost, in_cost, out_cost):
    best = None
    for mask in itertools.product((0, 1), repeat=n - 1):
        s, needs, ks, ok = s_in, [], [], True
        for t in range(n):
            s, need = advance(t, s)
            k = primes(s) if t < n - 1 and mask[t] else 0
            if t < n - 1 and mask[t] and k < 1:
                ok = False
                break
            s -= k * b
            needs.append(need)
            ks.append(k)
        if not ok:
            continue
        limbs = [0] * n
        limbs[-1] = max(needs[-1], 1)
        for t in range(n - 2, -1, -1):
            limbs[t] = max(needs[t], limbs[t + 1] + ks[t])
        cost = sum(op_cost(t, limbs[t], ks[t]) for t in range(n))
        cost += in_cost(limbs[0]) + out_cost(limbs[-1])
        if best is None or cost < best[0] * (1 - 1e-12):
            best = (cost, tuple(ks))
    return best


@settings(max_examples=300, deadline=None)
@given(_abstract_models())
def test_search_equals_exhaustive_on_abstract_cost_models(model) -> None:
    oracle = _abstract_exhaustive(*model)
    found = search_cuts(*model[:3], *model[3:])
    assert found is not None and oracle is not None
    assert math.isclose(found.cost, oracle[0], rel_tol=1e-9)


def test_search_of_an_empty_segment_is_none() -> None:
    assert search_cuts(0, 20.0, 30, None, None, None, None, None) is None


def test_search_of_240_ops_stays_polynomial() -> None:
    """Four times the 60-op segment; the exhaustive search would try 2^239 schedules."""
    rng = np.random.default_rng(3)
    ops: list = []
    for i in range(120):
        ops += [
            Linear(f"l{i}", sp.csr_matrix(rng.normal(0, 0.25, (8, 8))), np.zeros(8), (8,), (8,))
        ]
        ops += [Square(f"s{i}", (8,))]
    start = time.perf_counter()
    plan = plan_segment(ops, [4.0] * 240, 20, 50, 16, [1.0] * 240)
    assert time.perf_counter() - start < 20.0
    assert all(limbs >= 1 for limbs in plan.limbs)

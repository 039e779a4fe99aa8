"""Where to rescale in a segment: dynamic programming over the cut points (compiler layer).

The planner (:mod:`heinfer.compiler.plan`) may rescale after any op of a segment but the last.
A schedule is a vector :math:`c \\in \\{0,1\\}^{n-1}`; the old planner tried all
:math:`2^{n-1}` of them. This module finds the same optimum in polynomial time.

**The model.** Op :math:`t` takes the scale :math:`s_t` (``log2``) of its input to
:math:`s'_t = \\mathrm{advance}_t(s_t)` and needs :math:`\\nu_t` limbs for its output. A cut
after op :math:`t` divides by :math:`k_t = \\mathrm{primes}_t(s'_t) \\ge 1` primes, so
:math:`s_{t+1} = s'_t - k_t b`, or :math:`s_{t+1} = s'_t` without a cut. The limbs an op runs
on are fixed from the end:

.. math::

    L_{n-1} = \\max(\\nu_{n-1}, 1), \\qquad L_t = \\max(\\nu_t, L_{t+1} + k_t),

and the cost is :math:`\\sum_t \\mathrm{op}_t(L_t, k_t) + \\mathrm{in}(L_0) + \\mathrm{out}(L_{n-1})`.

**The recurrence.** The cost of ops :math:`t..n-1` depends only on the scale :math:`s_t`
entering op :math:`t`; what the ops before :math:`t` need from that suffix is only
:math:`L_t`. So the value of a state :math:`(t, s_t)` is a *front*: for every achievable
:math:`L_t`, the cheapest suffix. Every cost is non-decreasing in the limbs it runs on, and
:math:`L_{t-1}` is non-decreasing in :math:`L_t`, so an entry with more limbs and no lower
cost than another is dominated and dropped (exactly: it cannot be part of a better plan).

**Size.** Exponents, ``b`` and the ``+1`` of the prime count are integers, so at position
:math:`t` every scale is :math:`2^{m_t} s_0` plus an integer (:math:`m_t` squares so far),
and a scale just after a cut lies in :math:`[s_0 - 1, s_0 - 1 + b)`: at most :math:`b + 1`
values. Scales without a cut since position :math:`j` are images of those, so a position holds
at most :math:`1 + t(b + 1)` states, and a front at most :math:`n - t` entries (each
:math:`L_t` is some :math:`\\nu_u` plus the primes cut between :math:`t` and :math:`u`). The
search is :math:`O(n^3 b)` in the worst case, and far below it on real segments.

Ties (equal cost within ``1e-12`` relative) go to the schedule that is smaller
lexicographically with "no cut" first — the schedule the exhaustive search returned first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Cuts", "search_cuts"]

_REL_TIE = 1e-12


@dataclass(frozen=True)
class Cuts:
    """The best schedule: primes divided after each op (0: no cut) and its cost."""

    primes: tuple[int, ...]
    cost: float


@dataclass(frozen=True)
class _Entry:
    limbs: int
    cost: float
    primes: tuple[int, ...]


def _better(a: _Entry, b: _Entry) -> bool:
    """``a`` costs less than ``b``, or as much with the lexicographically smaller schedule."""
    tol = _REL_TIE * max(abs(a.cost), abs(b.cost))
    if abs(a.cost - b.cost) > tol:
        return a.cost < b.cost
    return a.primes < b.primes


def _front(entries: list[_Entry]) -> list[_Entry]:
    """Best entry per limb count, without those beaten by one on fewer limbs."""
    best: dict[int, _Entry] = {}
    for e in entries:
        if e.limbs not in best or _better(e, best[e.limbs]):
            best[e.limbs] = e
    kept: list[_Entry] = []
    leader: _Entry | None = None  # the best entry on fewer limbs
    for limbs in sorted(best):
        e = best[limbs]
        if leader is None or _better(e, leader):
            kept.append(e)
            leader = e
    return kept


def search_cuts(
    n_ops: int,
    s_in: float,
    prime_bits: float,
    advance: Callable[[int, float], tuple[float, int]],
    primes: Callable[[float], int],
    op_cost: Callable[[int, int, int], float],
    in_cost: Callable[[int], float],
    out_cost: Callable[[int], float],
) -> Cuts | None:
    """The cheapest rescale schedule of ``n_ops`` ops, or ``None`` if there is none.

    ``advance(t, s)``: the scale after op ``t`` (before any cut) from the scale ``s`` entering
    it, and the limbs its output needs. ``primes(s)``: how many primes a cut at scale ``s``
    divides by (below 1: no cut is possible there). ``op_cost(t, limbs, k)``: op ``t`` on
    ``limbs`` limbs followed by a cut of ``k`` primes (0: none). ``in_cost(limbs)``:
    encrypting the input at ``limbs`` limbs; ``out_cost(limbs)``: decrypting the output.
    The last op is never followed by a cut.
    """
    if n_ops < 1:
        return None
    # forward: the scales that can enter each op, and each one's successors
    states: list[set[float]] = [{s_in}]
    moves: list[dict[float, list[tuple[float, int, int]]]] = []
    for t in range(n_ops):
        step: dict[float, list[tuple[float, int, int]]] = {}
        for s in states[t]:
            s_out, need = advance(t, s)
            options = [(s_out, need, 0)]
            k = primes(s_out) if t < n_ops - 1 else 0
            if k >= 1:
                options.append((s_out - k * prime_bits, need, k))
            step[s] = options
        moves.append(step)
        states.append({nxt for opts in step.values() for nxt, _, _ in opts})
    # backward: the front of every state
    fronts: dict[float, list[_Entry]] = {}
    for s, ((_, need, _),) in ((s, m[:1]) for s, m in moves[-1].items()):
        limbs = max(need, 1)
        fronts[s] = [_Entry(limbs, op_cost(n_ops - 1, limbs, 0) + out_cost(limbs), (0,))]
    for t in range(n_ops - 2, -1, -1):
        nxt_fronts, fronts = fronts, {}
        for s, options in moves[t].items():
            entries = []
            for s_next, need, k in options:
                for e in nxt_fronts[s_next]:
                    limbs = max(need, e.limbs + k)
                    cost = e.cost + op_cost(t, limbs, k)
                    entries.append(_Entry(limbs, cost, (k, *e.primes)))
            fronts[s] = _front(entries)
    done = [_Entry(e.limbs, e.cost + in_cost(e.limbs), e.primes) for e in fronts[s_in]]
    if not done:
        return None
    best = done[0]
    for e in done[1:]:
        if _better(e, best):
            best = e
    return Cuts(best.primes, best.cost)

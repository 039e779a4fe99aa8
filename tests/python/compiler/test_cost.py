"""The cost model's pricing of rotations the executor runs together (``rotate_many``)."""

from __future__ import annotations

import pytest
from heinfer.compiler.cost import KINDS, price, together
from heinfer.program.transform import EXTRA_KINDS, OP_KINDS


def _table(rotate: float = 1.0, many: float | None = 0.5) -> dict:
    """Every kind free at two levels except the plain rotations (``many`` None: an older
    table without ``rotate_many``)."""
    t = {k: [0.0, 0.0] for k in KINDS}
    t["rotate"] = [rotate, rotate]
    if many is None:
        del t["rotate_many"]
    else:
        t["rotate_many"] = [many, many]
    return t


def _counts(rotate: int = 0, fold: int = 0) -> dict:
    c = {k: 0 for k in OP_KINDS + EXTRA_KINDS}
    c["rotate"], c["fold"] = rotate, fold
    return c


def test_giant_steps_together_cost_rotate_many() -> None:
    costs = _table()
    assert price(_counts(rotate=1), 1, costs, 1, False) == pytest.approx(1.0)  # one alone
    assert price(_counts(rotate=6), 1, costs, 1, False) == pytest.approx(3.0)  # six together


def test_folds_run_together_over_several_outputs_only() -> None:
    costs = _table()
    assert price(_counts(fold=3), 1, costs, 1, False) == pytest.approx(3.0)  # one output: in turn
    assert price(_counts(fold=6), 1, costs, 2, False) == pytest.approx(3.0)  # two outputs: together


@pytest.mark.parametrize(("many", "factor"), [(None, 1.0), (0.5, 0.5), (2.0, 1.0)])
def test_together_is_at_most_one(many: float | None, factor: float) -> None:
    """An older table prices rotations alone; a table where running together measured slower
    (a one-core machine, noise) never makes them dearer than alone."""
    assert together(_table(many=many), 0) == factor
    assert price(_counts(rotate=4), 1, _table(many=many), 1, False) == pytest.approx(4.0 * factor)

"""The slot-layout executor (``heinfer.runtime.slots``): where a transform's folds run.

A fold is a rotate-and-add; its key switch adds the same noise whatever the ciphertext's
scale. Run before the rescale (at scale ``Δ·q_ℓ``), that noise is ``q_ℓ`` times smaller in
the result than after it (at ``Δ``), where the folds of a wide dense layer dominated its error
(LoLa's CIFAR network: 1.8e-3 relative logit error, 1.6e-4 with the folds first)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402

#: One dense layer of 1,024 inputs: its taps are summed by rotate-and-add folds.
MODEL = om.mlp((1024, 4), act=None, seed=3)


@pytest.fixture(scope="module")
def program():
    # 30 bits of release precision, so that the rounding of the result hides nothing
    return heinfer.compile(
        MODEL, mode="latency", calibration=om.random_input((1024,), 16, seed=2), measure_costs=False, precision_bits=30
    )


def test_a_wide_dense_layer_folds(program) -> None:
    (t,) = program.layers
    assert len(t.fold) >= 6


def test_folds_add_no_visible_noise(program) -> None:
    """Eight items, largest error over largest output: about 1e-6 with the folds before the
    rescale; 1e-5 to 6e-5 after it (measured when the executor folded after the rescale)."""
    x = om.random_input((1024,), 8, seed=5)
    want = om.run_onnxruntime(MODEL, x)
    got = heinfer.infer(program, x).outputs
    rel = np.abs(got - want).max(1) / np.abs(want).max(1)
    assert rel.max() <= 5e-6, rel


def test_groups_are_summed_in_batches_of_one_kind() -> None:
    """The executor's grouped sums: runs of one kind (extended or not), at most DOT_BATCH
    groups, and — plaintexts encoded per query — at most ``max_terms`` terms, one group at
    least; every group once, in order."""
    from heinfer.runtime.slots import DOT_BATCH, _batches

    def grp(i: int, terms: int, ext: bool) -> tuple:
        return (i, 0, list(range(terms)), list(range(terms)), ext)

    groups = [grp(i, 3, i >= 40) for i in range(45)] + [grp(45, 50, True), grp(46, 1, True)]
    runs = list(_batches(groups))
    assert [g for _, run in runs for g in run] == groups
    assert all(len(run) <= DOT_BATCH and all(g[4] == kind for g in run) for kind, run in runs)
    assert [len(run) for _, run in runs] == [32, 8, 7]
    bounded = list(_batches(groups, max_terms=10))
    assert [g for _, run in bounded for g in run] == groups
    assert all(len(run) == 1 or sum(len(g[2]) for g in run) <= 10 for _, run in bounded)
    assert [g[0] for g in bounded[-2][1]] == [45]  # a group larger than the bound goes alone

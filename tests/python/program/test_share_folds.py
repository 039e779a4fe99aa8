"""Folds on additive shares (``heinfer.program.share_folds``): the same sums as the server's
rotate-and-add folds, masks whose folds are the protocol's values, and the orbit conditions
that make the masks sound."""

from __future__ import annotations

import numpy as np
import pytest

from heinfer.program.placement import Placement
from heinfer.program.share_folds import fold_at, fold_offsets, fold_problem, fold_slots, masks_for_folds, replicated_gather, row_sum
from heinfer.program.transform import Transform

P = 1_032_193
S = 64


def _hybrid_outputs(rows: int, n_cts: int = 1) -> Placement:
    """``rows`` outputs at slots ``0..rows-1`` of each of ``n_cts`` ciphertexts."""
    e = np.arange(rows * n_cts)
    return Placement(n_cts, S, e // rows, e % rows)


def test_folding_shares_sums_what_the_server_fold_sums() -> None:
    """Each party folding its share gives shares of the server's fold: ``F(a) + F(b) = F(a + b)``
    mod p, and ``F`` is the transform's own fold (``rot(v, s)[i] = v[i + s]``)."""
    rng = np.random.default_rng(0)
    steps = (8, 16, 32)
    z = rng.integers(0, P, (2, S))
    a = rng.integers(0, P, (2, S))
    b = (z - a) % P
    t = Transform(1, 2, S, np.zeros((0, 4), np.int64), np.zeros((0, S)), None, steps, ())
    np.testing.assert_array_equal((fold_slots(a, steps, P) + fold_slots(b, steps, P)) % P, t.finish(z, P))
    # an output at slot j sums the slots j + every subset sum of the steps
    offs = fold_offsets(steps, S)
    assert sorted(offs.tolist()) == list(range(0, S, 8))
    np.testing.assert_array_equal(fold_slots(z, steps, P)[:, 3], z[:, (3 + offs) % S].sum(axis=1) % P)


def test_masks_fold_to_the_wanted_values_and_stay_uniform_elsewhere() -> None:
    rng = np.random.default_rng(1)
    out = _hybrid_outputs(8, n_cts=2)
    steps = (8, 16, 32)
    masks = rng.integers(0, P, (2, 2 * S))  # N = 2S slots: row 1 is never folded
    want = rng.integers(0, P, out.size)
    masks[out.ct, out.slot] = want
    m = masks_for_folds(masks, out, steps, P)
    np.testing.assert_array_equal(fold_slots(m[:, :S], steps, P)[out.ct, out.slot], want)
    changed = m != masks
    assert not changed[:, S:].any() and set(zip(*np.nonzero(changed))) <= set(zip(out.ct.tolist(), out.slot.tolist()))
    # the network's output (wanted 0): the masks of each orbit sum to 0, each alone uniform
    zero = masks.copy()
    zero[out.ct, out.slot] = 0
    m0 = masks_for_folds(zero, out, steps, P)
    assert not fold_slots(m0[:, :S], steps, P)[out.ct, out.slot].any()
    assert np.count_nonzero(m0[out.ct, out.slot]) == out.size  # not zeros: each is minus its orbit's others


def test_masks_for_results_in_two_rows_sum_over_both_rows() -> None:
    """A result in two parts, one per row of the slots: with ``rows=2`` the masks of each
    output's orbit over both rows sum to the wanted value, after :func:`row_sum` and the folds
    (none, or some), and only the output positions change."""
    rng = np.random.default_rng(2)
    out = _hybrid_outputs(8, n_cts=2)
    for steps in ((), (8, 16, 32)):
        masks = rng.integers(0, P, (2, 2 * S))
        want = rng.integers(0, P, out.size)
        masks[out.ct, out.slot] = want
        m = masks_for_folds(masks, out, steps, P, rows=2)
        summed = row_sum(m, S, P)
        np.testing.assert_array_equal(fold_slots(summed[:, :S], steps, P)[out.ct, out.slot], want)
        np.testing.assert_array_equal(summed[:, S:], m[:, S:] % P)  # row 1 is left as it was
        changed = m != masks
        assert set(zip(*np.nonzero(changed))) <= set(zip(out.ct.tolist(), out.slot.tolist()))


def test_orbits_that_meet_another_output_or_their_own_twice_are_refused() -> None:
    assert fold_problem(_hybrid_outputs(8), (8, 16, 32)) is None
    # output 0's orbit {0, 4} holds output 4's position: one mask would serve two sums
    assert "another output" in fold_problem(_hybrid_outputs(8), (4,))
    # steps s and S − s: offsets 0, s, S − s and S ≡ 0 — the output's own slot twice
    assert "more than once" in fold_problem(Placement(1, S, np.array([0]), np.array([0])), (16, S - 16))
    assert "not all in" in fold_problem(_hybrid_outputs(8), (0,))
    assert "overlap" in fold_problem(_hybrid_outputs(40), (8, 16))  # 40 orbits of 4 in 64 slots


def test_replicated_gather_is_the_layout_the_server_replication_makes() -> None:
    g = np.full((1, 16), -1)
    g[0, :5] = np.arange(5)
    r = replicated_gather(g, (S - 16, S - 32), S)  # copies at 16, 32 and 48, as rot(x, −16)…
    assert r.shape == (1, S)
    for base in (0, 16, 32, 48):
        np.testing.assert_array_equal(r[0, base : base + 5], np.arange(5))
    assert (r >= 0).sum() == 20
    with pytest.raises(ValueError, match="overlaps"):
        replicated_gather(g, (2,), S)


def test_folding_at_the_outputs_reads_what_folding_the_rows_gives() -> None:
    rng = np.random.default_rng(4)
    out = _hybrid_outputs(8, n_cts=2)
    steps = (8, 16, 32)
    v = rng.integers(0, P, (2, S))
    np.testing.assert_array_equal(fold_at(v, out.ct, out.slot, steps, P), fold_slots(v, steps, P)[out.ct, out.slot])

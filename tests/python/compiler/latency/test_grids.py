"""Aligned grid placements (``heinfer.compiler.latency.grids``) and the search's use of them."""

from __future__ import annotations

import numpy as np
import pytest

from heinfer.compiler.cost import analytic_costs
from heinfer.compiler.latency import grids, kernels
from heinfer.compiler.latency.compile import LatencyOptions, compile_latency
from heinfer.compiler.latency.conv_layouts import conv_matrix
from heinfer.compiler.onnx_import import load_onnx
from heinfer.program.placement import Placement

from .. import dag_models as dm

S = 256


def _n_diagonals(t) -> int:
    return len({(int(o), int(a), int(g + b) % t.slots) for o, g, a, b in t.terms})


def test_an_image_on_its_own_grid_is_the_dense_placement() -> None:
    p = grids.aligned(((4, 8, 8),), (8, 8), S)
    assert grids.same(p, Placement.dense(256, S))


def test_parts_share_the_finest_grid_at_their_stride() -> None:
    p = grids.aligned(((2, 8, 8), (3, 4, 4)), (8, 8), S)
    assert p.size == 2 * 64 + 3 * 16 and p.n_cts == 2  # 5 blocks of 64, 4 per ciphertext
    # part 2, channel c = block 2 + c; element (y, x) at (2y)·8 + 2x of its block
    c, y, x = np.indices((3, 4, 4)).reshape(3, -1)
    k = 2 + c
    np.testing.assert_array_equal(p.ct[128:], k // 4)
    np.testing.assert_array_equal(p.slot[128:], (k % 4) * 64 + 2 * y * 8 + 2 * x)


@pytest.mark.parametrize(
    "parts, fine, slots",
    [
        (((10,),), (8, 8), S),  # a flat vector has no grid
        (((2, 8, 8), (6,)), (8, 8), S),
        (((1, 9, 9),), (8, 8), S),  # larger than the grid
    ],
)
def test_no_grid_where_there_is_none(parts, fine, slots) -> None:
    assert grids.aligned(parts, fine, slots) is None
    assert grids.finest(((10,),)) is None


def test_a_grid_larger_than_a_ciphertext_spans_several() -> None:
    # 2 channels of 24×24 on 256 slots: blocks of 1,024 (4 ciphertexts each) or of 576
    p = grids.aligned(((2, 12, 12),), (24, 24), S)
    assert p.n_cts == 8 and int(p.ct[144:].min()) == 4
    q = grids.aligned(((2, 12, 12),), (24, 24), S, pow2=False)
    g = q.ct * S + q.slot
    assert q.n_cts == 5 and int(g[144]) == 576
    assert len(grids.candidates(((2, 12, 12),), (24, 24), S)) == 2


def test_a_strided_convolution_across_ciphertexts_stays_a_translation() -> None:
    """A 3×3 stride-2 convolution of 3×24×24 (each channel 2.25 ciphertexts of 256 slots):
    on the aligned grid every output ciphertext reads at most two input ciphertexts per tap."""
    w = np.random.default_rng(3).normal(size=(4, 3, 3, 3))
    m = conv_matrix(w, 24, 24, stride=2, pad=1)
    inp = Placement.dense(3 * 576, S)
    for pow2 in (True, False):
        grid = grids.aligned(((4, 12, 12),), (24, 24), S, pow2)
        t, out = kernels.diagonal(m, None, inp, S, grid)
        assert _n_diagonals(t) <= grid.n_cts * 3 * 9 * 2 * (1 if pow2 else 2)
        x = np.random.default_rng(4).normal(size=m.shape[1])
        slots = np.zeros((inp.n_cts, S))
        slots[inp.ct, inp.slot] = x
        np.testing.assert_allclose(out.gather(t.simulate(slots)), m @ x, atol=1e-9)
    compact, _ = kernels.diagonal(m, None, inp, S)
    assert _n_diagonals(compact) > 4 * _n_diagonals(t)


def test_odd_sizes_keep_their_last_position_on_the_grid() -> None:
    # 7 → 4 positions (stride 2 with padding): 0, 2, 4, 6 on a line of 7
    p = grids.aligned(((1, 4, 4),), (7, 7), 64)
    assert int(p.slot.max()) == 6 * 7 + 6


def test_a_strided_convolution_to_its_grid_is_a_translation_per_channel_pair() -> None:
    """Dense → dense compacts: a diagonal per output position; dense → aligned grid: the
    filter's taps, as many as a stride-1 convolution has — and the same values."""
    w = np.random.default_rng(0).normal(size=(2, 2, 3, 3))
    m = conv_matrix(w, 16, 16, stride=2, pad=1)  # (2, 16, 16) → (2, 8, 8)
    inp = Placement.dense(2 * 256, 1024)
    grid = grids.aligned(((2, 8, 8),), (16, 16), 1024)
    compact, _ = kernels.diagonal(m, None, inp, 1024)
    aligned, out = kernels.diagonal(m, None, inp, 1024, grid)
    assert _n_diagonals(aligned) <= 2 * 9 * 2 < _n_diagonals(compact)
    x = np.random.default_rng(1).normal(size=m.shape[1])
    slots = np.zeros((inp.n_cts, 1024))
    slots[inp.ct, inp.slot] = x
    np.testing.assert_allclose(out.gather(aligned.simulate(slots)), m @ x, atol=1e-9)


def test_the_search_keeps_a_downsampling_block_on_the_grid() -> None:
    """ResNet's downsampling block: the strided convolution and the shortcut's projection
    leave their outputs aligned (the dense outputs would be dearer under any sane table)."""
    g = load_onnx(dm.downsampling_block())
    cal = np.random.default_rng(2).normal(size=(16, *g.input_shape))
    prog = compile_latency(g, calibration=cal, cost_fn=lambda p: analytic_costs(p["log_n"], len(p["log_q"]), len(p["log_p"])))
    outputs = [p.get("output") for p in prog.plans.values() if p.get("kind") == "linear"]
    assert "aligned" in outputs

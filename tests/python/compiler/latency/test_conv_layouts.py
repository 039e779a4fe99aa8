"""Convolution layouts (``heinfer.compiler.latency.conv_layouts``): placements, the convolution
matrix, and convolution kernels lowered between placements, checked in numpy.

* ``conv_matrix`` against a direct convolution (loops over output positions);
* every placement is injective and puts the elements where its documentation says (golden
  positions, including packing-configurations' 1-D toy example);
* for every pair of placements and several giant-step moduli, ``Transform.simulate`` read at
  the output placement equals the dense convolution — with junk in every slot the input
  placement does not use — both for :func:`kernels.diagonal` (dense output) and for
  :func:`to_placement` (any output placement), which equals ``build_transform`` exactly;
* golden operation counts: GAZELLE's Table 4 input and output rotations, and the number of
  diagonals of a strided convolution in the polyphase, strided and split layouts.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler.latency import conv_layouts as cl
from heinfer.compiler.latency import kernels
from heinfer.compiler.latency.layout import Placement
from heinfer.program.transform import build_transform
from heinfer.errors import CompileError
from hypothesis import given, settings
from hypothesis import strategies as st

FAMILIES = ("channel_blocked", "interleaved", "strided", "split", "polyphase", "unbatched")


def direct_conv(
    x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pads: tuple[int, int, int, int]
) -> np.ndarray:
    """Cross-correlation of ``x (Ci, H, W)`` with ``w (Co, Ci, kh, kw)``, loops over outputs."""
    co, _, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right)))
    ho = (xp.shape[1] - kh) // stride[0] + 1
    wo = (xp.shape[2] - kw) // stride[1] + 1
    y = np.zeros((co, ho, wo))
    for i in range(ho):
        for j in range(wo):
            win = xp[:, i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw]
            y[:, i, j] = np.einsum("oikl,ikl->o", w, win)
    return y


def place(x: np.ndarray, p: Placement, rng: np.random.Generator) -> np.ndarray:
    """Slot values with ``x`` at its placement and junk everywhere else."""
    slots = rng.uniform(-50, 50, (p.n_cts, p.slots))
    slots[p.ct, p.slot] = x.ravel()
    return slots


def make(family: str, shape: tuple[int, int, int], slots: int, draw) -> Placement:
    C, H, W = shape
    pow2 = draw(st.booleans())
    if family == "channel_blocked":
        return cl.channel_blocked(C, H, W, slots, pow2=pow2)
    if family == "interleaved":
        return cl.interleaved(C, H, W, slots, channels=draw(st.sampled_from([C, 4])))
    if family == "strided":
        return cl.strided(C, H, W, slots, draw(st.integers(1, 2)), pow2=pow2)
    if family == "split":
        return cl.split(C, H, W, slots, draw(st.integers(1, 3)), pow2=pow2)
    if family == "polyphase":
        return cl.polyphase(
            C, H, W, slots, draw(st.integers(1, 2)), per_ct=1 if draw(st.booleans()) else None
        )
    return cl.unbatched(C, H, W, slots)


@st.composite
def conv_cases(draw):
    ci, co = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    H, W = draw(st.integers(kh, 6)), draw(st.integers(kw, 6))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw))
    seed = draw(st.integers(0, 2**32 - 1))
    return ci, co, (kh, kw), (H, W), stride, pads, seed


def _case(ci, co, kernel, hw, stride, pads, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((co, ci, *kernel))
    w[rng.random(w.shape) < 0.1] = 0.0  # a few zero taps: left out of the matrix
    x = rng.standard_normal((ci, *hw))
    b = rng.standard_normal(co)
    return rng, w, x, b


# ------------------------------------------------------------------------------ conv matrix
@settings(max_examples=80, deadline=None)
@given(conv_cases())
def test_conv_matrix_is_the_direct_convolution(case):
    _, _, kernel, (H, W), stride, pads, _ = case
    _, w, x, _ = _case(*case)
    # ONNX's pad order (top, left, bottom, right) is (begin_h, begin_w, end_h, end_w)
    m = cl.conv_matrix(w, H, W, stride, (pads[0], pads[1], pads[2], pads[3]))
    y = direct_conv(x, w, stride, (pads[0], pads[1], pads[2], pads[3]))
    assert m.shape == (y.size, x.size)
    assert m.has_canonical_format
    assert (m.data != 0).all()
    np.testing.assert_allclose(m @ x.ravel(), y.ravel(), atol=1e-12)
    assert cl.conv_output_shape(H, W, kernel, stride, pads) == y.shape[1:]


def test_conv_matrix_pads_and_strides_accept_ints_and_pairs():
    w = np.arange(2 * 1 * 3 * 3, dtype=float).reshape(2, 1, 3, 3) - 8
    x = np.arange(25, dtype=float).reshape(1, 5, 5)
    for stride, pad, pads4 in ((2, 1, (1, 1, 1, 1)), ((1, 2), (0, 1), (0, 1, 0, 1))):
        s2 = stride if isinstance(stride, tuple) else (stride, stride)
        np.testing.assert_allclose(
            cl.conv_matrix(w, 5, 5, stride, pad) @ x.ravel(), direct_conv(x, w, s2, pads4).ravel()
        )


def test_conv_matrix_refuses_bad_shapes():
    with pytest.raises(CompileError, match="weight"):
        cl.conv_matrix(np.ones((2, 3, 3)), 4, 4)
    with pytest.raises(CompileError, match="does not fit"):
        cl.conv_matrix(np.ones((1, 1, 5, 5)), 3, 3)
    with pytest.raises(CompileError, match="stride"):
        cl.conv_matrix(np.ones((1, 1, 1, 1)), 3, 3, stride=0)
    with pytest.raises(CompileError, match="pad"):
        cl.conv_matrix(np.ones((1, 1, 1, 1)), 3, 3, pad=(1, 2, 3))


# ------------------------------------------------------------------------------- placements
def test_channel_blocked_positions():
    p = cl.channel_blocked(3, 2, 3, 16)  # blocks of 6, two per ciphertext
    assert (p.n_cts, p.size) == (2, 18)
    assert p.ct.tolist() == [0] * 12 + [1] * 6
    assert p.slot.tolist() == list(range(12)) + list(range(6))
    q = cl.channel_blocked(3, 2, 3, 16, pow2=True)  # blocks of 8
    assert q.slot[6:12].tolist() == list(range(8, 14))
    r = cl.channel_blocked(2, 2, 2, 16, per_ct=1, row=3)  # one channel per ciphertext, rows 3 apart
    assert r.ct.tolist() == [0] * 4 + [1] * 4
    assert r.slot[:4].tolist() == [0, 1, 3, 4]


def test_interleaved_positions():
    p = cl.interleaved(3, 2, 2, 8)  # pixel groups of 3, two per ciphertext
    c, y, x = np.indices((3, 2, 2)).reshape(3, -1)
    pix = y * 2 + x
    assert p.ct.tolist() == (pix // 2).tolist()
    assert p.slot.tolist() == ((pix % 2) * 3 + c).tolist()
    q = cl.interleaved(3, 2, 2, 16, channels=4)
    assert q.slot.tolist() == (pix * 4 + c).tolist()


def test_strided_positions():
    p = cl.strided(2, 2, 3, 64, 2)  # grid 4×6 per channel, block 24
    c, y, x = np.indices((2, 2, 3)).reshape(3, -1)
    assert p.slot.tolist() == (c * 24 + y * 2 * 6 + x * 2).tolist()
    # the 1-D toy of packing-configurations §IV-A1: the direct convolution leaves r1, r2 at 0, 2
    assert cl.strided(1, 1, 2, 8, 2).slot.tolist() == [0, 2]


def test_split_positions_match_the_papers_toy_example():
    # §IV-A3: m = [m1..m5], d = 2 → [m1, m3, m5] and [m2, m4] (each a sub-image)
    p = cl.split(1, 1, 5, 8, 2)
    assert p.slot.tolist() == [0, 3, 1, 4, 2]
    # 2-D: sub-image (c, y mod d, x mod d) of ⌈H/d⌉×⌈W/d⌉, blocks in order (c, p, q)
    q = cl.split(2, 4, 4, 64, 2)
    c, y, x = np.indices((2, 4, 4)).reshape(3, -1)
    assert q.slot.tolist() == (((c * 2 + y % 2) * 2 + x % 2) * 4 + (y // 2) * 2 + x // 2).tolist()
    full = cl.split(1, 3, 3, 16, 3, per_ct=1)  # d = H = W: every element its own ciphertext
    assert full.n_cts == 9 and (full.slot == 0).all()
    assert cl.polyphase(2, 4, 4, 64, 2).slot.tolist() == q.slot.tolist()


def test_unbatched_positions():
    p = cl.unbatched(2, 2, 2, 8)
    assert p.n_cts == 8 and p.ct.tolist() == list(range(8)) and (p.slot == 0).all()


@settings(max_examples=60, deadline=None)
@given(
    st.data(), st.sampled_from(FAMILIES), st.integers(1, 3), st.integers(1, 6), st.integers(1, 6)
)
def test_placements_are_injective_and_cover_the_tensor(data, family, C, H, W):
    p = make(family, (C, H, W), 256, data.draw)
    assert p.size == C * H * W and p.slots == 256
    assert len(np.unique(p.ct * p.slots + p.slot)) == p.size  # Placement checks it too


def test_placements_refuse_what_does_not_fit():
    with pytest.raises(CompileError, match="does not fit"):
        cl.channel_blocked(1, 5, 5, 16)
    with pytest.raises(CompileError, match="cannot hold"):
        cl.channel_blocked(1, 3, 3, 16, block=8)
    with pytest.raises(CompileError, match="blocks of"):
        cl.channel_blocked(2, 2, 2, 16, per_ct=5)
    with pytest.raises(CompileError, match="row"):
        cl.strided(1, 2, 3, 64, 2, row=4)
    with pytest.raises(CompileError, match="channels"):
        cl.interleaved(3, 2, 2, 16, channels=2)
    with pytest.raises(CompileError, match="data stride"):
        cl.split(1, 2, 2, 16, 0)
    with pytest.raises(CompileError, match="positive"):
        cl.channel_blocked(0, 2, 2, 16)


# -------------------------------------------------------------------------------- kernels
@settings(max_examples=60, deadline=None)
@given(st.data(), conv_cases(), st.sampled_from(FAMILIES), st.sampled_from([1, 2, 8, 64, 256, -8]))
def test_diagonal_kernel_from_every_placement(data, case, family, modulus):
    """kernels.diagonal (dense output) on a convolution from every input placement."""
    ci, _, _, (H, W), stride, pads, _ = case
    rng, w, x, b = _case(*case)
    m = cl.conv_matrix(w, H, W, stride, pads)
    y = direct_conv(x, w, stride, pads) + b[:, None, None]
    inp = make(family, (ci, H, W), 256, data.draw)
    t, out = kernels.diagonal(m, np.repeat(b, y[0].size), inp, modulus)
    np.testing.assert_allclose(out.gather(t.simulate(place(x, inp, rng))), y.ravel(), atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(
    st.data(),
    conv_cases(),
    st.sampled_from(FAMILIES),
    st.sampled_from(FAMILIES),
    st.sampled_from([1, 4, 16, 100, 256]),
)
def test_to_placement_between_every_pair_of_placements(data, case, fin, fout, modulus):
    """to_placement: any input placement to any output placement, read at the output."""
    ci, _, _, (H, W), stride, pads, _ = case
    rng, w, x, b = _case(*case)
    m = cl.conv_matrix(w, H, W, stride, pads)
    y = direct_conv(x, w, stride, pads) + b[:, None, None]
    inp = make(fin, (ci, H, W), 256, data.draw)
    out = make(fout, y.shape, 256, data.draw)
    t = cl.to_placement(m, np.repeat(b, y[0].size), inp, out, modulus)
    assert (t.n_in, t.n_out) == (inp.n_cts, out.n_cts)
    np.testing.assert_allclose(out.gather(t.simulate(place(x, inp, rng))), y.ravel(), atol=1e-9)
    # exactly what build_transform gives with the rows mapped through the output placement
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    cols = m.indices
    ref = build_transform(
        inp.n_cts,
        out.n_cts,
        256,
        inp.ct[cols],
        inp.slot[cols],
        out.ct[rows],
        out.slot[rows],
        m.data,
        modulus,
        kernels.bias_slots(np.repeat(b, y[0].size), out),
    )
    assert np.array_equal(t.terms, ref.terms)
    assert np.array_equal(t.vectors, ref.vectors)
    assert np.array_equal(t.bias, ref.bias)
    assert t.rotation_steps() == ref.rotation_steps()


def test_to_placement_refuses_mismatched_shapes():
    m = sp.csr_matrix(np.ones((4, 9)))
    with pytest.raises(CompileError, match="matrix"):
        cl.to_placement(
            m, None, cl.channel_blocked(1, 3, 3, 16), cl.channel_blocked(1, 2, 3, 16), 16
        )
    with pytest.raises(CompileError, match="slots"):
        cl.to_placement(
            m, None, cl.channel_blocked(1, 3, 3, 16), cl.channel_blocked(1, 2, 2, 32), 16
        )
    with pytest.raises(CompileError, match="modulus"):
        cl.to_placement(
            m, None, cl.channel_blocked(1, 3, 3, 16), cl.channel_blocked(1, 2, 2, 16), 0
        )


# ------------------------------------------------------------------------- golden counts
def _conv(co, ci, k, H, W, stride=1, pad=None, seed=0):
    w = np.random.default_rng(seed).uniform(0.5, 1.0, (co, ci, k, k))  # no zero taps
    return cl.conv_matrix(w, H, W, stride, k // 2 if pad is None else pad)


def test_gazelle_table4_input_and_output_rotations():
    """8→8 channels of 4×4, 3×3 filter, 64 slots: c_n = 4 channels per ciphertext."""
    m = _conv(8, 8, 3, 4, 4)
    p = cl.channel_blocked(8, 4, 4, 64)
    cn, ci_cts, f2 = 4, 2, 9
    inputs = cl.to_placement(m, None, p, p, 64).counts()  # M = S: input rotations
    assert inputs["decompose"] == ci_cts  # one PermDecomp per input ciphertext
    assert inputs["rotate_ext"] == (cn * f2 - 1) * ci_cts  # Table 4: (c_n f_w f_h − 1)·c_i/c_n
    assert inputs["rotate"] == 0
    outputs = cl.to_placement(m, None, p, p, 16).counts()  # M = channel block: output rotations
    assert outputs["decompose"] == ci_cts
    assert outputs["rotate_ext"] == (f2 - 1) * ci_cts  # (f_w f_h − 1) hoisted per input
    # (c_n − 1) giant steps per output ciphertext: double hoisting sums the inputs first, so
    # this is GAZELLE's (c_n − 1)·c_o/c_n·c_i/c_n divided by the c_i/c_n input ciphertexts
    assert outputs["rotate"] == (cn - 1) * ci_cts
    t = cl.to_placement(m, None, p, p, 16)
    assert t.rotation_steps() == {b for b in t.terms[:, 3] if b} | {g for g in t.terms[:, 1] if g}


def _n_diagonals(m, inp, out) -> int:
    return len(cl.diagonals(m, inp, out).d)


def test_strided_convolution_layouts_keep_few_diagonals():
    """A stride-2 3×3 convolution of 8×8 images (2 → 2 channels, 256 slots)."""
    m = _conv(2, 2, 3, 8, 8, stride=2)
    compact = cl.channel_blocked(2, 4, 4, 256, block=64)
    # direct to a compact output: a diagonal per output position and tap
    direct_compact = _n_diagonals(m, cl.channel_blocked(2, 8, 8, 256), compact)
    # GAZELLE §6.1: polyphase input, compact output — a translation per pair of sub-images
    poly = _n_diagonals(
        m, cl.polyphase(2, 8, 8, 256, 2, block=16), cl.channel_blocked(2, 4, 4, 256, block=16)
    )
    # direct convolution leaving data stride 2 on the input's grid
    strided = _n_diagonals(
        m, cl.channel_blocked(2, 8, 8, 256), cl.strided(2, 4, 4, 256, 2, row=8, block=64)
    )
    assert poly <= 2 * 2 * 9  # (sub-image, output channel) shifts × taps, shared offsets
    assert strided == 3 * 9  # channel differences −1, 0, 1 × taps
    assert direct_compact > 3 * max(poly, strided)


def test_split_with_twice_the_stride_maps_onto_the_split_output():
    """§IV-A3: data stride d = 2s gives the output in the split layout with d / s = 2."""
    m = _conv(1, 1, 3, 8, 8, stride=2, pad=0)  # output 3×3
    inp = cl.split(1, 8, 8, 256, 4, block=4)  # 16 sub-images of 2×2
    out = cl.split(1, 3, 3, 256, 2, block=4)  # 4 sub-images of 2×2
    diag = cl.diagonals(m, inp, out)
    # one translation per (input sub-image, output sub-image) pair that shares weights
    pairs = len(
        {
            (int(i) // 4, int(o) // 4)
            for i, o in zip(
                inp.slot[m.indices], out.slot[np.repeat(np.arange(9), np.diff(m.indptr))]
            )
        }
    )
    assert len(diag.d) <= pairs
    x = np.random.default_rng(0).standard_normal(64)
    t = diag.lower(256)
    np.testing.assert_allclose(
        out.gather(t.simulate(place(x, inp, np.random.default_rng(1)))), m @ x
    )


def test_unbatched_baseline_needs_no_rotation():
    m = _conv(4, 3, 3, 5, 5, stride=2, pad=0)
    t = cl.to_placement(m, None, cl.unbatched(3, 5, 5, 64), cl.unbatched(4, 2, 2, 64), 1)
    c = t.counts()
    assert t.rotation_steps() == set()
    assert c["mul_plain"] == m.nnz and c["rotate"] == c["rotate_ext"] == 0

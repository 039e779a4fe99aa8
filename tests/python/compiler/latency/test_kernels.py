"""The linear kernels of latency mode (``heinfer.compiler.latency.kernels``) against numpy.

For random sparse matrices (several ciphertexts in and out, empty rows, a single non-zero),
random input placements (dense, shuffled, with gaps) and every giant-step modulus, each
kernel — generalized diagonals, GAZELLE's hybrid (where it applies; with and without LoLa's
stacked copies), the naive method, the client-expanded first layer — lowers to a transform
whose simulation, read at the kernel's output placement, is ``A x + b`` (1e-9), that runs
with exactly its rotation keys, and whose operation counts are exactly what the packing
search prices (:func:`~heinfer.compiler.latency.search.candidate_counts`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler.latency import kernels
from heinfer.compiler.latency.layout import Placement, expanded_input
from heinfer.compiler.latency.search import candidate_counts
from heinfer.errors import CompileError
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from .test_transform import (
    SLOTS,
    biases,
    check_transform,
    diagonals,
    moduli,
    placements,
    slot_values,
    sparse_matrices,
)

I64 = np.int64


def _rows_cols(a: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(a.shape[0]), np.diff(a.indptr)), a.indices.astype(I64)


def _want(a: sp.csr_matrix, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    return a @ x + (0 if bias is None else bias)


def _x(a: sp.csr_matrix) -> np.ndarray:
    return np.random.default_rng(a.nnz + a.shape[1]).normal(size=a.shape[1])


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(n)))


# ---------------------------------------------------------------------------------- diagonal
@settings(max_examples=50, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_diagonal_kernel_equals_the_dense_product(data, slots: int) -> None:
    a = data.draw(sparse_matrices(slots), "matrix")
    rows, cols = a.shape
    inp = data.draw(placements(cols, slots), "input placement")
    m = data.draw(moduli(slots), "giant modulus")
    bias = data.draw(biases(rows), "bias")
    note(f"{a.shape} nnz={a.nnz}, {inp.n_cts} input cts, S={slots}, M={m}")
    t, out = kernels.diagonal(a, bias, inp, m)
    dense = Placement.dense(rows, slots)
    assert (out.n_cts, out.slots) == (dense.n_cts, slots)
    np.testing.assert_array_equal(out.ct, dense.ct)
    np.testing.assert_array_equal(out.slot, dense.slot)
    assert (t.n_in, t.n_out, t.fold, t.replicate) == (inp.n_cts, out.n_cts, (), ())
    x = _x(a)
    y = check_transform(t, slot_values(x, inp), out, _want(a, x, bias))
    # the output is clean (exactly zero outside its placement, whatever the input's other
    # slots hold): the search lets the next layer replicate it
    outside = np.ones_like(y, dtype=bool)
    outside[out.ct, out.slot] = False
    assert not y[outside].any()
    r, c = _rows_cols(a)
    o, ia, d = diagonals(inp.ct[c], inp.slot[c], out.ct[r], out.slot[r], slots)
    assert t.counts() == candidate_counts(o, ia, d, 0, out.n_cts, slots, m, 0, inp.n_cts)


def test_bias_slots_follow_the_output_placement() -> None:
    out = Placement(2, 8, [1, 0, 1], [7, 2, 0])
    assert kernels.bias_slots(None, out) is None
    assert kernels.bias_slots(np.zeros(3), out) is None
    v = kernels.bias_slots(np.array([1.0, 2.0, 3.0]), out)
    want = np.zeros((2, 8))
    want[1, 7], want[0, 2], want[1, 0] = 1.0, 2.0, 3.0
    np.testing.assert_array_equal(v, want)


# ---------------------------------------------------------------------------------- hybrid
@st.composite
def _squat(draw, slots: int):
    """A squat matrix (rows ≤ S/2) on an input of up to two ciphertexts."""
    a = draw(sparse_matrices(slots, max_rows=slots // 2, max_cols=2 * slots), "matrix")
    inp = draw(placements(a.shape[1], slots), "input placement")
    return a, inp


@settings(max_examples=80, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_hybrid_kernel_equals_the_dense_product(data, slots: int) -> None:
    a, inp = data.draw(_squat(slots))
    rows = a.shape[0]
    m_gs = data.draw(moduli(slots), "giant modulus")
    bias = data.draw(biases(rows), "bias")
    res = kernels.hybrid(a, bias, inp, m_gs)
    m = _pow2_at_least(rows)
    r, c = _rows_cols(a)
    target = inp.slot[c] + (r - inp.slot[c]) % m  # the partial-sum slot of every product
    chunks = _pow2_at_least(-(-(int(target.max(initial=0)) + 1) // m))
    applies = m < slots and chunks * m <= slots and chunks > 1
    assert (res is not None) == applies
    if not applies:  # the refusal was the check (no filtering: most squat draws do not apply)
        return
    t, out = res
    note(
        f"{a.shape} nnz={a.nnz}, {inp.n_cts} input cts, S={slots}, m={m}, chunks={chunks}, M={m_gs}"
    )
    assert (out.n_cts, out.slots) == (1, slots)
    np.testing.assert_array_equal(out.ct, np.zeros(rows))
    np.testing.assert_array_equal(out.slot, np.arange(rows))
    assert t.fold == tuple(m << i for i in range(int(math.log2(chunks))))
    assert t.replicate == ()
    x = _x(a)
    check_transform(t, slot_values(x, inp), out, _want(a, x, bias))
    # every diagonal lies in (−m, 0]: at most m of them per input ciphertext
    assert all(((-d) % slots) < m for d in ((inp.slot[c] - target) % slots).tolist())
    o, ia, d = diagonals(inp.ct[c], inp.slot[c], np.zeros_like(r), target, slots)
    assert t.counts() == candidate_counts(o, ia, d, len(t.fold), 1, slots, m_gs, 0, inp.n_cts)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_hybrid_with_stacked_copies_equals_the_dense_product(data, slots: int) -> None:
    """LoLa's stacking: a clean input in one ciphertext replicated to ``c`` shifted copies, so
    each product reads the copy that puts it on one of only ``m/c`` diagonals."""
    a = data.draw(sparse_matrices(slots, max_rows=slots // 4, max_cols=slots // 4), "matrix")
    cols = a.shape[1]
    perm = data.draw(
        st.permutations(range(cols)) if cols <= 64 else st.just(range(cols)), "input order"
    )
    inp = Placement(1, slots, np.zeros(cols, I64), np.array(perm, I64))  # compact: slots 0..C-1
    m_gs = data.draw(moduli(slots), "giant modulus")
    bias = data.draw(biases(a.shape[0]), "bias")
    m = _pow2_at_least(a.shape[0])
    # more copies than the m diagonals: no kernel (drawn from the rest, so that few draws
    # are filtered out, which Hypothesis's health check refuses)
    assert kernels.hybrid(a, bias, inp, m_gs, 2 * m) is None
    allowed = [c for c in (2, 4, 8, 16) if c <= m]
    assume(allowed)
    copies = data.draw(st.sampled_from(allowed), "copies")
    res = kernels.hybrid(a, bias, inp, m_gs, copies)
    assume(res is not None)
    t, out = res
    note(
        f"{a.shape} nnz={a.nnz}, S={slots}, m={m}, copies={copies}, M={m_gs}, "
        f"replicate={t.replicate}"
    )
    assert len(t.replicate) == int(math.log2(copies))
    x = _x(a)
    clean = slot_values(x, inp) * 0
    clean[inp.ct, inp.slot] = x
    check_transform(t, clean, out, _want(a, x, bias))
    rows_, in_ct, pos, target, _, fold, rep = kernels.hybrid_geometry(a, inp, copies)
    assert fold == t.fold and rep == t.replicate
    d = (pos - target) % slots
    assert len(set(d.tolist())) <= m // copies
    o, ia, dd = diagonals(in_ct, pos, np.zeros_like(rows_), target, slots)
    assert t.counts() == candidate_counts(
        o, ia, dd, len(t.fold), 1, slots, m_gs, len(t.replicate), 1
    )


@pytest.mark.parametrize(
    ("rows", "slot", "copies", "why"),
    [
        (16, [0, 1], 1, "m = S: the outputs fill the ciphertext"),
        (9, [0, 1], 1, "m = 16 = S"),
        (4, [0], 1, "one chunk: nothing to fold"),
        (4, [0, 1, 2, 3], 1, "partial sums up to slot 6: two chunks of 4, applies"),
        (8, [0, 15], 1, "a partial sum at slot 16 would need 4 chunks of 8 > 16 slots"),
        (1, [0], 1, "one chunk"),
        (8, [0, 3, 7], 1, "two chunks of 8 fit 16 slots: applies"),
        (4, [0, 1], 2, "two copies: applies"),
        (4, [0, 1], 8, "more copies than partial-sum slots"),
        (4, [0, 1], 3, "copies not a power of two"),
    ],
)
def test_hybrid_applies_only_when_its_partial_sums_fold(rows, slot, copies, why) -> None:
    S = 16
    inp = Placement(1, S, np.zeros(len(slot), I64), np.array(slot))
    a = sp.csr_matrix(np.ones((rows, len(slot))))
    res = kernels.hybrid(a, None, inp, 1, copies)
    assert (res is not None) == why.endswith("applies"), why


def test_hybrid_copies_need_one_input_ciphertext() -> None:
    inp = Placement(2, 16, [0, 0, 1, 1], [0, 1, 0, 1])
    a = sp.csr_matrix(np.ones((2, 4)))
    assert kernels.hybrid(a, None, inp, 1, 1) is not None
    assert kernels.hybrid(a, None, inp, 1, 2) is None


# ---------------------------------------------------------------------------------- naive
@settings(max_examples=60, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_naive_kernel_equals_the_dense_product(data, slots: int) -> None:
    a = data.draw(sparse_matrices(slots, max_rows=12, max_cols=slots), "matrix")
    inp = data.draw(placements(a.shape[1], slots, kinds=("dense", "shuffled")), "input placement")
    assume(inp.n_cts == 1)
    bias = data.draw(biases(a.shape[0]), "bias")
    t, out = kernels.naive(a, bias, inp)
    rows = a.shape[0]
    np.testing.assert_array_equal(out.ct, np.arange(rows))
    np.testing.assert_array_equal(out.slot, np.zeros(rows))
    assert t.n_out == rows == out.n_cts
    span = _pow2_at_least(int(inp.slot.max()) + 1)
    assert t.fold == tuple(1 << i for i in range(int(math.log2(span))))
    assert t.rotation_steps() == set(t.fold)  # only the rotate-and-sum rotates
    x = _x(a)
    check_transform(t, slot_values(x, inp), out, _want(a, x, bias))


def test_naive_kernel_needs_one_input_ciphertext() -> None:
    with pytest.raises(CompileError, match="one ciphertext"):
        kernels.naive(sp.csr_matrix(np.ones((2, 20))), None, Placement.dense(20, 16))


# ---------------------------------------------------------------------------------- expanded
@settings(max_examples=80, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_expanded_kernel_equals_the_dense_product(data, slots: int) -> None:
    a = data.draw(sparse_matrices(slots, max_rows=slots), "matrix")
    rows = a.shape[0]
    taps = data.draw(st.sampled_from([None, 1, 2, 3, 4, 64]), "taps per ciphertext")
    m = data.draw(moduli(slots), "giant modulus")
    fold = data.draw(st.booleans(), "fold")
    bias = data.draw(biases(rows), "bias")
    t_eff = min(taps or slots // rows, slots // rows, max(int(np.diff(a.indptr).max()), 1))
    if fold and t_eff & (t_eff - 1):
        with pytest.raises(CompileError, match="power-of-two"):
            kernels.expanded(a, bias, slots, m, taps, fold=True)
        return
    gather, t, out = kernels.expanded(a, bias, slots, m, taps, fold=fold)
    note(
        f"{a.shape} nnz={a.nnz}, S={slots}, t={taps}→{t_eff}, {len(gather)} client cts, "
        f"M={m}, fold={fold}"
    )
    g2, where, _ = expanded_input(a, slots, taps)
    np.testing.assert_array_equal(gather, g2)
    assert (t.n_in, t.n_out) == (len(gather), 1)
    dense = Placement.dense(rows, slots)
    np.testing.assert_array_equal(out.ct, dense.ct)
    np.testing.assert_array_equal(out.slot, dense.slot)
    x = _x(a)
    client = np.where(gather >= 0, x[np.maximum(gather, 0)], 0.0)
    y = check_transform(t, client, out, _want(a, x, bias))
    r, ct, slot = where.T
    if fold:
        # every product stays in its slot; log2 t rotate-and-add steps by R, 2R, … fold the chunks
        assert t.fold == tuple(rows << i for i in range(int(math.log2(t_eff))))
        assert t.rotation_steps() == set(t.fold)
        o, ia, d = diagonals(ct, slot, np.zeros_like(r), slot, slots)
        assert t.counts() == candidate_counts(o, ia, d, len(t.fold), 1, slots, 1, 0, len(gather))
        return
    # tap j of every row sits (j mod t)·R slots after the row's output: t diagonals at most
    steps = {j * rows for j in range(1, t_eff)}
    if m > 0:
        assert t.rotation_steps() <= steps | {s - s % m for s in steps} | {s % m for s in steps}
    if m >= slots:
        assert t.rotation_steps() <= steps
    # the rotated variant's output is clean: zero outside slots 0..R−1
    assert not y[0, rows:].any()
    o, ia, d = diagonals(ct, slot, np.zeros_like(r), r, slots)
    assert t.counts() == candidate_counts(o, ia, d, 0, 1, slots, m, 0, len(gather))


def test_expanded_kernel_refuses_more_rows_than_slots() -> None:
    with pytest.raises(CompileError):
        kernels.expanded(sp.identity(20, format="csr"), None, 16, 16)


# ---------------------------------------------------------------------------------- all kernels
@settings(max_examples=30, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_kernels_agree_with_each_other_for_every_modulus(data, slots: int) -> None:
    a, inp = data.draw(_squat(slots))
    x = _x(a)
    xs = slot_values(x, inp, seed=7)
    want = _want(a, x, None)
    for m in (1, 2, slots // 2, slots):
        t, out = kernels.diagonal(a, None, inp, m)
        np.testing.assert_allclose(out.gather(t.simulate(xs)), want, rtol=0, atol=1e-9)
        res = kernels.hybrid(a, None, inp, m)
        if res is not None:
            t, out = res
            np.testing.assert_allclose(out.gather(t.simulate(xs)), want, rtol=0, atol=1e-9)

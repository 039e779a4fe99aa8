"""Layouts of latency mode (``heinfer.compiler.latency.layout``).

A :class:`Placement` refuses positions outside its ciphertexts and two elements in one slot;
:func:`dense_input` puts element ``e`` at ``(e // S, e % S)``; :func:`expanded_input` puts tap
``j`` of row ``r`` (the ``j``-th non-zero of the row, columns in increasing order) at slot
``(j mod t)·R + r`` of ciphertext ``⌊j / t⌋`` — every element of every row exactly where the
docstring says, nothing anywhere else, and the products it lists rebuild ``A x``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler.latency.layout import Placement, dense_input, expanded_input
from heinfer.errors import CompileError
from hypothesis import given, settings
from hypothesis import strategies as st

I64 = np.int64


# ---------------------------------------------------------------------------------- Placement
def test_placement_holds_int64_vectors_and_its_size() -> None:
    p = Placement(2, 8, [0, 1, 1], [7, 0, 3])
    assert p.ct.dtype == I64 and p.slot.dtype == I64
    assert p.size == 3 and (p.n_cts, p.slots) == (2, 8)
    assert p.to_json() == {"n_cts": 2, "slots": 8}


def test_empty_placement_is_valid() -> None:
    p = Placement(0, 16, np.zeros(0, I64), np.zeros(0, I64))
    assert p.size == 0


@pytest.mark.parametrize(
    ("n_cts", "ct", "slot"),
    [
        (1, [1], [0]),  # ciphertext past the last
        (2, [-1], [0]),  # negative ciphertext
        (1, [0], [8]),  # slot past the last
        (1, [0], [-1]),  # negative slot
        (1, [0, 0], [3, 8]),  # one of several out of range
        (0, [0], [0]),  # no ciphertexts at all
    ],
)
def test_placement_out_of_range_is_refused(n_cts: int, ct: list, slot: list) -> None:
    with pytest.raises(CompileError, match="outside"):
        Placement(n_cts, 8, np.array(ct), np.array(slot))


@pytest.mark.parametrize(
    ("ct", "slot"),
    [([0, 0], [3, 3]), ([1, 0, 1], [5, 5, 5]), ([0, 1, 0, 1], [0, 0, 1, 0])],
)
def test_placement_with_shared_slots_is_refused(ct: list, slot: list) -> None:
    with pytest.raises(CompileError, match="share"):
        Placement(2, 8, np.array(ct), np.array(slot))


@pytest.mark.parametrize(
    ("ct", "slot"),
    [([0, 0], [1]), ([[0, 0]], [[1, 2]]), (0, 1)],
)
def test_placement_with_mismatched_vectors_is_refused(ct, slot) -> None:
    with pytest.raises(CompileError, match="vectors"):
        Placement(1, 8, np.array(ct), np.array(slot))


def test_same_slot_in_different_ciphertexts_is_fine() -> None:
    p = Placement(3, 4, [0, 1, 2], [2, 2, 2])
    assert p.size == 3


@pytest.mark.parametrize("slots", [16, 64, 256])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 100, 513])
def test_dense_placement_is_row_major(n: int, slots: int) -> None:
    p = Placement.dense(n, slots)
    assert p.n_cts == -(-n // slots) and p.slots == slots and p.size == n
    e = np.arange(n)
    np.testing.assert_array_equal(p.ct, e // slots)
    np.testing.assert_array_equal(p.slot, e % slots)


def test_gather_reads_every_element_with_and_without_a_batch_axis() -> None:
    rng = np.random.default_rng(0)
    p = Placement(3, 8, [2, 0, 1, 0], [7, 0, 4, 5])
    cts = rng.normal(size=(3, 8))
    np.testing.assert_array_equal(p.gather(cts), [cts[2, 7], cts[0, 0], cts[1, 4], cts[0, 5]])
    batch = rng.normal(size=(5, 3, 8))
    got = p.gather(batch)
    assert got.shape == (5, 4)
    for b in range(5):
        np.testing.assert_array_equal(got[b], p.gather(batch[b]))


# ---------------------------------------------------------------------------------- dense_input
@pytest.mark.parametrize("slots", [16, 128])
@pytest.mark.parametrize("n", [1, 16, 17, 40, 300])
def test_dense_input_puts_each_element_once_and_zeros_elsewhere(n: int, slots: int) -> None:
    gather, p = dense_input(n, slots)
    assert gather.dtype == I64 and gather.shape == (p.n_cts, slots) == (-(-n // slots), slots)
    for e in range(n):
        assert gather[e // slots, e % slots] == e
    assert (gather >= 0).sum() == n
    assert np.all(gather.ravel()[n:] == -1)
    # the placement reads back what the gather map wrote
    x = np.random.default_rng(n).normal(size=n)
    filled = np.where(gather >= 0, x[np.maximum(gather, 0)], 0.0)
    np.testing.assert_array_equal(p.gather(filled), x)


# ---------------------------------------------------------------------------------- expanded_input
def _conv_matrix(side: int, k: int, stride: int, channels: int) -> sp.csr_matrix:
    """A valid ``k×k`` convolution on a ``side×side`` image with ``channels`` output channels."""
    out = (side - k) // stride + 1
    rows, cols, vals = [], [], []
    rng = np.random.default_rng(side * 100 + k)
    for c in range(channels):
        for i in range(out):
            for j in range(out):
                r = (c * out + i) * out + j
                for di in range(k):
                    for dj in range(k):
                        rows.append(r)
                        cols.append((i * stride + di) * side + j * stride + dj)
                        vals.append(rng.normal())
    return sp.csr_matrix((vals, (rows, cols)), shape=(channels * out * out, side * side))


@st.composite
def _matrices(draw, slots: int) -> sp.csr_matrix:
    rows = draw(st.integers(1, slots))
    cols = draw(st.integers(1, 3 * slots))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "empty-rows", "single", "full-row"]))
    if kind == "single":
        return sp.csr_matrix(
            ([1.5], ([rng.integers(rows)], [rng.integers(cols)])), shape=(rows, cols)
        )
    dense = rng.normal(size=(rows, cols)) * (
        rng.random((rows, cols)) < draw(st.sampled_from([0.02, 0.2, 0.7]))
    )
    if kind == "empty-rows":
        dense[rng.random(rows) < 0.5] = 0.0
    if kind == "full-row":
        dense[rng.integers(rows)] = rng.normal(size=cols) + 3.0
    return sp.csr_matrix(dense)


def _rows_sorted(m: np.ndarray) -> np.ndarray:
    return m[np.lexsort(m[:, ::-1].T)]


def _check_expansion(a: sp.csr_matrix, slots: int, taps_per_ct: int | None) -> None:
    rows = a.shape[0]
    taps = np.diff(a.indptr)
    j_max = int(taps.max())
    t = min(taps_per_ct or slots // rows, slots // rows, max(j_max, 1))
    gather, where, w = expanded_input(a, slots, taps_per_ct)
    assert gather.dtype == I64 and where.dtype == I64 and w.dtype == np.float64
    assert gather.shape == (-(-j_max // t), slots)
    assert where.shape == (a.nnz, 3) and w.shape == (a.nnz,)
    # tap j of row r: the j-th non-zero of the row in increasing column order
    r = np.repeat(np.arange(rows), taps)
    c = a.indices.astype(I64)
    order = np.lexsort((c, r))
    j = np.empty(a.nnz, I64)
    j[order] = np.arange(a.nnz) - a.indptr[r[order]]
    ct, slot = j // t, (j % t) * rows + r
    expected = np.full((-(-j_max // t), slots), -1, I64)
    expected[ct, slot] = c
    assert len(np.unique(ct * slots + slot)) == a.nnz, "two taps in one slot"
    np.testing.assert_array_equal(gather, expected)
    # the product list names every tap at its position with its weight (in any order)
    got = np.column_stack([where, w])
    want = np.column_stack([r, ct, slot, a.data])
    np.testing.assert_array_equal(_rows_sorted(got), _rows_sorted(want))
    # the client's slots and the listed products give A x
    x = np.random.default_rng(1).normal(size=a.shape[1])
    filled = np.where(gather >= 0, x[np.maximum(gather, 0)], 0.0)
    y = np.zeros(rows)
    np.add.at(y, where[:, 0], w * filled[where[:, 1], where[:, 2]])
    np.testing.assert_allclose(y, a @ x, rtol=0, atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), slots=st.sampled_from([16, 32, 64, 256]))
def test_expanded_input_places_every_tap_where_documented(data, slots: int) -> None:
    a = data.draw(_matrices(slots))
    taps_per_ct = data.draw(st.sampled_from([None, 1, 2, 3, 5, 1000]))
    _check_expansion(a, slots, taps_per_ct)


@pytest.mark.parametrize("taps_per_ct", [None, 1, 2, 4, 9])
@pytest.mark.parametrize(
    ("side", "k", "stride", "channels"), [(8, 3, 1, 2), (12, 5, 2, 5), (6, 3, 3, 1)]
)
def test_expanded_input_of_convolutions(side, k, stride, channels, taps_per_ct) -> None:
    a = _conv_matrix(side, k, stride, channels)
    _check_expansion(a, 256, taps_per_ct)


def test_expanded_input_of_a_convolution_has_one_diagonal_per_tap_in_a_ciphertext() -> None:
    """LoLa's convolution representation: with ``t`` taps per ciphertext the layer reads
    ``t`` diagonals ``(j mod t)·R`` of each ciphertext — ``t − 1`` rotations, not one per
    tap."""
    a = _conv_matrix(8, 3, 1, 2)  # 72 rows, 9 taps each
    for t in (1, 2, 3):
        gather, where, _ = expanded_input(a, 256, t)
        assert len(gather) == -(-9 // t)
        d = (where[:, 2] - where[:, 0]) % 256
        assert set(d.tolist()) == {j * 72 for j in range(t)}


def test_expanded_input_of_unsorted_csr_follows_storage_order() -> None:
    """Row ``r``'s taps follow the CSR storage order (as documented); the products stay right."""
    a = sp.csr_matrix(
        (np.array([1.0, 2.0, 3.0]), np.array([5, 1, 3]), np.array([0, 3])), shape=(1, 6)
    )
    assert not a.has_sorted_indices
    gather, where, w = expanded_input(a, 16, 1)
    np.testing.assert_array_equal(gather[:, 0], [5, 1, 3])
    y = sum(wi * [0, 10, 0, 30, 0, 50][gather[ct, slot]] for wi, (_, ct, slot) in zip(w, where))
    assert y == 2 * 10 + 3 * 30 + 1 * 50


def test_expanded_input_caps_taps_per_ciphertext_by_the_room_for_rows() -> None:
    a = _conv_matrix(8, 3, 1, 2)  # 72 rows: 3 blocks of 72 fit 256 slots
    gather, _, _ = expanded_input(a, 256, None)
    assert len(gather) == 3  # t = 256 // 72 = 3, 9 taps
    gather, _, _ = expanded_input(a, 256, 100)
    assert len(gather) == 3


def test_expanded_input_with_more_rows_than_slots_is_refused() -> None:
    with pytest.raises(CompileError, match="rows"):
        expanded_input(sp.identity(17, format="csr"), 16)


def test_expanded_input_of_an_identity_is_the_dense_input() -> None:
    gather, where, w = expanded_input(sp.identity(10, format="csr"), 16)
    dense, _ = dense_input(10, 16)
    np.testing.assert_array_equal(gather, dense)
    np.testing.assert_array_equal(
        where, np.stack([np.arange(10), np.zeros(10, I64), np.arange(10)], 1)
    )
    np.testing.assert_array_equal(w, np.ones(10))

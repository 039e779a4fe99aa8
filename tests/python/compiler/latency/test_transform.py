"""The generalized-diagonal transform (``heinfer.program.transform``) against numpy.

Property tests (hypothesis) on random sparse matrices — more rows or columns than slots
(several ciphertexts), empty rows, a single non-zero, full rows — between random input and
output placements (dense, shuffled, with gaps) and every giant-step modulus ``M`` from 1 to
beyond ``S`` (powers of two or not):

* :meth:`Transform.simulate` on the input slots (garbage in every slot the placement does not
  name), read at the output placement, equals ``A x + b`` to 1e-9, for every ``M`` alike;
* executing the transform the way the runtime does (hoisted baby steps, giant steps, fold)
  with only the keys of :meth:`Transform.rotation_steps` gives the same slots and uses every
  one of those keys;
* :meth:`Transform.counts` equals :func:`heinfer.compiler.latency.search.candidate_counts`
  for the same diagonals and modulus — the search prices exactly what is built.

The strategies here are shared with ``test_kernels.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler.latency.layout import Placement
from heinfer.compiler.latency.search import candidate_counts
from heinfer.program.transform import EXTRA_KINDS, OP_KINDS, Transform, build_transform
from heinfer.errors import CompileError
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

I64 = np.int64
SLOTS = st.sampled_from([16, 32, 64, 128, 256])
SEEDS = st.integers(0, 2**32 - 1)


# ---------------------------------------------------------------------------------- strategies
@st.composite
def sparse_matrices(
    draw, slots: int, max_rows: int | None = None, max_cols: int | None = None
) -> sp.csr_matrix:
    """Canonical CSR matrices (no stored zeros), up to ``2S + 3`` rows and columns."""
    rows = draw(st.integers(1, max_rows or 2 * slots + 3))
    cols = draw(st.integers(1, max_cols or 2 * slots + 3))
    rng = np.random.default_rng(draw(SEEDS))
    kind = draw(st.sampled_from(["random", "empty-rows", "single", "full-row", "band"]))
    if kind == "single":
        r, c = int(rng.integers(rows)), int(rng.integers(cols))
        return sp.csr_matrix(([rng.uniform(0.5, 2.0)], ([r], [c])), shape=(rows, cols))
    if kind == "band":  # convolution-like: a few taps per row at a stride
        taps, stride = int(rng.integers(1, 6)), int(rng.integers(1, 3))
        r = np.repeat(np.arange(rows), taps)
        c = (r * stride + np.tile(np.arange(taps), rows)) % cols
        m = sp.csr_matrix((rng.normal(size=len(r)) + 0.1, (r, c)), shape=(rows, cols))
    else:
        density = draw(st.sampled_from([0.01, 0.05, 0.3, 1.0]))
        dense = rng.normal(size=(rows, cols)) * (rng.random((rows, cols)) < density)
        if kind == "empty-rows":
            dense[rng.random(rows) < 0.6] = 0.0
        if kind == "full-row":
            dense[rng.integers(rows)] = rng.uniform(0.5, 1.5, cols)
        m = sp.csr_matrix(dense)
    m.sum_duplicates()
    m.eliminate_zeros()
    return m


@st.composite
def placements(draw, n: int, slots: int, kinds=("dense", "shuffled", "gaps")) -> Placement:
    """``n`` elements: row-major, shuffled over the fewest ciphertexts, or scattered over up
    to two more ciphertexts than needed."""
    kind = draw(st.sampled_from(kinds))
    if kind == "dense":
        return Placement.dense(n, slots)
    rng = np.random.default_rng(draw(SEEDS))
    n_cts = -(-n // slots) + (draw(st.integers(0, 2)) if kind == "gaps" else 0)
    pos = rng.permutation(n_cts * slots)[:n]
    return Placement(n_cts, slots, pos // slots, pos % slots)


def moduli(slots: int):
    """Every giant-step modulus: powers of two up to ``S``, any integer, beyond ``S``, and
    negative ones (baby steps in ``(−|M|, 0]``)."""
    return st.one_of(
        st.sampled_from([1 << i for i in range(slots.bit_length())]),
        st.integers(1, slots),
        st.integers(slots, 3 * slots),
        st.sampled_from([-(1 << i) for i in range(slots.bit_length())]),
        st.integers(-slots, -1),
    )


def biases(rows: int):
    return st.one_of(
        st.none(),
        st.just(np.zeros(rows)),
        SEEDS.map(lambda s: np.random.default_rng(s).normal(size=rows)),
    )


# ---------------------------------------------------------------------------------- helpers
def slot_values(x: np.ndarray, place: Placement, seed: int = 0) -> np.ndarray:
    """``x`` at its placement; large garbage in every other slot (never read by a kernel)."""
    v = np.random.default_rng(seed).normal(size=(place.n_cts, place.slots)) * 1e3
    v[place.ct, place.slot] = x
    return v


def diagonals(
    in_ct, in_slot, out_ct, out_slot, slots: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unique ``(o, a, d)`` of a kernel's products, ``d = (in_slot − out_slot) mod S``."""
    d = (np.asarray(in_slot) - np.asarray(out_slot)) % slots
    u = np.unique(np.stack([np.asarray(out_ct), np.asarray(in_ct), d], axis=1), axis=0).reshape(
        -1, 3
    )
    return u[:, 0].astype(I64), u[:, 1].astype(I64), u[:, 2].astype(I64)


def execute(t: Transform, x: np.ndarray) -> tuple[np.ndarray, set[int]]:
    """The transform run as the runtime runs it (hoisted baby steps of every input, products,
    giant steps, fold, bias), allowed only the keys of ``t.rotation_steps()``; returns the
    output slots and the set of steps rotated by."""
    keys, used = t.rotation_steps(), set()
    S = t.slots

    def rot(v: np.ndarray, s: int) -> np.ndarray:
        assert 0 <= s < S
        if s == 0:
            return v
        assert s in keys, f"rotation by {s} without a key"
        used.add(s)
        return np.roll(v, -s)

    for r in t.replicate:  # x ← x + rot(x, r) on every input first
        x = np.stack([xa + rot(xa, r) for xa in x]).reshape(x.shape)
    babies = t.babies()
    hoisted = {a: {b: rot(x[a], b) for b in bs} for a, bs in babies.items()}
    out = [np.zeros(S) for _ in range(t.n_out)]
    for o, g, ix in t.groups():
        acc = np.zeros(S)
        for i in ix:
            _, _, a, b = (int(v) for v in t.terms[i])
            acc += t.vectors[i] * (hoisted[a][b] if (t.terms[ix, 3] != 0).any() else x[a])
        out[o] = out[o] + rot(acc, g)
    y = np.array(out).reshape(t.n_out, S)
    for s in t.fold:
        y = y + np.stack([rot(row, s) for row in y]).reshape(y.shape)
    return (y if t.bias is None else y + t.bias), used


def check_transform(t: Transform, xs: np.ndarray, out: Placement, want: np.ndarray) -> np.ndarray:
    """``t`` on slots ``xs`` read at ``out`` equals ``want``; the runtime-like execution agrees
    and uses exactly the transform's keys; terms are sorted, unique and in range."""
    y = t.simulate(xs)
    assert y.shape == (t.n_out, t.slots)
    np.testing.assert_allclose(out.gather(y), want, rtol=0, atol=1e-9)
    y2, used = execute(t, xs)
    np.testing.assert_allclose(y2, y, rtol=0, atol=1e-9)
    assert used == t.rotation_steps()
    assert all(0 < s < t.slots for s in used)
    if len(t.terms):
        keys = [tuple(r) for r in t.terms.tolist()]
        assert keys == sorted(set(keys)), "terms are sorted and unique"
    return y


# ---------------------------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_simulate_equals_the_dense_product(data, slots: int) -> None:
    a = data.draw(sparse_matrices(slots), "matrix")
    rows, cols = a.shape
    inp = data.draw(placements(cols, slots), "input placement")
    out = data.draw(placements(rows, slots), "output placement")
    m = data.draw(moduli(slots), "giant modulus")
    bias = data.draw(biases(rows), "bias")
    note(f"{a.shape} nnz={a.nnz}, {inp.n_cts} → {out.n_cts} cts, S={slots}, M={m}")
    r = np.repeat(np.arange(rows), np.diff(a.indptr))
    c = a.indices
    bias_slots = None
    if bias is not None:
        bias_slots = np.zeros((out.n_cts, slots))
        bias_slots[out.ct, out.slot] = bias
    t = build_transform(
        inp.n_cts,
        out.n_cts,
        slots,
        inp.ct[c],
        inp.slot[c],
        out.ct[r],
        out.slot[r],
        a.data,
        m,
        bias_slots,
    )
    assert (t.n_in, t.n_out, t.slots) == (inp.n_cts, out.n_cts, slots)
    x = np.random.default_rng(rows * cols).normal(size=cols)
    want = a @ x + (0 if bias is None else bias)
    check_transform(t, slot_values(x, inp), out, want)
    # the search counts exactly the operations of what is built
    o, ia, d = diagonals(inp.ct[c], inp.slot[c], out.ct[r], out.slot[r], slots)
    assert t.counts() == candidate_counts(o, ia, d, 0, out.n_cts, slots, m)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_every_giant_modulus_gives_the_same_slots(data, slots: int) -> None:
    a = data.draw(sparse_matrices(slots), "matrix")
    rows, cols = a.shape
    inp = data.draw(placements(cols, slots), "input placement")
    out = data.draw(placements(rows, slots), "output placement")
    r = np.repeat(np.arange(rows), np.diff(a.indptr))
    c = a.indices
    xs = slot_values(np.random.default_rng(3).normal(size=cols), inp, seed=4)
    ys = []
    for m in (1, 3, slots // 4, slots):
        t = build_transform(
            inp.n_cts, out.n_cts, slots, inp.ct[c], inp.slot[c], out.ct[r], out.slot[r], a.data, m
        )
        ys.append(t.simulate(xs))
    for y in ys[1:]:
        np.testing.assert_allclose(y, ys[0], rtol=0, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), slots=SLOTS)
def test_a_range_of_outputs_computes_those_outputs_of_the_whole(data, slots: int) -> None:
    """``Transform.outputs`` (a cluster shard): the same slots for its outputs as the whole,
    and the groups of the whole are its groups with ``o`` shifted."""
    a = data.draw(sparse_matrices(slots), "matrix")
    rows, cols = a.shape
    inp = data.draw(placements(cols, slots), "input placement")
    out = data.draw(placements(rows, slots), "output placement")
    m = data.draw(moduli(slots), "giant modulus")
    r, c = np.repeat(np.arange(rows), np.diff(a.indptr)), a.indices
    bias = np.random.default_rng(5).normal(size=(out.n_cts, slots))
    t = build_transform(inp.n_cts, out.n_cts, slots, inp.ct[c], inp.slot[c], out.ct[r], out.slot[r], a.data, m, bias, fold=(1,))
    start = data.draw(st.integers(0, t.n_out - 1), "start")
    stop = data.draw(st.integers(start + 1, t.n_out), "stop")
    part = t.outputs(start, stop)
    xs = slot_values(np.random.default_rng(3).normal(size=cols), inp, seed=4)
    np.testing.assert_array_equal(part.simulate(xs), t.simulate(xs)[start:stop])
    whole = [(o - start, g, t.terms[ix].tolist()) for o, g, ix in t.groups() if start <= o < stop]
    mine = [(o, g, (part.terms[ix] + [start, 0, 0, 0]).tolist()) for o, g, ix in part.groups()]
    assert mine == whole
    assert part.rotation_steps() <= t.rotation_steps()
    with pytest.raises(CompileError, match="outputs"):
        t.outputs(stop, stop)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), slots=SLOTS)
@example(data=None, slots=16).via("M = 1 rotates outputs only, M ≥ S inputs only")
def test_giant_modulus_splits_diagonals_into_baby_and_giant_steps(data, slots: int) -> None:
    """``d = g + b`` with ``b = d mod M``: ``M = 1`` leaves no baby step (output rotations),
    ``M ≥ S`` no giant step (input rotations); in between every step is one of the two."""
    if data is None:  # the explicit example: a full 16×16 matrix
        a, inp, out = (
            sp.csr_matrix(np.ones((16, 16))),
            Placement.dense(16, 16),
            Placement.dense(16, 16),
        )
    else:
        a = data.draw(sparse_matrices(slots), "matrix")
        inp = data.draw(placements(a.shape[1], slots), "input placement")
        out = data.draw(placements(a.shape[0], slots), "output placement")
    r = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    c = a.indices
    args = (inp.n_cts, out.n_cts, slots, inp.ct[c], inp.slot[c], out.ct[r], out.slot[r], a.data)
    only_out = build_transform(*args, 1)
    assert (only_out.terms[:, 3] == 0).all() and only_out.babies() == {}
    only_in = build_transform(*args, slots)
    assert (only_in.terms[:, 1] == 0).all() and only_in.counts()["rotate"] == 0
    d = set(((inp.slot[c] - out.slot[r]) % slots).tolist()) - {0}
    assert only_out.rotation_steps() == d == only_in.rotation_steps()
    for m in (2, 5, slots // 2):
        t = build_transform(*args, m)
        assert (t.terms[:, 3] < m).all() and (t.terms[:, 1] % m == 0).all()
        assert t.rotation_steps() == ({v % m for v in d} | {v - v % m for v in d}) - {0}
    for m in (-2, -5, -(slots // 2)):
        t = build_transform(*args, m)
        assert ((slots - t.terms[:, 3]) % slots < -m).all(), "babies in (−|M|, 0]"
        babies, giants = set(t.terms[:, 3].tolist()), set(t.terms[:, 1].tolist())
        assert t.rotation_steps() == (babies | giants) - {0}
        assert {(int(g) + int(b)) % slots for _, g, _, b in t.terms} <= d | {0}


def test_rotation_steps_are_the_steps_rotated_by() -> None:
    """Input rotations need each non-zero diagonal; output rotations too; a fold adds its
    steps; a zero diagonal (no rotation) needs no key."""
    S = 16
    # y_0 = x[0] + x[3] + x[5] in slot 0: diagonals 0, 3, 5
    args = (1, 1, S, [0, 0, 0], [0, 3, 5], [0, 0, 0], [0, 0, 0], [1.0, 2.0, 3.0])
    assert build_transform(*args, S).rotation_steps() == {3, 5}
    assert build_transform(*args, 1).rotation_steps() == {3, 5}
    assert build_transform(*args, 4).rotation_steps() == {1, 3, 4}  # 5 = 4 + 1, 3 = 0 + 3
    assert build_transform(*args, S, fold=(8,)).rotation_steps() == {3, 5, 8}
    assert build_transform(1, 1, S, [0], [2], [0], [2], [1.0], 1).rotation_steps() == set()


def test_counts_of_a_known_transform() -> None:
    """Two inputs, one output, diagonals {0, 1, 5} of x_0 and {4} of x_1, M = 4."""
    S = 16
    t = build_transform(
        2, 1, S, [0, 0, 0, 1], [0, 1, 5, 4], [0, 0, 0, 0], [0, 0, 0, 0], [1.0, 1.0, 1.0, 1.0], 4
    )
    # groups: g=0 {(0,0), (0,1)} (extended, baby 1), g=4 {(0,1), (1,0)} (extended, baby 1)
    assert t.terms.tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 4, 0, 1], [0, 4, 1, 0]]
    assert t.babies() == {0: [0, 1], 1: [0]}
    # both groups are fused dot products in the extended basis (one ModDown each, no
    # separate additions); their two results are added once
    assert t.counts() == {
        "decompose": 1,
        "rotate_ext": 1,
        "times_p": 2,
        "mul_plain_ext": 4,
        "mod_down": 2,
        "mul_plain": 0,
        "dot": 0,
        "rotate": 1,
        "add": 1,
        "fold": 0,
        "replicate": 0,
    }
    assert set(t.counts()) == set(OP_KINDS) | set(EXTRA_KINDS)


def test_empty_transform_gives_zeros_and_bias() -> None:
    S = 16
    bias = np.arange(2 * S, dtype=float).reshape(2, S)
    t = build_transform(1, 2, S, [], [], [], [], [], 4, bias)
    assert len(t.terms) == 0 and t.groups() == [] and t.rotation_steps() == set()
    assert all(v == 0 for v in t.counts().values())
    np.testing.assert_array_equal(t.simulate(np.ones((1, S))), bias)


def test_duplicate_products_accumulate_into_one_plaintext() -> None:
    t = build_transform(1, 1, 16, [0, 0], [3, 3], [0, 0], [1, 1], [1.5, 2.5], 16)
    assert len(t.terms) == 1
    x = np.arange(16.0)[None]
    assert t.simulate(x)[0, 1] == 4.0 * 3


# ---------------------------------------------------------------------------------- validation
def _t(**kw) -> Transform:
    S = 8
    base = {"n_in": 1, "n_out": 1, "slots": S, "terms": np.array([[0, 0, 0, 1]], I64)}
    base |= {"vectors": np.ones((1, S)), "bias": None}
    base.update(kw)
    return Transform(**base)


def test_a_valid_transform_builds() -> None:
    assert _t().rotation_steps() == {1}


@pytest.mark.parametrize(
    "kw",
    [
        {"terms": np.zeros((1, 3), I64)},
        {"terms": np.zeros(4, I64)},
        {"vectors": np.ones((2, 8))},
        {"vectors": np.ones((1, 7))},
        {"terms": np.array([[1, 0, 0, 0]], I64)},  # output ciphertext n_out
        {"terms": np.array([[-1, 0, 0, 0]], I64)},
        {"terms": np.array([[0, 0, 1, 0]], I64)},  # input ciphertext n_in
        {"terms": np.array([[0, 0, -1, 0]], I64)},
        {"terms": np.array([[0, 8, 0, 0]], I64)},  # giant step S
        {"terms": np.array([[0, -1, 0, 0]], I64)},
        {"terms": np.array([[0, 0, 0, 8]], I64)},  # baby step S
        {"terms": np.array([[0, 0, 0, -2]], I64)},
        {"bias": np.zeros((2, 8))},
        {"bias": np.zeros(8)},
        {"fold": (0,)},
        {"fold": (8,)},
        {"fold": (4, -4)},
    ],
)
def test_malformed_transform_is_refused(kw: dict) -> None:
    with pytest.raises(CompileError, match="transform"):
        _t(**kw)


def test_zero_giant_modulus_is_refused() -> None:
    with pytest.raises(CompileError, match="modulus"):
        build_transform(1, 1, 8, [0], [1], [0], [0], [1.0], 0)


def test_negative_giant_modulus_takes_baby_steps_below_zero() -> None:
    """``M < 0``: baby steps in ``(−|M|, 0]`` of the centered diagonal, so diagonals just below
    zero share the giant step 0."""
    S = 16
    # diagonals 15, 14 (i.e. −1, −2) and 3 into one output slot
    args = (1, 1, S, [0, 0, 0], [15, 14, 3], [0, 0, 0], [0, 0, 0], [1.0, 2.0, 3.0])
    t = build_transform(*args, -4)
    assert {(int(g), int(b)) for _, g, _, b in t.terms} == {(0, 15), (0, 14), (4, 15)}
    assert t.rotation_steps() == {15, 14, 4}
    assert build_transform(*args, -1).terms.tolist() == build_transform(*args, 1).terms.tolist()
    # diagonals −1 and −2 alone: no giant step with M = −4, one (12) with M = 4
    below = (1, 1, S, [0, 0], [15, 14], [0, 0], [0, 0], [1.0, 2.0])
    assert build_transform(*below, -4).counts()["rotate"] == 0
    assert build_transform(*below, 4).counts()["rotate"] == 1


def test_finish_folds_then_adds_the_bias() -> None:
    S = 8
    bias = np.full((1, S), 100.0)
    t = Transform(1, 1, S, np.zeros((0, 4), I64), np.zeros((0, S)), bias, (4, 2))
    y = np.arange(S, dtype=float)[None]
    # slot 0 after folds by 4 then 2: y0 + y4 + y2 + y6
    assert t.finish(y)[0, 0] == 0 + 4 + 2 + 6 + 100

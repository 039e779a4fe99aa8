"""Linear kernels of latency mode: each one a choice of layouts for :func:`build_transform`.

Layer: ``heinfer.compiler`` (pure numpy). A kernel takes a layer ``y = A x + c`` (sparse
``A``), the placement of ``x`` and the slot count, and returns the lowered
:class:`~heinfer.program.transform.Transform` and the placement of ``y``:

* :func:`diagonal` — Halevi–Shoup generalized diagonals between the two placements, with a
  giant-step modulus ``M`` (GAZELLE §5 "diagonal"; baby-step giant-step with double
  hoisting; for a convolution in channel-packed layout, ``M ≥ S`` is GAZELLE's *input
  rotations* and ``M`` = the channel block its *output rotations*, Table 4);
* :func:`hybrid` — GAZELLE's hybrid for squat matrices: products are accumulated into the
  partial-sum slots ``t ≡ r (mod m)`` right after each input, so only ``m`` diagonals are
  needed, then ``log2(T)`` rotate-and-add steps fold them into slot ``r``;
* :func:`naive` — GAZELLE's naive method: one product and a rotate-and-sum per row (every
  output in its own ciphertext; the baseline of ``bench/kernels.py``);
* :func:`expanded` — LoLa's convolution representation: the client sends the expanded input
  of :func:`~heinfer.compiler.latency.layout.expanded_input`, so the layer needs ``t − 1``
  rotations for ``t`` taps per ciphertext.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.latency.layout import Placement, expanded_input
from heinfer.program.transform import Transform, build_transform
from heinfer.errors import CompileError

__all__ = ["diagonal", "hybrid", "hybrid_geometry", "naive", "expanded", "bias_slots"]


def _coo(matrix: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = sp.csr_matrix(matrix)
    rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    return rows, m.indices.astype(np.int64), m.data.astype(np.float64)


def bias_slots(bias: np.ndarray | None, out: Placement) -> np.ndarray | None:
    """The bias vector laid out in the output placement (``None`` when it is all zero)."""
    if bias is None or not np.any(bias):
        return None
    v = np.zeros((out.n_cts, out.slots))
    v[out.ct, out.slot] = bias
    return v


def diagonal(
    matrix: sp.spmatrix, bias: np.ndarray | None, inp: Placement, giant_modulus: int, out: Placement | None = None
) -> tuple[Transform, Placement]:
    """Generalized diagonals from ``inp`` to ``out`` (default: the dense row-major placement
    of ``y``)."""
    rows, cols, w = _coo(matrix)
    out = Placement.dense(matrix.shape[0], inp.slots) if out is None else out
    t = build_transform(
        inp.n_cts, out.n_cts, inp.slots, inp.ct[cols], inp.slot[cols], out.ct[rows], out.slot[rows], w,
        giant_modulus, bias_slots(bias, out),
    )
    return t, out


def hybrid_geometry(matrix: sp.spmatrix, inp: Placement, copies: int = 1):
    """Where GAZELLE's hybrid method puts every product: ``(rows, in_ct, in_slot, target,
    fold steps, replication steps)``, or ``None`` when it does not apply.

    ``m`` = the power of two ``≥`` rows; entry ``(r, c)`` accumulates into the partial-sum slot
    ``p + ((r − p) mod m)`` right after the position ``p`` it reads (a diagonal in
    ``(−m, 0]``), and ``log2(T)`` rotate-and-add steps by ``m, 2m, …`` fold the ``T``
    partial-sum chunks into slot ``r``. With ``copies = c > 1`` (a clean input in one
    ciphertext) the input is first replicated to shifts ``j·s`` with ``s ≡ −m/c (mod m)``
    (``log2 c`` rotate-and-add steps); reading copy ``j`` moves the diagonal by ``j·m/c``, so
    choosing the copy per entry leaves only ``m/c`` diagonals (LoLa's stacked representation)."""
    S = inp.slots
    n_out = matrix.shape[0]
    m = 1 << max(0, math.ceil(math.log2(n_out)))
    rows, cols, w = _coo(matrix)
    pos = inp.slot[cols]
    replicate: tuple[int, ...] = ()
    if copies > 1:
        if inp.n_cts != 1 or copies > m or copies & (copies - 1):
            return None
        span = int(inp.slot.max(initial=0)) + 1
        step = m // copies
        shift = span + ((m - step) - span) % m
        if (copies - 1) * shift + span + m > S:
            return None
        # copy j reads at pos − j·step (mod m): the one with (r − pos + j·step) mod m < step
        j = (-(-(m - (rows - pos) % m) // step)) % copies
        pos = pos + j * shift
        replicate = tuple((-(shift << i)) % S for i in range(int(math.log2(copies))))
    target = pos + (rows - pos) % m
    top = int(target.max(initial=0)) + 1
    chunks = 1 << max(0, math.ceil(math.log2(-(-top // m))))
    if m >= S or chunks * m > S or chunks == 1:
        return None
    fold = tuple(m << i for i in range(int(math.log2(chunks))))
    return rows, inp.ct[cols], pos, target, w, fold, replicate


def hybrid(
    matrix: sp.spmatrix, bias: np.ndarray | None, inp: Placement, giant_modulus: int, copies: int = 1
) -> tuple[Transform, Placement] | None:
    """GAZELLE's hybrid method (see :func:`hybrid_geometry`; ``None`` when it does not apply):
    output ``r`` at slot ``r`` of one ciphertext."""
    geo = hybrid_geometry(matrix, inp, copies)
    if geo is None:
        return None
    rows, in_ct, in_slot, target, w, fold, replicate = geo
    S = inp.slots
    out = Placement(1, S, np.zeros(matrix.shape[0], np.int64), np.arange(matrix.shape[0], dtype=np.int64))
    t = build_transform(
        inp.n_cts, 1, S, in_ct, in_slot, np.zeros_like(rows), target, w, giant_modulus,
        bias_slots(bias, out), fold, replicate,
    )
    return t, out


def naive(matrix: sp.spmatrix, bias: np.ndarray | None, inp: Placement) -> tuple[Transform, Placement]:
    """One product per row and a rotate-and-sum over the input's span: output ``r`` at slot
    0 of ciphertext ``r`` (GAZELLE §5, the naive method; input in one ciphertext)."""
    if inp.n_cts != 1:
        raise CompileError("the naive method takes an input in one ciphertext")
    S = inp.slots
    rows, cols, w = _coo(matrix)
    span = 1 << max(0, math.ceil(math.log2(int(inp.slot.max(initial=0)) + 1)))
    n_out = matrix.shape[0]
    out = Placement(n_out, S, np.arange(n_out, dtype=np.int64), np.zeros(n_out, np.int64))
    fold = tuple(1 << i for i in range(int(math.log2(span))))
    t = build_transform(1, n_out, S, inp.ct[cols], inp.slot[cols], rows, inp.slot[cols], w, 1, bias_slots(bias, out), fold)
    return t, out


def expanded(
    matrix: sp.spmatrix, bias: np.ndarray | None, slots: int, giant_modulus: int, taps_per_ct: int | None = None,
    fold: bool = False,
) -> tuple[np.ndarray, Transform, Placement]:
    """The first layer on the client's expanded input: ``(gather map, transform, output placement)``.

    Tap ``j`` of row ``r`` sits in chunk ``j mod t`` at slot ``(j mod t)·R + r``. Either every
    chunk is rotated onto slot ``r`` (diagonals ``(j mod t)·R``, split by ``giant_modulus``:
    the output is clean, zero outside slots ``0..R−1``), or (``fold=True``, ``t`` a power of
    two) all ciphertexts are multiplied and summed in place and ``log2 t`` rotate-and-add
    steps by ``R, 2R, …`` fold the chunks (fewer rotations, but the other slots keep partial
    sums)."""
    gather, where, w = expanded_input(matrix, slots, taps_per_ct)
    rows = matrix.shape[0]
    out = Placement.dense(rows, slots)
    r, ct, slot = where.T
    if fold:
        t = -(-int(where[:, 2].max(initial=0) + 1) // rows)
        if t & (t - 1):
            raise CompileError(f"a folded expanded input needs a power-of-two number of taps per ciphertext, got {t}")
        steps = tuple(rows << i for i in range(int(math.log2(t))))
        trans = build_transform(len(gather), 1, slots, ct, slot, np.zeros_like(r), slot, w, 1, bias_slots(bias, out), steps)
        return gather, trans, out
    trans = build_transform(
        len(gather), 1, slots, ct, slot, np.zeros_like(r), r, w, giant_modulus, bias_slots(bias, out)
    )
    return gather, trans, out

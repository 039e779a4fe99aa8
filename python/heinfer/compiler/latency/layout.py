"""Layouts of latency mode: where each element of one item's tensor lives in ciphertext slots.

Layer: ``heinfer.compiler`` (pure numpy). In latency mode (LoLa §2, GAZELLE §5) one input is
packed across the ``S = N/2`` slots of a few ciphertexts. Two objects describe it:

* :class:`Placement` — element ``e`` of a tensor is read at slot ``slot[e]`` of ciphertext
  ``ct[e]``; other slots may hold anything (zeros, partial sums, squares of partial sums):
  kernels never read them because their plaintext diagonals are zero there.
* an **input gather map** ``(n_cts, S)`` of element indices (``-1``: zero) that the client
  fills before encrypting. One element may appear in many slots: this is how the client-side
  *convolution representation* of LoLa (§3, "convolution layer") and its generalization to any
  first linear layer (:func:`expanded_input`) are expressed.
"""

from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from heinfer.errors import CompileError
from heinfer.program.placement import Placement

__all__ = ["Placement", "dense_input", "expanded_input"]


def dense_input(n: int, slots: int) -> tuple[np.ndarray, Placement]:
    """The plain input layout: gather map and placement of :meth:`Placement.dense`."""
    p = Placement.dense(n, slots)
    gather = np.full((p.n_cts, slots), -1, dtype=np.int64)
    gather[p.ct, p.slot] = np.arange(n)
    return gather, p


def expanded_input(
    matrix: sp.csr_matrix, slots: int, taps_per_ct: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Client-side expansion of the input of a first linear layer ``y = A x`` (LoLa's
    convolution representation, generalized to any sparse ``A``).

    Row ``r`` of ``A`` has non-zeros at columns ``c_{r,0}, c_{r,1}, …`` (in CSR storage order,
    increasing for the canonical matrices :class:`~heinfer.compiler.ir.Linear` stores); the client sends
    ``x'_{j,r} = x[c_{r,j}]`` with tap ``j`` of row ``r`` at slot ``(j mod t)·R + r`` of
    ciphertext ``⌊j / t⌋`` (``R`` rows, ``t`` taps per ciphertext). Then
    ``y_r = Σ_j A_{r,c_{r,j}} x'_{j,r}``: every product lies on one of ``t`` diagonals
    ``(j mod t)·R`` — a convolution costs ``t − 1`` rotations instead of one per kernel tap.

    Returns ``(gather, where, weights)``: the gather map ``(n_cts, S)``, and for every
    non-zero of ``A`` its ``(row, in_ct, in_slot)`` (int64 ``(nnz, 3)``) and its weight.
    """
    m = sp.csr_matrix(matrix)
    rows, cols = m.shape
    if rows > slots:
        raise CompileError(f"expanded input: {rows} rows do not fit {slots} slots")
    taps = np.diff(m.indptr)
    j_max = int(taps.max()) if rows else 0
    t = min(taps_per_ct or slots // rows, slots // rows, max(j_max, 1))
    n_cts = -(-j_max // t)
    r = np.repeat(np.arange(rows, dtype=np.int64), taps)
    j = np.arange(m.nnz, dtype=np.int64) - np.repeat(m.indptr[:-1].astype(np.int64), taps)
    ct, slot = j // t, (j % t) * rows + r
    gather = np.full((n_cts, slots), -1, dtype=np.int64)
    gather[ct, slot] = m.indices
    return gather, np.stack([r, ct, slot], axis=1), m.data.astype(np.float64)

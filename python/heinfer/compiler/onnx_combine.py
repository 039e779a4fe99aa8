"""ONNX nodes that combine several computed tensors → one :class:`~.dag.Combine`.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy). Used by :mod:`.onnx_import` for
``Add``/``Sub`` of two computed tensors (a residual connection, a difference of branches:
``y = x_1 ± x_2`` with numpy broadcasting between per-item shapes of equal rank), ``Sum``
of any number of computed tensors, and ``Concat`` of computed tensors along a non-batch axis (``y`` is a selection of each input).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.dag import Combine
from heinfer.compiler.onnx_node import NodeInfo

__all__ = ["combine_op"]

Shape = tuple[int, ...]


def _block(rows: np.ndarray, cols: np.ndarray, data: float, n_out: int, n_in: int) -> sp.csr_matrix:
    values = np.full(rows.size, data, dtype=np.float64)
    return sp.csr_matrix((values, (rows, cols)), shape=(n_out, n_in))


def _add_sub(n: NodeInfo, shapes: list[Shape]) -> tuple[Combine, Shape]:
    """Add/Sub of two tensors, Sum of any number: ``y = x_1 ± x_2 (+ …)``, broadcast."""
    if len({len(s) for s in shapes}) != 1:
        raise n.unsupported(f"its inputs have per-item shapes {shapes} of different ranks")
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise n.error(f"per-item shapes {shapes} do not broadcast") from None
    rows = np.arange(math.prod(out))
    blocks = []
    signs = [1.0] + [-1.0 if n.op_type == "Sub" else 1.0] * (len(shapes) - 1)
    for shape, sign in zip(shapes, signs):
        cols = np.broadcast_to(np.arange(math.prod(shape)).reshape(shape), out).ravel()
        blocks.append(_block(rows, cols, sign, rows.size, math.prod(shape)))
    return Combine(n.name, tuple(blocks), np.zeros(rows.size), tuple(shapes), out), out


def _concat(n: NodeInfo, shapes: list[Shape]) -> tuple[Combine, Shape]:
    axis = n.attr("axis")
    if axis is None:
        raise n.error("the axis attribute is missing")
    if len({len(s) for s in shapes}) != 1:
        raise n.error(f"inputs of per-item shapes {shapes} have different ranks")
    ax = n.item_axis(int(axis))
    if any(s[:ax] + s[ax + 1 :] != shapes[0][:ax] + shapes[0][ax + 1 :] for s in shapes):
        raise n.error(f"per-item shapes {shapes} differ outside axis {axis}")
    which = np.concatenate([np.full(s, k) for k, s in enumerate(shapes)], axis=ax).ravel()
    where = np.concatenate([np.arange(math.prod(s)).reshape(s) for s in shapes], axis=ax).ravel()
    out = tuple(int(d) for d in (*shapes[0][:ax], sum(s[ax] for s in shapes), *shapes[0][ax + 1 :]))
    blocks = []
    for k, s in enumerate(shapes):
        rows = np.nonzero(which == k)[0]
        blocks.append(_block(rows, where[rows], 1.0, which.size, math.prod(s)))
    return Combine(n.name, tuple(blocks), np.zeros(which.size), tuple(shapes), out), out


def combine_op(n: NodeInfo, shapes: list[Shape]) -> tuple[Combine, Shape]:
    """The :class:`Combine` of an Add, Sub, Sum or Concat node whose inputs (of per-item
    ``shapes``, in the node's order) are all computed, and its per-item output shape."""
    if n.op_type == "Concat":
        return _concat(n, shapes)
    return _add_sub(n, shapes)

"""The node an ONNX converter reads, and the helpers every converter shares.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy). :class:`NodeInfo` is what
:mod:`.onnx_import` hands a converter (:mod:`.onnx_ops`, :mod:`.onnx_windows`): the node, the
per-item shape of the activation it reads and the constants; :func:`linear_op` builds a
``Linear`` from COO triples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import scipy.sparse as sp

from heinfer.compiler.ir import Linear, Op
from heinfer.errors import CompileError, UnsupportedOperatorError

__all__ = ["BATCH_PROBES", "Converted", "NodeInfo", "Shape", "int_list", "linear_op"]

Shape = tuple[int, ...]
Converted = tuple[list[Op], Shape]

#: Two batch sizes standing in for the dynamic batch dimension when a shape computation
#: (``Shape`` → ``Gather`` → ``Concat`` → ``Reshape``) depends on it; see ``_reshape``.
BATCH_PROBES = (1009, 1013)


@dataclass
class NodeInfo:
    """One ONNX node on the chain, with what a converter needs to translate it.

    ``x`` is the name of the activation the node reads and ``x_shape`` its per-item shape;
    ``consts`` maps constant tensor names to values; ``batch_pairs`` maps names of shape tensors
    that depend on the batch size to their values under the two :data:`BATCH_PROBES`;
    ``static_batch`` is the model input's batch dimension when the file fixes it.
    """

    proto: onnx.NodeProto
    name: str
    opset: int
    x: str
    x_shape: Shape
    consts: Mapping[str, np.ndarray]
    batch_pairs: Mapping[str, tuple[np.ndarray, np.ndarray]]
    static_batch: int | None = None

    @property
    def op_type(self) -> str:
        """The ONNX operator type."""
        return self.proto.op_type

    def attr(self, key: str, default: Any = None) -> Any:
        """The value of attribute ``key`` (strings decoded), or ``default`` when absent."""
        for a in self.proto.attribute:
            if a.name == key:
                value = onnx.helper.get_attribute_value(a)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def input(self, i: int) -> str | None:
        """Name of input ``i``, or None when it is absent or empty (an omitted optional)."""
        names = self.proto.input
        return names[i] if i < len(names) and names[i] else None

    def const(self, i: int, what: str) -> np.ndarray:
        """The constant value of input ``i`` (``what`` names it in errors)."""
        value = self.optional_const(i, what)
        if value is None:
            raise self.error(f"its {what} input is missing")
        return value

    def optional_const(self, i: int, what: str) -> np.ndarray | None:
        """The constant value of input ``i``, or None when that optional input is omitted."""
        name = self.input(i)
        if name is None:
            return None
        if name not in self.consts:
            raise self.unsupported(
                f"its {what} input {name!r} must be a constant (an initializer or a Constant "
                "node), not computed from the network input"
            )
        return self.consts[name]

    def unsupported(self, why: str) -> UnsupportedOperatorError:
        """An :class:`UnsupportedOperatorError` for this node, saying why."""
        return UnsupportedOperatorError(
            f"ONNX operator {self.op_type!r} (node {self.name!r}) is not supported by heinfer: "
            f"{why}",
            op_type=self.op_type,
            node_name=self.name,
        )

    def error(self, why: str) -> CompileError:
        """A :class:`CompileError` for a malformed node, saying why."""
        return CompileError(f"onnx import: cannot compile {self.op_type} node {self.name!r}: {why}")

    def item_axis(self, axis: int) -> int:
        """IR axis of ONNX ``axis`` (negative counts from the end); refuses the batch axis."""
        rank = len(self.x_shape) + 1
        if not -rank <= axis < rank:
            raise self.error(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        if axis == 0:
            raise self.unsupported("it acts along the batch axis (axis 0)")
        return axis - 1

    def dynamic_first(self) -> None:
        """Refuse the node unless its first input is the activation."""
        if self.input(0) != self.x:
            raise self.unsupported("its first input must be the activation, not a constant")


def linear_op(n: NodeInfo, rows, cols, data, bias, out_shape: Shape) -> Linear:
    """A Linear op from COO triples (duplicates are summed) and a bias."""
    n_out, n_in = math.prod(out_shape), math.prod(n.x_shape)
    data = np.broadcast_to(np.asarray(data, dtype=np.float64), np.shape(rows))
    matrix = sp.csr_matrix((data.ravel(), (np.ravel(rows), np.ravel(cols))), shape=(n_out, n_in))
    matrix.eliminate_zeros()
    bias = np.zeros(n_out) if bias is None else np.broadcast_to(bias, (n_out,))
    return Linear(n.name, matrix, bias, n.x_shape, out_shape)


def int_list(value: object, length: int, default: int, what: str, n: NodeInfo) -> np.ndarray:
    out = np.full(length, default, dtype=np.int64) if value is None else np.array(value, np.int64)
    if out.shape != (length,):
        raise n.error(f"{what} has {out.size} entries, expected {length}")
    return out

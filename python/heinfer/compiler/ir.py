"""The compiler's intermediate representation: a chain of per-item ops, and its numpy executor.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy; never imports the native module).

Every tensor is one batch item (no batch axis), flattened row-major (C, H, W order, as
``numpy.reshape`` does). A :class:`Graph` is a chain: the output of op *i* is the input of op
*i + 1*. Three kinds of op cover every supported network:

* :class:`Linear` — :math:`y = A x + b` with a sparse :math:`A` (convolutions, dense layers,
  pooling by averaging, batch normalization, padding, constant add/mul, …);
* :class:`Square` — :math:`y = x \\odot x`, the polynomial activation of CryptoNets/LoLa;
* :class:`ClientFunction` — a non-polynomial step (ReLU, max-pooling, softmax, …) that the
  client evaluates on decrypted values (nGraph-HE2 §4.1) or a 2PC protocol evaluates (GAZELLE §4).

Graph-shaped networks (branches, residual additions, concatenations) are a
:class:`~heinfer.compiler.dag.Dag`, which :func:`~heinfer.compiler.dag.to_chain` lowers to a
:class:`Graph` by stacking the tensors still live.

Reshapes cost nothing on flattened tensors, so they are not ops: consecutive ops must agree on
the *size* of the tensor they share, while their shapes may differ (``Linear.out_shape`` of a
convolution is ``(C, H, W)``, the next dense layer's ``in_shape`` is ``(C·H·W,)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from heinfer.errors import CompileError
from heinfer.program.functions import ClientFunction, ClientKind, _shape, _size

__all__ = ["ClientFunction", "ClientKind", "Graph", "Linear", "Op", "Square"]


@dataclass(frozen=True, eq=False)
class Linear:
    """y = matrix @ x + bias on flattened per-item tensors.

    ``matrix`` is stored as a float64 ``scipy.sparse.csr_matrix`` of shape
    ``(out_size, in_size)`` with sorted indices, no duplicate entries and no stored zeros (any
    sparse or dense input is converted); ``bias`` as a float64 vector of length ``out_size``. ``name`` lists the
    ONNX nodes the op comes from, joined with ``'+'``. ``in_parts``/``out_parts``: when the
    flat vector is several tensors one after the other (a graph's live tensors, see
    :func:`~.dag.to_chain`), their shapes in order; empty for one tensor of ``in_shape``/
    ``out_shape`` (layout hints for latency mode's placements, never needed for the math).
    Raises :class:`CompileError` when the sizes disagree or a value is not finite.
    """

    name: str
    matrix: sp.csr_matrix
    bias: np.ndarray
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    in_parts: tuple[tuple[int, ...], ...] = ()
    out_parts: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        in_shape = _shape(self.in_shape, f"Linear {self.name!r}: in_shape")
        out_shape = _shape(self.out_shape, f"Linear {self.name!r}: out_shape")
        matrix = sp.csr_matrix(self.matrix, dtype=np.float64)
        if not matrix.has_canonical_format or not matrix.data.all():
            matrix = matrix.copy()  # never touch the caller's arrays
            matrix.sum_duplicates()  # also sorts the indices
            matrix.eliminate_zeros()
        bias = np.asarray(self.bias, dtype=np.float64)
        want = (_size(out_shape), _size(in_shape))
        if matrix.shape != want:
            raise CompileError(
                f"Linear {self.name!r}: matrix has shape {matrix.shape}, expected {want} "
                f"for in_shape {in_shape} and out_shape {out_shape}"
            )
        if bias.shape != (want[0],):
            raise CompileError(
                f"Linear {self.name!r}: bias has shape {bias.shape}, expected ({want[0]},)"
            )
        if not (np.isfinite(matrix.data).all() and np.isfinite(bias).all()):
            raise CompileError(f"Linear {self.name!r}: matrix or bias holds a non-finite value")
        for what, parts, size in (("in_parts", self.in_parts, want[1]), ("out_parts", self.out_parts, want[0])):
            shapes = tuple(_shape(p, f"Linear {self.name!r}: {what}") for p in parts)
            if shapes and sum(_size(p) for p in shapes) != size:
                raise CompileError(f"Linear {self.name!r}: {what} {shapes} do not add up to {size} elements")
            object.__setattr__(self, what, shapes)
        object.__setattr__(self, "in_shape", in_shape)
        object.__setattr__(self, "out_shape", out_shape)
        object.__setattr__(self, "matrix", matrix)
        object.__setattr__(self, "bias", bias)

    @property
    def nnz(self) -> int:
        """Number of stored (non-zero) entries of the matrix."""
        return int(self.matrix.nnz)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """x: (batch, in_size) → (batch, out_size), in float64."""
        return np.asarray(self.matrix @ np.asarray(x, dtype=np.float64).T).T + self.bias


@dataclass(frozen=True)
class Square:
    """y = x * x element-wise (same shape in and out)."""

    name: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _shape(self.shape, f"Square {self.name!r}: shape"))

    @property
    def in_shape(self) -> tuple[int, ...]:
        """The input shape (equal to ``shape``)."""
        return self.shape

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The output shape (equal to ``shape``)."""
        return self.shape

    def apply(self, x: np.ndarray) -> np.ndarray:
        """x: (batch, size) → x * x."""
        x = np.asarray(x, dtype=np.float64)
        return x * x


Op = Linear | Square | ClientFunction


def _describe(op: Op) -> str:
    if isinstance(op, Linear):
        extra = f" nnz={op.nnz}"
    elif isinstance(op, ClientFunction):
        extra = f" {op.kind}" + (f" {op.attrs}" if op.attrs else "")
    else:
        extra = ""
    kind = type(op).__name__
    return f"{kind:<14} {op.name:<32} {op.in_shape} -> {op.out_shape}{extra}"


@dataclass
class Graph:
    """A compiled network: a chain of ops from one input tensor to one output tensor.

    ``input_shape`` and ``output_shape`` are per item (no batch axis). The constructor, and
    :meth:`validate`, raise :class:`CompileError` unless every op is a :class:`Linear`,
    :class:`Square` or :class:`ClientFunction` and sizes chain from input to output.
    """

    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    ops: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.input_shape = _shape(self.input_shape, "Graph input_shape")
        self.output_shape = _shape(self.output_shape, "Graph output_shape")
        self.ops = list(self.ops)
        self.validate()

    def io(self) -> dict:
        """The input's and output's names and per-item shapes, as a program records them
        (the keyword arguments of every program class)."""
        return {
            "input_name": self.input_name, "input_shape": tuple(self.input_shape),
            "output_name": self.output_name, "output_shape": tuple(self.output_shape),
        }

    def validate(self) -> None:
        """Check that the ops chain: each op's input size is the previous op's output size."""
        size, where = _size(self.input_shape), f"input {self.input_name!r}"
        for op in self.ops:
            if not isinstance(op, (Linear, Square, ClientFunction)):
                raise CompileError(f"Graph: {op!r} is not a Linear, Square or ClientFunction")
            if _size(op.in_shape) != size:
                raise CompileError(
                    f"Graph: {type(op).__name__} {op.name!r} takes {op.in_shape} "
                    f"({_size(op.in_shape)} values) but {where} gives {size} values"
                )
            size, where = _size(op.out_shape), f"{type(op).__name__} {op.name!r}"
        if _size(self.output_shape) != size:
            raise CompileError(
                f"Graph: output {self.output_name!r} has shape {self.output_shape} "
                f"({_size(self.output_shape)} values) but {where} gives {size} values"
            )

    def run(self, x: np.ndarray) -> np.ndarray:
        """Reference float64 execution: x (batch, *input_shape) → (batch, *output_shape)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[1:] != self.input_shape:
            raise CompileError(
                f"Graph.run: input has shape {x.shape}, expected (batch, *{self.input_shape})"
            )
        y = x.reshape(x.shape[0], -1)
        for op in self.ops:
            y = op.apply(y)
        return y.reshape((x.shape[0], *self.output_shape))

    def summary(self) -> str:
        """One line per op (kind, name, shapes, and nnz for Linear), framed by input/output."""
        lines = [f"input  {self.input_name!r} {self.input_shape}"]
        lines += [_describe(op) for op in self.ops]
        lines.append(f"output {self.output_name!r} {self.output_shape}")
        return "\n".join(lines)

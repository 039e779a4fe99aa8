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

Reshapes cost nothing on flattened tensors, so they are not ops: consecutive ops must agree on
the *size* of the tensor they share, while their shapes may differ (``Linear.out_shape`` of a
convolution is ``(C, H, W)``, the next dense layer's ``in_shape`` is ``(C·H·W,)``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from heinfer.errors import CompileError

__all__ = ["ClientFunction", "ClientKind", "Graph", "Linear", "Op", "Square"]


class ClientKind(str, enum.Enum):
    """The non-polynomial functions a :class:`ClientFunction` can apply.

    Members compare equal to their string values (``ClientKind.RELU == 'relu'``), and
    ``ClientFunction.kind`` holds the plain string.
    """

    RELU = "relu"
    LEAKY_RELU = "leaky_relu"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    CLIP = "clip"
    SOFTMAX = "softmax"
    MAXPOOL = "maxpool"


_ELEMENTWISE = frozenset({"relu", "leaky_relu", "sigmoid", "tanh", "clip"})


def _shape(value: object, what: str) -> tuple[int, ...]:
    """``value`` as a tuple of positive ints, or a :class:`CompileError` naming ``what``."""
    try:
        shape = tuple(int(d) for d in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise CompileError(f"{what} must be a tuple of ints, got {value!r}") from None
    if any(d <= 0 for d in shape):
        raise CompileError(f"{what} must have positive dimensions, got {shape}")
    return shape


def _size(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


@dataclass(frozen=True, eq=False)
class Linear:
    """y = matrix @ x + bias on flattened per-item tensors.

    ``matrix`` is stored as a float64 ``scipy.sparse.csr_matrix`` of shape
    ``(out_size, in_size)`` with sorted indices, no duplicate entries and no stored zeros (any
    sparse or dense input is converted); ``bias`` as a float64 vector of length ``out_size``. ``name`` lists the
    ONNX nodes the op comes from, joined with ``'+'``. Raises :class:`CompileError` when the
    sizes disagree or a value is not finite.
    """

    name: str
    matrix: sp.csr_matrix
    bias: np.ndarray
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]

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


@dataclass(frozen=True, eq=False)
class ClientFunction:
    """A non-polynomial step the client applies on decrypted values.

    ``kind`` is one of :class:`ClientKind`'s values. ``attrs``: ``{'alpha': float}`` for
    ``leaky_relu``; ``{'min': float | None, 'max': float | None}`` for ``clip``; empty otherwise.

    ``groups`` is ``None`` for the element-wise kinds (relu, leaky_relu, sigmoid, tanh, clip).
    For ``maxpool`` it is an int64 array ``(out_size, window)``: ``out[j]`` is the max over *k*
    of ``x[groups[j, k]]``, and entries ``-1`` are padding (ignored). For ``softmax`` it is an
    int64 array ``(n_groups, group_size)`` that partitions the flattened input, and
    ``out[groups[j]] = softmax(x[groups[j]])`` (output shape equals input shape).
    Raises :class:`CompileError` when kind, attrs, groups and shapes do not fit together.
    """

    name: str
    kind: str
    attrs: dict
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        where = f"ClientFunction {self.name!r}"
        try:
            kind = ClientKind(self.kind).value
        except ValueError:
            kinds = ", ".join(k.value for k in ClientKind)
            raise CompileError(f"{where}: unknown kind {self.kind!r} (one of {kinds})") from None
        in_shape = _shape(self.in_shape, f"{where}: in_shape")
        out_shape = _shape(self.out_shape, f"{where}: out_shape")
        attrs = dict(self.attrs or {})
        if kind == "leaky_relu":
            attrs = {"alpha": float(attrs.get("alpha", 0.01))}
        elif kind == "clip":
            attrs = {k: None if attrs.get(k) is None else float(attrs[k]) for k in ("min", "max")}
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "in_shape", in_shape)
        object.__setattr__(self, "out_shape", out_shape)
        n_in, n_out = _size(in_shape), _size(out_shape)
        if (kind in _ELEMENTWISE or kind == "softmax") and n_in != n_out:
            raise CompileError(
                f"{where}: {kind} needs in and out sizes equal, {in_shape} vs {out_shape}"
            )
        if kind in _ELEMENTWISE:
            if self.groups is not None:
                raise CompileError(f"{where}: element-wise {kind} takes no groups")
            return
        if self.groups is None:
            raise CompileError(f"{where}: {kind} needs groups")
        groups = np.array(self.groups, dtype=np.int64)
        if groups.ndim != 2 or groups.shape[1] == 0:
            raise CompileError(
                f"{where}: groups must be a non-empty 2-D array, got shape {groups.shape}"
            )
        if kind == "maxpool":
            if groups.shape[0] != n_out:
                raise CompileError(
                    f"{where}: maxpool groups have {groups.shape[0]} rows, "
                    f"expected out_size {n_out}"
                )
            if groups.min() < -1 or groups.max() >= n_in or (groups < 0).all(axis=1).any():
                raise CompileError(
                    f"{where}: maxpool groups must index [0, {n_in}) with -1 "
                    "as padding, and no window may be all padding"
                )
        elif not np.array_equal(np.sort(groups, axis=None), np.arange(n_in)):
            raise CompileError(f"{where}: softmax groups must partition range({n_in})")
        groups.setflags(write=False)
        object.__setattr__(self, "groups", groups)

    @property
    def positively_homogeneous(self) -> bool:
        """True when f(r·x) = r·f(x) for every r > 0 (per group): relu, leaky_relu, maxpool."""
        return self.kind in ("relu", "leaky_relu", "maxpool")

    def apply(self, x: np.ndarray) -> np.ndarray:
        """x: (batch, in_size) float array (float64 is kept) → (batch, out_size)."""
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.floating):
            x = x.astype(np.float64)
        kind = self.kind
        if kind == "relu":
            return np.maximum(x, 0)
        if kind == "leaky_relu":
            return np.where(x >= 0, x, x * self.attrs["alpha"])
        if kind == "sigmoid":
            # exp of a non-positive argument only: no overflow warning for large |x|
            e = np.exp(-np.abs(x))
            return np.where(x >= 0, 1 / (1 + e), e / (1 + e))
        if kind == "tanh":
            return np.tanh(x)
        if kind == "clip":
            lo, hi = self.attrs["min"], self.attrs["max"]
            out = x if lo is None else np.maximum(x, lo)
            return out if hi is None else np.minimum(out, hi)
        assert self.groups is not None
        if kind == "maxpool":
            pad = self.groups < 0
            vals = x[:, np.where(pad, 0, self.groups)]
            vals[:, pad] = -np.inf
            return vals.max(axis=-1)
        vals = x[:, self.groups]  # softmax: (batch, n_groups, group_size)
        e = np.exp(vals - vals.max(axis=-1, keepdims=True))
        out = np.empty_like(x)
        out[:, self.groups] = e / e.sum(axis=-1, keepdims=True)
        return out


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

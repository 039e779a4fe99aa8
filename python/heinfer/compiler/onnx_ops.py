"""ONNX operators → IR ops: one converter per supported ONNX operator type.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy). Used by :mod:`.onnx_import`, which
walks the graph, folds constants and hands each node on the chain to the converter of its
``op_type`` in :data:`CONVERTERS`. A converter gets a :class:`NodeInfo` (the node, the per-item
shape of the activation it reads, the constants) and returns the IR ops it becomes plus the
per-item output shape; reshapes return no op.

ONNX shapes carry the batch axis first; IR shapes do not. An ONNX axis *a* > 0 is IR axis
*a − 1*; an operator acting along the batch axis cannot be compiled per item and is refused.
Matrices are built from index arrays in one vectorized step (never a Python loop per entry).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction, Linear, Op, Square
from heinfer.errors import CompileError, UnsupportedOperatorError

__all__ = ["BATCH_PROBES", "CONVERTERS", "NodeInfo"]

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


def _linear(n: NodeInfo, rows, cols, data, bias, out_shape: Shape) -> Linear:
    """A Linear op from COO triples (duplicates are summed) and a bias."""
    n_out, n_in = math.prod(out_shape), math.prod(n.x_shape)
    data = np.broadcast_to(np.asarray(data, dtype=np.float64), np.shape(rows))
    matrix = sp.csr_matrix((data.ravel(), (np.ravel(rows), np.ravel(cols))), shape=(n_out, n_in))
    matrix.eliminate_zeros()
    bias = np.zeros(n_out) if bias is None else np.broadcast_to(bias, (n_out,))
    return Linear(n.name, matrix, bias, n.x_shape, out_shape)


def _ints(value: object, length: int, default: int, what: str, n: NodeInfo) -> np.ndarray:
    out = np.full(length, default, dtype=np.int64) if value is None else np.array(value, np.int64)
    if out.shape != (length,):
        raise n.error(f"{what} has {out.size} entries, expected {length}")
    return out


def _window_geometry(
    n: NodeInfo, spatial: Shape, kernel: Shape
) -> tuple[np.ndarray, np.ndarray, Shape]:
    """Strides, begin pads and output spatial shape of a sliding window (Conv and pools)."""
    k = len(spatial)
    if any(d != 1 for d in _ints(n.attr("dilations"), k, 1, "dilations", n)):
        raise n.unsupported(f"dilations {n.attr('dilations')} (only 1 is supported)")
    if n.attr("ceil_mode", 0):
        raise n.unsupported("ceil_mode=1 (only 0 is supported)")
    strides = _ints(n.attr("strides"), k, 1, "strides", n)
    kern, size = np.array(kernel, np.int64), np.array(spatial, np.int64)
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-size // strides)
        total = np.maximum((out - 1) * strides + kern - size, 0)
        small = total // 2
        begin = small if auto_pad == "SAME_UPPER" else total - small
        end = total - begin
    elif auto_pad in ("NOTSET", "VALID"):
        pads = _ints(n.attr("pads") if auto_pad == "NOTSET" else None, 2 * k, 0, "pads", n)
        begin, end = pads[:k], pads[k:]
    else:
        raise n.error(f"unknown auto_pad {auto_pad!r}")
    if (strides <= 0).any() or (begin < 0).any() or (end < 0).any():
        raise n.error("strides must be positive and pads non-negative")
    out = (size + begin + end - kern) // strides + 1
    if (out <= 0).any():
        raise n.error(f"the window {tuple(kernel)} does not fit in the input {spatial}")
    return strides, begin, tuple(int(d) for d in out)


def _window_indices(spatial: Shape, kernel: Shape, strides, begin, out: Shape) -> np.ndarray:
    """(out_positions, window) flat input indices of every window; -1 where it is padding."""
    k = len(spatial)
    o = np.indices(out).reshape(k, -1).T
    w = np.indices(kernel).reshape(k, -1).T
    pos = o[:, None, :] * strides - begin + w[None, :, :]
    valid = ((pos >= 0) & (pos < np.array(spatial))).all(axis=-1)
    flat = np.ravel_multi_index(tuple(np.moveaxis(pos, -1, 0)), spatial, mode="clip")
    return np.where(valid, flat, -1)


def _windows(n: NodeInfo, kernel: Shape) -> tuple[np.ndarray, Shape]:
    """Window indices and the per-item output shape for a node on a (C, *spatial) input."""
    if len(n.x_shape) != len(kernel) + 1:
        raise n.error(f"kernel {kernel} does not fit the input shape {n.x_shape} (C, *spatial)")
    spatial = n.x_shape[1:]
    strides, begin, out = _window_geometry(n, spatial, kernel)
    return _window_indices(spatial, kernel, strides, begin, out), (n.x_shape[0], *out)


def _conv(n: NodeInfo) -> Converted:
    """A convolution as one sparse linear layer. With ``group = g``, output channel ``o``
    reads only the input channels of its group, ``[⌊o·g/M⌋·C/g, (⌊o·g/M⌋ + 1)·C/g)`` (the
    weight holds ``C/g`` input channels per output channel); ``g = C`` is a depthwise
    convolution (MobileNet)."""
    n.dynamic_first()
    w = n.const(1, "weight").astype(np.float64)
    b = n.optional_const(2, "bias")
    g = n.attr("group", 1)
    channels = n.x_shape[0] if n.x_shape else 0
    if not isinstance(g, int) or g < 1 or channels % g or (w.ndim and w.shape[0] % g):
        raise n.error(f"group={g} does not divide the {channels} input channels and the {w.shape[0] if w.ndim else 0} output channels")
    if w.ndim != len(n.x_shape) + 1 or w.ndim < 3 or w.shape[1] * g != channels:
        raise n.error(f"weight shape {w.shape} does not fit the input shape {n.x_shape} with group={g}")
    kernel = tuple(w.shape[2:])
    if n.attr("kernel_shape") and tuple(n.attr("kernel_shape")) != kernel:
        raise n.error(f"kernel_shape {n.attr('kernel_shape')} differs from the weight {kernel}")
    idx, out_shape = _windows(n, kernel)
    m, c = w.shape[:2]  # c: input channels per group
    n_pos, spatial_in = idx.shape[0], math.prod(n.x_shape[1:])
    o_i, k_i = np.nonzero(idx >= 0)  # the (output position, kernel offset) pairs that hit input
    rows = np.arange(m)[:, None, None] * n_pos + o_i
    first = (np.arange(m) // (m // g)) * c  # the first input channel of each output's group
    cols = (first[:, None, None] + np.arange(c)[None, :, None]) * spatial_in + idx[o_i, k_i]
    data = w.reshape(m, c, -1)[:, :, k_i]
    rows, cols = np.broadcast_arrays(rows, cols, data)[:2]
    bias = None if b is None else np.repeat(b.astype(np.float64), n_pos)
    out_shape = (m, *out_shape[1:])
    return [_linear(n, rows, cols, data, bias, out_shape)], out_shape


def _pool_common(n: NodeInfo) -> tuple[np.ndarray, Shape]:
    """Window indices and output shape of AveragePool / MaxPool."""
    n.dynamic_first()
    if n.attr("storage_order", 0):
        raise n.unsupported("storage_order=1 (only 0 is supported)")
    if not n.attr("kernel_shape"):
        raise n.error("kernel_shape is missing")
    return _windows(n, tuple(int(d) for d in n.attr("kernel_shape")))


def _average_pool(n: NodeInfo) -> Converted:
    idx, out_shape = _pool_common(n)
    valid = idx >= 0
    weight = 1 / (
        np.full(idx.shape[0], idx.shape[1]) if n.attr("count_include_pad", 0) else valid.sum(axis=1)
    )
    o_i, k_i = np.nonzero(valid)
    channels, n_pos, spatial_in = n.x_shape[0], idx.shape[0], math.prod(n.x_shape[1:])
    rows = np.arange(channels)[:, None] * n_pos + o_i
    cols = np.arange(channels)[:, None] * spatial_in + idx[o_i, k_i]
    return [
        _linear(n, rows, cols, np.broadcast_to(weight[o_i], rows.shape), None, out_shape)
    ], out_shape


def _global_average_pool(n: NodeInfo, keepdims: bool = True) -> Converted:
    n.dynamic_first()
    if len(n.x_shape) < 2:
        raise n.error(f"input shape {n.x_shape} has no spatial axes")
    channels, spatial = n.x_shape[0], math.prod(n.x_shape[1:])
    out_shape = (channels,) + (1,) * (len(n.x_shape) - 1) if keepdims else (channels,)
    rows = np.repeat(np.arange(channels), spatial)
    return [
        _linear(n, rows, np.arange(channels * spatial), 1 / spatial, None, out_shape)
    ], out_shape


def _reduce_mean(n: NodeInfo) -> Converted:
    """``ReduceMean`` over every spatial axis (what torch's ``torch.export``-based exporter
    writes for ``adaptive_avg_pool2d(x, 1)`` and ``x.mean((2, 3))``): a global average pool,
    keeping the reduced axes as 1s or not (``keepdims``). Axes come from the attribute
    (opset < 18) or the constant second input (opset ≥ 18)."""
    n.dynamic_first()
    axes = n.attr("axes")
    if axes is None:
        given = n.optional_const(1, "axes")
        axes = [] if given is None else [int(a) for a in np.asarray(given).ravel()]
    rank = len(n.x_shape) + 1  # with the batch axis
    spatial = set(range(2, rank))
    if not spatial or {a % rank for a in axes} != spatial:
        raise n.unsupported(
            f"ReduceMean over axes {list(axes)} of a rank-{rank} tensor (only every axis after the "
            "channels, a global average pool, is supported)"
        )
    return _global_average_pool(n, bool(n.attr("keepdims", 1)))


def _max_pool(n: NodeInfo) -> Converted:
    idx, out_shape = _pool_common(n)
    spatial_in = math.prod(n.x_shape[1:])
    offsets = np.arange(n.x_shape[0])[:, None, None] * spatial_in
    groups = np.where(idx >= 0, idx + offsets, -1).reshape(-1, idx.shape[1])
    op = ClientFunction(n.name, "maxpool", {}, n.x_shape, out_shape, groups)
    return [op], out_shape


def _gemm(n: NodeInfo) -> Converted:
    n.dynamic_first()
    if n.attr("transA", 0):
        raise n.unsupported("transA=1 (only transA=0 is supported)")
    if len(n.x_shape) != 1:
        raise n.error(f"Gemm needs a 2-D input (batch, features), got per-item {n.x_shape}")
    b = n.const(1, "B").astype(np.float64)
    b = b.T if n.attr("transB", 0) else b
    if b.ndim != 2 or b.shape[0] != n.x_shape[0]:
        raise n.error(f"B of shape {b.shape} (after transB) does not fit {n.x_shape[0]} inputs")
    out_shape = (b.shape[1],)
    c = n.optional_const(2, "C")
    bias = np.zeros(out_shape)
    if c is not None:
        try:
            bias = float(n.attr("beta", 1.0)) * np.broadcast_to(c, (1, b.shape[1]))[0]
        except ValueError:
            raise n.unsupported(f"C of shape {c.shape} varies over the batch axis") from None
    matrix = sp.csr_matrix(float(n.attr("alpha", 1.0)) * b.T)
    return [Linear(n.name, matrix, bias, n.x_shape, out_shape)], out_shape


def _matmul(n: NodeInfo) -> Converted:
    if n.input(0) != n.x:
        raise n.unsupported("only x @ W with a constant right operand W is supported")
    w = n.const(1, "right operand").astype(np.float64)
    if not n.x_shape:
        raise n.error("the input has no feature axis")
    vector = w.ndim == 1
    w = w[:, None] if vector else w
    if w.ndim != 2 or w.shape[0] != n.x_shape[-1]:
        raise n.error(f"right operand of shape {w.shape} does not fit the input {n.x_shape}")
    lead = n.x_shape[:-1]
    out_shape = lead if vector else (*lead, w.shape[1])
    matrix = sp.kron(sp.identity(math.prod(lead)), sp.csr_matrix(w.T), format="csr")
    return [Linear(n.name, matrix, np.zeros(matrix.shape[0]), n.x_shape, out_shape)], out_shape


def _batch_norm(n: NodeInfo) -> Converted:
    n.dynamic_first()
    if n.attr("training_mode", 0):
        raise n.unsupported("training_mode=1 (only the inference form is supported)")
    scale, shift, mean, var = (
        n.const(i, w).astype(np.float64)
        for i, w in enumerate(("scale", "B", "input_mean", "input_var"), start=1)
    )
    channels = n.x_shape[0] if n.x_shape else 0
    if any(a.shape != (channels,) for a in (scale, shift, mean, var)):
        raise n.error(f"parameters must have shape ({channels},) for input {n.x_shape}")
    s = scale / np.sqrt(var + float(n.attr("epsilon", 1e-5)))
    per_channel = math.prod(n.x_shape[1:])
    matrix = sp.diags(np.repeat(s, per_channel), format="csr")
    bias = np.repeat(shift - s * mean, per_channel)
    return [Linear(n.name, matrix, bias, n.x_shape, n.x_shape)], n.x_shape


def _pad(n: NodeInfo) -> Converted:
    n.dynamic_first()
    if n.attr("mode", "constant") != "constant":
        raise n.unsupported(f"mode {n.attr('mode')!r} (only 'constant' is supported)")
    rank = len(n.x_shape) + 1
    pads = n.attr("pads")
    pads = np.array(n.const(1, "pads") if pads is None else pads, dtype=np.int64).ravel()
    given = n.optional_const(2, "constant_value")
    if given is not None and np.size(given):
        value = float(np.ravel(given)[0])
    else:
        value = float(n.attr("value", 0.0))
    axes = n.optional_const(3, "axes")
    axes = np.arange(rank) if axes is None else np.asarray(axes, np.int64).ravel() % rank
    if pads.shape != (2 * len(axes),):
        raise n.error(f"pads has {pads.size} entries, expected {2 * len(axes)}")
    begin, end = np.zeros(rank, np.int64), np.zeros(rank, np.int64)
    begin[axes], end[axes] = pads[: len(axes)], pads[len(axes) :]
    if begin[0] or end[0]:
        raise n.unsupported("it pads the batch axis")
    begin, end = begin[1:], end[1:]
    out_shape = tuple(int(d) for d in np.array(n.x_shape) + begin + end)
    if any(d <= 0 for d in out_shape):
        raise n.error(f"pads {pads.tolist()} leave an empty output")
    src = np.indices(out_shape).reshape(len(out_shape), -1) - begin[:, None]
    valid = ((src >= 0) & (src < np.array(n.x_shape)[:, None])).all(axis=0)
    rows = np.nonzero(valid)[0]
    cols = np.ravel_multi_index(tuple(src[:, rows]), n.x_shape)
    bias = np.where(valid, 0.0, value)
    return [_linear(n, rows, cols, 1.0, bias, out_shape)], out_shape


def _arithmetic(n: NodeInfo) -> Converted:
    """Add/Sub/Mul/Div of the activation and a constant (numpy broadcasting) → Linear."""
    op = n.op_type
    dyn = [i for i in (0, 1) if n.input(i) == n.x]
    if dyn == [0, 1]:
        if op == "Mul":
            return [Square(n.name, n.x_shape)], n.x_shape
        if op == "Add":
            size = math.prod(n.x_shape)
            return [_linear(n, np.arange(size), np.arange(size), 2.0, None, n.x_shape)], n.x_shape
        raise n.unsupported(f"{op} of the activation with itself")
    if op == "Div" and dyn == [1]:
        raise n.unsupported("dividing by the activation is not a polynomial")
    c = n.const(1 - dyn[0], "constant").astype(np.float64)
    rank = len(n.x_shape) + 1
    if c.ndim > rank or (c.ndim == rank and c.shape[0] != 1):
        raise n.unsupported(f"the constant of shape {c.shape} varies over the batch axis")
    c = c[0] if c.ndim == rank else c
    try:
        out_shape = tuple(int(d) for d in np.broadcast_shapes(n.x_shape, c.shape))
    except ValueError:
        raise n.error(f"constant of shape {c.shape} does not broadcast with {n.x_shape}") from None
    src = np.broadcast_to(np.arange(math.prod(n.x_shape)).reshape(n.x_shape), out_shape).ravel()
    cb = np.broadcast_to(c, out_shape).ravel()
    rows = np.arange(src.size)
    bias: np.ndarray | None = None
    data: float | np.ndarray = 1.0
    if op == "Add":
        bias = cb
    elif op == "Sub":
        bias, data = (-cb, 1.0) if dyn == [0] else (cb, -1.0)
    elif op == "Mul":
        data = cb
    else:
        if (cb == 0).any():
            raise n.error("division by a constant that holds zeros")
        data = 1 / cb
    return [_linear(n, rows, src, np.broadcast_to(data, src.shape), bias, out_shape)], out_shape


def _pow(n: NodeInfo) -> Converted:
    n.dynamic_first()
    e = np.asarray(n.const(1, "exponent"))
    if e.size != 1 or float(e.ravel()[0]) != 2.0:
        raise n.unsupported(f"exponent {e.ravel().tolist()} (only the constant 2 is supported)")
    return [Square(n.name, n.x_shape)], n.x_shape


def _elementwise(kind: str) -> Callable[[NodeInfo], Converted]:
    def convert(n: NodeInfo) -> Converted:
        n.dynamic_first()
        attrs: dict = {}
        if kind == "leaky_relu":
            attrs = {"alpha": float(n.attr("alpha", 0.01))}
        elif kind == "clip":
            for i, key in ((1, "min"), (2, "max")):
                value = n.optional_const(i, key)
                value = n.attr(key) if value is None else np.asarray(value).ravel()[0]
                attrs[key] = None if value is None else float(value)
        return [ClientFunction(n.name, kind, attrs, n.x_shape, n.x_shape)], n.x_shape

    return convert


def _softmax(n: NodeInfo) -> Converted:
    n.dynamic_first()
    axis = n.item_axis(int(n.attr("axis", -1)))
    index = np.arange(math.prod(n.x_shape)).reshape(n.x_shape)
    groups = np.moveaxis(index, axis, -1).reshape(-1, n.x_shape[axis])
    return [ClientFunction(n.name, "softmax", {}, n.x_shape, n.x_shape, groups)], n.x_shape


def _flatten(n: NodeInfo) -> Converted:
    axis = int(n.attr("axis", 1))
    if axis % (len(n.x_shape) + 1) != 1:
        raise n.unsupported(f"axis={axis} mixes the batch axis with others (only 1 is supported)")
    return [], (math.prod(n.x_shape),)


def _resolve_reshape(n: NodeInfo, target: np.ndarray, full_in: Shape) -> Shape:
    """ONNX Reshape semantics (0 copies a dimension, -1 is inferred) on full shapes."""
    out = [int(d) for d in np.asarray(target).ravel()]
    if n.attr("allowzero", 0) and 0 in out:
        raise n.unsupported("allowzero=1 with a zero in the shape")
    for i, d in enumerate(out):
        if d == 0:
            if i >= len(full_in):
                raise n.error(f"shape {out} copies dimension {i} that the input lacks")
            out[i] = full_in[i]
    known = math.prod(d for d in out if d != -1)
    total = math.prod(full_in)
    if out.count(-1) > 1 or any(d < -1 for d in out) or known == 0:
        raise n.error(f"invalid target shape {np.asarray(target).tolist()}")
    if -1 in out:
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise n.error(f"cannot reshape {full_in[1:]} per item to {np.asarray(target).tolist()}")
    return tuple(out)


def _reshape(n: NodeInfo) -> Converted:
    n.dynamic_first()
    name = n.input(1) or ""
    if name in n.batch_pairs:  # shape computed from Shape(x): one target per probe batch size
        targets = n.batch_pairs[name]
    else:
        target = np.array(n.const(1, "shape"), dtype=np.int64).ravel()
        if n.static_batch is not None and target.size and target[0] == n.static_batch:
            target[0] = 0  # a file exported with a fixed batch size: keep the batch axis
        targets = (target, target)
    outs = [_resolve_reshape(n, t, (b, *n.x_shape)) for t, b in zip(targets, BATCH_PROBES)]
    if outs[0][0] != BATCH_PROBES[0] or outs[1][0] != BATCH_PROBES[1] or outs[0][1:] != outs[1][1:]:
        raise n.unsupported("the target shape does not keep the batch axis first and intact")
    return [], outs[0][1:]


def _transpose(n: NodeInfo) -> Converted:
    """A transpose that keeps the batch axis first: a permutation of the flattened item."""
    n.dynamic_first()
    rank = len(n.x_shape) + 1
    perm = n.attr("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise n.error(f"perm {perm} is not a permutation of {rank} axes")
    if perm[0] != 0:
        raise n.unsupported(f"perm {perm} moves the batch axis (only perm[0] = 0 is supported)")
    item_perm = [p - 1 for p in perm[1:]]
    src = np.arange(math.prod(n.x_shape)).reshape(n.x_shape).transpose(item_perm)
    out_shape = tuple(int(d) for d in src.shape)
    return [_linear(n, np.arange(src.size), src.ravel(), 1.0, None, out_shape)], out_shape


def _identity(n: NodeInfo) -> Converted:
    if n.op_type == "Dropout":
        training = n.optional_const(2, "training_mode")
        if training is not None and bool(np.asarray(training).ravel()[0]):
            raise n.unsupported("training_mode=True (only inference is supported)")
    n.dynamic_first()
    return [], n.x_shape


#: ONNX operator type → converter. Shape and Constant nodes are handled by the importer.
CONVERTERS: dict[str, Callable[[NodeInfo], Converted]] = {
    "Add": _arithmetic,
    "AveragePool": _average_pool,
    "BatchNormalization": _batch_norm,
    "Clip": _elementwise("clip"),
    "Conv": _conv,
    "Div": _arithmetic,
    "Dropout": _identity,
    "Flatten": _flatten,
    "Gemm": _gemm,
    "GlobalAveragePool": _global_average_pool,
    "Identity": _identity,
    "LeakyRelu": _elementwise("leaky_relu"),
    "MatMul": _matmul,
    "MaxPool": _max_pool,
    "Mul": _arithmetic,
    "Pad": _pad,
    "Pow": _pow,
    "ReduceMean": _reduce_mean,
    "Relu": _elementwise("relu"),
    "Reshape": _reshape,
    "Sigmoid": _elementwise("sigmoid"),
    "Softmax": _softmax,
    "Sub": _arithmetic,
    "Tanh": _elementwise("tanh"),
    "Transpose": _transpose,
}

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
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction, Linear, Square
from heinfer.compiler.onnx_node import BATCH_PROBES, Converted, NodeInfo, Shape, linear_op
from heinfer.compiler.onnx_windows import WINDOW_CONVERTERS

__all__ = ["BATCH_PROBES", "CONVERTERS", "NodeInfo"]


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
    return [linear_op(n, rows, cols, 1.0, bias, out_shape)], out_shape


def _arithmetic(n: NodeInfo) -> Converted:
    """Add/Sub/Mul/Div of the activation and a constant (numpy broadcasting) → Linear."""
    op = n.op_type
    dyn = [i for i in (0, 1) if n.input(i) == n.x]
    if dyn == [0, 1]:
        if op == "Mul":
            return [Square(n.name, n.x_shape)], n.x_shape
        if op == "Add":
            size = math.prod(n.x_shape)
            return [linear_op(n, np.arange(size), np.arange(size), 2.0, None, n.x_shape)], n.x_shape
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
    return [linear_op(n, rows, src, np.broadcast_to(data, src.shape), bias, out_shape)], out_shape


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
    return [linear_op(n, np.arange(src.size), src.ravel(), 1.0, None, out_shape)], out_shape


def _identity(n: NodeInfo) -> Converted:
    if n.op_type == "Dropout":
        training = n.optional_const(2, "training_mode")
        if training is not None and bool(np.asarray(training).ravel()[0]):
            raise n.unsupported("training_mode=True (only inference is supported)")
    n.dynamic_first()
    return [], n.x_shape


#: ONNX operator type → converter. Shape and Constant nodes are handled by the importer.
#: The converter of every supported operator type (the window operators from
#: :mod:`.onnx_windows`).
CONVERTERS: dict[str, Callable[[NodeInfo], Converted]] = {
    **WINDOW_CONVERTERS,
    "Add": _arithmetic,
    "BatchNormalization": _batch_norm,
    "Clip": _elementwise("clip"),
    "Div": _arithmetic,
    "Dropout": _identity,
    "Flatten": _flatten,
    "Gemm": _gemm,
    "Identity": _identity,
    "LeakyRelu": _elementwise("leaky_relu"),
    "MatMul": _matmul,
    "Mul": _arithmetic,
    "Pad": _pad,
    "Pow": _pow,
    "Relu": _elementwise("relu"),
    "Reshape": _reshape,
    "Sigmoid": _elementwise("sigmoid"),
    "Softmax": _softmax,
    "Sub": _arithmetic,
    "Tanh": _elementwise("tanh"),
    "Transpose": _transpose,
}

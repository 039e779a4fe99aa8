"""ONNX window operators → IR ops: convolutions (any stride, padding and group) and pools
(average, global average — also as ``ReduceMean`` over the spatial axes —, max).

Layer: ``heinfer.compiler``. Windows are index arrays built in one vectorized step
(:func:`window_indices`); a convolution or an average pool is one sparse ``Linear``, a max pool
a client function over the windows.
"""

from __future__ import annotations

import math

import numpy as np

from heinfer.compiler.ir import ClientFunction
from heinfer.compiler.onnx_node import Converted, NodeInfo, Shape, int_list, linear_op

__all__ = ["WINDOW_CONVERTERS", "window_indices"]

def _window_geometry(
    n: NodeInfo, spatial: Shape, kernel: Shape
) -> tuple[np.ndarray, np.ndarray, Shape]:
    """Strides, begin pads and output spatial shape of a sliding window (Conv and pools)."""
    k = len(spatial)
    if any(d != 1 for d in int_list(n.attr("dilations"), k, 1, "dilations", n)):
        raise n.unsupported(f"dilations {n.attr('dilations')} (only 1 is supported)")
    if n.attr("ceil_mode", 0):
        raise n.unsupported("ceil_mode=1 (only 0 is supported)")
    strides = int_list(n.attr("strides"), k, 1, "strides", n)
    kern, size = np.array(kernel, np.int64), np.array(spatial, np.int64)
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-size // strides)
        total = np.maximum((out - 1) * strides + kern - size, 0)
        small = total // 2
        begin = small if auto_pad == "SAME_UPPER" else total - small
        end = total - begin
    elif auto_pad in ("NOTSET", "VALID"):
        pads = int_list(n.attr("pads") if auto_pad == "NOTSET" else None, 2 * k, 0, "pads", n)
        begin, end = pads[:k], pads[k:]
    else:
        raise n.error(f"unknown auto_pad {auto_pad!r}")
    if (strides <= 0).any() or (begin < 0).any() or (end < 0).any():
        raise n.error("strides must be positive and pads non-negative")
    out = (size + begin + end - kern) // strides + 1
    if (out <= 0).any():
        raise n.error(f"the window {tuple(kernel)} does not fit in the input {spatial}")
    return strides, begin, tuple(int(d) for d in out)


def window_indices(spatial: Shape, kernel: Shape, strides, begin, out: Shape) -> np.ndarray:
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
    return window_indices(spatial, kernel, strides, begin, out), (n.x_shape[0], *out)


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
    return [linear_op(n, rows, cols, data, bias, out_shape)], out_shape


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
        linear_op(n, rows, cols, np.broadcast_to(weight[o_i], rows.shape), None, out_shape)
    ], out_shape


def _global_average_pool(n: NodeInfo, keepdims: bool = True) -> Converted:
    n.dynamic_first()
    if len(n.x_shape) < 2:
        raise n.error(f"input shape {n.x_shape} has no spatial axes")
    channels, spatial = n.x_shape[0], math.prod(n.x_shape[1:])
    out_shape = (channels,) + (1,) * (len(n.x_shape) - 1) if keepdims else (channels,)
    rows = np.repeat(np.arange(channels), spatial)
    return [
        linear_op(n, rows, np.arange(channels * spatial), 1 / spatial, None, out_shape)
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


#: The converters of this module, by ONNX operator type.
WINDOW_CONVERTERS = {
    "AveragePool": _average_pool,
    "Conv": _conv,
    "GlobalAveragePool": _global_average_pool,
    "MaxPool": _max_pool,
    "ReduceMean": _reduce_mean,
}

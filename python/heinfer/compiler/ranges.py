"""Value ranges: the largest ``|value|`` of every tensor of a graph, which sizes the scales.

Two estimates are combined per tensor. *Interval* bounds propagate the input bound through
the graph (``|A x + b| ≤ |A|·|x| + |b|`` element-wise, ``x² ≤ max|x|²``); they are sound for
every input in range but loose after wide layers. *Calibration* bounds are the largest values
seen on sample inputs times a headroom factor. The compiler plans with the smaller of the two;
the client checks every decrypted tensor against the planned bound and raises
:class:`heinfer.errors.RangeError` instead of returning a wrapped-around result.
"""

from __future__ import annotations

import math

import numpy as np

from heinfer.compiler.ir import ClientFunction, Graph, Linear, Square
from heinfer.errors import CompileError

__all__ = ["calibrated_bounds", "check_precision_bits", "tensor_bounds"]


def _interval(op: object, bound: np.ndarray) -> np.ndarray:
    """Element-wise bound of ``op``'s output given an element-wise bound of its input."""
    if isinstance(op, Linear):
        return np.asarray(abs(op.matrix) @ bound).ravel() + np.abs(op.bias)
    if isinstance(op, Square):
        return bound * bound
    assert isinstance(op, ClientFunction)
    before, after = op.keep
    if before or after:  # the kept values pass through the step unchanged
        end = bound.size - after
        inner = _function_interval(op, bound[before:end])
        return np.concatenate([bound[:before], inner, bound[end:]])
    return _function_interval(op, bound)


def _function_interval(op: ClientFunction, bound: np.ndarray) -> np.ndarray:
    """:func:`_interval` of a client function on the values it acts on."""
    kind = op.kind
    if kind in ("sigmoid", "softmax"):
        return np.ones(op.inner_sizes[1])
    if kind == "tanh":
        return np.minimum(bound, 1.0)
    if kind == "square":
        return bound * bound
    if kind == "clip":
        lo, hi = op.attrs["min"], op.attrs["max"]
        if lo is not None and hi is not None:
            return np.minimum(np.maximum(bound, 0.0), max(abs(lo), abs(hi)))
        edge = abs(lo if lo is not None else hi) if (lo, hi) != (None, None) else 0.0
        return np.maximum(bound, edge)  # max(x, lo) or min(x, hi): |out| ≤ max(|x|, |edge|)
    if kind == "maxpool":
        g = op.groups
        assert g is not None
        vals = np.where(g >= 0, bound[np.maximum(g, 0)], 0.0)
        return vals.max(axis=1)
    if kind == "sumpool":
        assert op.groups is not None
        return bound[op.groups].sum(axis=1)
    return bound  # relu, leaky_relu (|alpha| ≤ 1 assumed by the bound being |x|)


def tensor_bounds(graph: Graph, calibration: np.ndarray | None, input_bound: float, headroom: float) -> list[float]:
    """Planned bound of ``|value|`` for the input (index 0) and every op's output (index i+1).

    ``calibration``: sample inputs ``(batch, *input_shape)`` or ``None`` (then only the interval
    bound from ``input_bound`` is used). ``headroom`` multiplies calibrated maxima.
    """
    size = int(np.prod(graph.input_shape))
    interval = np.full(size, float(input_bound))
    out = [float(input_bound)]
    y = None
    if calibration is not None:
        y = np.asarray(calibration, dtype=np.float64).reshape(len(calibration), -1)
    for op in graph.ops:
        interval = _interval(op, interval)
        bound = float(interval.max()) if interval.size else 0.0
        if y is not None:
            y = op.apply(y)
            seen = float(np.abs(y).max()) if y.size else 0.0
            bound = min(bound, headroom * seen)
        out.append(max(bound, 1e-6))
    return out


def calibrated_bounds(graph: Graph, calibration: np.ndarray | None, input_bound: float | None, headroom: float) -> tuple[np.ndarray | None, float, list[float]]:
    """``(calibration as float64, input bound, tensor bounds)`` for a compiler entry point:
    checks the calibration inputs' shape and values, the input bound and the head-room, takes
    the input bound from the calibration when not given (one of the two is required) and runs
    :func:`tensor_bounds`."""
    if not _finite(headroom) or headroom < 1:
        raise CompileError(f"headroom must be a finite factor of at least 1 over the calibrated maxima, got {headroom!r}")
    if calibration is not None:
        calibration = np.asarray(calibration, dtype=np.float64)
        if calibration.shape[1:] != graph.input_shape or len(calibration) == 0:
            raise CompileError(f"calibration inputs have shape {calibration.shape}, expected (n, *{graph.input_shape})")
        if not np.isfinite(calibration).all():
            raise CompileError("calibration inputs must be finite: they hold NaN or infinity")
    if input_bound is None:
        if calibration is None:
            raise CompileError("give calibration inputs or an input_bound")
        input_bound = float(np.abs(calibration).max())
    elif not _finite(input_bound) or input_bound <= 0:
        raise CompileError(f"input_bound must be a finite positive number (the largest |input|), got {input_bound!r}")
    return calibration, input_bound, tensor_bounds(graph, calibration, max(input_bound, 1e-6), headroom)


def check_precision_bits(bits: object) -> None:
    """:class:`CompileError` unless ``bits`` (the released precision: decrypted values rounded
    to ``bound · 2^-bits``) is an integer from 1 to 52 (a double's mantissa)."""
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 52:
        raise CompileError(f"precision_bits must be an integer from 1 to 52, got {bits!r}")


def _finite(x: object) -> bool:
    """True for a finite real number (Python or NumPy, not a bool or a string)."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(float(x))

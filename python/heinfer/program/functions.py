"""The functions a client applies between segments (ReLU, max-pooling, softmax, …).

Layer: ``heinfer.program`` (pure numpy). A :class:`ClientFunction` is part of the public
program: its kind, attributes, shapes and pooling windows are the architecture, not weights.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from heinfer.errors import CompileError

__all__ = ["ClientFunction", "ClientKind"]


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
    #: ``out[j] = Σ_k x[groups[j, k]]`` over disjoint windows: an average pool times its window
    #: size, which the two-party protocol computes on additive shares for free (each party sums
    #: its own shares; :mod:`heinfer.compiler.latency.two_party` folds the ``1/k`` into the next
    #: layer's weights).
    SUMPOOL = "sumpool"
    #: ``x²`` on the client: a square of one branch of a graph while another tensor is live
    #: (the server squares whole vectors only; see :mod:`heinfer.compiler.dag`).
    SQUARE = "square"


_ELEMENTWISE = frozenset({"relu", "leaky_relu", "sigmoid", "tanh", "clip", "square"})


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
class ClientFunction:
    """A non-polynomial step the client applies on decrypted values.

    ``kind`` is one of :class:`ClientKind`'s values. ``attrs``: ``{'alpha': float}`` for
    ``leaky_relu``; ``{'min': float | None, 'max': float | None}`` for ``clip``; empty otherwise.

    ``groups`` is ``None`` for the element-wise kinds (relu, leaky_relu, sigmoid, tanh, clip,
    square).
    For ``maxpool`` it is an int64 array ``(out_size, window)``: ``out[j]`` is the max over *k*
    of ``x[groups[j, k]]``, and entries ``-1`` are padding (ignored). For ``softmax`` it is an
    int64 array ``(n_groups, group_size)`` that partitions the flattened input, and
    ``out[groups[j]] = softmax(x[groups[j]])`` (output shape equals input shape).
    ``keep = (before, after)``: the function acts on a slice of a longer vector (a graph whose
    other tensors live across the client step, e.g. the skip of a residual block): the first
    ``before`` and last ``after`` values pass through unchanged, and ``in_shape``/``out_shape``
    are then the shapes of the whole vector, ``(before + n + after,)`` and
    ``(before + m + after,)`` with ``n → m`` the function's own sizes (``groups`` index the
    slice). ``(0, 0)``, the default, is the function on the whole vector.
    Raises :class:`CompileError` when kind, attrs, groups and shapes do not fit together.
    """

    name: str
    kind: str
    attrs: dict
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    groups: np.ndarray | None = None
    keep: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        where = f"ClientFunction {self.name!r}"
        try:
            keep = tuple(int(k) for k in self.keep)
        except (TypeError, ValueError):
            raise CompileError(f"{where}: keep must be two ints, got {self.keep!r}") from None
        if len(keep) != 2 or min(keep) < 0:
            raise CompileError(f"{where}: keep must be two non-negative ints, got {self.keep!r}")
        object.__setattr__(self, "keep", keep)
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
        n_in, n_out = _size(in_shape) - sum(keep), _size(out_shape) - sum(keep)
        if n_in <= 0 or n_out <= 0:
            raise CompileError(f"{where}: keep {keep} leaves no values for {in_shape} -> {out_shape}")
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
        if kind == "sumpool":
            used = groups.ravel()
            if groups.shape[0] != n_out or used.min() < 0 or used.max() >= n_in or len(np.unique(used)) != len(used):
                raise CompileError(f"{where}: sumpool groups must be {n_out} disjoint windows of indices in [0, {n_in})")
        elif kind == "maxpool":
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

    @property
    def inner_sizes(self) -> tuple[int, int]:
        """``(n, m)``: the sizes the function itself maps (without the values kept)."""
        return _size(self.in_shape) - sum(self.keep), _size(self.out_shape) - sum(self.keep)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """x: (batch, in_size) float array (float64 is kept) → (batch, out_size); the ``keep``
        values on either side pass through unchanged."""
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.floating):
            x = x.astype(np.float64)
        before, after = self.keep
        if before or after:
            end = x.shape[-1] - after
            inner = self._apply(x[..., before:end])
            return np.concatenate([x[..., :before], inner, x[..., end:]], axis=-1)
        return self._apply(x)

    def _apply(self, x: np.ndarray) -> np.ndarray:
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
        if kind == "square":
            return x * x
        if kind == "clip":  # one new array, not one per bound (a step's values can be GBs)
            lo, hi = self.attrs["min"], self.attrs["max"]
            return x if lo is None and hi is None else np.clip(x, lo, hi)
        assert self.groups is not None
        if kind == "sumpool":
            return x[:, self.groups].sum(axis=-1)
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

"""The typed server operations of a segment.

Layer: ``heinfer.program``. A segment's ``ops`` run in order; value ``0`` is the segment's
input and value ``i + 1`` the output of op ``i``. Every op names its input values
(``inputs``), so graphs with several readers of one tensor, residual additions and
concatenations fit the format; the executor runs chains today (each op reads the value just
before it) and refuses anything else with :class:`~heinfer.errors.NotSupportedYetError`.

What a :class:`Linear` op does depends on its segment's layout: on the batch axis its layer
is a scalar GEMM (``Program.layers[i]`` is a :class:`~heinfer.program.weights.LinearStep`)
followed by explicit :class:`Rescale` ops; in the slot layout it is a
:class:`~heinfer.program.transform.Transform` of generalized diagonals whose plaintexts are
encoded at the scale of the prime it drops, so it consumes exactly one level and leaves the
scale unchanged (its rescale, fold and bias are part of the lowering).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Linear", "Square", "Relinearize", "Rescale", "DropTo", "Op", "op_to_json", "op_from_json"]


@dataclass(frozen=True)
class Linear:
    """``y = W x + b`` with the weights of ``Program.layers[layer]`` (server side only)."""

    layer: int
    inputs: tuple[int, ...]


@dataclass(frozen=True)
class Square:
    """``y = x²`` (a ciphertext product: size 3 until relinearized; the square of a size-3
    ciphertext has size 5 and is only decrypted — an open tail, :mod:`heinfer.compiler.plan`)."""

    inputs: tuple[int, ...]


@dataclass(frozen=True)
class Relinearize:
    """Brings a size-3 ciphertext back to size 2 with the relinearization key."""

    inputs: tuple[int, ...]


@dataclass(frozen=True)
class Rescale:
    """Divides by the last ``primes`` primes of the modulus chain (level −= ``primes``)."""

    primes: int
    inputs: tuple[int, ...]


@dataclass(frozen=True)
class DropTo:
    """Drops limbs down to ``level`` without scaling (depth-aware level management)."""

    level: int
    inputs: tuple[int, ...]


Op = Linear | Square | Relinearize | Rescale | DropTo

_NAMES = {Linear: "linear", Square: "square", Relinearize: "relinearize", Rescale: "rescale", DropTo: "drop_to"}
_ARG = {Linear: "layer", Rescale: "primes", DropTo: "level"}


def op_to_json(op: Op) -> dict:
    """``{"op": name, "in": [...], <argument>}``."""
    j = {"op": _NAMES[type(op)], "in": list(op.inputs)}
    arg = _ARG.get(type(op))
    if arg is not None:
        j[arg] = getattr(op, arg)
    return j


def op_from_json(j: dict) -> Op:
    """The op of :func:`op_to_json`; ``KeyError``/``TypeError``/``ValueError`` when malformed."""
    kinds = {v: k for k, v in _NAMES.items()}
    cls = kinds[j["op"]]
    inputs = tuple(_int(v) for v in j["in"])
    arg = _ARG.get(cls)
    return cls(_int(j[arg]), inputs) if arg else cls(inputs)


def _int(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {v!r}")
    return v

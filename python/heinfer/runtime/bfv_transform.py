"""Latency mode's transforms on BFV ciphertexts: the linear layers of the two-party protocol.

Layer: ``heinfer.runtime``. A :class:`~heinfer.program.transform.Transform` lowered by the
packing search (integer weights in its diagonals, :mod:`heinfer.compiler.latency.two_party`)
runs exactly as on CKKS — replication, hoisted baby-step rotations, fused plaintext dot
products, giant-step rotations, folds, bias — on row 0 of BFV's two rows of ``N/2`` slots
(row 1 stays zero). No rescale: BFV is exact mod ``p``.
"""

from __future__ import annotations

import numpy as np

from heinfer import bfv
from heinfer.ckks.objects import Ciphertext, GaloisKeys
from heinfer.errors import ProtocolError
from heinfer.program.transform import Transform
from heinfer.runtime.executor import lazy_until_fits, plaintext_budget

__all__ = ["BfvLayer", "multiplier_bytes", "prepare_layers", "row0"]


def row0(values: np.ndarray, n: int) -> np.ndarray:
    """``N/2`` signed integer slot values → ``N`` slots with row 1 zero (``int64``)."""
    out = np.zeros(n, dtype=np.int64)
    out[: len(values)] = values
    return out


def multiplier_bytes(params: bfv.BfvParameters, t: Transform) -> int:
    """Bytes of a transform's encoded diagonals (``N·k·8`` each for ``k`` ciphertext primes)."""
    return len(t.vectors) * params.n * len(params.rlwe.q) * 8


class BfvLayer:
    """One transform with its diagonals encoded as BFV multipliers (server side), or, when
    ``lazy``, encoded group by group just before each use (streaming)."""

    def __init__(self, params: bfv.BfvParameters, t: Transform, lazy: bool = False) -> None:
        if t.slots != params.n // 2:
            raise ProtocolError(f"transform has {t.slots} slots, BFV rows have {params.n // 2}")
        self.t = t
        self.params = params
        self._enc = bfv.BatchEncoder(params)
        n = params.n
        self.plaintext_bytes = multiplier_bytes(params, t)
        self.lazy = lazy
        self.mults = None if lazy else [self._multiplier(i) for i in range(len(t.vectors))]
        self.bias = None if t.bias is None else [self._enc.encode(row0(np.rint(b).astype(np.int64), n)) for b in t.bias]

    def _multiplier(self, i: int) -> bfv.Multiplier:
        return self._enc.encode_multiplier(row0(np.rint(self.t.vectors[i]).astype(np.int64), self.params.n))

    def run(self, ev: bfv.Evaluator, x: list[Ciphertext], galois: GaloisKeys | None) -> list[Ciphertext]:
        """The transform's output ciphertexts for its input ciphertexts ``x`` (consumed)."""
        t = self.t
        if len(x) != t.n_in:
            raise ProtocolError(f"layer takes {t.n_in} ciphertexts, got {len(x)}")
        for r in t.replicate:
            for a in range(len(x)):
                x[a] = ev.add(x[a], ev.rotate_rows(x[a], r, galois))
        rotated = {a: dict(zip(bs, ev.rotate_rows_hoisted(x[a], bs, galois))) for a, bs in t.babies().items()}
        out: list[Ciphertext | None] = [None] * t.n_out
        for o, g, ix in t.groups():
            cts = [rotated[int(t.terms[i, 2])][int(t.terms[i, 3])] if t.terms[i, 3] else x[int(t.terms[i, 2])] for i in ix]
            ms = [self._multiplier(i) for i in ix] if self.mults is None else [self.mults[i] for i in ix]
            acc = ev.dot_plain(cts, ms)
            if g:
                acc = ev.rotate_rows(acc, int(g), galois)
            out[o] = acc if out[o] is None else ev.add(out[o], acc)
        result: list[Ciphertext] = []
        for o in range(t.n_out):
            y = out[o] if out[o] is not None else ev.mul_scalar(x[0], 0)
            for s in t.fold:
                y = ev.add(y, ev.rotate_rows(y, s, galois))
            if self.bias is not None:
                y = ev.add_plain(y, self.bias[o])
            result.append(y)
        return result


def prepare_layers(params: bfv.BfvParameters, transforms: list[Transform], max_memory: int | None = None) -> list[BfvLayer]:
    """The layers of a program, the largest ones lazy until the diagonals kept fit
    ``max_memory`` (default: :func:`~heinfer.runtime.executor.plaintext_budget`, as for CKKS)."""
    need = {k: multiplier_bytes(params, t) for k, t in enumerate(transforms)}
    lazy = lazy_until_fits(need, plaintext_budget() if max_memory is None else max_memory)
    return [BfvLayer(params, t, lazy=k in lazy) for k, t in enumerate(transforms)]

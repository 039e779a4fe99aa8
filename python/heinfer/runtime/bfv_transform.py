"""Latency mode's transforms on BFV ciphertexts: the linear layers of the two-party protocol.

Layer: ``heinfer.runtime``. A :class:`~heinfer.program.transform.Transform` lowered by the
packing search (integer weights in its diagonals, :mod:`heinfer.compiler.latency.two_party`)
runs exactly as on CKKS — replication, hoisted baby-step rotations, fused plaintext dot
products, giant-step rotations, folds, bias — on row 0 of BFV's two rows of ``N/2`` slots
(row 1 stays zero). No rescale: BFV is exact mod ``p``.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from heinfer import bfv
from heinfer.ckks.objects import Ciphertext, GaloisKeys
from heinfer.errors import ProtocolError
from heinfer.program.share_folds import replicated_gather
from heinfer.program.transform import Transform
from heinfer.runtime.executor import lazy_until_fits, plaintext_budget

__all__ = ["BfvLayer", "input_elements", "multiplier_bytes", "paired_transform", "prepare_layers", "row0", "scaled_columns", "scaled_diagonals"]


#: Diagonals encoded per engine call (bounds the slot array handed over: 16 MB at N = 8192).
ENCODE_ROWS = 256


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
    ``lazy``, encoded group by group just before each use (streaming).

    ``row1``: a second set of diagonals (one per term, :func:`scaled_columns`) for row 1 of
    the slots: each multiplier then holds the transform's diagonal in row 0 and this one in
    row 1, and a run computes both rows' layers at once (GAZELLE's square protocol with
    ``Enc(a²)`` in row 0 and ``Enc(a)`` in row 1, :meth:`with_cross_term`)."""

    def __init__(self, params: bfv.BfvParameters, t: Transform, lazy: bool = False, row1: np.ndarray | None = None) -> None:
        if t.slots != params.n // 2:
            raise ProtocolError(f"transform has {t.slots} slots, BFV rows have {params.n // 2}")
        if row1 is not None and row1.shape != t.vectors.shape:
            raise ProtocolError(f"row 1 diagonals of shape {row1.shape} for a transform's {t.vectors.shape}")
        self.t = t
        self.params = params
        self._enc = bfv.BatchEncoder(params)
        # signed residues, kept as integers (the cross term's arrive so, a paired transform's as floats)
        self._row1 = row1 if row1 is None or row1.dtype == np.int64 else np.rint(row1).astype(np.int64)
        self._row0: np.ndarray | None = None  # the diagonals as integers, when kept (cross terms)
        n = params.n
        self.plaintext_bytes = multiplier_bytes(params, t)
        self.lazy = lazy
        self.mults = None if lazy else self._multipliers(np.arange(len(t.vectors)))
        self._columns: tuple | None = None  # (gather, input_elements, vectors mod p), see with_cross_term
        self.bias = None if t.bias is None else [self._enc.encode(row0(np.rint(b).astype(np.int64), n)) for b in t.bias]

    def _multipliers(self, ix: np.ndarray) -> list[bfv.Multiplier]:
        """The multipliers of terms ``ix`` (row 0: the transform's diagonals, row 1: ``row1``'s
        if any), :data:`ENCODE_ROWS` at a time in one parallel engine call each."""
        out: list[bfv.Multiplier] = []
        half = self.params.n // 2
        for start in range(0, len(ix), ENCODE_ROWS):
            part = ix[start : start + ENCODE_ROWS]
            v = np.empty((len(part), self.params.n if self._row1 is not None else half), dtype=np.int64)
            v[:, :half] = self._row0[part] if self._row0 is not None else np.rint(self.t.vectors[part])
            if self._row1 is not None:
                v[:, half:] = self._row1[part]
            out += self._enc.encode_multipliers(v)
        return out

    def with_cross_term(self, gather: np.ndarray, scale: np.ndarray, p: int) -> BfvLayer:
        """This layer with row 1 of every diagonal holding its columns scaled by ``scale``
        (:func:`scaled_columns`: ``W·diag(scale)``) for inputs placed by ``gather``, encoded.
        Run on ciphertexts holding ``x`` in row 0 and ``a`` in row 1, row 0 of the result is
        ``W·x + bias`` and row 1 ``W·diag(scale)·a`` (the parties sum the rows on their shares). Which input
        element each diagonal slot multiplies, and the diagonals mod ``p``, are the same for
        every session and query: they are computed on the first call and kept."""
        if self._columns is None or self._columns[0] is not gather:
            self._columns = (gather, input_elements(self.t, gather), np.rint(self.t.vectors).astype(np.int64) % p)
        _, elements, base = self._columns
        # the same transform and bias; only the multipliers are new (the encoder reduces mod p)
        layer = copy.copy(self)
        layer._columns, layer._row0 = None, base
        layer._row1 = scaled_diagonals(self.t, elements, scale, p, base, centered=False)
        layer.mults = None if self.lazy else layer._multipliers(np.arange(len(self.t.vectors)))
        return layer

    def run(self, ev: bfv.Evaluator, x: list[Ciphertext], galois: GaloisKeys | None) -> list[Ciphertext]:
        """The transform's output ciphertexts for its input ciphertexts ``x`` (consumed), both
        rows of the slots at once (row 1 with the ``row1`` diagonals, if any). The giant
        steps run together (:meth:`~heinfer.bfv.Evaluator.rotate_rows_many`: independent, one
        per engine thread), the folds and the replications as one chain per call
        (:meth:`~heinfer.bfv.Evaluator.fold_rows`)."""
        t = self.t
        if len(x) != t.n_in:
            raise ProtocolError(f"layer takes {t.n_in} ciphertexts, got {len(x)}")
        if len(t.replicate):  # replications are folds of the inputs (LoLa's stacking)
            x[:] = ev.fold_rows(x, [int(r) for r in t.replicate], galois)
        rotated = {a: dict(zip(bs, ev.rotate_rows_hoisted(x[a], bs, galois))) for a, bs in t.babies().items()}
        sums, giant = [], []  # (output, dot product) per group; the giant steps to rotate
        for o, g, ix in t.groups():
            cts = [rotated[int(t.terms[i, 2])][int(t.terms[i, 3])] if t.terms[i, 3] else x[int(t.terms[i, 2])] for i in ix]
            ms = self._multipliers(ix) if self.mults is None else [self.mults[i] for i in ix]
            sums.append((o, ev.dot_plain(cts, ms)))
            giant.append(int(g))
        # the giant steps are independent: rotated together, spread over the engine threads
        moved = [i for i, g in enumerate(giant) if g]
        if moved:
            for i, r in zip(moved, ev.rotate_rows_many([sums[i][1] for i in moved], [giant[i] for i in moved], galois)):
                sums[i] = (sums[i][0], r)
        out: list[Ciphertext | None] = [None] * t.n_out
        for o, acc in sums:
            out[o] = acc if out[o] is None else ev.add(out[o], acc)
        ys = [out[o] if out[o] is not None else ev.mul_scalar(x[0], 0) for o in range(t.n_out)]
        if len(t.fold):  # every output's chain of folds in one engine call
            ys = ev.fold_rows(ys, [int(s) for s in t.fold], galois)
        return [ev.add_plain(y, self.bias[o]) if self.bias is not None else y for o, y in enumerate(ys)]


def input_elements(t: Transform, gather: np.ndarray) -> np.ndarray:
    """``elements[i, s]``: the input element that slot ``s`` of term ``i``'s diagonal multiplies
    (``-1``: an empty slot), for inputs placed by ``gather`` (``gather[a, s]``: the element in
    slot ``s`` of input ciphertext ``a``).

    Term ``i = (o, g, a, b)`` multiplies ``vectors[i][s]`` by ``rot(x_a, b)[s] = x_a[s + b]``,
    where ``x_a`` is the input after the replication steps ``x ← x + rot(x, r)``; replication
    copies a clean input, so every slot holds at most one element (checked)."""
    n_in, width = gather.shape
    if n_in != t.n_in or width > t.slots:
        raise ProtocolError(f"a layout of {n_in}×{width} slots does not fit a {t.n_in}-input transform of {t.slots} slots")
    try:
        elems = replicated_gather(gather, tuple(int(r) for r in t.replicate), t.slots)
    except ValueError as e:  # a step lands on an occupied slot
        raise ProtocolError(str(e)) from None
    a, b = t.terms[:, 2].astype(np.int64), t.terms[:, 3].astype(np.int64)
    cols = (np.arange(t.slots)[None, :] + b[:, None]) % t.slots
    return elems[a[:, None], cols]


def scaled_columns(t: Transform, elements: np.ndarray, scale: np.ndarray, p: int, base: np.ndarray | None = None) -> Transform:
    """The transform of ``W·diag(scale)`` mod ``p`` without bias: every diagonal entry times
    the scale of the input element it multiplies (``elements`` from :func:`input_elements`),
    reduced to the signed range. GAZELLE's square protocol runs the next layer on ``Enc(a)``
    with the columns scaled by ``2b`` instead of multiplying ``Enc(a)`` by ``2b`` first: the
    noise grows by one product, not two. ``base``: ``rint(t.vectors) mod p``, when the caller
    keeps it."""
    v = scaled_diagonals(t, elements, scale, p, base)
    return replace(t, vectors=v.astype(np.float64), bias=None)


def scaled_diagonals(
    t: Transform, elements: np.ndarray, scale: np.ndarray, p: int, base: np.ndarray | None = None, centered: bool = True
) -> np.ndarray:
    """:func:`scaled_columns`' diagonals as ``int64`` (what the encoder takes: no round trip
    through floating point, no transform built): signed residues, or with ``centered=False``
    any representatives mod ``p`` (the products themselves below ``2^62`` when ``p < 2^31``:
    the encoder reduces them, so the two passes of the reduction are skipped)."""
    s = np.append(np.asarray(scale, dtype=np.int64) % p, 0)
    factor = s[elements]  # an empty slot (-1) picks the appended 0
    v = np.rint(t.vectors).astype(np.int64) % p if base is None else base
    if p >= 1 << 31:  # exact in Python integers
        return _centered((v.astype(object) * factor % p).astype(np.int64), p)
    v = v * factor  # below 2^62
    return _centered(v % p, p) if centered else v


def _centered(v: np.ndarray, p: int) -> np.ndarray:
    v[v > (p - 1) // 2] -= p
    return v


def paired_transform(t: Transform) -> tuple[Transform, np.ndarray]:
    """``(transform, row 1 diagonals)`` of ``t`` on its inputs paired two per ciphertext (input
    ``2j`` in row 0 of ciphertext ``j``, ``2j + 1`` in row 1): a term per ``(o, g, j, b)``
    whose row-0 diagonal is ``t``'s term on input ``2j`` and row-1 diagonal its term on input
    ``2j + 1`` (zero where ``t`` has none). Row 0 of its output is ``t``'s terms on the even
    inputs (with the bias), row 1 those on the odd ones: their sum is ``t``'s output."""
    if len(t.replicate):
        raise ProtocolError("a transform that replicates its inputs cannot take them in row pairs")
    terms = t.terms.copy()
    odd = terms[:, 2] % 2 == 1
    terms[:, 2] //= 2
    keys, index = np.unique(terms, axis=0, return_inverse=True)  # sorted (o, g, j, b)
    index = index.reshape(-1)
    row0 = np.zeros((len(keys), t.slots))
    row1 = np.zeros((len(keys), t.slots))
    row0[index[~odd]] = t.vectors[~odd]
    row1[index[odd]] = t.vectors[odd]
    paired = replace(t, n_in=-(-t.n_in // 2), terms=keys.astype(np.int64), vectors=row0)
    return paired, row1


def prepare_layers(
    params: bfv.BfvParameters, transforms: list[Transform], max_memory: int | None = None, pairs: list[bool] | None = None
) -> list[BfvLayer]:
    """The layers of a program, the largest ones lazy until the diagonals kept fit
    ``max_memory`` (default: :func:`~heinfer.runtime.executor.plaintext_budget`, as for CKKS).
    ``pairs[k]``: layer ``k`` takes its inputs in row pairs (:func:`paired_transform`)."""
    need = {k: multiplier_bytes(params, t) for k, t in enumerate(transforms)}
    lazy = lazy_until_fits(need, plaintext_budget() if max_memory is None else max_memory)
    layers = []
    for k, t in enumerate(transforms):
        if pairs is not None and pairs[k]:
            t, row1 = paired_transform(t)
            layers.append(BfvLayer(params, t, lazy=k in lazy, row1=row1))
        else:
            layers.append(BfvLayer(params, t, lazy=k in lazy))
    return layers

"""A linear map between slot layouts, lowered to rotations and plaintext products.

Layer: ``heinfer.program`` (pure numpy: the lowering of a slot-layout linear layer, which the compiler builds and the runtime executes). Every linear kernel of latency mode — Halevi–Shoup
diagonals with baby-step giant-step, GAZELLE's hybrid and its convolutions with input or
output rotations, LoLa's convolution representation — is one :class:`Transform` with a
particular input layout, output layout and giant-step modulus (see
:mod:`heinfer.compiler.latency.kernels`).

**The math.** With ``rot(x, d)[t] = x[(t + d) mod S]``, any linear map from the slots of
ciphertexts ``x_a`` to the slots of ``y_o`` is ``y_o = Σ_{a,d} v_{a,o,d} ⊙ rot(x_a, d)``
where the *generalized diagonal* ``v_{a,o,d}[t]`` is the weight from slot ``t + d`` of
``x_a`` to slot ``t`` of ``y_o``. Split ``d = g + b`` with ``b = d mod M`` (baby step) and
``g = d − b`` (giant step)::

    y_o = Σ_g rot( Σ_{a,b} rot(v_{a,o,g+b}, −g) ⊙ rot(x_a, b), g )

The baby rotations of each ``x_a`` share one decomposition (hoisting) and stay in the
extended basis ``Q·P`` until one ModDown per ``(o, g)`` (double hoisting); each non-zero
giant step costs one rotation per output ciphertext. ``M ≥ S`` rotates only inputs (GAZELLE's
input rotations), ``M = 1`` only outputs (output rotations), ``M ≈ √(#diagonals)`` is the
classic baby-step giant-step. After the sum, an optional *fold* ``y ← y + rot(y, s)`` per
step ``s`` adds partial sums (GAZELLE's hybrid method), then the bias is added.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from heinfer.errors import CompileError
from heinfer.program.modular import mul_mod

__all__ = ["HOISTINGS", "OP_KINDS", "Transform", "build_transform", "single_hoisting", "split"]

#: Kinds of primitive operations a transform is costed in (see :meth:`Transform.counts`).
OP_KINDS = ("decompose", "rotate_ext", "times_p", "mul_plain_ext", "mod_down", "mul_plain", "dot", "rotate", "add")
#: Rotate-and-add counts priced at a level other than the products' (see cost.price).
EXTRA_KINDS = ("fold", "replicate")
#: The ways a transform's baby steps may run (:class:`Transform`'s ``hoisting``).
HOISTINGS = ("double", "single")


def single_hoisting(c: dict[str, int]) -> dict[str, int]:
    """The operation counts of a transform whose double-hoisted counts are ``c`` when it runs
    single-hoisted: every product outside the extended basis, a ModDown per rotated baby step
    instead of one per extended group, and no input multiplied by ``P``."""
    s = dict(c)
    s["mul_plain"] = c["mul_plain"] + c["mul_plain_ext"]
    s["mul_plain_ext"] = 0
    s["dot"] = c["dot"] + c["mod_down"]
    s["mod_down"] = c["rotate_ext"]
    s["times_p"] = 0
    return s


@dataclass(frozen=True, eq=False)
class Transform:
    """``y_o = Σ_g rot(Σ_{(a,b)} vectors[i] ⊙ rot(x_a, b), g)``, then fold, then bias.

    ``terms[i] = (o, g, a, b)`` sorted; ``vectors[i]`` is the plaintext of term ``i`` (already
    rotated by ``−g``). ``bias``: ``(n_out, S)`` or ``None``; ``fold``: rotate-and-sum steps.
    ``replicate``: rotate-and-add steps applied to every input first (``x ← x + rot(x, r)``),
    which copy a *clean* input (zero outside its placement) to more slots — LoLa's stacked
    representation, which lets one plaintext carry several diagonals.

    ``hoisting``: how a CKKS server runs the baby steps. ``"double"`` (Bossuat et al.) keeps
    the rotated inputs in the extended basis ``Q·P`` and multiplies them by plaintexts that
    carry the special primes too, with one ModDown per output ciphertext and giant step;
    ``"single"`` brings every rotated input back to ``Q`` (a ModDown per baby step) and
    multiplies by plaintexts without the special primes — fewer bytes to encode, hold and
    stream when the groups outnumber the baby steps. The packing search prices both.
    """

    n_in: int
    n_out: int
    slots: int
    terms: np.ndarray
    vectors: np.ndarray
    bias: np.ndarray | None
    fold: tuple[int, ...] = ()
    replicate: tuple[int, ...] = ()
    hoisting: str = "double"

    def __post_init__(self) -> None:
        if self.hoisting not in HOISTINGS:
            raise CompileError(f"transform: hoisting {self.hoisting!r}, expected one of {HOISTINGS}")
        t, v, S = self.terms, self.vectors, self.slots
        if t.ndim != 2 or t.shape[1] != 4 or v.shape != (len(t), S):
            raise CompileError(f"transform: {t.shape} terms for vectors of shape {v.shape}")
        if len(t) and not (
            0 <= t[:, 0].min() and t[:, 0].max() < self.n_out and 0 <= t[:, 2].min() and t[:, 2].max() < self.n_in
            and 0 <= t[:, 1].min() and t[:, 1].max() < S and 0 <= t[:, 3].min() and t[:, 3].max() < S
        ):
            raise CompileError("transform: a term names a ciphertext or a step out of range")
        if self.bias is not None and self.bias.shape != (self.n_out, S):
            raise CompileError(f"transform: bias of shape {self.bias.shape}, expected {(self.n_out, S)}")
        if any(not 0 < s < S for s in self.fold + self.replicate):
            raise CompileError(f"transform: fold steps {self.fold} or replication steps {self.replicate} out of range")

    def groups(self) -> list[tuple[int, int, np.ndarray]]:
        """``(o, g, term indices)`` for every output ciphertext and giant step."""
        if not len(self.terms):
            return []
        key = self.terms[:, 0] * self.slots + self.terms[:, 1]
        cut = np.flatnonzero(np.diff(key)) + 1
        return [(int(self.terms[ix[0], 0]), int(self.terms[ix[0], 1]), ix) for ix in np.split(np.arange(len(key)), cut)]

    def babies(self) -> dict[int, list[int]]:
        """Baby steps each input ciphertext is rotated by, among groups that need the
        extended basis (a group whose terms all have ``b = 0`` multiplies ``x_a`` directly)."""
        out: dict[int, set[int]] = {}
        for _, _, ix in self.groups():
            if (self.terms[ix, 3] != 0).any():
                for a, b in self.terms[ix][:, 2:4]:
                    out.setdefault(int(a), set()).add(int(b))
        return {a: sorted(s) for a, s in sorted(out.items())}

    def rotation_steps(self) -> set[int]:
        """Every rotation step the transform performs (its Galois keys)."""
        steps = {b for bs in self.babies().values() for b in bs if b}
        steps |= {g for _, g, _ in self.groups() if g}
        return steps | set(self.fold) | set(self.replicate)

    def counts(self) -> dict[str, int]:
        """Primitive operations at the transform's input level (the fold too: it runs before the rescale).

        ``mul_plain``/``mul_plain_ext`` count the terms of the fused dot products (one pass,
        no intermediate ciphertexts), ``dot`` the dot products outside the extended basis
        (those inside it are counted by ``mod_down``); ``add`` the sums of giant-step results."""
        c = dict.fromkeys(OP_KINDS, 0)
        for a, bs in self.babies().items():
            c["decompose"] += 1 if any(bs) else 0
            c["rotate_ext"] += sum(1 for b in bs if b)
            c["times_p"] += 1 if 0 in bs else 0
        outs_with_terms = set()
        for o, g, ix in self.groups():
            ext = bool((self.terms[ix, 3] != 0).any())
            c["mul_plain_ext" if ext else "mul_plain"] += len(ix)
            c["mod_down"] += 1 if ext else 0
            c["dot"] += 0 if ext else 1
            c["add"] += 1 if o in outs_with_terms else 0  # the terms are summed inside the dot product
            c["rotate"] += 1 if g else 0
            outs_with_terms.add(o)
        c["fold"] = len(self.fold) * self.n_out
        c["replicate"] = len(self.replicate) * self.n_in
        return single_hoisting(c) if self.hoisting == "single" else c

    def outputs(self, start: int, stop: int) -> Transform:
        """The transform restricted to output ciphertexts ``start:stop`` (renumbered from 0):
        their terms, diagonals and bias, the same inputs, replication and folds. Run on the same
        inputs it computes exactly those ciphertexts of the whole (a shard of a slot-layout
        layer on a cluster: :mod:`heinfer.cluster`); its baby steps are those its terms use."""
        if not 0 <= start < stop <= self.n_out:
            raise CompileError(f"transform: outputs {start}:{stop} of {self.n_out}")
        keep = (self.terms[:, 0] >= start) & (self.terms[:, 0] < stop)
        terms = self.terms[keep].copy()
        terms[:, 0] -= start
        return Transform(
            n_in=self.n_in,
            n_out=stop - start,
            slots=self.slots,
            terms=terms,
            vectors=self.vectors[keep],
            bias=None if self.bias is None else self.bias[start:stop],
            fold=self.fold,
            replicate=self.replicate,
            hoisting=self.hoisting,
        )

    def giant_steps(self, start: int, stop: int) -> Transform:
        """The products and giant steps of groups ``start:stop`` of :meth:`groups` (output
        ciphertext × giant step), without folds and bias: every output ciphertext, each the
        sum of those groups' rotated products only (zero where none reaches it), with the same
        inputs and replication. The sums of a partition of the groups add up to the whole
        transform's sums before its folds, rescale and bias, exactly (the shard of a layer
        split by giant steps on a cluster, :mod:`heinfer.cluster`; :meth:`finishing` does the
        rest)."""
        groups = self.groups()
        if not 0 <= start < stop <= len(groups):
            raise CompileError(f"transform: giant-step groups {start}:{stop} of {len(groups)}")
        keep = np.concatenate([ix for _, _, ix in groups[start:stop]])
        return replace(self, terms=self.terms[keep], vectors=self.vectors[keep], bias=None, fold=())

    def finishing(self) -> Transform:
        """The transform without its products: its folds and bias only, for summed
        :meth:`giant_steps` shards."""
        return replace(self, terms=self.terms[:0], vectors=self.vectors[:0])

    def simulate(self, x: np.ndarray, modulus: int | None = None) -> np.ndarray:
        """The transform on slot values ``x`` ``(..., n_in, S)`` (any leading axes: items),
        folds and bias included: ``(..., n_out, S)``. In float64 (no noise), or with
        ``modulus`` ``p < 2^40`` on integers mod ``p`` as BFV computes it (diagonals and bias
        rounded to integers, every product and sum reduced: exact)."""
        vec, reduce = self.vectors, _identity
        if modulus is not None:
            p = int(modulus)
            vec, x = np.rint(vec).astype(np.int64) % p, np.asarray(x).astype(np.int64) % p

            def reduce(v: np.ndarray) -> np.ndarray:
                return v % p

        for s in self.replicate:
            x = reduce(x + np.roll(x, -s, axis=-1))
        y = np.zeros((*x.shape[:-2], self.n_out, self.slots), dtype=vec.dtype)
        for o, g, ix in self.groups():
            acc = np.zeros((*x.shape[:-2], self.slots), dtype=vec.dtype)
            for i in ix:
                _, _, a, b = self.terms[i]
                term = np.roll(x[..., a, :], -int(b), axis=-1)
                if modulus is not None and p >= 1 << 31:  # a product of residues beyond 63 bits
                    term = mul_mod(np.broadcast_to(vec[i], term.shape), term, p)
                else:
                    term = vec[i] * term
                acc = reduce(acc + term)
            y[..., o, :] = reduce(y[..., o, :] + np.roll(acc, -g, axis=-1))
        return self.finish(y, modulus)

    def finish(self, y: np.ndarray, modulus: int | None = None) -> np.ndarray:
        """Fold and bias on output slot values ``(..., n_out, S)`` (mod ``modulus`` if given,
        the bias rounded to integers)."""
        for s in self.fold:
            y = y + np.roll(y, -s, axis=-1)
            y = y if modulus is None else y % modulus
        if self.bias is None:
            return y
        if modulus is None:
            return y + self.bias
        return (y + np.rint(self.bias).astype(np.int64) % modulus) % modulus


def _identity(v: np.ndarray) -> np.ndarray:
    return v


def split(d: np.ndarray, modulus: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Baby and giant steps ``(b, g)`` (both mod ``S``) of diagonals ``d`` with ``d ≡ b + g``.

    ``modulus = M > 0``: ``b = d mod M`` (babies ``0..M−1``). ``M < 0``: babies in
    ``(−|M|, 0]`` of the centered diagonal — for diagonals just below zero (GAZELLE's hybrid
    reads them) this leaves the giant step 0 to one group, saving its rotation."""
    if modulus > 0:
        b = d % modulus
    else:
        centered = np.where(d > slots // 2, d - slots, d)
        b = (-((-centered) % -modulus)) % slots
    return b, (d - b) % slots


def build_transform(
    n_in: int,
    n_out: int,
    slots: int,
    in_ct: np.ndarray,
    in_slot: np.ndarray,
    out_ct: np.ndarray,
    out_slot: np.ndarray,
    weights: np.ndarray,
    giant_modulus: int,
    bias: np.ndarray | None = None,
    fold: tuple[int, ...] = (),
    replicate: tuple[int, ...] = (),
) -> Transform:
    """Lowers the products ``weight × (slot in_slot of x_{in_ct})`` accumulated into slot
    ``out_slot`` of ``y_{out_ct}`` (one entry per non-zero weight) with giant-step modulus
    ``giant_modulus`` (see the module documentation and :func:`split`); ``in_slot`` refers to the input after
    the ``replicate`` steps."""
    S = slots
    if giant_modulus == 0:
        raise CompileError("giant-step modulus must be non-zero")
    d = (np.asarray(in_slot, np.int64) - np.asarray(out_slot, np.int64)) % S
    b, g = split(d, giant_modulus, S)
    o, a = np.asarray(out_ct, np.int64), np.asarray(in_ct, np.int64)
    key = ((o * S + g) * n_in + a) * S + b
    uniq, inv = np.unique(key, return_inverse=True)
    terms = np.stack([uniq // S // n_in // S, (uniq // S // n_in) % S, (uniq // S) % n_in, uniq % S], axis=1)
    vectors = np.zeros((len(uniq), S))
    # rot(v, −g)[t + g] = v[t]: the weight for output slot t lands at t + g
    np.add.at(vectors, (inv, (np.asarray(out_slot, np.int64) + g) % S), np.asarray(weights, np.float64))
    return Transform(n_in, n_out, S, terms.astype(np.int64), vectors, bias, tuple(fold), tuple(replicate))

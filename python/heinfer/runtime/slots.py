"""Running a slot-layout segment on ciphertexts (server side).

Layer: ``heinfer.runtime``. :class:`PreparedSlots` encodes every plaintext of a segment once
per program (the kernels' diagonals at the exact scale ``q_ℓ`` of the prime the layer's
rescale removes, so a linear layer leaves the ciphertext scale unchanged; biases at the scale
the ciphertext has after it). :meth:`PreparedSlots.run` executes the segment's ops with the
engine's hoisted rotations: the baby steps of every input ciphertext share one decomposition
and stay in the extended basis ``Q·P`` through the plaintext products and sums, with one
fused dot product and one ModDown per output ciphertext and giant step (double hoisting, see
:mod:`heinfer.program.transform`) — or, for a transform planned with single hoisting, each baby
step comes back to ``Q`` at once and the plaintexts carry no special primes.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from heinfer import _native
from heinfer.compiler.cost import residue_bytes
from heinfer.errors import ProtocolError
from heinfer.program.model import Segment
from heinfer.program.ops import Linear, Relinearize, Rescale, Square
from heinfer.program.transform import Transform

__all__ = ["DOT_BATCH", "GIANT_BATCH", "LAZY_BATCH_BYTES", "PreparedSlots", "plaintext_bytes"]

#: Giant-step rotations run together (:meth:`PreparedSlots._sums`): enough to keep two
#: to eight cores busy, few enough that the waiting products stay small (16 ciphertexts).
GIANT_BATCH = 16

#: Groups (output ciphertext × giant step) whose plaintext sums one engine call makes in one
#: pass over their shared baby steps: their outputs are held at once.
DOT_BATCH = 32

#: Bytes of plaintexts encoded for one such call when a segment keeps none (``lazy``): fewer
#: groups per call where they hold many diagonals, so streaming stays streaming.
LAZY_BATCH_BYTES = 64 << 20


def plaintext_bytes(params: dict, seg: Segment, layers: list, compact: bool = True) -> int:
    """Bytes :class:`PreparedSlots` will hold for ``seg``'s encoded plaintexts (``params``:
    the program's): every diagonal at its layer's level (plus the special primes when it
    multiplies extended ciphertexts), ``compact`` or not (:func:`residue_bytes`), and every
    bias vector (64-bit words), in NTT form."""
    n = 1 << int(params["log_n"])
    level, total = seg.input_level, 0
    for op in seg.ops:
        if isinstance(op, Linear):
            t = layers[op.layer]
            for _, _, ix in t.groups():
                per = residue_bytes(params["log_q"], params["log_p"], level, _extended(t, ix), compact)
                total += len(ix) * n * per
            total += (0 if t.bias is None else len(t.bias)) * n * level * 8
            level -= 1
        elif isinstance(op, Rescale):
            level -= op.primes
    return total


def _extended(t: Transform, ix) -> bool:
    """Whether the group ``ix`` of ``t`` multiplies extended ciphertexts (double hoisting
    with a rotated term), so its plaintexts carry the special primes."""
    return t.hoisting == "double" and bool((t.terms[ix, 3] != 0).any())


class _Schedule:
    """What :meth:`PreparedSlots._sums` walks for one transform, derived once per
    program instead of on every query: the baby steps of each input ciphertext and, per
    output ciphertext and giant step, the term indices, whether they multiply extended
    (rotated) ciphertexts, and which ciphertexts: indices into the list
    :meth:`PreparedSlots._sums` builds — for extended groups the baby steps in
    :attr:`babies` order; otherwise the inputs, then (single hoisting) the rotated baby
    steps in that order."""

    def __init__(self, t: Transform) -> None:
        self.babies = list(t.babies().items())
        if t.hoisting == "single":  # a term with b = 0 multiplies x_a itself
            self.babies = [(a, [b for b in bs if b]) for a, bs in self.babies if any(bs)]
        rotated = [(a, b) for a, bs in self.babies for b in bs]
        ext_index = {ab: i for i, ab in enumerate(rotated)}
        q_index = {(a, 0): a for a in range(t.n_in)}
        if t.hoisting == "single":
            q_index.update({ab: t.n_in + i for i, ab in enumerate(rotated)})
        self.groups = []
        for o, g, ix in t.groups():
            terms = [(int(t.terms[i, 2]), int(t.terms[i, 3])) for i in ix]
            extended = _extended(t, ix)
            where = ext_index if extended else q_index
            self.groups.append((o, g, [int(i) for i in ix], [where[ab] for ab in terms], extended))


def _batches(groups: list, max_terms: int | None = None) -> Iterator[tuple[bool, list]]:
    """Consecutive runs of at most :data:`DOT_BATCH` groups of one kind (extended or not) and,
    with ``max_terms``, of at most that many terms in all (one group at least)."""
    run: list = []
    terms = 0
    for grp in groups:
        full = len(run) == DOT_BATCH or (max_terms is not None and terms + len(grp[2]) > max_terms)
        if run and (full or run[0][4] != grp[4]):
            yield run[0][4], run
            run, terms = [], 0
        run.append(grp)
        terms += len(grp[2])
    if run:
        yield run[0][4], run


class PreparedSlots:
    """A slot-layout segment with its plaintexts encoded for inputs at ``input_scale``.

    ``lazy=True`` keeps no plaintext: each group of diagonals is encoded just before the dot
    product that uses it and dropped after, so the segment's memory is one group's plaintexts
    (streaming, at the price of encoding on every query). ``compact`` (default) keeps each limb
    of a diagonal whose prime is below ``2^32`` in 32-bit words (``CompactPlaintext``, which
    the grouped sums read as they are: LoLa's CIFAR network 11.8 → 7.5 GB at the same speed);
    the results are the same bits."""

    def __init__(self, params: _native.Params, seg: Segment, layers: list, lazy: bool = False, compact: bool = True) -> None:
        self.seg = seg
        self.lazy = lazy
        self.params = params
        enc = self.enc = _native.Encoder(params)
        q = self.q = [float(v) for v in params.q]
        self.compact = compact
        scale, level = seg.input_scale, seg.input_level
        self.plain: dict[int, list] = {}
        self.bias: dict[int, list | None] = {}
        self.bias_scale: dict[int, float] = {}
        self.transforms: dict[int, Transform] = {}
        self.schedules: dict[int, _Schedule] = {}
        self.levels: dict[int, int] = {}
        for j, op in enumerate(seg.ops):
            self.levels[j] = level
            if isinstance(op, Linear):
                t = layers[op.layer]
                self.transforms[j] = t
                self.schedules[j] = _Schedule(t)
                self.bias_scale[j] = scale
                if not lazy:
                    pts: list = [None] * len(t.terms)
                    for _, _, ix in t.groups():
                        for i, pt in zip(ix, self._encode_group(j, ix)):
                            pts[i] = pt
                    self.plain[j] = pts
                    self.bias[j] = self._encode_bias(j)
                level -= 1
            elif isinstance(op, Square):
                scale = scale * scale
            elif isinstance(op, Rescale):
                for _ in range(op.primes):
                    scale /= q[level]
                    level -= 1

    def _encode_group(self, j: int, ix) -> list:
        """The plaintexts of one group of op ``j``'s diagonals, at the exact scale ``q_ℓ``."""
        t, level = self.transforms[j], self.levels[j]
        ext = _extended(t, ix)
        values = np.ascontiguousarray(t.vectors[ix])
        if self.compact:
            return self.enc.encode_real_many_compact(values, self.q[level], level, ext)
        return self.enc.encode_real_many(values, self.q[level], level, ext)

    def _encode_bias(self, j: int) -> list | None:
        t = self.transforms[j]
        if t.bias is None:
            return None
        return [self.enc.encode_real(np.ascontiguousarray(b), self.bias_scale[j], self.levels[j] - 1, False) for b in t.bias]

    def run(self, ev: _native.Evaluator, cts: list, galois: _native.GaloisKeys | None, relin: _native.RelinKey | None) -> list:
        """The segment's output ciphertexts for its input ciphertexts ``cts`` (consumed)."""
        return self._ops(ev, self._checked(cts), 0, galois, relin)

    def partial(self, ev: _native.Evaluator, cts: list, galois: _native.GaloisKeys | None) -> list:
        """A shard of a segment whose first op is its transform, split by giant steps: the
        sums of this transform's groups (:meth:`~heinfer.program.transform.Transform.giant_steps`)
        on the segment's inputs ``cts`` (consumed), one ciphertext per output, before folds and
        rescale. :meth:`finish` completes the summed shards."""
        self._first_linear()
        return self._sums(ev, 0, self._checked(cts), galois)

    def finish(self, ev: _native.Evaluator, shards: list[list], galois: _native.GaloisKeys | None, relin: _native.RelinKey | None) -> list:
        """The segment's outputs from the :meth:`partial` results of a partition of its first
        transform's groups (a list per shard, on a segment prepared with
        :meth:`~heinfer.program.transform.Transform.finishing`): their sums — exact, so the
        outputs are bit for bit those of :meth:`run` — then the transform's folds, rescale and
        bias and the segment's other ops."""
        t = self.transforms[self._first_linear()]
        if not shards or any(len(s) != t.n_out for s in shards):
            raise ProtocolError(f"a segment split by giant steps takes {t.n_out} ciphertexts from every shard")
        out = list(shards[0])
        for s in shards[1:]:
            for o, c in enumerate(s):
                ev.add_assign(out[o], c)
        return self._ops(ev, self._finish(ev, 0, out, galois), 1, galois, relin)

    def _checked(self, cts: list) -> list:
        if len(cts) != self.seg.n_input_cts:
            raise ProtocolError(f"segment takes {self.seg.n_input_cts} ciphertexts, got {len(cts)}")
        return cts

    def _first_linear(self) -> int:
        if not self.seg.ops or not isinstance(self.seg.ops[0], Linear):
            raise ProtocolError("only a segment whose first op is its linear layer can be split by giant steps")
        return 0

    def _ops(self, ev: _native.Evaluator, cts: list, start: int, galois, relin) -> list:
        """The segment's ops from ``start`` on, on ``cts``."""
        for j, op in enumerate(self.seg.ops):
            if j < start:
                continue
            if isinstance(op, Linear):
                cts = self._finish(ev, j, self._sums(ev, j, cts, galois), galois)
            elif isinstance(op, Square):
                cts = [ev.square(c) for c in cts]
            elif isinstance(op, Relinearize):
                for c in cts:
                    ev.relinearize_assign(c, relin)
            elif isinstance(op, Rescale):
                for _ in range(op.primes):
                    ev.rescale_many_assign(cts)
            else:
                raise ProtocolError(f"the slot layout cannot run {type(op).__name__}")
        return cts

    def _sums(self, ev: _native.Evaluator, k: int, x: list, galois) -> list:
        """Op ``k``'s transform on ``x`` up to its folds: per output ciphertext, the sum of its
        groups' rotated products (an encryption of zero where none reaches it)."""
        t = self.transforms[k]
        pts = self.plain.get(k)  # None when lazy: each group is encoded just before its use
        if t.replicate:
            x = ev.fold(x, list(t.replicate), galois)
        plan = self.schedules[k]
        # double hoisting: the baby steps stay in Q·P (ModDown once per group below);
        # single: each comes back to Q now, and the products need no special primes
        # (one engine call for every input's baby steps: they run in parallel across the inputs
        # too, which a convolution's few steps at a low level need to keep the cores busy)
        rotate = ev.rotate_hoisted_extended_many if t.hoisting == "double" else ev.rotate_hoisted_many
        babies = plan.babies
        rotated = [c for cs in rotate([x[a] for a, _ in babies], [list(bs) for _, bs in babies], galois) for c in cs] if babies else []
        # the ciphertexts the groups index (see _Schedule): extended baby steps, or the inputs
        # and (single hoisting) the baby steps already back in Q
        sources = {True: rotated, False: x if t.hoisting == "double" else x + rotated}
        out: list = [None] * t.n_out

        def add(o: int, acc) -> None:
            if out[o] is None:
                out[o] = acc
            else:
                ev.add_assign(out[o], acc)

        # the groups' sums DOT_BATCH at a time, in one pass over the shared ciphertexts (each
        # stays in cache across the groups); the giant-step rotations are independent: they
        # run GIANT_BATCH at a time, spread over the cores (one rotation at a low level has
        # too few limbs to use them all)
        pending: list = []
        # encoded per query (lazy): a batch's plaintexts are held at once, so bound their bytes
        limbs = self.levels[k] + 1 + len(self.params.p)
        max_terms = max(1, LAZY_BATCH_BYTES // (self.params.n * limbs * 8)) if pts is None else None
        for kind, batch in _batches(plan.groups, max_terms):
            terms = [idx for _, _, _, idx, _ in batch]
            group_pts = [[pts[i] for i in ix] if pts is not None else self._encode_group(k, ix) for _, _, ix, _, _ in batch]
            dot = ev.dot_plain_extended_groups if kind else ev.dot_plain_groups
            for (o, g, _, _, _), acc in zip(batch, dot(sources[kind], terms, group_pts)):
                if not g:
                    add(o, acc)
                    continue
                pending.append((o, g, acc))
                if len(pending) == GIANT_BATCH:
                    self._rotate_pending(ev, pending, galois, add)
        self._rotate_pending(ev, pending, galois, add)
        for o in range(t.n_out):
            if out[o] is None:  # no weight reaches this ciphertext: an encryption of zero
                out[o] = ev.mul_const(x[0], 0.0, self.q[self.levels[k]])
        return out

    def _finish(self, ev: _native.Evaluator, k: int, out: list, galois) -> list:
        """Op ``k``'s transform after its sums ``out``: folds, rescale, bias."""
        t = self.transforms[k]
        bias = self.bias[k] if not self.lazy else self._encode_bias(k)
        # the folds before the rescale: a key switch adds the same noise at any scale, and at
        # ``Δ·q_ℓ`` it is ``q_ℓ`` times smaller in the result than at ``Δ`` — after the
        # rescale, the folds of a wide dense layer dominated its error (8 folds: ×25)
        # (one engine call for the chain: the pool's workers stay awake between its rotations)
        if t.fold:
            out = ev.fold(out, list(t.fold), galois)
        ev.rescale_many_assign(out)
        if bias is not None:
            for o in range(t.n_out):
                ev.add_plain_assign(out[o], bias[o])
        return out

    @staticmethod
    def _rotate_pending(ev: _native.Evaluator, pending: list, galois, add) -> None:
        """Rotates every ``(o, g, acc)`` of ``pending`` by its ``g`` at once, adds each to
        output ``o`` and empties ``pending``."""
        if pending:
            rots = ev.rotate_many([acc for _, _, acc in pending], [g for _, g, _ in pending], galois)
            for (o, _, _), rot in zip(pending, rots):
                add(o, rot)
            pending.clear()

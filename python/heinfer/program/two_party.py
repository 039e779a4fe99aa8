"""Programs of GAZELLE's two-party protocol: BFV linear layers between garbled-circuit steps.

Layer: ``heinfer.program`` (pure numpy). A :class:`TwoPartyProgram` is a chain of
:class:`TwoPartySegment` (one linear layer each, run by the server on BFV ciphertexts in the
slot layout latency mode chose for it) and :class:`TwoPartyStep` (ReLU, or max-pooling fused
with ReLU, evaluated in a garbled circuit on additive shares mod ``p``, truncating by the
fixed-point plan's shift). Values are integers mod ``p`` with ``input_frac`` fractional bits at
the input and ``output_frac`` at the output (:mod:`heinfer.compiler.fixed_point`);
``input_bound`` (the calibrated maximum times the compiler's head-room, as in latency mode) is
the largest input the client encrypts: beyond it the plan's integers could wrap mod ``p``.

Two modes, as for CKKS programs:

* **latency** (one item per query): each BFV ciphertext holds ``N`` slots in two rows of
  ``N/2``; programs use row 0 (the transforms' ``slots = N/2``) and keep row 1 at zero on the
  server's side; each layer is a :class:`~heinfer.program.transform.Transform` in the slot
  layout latency mode's packing search chose.
* **throughput** (batch-axis shares, up to ``batch_capacity ≤ N`` items per query): element
  ``e`` of a layer's input is ciphertext ``e``, its slot ``i`` holds item ``i``; each layer is a
  :class:`~heinfer.program.weights.LinearStep` with integer weights (``weight_scale`` 1), run
  as scalar multiply-accumulates (no rotation, no rotation key). A step runs one circuit per
  item and activation.

The public part (:meth:`TwoPartyProgram.public`) holds the layouts, step geometry, shifts and
parameters; the layers (the weights) stay with the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from heinfer.program.functions import ClientFunction
from heinfer.program.placement import Placement
from heinfer.program.share_folds import fold_at, fold_slots, row_sum
from heinfer.program.transform import Transform
from heinfer.program.weights import LinearStep

__all__ = ["TwoPartyProgram", "TwoPartySegment", "TwoPartyStep", "clip_range"]


def clip_range(p: int, shift: int) -> tuple[int, int]:
    """The bounds a clip circuit holds modulo ``p`` with a ``shift``-bit truncation: ``(−H,
    p − H − 1)`` with ``H = ⌊(p−1)/2 / 2^shift⌋·2^shift`` (it reconstructs ``x + H``, see
    ``heinfer_2pc::gc::layers``); ``(0, −1)``, an empty range, when ``H`` is 0."""
    big_h = (((p - 1) // 2) >> shift) << shift if shift >= 0 else 0
    return (-big_h, p - big_h - 1) if big_h > 0 else (0, -1)


@dataclass(eq=False)
class TwoPartySegment:
    """One linear layer: the client's shares go into ``gather`` (``gather[c, s]`` is the input
    element in slot ``s`` of ciphertext ``c``, ``-1`` zero); the ``out_size`` results are read
    at ``output``. ``flood_bits``: the server floods the result with ``U[−2^b, 2^b)``.
    ``fold``: rotate-and-add steps both parties apply to their own shares of the result
    before reading it at ``output`` (latency mode; :mod:`heinfer.program.share_folds`): the
    server sends the layer's result unfolded, with masks whose folds are the protocol's.
    ``row_pairs``: the layer's inputs travel two per ciphertext (latency mode): input ``2j``
    in row 0 of the slots of ciphertext ``j``, input ``2j + 1`` in row 1 (:meth:`wire_rows`);
    the server's multipliers hold both rows' diagonals, and each party adds row 1 of its
    share into row 0 (:meth:`read` with ``summed``; :meth:`TwoPartyProgram.rows_summed`)."""

    gather: np.ndarray
    in_size: int
    out_size: int
    output: Placement
    flood_bits: int
    fold: tuple[int, ...] = ()
    row_pairs: bool = False

    @property
    def n_inputs(self) -> int:
        """Input slot vectors of the layer's transform (rows of ``gather``)."""
        return int(self.gather.shape[0])

    @property
    def n_input_cts(self) -> int:
        """Ciphertexts the client encrypts for this segment (half the inputs, rounded up, when
        they travel in row pairs)."""
        return -(-self.n_inputs // 2) if self.row_pairs else self.n_inputs

    def wire_rows(self, rows: np.ndarray, n: int) -> np.ndarray:
        """The ``n_input_cts × n`` slot rows that travel for the input rows ``rows``
        (``n_inputs × n``, row 1 of the slots empty): paired two per ciphertext with
        :attr:`row_pairs`, else as they are."""
        if not self.row_pairs:
            return rows
        half = n // 2
        out = np.zeros((self.n_input_cts, n), dtype=np.int64)
        out[:, :half] = rows[0::2, :half]
        out[: len(rows) // 2, half:] = rows[1::2, :half]
        return out

    @staticmethod
    def batch_axis(in_size: int, out_size: int, flood_bits: int) -> TwoPartySegment:
        """A throughput-mode segment: input element ``e`` in ciphertext ``e``, output ``j`` in
        ciphertext ``j``, items along the slots (``gather`` has one column; the placements
        name slot 0, the first item)."""
        gather = np.arange(in_size, dtype=np.int64).reshape(-1, 1)
        out = Placement(out_size, 1, np.arange(out_size, dtype=np.int64), np.zeros(out_size, dtype=np.int64))
        return TwoPartySegment(gather, in_size, out_size, out, flood_bits)

    def positions(self, elements: np.ndarray, items: int, batch_axis: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(ct, slot)`` index arrays of shape ``(items, len(elements))``: where output element
        ``elements[j]`` of item ``i`` is (latency: one item, at the placement; throughput: in
        ciphertext ``elements[j]``, slot ``i``)."""
        elements = np.asarray(elements, dtype=np.int64)
        if not batch_axis:
            return self.output.ct[elements][None, :], self.output.slot[elements][None, :]
        ct = np.broadcast_to(self.output.ct[elements][None, :], (items, len(elements)))
        return ct, np.broadcast_to(np.arange(items, dtype=np.int64)[:, None], ct.shape)

    def read(self, rows: np.ndarray, items: int, batch_axis: bool, p: int, summed: bool = False) -> np.ndarray:
        """One party's residues of the outputs (``items × out_size``) from the result's slots
        (``n_cts × N``): read at the placement, after the segment's :attr:`fold` on the shares
        and, with ``summed``, after adding row 1 of the slots into row 0
        (:meth:`TwoPartyProgram.rows_summed`)."""
        ct, slot = self.positions(np.arange(self.out_size), items, batch_axis)
        if summed:
            rows = row_sum(rows, self.output.slots, p)
        if not self.fold:
            return rows[ct, slot]
        return fold_at(rows[:, : self.output.slots], ct[0], slot[0], self.fold, p)[None, :]

    def folded(self, rows: np.ndarray, p: int) -> np.ndarray:
        """One party's residues of the result's slots (``n_cts × N``) with the segment's
        :attr:`fold` applied to each row of ``output.slots`` slots that outputs are read from
        (the rows unchanged when there is none)."""
        if not self.fold:
            return rows
        out = np.array(rows, dtype=np.int64)
        s = self.output.slots
        out[..., :s] = fold_slots(out[..., :s], self.fold, p)
        return out

    def input_rows(self, values: np.ndarray, n: int, batch_axis: bool) -> np.ndarray:
        """The slot rows (``int64``, ``n_input_cts × n``) of the input elements ``values``
        (``items × in_size``, signed or residues): latency places the one item by ``gather``
        (row 0); throughput puts element ``e`` of item ``i`` in slot ``i`` of ciphertext ``e``."""
        rows = np.zeros((self.n_inputs, n), dtype=np.int64)
        if batch_axis:
            rows[:, : values.shape[0]] = values[:, self.gather[:, 0]].T
        else:
            g = self.gather
            rows[:, : g.shape[1]] = np.where(g >= 0, values[0][np.maximum(g, 0)], 0)
        return rows


@dataclass(eq=False)
class TwoPartyStep:
    """A garbled-circuit step between segments ``k`` and ``k+1``: ``kind`` ``"relu"`` (one
    instance per element), ``"maxpool_relu"`` (instance ``j`` is the max of the ReLUs of
    elements ``groups[j]``; windows may share elements, see :meth:`sources`), ``"clip"`` (one
    instance per element, clamped to ``[lo, hi]``: ONNX's ``Clip``, e.g. ReLU6; ``lo`` and
    ``hi`` are signed integers at the layer output's fixed-point scale, the rounding's half
    ulp included) or ``"square"`` (one instance per element: the circuit only truncates, then
    GAZELLE's AHE square protocol squares the shares — the client encrypts its share ``a`` and
    ``a²``, the server adds ``2b·a + b²`` for its share ``b``); the result is truncated by
    ``shift`` bits. ``pool`` (optional): disjoint windows of instances that both parties then
    sum on their own shares (an average pool, whose ``1/k`` the next layer's weights carry).

    ``keep = (before, after)``: the first ``before`` and last ``after`` input values pass
    through (a tensor that lives across the step, e.g. the skip of a residual block whose
    values may be negative): a second circuit only truncates them (GAZELLE's truncation, as
    before a square), and the step's output is ``[kept before, the layer's outputs, kept
    after]``. ``groups`` index the whole input vector (they avoid the kept values)."""

    kind: str
    shift: int
    in_size: int
    groups: np.ndarray
    pool: np.ndarray | None = None
    lo: int = 0
    hi: int = 0
    keep: tuple[int, int] = (0, 0)

    @property
    def window(self) -> int:
        """Inputs per instance."""
        return int(self.groups.shape[1])

    @property
    def circuit_kind(self) -> str:
        """The garbled circuit's kind (``heinfer.twoparty.LayerCircuit``)."""
        return "truncate" if self.kind == "square" else self.kind

    def circuit_args(self, p: int) -> tuple:
        """The arguments of ``heinfer.twoparty.LayerCircuit(kind, p, shift, window, lo, hi)``
        for this step modulo ``p``."""
        return (self.circuit_kind, int(p), self.shift, self.window, self.lo, self.hi)

    @property
    def instances(self) -> int:
        """Circuit instances."""
        return int(self.groups.shape[0])

    @property
    def out_size(self) -> int:
        """Values passed to the next segment: the instances, or their pooled sums, and the
        values kept."""
        return int(self.groups.shape[0] if self.pool is None else self.pool.shape[0]) + sum(self.keep)

    @property
    def kept(self) -> np.ndarray:
        """The indices of the input values that pass through (``int64``; see ``keep``)."""
        before, after = self.keep
        return np.concatenate([np.arange(before), np.arange(self.in_size - after, self.in_size)]).astype(np.int64)

    def parts(self, p: int) -> list[tuple[tuple, np.ndarray]]:
        """The step's circuits modulo ``p``: ``(LayerCircuit arguments, entries)`` with
        ``entries`` ``(instances, window)`` indices into the input vector — the layer's
        circuit, then (with values kept) a truncation of one value per instance."""
        out = [(self.circuit_args(p), self.groups)]
        if sum(self.keep):
            out.append((("truncate", int(p), self.shift, 1, 0, 0), self.kept.reshape(-1, 1)))
        return out

    def assemble(self, outs: list[np.ndarray], p: int) -> np.ndarray:
        """A party's shares of the step's outputs from its shares of each part's outputs
        (``int64`` in ``[0, p)``, ``(items, instances)`` per part, as :meth:`parts` orders
        them): the layer's, summed over :attr:`pool` when there is one (additive shares of the
        sums), between the kept values."""
        main = outs[0] if self.pool is None else outs[0][..., self.pool].sum(axis=-1) % p
        if not sum(self.keep):
            return main
        before = self.keep[0]
        return np.concatenate([outs[1][..., :before], main, outs[1][..., before:]], axis=-1)

    def sources(self, items: int) -> np.ndarray | None:
        """The value each circuit input of a query of ``items`` items reads, numbered from 0
        (``uint32``, item-major like the circuits), for the server's masks: one mask per value,
        so windows that share an element (overlapping, or a padded entry repeating one) see
        one share of it. ``None`` when no two inputs of an item read the same element."""
        entries = self.groups.reshape(-1)
        values, index = np.unique(entries, return_inverse=True)
        if len(values) == len(entries):
            return None
        return (np.arange(items, dtype=np.int64)[:, None] * len(values) + index.reshape(1, -1)).reshape(-1).astype(np.uint32)


@dataclass(eq=False)
class TwoPartyProgram:
    """A compiled network for the two-party protocol. ``layers`` (one per segment: transforms
    in latency mode, :class:`LinearStep` in throughput mode) is ``None`` in the public part.
    ``batch_capacity``: the most items of one query (1 in latency mode)."""

    bfv: dict
    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    input_frac: int
    output_frac: int
    input_bound: float
    pre: list[ClientFunction]
    segments: list[TwoPartySegment]
    steps: list[TwoPartyStep]
    post: list[ClientFunction]
    rotation_steps: list[int]
    layers: list[Transform] | list[LinearStep] | None = None
    meta: dict = field(default_factory=dict)
    mode: str = "latency"
    batch_capacity: int = 1

    protocol = "two-party"

    @property
    def batch_axis(self) -> bool:
        """True in throughput mode: items along the slots, one ciphertext per element."""
        return self.mode == "throughput"

    @property
    def plain_modulus(self) -> int:
        """The plaintext prime ``p`` of every share and ciphertext."""
        return int(self.bfv["plain_modulus"])

    def squared_input(self, k: int) -> bool:
        """True when segment ``k``'s input is the square of the previous step's output: the
        client then encrypts its share ``a`` and ``a²`` (:meth:`rows_packed`, :meth:`input_lists`)."""
        return k > 0 and self.steps[k - 1].kind == "square"

    def rows_packed(self, k: int) -> bool:
        """True when segment ``k``'s squared input travels in both rows of BFV's slots (latency
        mode): ``a²`` in row 0 and ``a`` in row 1 of each ciphertext, so the layer's rotations
        turn both at once and one multiplier holds ``W``'s diagonal and its cross-term
        diagonal (:meth:`rows_summed`)."""
        return self.squared_input(k) and not self.batch_axis

    def rows_summed(self, k: int) -> bool:
        """True when segment ``k``'s result holds its outputs in two parts, one in each row of
        the slots (a :meth:`rows_packed` square, or inputs in :attr:`TwoPartySegment.row_pairs`).
        The sum is linear, so the parties add row 1 into row 0 on their own shares (like
        :mod:`~heinfer.program.share_folds`' folds) instead of the server's row swap: the
        server's masks make each output's two parts sum to the protocol's mask, and the client
        decrypts two uniform parts whose sum is its share."""
        return not self.batch_axis and (self.rows_packed(k) or self.segments[k].row_pairs)

    def input_lists(self, k: int) -> int:
        """Ciphertext lists the client sends for segment ``k``: two (``Enc(a²)``, ``Enc(a)``)
        for a squared input in throughput mode, else one."""
        return 2 if self.squared_input(k) and self.batch_axis else 1

    @property
    def galois_key_count(self) -> int:
        """Galois keys the client sends: one per rotation step."""
        return len(self.rotation_steps)

    @property
    def is_public(self) -> bool:
        """True when the weights are not here."""
        return self.layers is None

    def to_bytes(self) -> bytes:
        """The program in heinfer's program format (kind 3 with the transforms, 2 without)."""
        from heinfer.program.format import dump

        return dump(self)

    @property
    def id(self) -> str:
        """SHA-256 (hex) of the canonical public part: both parties check it."""
        from heinfer.program.format import program_id

        return program_id(self)

    def public(self) -> TwoPartyProgram:
        """The client's part: everything but the transforms."""
        # the search's plans, the compiler's simulated error and the errors behind its choice of
        # parameters are derived from the weights (the parameters chosen are public: ``bfv``)
        server_only = ("plans", "simulated_error", "bfv_choice")
        return replace(self, layers=None, meta={k: v for k, v in self.meta.items() if k not in server_only})

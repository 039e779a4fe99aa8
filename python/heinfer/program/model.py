"""The compiled program: one model for both layouts, in two artifacts.

Layer: ``heinfer.program`` (the contract between compiler, runtime and protocol; imports no
compiler, runtime or protocol). A program is a list of :class:`Segment` — each with an input
:class:`Layout` (the batch axis or slots), typed ops (:mod:`heinfer.program.ops`) and the
level, scale, bound and precision of its output — and between segments, :class:`Step` s where
the client takes part. :class:`PublicProgram` is what a client holds: parameters, layouts,
shapes, bounds, step functions, the key manifest; no weights, no biases. :class:`Program`
(the server's) adds the layers' weights. Both are identified by :attr:`PublicProgram.id`, the
SHA-256 of the public part's canonical bytes (:mod:`heinfer.program.format`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from heinfer.program.functions import ClientFunction
from heinfer.program.ops import Op, Relinearize, Square
from heinfer.program.placement import Placement
from heinfer.program.transform import Transform
from heinfer.program.weights import LinearStep

__all__ = ["Layout", "Segment", "op_input_parts", "op_parts", "Step", "PublicProgram", "Program", "galois_element", "PUBLIC_META"]

#: Meta fields that describe the compilation, not the weights: the public program keeps these.
PUBLIC_META = ("mode", "lazy", "prime_bits", "strategy", "levels", "cost_source", "auto", "features_sha256")


@dataclass(eq=False)
class Layout:
    """Where a segment's input values live. ``kind="batch"``: item ``b`` of a batch in slot or
    coefficient ``b`` (``packing`` ``"real"``, ``"complex"`` or ``"coeff"``), one ciphertext
    per tensor element. ``kind="slots"``: one item across the slots of a few ciphertexts;
    ``gather[c, s]`` is the input element the client puts in slot ``s`` of ciphertext ``c``
    (``-1``: zero; an element may fill many slots)."""

    kind: str
    packing: str
    gather: np.ndarray | None = None


def op_parts(ops: list[Op]) -> list[int]:
    """Polynomials per ciphertext after each op: a square takes ``k`` parts to ``2k − 1``,
    a relinearization back to 2, every other op keeps them (a linear layer is linear in
    each part)."""
    parts, out = 2, []
    for op in ops:
        if isinstance(op, Square):
            parts = 2 * parts - 1
        elif isinstance(op, Relinearize):
            parts = 2
        out.append(parts)
    return out


def op_input_parts(ops: list[Op]) -> list[int]:
    """Polynomials per ciphertext each op receives (:func:`op_parts` shifted by one: a
    segment's input has 2)."""
    return [2, *op_parts(ops)[:-1]]


@dataclass(eq=False)
class Segment:
    """Server ops between two client interactions.

    The client encrypts ``in_size`` values in ``layout`` at ``input_level`` and
    ``input_scale``; the server runs ``ops``; the ``out_size`` results come back at
    ``output_level`` and ``output_scale`` (slot layout: at ``output``'s positions).
    ``output_bound``: the largest ``|value|`` planned; ``precision``: the absolute precision the
    program states for the results — the client releases nothing finer (noise flooding and
    rounding). ``predicted_s``: the cost model's server seconds."""

    layout: Layout
    in_size: int
    input_level: int
    input_scale: float
    ops: list[Op]
    out_size: int
    output_level: int
    output_scale: float
    output_bound: float
    precision: float
    output: Placement | None = None
    predicted_s: float = 0.0

    @property
    def n_input_cts(self) -> int:
        """Ciphertexts the client encrypts for this segment."""
        return self.in_size if self.layout.kind == "batch" else len(self.layout.gather)

    @property
    def output_parts(self) -> int:
        """Polynomials per output ciphertext: 2, 3 after a square not yet relinearized, 5
        after a square of such a square (an open tail, :mod:`heinfer.compiler.plan`)."""
        return op_parts(self.ops)[-1] if self.ops else 2

    @property
    def n_output_cts(self) -> int:
        """Ciphertexts the segment returns."""
        return self.out_size if self.output is None else self.output.n_cts


@dataclass(eq=False)
class Step:
    """A round between two segments. ``protocol="client-aided"`` (nGraph-HE2 §4.1): the
    client decrypts the ``in_size`` values, applies ``functions`` in order and encrypts the
    ``out_size`` results for the next segment."""

    functions: list[ClientFunction]
    in_size: int
    out_size: int
    protocol: str = "client-aided"

    def apply(self, x: np.ndarray) -> np.ndarray:
        """The step on plaintext values: ``(batch, in_size) → (batch, out_size)``."""
        for f in self.functions:
            x = f.apply(x)
        return x


def galois_element(step: int, log_n: int) -> int:
    """The Galois element of a rotation by ``step`` slots: ``5^step mod 2N`` (negative steps
    as ``step mod N/2``)."""
    n = 1 << log_n
    return pow(5, step % (n // 2), 2 * n)


@dataclass(eq=False)
class PublicProgram:
    """What a client needs: see the module documentation. ``input_bound``: the largest
    ``|value|`` the client encrypts after pre-processing (the scales were planned for it).
    ``lanes``: items per ciphertext in the slot layout (a power of two; 1 on the batch axis).
    Item ``j`` of a query lives in the slots ``≡ j (mod lanes)``: the gather maps and output
    placements name lane 0, every rotation step is a multiple of ``lanes`` and every plaintext
    repeats each value ``lanes`` times, so the server's work on a ciphertext is the work on
    one item, done for ``lanes`` items at once (see :mod:`heinfer.compiler.latency.lanes`)."""

    params: dict
    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    input_bound: float
    pre: list[ClientFunction]
    segments: list[Segment]
    steps: list[Step]
    post: list[ClientFunction]
    needs_relin_key: bool
    rotation_steps: list[int]
    meta: dict = field(default_factory=dict)
    lanes: int = 1

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ properties
    @property
    def mode(self) -> str:
        """``"throughput"`` (batch-axis input) or ``"latency"`` (slot input)."""
        return "throughput" if self.segments[0].layout.kind == "batch" else "latency"

    @property
    def packing(self) -> str:
        """The first segment's packing: ``real``/``complex``/``coeff`` or ``slots``."""
        return self.segments[0].layout.packing

    @property
    def slots(self) -> int:
        """Slots per ciphertext (``N/2``)."""
        return 1 << (int(self.params["log_n"]) - 1)

    @property
    def batch_capacity(self) -> int:
        """Items per query: :attr:`lanes` in the slot layout (one per lane); the slots (real
        packing) or ``N`` (complex: two items per slot; coefficient: one per coefficient) on
        the batch axis."""
        if self.packing == "slots":
            return self.lanes
        return self.slots * (1 if self.packing == "real" else 2)

    @property
    def security(self) -> int:
        """Classical security level in bits."""
        return int(self.params["security"])

    @property
    def key_manifest(self) -> dict:
        """The evaluation keys a client generates: a relinearization key when a segment
        relinearizes, and rotation keys for exactly the steps the kernels use (with their
        Galois elements)."""
        log_n = int(self.params["log_n"])
        return {
            "relinearization": self.needs_relin_key,
            "rotation_steps": list(self.rotation_steps),
            "galois_elements": [galois_element(s, log_n) for s in self.rotation_steps],
        }

    @property
    def predicted_s(self) -> float:
        """Predicted server seconds per query (the cost model's sum over segments)."""
        return float(sum(s.predicted_s for s in self.segments))

    @property
    def id(self) -> str:
        """SHA-256 (hex) of the public program's canonical bytes: both sides check it."""
        from heinfer.program.format import program_id

        return program_id(self)

    # ------------------------------------------------------------------ artifacts
    def public(self) -> PublicProgram:
        """The public program (itself)."""
        return self

    def to_bytes(self) -> bytes:
        """The program in the versioned format (:func:`heinfer.program.load` reads it)."""
        from heinfer.program.format import dump

        return dump(self)

    @staticmethod
    def from_bytes(data: bytes) -> PublicProgram:
        """Validates and decodes a program of either kind (:func:`heinfer.program.load`)."""
        from heinfer.program.format import load

        return load(data)

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Checks internal consistency; raises :class:`CompileError` naming the problem."""
        from heinfer.program.validate import validate_public

        validate_public(self)


@dataclass(eq=False)
class Program(PublicProgram):
    """The server's program: the public part plus ``layers`` — the weights of every
    :class:`~heinfer.program.ops.Linear` op (a :class:`LinearStep` on the batch axis, a
    :class:`Transform` in slots) — and ``plans``, what the compiler chose for an op (kernel,
    modulus, predicted time), keyed ``"segment.op"`` (for :func:`heinfer.explain`)."""

    layers: list[LinearStep | Transform] = field(default_factory=list)
    plans: dict = field(default_factory=dict)

    def public(self) -> PublicProgram:
        """The public program: everything but the weights (and the plans and meta derived
        from them)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(PublicProgram)}
        fields["meta"] = {k: v for k, v in self.meta.items() if k in PUBLIC_META}
        return PublicProgram(**fields)

    @property
    def id(self) -> str:
        """The id of the public part (see :attr:`PublicProgram.id`), computed once."""
        if "_id" not in self.__dict__:
            self.__dict__["_id"] = self.public().id
        return self.__dict__["_id"]

    def validate(self) -> None:
        """Checks the public part and that every layer fits its ops."""
        from heinfer.program.validate import validate_public, validate_weights

        validate_public(self)
        validate_weights(self)


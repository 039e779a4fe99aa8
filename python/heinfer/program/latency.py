"""The compiled program of latency mode (one item per query, packed across slots).

A :class:`LatencyProgram` is the contract between the latency compiler, the runtime and the
protocol, like :class:`~heinfer.program.model.Program` for throughput mode. Each
:class:`LatencySegment` holds the client's input gather map (which input element goes into
which slot of which ciphertext), its steps — lowered
:class:`~heinfer.compiler.latency.transform.Transform` kernels and squares, one level each —
and the placement of its output. Client functions (ReLU, max-pooling, …) run between
segments on decrypted values, as in throughput mode. It serializes into the same versioned
``.npz`` archive as throughput programs (``mode = "latency"`` in the manifest).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from heinfer.compiler.ir import ClientFunction
from heinfer.compiler.latency.cost import key_bytes
from heinfer.compiler.latency.layout import Placement
from heinfer.compiler.latency.transform import Transform
from heinfer.errors import CompileError
from heinfer.program.model import check_io, check_params

__all__ = ["LatencyProgram", "LatencySegment", "LatencyStep"]


@dataclass(eq=False)
class LatencyStep:
    """One server step at input level ``level``: ``op`` is ``"transform"`` (``transform``
    set; products, one rescale, fold, bias) or ``"square"`` (square, relinearize, rescale).
    ``plan`` records the kernel the search chose (for :func:`heinfer.explain`)."""

    op: str
    level: int
    transform: Transform | None = None
    plan: dict = field(default_factory=dict)


@dataclass(eq=False)
class LatencySegment:
    """Server steps between two client interactions.

    ``gather[c, s]``: index of the segment-input element the client puts in slot ``s`` of
    ciphertext ``c`` (``-1``: zero); the client encrypts at ``input_level``. ``output``: where
    the segment's result elements are; ``output_bound``: the largest value the compiler
    expects there (the client refuses to decode beyond it)."""

    in_size: int
    input_level: int
    gather: np.ndarray
    steps: list[LatencyStep]
    output: Placement
    output_bound: float
    predicted_s: float = 0.0

    @property
    def n_input_cts(self) -> int:
        """Ciphertexts the client encrypts for this segment."""
        return len(self.gather)


@dataclass(eq=False)
class LatencyProgram:
    """A latency-mode program; see the module documentation. ``batch_capacity`` is 1: every
    item is its own query (``heinfer.infer`` sends them one after the other)."""

    params: dict
    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    input_bound: float
    pre: list[ClientFunction]
    segments: list[LatencySegment]
    steps: list[list[ClientFunction]]
    post: list[ClientFunction]
    galois_steps: list[int]
    needs_relin_key: bool
    meta: dict = field(default_factory=dict)
    mode: str = "latency"
    packing: str = "slots"

    def __post_init__(self) -> None:
        self.validate()

    @property
    def slots(self) -> int:
        """Slots per ciphertext (``N/2``)."""
        return 1 << (int(self.params["log_n"]) - 1)

    @property
    def batch_capacity(self) -> int:
        """Items per query: one."""
        return 1

    @property
    def security(self) -> int:
        """Classical security level in bits."""
        return int(self.params["security"])

    @property
    def key_manifest(self) -> dict:
        """The evaluation keys a client generates: exactly the rotations the kernels use,
        and a relinearization key when a segment squares."""
        return {"relinearization": self.needs_relin_key, "galois_elements": [], "rotation_steps": list(self.galois_steps)}

    def key_bytes(self) -> dict:
        """Sizes of the evaluation keys: rotation-key ``count``, and bytes on the wire and in
        the server's memory for the rotation and relinearization keys."""
        p = self.params
        wire, mem = key_bytes(int(p["log_n"]), list(p["log_q"]), list(p["log_p"]))
        n, r = len(self.galois_steps), int(self.needs_relin_key)
        return {"count": n, "rotation_wire": wire * n, "rotation_memory": mem * n, "relinearization_wire": wire * r, "relinearization_memory": mem * r}

    @property
    def predicted_s(self) -> float:
        """Predicted server seconds per query (the cost model's sum over segments)."""
        return float(sum(s.predicted_s for s in self.segments))

    def to_bytes(self) -> bytes:
        """The program in the versioned archive format (:func:`heinfer.program.load` reads it)."""
        from heinfer.program.latency_format import dump

        return dump(self)

    @staticmethod
    def from_bytes(data: bytes) -> LatencyProgram:
        """Validates and decodes a program archive (either mode; see :func:`heinfer.program.load`)."""
        from heinfer.program.serialize import load

        return load(data)

    def validate(self) -> None:
        """Checks internal consistency; raises :class:`CompileError` naming the problem."""

        def bad(msg: str) -> None:
            raise CompileError(f"invalid latency program: {msg}")

        p = self.params
        check_params(p, bad, need_special=True)
        levels = len(p["log_q"])
        S = self.slots
        if not self.segments or len(self.segments) != len(self.steps) + 1:
            bad(f"{len(self.segments)} segments for {len(self.steps)} client steps")
        if any(not isinstance(s, int) or not 0 < s < S for s in self.galois_steps):
            bad("rotation steps out of range")
        steps = set(self.galois_steps)
        for i, seg in enumerate(self.segments):
            g = seg.gather
            if g.ndim != 2 or g.shape[1] != S or g.dtype != np.int64 or len(g) == 0:
                bad(f"segment {i}: gather map of shape {g.shape}")
            if g.min() < -1 or g.max() >= seg.in_size:
                bad(f"segment {i}: gather map names an element outside the input of {seg.in_size}")
            if not 0 <= seg.input_level < levels or seg.input_level != len(seg.steps):
                bad(f"segment {i}: input level {seg.input_level} for {len(seg.steps)} steps")
            if not (np.isfinite(seg.output_bound) and seg.output_bound > 0):
                bad(f"segment {i}: output bound {seg.output_bound}")
            n = len(g)
            for j, st in enumerate(seg.steps):
                if st.level != seg.input_level - j:
                    bad(f"segment {i} step {j}: level {st.level}, expected {seg.input_level - j}")
                if st.op == "transform":
                    t = st.transform
                    if t is None or t.n_in != n or t.slots != S:
                        bad(f"segment {i} step {j}: transform does not take {n} ciphertexts of {S} slots")
                    if not t.rotation_steps() <= steps:
                        bad(f"segment {i} step {j}: rotations without keys")
                    n = t.n_out
                elif st.op == "square":
                    if not self.needs_relin_key:
                        bad(f"segment {i} squares without a relinearization key")
                else:
                    bad(f"segment {i} step {j}: unknown op {st.op!r}")
            if seg.output.n_cts != n or seg.output.slots != S:
                bad(f"segment {i}: output placement over {seg.output.n_cts} ciphertexts, the steps give {n}")
        for i in range(len(self.steps)):
            fns = self.steps[i]
            size_out = int(np.prod(fns[-1].out_shape)) if fns else self.segments[i].output.size
            if fns and int(np.prod(fns[0].in_shape)) != self.segments[i].output.size:
                bad(f"client step {i} takes {int(np.prod(fns[0].in_shape))} values, segment {i} gives {self.segments[i].output.size}")
            if size_out != self.segments[i + 1].in_size:
                bad(f"client step {i} gives {size_out} values, segment {i + 1} takes {self.segments[i + 1].in_size}")
        if not (isinstance(self.input_bound, float) and np.isfinite(self.input_bound) and self.input_bound > 0):
            bad(f"input bound {self.input_bound!r} (a finite positive number)")
        check_io(self, self.segments[0].in_size, self.segments[-1].output.size, bad)

"""The dataclasses of a compiled program (see :mod:`heinfer.program`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction
from heinfer.errors import CompileError

__all__ = ["ClientStep", "Instr", "LinearStep", "Program", "Segment"]

#: Version of the program format; :func:`heinfer.program.load` refuses any other.
FORMAT_VERSION = 1

#: Server instructions.
OPS = ("linear", "square", "relinearize", "rescale", "drop")


@dataclass(eq=False)
class LinearStep:
    """A batch-axis linear layer: ``y = matrix @ x + bias``.

    The server quantizes ``matrix`` to integers at ``weight_scale`` (``Δ_w``) for every query
    (after folding in the hiding scales of the client-aided protocol) and evaluates it with
    ``digits`` digits per residue (see ``heinfer_kernels::linear``).
    """

    name: str
    matrix: sp.csr_matrix
    bias: np.ndarray | None
    weight_scale: float
    digits: int

    @property
    def in_size(self) -> int:
        """Number of inputs."""
        return int(self.matrix.shape[1])

    @property
    def out_size(self) -> int:
        """Number of outputs."""
        return int(self.matrix.shape[0])


@dataclass(frozen=True)
class Instr:
    """One server instruction: ``linear`` (``arg`` = index into ``Program.layers``),
    ``square``, ``relinearize``, ``rescale`` (``arg`` = number of primes), or ``drop``
    (``arg`` = the level to drop to, without scaling)."""

    op: str
    arg: int = 0


@dataclass(eq=False)
class Segment:
    """A run of server instructions between two client interactions.

    The client encrypts the segment's ``in_size`` inputs at ``input_level`` and
    ``input_scale``; the server runs ``instrs``; the ``out_size`` results (at ``output_level``)
    go to the next client step or to the client as the answer. ``output_bound`` is the
    largest ``|value|`` the compiler planned for (the client refuses results beyond it),
    ``predicted_error`` the compiler's bound on the absolute error of each result.
    """

    in_size: int
    input_level: int
    input_scale: float
    instrs: list[Instr]
    out_size: int
    output_level: int
    output_bound: float
    predicted_error: float


@dataclass(eq=False)
class ClientStep:
    """A client-aided round (nGraph-HE2 §4.1) between two segments.

    The client applies ``functions`` (in order; at most one grouping function — max-pooling
    or softmax) to the decrypted values. ``hide_scale``: the server multiplies the values of
    each *component* (``components[j]`` for input ``j``; values pooled together share one) by
    a random positive factor in ``[1/hide_range, hide_range]`` folded into the weights around
    the step — exact for positively homogeneous functions.
    """

    functions: list[ClientFunction]
    in_size: int
    out_size: int
    hide_scale: bool
    components: np.ndarray
    out_components: np.ndarray

    @property
    def grouping(self) -> ClientFunction | None:
        """The max-pooling or softmax function of the step, if any."""
        return next((f for f in self.functions if f.groups is not None), None)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """The step on plaintext values: ``(batch, in_size) → (batch, out_size)``."""
        for f in self.functions:
            x = f.apply(x)
        return x


@dataclass(eq=False)
class Program:
    """A compiled network (throughput mode): see :mod:`heinfer.program`."""

    mode: str
    params: dict
    packing: str
    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    input_bound: float
    pre: list[ClientFunction]
    segments: list[Segment]
    steps: list[ClientStep]
    post: list[ClientFunction]
    layers: list[LinearStep]
    hide_range: float
    needs_relin_key: bool
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def slots(self) -> int:
        """Slots per ciphertext (``N/2``)."""
        return 1 << (int(self.params["log_n"]) - 1)

    @property
    def batch_capacity(self) -> int:
        """Items per query: the slots (real packing), or ``N`` (complex packing: two items
        per slot; coefficient packing: one item per coefficient)."""
        return self.slots * (1 if self.packing == "real" else 2)

    def to_bytes(self) -> bytes:
        """The program in its versioned byte format (:func:`heinfer.program.serialize.dump`)."""
        from heinfer.program.serialize import dump

        return dump(self)

    @staticmethod
    def from_bytes(data: bytes) -> Program:
        """Validates and decodes a program (:func:`heinfer.program.serialize.load`)."""
        from heinfer.program.serialize import load

        return load(data)

    @property
    def key_manifest(self) -> dict:
        """The evaluation keys a client must generate for this program: throughput mode
        needs no rotation, and a relinearization key only when a segment squares twice."""
        return {"relinearization": self.needs_relin_key, "galois_elements": []}

    @property
    def security(self) -> int:
        """Classical security level in bits."""
        return int(self.params["security"])

    def validate(self) -> None:
        """Checks internal consistency; raises :class:`CompileError` naming the problem."""

        def bad(msg: str) -> None:
            raise CompileError(f"invalid program: {msg}")

        if self.mode != "throughput":
            bad(f"mode {self.mode!r}")
        if self.packing not in ("real", "complex", "coeff"):
            bad(f"packing {self.packing!r}")
        p = self.params
        check_params(p, bad, need_special=False)
        if not self.segments or len(self.segments) != len(self.steps) + 1:
            bad(f"{len(self.segments)} segments for {len(self.steps)} client steps")
        check_io(self, self.segments[0].in_size, self.segments[-1].out_size, bad)
        finite = _positive_finite
        if not finite(self.input_bound) or not (finite(self.hide_range) and self.hide_range >= 1):
            bad("input bound and hiding range must be finite and positive")
        levels = len(p["log_q"])
        for i, s in enumerate(self.segments):
            if not all(finite(v) for v in (s.input_scale, s.output_bound, s.predicted_error)) or s.input_scale < 1:
                bad(f"segment {i}: scale, bound and predicted error must be finite and positive")
            if not (0 <= s.output_level <= s.input_level < levels):
                bad(f"segment {i} levels {s.input_level} → {s.output_level} (top {levels - 1})")
            for ins in s.instrs:
                if ins.op not in OPS:
                    bad(f"segment {i}: unknown instruction {ins.op!r}")
                if ins.op == "linear" and not 0 <= ins.arg < len(self.layers):
                    bad(f"segment {i}: layer {ins.arg} does not exist")
                if ins.op == "relinearize" and not self.needs_relin_key:
                    bad(f"segment {i} relinearizes without a relinearization key")
        for i, st in enumerate(self.steps):
            if st.in_size != self.segments[i].out_size or st.out_size != self.segments[i + 1].in_size:
                bad(f"client step {i} sizes {st.in_size} → {st.out_size} do not chain")


def check_params(p: dict, bad, need_special: bool) -> None:
    """Calls ``bad(message)`` unless ``p`` names prime sizes, a ring degree 2^11..2^16 and a
    security level (and special primes when ``need_special``: rotations need them)."""
    if not _bit_sizes(p.get("log_q"), nonempty=True) or not _bit_sizes(p.get("log_p"), nonempty=need_special):
        bad(f"prime sizes in {p}" + (" (this mode needs special primes)" if need_special else ""))
    if not isinstance(p.get("log_n"), int) or isinstance(p["log_n"], bool) or not 11 <= p["log_n"] <= 16:
        bad(f"ring degree in {p}")
    if p.get("security") not in (128, 192, 256):
        bad(f"security {p.get('security')!r}")


def check_io(program, first_size: int, last_size: int, bad) -> None:
    """Calls ``bad(message)`` unless the program's input and output shapes agree with its
    pre- and post-processing functions and with its first and last segments' sizes."""
    pre, post = program.pre, program.post
    if pre and int(np.prod(pre[0].in_shape)) != int(np.prod(program.input_shape)):
        bad(f"input shape {tuple(program.input_shape)} for a pre-processing step taking {tuple(pre[0].in_shape)}")
    if post and int(np.prod(post[-1].out_shape)) != int(np.prod(program.output_shape)):
        bad(f"output shape {tuple(program.output_shape)} for a post-processing step giving {tuple(post[-1].out_shape)}")
    first_in = int(np.prod(pre[-1].out_shape)) if pre else int(np.prod(program.input_shape))
    if first_in != first_size:
        bad(f"input of {first_in} values for a first segment of {first_size}")
    last_out = int(np.prod(post[0].in_shape)) if post else int(np.prod(program.output_shape))
    if last_out != last_size:
        bad(f"last segment gives {last_size} values, the output needs {last_out}")


def _bit_sizes(v: object, nonempty: bool) -> bool:
    """Whether ``v`` is a list of prime bit sizes (ints in 10..=62), non-empty if asked."""
    return (
        isinstance(v, list)
        and (bool(v) or not nonempty)
        and all(isinstance(b, int) and not isinstance(b, bool) and 10 <= b <= 62 for b in v)
    )


def _positive_finite(v: object) -> bool:
    """Whether ``v`` is a finite positive number."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v)) and v > 0

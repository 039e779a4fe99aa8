"""The shard plan: how each segment of a program is spread over the workers of a cluster.

Layer: ``heinfer.cluster`` (Python over the program; sizes from the native parameters). Two ways to shard a batch-axis
segment, both exact (each output ciphertext is computed by the same kernel on the same
inputs as in-process, so the results are bit-for-bit those of :class:`heinfer.Server`):

* ``queries`` — the whole segment runs on one worker; concurrent queries go to different
  workers (the least busy first). Bytes moved: the segment's input and output once.
* ``rows`` — a segment with exactly one linear layer is split into output-row groups, one
  per worker; ops before the layer (element-wise on its inputs) run on every worker, ops
  after it on each group's ciphertexts; the driver concatenates the groups. Bytes moved:
  the input to every worker, the output once.

``split="auto"`` picks ``rows`` for a segment when the compute it saves on one query exceeds
the extra input it ships, under the stated :class:`NetworkModel` and the analytic costs of
:mod:`heinfer.compiler.cost`; ``queries`` otherwise. Slot-layout (latency) segments run as
``queries``: splitting them by output-channel groups or giant steps is not supported yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from heinfer.compiler.cost import BATCH_UNITS
from heinfer.errors import NotSupportedYetError
from heinfer.program.model import Program
from heinfer.program.ops import Linear
from heinfer.program.rounding import output_drop_bits
from heinfer.runtime.executor import native_params

__all__ = ["SPLITS", "NetworkModel", "SegmentShards", "ShardPlan", "row_groups", "shard_plan"]

#: The sharding choices of :func:`shard_plan`.
SPLITS = ("auto", "queries", "rows")
#: Sharding modes of the roadmap that are named but not implemented yet.
NOT_YET = {
    "channels": "latency-mode sharding by output-channel groups or giant steps of a slot-layout layer",
    "layers": "large models by layer tiles (each worker holding only some layers' weights)",
}


@dataclass(frozen=True)
class NetworkModel:
    """Links between the server and its workers: ``bandwidth`` bytes/s per link (default
    10 Gbit/s) and ``latency`` seconds per message (default 100 µs, one datacenter hop)."""

    bandwidth: float = 1.25e9
    latency: float = 100e-6

    def seconds(self, nbytes: float, messages: int = 1) -> float:
        """Time to move ``nbytes`` in ``messages`` messages over one link."""
        return nbytes / self.bandwidth + messages * self.latency


@dataclass(frozen=True)
class SegmentShards:
    """How one segment runs: ``how`` (``"queries"`` or ``"rows"``), the row ``groups``
    (``(start, stop)`` per worker, for ``rows``), the analytic ``compute_s`` of one query on
    one thread, its ``in_bytes``/``out_bytes``, and ``why`` the choice was made."""

    segment: int
    how: str
    groups: tuple = ()
    compute_s: float = 0.0
    in_bytes: int = 0
    out_bytes: int = 0
    why: str = ""


@dataclass(frozen=True)
class ShardPlan:
    """The plan of a program on ``workers`` workers: one :class:`SegmentShards` each."""

    workers: int
    split: str
    segments: tuple = field(default_factory=tuple)
    network: NetworkModel = NetworkModel()

    def describe(self) -> list[str]:
        """One line per segment (for ``heinfer inspect`` and logs)."""
        out = []
        for s in self.segments:
            what = f"{len(s.groups)} output-row groups" if s.how == "rows" else "whole, one worker per query"
            out.append(
                f"segment {s.segment}: {s.how} ({what}); ≈{s.compute_s * 1e3:.1f} ms compute/query, "
                f"{s.in_bytes / 1e6:.1f} MB in, {s.out_bytes / 1e6:.1f} MB out — {s.why}"
            )
        return out


def row_groups(rows: int, parts: int) -> tuple:
    """``parts`` contiguous ``(start, stop)`` ranges covering ``rows`` as evenly as possible
    (fewer when there are fewer rows than parts)."""
    parts = max(1, min(parts, rows))
    bounds = [rows * i // parts for i in range(parts + 1)]
    return tuple((bounds[i], bounds[i + 1]) for i in range(parts))


def batch_bytes(program: Program, count: int, level: int) -> int:
    """Exact serialized size of ``count`` fresh ciphertexts at ``level``."""
    return int(native_params(program.params).batch_wire_bytes(count, level, 2))


def output_bytes(program: Program, k: int, count: int) -> int:
    """Exact serialized size of ``count`` output ciphertexts of segment ``k`` as the server
    sends them: rounded (:mod:`heinfer.program.rounding`), each with its length prefix, after
    the batch header."""
    params, seg = native_params(program.params), program.segments[k]
    level, parts = seg.output_level, seg.output_parts
    header = params.batch_wire_bytes(1, level, parts) - 4 - params.ciphertext_wire_bytes(level, parts)
    one = params.rounded_ciphertext_wire_bytes(level, parts, output_drop_bits(params, program, k))
    return int(header + count * (4 + one))


def single_linear(program: Program, k: int) -> int | None:
    """The layer index of segment ``k``'s only linear op, if it is batch-axis and has exactly
    one (the segments that can be split into output-row groups); ``None`` otherwise."""
    seg = program.segments[k]
    if seg.layout.kind != "batch":
        return None
    lin = [op for op in seg.ops if isinstance(op, Linear)]
    return lin[0].layer if len(lin) == 1 else None


def shard_plan(program: Program, workers: int, split: str = "auto", network: NetworkModel = NetworkModel()) -> ShardPlan:
    """The shard plan of ``program`` on ``workers`` workers (see the module documentation).

    Raises :class:`ValueError` for an unknown ``split`` and
    :class:`~heinfer.errors.NotSupportedYetError` for ``split="rows"`` on a program with a
    slot-layout (latency-mode) segment and for the modes of :data:`NOT_YET`."""
    if split in NOT_YET:
        raise NotSupportedYetError(f"split={split!r}: {NOT_YET[split]} is not supported yet on the Ray backend")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if split == "rows" and any(s.layout.kind != "batch" for s in program.segments):
        raise NotSupportedYetError(
            "latency-mode sharding (output-channel groups or giant steps of a slot-layout layer) "
            "is not supported yet on the Ray backend: use split='queries' (whole queries per worker)"
        )
    n = 1 << int(program.params["log_n"])
    out = []
    for k, seg in enumerate(program.segments):
        limbs = seg.input_level + 1
        in_bytes = batch_bytes(program, seg.n_input_cts, seg.input_level)
        layer = single_linear(program, k)
        if layer is None:
            out.append(SegmentShards(k, "queries", (), 0.0, in_bytes, 0, _why_whole(program, k)))
            continue
        step = program.layers[layer]
        nnz = step.matrix.nnz * step.digits
        compute = 1e-9 * n * limbs * (BATCH_UNITS["gemm_mac"] * nnz + BATCH_UNITS["gemm_io"] * (step.in_size + step.out_size))
        out_bytes = output_bytes(program, k, step.out_size)
        groups = row_groups(step.out_size, workers)
        saved = compute * (1 - 1 / len(groups))
        extra = network.seconds(in_bytes * (len(groups) - 1), len(groups) - 1)
        if split == "rows" or (split == "auto" and len(groups) > 1 and saved > extra):
            why = "forced" if split == "rows" else f"saves {saved * 1e3:.1f} ms for {extra * 1e3:.1f} ms more transfer"
            out.append(SegmentShards(k, "rows", groups, compute, in_bytes, out_bytes, why))
        else:
            why = "forced" if split == "queries" else (
                "one worker" if len(groups) == 1 else f"would save {saved * 1e3:.1f} ms for {extra * 1e3:.1f} ms more transfer"
            )
            out.append(SegmentShards(k, "queries", (), compute, in_bytes, out_bytes, why))
    return ShardPlan(workers, split, tuple(out), network)


def _why_whole(program: Program, k: int) -> str:
    if program.segments[k].layout.kind != "batch":
        return "slot layout: split by output channels not supported yet"
    return "more than one linear layer (a row split would need a gather between them)"

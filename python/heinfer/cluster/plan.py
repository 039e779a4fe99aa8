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

* ``channels`` — a slot-layout (latency-mode) segment with exactly one linear layer is
  split into groups of its output ciphertexts (each holds some output channels), one per
  worker: every worker receives the whole input, runs the baby steps its outputs' terms use
  (hoisted), and computes its outputs' products, giant steps, folds, rescale and bias
  (:meth:`~heinfer.program.transform.Transform.outputs`), then the element-wise ops after
  the layer; the driver concatenates the groups. A single query's latency is divided, at
  the price of baby steps repeated on each worker. Bytes moved: as ``rows``.

* ``giant-steps`` — a slot-layout segment whose first op is its one transform is split into
  groups of that transform's giant steps (output ciphertext × giant step), one per worker:
  every worker receives the whole input, runs the baby steps its groups use and their
  products and giant-step rotations, and returns one unrounded sum per output ciphertext
  (:meth:`~heinfer.program.transform.Transform.giant_steps`); then one worker adds the sums
  — exact, so the outputs are bit for bit the in-process ones — and runs the folds, rescale,
  bias and the element-wise ops after the layer. It divides layers with few output
  ciphertexts (a dense layer into one), which ``channels`` cannot. Bytes moved: the input to
  every worker, one sum per worker and output to the finishing worker, the output once.

* ``layers`` — large models by layer tiles: the segments are cut into contiguous blocks of
  about equal prepared weights (quantized matrices, encoded plaintexts), one block per
  worker; a worker prepares only its block (a fraction of the model's memory) and runs
  every query's segments of it, so concurrent queries move through the workers as through a
  pipeline. Bytes moved: each segment's input and output once, as ``queries``.

``split="auto"`` picks ``rows``, ``channels`` or ``giant-steps`` for a segment when the
compute it saves on one query exceeds the extra bytes it ships (the most saved, net, of those
that apply), under the stated :class:`NetworkModel` and the analytic costs of
:mod:`heinfer.compiler.cost`; ``queries`` otherwise. ``split="rows"``, ``split="channels"`` and
``split="giant-steps"`` force the split on every segment of their kind that allows it (the
others run as ``queries``); ``split="layers"`` is never chosen by ``auto``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from heinfer.compiler.cost import BATCH_UNITS, analytic_costs, square_cost, transform_cost
from heinfer.errors import NotSupportedYetError
from heinfer.program.model import Program
from heinfer.program.ops import Linear, Relinearize, Rescale, Square
from heinfer.program.rounding import output_drop_bits
from heinfer.runtime.executor import native_params
from heinfer.runtime.slots import plaintext_bytes

__all__ = [
    "SPLITS", "NetworkModel", "SegmentShards", "ShardPlan", "contiguous_blocks", "giant_groups", "output_groups", "prepared_bytes", "row_groups",
    "shard_plan", "single_linear",
]

#: The sharding choices of :func:`shard_plan`.
SPLITS = ("auto", "queries", "rows", "channels", "giant-steps", "layers")
#: Sharding modes of the roadmap that are named but not implemented yet.
NOT_YET: dict[str, str] = {}
#: The splits of each segment kind (``SegmentShards.how`` when a segment is split).
SPLITS_OF = {"batch": ("rows",), "slots": ("channels", "giant-steps")}


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
    """How one segment runs: ``how`` (``"queries"``, ``"rows"``, ``"channels"``,
    ``"giant-steps"`` or ``"layers"``), the ``groups`` (``(start, stop)`` per worker: of the
    outputs for ``rows`` and ``channels``, of the transform's giant-step groups for
    ``giant-steps``), the ``compute_s`` of one query on one thread, its ``in_bytes``/``out_bytes``,
    ``why`` the choice was made, and for ``layers`` the ``worker`` that holds it."""

    segment: int
    how: str
    groups: tuple = ()
    compute_s: float = 0.0
    in_bytes: int = 0
    out_bytes: int = 0
    why: str = ""
    #: The worker that holds this segment (``layers``), else None (any worker).
    worker: int | None = None


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
            what = {
                "rows": f"{len(s.groups)} output-row groups",
                "channels": f"{len(s.groups)} groups of output ciphertexts",
                "giant-steps": f"{len(s.groups)} groups of giant steps, summed on one worker",
                "layers": f"held and run by worker {s.worker}",
            }.get(s.how, "whole, one worker per query")
            out.append(
                f"segment {s.segment}: {s.how} ({what}); ≈{s.compute_s * 1e3:.1f} ms compute/query, "
                f"{s.in_bytes / 1e6:.1f} MB in, {s.out_bytes / 1e6:.1f} MB out — {s.why}"
            )
        return out

    def held_by(self, worker: int) -> list[int] | None:
        """The segments worker ``worker`` prepares: its block under ``layers``, else None
        (the whole program)."""
        if self.split != "layers":
            return None
        return [s.segment for s in self.segments if s.worker == worker]


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
    """The layer index of segment ``k``'s only linear op when the segment can be split into
    groups of its outputs: a batch-axis segment with exactly one linear layer (output rows),
    or a slot-layout one with exactly one transform whose other ops are element-wise
    (output ciphertexts); ``None`` otherwise."""
    seg = program.segments[k]
    lin = [op for op in seg.ops if isinstance(op, Linear)]
    if len(lin) != 1:
        return None
    if seg.layout.kind == "slots" and not all(isinstance(op, (Linear, Square, Relinearize, Rescale)) for op in seg.ops):
        return None
    return lin[0].layer


def split_outputs(program: Program, k: int) -> int:
    """How many outputs a split of segment ``k`` divides: its layer's output rows (batch
    axis, one ciphertext each) or output ciphertexts (slot layout)."""
    layer = program.layers[single_linear(program, k)]
    return layer.n_out if program.segments[k].layout.kind == "slots" else layer.out_size


def output_groups(program: Program, k: int, parts: int) -> tuple:
    """The groups segment ``k``'s outputs are split into on ``parts`` workers
    (:func:`row_groups` of :func:`split_outputs`)."""
    return row_groups(split_outputs(program, k), parts)


def shard_plan(program: Program, workers: int, split: str = "auto", network: NetworkModel = NetworkModel()) -> ShardPlan:
    """The shard plan of ``program`` on ``workers`` workers (see the module documentation).

    Raises :class:`ValueError` for an unknown ``split``, and
    :class:`~heinfer.errors.NotSupportedYetError` for ``split="rows"`` on a program without a
    batch-axis segment, ``split="channels"`` on one without a slot-layout segment, and the
    modes of :data:`NOT_YET`."""
    if split in NOT_YET:
        raise NotSupportedYetError(f"split={split!r}: {NOT_YET[split]} is not supported yet on the Ray backend")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if split == "layers":
        return _layer_tiles(program, workers, network)
    kinds = {seg.layout.kind for seg in program.segments}
    for kind, hows in SPLITS_OF.items():
        if split in hows and kind not in kinds:
            other = "latency-mode (slot-layout) segments split by output ciphertexts or giant steps: split='channels' or 'giant-steps'" if kind == "batch" else (
                "throughput-mode (batch-axis) segments split by output rows: split='rows'"
            )
            raise NotSupportedYetError(f"split={split!r} splits {kind} segments and this program has none ({other})")
    out = []
    for k, seg in enumerate(program.segments):
        in_bytes = batch_bytes(program, seg.n_input_cts, seg.input_level)
        layer = single_linear(program, k)
        if layer is None:
            out.append(SegmentShards(k, "queries", (), 0.0, in_bytes, 0, _why_whole(program, k)))
            continue
        out_bytes = output_bytes(program, k, split_outputs(program, k))
        # each split that applies: (net seconds saved, how, groups, compute, saved, extra)
        options = []
        for how in SPLITS_OF[seg.layout.kind]:
            if split not in ("auto", how):
                continue
            groups = giant_groups(program, k, workers) if how == "giant-steps" else output_groups(program, k, workers)
            if len(groups) < 2:
                continue
            compute, part, moved = _compute(program, k, layer, groups, how)
            saved = compute - part
            extra = network.seconds(in_bytes * (len(groups) - 1) + moved, len(groups) - 1 + (1 if moved else 0))
            options.append((saved - extra, how, groups, compute, saved, extra))
        best = max(options, key=lambda o: o[0]) if options else None
        if best is not None and (split == best[1] or best[0] > 0):
            _, how, groups, compute, saved, extra = best
            why = "forced" if split == how else f"saves {saved * 1e3:.1f} ms for {extra * 1e3:.1f} ms more transfer"
            out.append(SegmentShards(k, how, groups, compute, in_bytes, out_bytes, why))
        else:
            why = _why_whole_queries(split, workers, seg.layout.kind, best)
            out.append(SegmentShards(k, "queries", (), segment_seconds(program, k), in_bytes, out_bytes, why))
    return ShardPlan(workers, split, tuple(out), network)


def _why_whole_queries(split: str, workers: int, kind: str, best: tuple | None) -> str:
    """Why a segment that could be split runs whole: ``best`` is the best split that applied
    (``(net, how, groups, compute, saved, extra)``), ``None`` when none did."""
    if split == "queries":
        return "forced"
    if workers == 1:
        return "one worker"
    if split != "auto":
        return f"split={split!r} does not apply to this segment"
    if best is None:
        return "nothing to split: one output ciphertext and one giant-step group" if kind == "slots" else "nothing to split: one output row"
    return f"would save {best[4] * 1e3:.1f} ms for {best[5] * 1e3:.1f} ms more transfer"


def giant_groups(program: Program, k: int, parts: int) -> tuple:
    """The giant-step groups of segment ``k``'s transform in ``parts`` contiguous ranges of
    about equal terms (plaintext products), for ``split="giant-steps"``; ``()`` when the
    segment is not a slot layout whose first op is its one transform."""
    seg = program.segments[k]
    layer = single_linear(program, k)
    if seg.layout.kind != "slots" or layer is None or not isinstance(seg.ops[0], Linear):
        return ()
    sizes = [len(ix) for _, _, ix in program.layers[layer].groups()]
    if not sizes:
        return ()
    owner = contiguous_blocks(sizes, min(parts, len(sizes)))
    bounds = [0] + [i for i in range(1, len(owner)) if owner[i] != owner[i - 1]] + [len(owner)]
    return tuple((bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1))


def prepared_bytes(program: Program, k: int) -> int:
    """Bytes segment ``k``'s prepared weights take in a worker: its slot-layout plaintexts
    (:func:`~heinfer.runtime.slots.plaintext_bytes`) or its batch-axis layers quantized (one
    64-bit word per stored weight and digit, with the row and column indices)."""
    seg = program.segments[k]
    if seg.layout.kind == "slots":
        return plaintext_bytes(program.params, seg, program.layers)
    total = 0
    for op in seg.ops:
        if isinstance(op, Linear):
            step = program.layers[op.layer]
            total += step.matrix.nnz * (8 * step.digits + 4) + 8 * step.out_size
    return total


def contiguous_blocks(sizes: list[int], blocks: int) -> list[int]:
    """The block (``0 … blocks − 1``) of each item when ``sizes`` is cut into ``blocks``
    non-empty runs of consecutive items whose largest total is least (linear partition,
    dynamic programming over the cut points; ``blocks ≤ len(sizes)``)."""
    n = len(sizes)
    prefix = [0]
    for b in sizes:
        prefix.append(prefix[-1] + b)
    inf = float("inf")
    # best[j][i]: least largest total cutting the first i items into j runs; cut[j][i]: where the last starts
    best = [[inf] * (n + 1) for _ in range(blocks + 1)]
    cut = [[0] * (n + 1) for _ in range(blocks + 1)]
    best[0][0] = 0
    for j in range(1, blocks + 1):
        for i in range(j, n + 1):
            for m in range(j - 1, i):
                v = max(best[j - 1][m], prefix[i] - prefix[m])
                if v < best[j][i]:
                    best[j][i], cut[j][i] = v, m
    owner = [0] * n
    i = n
    for j in range(blocks, 0, -1):
        m = cut[j][i]
        for k in range(m, i):
            owner[k] = j - 1
        i = m
    return owner


def _layer_tiles(program: Program, workers: int, network: NetworkModel) -> ShardPlan:
    """``split="layers"``: the segments in contiguous blocks of about equal
    :func:`prepared_bytes`, one block per worker (fewer blocks than workers when there are
    fewer segments)."""
    sizes = [prepared_bytes(program, k) for k in range(len(program.segments))]
    total = sum(sizes) or 1
    owner = contiguous_blocks(sizes, min(workers, len(sizes)))
    out = []
    for k, seg in enumerate(program.segments):
        in_bytes = batch_bytes(program, seg.n_input_cts, seg.input_level)
        out.append(SegmentShards(
            k, "layers", (), segment_seconds(program, k), in_bytes, output_bytes(program, k, seg.n_output_cts),
            f"worker {owner[k]} holds it ({sizes[k] / 1e6:.1f} MB of {total / 1e6:.1f} MB prepared)", owner[k],
        ))
    return ShardPlan(workers, "layers", tuple(out), network)


def _gemm_seconds(program: Program, k: int, step) -> float:
    """Analytic seconds of batch-axis layer ``step`` in segment ``k`` (one query, one thread)."""
    n = 1 << int(program.params["log_n"])
    limbs = program.segments[k].input_level + 1
    nnz = step.matrix.nnz * step.digits
    return 1e-9 * n * limbs * (BATCH_UNITS["gemm_mac"] * nnz + BATCH_UNITS["gemm_io"] * (step.in_size + step.out_size))


def segment_seconds(program: Program, k: int) -> float:
    """Seconds of one query of segment ``k`` on one thread: the compiler's prediction for a
    slot layout (``Segment.predicted_s``), the GEMMs' analytic units on the batch axis."""
    seg = program.segments[k]
    if seg.layout.kind == "slots":
        return float(seg.predicted_s or 0.0)
    return sum(_gemm_seconds(program, k, program.layers[op.layer]) for op in seg.ops if isinstance(op, Linear))


def _compute(program: Program, k: int, layer: int, groups: tuple, how: str) -> tuple[float, float, int]:
    """``(whole, largest shard, bytes)``: seconds of one query of segment ``k`` on one
    thread, whole and for its largest shard of ``groups`` (for ``giant-steps`` plus the
    finishing worker's sum, folds and rest), and the bytes the shards send to a finishing
    worker (``giant-steps``: one unrounded sum per shard and output; 0 otherwise). Batch axis:
    the GEMM's analytic units. Slot layout: the segment's predicted time from the compiler's
    measured costs (``Segment.predicted_s``), the shard's share of it priced by the analytic
    costs of its transform (:meth:`~heinfer.program.transform.Transform.outputs` or
    :meth:`~heinfer.program.transform.Transform.giant_steps`: its own baby steps, products and
    giant steps) and of the element-wise ops after it."""
    seg = program.segments[k]
    step = program.layers[layer]
    if seg.layout.kind == "batch":
        compute = _gemm_seconds(program, k, step)
        return compute, compute / len(groups) if groups else compute, 0
    costs = analytic_costs(int(program.params["log_n"]), len(program.params["log_q"]), len(program.params["log_p"]))
    level, at = seg.input_level, None
    squares = 0
    for op in seg.ops:
        if isinstance(op, Linear):
            at = level
        elif isinstance(op, Rescale):
            level -= op.primes
        elif isinstance(op, Square):
            squares += 1
    square_level = max(at - 1, 0)

    def analytic(t, outs: int) -> float:
        return transform_cost(t, at, costs) + squares * square_cost(outs, square_level, costs)

    whole = analytic(step, step.n_out)
    moved = 0
    if how == "giant-steps":
        part = max(transform_cost(step.giant_steps(a, b), at, costs) for a, b in groups) + analytic(step.finishing(), step.n_out)
        moved = len(groups) * step.n_out * int(native_params(program.params).ciphertext_wire_bytes(at, 2))
    else:
        part = max(analytic(step.outputs(a, b), b - a) for a, b in groups)
    compute = float(seg.predicted_s or 0.0) or whole
    return compute, compute * part / whole if whole > 0 else compute, moved


def _why_whole(program: Program, k: int) -> str:
    if not any(isinstance(op, Linear) for op in program.segments[k].ops):
        return "no linear layer"
    if program.segments[k].layout.kind == "slots":
        return "more than one transform, or an op that is not element-wise (a split would need a gather between them)"
    return "more than one linear layer (a row split would need a gather between them)"

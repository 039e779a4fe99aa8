"""One executor for every layout: runs segment ``k`` of a program on ciphertexts.

Layer: ``heinfer.runtime``. :class:`Executor` prepares a program once — batch-axis layers
quantized for the GEMM kernels, slot-layout plaintexts encoded at their exact scales — and
:meth:`Executor.run` executes one segment on a :class:`~heinfer._native.CiphertextBatch`,
dispatching on the segment's layout (data, not a class per mode).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from heinfer import _native
from heinfer.errors import NotSupportedYetError, ProtocolError
from heinfer.program.model import Program
from heinfer.program.ops import Linear
from heinfer.runtime.batch import build_layers, peak_ciphertext_bytes, run_batch_segment
from heinfer.runtime.slots import PreparedSlots, plaintext_bytes
from heinfer.runtime.tiles import TiledOutput, plan_tiles

__all__ = ["Executor", "available_memory", "bad_budget", "lazy_until_fits", "native_params", "plaintext_budget"]

#: Share of physical memory (``MemTotal``) that the encoded plaintexts may keep by default
#: (the rest holds the program, keys, ciphertexts and the lazy groups) …
MEMORY_SHARE = 0.5
#: … and never more than this share of the memory available when the executor is prepared.
AVAILABLE_SHARE = 0.8


def _meminfo(field: str) -> int | None:
    """A ``/proc/meminfo`` field in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` in bytes (None where there is none)."""
    return _meminfo("MemAvailable")


def plaintext_budget() -> int | None:
    """The default bytes of encoded plaintexts an executor keeps: :data:`MEMORY_SHARE` of
    physical memory, at most :data:`AVAILABLE_SHARE` of the memory available now (None where
    ``/proc/meminfo`` is missing: no limit).

    A share of physical memory gives the same plan on the same machine from run to run (half
    of what is *available* flipped LoLa's CIFAR network, 10.7 GB of plaintexts on a 24 GB
    machine, between kept and encoded per query on a margin of 0.01 GB); the cap keeps a
    machine whose memory is in use from swapping."""
    total, avail = _meminfo("MemTotal"), available_memory()
    shares = [int(MEMORY_SHARE * total)] if total is not None else []
    shares += [int(AVAILABLE_SHARE * avail)] if avail is not None else []
    return min(shares) if shares else None


def bad_budget(max_memory: object) -> str | None:
    """Why ``max_memory`` is not a memory budget (None when it is one: bytes as an ``int``
    ``>= 0``, or None for the default), for the entry points to raise in their own error type."""
    if max_memory is None or (isinstance(max_memory, int) and not isinstance(max_memory, bool) and max_memory >= 0):
        return None
    return f"max_memory must be a number of bytes (an int >= 0), got {max_memory!r}"


def lazy_until_fits(needs: dict[int, int], budget: int | None) -> set[int]:
    """The keys of ``needs`` (bytes per segment or layer) to prepare lazily, largest first,
    until what is kept fits ``budget`` (None: keep everything)."""
    lazy: set[int] = set()
    kept = sum(needs.values())
    for k in sorted(needs, key=needs.get, reverse=True):
        if budget is None or kept <= budget:
            break
        lazy.add(k)
        kept -= needs[k]
    return lazy


def native_params(params: dict) -> _native.Params:
    """The checked native parameters of a program's ``params``."""
    return _native.Params(int(params["log_n"]), list(params["log_q"]), list(params["log_p"]), int(params["log_scale"]), None, int(params["security"]))


class Executor:
    """A program prepared for execution (weights quantized, plaintexts encoded).

    ``baseline=True`` runs batch-axis linear layers with the naive kernel (benchmarks).
    ``setup_seconds``: the time the preparation took. ``max_memory``: bytes the encoded
    slot-layout plaintexts may keep (default: :func:`plaintext_budget`); when the
    program needs more, its largest segments are prepared lazily — their plaintexts encoded
    group by group during each query and dropped after use — until what is kept fits
    (``plaintext_bytes``, ``kept_plaintext_bytes``, ``lazy_segments`` say what happened).
    ``compact`` (default): plaintexts keep their limbs whose primes are below ``2^32`` in
    32-bit words (:class:`~heinfer.runtime.slots.PreparedSlots`; the same results in about
    two thirds of the memory); ``False`` keeps 64-bit words (the benchmarks' baseline).

    Batch-axis segments hold their input tensor whole, one ciphertext per element, and compute
    a last layer whose output exceeds :data:`~heinfer.runtime.tiles.TILE_BYTES` in tiles
    (``tiles``; :func:`~heinfer.runtime.batch.peak_ciphertext_bytes`); a program whose largest
    segment needs more than ``ciphertext_memory`` (default: the memory available now) is refused
    with :class:`~heinfer.errors.NotSupportedYetError` here, before any query, instead of
    running the machine out of memory (``ciphertext_bytes`` records the need).

    ``segments``: prepare and run only these segments (a cluster worker holding a tile of
    the program's layers, :mod:`heinfer.cluster`); :meth:`run` refuses the others."""

    def __init__(
        self,
        program: Program,
        baseline: bool = False,
        max_memory: int | None = None,
        ciphertext_memory: int | None = None,
        segments: Iterable[int] | None = None,
        compact: bool = True,
    ) -> None:
        if not isinstance(program, Program):
            raise ProtocolError("executing a program needs its weights: give the server the full program, not the public one")
        t0 = time.perf_counter()
        every = range(len(program.segments))
        held = set(every) if segments is None else {int(k) for k in segments}
        if not held <= set(every):
            raise ProtocolError(f"segments {sorted(held - set(every))} do not exist: the program has {len(every)}")
        #: The segments this executor runs (all of them unless ``segments`` was given).
        self.segments = sorted(held)
        mine = [(k, seg) for k, seg in enumerate(program.segments) if k in held]
        needs = {k: plaintext_bytes(program.params, seg, program.layers, compact) for k, seg in mine if seg.layout.kind == "slots"}
        need = sum(needs.values())
        avail = available_memory()
        if max_memory is None:
            max_memory = plaintext_budget()
        self.ciphertext_bytes = _check_tensors(program, avail if ciphertext_memory is None else ciphertext_memory, tiled=not baseline, held=held)
        # over budget: the largest segments encode lazily (per query, group by group) until the
        # plaintexts kept in memory fit
        lazy = lazy_until_fits(needs, max_memory)
        self.plaintext_bytes = need
        self.kept_plaintext_bytes = need - sum(needs[k] for k in lazy)
        self.compact = compact
        self.lazy_segments = sorted(lazy)
        self.program = program
        self.params = native_params(program.params)
        self.baseline = baseline
        layers = {op.layer for _, seg in mine if seg.layout.kind == "batch" for op in seg.ops if isinstance(op, Linear)}
        self.built = build_layers(program.layers, layers) if not baseline else {}
        log_n = int(program.params["log_n"])
        #: Segment → its last linear layer in tiles (:func:`~heinfer.runtime.tiles.plan_tiles`).
        self.tiles = {} if baseline else {
            k: t for k, seg in mine if seg.layout.kind == "batch" and (t := plan_tiles(seg, program.layers, log_n)) is not None
        }
        self.slots = {
            k: PreparedSlots(self.params, seg, program.layers, lazy=k in lazy, compact=compact)
            for k, seg in mine
            if seg.layout.kind == "slots"
        }
        self._ev = _native.Evaluator(self.params) if self.slots else None
        self.setup_seconds = time.perf_counter() - t0

    def reads_narrow(self, k: int) -> bool:
        """Whether segment ``k``'s input should be decoded narrow (:func:`reads_narrow`)."""
        return reads_narrow(self.program, k, self.baseline)

    def run(self, k: int, batch: _native.CiphertextBatch, relin: _native.RelinKey | None, galois: _native.GaloisKeys | None) -> _native.CiphertextBatch | TiledOutput:
        """Segment ``k`` on its input ciphertexts (consumed); returns its output ciphertexts, or
        for a batch-axis segment whose output exceeds :data:`~heinfer.runtime.tiles.TILE_BYTES`
        a :class:`~heinfer.runtime.tiles.TiledOutput` that computes them tile by tile as they
        are serialized (``len()`` and ``to_bytes(start, stop)`` as a batch's)."""
        if k not in self.segments:
            raise ProtocolError(f"this executor runs segments {self.segments} of the program, not segment {k}")
        seg = self.program.segments[k]
        if seg.layout.kind == "batch":
            return run_batch_segment(seg, batch, self.program.layers, self.built, relin, self.baseline, self.tiles.get(k))
        out = self.slots[k].run(self._ev, batch.to_list(consume=True), galois, relin)
        return _native.CiphertextBatch.from_list(out)


def reads_narrow(program: Program, k: int, baseline: bool = False) -> bool:
    """Whether segment ``k``'s input is best decoded into 32-bit words
    (``CiphertextBatch.from_bytes(..., narrow=True)``, which falls back to 64-bit words when a
    prime needs them): a batch-axis segment whose first op is a linear layer, whose kernels
    read those words as they are — half the memory of the query they read once. Any other
    first op (a slot layout's transform, the baseline's products) would only widen them
    again."""
    seg = program.segments[k]
    return not baseline and seg.layout.kind == "batch" and bool(seg.ops) and isinstance(seg.ops[0], Linear)


def _check_tensors(program: Program, budget: int | None, tiled: bool, held: set[int] | None = None) -> int:
    """The largest batch-axis segment's ciphertext bytes (last layers in tiles when
    ``tiled``; of the segments ``held``, default all); refuses a program over ``budget``."""
    log_n = int(program.params["log_n"])
    peaks = {
        k: peak_ciphertext_bytes(seg, program.layers, log_n, tiled)
        for k, seg in enumerate(program.segments)
        if seg.layout.kind == "batch" and (held is None or k in held)
    }
    if not peaks:
        return 0
    k = max(peaks, key=peaks.get)
    if budget is not None and peaks[k] > budget:
        raise NotSupportedYetError(
            f"throughput mode holds a segment's input tensor whole (one ciphertext per element; only a last layer's output is "
            f"computed in tiles): segment {k} needs "
            f"{peaks[k] / 1e9:.1f} GB of ciphertexts at once, {budget / 1e9:.1f} GB is available; compile with "
            f"mode='latency' or run on a machine with more memory"
        )
    return peaks[k]

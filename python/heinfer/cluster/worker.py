"""What runs inside one Ray actor: a program's weights, prepared, and the sessions' keys.

Layer: ``heinfer.cluster``. :class:`ShardWorker` is a plain class (testable without Ray);
:mod:`heinfer.cluster.executor` turns it into a Ray actor. It receives only picklable data —
the program as bytes, ciphertexts and keys as their serialized bytes — and answers the
serialized output.
It holds the server's weights and evaluation keys, never a secret key: a worker is part of
the server (same trust, same threat model).
"""

from __future__ import annotations

import os
import time

import numpy as np

from heinfer import _native
from heinfer.cluster.plan import single_linear
from heinfer.errors import ProtocolError
from heinfer.program.format import load
from heinfer.program.model import Program
from heinfer.program.ops import Linear
from heinfer.program.transform import Transform
from heinfer.runtime.batch import run_batch_segment
from heinfer.runtime.executor import Executor, native_params, reads_narrow
from heinfer.runtime.linear import PreparedLinear
from heinfer.runtime.slots import PreparedSlots

__all__ = ["ShardWorker"]


class ShardWorker:
    """One worker: the program prepared once (``threads`` native threads; with ``segments``
    only those, a tile of its layers), output slices (row groups, groups of output
    ciphertexts) prepared on demand, and evaluation keys by key id until dropped."""

    def __init__(
        self, program_bytes: bytes, baseline: bool, threads: int = 1, segments: list[int] | None = None, split: tuple = ()
    ) -> None:
        _native.set_num_threads(int(threads))
        program = load(program_bytes)
        if not isinstance(program, Program):
            raise TypeError("a worker needs the full program with its weights")
        self.program = program
        self.params = native_params(program.params)
        #: The segments this worker may run: a tile of the layers (split="layers"), or all.
        self.segments = list(range(len(program.segments))) if segments is None else sorted(segments)
        # segments the plan splits into output groups are prepared group by group (see
        # _slice), and whole only if asked to run them whole (after a change of plan)
        self.executor = Executor(program, baseline, segments=[k for k in self.segments if k not in set(split)])
        self._whole: dict[int, Executor] = {}
        self.baseline = baseline
        self._slices: dict[tuple, tuple] = {}
        self._ev: _native.Evaluator | None = None
        self._keys: dict[str, tuple] = {}
        self._busy = 0.0
        self._cpu = 0.0
        self._shards = 0

    def ping(self) -> int:
        """The worker's process id (a liveness check)."""
        return os.getpid()

    def held(self) -> list[int]:
        """The segments this worker runs (their weights prepared whole or by groups of
        outputs, or on first use)."""
        return list(self.segments)

    def prepare(self, groups: list[tuple]) -> int:
        """Prepares the output slices ``(layer, start, stop)`` (row groups, groups of output
        ciphertexts) and the giant-step shards ``("giant", layer, start, stop)`` and their
        finishing ``("finish", layer)`` ahead of the first query."""
        for g in groups:
            if g[0] == "giant":
                self._giant(*g[1:])
            elif g[0] == "finish":
                self._giant(g[1], None, None)
            else:
                self._slice(*g)
        return len(self._slices)

    def put_keys(self, key_id: str, keys: tuple) -> None:
        """Stores a session's evaluation keys ``(relin bytes | None, galois bytes | None)``
        under ``key_id``."""
        relin, galois = keys
        rlk = _native.RelinKey.from_bytes(self.params, relin, len(relin)) if relin else None
        gk = _native.GaloisKeys.from_bytes(self.params, galois, len(galois)) if galois else None
        self._keys[key_id] = (rlk, gk)

    def drop_keys(self, key_id: str) -> None:
        """Forgets a session's keys (idempotent)."""
        self._keys.pop(key_id, None)

    def key_count(self) -> int:
        """How many sessions' keys this worker holds."""
        return len(self._keys)

    def stats(self) -> dict:
        """``shards`` run, ``busy_s`` the seconds spent in them (decoding, computing and
        encoding; the transfers are Ray's), ``cpu_s`` the CPU time of the worker process in
        them, and ``peak_rss_bytes`` the process's peak resident memory (``VmHWM``; None
        where ``/proc`` has none)."""
        return {"shards": self._shards, "busy_s": self._busy, "cpu_s": self._cpu, "peak_rss_bytes": _peak_rss()}

    def run(self, k: int, data, count: int, key_id: str | None, rows: tuple | None = None, drop_bits: list[int] | None = None) -> np.ndarray:
        """Segment ``k`` on at most ``count`` serialized ciphertexts: one serialized batch or
        a list of them, in order (``bytes``, or the read-only ``uint8`` arrays Ray hands over
        from its object store without a copy), each decoded with full validation; with
        ``rows = (start, stop)`` only that group of the outputs of the segment's linear layer
        (output rows on the batch axis, output ciphertexts in a slot layout); with
        ``rows = ("giant", start, stop)`` the sums of giant-step groups ``start:stop`` of its
        transform (a slot layout whose first op is the transform; unrounded, ``drop_bits``
        ignored), and with ``rows = ("finish", shards)`` the segment's output from the sums of
        ``shards`` such shards, given in order as the input.
        Returns the output batch serialized (rounded with ``drop_bits``, see
        ``CiphertextBatch.to_bytes``) as a ``uint8`` array, which Ray stores out of band: the
        front end reads it in the object store instead of unpickling a copy."""
        t0, c0 = time.perf_counter(), time.process_time()
        relin, galois = self._keys_of(key_id)
        # a whole batch-axis segment, or a group of its linear layer's rows: 32-bit words
        narrow = (rows is None or isinstance(rows[0], int)) and reads_narrow(self.program, k, self.baseline)
        batch = self._decode(data if isinstance(data, (list, tuple)) else [data], count, narrow)
        if rows is not None and rows[0] == "giant":  # a shard of the giant steps: sums, unrounded
            prepared = self._giant(_only_linear(self.program, k), rows[1], rows[2])
            out = _native.CiphertextBatch.from_list(prepared.partial(self._evaluator(), batch.to_list(consume=True), galois))
            drop_bits = None
        elif rows is not None and rows[0] == "finish":  # the shards' sums → the segment's output
            prepared = self._giant(_only_linear(self.program, k), None, None)
            cts = batch.to_list(consume=True)
            shards, n = int(rows[1]), prepared.transforms[0].n_out
            if shards < 1 or len(cts) != shards * n:
                raise ProtocolError(f"{len(cts)} ciphertexts for {shards} giant-step shards of {n} outputs each")
            out = _native.CiphertextBatch.from_list(
                prepared.finish(self._evaluator(), [cts[i * n : (i + 1) * n] for i in range(shards)], galois, relin)
            )
        elif rows is None:
            out = self._executor_of(k).run(k, batch, relin, galois)
        elif self.program.segments[k].layout.kind == "slots":
            layer = _only_linear(self.program, k)
            prepared = self._slice(layer, *rows)[1]
            out = _native.CiphertextBatch.from_list(prepared.run(self._evaluator(), batch.to_list(consume=True), galois, relin))
        else:
            seg = self.program.segments[k]
            layer = _only_linear(self.program, k)
            layers = list(self.program.layers)
            layers[layer] = self._slice(layer, *rows)[0]
            built = dict(self.executor.built)
            built[layer] = self._slice(layer, *rows)[1]
            out = run_batch_segment(seg, batch, layers, built, relin, self.baseline)
        data = np.frombuffer(out.to_bytes(drop_bits=drop_bits), np.uint8)
        self._busy += time.perf_counter() - t0
        self._cpu += time.process_time() - c0
        self._shards += 1
        return data

    def _decode(self, parts: list, count: int, narrow: bool = False) -> _native.CiphertextBatch:
        """The batches ``parts`` decoded (at most ``count`` ciphertexts in all; in 32-bit words
        where they fit, with ``narrow``) and joined."""
        if not parts:
            raise ProtocolError("a shard needs at least one serialized batch")
        batches = []
        for p in parts:
            if count <= 0:
                raise ProtocolError("a shard's input holds more ciphertexts than its segment takes")
            batches.append(_native.CiphertextBatch.from_bytes(self.params, p, len(p), count, narrow=narrow))
            count -= len(batches[-1])
        return batches[0] if len(batches) == 1 else _native.CiphertextBatch.concat(batches, True)

    def _keys_of(self, key_id: str | None) -> tuple:
        if key_id is None:
            return None, None
        if key_id not in self._keys:
            raise KeyError(f"this worker holds no keys {key_id!r} (they were not sent or were dropped with the session)")
        return self._keys[key_id]

    def _slice(self, layer: int, start: int, stop: int) -> tuple:
        """``(layer slice, prepared)`` for outputs ``start:stop`` of ``layer``: a batch-axis
        layer's rows with its built kernel, or a transform's output ciphertexts with its
        segment prepared (:class:`~heinfer.runtime.slots.PreparedSlots`, plaintexts encoded)."""
        key = (layer, start, stop)
        if key not in self._slices:
            lay = self.program.layers[layer]
            if isinstance(lay, Transform):
                part = lay.outputs(start, stop)
                self._slices[key] = (part, self._prepared(layer, part))
            else:
                step = lay.rows(start, stop)
                self._slices[key] = (step, PreparedLinear(step).build() if not self.baseline else None)
        return self._slices[key]

    def _giant(self, layer: int, start: int | None, stop: int | None) -> PreparedSlots:
        """Segment of ``layer`` prepared for a shard of its giant-step groups ``start:stop``
        (:meth:`Transform.giant_steps`: those groups' plaintexts only), or with ``None`` for
        finishing the shards' sums (:meth:`Transform.finishing`: the bias only)."""
        key = ("giant", layer, start, stop)
        if key not in self._slices:
            lay = self.program.layers[layer]
            part = lay.finishing() if start is None else lay.giant_steps(start, stop)
            self._slices[key] = (part, self._prepared(layer, part))
        return self._slices[key][1]

    def _prepared(self, layer: int, part: Transform) -> PreparedSlots:
        """The segment of transform ``layer`` prepared with ``part`` in its place."""
        (seg,) = [s for s in self.program.segments if any(isinstance(op, Linear) and op.layer == layer for op in s.ops)]
        layers = list(self.program.layers)
        layers[layer] = part
        return PreparedSlots(self.params, seg, layers)

    def _executor_of(self, k: int) -> Executor:
        """The executor that runs segment ``k`` whole: the worker's, or for a segment the plan
        splits, one prepared for it on first use."""
        if k in self.executor.segments:
            return self.executor
        if k not in self.segments:
            raise ProtocolError(f"this worker holds segments {self.segments} of the program (a layer tile), not segment {k}")
        if k not in self._whole:
            self._whole[k] = Executor(self.program, self.baseline, segments=[k])
        return self._whole[k]

    def _evaluator(self) -> _native.Evaluator:
        if self._ev is None:
            self._ev = _native.Evaluator(self.params)
        return self._ev


def _peak_rss() -> int | None:
    """This process's peak resident memory (``VmHWM`` of ``/proc/self/status``), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _only_linear(program: Program, k: int) -> int:
    layer = single_linear(program, k)
    if layer is None:
        raise ValueError(f"segment {k} cannot be split into groups of its outputs")
    return layer

"""The inference API of heinfer: ``infer``, ``Client`` and ``Server`` (and ``compile``, from
:mod:`heinfer.compilation`, re-exported here).

>>> import heinfer                                              # doctest: +SKIP
>>> prog = heinfer.compile("model.onnx", mode="throughput", calibration=x[:64])
>>> result = heinfer.infer(prog, x)      # a real Client and Server, in one process
>>> result.outputs                       # like onnxruntime's output
>>> result.report                        # timings, rounds, bytes each way, parameters

``infer`` exchanges exactly the serialized messages the network service carries
(:mod:`heinfer.protocol.messages`). Throughput mode packs the batch axis (nGraph-HE2):
one query holds up to ``prog.batch_capacity`` items; larger inputs run as several queries.
Latency mode (``mode="latency"``) packs one item across the slots of a few ciphertexts
(LoLa, GAZELLE) with kernels chosen by a packing search over measured primitive costs; each
item is one query. ``mode="auto"`` picks the mode with the lower predicted time for
``batch_size`` items.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np

from heinfer.compilation import compile
from heinfer.compiler.throughput import Options
from heinfer.errors import NotSupportedYetError, OutOfRangeWarning, ProtocolError
from heinfer.features import META_KEY, FeatureExtractor
from heinfer.program.model import Program, PublicProgram
from heinfer.program.two_party import TwoPartyProgram
from heinfer.protocol.client import Client
from heinfer.protocol.server import Server
from heinfer.protocol.two_party import run_in_process as run_two_party

__all__ = ["compile", "infer", "InferenceResult", "Client", "Server", "Options", "Program", "PublicProgram", "QueryRun", "run_query"]


@dataclass
class InferenceResult:
    """The decrypted outputs and a report of the run (timings in seconds, bytes)."""

    outputs: np.ndarray
    report: dict = field(default_factory=dict)


def infer(
    program: Program,
    x: np.ndarray,
    client: Client | None = None,
    server: Server | None = None,
    features: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> InferenceResult:
    """Runs ``program`` on ``x`` with a real :class:`Client` and :class:`Server` in one process.

    ``features``: the public feature extractor a deep-feature classifier was compiled for
    (:mod:`heinfer.features`): the client runs it on ``x`` in the clear first.

    ``progress(stage, done, total)``, if given, is called as the work advances, with the
    stages of a remote session (:data:`heinfer.serve.remote.Progress`): ``"keygen"`` (0/1, 1/1),
    ``"query"`` (items answered) and ``"segment"`` (the current query's segments done, of the
    program's). It must not raise. Two-party programs report ``"query"`` only.

    Items are split into queries of ``program.batch_capacity``; every message between the two
    parties is serialized and validated (in chunks of at most :data:`MESSAGE_CHUNK_BYTES`),
    and counted in the report. The client gets only the
    public part of ``program``. Values decrypted beyond their planned range are clamped and
    counted (``report["out_of_range"]``, with an :class:`OutOfRangeWarning`).
    """
    x = np.asarray(x)
    if features is not None or META_KEY in program.meta:
        if features is None:
            raise ProtocolError("this program classifies deep features: pass features=<the extractor it was compiled for>")
        ext = FeatureExtractor(features)
        ext.check_program(program.meta)
        result = _infer(program, ext(x).reshape(len(x), *program.input_shape), client, server, progress)
        result.report["features_s"] = ext.seconds
        return result
    return _infer(program, x, client, server, progress)


#: Largest message of a query in :func:`infer`: a larger query, step or reply travels in
#: chunks of at most this many bytes, so a step of a large model (MobileNetV2's 110,592
#: ciphertexts) is serialized, decrypted and dropped chunk by chunk, never whole. 16 MiB is
#: below glibc's largest mmap threshold (32 MiB, set at import: ``heinfer._native``), so a
#: message's buffers come from the heap and are reused by the next one; larger ones are
#: mapped afresh and the kernel zeroes every page first. Measured on a MobileNetV2-0.35-96
#: throughput query (51 GB of messages, AMD EPYC): 256 MiB chunks 345 s, 16 MiB 283 s.
MESSAGE_CHUNK_BYTES = 16 << 20


class _Clock:
    """Seconds spent in the client's calls (and in the iterators whose items it makes)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def call(self, f, *args):
        t0 = time.perf_counter()
        try:
            return f(*args)
        finally:
            self.seconds += time.perf_counter() - t0

    def each(self, items):
        it = iter(items)
        while True:
            t0 = time.perf_counter()
            item = next(it, None)
            self.seconds += time.perf_counter() - t0
            if item is None:
                return
            yield item


@dataclass
class QueryRun:
    """One query run by :func:`run_query`: the decoded outputs, the bytes each way (every
    message), the client-aided rounds."""

    outputs: np.ndarray
    bytes_up: int
    bytes_down: int
    rounds: int


def run_query(
    client: Client,
    server: Server,
    session: str,
    xs: np.ndarray,
    chunk_bytes: int = MESSAGE_CHUNK_BYTES,
    clock: _Clock | None = None,
    on_segment: Callable[[int], None] | None = None,
) -> QueryRun:
    """One query of ``xs`` (at most ``batch_capacity`` items) on an open ``session``, both
    parties in this process: every message serialized, in chunks of at most ``chunk_bytes``
    (the server serializes a step's chunks as they are asked for, the client encrypts a
    reply's as they are). ``clock`` accumulates the client's seconds; ``on_segment(done)`` is
    called before each of the server's segments."""
    clock = clock or _Clock()
    notify = on_segment or (lambda done: None)
    notify(0)
    try:
        return _run_query(client, server, session, xs, chunk_bytes, clock, notify)
    except BaseException:
        client.forget(client.last_query_ref)  # refused or failed: its state and key go
        raise


def _run_query(client: Client, server: Server, session: str, xs: np.ndarray, chunk_bytes: int, clock: _Clock, notify) -> QueryRun:
    """:func:`run_query`'s exchange."""
    up = down = rounds = 0
    sent = None
    for m in clock.each(client.query_messages(session, xs, chunk_bytes)):
        up += len(m)
        sent = server.receive(m, chunk_bytes)
    while sent.kind == "step":
        rounds += 1
        notify(rounds)
        replies = None
        for m in sent:
            down += len(m)
            replies = clock.call(client.receive_step, m, chunk_bytes)
        for m in clock.each(replies):
            up += len(m)
            sent = server.receive(m, chunk_bytes)
    (result,) = list(sent)
    down += len(result)
    return QueryRun(clock.call(client.decode_result, result), up, down, rounds)


def _no_progress(stage: str, done: int, total: int) -> None:
    """The default ``progress`` callback: nothing."""


def _infer(
    program: Program, x: np.ndarray, client: Client | None, server: Server | None, progress: Callable[[str, int, int], None] | None = None
) -> InferenceResult:
    """:func:`infer` on model inputs."""
    report_progress = progress or _no_progress
    if x.ndim != len(program.input_shape) + 1:
        raise ProtocolError(f"input has shape {x.shape}, the model takes (batch, *{program.input_shape})")
    if len(x) == 0:
        raise ProtocolError("x holds no items")
    if isinstance(program, TwoPartyProgram):
        if client is not None or server is not None:
            raise NotSupportedYetError("two-party programs run with their own parties: pass no client or server")
        report_progress("query", 0, len(x))
        result = _infer_two_party(program, x)
        report_progress("query", len(x), len(x))
        return result
    t_start = time.perf_counter()
    client = client or Client(program.public())
    server = server or Server(program)
    t0 = time.perf_counter()
    report_progress("keygen", 0, 1)
    keys = client.keys_message()
    t_keys = time.perf_counter() - t0
    report_progress("keygen", 1, 1)
    session = server.open_session(keys)
    up, down, rounds, out_of_range = len(keys), 0, 0, 0
    server_s0 = server.seconds
    outputs = []
    cap = program.batch_capacity
    t_queries = time.perf_counter()
    segments = len(program.segments)
    report_progress("query", 0, len(x))
    clock = _Clock()

    def on_segment(done: int) -> None:
        report_progress("segment", done, segments)

    try:  # a query that fails (an input out of range, a refused message) closes the session too
        for start in range(0, len(x), cap):
            q = run_query(client, server, session, x[start : start + cap], clock=clock, on_segment=on_segment)
            outputs.append(q.outputs)
            up, down, rounds = up + q.bytes_up, down + q.bytes_down, rounds + q.rounds
            out_of_range += client.last_out_of_range
            report_progress("segment", segments, segments)
            report_progress("query", min(start + cap, len(x)), len(x))
        t_end = time.perf_counter()
    finally:
        server.close_session(session)
    n = len(x)
    report = {
        "items": n,
        "queries": -(-n // cap),
        "batch_capacity": cap,
        "total_s": t_end - t_start,
        "queries_s": t_end - t_queries,
        "client_s": t_keys + clock.seconds,
        "server_s": server.seconds - server_s0,
        "keygen_s": t_keys,
        "rounds": rounds,
        "bytes_up": up,
        "bytes_down": down,
        "bytes_per_item_up": up / n,
        "bytes_per_item_down": down / n,
        "params": dict(program.params),
        "packing": program.packing,
        "mode": program.mode,
        "security_bits": program.security,
        "predicted_error": (program.meta.get("predicted_error") or [None])[-1],
        "precision": program.segments[-1].precision,
        "out_of_range": out_of_range,
        "setup_s": server.setup_seconds,
    }
    if out_of_range:
        warnings.warn(
            f"{out_of_range} decrypted values were beyond the planned range and were clamped: the outputs of "
            "some items are not reliable (recompile with calibration inputs that cover these inputs)",
            OutOfRangeWarning,
            stacklevel=2,
        )
    return InferenceResult(np.concatenate(outputs), report)


def _infer_two_party(program: TwoPartyProgram, x: np.ndarray) -> InferenceResult:
    """:func:`infer` for the two-party protocol: both parties in this process, every message
    serialized and validated; the report splits set-up (keys, base OTs), offline (garbling, OT
    extension) and online (ciphertexts, OT choices and labels) seconds and bytes."""
    t0 = time.perf_counter()
    outputs, rep = run_two_party(program, x)
    n = len(x)
    report = {
        "items": n,
        "queries": -(-n // program.batch_capacity),
        "batch_capacity": program.batch_capacity,
        "total_s": time.perf_counter() - t0,
        "mode": program.mode,
        "protocol": "two-party",
        "params": dict(program.bfv),
        "security_bits": int(program.bfv["security"]),
        **rep,
        "bytes_per_item": (rep["offline_bytes"] + rep["online_bytes"]) / n,
        "seconds_per_item": (rep["offline_s"] + rep["online_s"]) / n,
    }
    return InferenceResult(outputs, report)

"""The inference API of heinfer: ``compile``, ``infer``, ``Client`` and ``Server``.

>>> import heinfer                                              # doctest: +SKIP
>>> prog = heinfer.compile("model.onnx", mode="throughput", calibration=x[:64])
>>> result = heinfer.infer(prog, x)      # a real Client and Server, in one process
>>> result.outputs                       # like onnxruntime's output
>>> result.report                        # timings, rounds, bytes each way, parameters

``infer`` exchanges exactly the serialized messages the network service carries
(:mod:`heinfer.protocol.messages`). Throughput mode packs the batch axis (nGraph-HE2):
one query holds up to ``prog.batch_capacity`` items; larger inputs run as several queries.
Latency mode (``mode="latency"``/``"auto"``) has not landed and raises
:class:`~heinfer.errors.NotSupportedYetError`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heinfer.compiler.ir import Graph
from heinfer.compiler.onnx_import import from_torch, load_onnx
from heinfer.compiler.throughput import Options, compile_graph
from heinfer.errors import CompileError, NotSupportedYetError, ProtocolError
from heinfer.program.model import Program
from heinfer.protocol.client import Client
from heinfer.protocol.messages import peek_kind
from heinfer.protocol.server import Server

__all__ = ["compile", "infer", "InferenceResult", "Client", "Server", "Options"]


def compile(  # noqa: A001 - the API name is the contract
    model: Any,
    mode: str = "throughput",
    *,
    example_input: Any = None,
    calibration: np.ndarray | None = None,
    input_bound: float | None = None,
    security: int = 128,
    **options: Any,
) -> Program:
    """Compiles an ONNX model (path, bytes or ``onnx.ModelProto``), a :class:`Graph`, or a
    ``torch.nn.Module`` (with ``example_input``) into a :class:`Program`.

    ``calibration``: sample inputs ``(n, *input_shape)`` that size the encryption scales
    (recommended; without them ``input_bound`` is required and the bounds are the sound but
    loose interval bounds). Other keyword arguments are fields of
    :class:`~heinfer.compiler.throughput.Options` (``input_bits``, ``weight_bits``, …).
    """
    if mode in ("latency", "auto"):
        raise NotSupportedYetError(f"mode={mode!r} is not supported yet (latency mode is the next milestone); use mode='throughput'")
    if mode != "throughput":
        raise CompileError(f"unknown mode {mode!r}: 'throughput' ('latency' and 'auto' are coming)")
    if isinstance(model, Graph):
        graph = model
    elif isinstance(model, (str, bytes, bytearray, os.PathLike)) or type(model).__name__ == "ModelProto":
        graph = load_onnx(model)
    elif hasattr(model, "forward") and hasattr(model, "parameters"):
        if example_input is None:
            raise CompileError("a torch.nn.Module needs example_input to be exported")
        graph = from_torch(model, example_input)
    else:
        raise CompileError(f"cannot compile a {type(model).__name__}: give an ONNX path/bytes/ModelProto or a torch.nn.Module")
    try:
        opts = Options(security=security, **options)
    except TypeError as e:
        raise CompileError(f"unknown compiler option: {e}") from None
    return compile_graph(graph, calibration=calibration, input_bound=input_bound, options=opts)


@dataclass
class InferenceResult:
    """The decrypted outputs and a report of the run (timings in seconds, bytes)."""

    outputs: np.ndarray
    report: dict = field(default_factory=dict)


def infer(program: Program, x: np.ndarray, client: Client | None = None, server: Server | None = None) -> InferenceResult:
    """Runs ``program`` on ``x`` with a real :class:`Client` and :class:`Server` in one process.

    Items are split into queries of ``program.batch_capacity``; every message between the two
    parties is serialized and validated, and counted in the report.
    """
    x = np.asarray(x)
    if x.ndim != len(program.input_shape) + 1:
        raise ProtocolError(f"input has shape {x.shape}, the model takes (batch, *{program.input_shape})")
    if len(x) == 0:
        raise ProtocolError("x holds no items")
    t_start = time.perf_counter()
    client = client or Client(program)
    server = server or Server(program)
    t0 = time.perf_counter()
    keys = client.keys_message()
    t_keys = time.perf_counter() - t0
    session = server.open_session(keys)
    up, down, rounds, client_s = len(keys), 0, 0, t_keys
    server_s0 = server.seconds
    outputs = []
    cap = program.batch_capacity
    t_queries = time.perf_counter()
    for start in range(0, len(x), cap):
        t0 = time.perf_counter()
        msg = client.query_message(session, x[start : start + cap])
        client_s += time.perf_counter() - t0
        up += len(msg)
        reply = server.begin(msg)
        down += len(reply)
        while peek_kind(reply) == "step":
            rounds += 1
            t0 = time.perf_counter()
            back = client.reply_message(reply)
            client_s += time.perf_counter() - t0
            up += len(back)
            reply = server.resume(back)
            down += len(reply)
        t0 = time.perf_counter()
        outputs.append(client.decode_result(reply))
        client_s += time.perf_counter() - t0
    t_end = time.perf_counter()
    server.close_session(session)
    n = len(x)
    report = {
        "items": n,
        "queries": -(-n // cap),
        "batch_capacity": cap,
        "total_s": t_end - t_start,
        "queries_s": t_end - t_queries,
        "client_s": client_s,
        "server_s": server.seconds - server_s0,
        "keygen_s": t_keys,
        "rounds": rounds,
        "bytes_up": up,
        "bytes_down": down,
        "bytes_per_item_up": up / n,
        "bytes_per_item_down": down / n,
        "params": dict(program.params),
        "packing": program.packing,
        "security_bits": program.security,
        "predicted_error": program.segments[-1].predicted_error,
    }
    return InferenceResult(np.concatenate(outputs), report)

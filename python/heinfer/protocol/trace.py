"""The serialized input of every segment of one query (layer: ``heinfer.protocol``).

For benchmarks and tests of executors (the Ray backend): one in-process query through a real
:class:`~heinfer.protocol.Client` and :class:`~heinfer.protocol.Server`, recording the
ciphertext batch each segment receives, in the engine's wire format — the query's, then each
client-aided reply's.
"""

from __future__ import annotations

import numpy as np

from heinfer.program.model import Program
from heinfer.protocol.client import Client
from heinfer.protocol.messages import peek_kind
from heinfer.protocol.server import Server

__all__ = ["segment_inputs"]


def segment_inputs(program: Program, x: np.ndarray, keys: bool = False) -> list:
    """The serialized input ciphertexts of every segment of one query on ``x`` (items of the
    program's input shape), in segment order; with ``keys=True`` each as
    ``(bytes, relin key, Galois keys)``, the session's evaluation keys the server ran it with
    (latency programs rotate)."""
    client, server = Client(program.public()), Server(program)
    session = server.open_session(client.keys_message())
    seen: list = []
    run = server.executor.run

    def record(k, batch, relin, galois):
        seen.append((batch.to_bytes(), relin, galois) if keys else batch.to_bytes())
        return run(k, batch, relin, galois)

    server.executor.run = record
    msg = server.begin(client.query_message(session, x))
    while peek_kind(msg) == "step":
        msg = server.resume(client.reply_message(msg))
    client.decode_result(msg)
    return seen

"""The non-linear step of GAZELLE's two-party protocol (§4), over bytes.

Layer: ``heinfer.twoparty`` (a typed view of the native module's ``heinfer-2pc`` bindings;
``heinfer.protocol`` builds on it). The server holds the encrypted pre-activations ``x``; it
adds masks ``r`` and the client decrypts its share ``c = x + r mod p``. A garbled circuit —
garbled by the server, evaluated by the client, the client's input labels delivered by
oblivious transfer — reconstructs ``x``, applies ReLU (or max-pooling fused with ReLU, a
clip to public bounds ``LayerCircuit("clip", p, shift, lo=…, hi=…)``, or nothing: the
truncation alone), truncates by the fixed-point plan's shift; its output bits are never decoded but turned into
shares by the server's output table: the client gets ``z = y − ρ mod p``, the server keeps
``ρ``. Neither share tells its holder anything (both are uniform mod ``p``).

Each party is a state machine over ``bytes`` messages (sans-IO), so the same code runs in
process, over gRPC or over Ray::

    client, m1 = TwoPartyClient.start()              # once per session (128 base OTs)
    server, m2 = TwoPartyServer.start(m1)
    client.finish_setup(m2)
    layer = LayerCircuit("relu", p, shift)
    cstep, o1 = client.offline(layer, n)             # offline: no data yet
    sstep, o2 = server.offline(layer, n, o1)         # masks drawn, circuits garbled
    cstep.receive_offline(o2)
    c = (x + sstep.masks()) % p                      # what the client decrypts, online
    z = cstep.finish(sstep.labels(cstep.choose(c)))  # (z + sstep.output_shares()) % p == y

Semi-honest security, as GAZELLE's. :func:`run_in_process` plays both parties and measures
each phase; the benchmark ``bench/twoparty.py`` uses it.

The whole protocol — BFV linear layers with noise flooding between these steps, the fixed-point
plan, ``heinfer.compile(..., protocol="two-party")``, the service — builds on this module:
:mod:`heinfer.protocol.two_party` and :mod:`heinfer.serve.two_party`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from heinfer import _native
from heinfer._native import LayerCircuit, TwoPartyClient, TwoPartyClientStep, TwoPartyServer, TwoPartyServerStep

__all__ = [
    "LayerCircuit",
    "MAX_INSTANCES",
    "StepRun",
    "TwoPartyClient",
    "TwoPartyClientStep",
    "TwoPartyServer",
    "TwoPartyServerStep",
    "run_in_process",
]

#: Most instances of one step.
MAX_INSTANCES: int = _native.TWO_PARTY_MAX_INSTANCES


@dataclass(frozen=True)
class StepRun:
    """One step played in process: the reconstructed outputs and what each phase cost.

    ``offline_s`` covers the OT extension request, garbling with the server's masks, the OT
    corrections and parsing the garbled circuits; ``online_s`` the client's OT choices, the
    server's labels and the evaluation. Bytes are every message both ways.
    """

    outputs: np.ndarray
    offline_s: float
    online_s: float
    offline_bytes: int
    online_bytes: int


def run_in_process(
    client: TwoPartyClient, server: TwoPartyServer, layer: LayerCircuit, x: np.ndarray, p: int
) -> StepRun:
    """Runs one step on the values ``x`` (``instances × arity`` values in ``[0, p)``, as the
    server's plaintext would hold them) with both parties in this process; returns the
    reconstructed outputs ``y`` (``(z + server share) mod p``)."""
    x = np.ascontiguousarray(x, dtype=np.uint64)
    if x.ndim != 1 or x.size % layer.arity:
        raise ValueError(f"x must be a flat array of instances × {layer.arity} values")
    n = x.size // layer.arity
    t0 = time.perf_counter()
    cstep, o1 = client.offline(layer, n)
    sstep, o2 = server.offline(layer, n, o1)
    cstep.receive_offline(o2)
    t1 = time.perf_counter()
    c = (x + sstep.masks()) % np.uint64(p)
    t2 = time.perf_counter()
    choices = cstep.choose(c)
    labels = sstep.labels(choices)
    z = cstep.finish(labels)
    t3 = time.perf_counter()
    y = (z + sstep.output_shares()) % np.uint64(p)
    return StepRun(y, t1 - t0, t3 - t2, len(o1) + len(o2), len(choices) + len(labels))

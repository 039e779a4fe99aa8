"""The server: runs a program's segments on encrypted batches with evaluation keys only.

Client-aided steps (nGraph-HE2 §4.1) hide what they can at no accuracy cost before the
pre-activations leave the server:

* **a random permutation** of the values (of whole pooling windows and of the values inside
  each window for grouped functions), undone when the reply arrives;
* **a random positive factor per value** (per pooled component for max-pooling), drawn
  log-uniformly in ``[1/R, R]`` from the OS random source and folded into the weights of the
  linear layer before the step (rows) and after it (columns, divided), so it costs nothing
  and is exact for positively homogeneous functions (ReLU, leaky ReLU, max-pooling). Other
  functions (sigmoid, tanh, clip, softmax) are sent unscaled.

What the client still learns, per query: the pre-activation values of every client-aided
layer up to the factor and the permutation — so the sign of each value (which ReLUs fire),
the ratios between values that share a factor (inside one pooling component), the ratios of
one neuron across the items of the batch (the factor is per neuron, shared by the batch), the
layer sizes, pooling window sizes, and the functions themselves. The model's weights are not
sent, but a client that queries many times can learn about them from these values: use the
two-party protocol (GAZELLE §4, on the roadmap) when the model must stay private.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from heinfer import _native
from heinfer.errors import ProtocolError
from heinfer.program.model import ClientStep, Program
from heinfer.protocol.messages import Message, decode, encode
from heinfer.runtime import PreparedLinear, run_segment

__all__ = ["Server"]

_OS_RANDOM = random.SystemRandom()


def native_params(program: Program) -> _native.Params:
    """The checked native parameters of a program."""
    p = program.params
    return _native.Params(int(p["log_n"]), list(p["log_q"]), list(p["log_p"]), int(p["log_scale"]), None, int(p["security"]))


def program_id(program: Program) -> str:
    """Identifies the parameter set a session's keys belong to."""
    return f"{native_params(program).id:016x}"


class QueryTable:
    """Sessions and in-flight queries of a protocol server, safe to use from several threads
    for independent sessions (each dict operation is atomic; iteration works on copies)."""

    def __init__(self) -> None:
        self._sessions: dict = {}
        self._queries: dict = {}

    def close_session(self, session: str) -> None:
        """Forgets a session and its queries."""
        self._sessions.pop(session, None)
        for q, st in list(self._queries.items()):
            if _session_of(st) == session:
                self._queries.pop(q, None)

    def cancel(self, query_id: str) -> None:
        """Forgets an in-flight query (a client that vanished mid-protocol); idempotent."""
        self._queries.pop(query_id, None)

    @property
    def query_count(self) -> int:
        """Queries started and not yet finished or cancelled."""
        return len(self._queries)

    @property
    def session_count(self) -> int:
        """Open sessions."""
        return len(self._sessions)


def _session_of(state) -> str:
    return state["session"] if isinstance(state, dict) else state.session


@dataclass
class _Query:
    session: str
    items: int
    ref: str
    segment: int = 0
    recv: np.ndarray | None = None
    scales: dict = field(default_factory=dict)


class Server(QueryTable):
    """Evaluates a program for any number of sessions; never holds a secret key.

    ``open_session(keys)`` registers a client's evaluation keys and returns a session id;
    ``begin(query)`` starts a query and returns the next message (a client step or the
    result); ``resume(reply)`` continues after a client step. ``baseline=True`` evaluates the
    linear layers without the nGraph-HE2 optimizations (benchmarks only; the default for a
    program compiled with ``lazy=False``). For a latency-mode program ``Server(program)``
    returns a :class:`heinfer.protocol.latency.LatencyServer` (same methods).
    """

    def __new__(cls, program: Program, *args, **kwargs):  # noqa: D102 - one entry point per mode
        if cls is Server and getattr(program, "mode", None) == "latency":
            from heinfer.protocol.latency import LatencyServer

            return LatencyServer(program, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, program: Program, max_sessions: int = 64, max_message_bytes: int = 1 << 30, baseline: bool | None = None) -> None:
        self.program = program
        lazy = bool(program.meta.get("lazy", True))
        if baseline is None:
            baseline = not lazy
        if not lazy and not baseline:
            raise ProtocolError("a program compiled with lazy=False (the baseline) runs only on Server(program, baseline=True)")
        self.params = native_params(program)
        self.prepared = [PreparedLinear(layer) for layer in program.layers]
        self.max_sessions = max_sessions
        self.max_message_bytes = max_message_bytes
        self.baseline = baseline
        super().__init__()
        self.seconds = 0.0  # time spent evaluating, for reports

    # ------------------------------------------------------------------ sessions
    def open_session(self, keys_message: bytes) -> str:
        """Registers evaluation keys (validated) and returns the session id."""
        msg = decode(keys_message, "keys")
        if msg.header["program_id"] != program_id(self.program):
            raise ProtocolError(f"keys are for parameters {msg.header['program_id']}, this program uses {program_id(self.program)}")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"too many sessions (limit {self.max_sessions})")
        rlk = None
        if self.program.needs_relin_key:
            if not msg.payload:
                raise ProtocolError("this program needs a relinearization key")
            rlk = _native.RelinKey.from_bytes(self.params, msg.payload, self.max_message_bytes)
        elif msg.payload:
            raise ProtocolError("this program needs no evaluation key; refusing unexpected key material")
        sid = secrets.token_hex(16)
        self._sessions[sid] = rlk
        return sid

    # ------------------------------------------------------------------ queries
    def begin(self, query_message: bytes) -> bytes:
        """Starts a query: validates the input batch and runs until the first client step."""
        msg = decode(query_message, "query")
        session = msg.header["session"]
        if session not in self._sessions:
            raise ProtocolError(f"unknown session {session[:16]!r}")
        items = msg.header["items"]
        if not 1 <= items <= self.program.batch_capacity:
            raise ProtocolError(f"{items} items per query (capacity {self.program.batch_capacity})")
        seg = self.program.segments[0]
        batch = self._batch(msg.payload, seg.in_size, seg.input_level, seg.input_scale)
        qid = secrets.token_hex(16)
        state = _Query(session, items, msg.header["ref"][:64])
        state.scales = self._hiding_scales()
        self._queries[qid] = state
        try:
            return self._run(qid, state, batch)
        except Exception:
            self._queries.pop(qid, None)
            raise

    def resume(self, reply_message: bytes) -> bytes:
        """Continues a query with the client's reply to its step."""
        msg = decode(reply_message, "reply")
        qid = msg.header["query"]
        state = self._queries.get(qid)
        if state is None or state.recv is None:
            raise ProtocolError(f"no query {qid[:16]!r} is waiting for a reply")
        if msg.header["step"] != state.segment - 1:
            raise ProtocolError(f"reply to step {msg.header['step']}, the query waits for step {state.segment - 1}")
        seg = self.program.segments[state.segment]
        try:
            batch = self._batch(msg.payload, len(state.recv), seg.input_level, seg.input_scale)
        except Exception:
            self._queries.pop(qid, None)
            raise
        batch = batch.take([int(i) for i in np.argsort(state.recv)])
        state.recv = None
        try:
            return self._run(qid, state, batch)
        except Exception:
            self._queries.pop(qid, None)
            raise

    def _batch(self, payload: bytes, count: int, level: int, scale: float) -> _native.CiphertextBatch:
        batch = _native.CiphertextBatch.from_bytes(self.params, payload, self.max_message_bytes, count)
        if len(batch) != count or batch.level != level or batch.size != 2 or abs(batch.scale / scale - 1) > 1e-9:
            raise ProtocolError(
                f"expected {count} fresh ciphertexts at level {level} and scale 2^{math.log2(scale):.2f}, "
                f"got {len(batch)} at level {batch.level}, size {batch.size}, scale 2^{math.log2(batch.scale):.2f}"
            )
        return batch

    def _run(self, qid: str, state: _Query, batch: _native.CiphertextBatch) -> bytes:
        k = state.segment
        seg = self.program.segments[k]
        t0 = time.perf_counter()
        out = run_segment(self.program, seg, batch, self.prepared, self._sessions[state.session], state.scales, baseline=self.baseline)
        state.segment += 1
        if k == len(self.program.steps):
            self.seconds += time.perf_counter() - t0
            self._queries.pop(qid, None)
            return encode(Message("result", {"query": qid, "ref": state.ref, "items": state.items}, out.to_bytes()))
        send, sizes, recv = self._shuffle(self.program.steps[k])
        state.recv = recv
        payload = out.take(send).to_bytes()
        self.seconds += time.perf_counter() - t0
        return encode(Message("step", {"query": qid, "ref": state.ref, "items": state.items, "step": k, "group_sizes": sizes}, payload))

    # ------------------------------------------------------------------ hiding
    def _hiding_scales(self) -> dict:
        """Fresh per-query factors folded into the layers around every hiding step."""
        scales: dict[int, list] = {}
        R = math.log(self.program.hide_range) if self.program.hide_range > 1 else 0.0
        for k, st in enumerate(self.program.steps):
            if not st.hide_scale or R == 0.0:
                continue
            ncomp = int(st.components.max()) + 1
            r = np.exp(np.array([_OS_RANDOM.uniform(-R, R) for _ in range(ncomp)]))
            before = self._layer_at(k, last=True)
            after = self._layer_at(k + 1, last=False)
            scales.setdefault(before, [None, None])[0] = r[st.components]
            scales.setdefault(after, [None, None])[1] = r[st.out_components]
        return {key: tuple(v) for key, v in scales.items()}

    def _layer_at(self, k: int, last: bool) -> int:
        instrs = [i for i in self.program.segments[k].instrs if i.op == "linear"]
        return (instrs[-1] if last else instrs[0]).arg

    @staticmethod
    def _shuffle(step: ClientStep) -> tuple[list[int], list[int], np.ndarray]:
        """(values to send in order, group sizes, output index of each reply position)."""
        g = step.grouping
        if g is None:
            perm = list(range(step.in_size))
            _OS_RANDOM.shuffle(perm)
            return perm, [], np.array(perm)
        windows = [[int(k) for k in row if k >= 0] for row in g.groups]
        order = list(range(len(windows)))
        _OS_RANDOM.shuffle(order)
        send: list[int] = []
        sizes = []
        for w in order:
            vals = windows[w][:]
            _OS_RANDOM.shuffle(vals)
            send += vals
            sizes.append(len(vals))
        recv = np.array(order) if g.kind == "maxpool" else np.array(send)
        return send, sizes, recv

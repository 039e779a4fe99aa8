"""The server: runs a program's segments on encrypted inputs with evaluation keys only.

Layer: ``heinfer.protocol``. One :class:`Server` for every layout; it needs the full
:class:`~heinfer.program.Program` (weights) and refuses a public one. Everything it receives
is checked against the public program before use: the keys against the key manifest (exactly
the relinearization and rotation keys it names), each batch of ciphertexts against the count,
level, size and scale its segment expects, each message against the size limit the program
determines (:func:`heinfer.protocol.limits.message_limits`).

Client-aided steps send the values of a segment's output as they are: the client sees the
pre-activations of every client-aided layer (no model privacy against the client; see the
README's privacy table). Earlier versions multiplied them by random positive factors and
permuted them; that hid the model from nobody (a client that sends impulses recovers every
layer up to those factors, i.e. an equivalent network), so it was removed.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from dataclasses import dataclass

from heinfer import _native
from heinfer.errors import ProtocolError
from heinfer.program.model import Program
from heinfer.protocol.limits import message_limits
from heinfer.protocol.messages import decode, encode
from heinfer.runtime.executor import Executor, native_params

__all__ = ["Server", "QueryTable"]

#: Largest relative difference between a received ciphertext's scale and the planned one.
SCALE_TOLERANCE = 1e-9


class QueryTable:
    """Sessions and in-flight queries of a protocol server, safe to use from several threads
    for independent sessions (each dict operation is atomic; iteration works on copies)."""

    def __init__(self) -> None:
        self._sessions: dict = {}
        self._queries: dict = {}

    def close_session(self, session: str) -> None:
        """Forgets a session, its keys and its queries."""
        self._sessions.pop(session, None)
        for q, st in list(self._queries.items()):
            if st.session == session:
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


@dataclass
class _Session:
    relin: _native.RelinKey | None
    galois: _native.GaloisKeys | None


@dataclass
class _Query:
    session: str
    ref: str
    segment: int = 0
    waiting: bool = False


class Server(QueryTable):
    """Evaluates a program for any number of sessions; never holds a secret key.

    ``open_session(keys)`` registers a client's evaluation keys and returns a session id;
    ``begin(query)`` starts a query and returns the next message (a step or the result);
    ``resume(reply)`` continues after a step. ``baseline=True`` runs batch-axis linear
    layers without the nGraph-HE2 optimizations (benchmarks; the default for a program
    compiled with ``lazy=False``). ``executor``: runs the segments instead of an in-process
    :class:`~heinfer.runtime.executor.Executor` (a :class:`heinfer.cluster.RayExecutor`; its
    ``forget_keys(relin, galois)``, if any, is called when a session closes). ``seconds``:
    time spent in ``begin``/``resume``, message parsing and serialization included."""

    def __init__(self, program: Program, max_sessions: int = 64, max_message_bytes: int | None = None, baseline: bool | None = None, executor=None) -> None:
        if not isinstance(program, Program):
            raise ProtocolError("a Server needs the full program with its weights (heinfer.Program), not a PublicProgram")
        lazy = bool(program.meta.get("lazy", True))
        baseline = (not lazy) if baseline is None else baseline
        if not lazy and not baseline:
            raise ProtocolError("a program compiled with lazy=False (the baseline) runs only on Server(program, baseline=True)")
        if lazy and baseline:  # its levels and scales are planned for the optimized kernels
            raise ProtocolError("Server(program, baseline=True) runs only a program compiled with lazy=False (the baseline plans a rescale per product)")
        if baseline and program.mode != "throughput":
            raise ProtocolError("only batch-axis programs have a baseline mode (compile latency programs with strategy=... instead)")
        self.program = program
        self.program_id = program.id
        self.params = native_params(program.params)
        self.limits = message_limits(program.public())
        if max_message_bytes is not None:
            self.limits = {k: min(v, max_message_bytes) for k, v in self.limits.items()}
        # ``executor``: anything with Executor's ``run`` (heinfer.cluster.RayExecutor).
        if executor is not None and (executor.program.id != program.id or executor.baseline != baseline):
            raise ProtocolError("the executor runs another program (or another baseline mode) than this server")
        self.executor = Executor(program, baseline) if executor is None else executor
        self.setup_seconds = self.executor.setup_seconds
        self.max_sessions = max_sessions
        self.baseline = baseline
        super().__init__()
        self._lock = threading.Lock()
        self.seconds = 0.0

    # ------------------------------------------------------------------ sessions
    def close_session(self, session: str) -> None:
        """Forgets a session, its keys and its queries (on the executor's workers too)."""
        s = self._sessions.get(session)
        super().close_session(session)
        if s is not None and hasattr(self.executor, "forget_keys"):
            self.executor.forget_keys(s.relin, s.galois)

    def open_session(self, keys_message: bytes) -> str:
        """Registers evaluation keys (validated against the key manifest); returns the id."""
        t0 = time.perf_counter()
        self._check_size(keys_message, "keys")
        _, msg = decode(keys_message, "keys")
        p = self.program
        if msg.program_id != self.program_id:
            raise ProtocolError(f"keys are for program {msg.program_id[:16]}…, this server runs {self.program_id[:16]}…")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"too many sessions (limit {self.max_sessions})")
        if bool(msg.relin_key) != p.needs_relin_key or bool(msg.galois_keys) != bool(p.rotation_steps):
            raise ProtocolError("the keys message does not hold exactly the keys this program needs")
        limit = self.limits["keys"]
        rlk = _native.RelinKey.from_bytes(self.params, msg.relin_key, limit) if msg.relin_key else None
        gk = _native.GaloisKeys.from_bytes(self.params, msg.galois_keys, limit) if msg.galois_keys else None
        if gk is not None and set(gk.elements()) != set(p.key_manifest["galois_elements"]):
            raise ProtocolError(f"rotation keys for {len(gk)} Galois elements, the program needs exactly {len(p.rotation_steps)}")
        sid = secrets.token_hex(16)
        self._sessions[sid] = _Session(rlk, gk)
        self.seconds += time.perf_counter() - t0
        return sid

    # ------------------------------------------------------------------ queries
    def begin(self, query_message: bytes) -> bytes:
        """Starts a query: validates the input ciphertexts and runs until the first step."""
        t0 = time.perf_counter()
        self._check_size(query_message, "query")
        _, msg = decode(query_message, "query")
        if msg.session not in self._sessions:
            raise ProtocolError(f"unknown session {msg.session[:16]!r}")
        if not 1 <= msg.items <= self.program.batch_capacity:
            raise ProtocolError(f"{msg.items} items per query (capacity {self.program.batch_capacity})")
        batch = self._batch(msg.ciphertexts, 0, "query")
        qid = secrets.token_hex(16)
        state = _Query(msg.session, msg.ref)
        self._queries[qid] = state
        return self._run(qid, state, batch, t0)

    def resume(self, reply_message: bytes) -> bytes:
        """Continues a query with the client's reply to its step."""
        t0 = time.perf_counter()
        self._check_size(reply_message, "reply")
        _, msg = decode(reply_message, "reply")
        state = self._queries.get(msg.query)
        if state is None or not state.waiting:
            raise ProtocolError(f"no query {msg.query[:16]!r} is waiting for a reply")
        if msg.step != state.segment - 1:
            raise ProtocolError(f"reply to step {msg.step}, the query waits for step {state.segment - 1}")
        try:
            batch = self._batch(msg.ciphertexts, state.segment, "reply")
        except Exception:
            self._queries.pop(msg.query, None)
            raise
        state.waiting = False
        return self._run(msg.query, state, batch, t0)

    def _check_size(self, data: bytes, kind: str) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ProtocolError(f"a message is bytes, got {type(data).__name__}")
        if len(data) > self.limits[kind]:
            raise ProtocolError(f"{kind} message of {len(data)} bytes exceeds the {self.limits[kind]} this program allows")

    def _batch(self, payload: bytes, k: int, kind: str) -> _native.CiphertextBatch:
        """The input ciphertexts of segment ``k``, checked against the plan."""
        seg = self.program.segments[k]
        count = seg.n_input_cts
        batch = _native.CiphertextBatch.from_bytes(self.params, payload, self.limits[kind], count)
        if len(batch) != count or batch.level != seg.input_level or batch.size != 2 or not math.isclose(batch.scale, seg.input_scale, rel_tol=SCALE_TOLERANCE):
            raise ProtocolError(
                f"expected {count} fresh ciphertexts at level {seg.input_level} and scale 2^{math.log2(seg.input_scale):.2f}, "
                f"got {len(batch)} at level {batch.level}, size {batch.size}, scale 2^{math.log2(max(batch.scale, 1e-300)):.2f}"
            )
        return batch

    def _run(self, qid: str, state: _Query, batch: _native.CiphertextBatch, t0: float) -> bytes:
        k = state.segment
        session = self._sessions.get(state.session)
        try:
            if session is None:
                raise ProtocolError("the session of this query was closed")
            out = self.executor.run(k, batch, session.relin, session.galois)
            state.segment += 1
            payload = out.to_bytes()
        except Exception:
            self._queries.pop(qid, None)
            raise
        if k == len(self.program.steps):
            self._queries.pop(qid, None)
            reply = encode("result", query=qid, ref=state.ref, ciphertexts=payload)
        else:
            state.waiting = True
            reply = encode("step", query=qid, ref=state.ref, step=k, ciphertexts=payload)
        with self._lock:
            self.seconds += time.perf_counter() - t0
        return reply

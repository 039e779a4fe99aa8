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
from collections.abc import Iterator
from dataclasses import dataclass, field

from heinfer import _native
from heinfer.errors import ProtocolError
from heinfer.program.model import Program
from heinfer.program.rounding import output_drop_bits
from heinfer.protocol.chunks import Cursor, chunks_for
from heinfer.protocol.limits import message_limits
from heinfer.protocol.messages import decode, decode_bulk, framing, keys_id, pb
from heinfer.protocol.messages import size as message_size
from heinfer.runtime.executor import Executor, bad_budget, native_params

__all__ = ["Outgoing", "Server", "QueryTable"]

#: Largest relative difference between a received ciphertext's scale and the planned one.
SCALE_TOLERANCE = 1e-9


class QueryTable:
    """Sessions and in-flight queries of a protocol server, safe to use from several threads
    for independent sessions (each dict operation is atomic; iteration works on copies)."""

    def __init__(self) -> None:
        self._sessions: dict = {}
        self._queries: dict = {}
        #: (session, client reference) → id of the query (while it runs).
        self._by_ref: dict[tuple[str, str], str] = {}

    def close_session(self, session: str) -> None:
        """Forgets a session, its keys and its queries."""
        self._sessions.pop(session, None)
        for q, st in list(self._queries.items()):
            if st.session == session:
                self.cancel(q)

    def cancel(self, query_id: str) -> None:
        """Forgets an in-flight query (a client that vanished mid-protocol, or a query whose
        input was refused); idempotent."""
        state = self._queries.pop(query_id, None)
        if state is not None:
            self._by_ref.pop((state.session, state.ref), None)

    def cancel_ref(self, session: str, ref: str) -> None:
        """Forgets the query a session started under the client reference ``ref`` (a stream
        that broke before the server's id of the query was known); idempotent."""
        qid = self._by_ref.get((session, ref))
        if qid is not None:
            self.cancel(qid)

    @property
    def query_count(self) -> int:
        """Queries started and not yet finished or cancelled."""
        return len(self._queries)

    @property
    def session_count(self) -> int:
        """Open sessions."""
        return len(self._sessions)


class Outgoing:
    """What a server sends after a query's input is complete: ``kind`` (``"step"`` or
    ``"result"``), ``query`` (the server's id of the query) and ``chunks`` messages, each
    serialized when iteration reaches it (so that one travels while the next is made)."""

    def __init__(self, kind: str, query: str, chunks: int, messages: Iterator[bytes]) -> None:
        self.kind, self.query, self.chunks = kind, query, chunks
        self._messages = messages

    def __iter__(self) -> Iterator[bytes]:
        return self._messages


@dataclass
class _Session:
    relin: _native.RelinKey | None
    galois: _native.GaloisKeys | None


@dataclass
class _Query:
    session: str
    ref: str
    items: int = 0
    segment: int = 0
    waiting: bool = False
    #: The chunks of the input being received (the query's, or a reply's): their decoded
    #: batches or, for an executor that forwards bytes, their validated bytes.
    cursor: Cursor | None = None
    batches: list = field(default_factory=list)
    #: Chunk size of what the server sends back (``None``: whole messages).
    max_bytes: int | None = None


class Server(QueryTable):
    """Evaluates a program for any number of sessions; never holds a secret key.

    ``open_session(keys)`` registers a client's evaluation keys and returns a session id;
    ``begin(query)`` starts a query and returns the next message (a step or the result);
    ``resume(reply)`` continues after a step. ``baseline=True`` runs batch-axis linear
    layers without the nGraph-HE2 optimizations (benchmarks; the default for a program
    compiled with ``lazy=False``). ``executor``: runs the segments instead of an in-process
    :class:`~heinfer.runtime.executor.Executor` (a :class:`heinfer.cluster.RayExecutor`; its
    ``forget_keys(relin, galois)``, if any, is called when a session closes; with
    ``run_serialized(k, parts, count, relin, galois, drop_bits)`` it gets each input as the
    bytes that arrived, validated here in full but not decoded, which the executor's workers
    decode, and has them round the output as this server would).
    ``max_memory``:
    bytes of encoded plaintexts the in-process executor keeps (default:
    :func:`~heinfer.runtime.executor.plaintext_budget`, half of physical memory at most);
    beyond it the largest segments are encoded during each query. ``round_outputs``: send
    every step and result rounded (:mod:`heinfer.program.rounding`: a quarter to a third fewer
    bytes back to the client on CryptoNets-ReLU and MobileNetV2, for an inverse NTT per
    polynomial here and a forward one on the client; ``False`` when both parties share a
    machine and bytes cost nothing). ``seconds``:
    time spent in ``begin``/``resume``, message parsing and serialization included."""

    def __init__(
        self, program: Program, max_sessions: int = 64, max_message_bytes: int | None = None, baseline: bool | None = None, executor=None,
        max_memory: int | None = None, round_outputs: bool = True,
    ) -> None:
        if getattr(program, "protocol", None) == "two-party":
            raise ProtocolError(
                "a Server runs client-aided programs; a two-party program runs with heinfer.infer, or is served by "
                "heinfer.serve.two_party.serve_two_party (heinfer serve on the command line)"
            )
        if not isinstance(program, Program):
            raise ProtocolError(f"a Server needs the full program with its weights (heinfer.Program), not a {type(program).__name__}")
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
        #: Low bits each segment's output drops on the wire (the client only decrypts it).
        self._drop = [output_drop_bits(self.params, program, k) if round_outputs else [0] * program.segments[k].output_parts for k in range(len(program.segments))]
        if max_message_bytes is not None:
            self.limits = {k: min(v, max_message_bytes) for k, v in self.limits.items()}
        # ``executor``: anything with Executor's ``run`` (heinfer.cluster.RayExecutor).
        if executor is not None and (executor.program.id != program.id or executor.baseline != baseline):
            raise ProtocolError("the executor runs another program (or another baseline mode) than this server")
        if executor is not None and max_memory is not None:
            raise ProtocolError("max_memory applies to the in-process executor: give it to the executor instead")
        if (why := bad_budget(max_memory)) is not None:
            raise ProtocolError(why)
        self.executor = Executor(program, baseline, max_memory=max_memory) if executor is None else executor
        self._forwards = callable(getattr(self.executor, "run_serialized", None))
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
        """Registers evaluation keys (validated against the key manifest); returns the
        session id: the keys message's id (:func:`~heinfer.protocol.messages.keys_id`, by
        which the client picks the session's key) and 16 random bytes, in hex."""
        t0 = time.perf_counter()
        self._check_size(keys_message, "keys")
        _, msg = decode(keys_message, "keys")
        p = self.program
        if msg.program_id != self.program_id:
            raise ProtocolError(f"keys are for program {msg.program_id[:16]}…, this server runs {self.program_id[:16]}…")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"too many sessions (limit {self.max_sessions})")
        # each read of a protobuf bytes field copies it (354 MB of Galois keys for LoLa's
        # network: 0.2 s a copy in warm memory): read each field once
        rlk_bytes, gk_bytes = msg.relin_key, msg.galois_keys
        if bool(rlk_bytes) != p.needs_relin_key or bool(gk_bytes) != bool(p.rotation_steps):
            raise ProtocolError("the keys message does not hold exactly the keys this program needs")
        limit = self.limits["keys"]
        rlk = _native.RelinKey.from_bytes(self.params, rlk_bytes, limit) if rlk_bytes else None
        gk = _native.GaloisKeys.from_bytes(self.params, gk_bytes, limit) if gk_bytes else None
        del gk_bytes
        if gk is not None and set(gk.elements()) != set(p.key_manifest["galois_elements"]):
            raise ProtocolError(f"rotation keys for {len(gk)} Galois elements, the program needs exactly {len(p.rotation_steps)}")
        sid = keys_id(keys_message) + secrets.token_hex(16)  # the client finds the session's key by its head
        self._sessions[sid] = _Session(rlk, gk)
        self.seconds += time.perf_counter() - t0
        return sid

    # ------------------------------------------------------------------ queries
    def begin(self, query_message: bytes) -> bytes:
        """Starts a query sent whole (chunk 0 of 1): validates the input ciphertexts and runs
        until the first step; returns it (or the result), whole."""
        return self._whole(self._receive(query_message, "query"), "query")

    def resume(self, reply_message: bytes) -> bytes:
        """Continues a query with the client's whole reply to its step; returns the next step
        (or the result), whole."""
        return self._whole(self._receive(reply_message, "reply"), "reply")

    def receive(self, message: bytes, max_bytes: int | None = None, session: str | None = None, query: str | None = None) -> Outgoing | None:
        """Takes one chunk of a query or of a reply (:mod:`heinfer.protocol.chunks`): checks
        it and its ciphertexts against the plan. ``None`` until the last chunk; then runs the
        segment and returns the next step (chunks of at most ``max_bytes``; ``None``: one
        message) or the result (one message): an :class:`Outgoing`.

        ``session`` / ``query``: the session (or query) the caller's stream belongs to; a
        chunk of another one is refused. The chunks of one query's input come from one
        caller, in order (a service reads one stream per query)."""
        return self._receive(message, ("query", "reply"), max_bytes, session, query)

    def _receive(self, message: bytes, kinds: str | tuple[str, ...], max_bytes: int | None = None, session: str | None = None, query: str | None = None) -> Outgoing | None:
        t0 = time.perf_counter()
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        self._check_size(message, max(kinds, key=self.limits.__getitem__))
        _, msg, payload = decode_bulk(message, kinds)
        if isinstance(msg, pb.Query):
            self._check_size(message, "query")
            qid, state = self._query_chunk(msg, session, max_bytes)
            k, kind = 0, "query"
        else:
            self._check_size(message, "reply")
            qid, state = msg.query, self._queries.get(msg.query)
            if query is not None and msg.query != query:
                raise ProtocolError(f"a reply for query {msg.query[:16]!r} on the stream of query {query[:16]!r}")
            if state is None or not state.waiting:
                raise ProtocolError(f"no query {msg.query[:16]!r} is waiting for a reply")
            if msg.step != state.segment - 1:
                raise ProtocolError(f"reply to step {msg.step}, the query waits for step {state.segment - 1}")
            k, kind = state.segment, "reply"
        try:
            if state.cursor is None:
                state.cursor, state.batches = Cursor(self.program.segments[k].n_input_cts, f"{kind} of query {qid[:16]}"), []
            start, stop = state.cursor.take(msg.chunk, msg.chunks)
            if self._forwards:  # checked here, decoded where it runs
                self._check_batch(payload, k, kind, stop - start)
                state.batches.append(payload)
            else:
                state.batches.append(self._batch(payload, k, kind, stop - start))
            done = state.cursor.done
        except Exception:
            self.cancel(qid)
            raise
        finally:
            self._count(t0)
        if not done:
            return None
        batches = state.batches
        state.cursor, state.batches = None, []
        state.waiting = False
        return self._run(qid, state, batches)

    def _query_chunk(self, msg: pb.Query, session: str | None, max_bytes: int | None) -> tuple[str, _Query]:
        """The query a query chunk belongs to: a new one for chunk 0 (its id drawn here), else
        the query of this session and client reference whose input is being received."""
        if session is not None and msg.session != session:
            raise ProtocolError(f"a query message for session {msg.session[:16]!r} on a call of session {session[:16]!r}")
        if msg.session not in self._sessions:
            raise ProtocolError(f"unknown session {msg.session[:16]!r}")
        if not 1 <= msg.items <= self.program.batch_capacity:
            raise ProtocolError(f"{msg.items} items per query (capacity {self.program.batch_capacity})")
        key = (msg.session, msg.ref)
        if msg.chunk == 0:
            if key in self._by_ref:
                raise ProtocolError("a query with this client reference is already running (replayed?)")
            qid = secrets.token_hex(16)
            state = _Query(msg.session, msg.ref, msg.items, max_bytes=max_bytes)
            self._queries[qid] = state
            self._by_ref[key] = qid
            return qid, state
        qid = self._by_ref.get(key, "")
        state = self._queries.get(qid)
        if state is None or state.segment != 0 or state.cursor is None:
            raise ProtocolError(f"query chunk {msg.chunk} of a query whose input this server is not receiving")
        if msg.items != state.items:
            self.cancel(qid)
            raise ProtocolError(f"query chunk {msg.chunk} declares {msg.items} items, chunk 0 declared {state.items}")
        return qid, state

    def _whole(self, out: Outgoing | None, kind: str) -> bytes:
        if out is None:
            raise ProtocolError(f"this {kind} message is one chunk of several; feed them to Server.receive")
        messages = list(out)
        if len(messages) != 1:  # whole messages were asked for: a bug, not an input
            raise ProtocolError(f"the server's answer came as {len(messages)} messages")
        return messages[0]

    def _count(self, t0: float) -> None:
        with self._lock:
            self.seconds += time.perf_counter() - t0

    def _check_size(self, data, kind: str) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview, pb.Message)):
            raise ProtocolError(f"a message is bytes, got {type(data).__name__}")
        n = message_size(data)
        if n > self.limits[kind]:
            raise ProtocolError(f"{kind} message of {n} bytes exceeds the {self.limits[kind]} this program allows")

    def _batch(self, payload: bytes, k: int, kind: str, count: int) -> _native.CiphertextBatch:
        """``count`` input ciphertexts of segment ``k``, decoded and checked against the plan."""
        narrow = getattr(self.executor, "reads_narrow", None)  # an executor may not say
        batch = _native.CiphertextBatch.from_bytes(self.params, payload, self.limits[kind], count, narrow=bool(narrow and narrow(k)))
        self._check_shape(k, count, len(batch), batch.level, batch.size, batch.scale)
        return batch

    def _check_batch(self, payload: bytes, k: int, kind: str, count: int) -> None:
        """Validates ``count`` serialized input ciphertexts of segment ``k`` as :meth:`_batch`
        does — every byte, every residue, the plan's count, level, size and scale — without
        decoding them (for an executor that forwards the bytes to the process that does)."""
        found = _native.CiphertextBatch.check_bytes(self.params, payload, self.limits[kind], count)
        self._check_shape(k, count, *found)

    def _check_shape(self, k: int, count: int, n: int, level: int, size: int, scale: float) -> None:
        seg = self.program.segments[k]
        if n != count or level != seg.input_level or size != 2 or not math.isclose(scale, seg.input_scale, rel_tol=SCALE_TOLERANCE):
            raise ProtocolError(
                f"expected {count} fresh ciphertexts at level {seg.input_level} and scale 2^{math.log2(seg.input_scale):.2f}, "
                f"got {n} at level {level}, size {size}, scale 2^{math.log2(max(scale, 1e-300)):.2f}"
            )

    def _run(self, qid: str, state: _Query, batches: list) -> Outgoing:
        """Runs the query's next segment on its input (decoded batches, or the validated
        bytes for an executor with ``run_serialized``); the messages that carry its output."""
        t0 = time.perf_counter()
        k = state.segment
        session = self._sessions.get(state.session)
        try:
            if session is None:
                raise ProtocolError("the session of this query was closed")
            if self._forwards:
                out = self.executor.run_serialized(k, batches, self.program.segments[k].n_input_cts, session.relin, session.galois, self._drop[k])
            else:
                batch = batches[0] if len(batches) == 1 else _native.CiphertextBatch.concat(batches, consume=True)
                del batches
                out = self.executor.run(k, batch, session.relin, session.galois)
            state.segment += 1
        except Exception:
            self.cancel(qid)
            raise
        finally:
            self._count(t0)
        if k == len(self.program.steps):
            self.cancel(qid)
            return Outgoing("result", qid, 1, self._messages(out, "result", {"query": qid, "ref": state.ref}, 1, self._drop[k]))
        state.waiting = True
        seg = self.program.segments[k]  # the output's level and size are the plan's
        one = self.params.rounded_ciphertext_wire_bytes(seg.output_level, seg.output_parts, self._drop[k])
        chunks = chunks_for(len(out), one, state.max_bytes)
        return Outgoing("step", qid, chunks, self._messages(out, "step", {"query": qid, "ref": state.ref, "step": k}, chunks, self._drop[k]))

    def _messages(self, out: _native.CiphertextBatch, kind: str, fields: dict, chunks: int, drop: list[int]) -> Iterator[bytes]:
        """``out`` serialized as ``chunks`` messages of ``kind``, each when it is asked for,
        rounded (``drop``: low bits per polynomial, :mod:`heinfer.program.rounding`). ``out``
        is let go once the last chunk is serialized, before it is handed over: a client in the
        same process answers the step while this generator waits."""
        n = len(out)
        for i in range(chunks):
            t0 = time.perf_counter()
            chunk = {} if kind == "result" else {"chunk": i, "chunks": chunks}
            # the ciphertexts serialized straight after the message's header: one buffer
            message = out.to_bytes(i * n // chunks, (i + 1) * n // chunks, drop_bits=drop, frame=framing(kind, **fields, **chunk))
            if i == chunks - 1:
                del out
            self._count(t0)
            yield message

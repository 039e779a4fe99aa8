"""The client: owns the secret key; encrypts inputs, answers steps, decrypts results.

Layer: ``heinfer.protocol``. One :class:`Client` for every layout; it holds the *public*
program only (given a full :class:`~heinfer.program.Program` it keeps just its public
part), so it never holds weights.

**Not an oracle for a malicious server** (the defenses the tests in
``tests/python/protocol/test_malicious_server.py`` play against):

* a fresh secret key per session (:meth:`Client.keys_message`), and per query when the
  program needs no evaluation key;
* a per-query state machine: each step answered once, in order, only for queries this
  client started; a result only after the last step; the chunks of a step in order, each
  once (:mod:`heinfer.protocol.chunks`); a query that fails is forgotten;
* counts, levels, scales and sizes come from the public program, never from the message:
  a batch of the wrong count, level, size or scale is refused before decryption;
* a decrypted value out of its planned range never aborts the query and never appears in
  an error: it is clamped, the query finishes, and the count is reported afterwards
  (:attr:`Client.last_out_of_range`);
* outputs are released with no more precision than the program states: Gaussian noise
  (from the OS) of half the stated precision is added and the result rounded to it, so the
  low bits of a decryption — where the key-dependent error lives — are not released.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from heinfer import _native
from heinfer.errors import ProtocolError, RangeError
from heinfer.program.model import PublicProgram, Segment
from heinfer.program.rounding import output_drop_bits
from heinfer.protocol.chunks import Cursor, bounds, chunks_for
from heinfer.protocol.layouts import decrypt_rows, encrypt_rows_bytes, input_rows, output_values
from heinfer.protocol.limits import message_limits
from heinfer.protocol.messages import KEYS_ID_CHARS, decode_bulk, encode, framing, keys_id
from heinfer.runtime.executor import native_params

__all__ = ["Client", "check_input", "SCALE_TOLERANCE"]

#: Unfinished queries a client keeps (beyond it the oldest is forgotten: abandoned queries
#: must not pile up secret keys).
MAX_QUERIES_IN_FLIGHT = 64
#: Sessions whose secret keys a client keeps (the most recent; each key is a few MB).
MAX_SESSION_KEYS = 16
#: Largest relative difference between a ciphertext's scale and the program's exact scale
#: (floating-point rounding of the products and quotients of primes only).
SCALE_TOLERANCE = 1e-9


def check_input(vals: np.ndarray, bound: float) -> None:
    """Refuses (:class:`RangeError`) client inputs beyond the bound the scales were planned
    for, or not finite. These are the client's own plaintexts, not decryptions."""
    m = float(np.abs(vals).max()) if vals.size else 0.0
    if not np.isfinite(m):
        raise RangeError("input holds non-finite values (NaN or infinity)")
    if m > bound:
        raise RangeError(
            f"input values reach {m:.4g}, beyond the bound {bound:.4g} the program was compiled for "
            "(recompile with calibration inputs that cover these inputs)"
        )


@dataclass
class _Key:
    kg: _native.KeyGenerator
    dec: _native.Decryptor


@dataclass
class _Query:
    key: _Key
    items: int
    next_step: int = 0
    server_query: str | None = None
    out_of_range: int = 0
    #: The chunks of the step being received, and their decrypted rows (one array, filled
    #: chunk by chunk).
    cursor: Cursor | None = None
    rows: np.ndarray | None = None


class Client:
    """The key owner's side of encrypted queries on a (public) program; see the module
    documentation. Secret keys come from the OS random source, live only in this object and
    cannot be pickled."""

    def __init__(self, program: PublicProgram) -> None:
        if getattr(program, "protocol", None) == "two-party":
            raise ProtocolError(
                "a Client runs client-aided programs; a two-party program runs with heinfer.infer, or its client "
                "with heinfer.serve.two_party.connect_two_party (heinfer predict on the command line)"
            )
        if not isinstance(program, PublicProgram):
            raise ProtocolError(f"a Client takes a heinfer.PublicProgram, got {type(program).__name__}")
        self.program = program.public()
        self.program_id = self.program.id
        self.params = native_params(self.program.params)
        self.limits = message_limits(self.program)
        #: The most low bits each segment's output may drop on the wire (the server's rounding).
        self._drop = [output_drop_bits(self.params, self.program, k) for k in range(len(self.program.segments))]
        #: Session keys by the id of their keys message (:func:`keys_id`, the head of the
        #: session id the server gives), the last :data:`MAX_SESSION_KEYS` made.
        self._session_keys: dict[str, _Key] = {}
        self._queries: dict[str, _Query] = {}
        #: Values of the last decoded result (and its steps) that were out of range and clamped.
        self.last_out_of_range = 0
        #: The reference of the query :meth:`query_messages` started last (:meth:`forget`).
        self.last_query_ref: str | None = None

    def __repr__(self) -> str:
        return f"Client(program={self.program_id[:16]})"

    def __reduce__(self):  # noqa: D105 - secret keys are not pickled
        raise TypeError("a Client holds a secret key and cannot be pickled")

    @property
    def _needs_eval_keys(self) -> bool:
        return self.program.needs_relin_key or bool(self.program.rotation_steps)

    @property
    def _session_key(self) -> _Key | None:
        """The latest session's key (None before :meth:`keys_message`)."""
        return next(reversed(self._session_keys.values()), None)

    def _fresh_key(self) -> _Key:
        kg = _native.KeyGenerator(self.params)
        return _Key(kg, _native.Decryptor(self.params, kg.secret_key()))

    # ------------------------------------------------------------------ messages
    def keys_message(self) -> bytes:
        """Starts a session under a fresh secret key: the evaluation keys it needs (exactly
        the program's key manifest). Each session's queries are encrypted under its own key,
        found by the head of the session id (the id of this message, :func:`keys_id`); the
        client keeps the last :data:`MAX_SESSION_KEYS` sessions' keys."""
        key = self._fresh_key()
        p = self.program
        rlk = key.kg.relin_key().to_bytes() if p.needs_relin_key else b""
        # serialized key by key as they are made: the set is never held (a third of the memory)
        gk = key.kg.galois_keys_bytes(list(p.rotation_steps), False) if p.rotation_steps else b""
        msg = encode("keys", program_id=self.program_id, relin_key=rlk, galois_keys=gk)
        keys = self._session_keys
        keys[keys_id(msg)] = key
        while len(keys) > MAX_SESSION_KEYS:
            del keys[next(iter(keys))]  # the oldest session's key
        return msg

    def query_message(self, session: str, x: np.ndarray) -> bytes:
        """Encrypts ``x`` of shape ``(n, *input_shape)``, ``1 ≤ n ≤ batch_capacity``: the
        whole query in one message."""
        return _one(self.query_messages(session, x), "query")

    def query_messages(self, session: str, x: np.ndarray, max_bytes: int | None = None) -> Iterator[bytes]:
        """:meth:`query_message` in chunks of at most ``max_bytes`` each (``None``: one),
        each encrypted when it is asked for, so that it can travel while the next one is
        encrypted. The input is checked (and the query registered) before the first."""
        self.last_query_ref = None
        p = self.program
        if np.iscomplexobj(x):  # a cast would drop the imaginary parts with only a numpy warning
            raise ProtocolError("inputs are complex; the model takes real values")
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != len(p.input_shape) + 1 or x.shape[1:] != p.input_shape:
            raise ProtocolError(f"input has shape {x.shape}, the model takes (batch, *{p.input_shape})")
        n = len(x)
        if not 1 <= n <= p.batch_capacity:
            raise ProtocolError(f"{n} items in one query; capacity is {p.batch_capacity}")
        if not np.isfinite(x).all():
            raise RangeError("input holds non-finite values (NaN or infinity)")
        if self._needs_eval_keys:
            if not self._session_keys:
                raise ProtocolError("call keys_message() and open a session before querying")
            key = self._session_keys.get(str(session)[:KEYS_ID_CHARS])
            if key is None:
                raise ProtocolError(
                    f"session {str(session)[:KEYS_ID_CHARS]}… was not opened with keys this client made (or with keys of "
                    f"one of the {MAX_SESSION_KEYS} sessions before its last): its queries would decrypt to garbage"
                )
        else:
            key = self._fresh_key()  # no evaluation key ties queries together: one key each
        v = x.reshape(n, -1)
        for f in p.pre:
            v = f.apply(v)
        check_input(v, p.input_bound)
        seg = p.segments[0]
        rows = input_rows(seg, v, p.slots, p.lanes)
        ref = secrets.token_hex(16)
        while len(self._queries) >= MAX_QUERIES_IN_FLIGHT:  # abandoned queries (a caller that never forgot them)
            del self._queries[next(iter(self._queries))]
        self._queries[ref] = _Query(key, n)
        self.last_query_ref = ref
        fields = {"session": session, "ref": ref, "items": n}
        return self._encrypted(key, seg, rows, "query", fields, max_bytes, ref)

    def reply_message(self, step_message: bytes) -> bytes:
        """Answers step ``k`` of a query, sent whole (chunk 0 of 1): decrypts the values,
        applies the step's functions and encrypts the next segment's input (fresh: the
        noise and depth restart)."""
        replies = self.receive_step(step_message)
        if replies is None:
            raise ProtocolError("reply_message takes a whole step; feed the chunks of a step to receive_step")
        return _one(replies, "reply")

    def receive_step(self, step_message: bytes, max_bytes: int | None = None) -> Iterator[bytes] | None:
        """Takes one chunk of a step: checks it (the query, the step, the chunk's place and
        its ciphertexts against the plan) and decrypts it. ``None`` until the last chunk;
        then the reply, as an iterator of chunks of at most ``max_bytes`` (``None``: one
        message), each encrypted when it is asked for."""
        _, msg, payload = decode_bulk(step_message, "step")
        q = self._query(msg.ref, msg.query)
        p = self.program
        k = q.next_step
        try:
            if msg.step != k or k >= len(p.steps):
                what = "an extra step" if k >= len(p.steps) else f"step {msg.step} while waiting for step {k}"
                raise ProtocolError(f"the server sent {what} (replayed, out of order or forged)")
            seg = p.segments[k]
            if q.cursor is None:
                q.cursor, q.rows = Cursor(seg.n_output_cts, f"step {k}"), None
            start, stop = q.cursor.take(msg.chunk, msg.chunks)
            part = self._decrypt(q, seg, payload, stop - start, "step")
            del payload
            if q.rows is None:  # every chunk's rows go straight to their place: no concatenation
                q.rows = part if stop - start == seg.n_output_cts else np.empty((seg.n_output_cts, *part.shape[1:]), part.dtype)
            if part is not q.rows:
                q.rows[start:stop] = part
            del part
            if not q.cursor.done:
                return None
            q.next_step += 1
            rows, q.cursor, q.rows = q.rows, None, None
            values = self._values(q, seg, rows)
            del rows  # the values may be a view of the rows; nothing else keeps them
            out = p.steps[k].apply(values)
            del values
            nxt = p.segments[k + 1]
            fields = {"query": msg.query, "step": k}
            return self._encrypted(q.key, nxt, input_rows(nxt, out, p.slots, p.lanes), "reply", fields, max_bytes, msg.ref)
        except Exception:
            self._queries.pop(msg.ref, None)
            raise

    def forget(self, ref: str | None) -> None:
        """Forgets an unfinished query (its state and, without evaluation keys, its own secret
        key): what a caller does when the server refused it or the link failed. Idempotent."""
        if ref is not None:
            self._queries.pop(ref, None)

    def decode_result(self, result_message: bytes) -> np.ndarray:
        """The outputs ``(n, *output_shape)`` of a finished query, released at the program's
        stated precision (values out of range clamped: see :attr:`last_out_of_range`)."""
        _, msg, payload = decode_bulk(result_message, "result")
        q = self._query(msg.ref, msg.query)
        self._queries.pop(msg.ref, None)
        p = self.program
        if q.next_step != len(p.steps):
            raise ProtocolError(f"a result after {q.next_step} of {len(p.steps)} steps (forged or out of order)")
        seg = p.segments[-1]
        y = _flood_and_round(self._open(q, seg, payload), seg.precision)
        for f in p.post:
            y = f.apply(y)
        self.last_out_of_range = q.out_of_range
        return y.reshape((q.items, *p.output_shape))

    # ------------------------------------------------------------------ helpers
    def _query(self, ref: str, server_query: str) -> _Query:
        q = self._queries.get(ref)
        if q is None:
            raise ProtocolError("a message for a query this client did not start (or already finished)")
        if q.server_query is None:
            q.server_query = server_query
        elif q.server_query != server_query:
            raise ProtocolError("the server changed the id of a query mid-protocol")
        return q

    def _encrypted(self, key: _Key, seg: Segment, rows: np.ndarray, kind: str, fields: dict, max_bytes: int | None, ref: str) -> Iterator[bytes]:
        """The messages of ``kind`` carrying ``rows`` encrypted for ``seg``, in chunks of at
        most ``max_bytes``; encryption happens as they are asked for (a failure forgets the
        query). The rows are let go once the last chunk is encrypted, before it is handed over:
        a server in the same process runs its segment on it while this generator waits."""
        n = len(rows)
        chunks = chunks_for(n, self.params.ciphertext_wire_bytes(seg.input_level, 2), max_bytes)
        held = [rows]
        del rows

        def messages() -> Iterator[bytes]:
            try:
                for i in range(chunks):
                    start, stop = bounds(n, chunks, i)
                    part = held[0][start:stop]
                    if i == chunks - 1:
                        held.clear()
                    # each ciphertext serialized as it is encrypted, after the message's
                    # header: one buffer, never the chunk's ciphertexts at once
                    message = encrypt_rows_bytes(key.kg, seg, part, framing(kind, **fields, chunk=i, chunks=chunks))
                    del part
                    yield message
            except Exception:
                self._queries.pop(ref, None)
                raise

        return messages()

    def _decrypt(self, q: _Query, seg: Segment, payload: bytes, count: int, kind: str) -> np.ndarray:
        """Checks ``count`` ciphertexts of a segment's output against the plan (count, level,
        size, scale: never the message's word) and decrypts them to rows."""
        parts = seg.output_parts
        drop = self._drop[next(i for i, s in enumerate(self.program.segments) if s is seg)]
        batch = _native.CiphertextBatch.from_bytes(self.params, payload, self.limits[kind], count, drop)
        if len(batch) != count or batch.level != seg.output_level or batch.size != parts or not math.isclose(batch.scale, seg.output_scale, rel_tol=SCALE_TOLERANCE):
            raise ProtocolError(
                f"expected {count} ciphertexts of size {parts} at level {seg.output_level} and scale 2^{math.log2(seg.output_scale):.2f}, "
                f"got {len(batch)} of size {batch.size} at level {batch.level} and scale 2^{math.log2(max(batch.scale, 1e-300)):.2f}"
            )
        return decrypt_rows(q.key.dec, seg, batch)

    def _open(self, q: _Query, seg: Segment, payload: bytes) -> np.ndarray:
        """All output ciphertexts of a segment, checked, decrypted, out-of-range values
        clamped (a result, or a step in one message)."""
        kind = "result" if seg is self.program.segments[-1] else "step"
        return self._values(q, seg, self._decrypt(q, seg, payload, seg.n_output_cts, kind))

    @staticmethod
    def _values(q: _Query, seg: Segment, rows: np.ndarray) -> np.ndarray:
        """Decrypted rows → the segment's output values, values out of range clamped (counted,
        never raised)."""
        vals = output_values(seg, rows, q.items)  # a view of the rows, or a new array: ours
        b = seg.output_bound
        bad = vals.size - int(np.count_nonzero((vals >= -b) & (vals <= b)))  # NaN compares False: bad
        q.out_of_range += bad
        out = np.clip(vals, -b, b, out=vals)  # in place; ±inf → ±b; NaN stays NaN …
        if bad:
            out[np.isnan(out)] = 0.0  # … and becomes 0
        return out


def _one(messages: Iterator[bytes], kind: str) -> bytes:
    """The only message of an iterator of one chunk."""
    out = list(messages)
    if len(out) != 1:  # the chunk count is 1 without max_bytes: a bug, not an input
        raise ProtocolError(f"a whole {kind} came as {len(out)} messages")
    return out[0]


def _flood_and_round(vals: np.ndarray, precision: float) -> np.ndarray:
    """``vals`` plus Gaussian noise of standard deviation ``precision/2`` (Box–Muller on OS
    random bytes), rounded to multiples of ``precision``."""
    n = vals.size
    u = np.frombuffer(os.urandom(16 * n), dtype=np.uint64).reshape(2, n) if n else np.zeros((2, 0), np.uint64)
    u1 = (u[0] >> np.uint64(11)).astype(np.float64) * 2.0**-53 + 2.0**-54  # (0, 1)
    u2 = (u[1] >> np.uint64(11)).astype(np.float64) * 2.0**-53
    noise = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2) * (precision / 2.0)
    return np.round((vals + noise.reshape(vals.shape)) / precision) * precision

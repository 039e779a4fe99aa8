"""Client and server of latency mode: one item per query, packed across slots.

Same messages as throughput mode (:mod:`heinfer.protocol.messages`), with payloads that are
lists of ciphertexts (``u32`` count, then ``u64`` length and the bytes of each, every one
validated by the engine) and, in the ``keys`` message, the relinearization key followed by
the rotation keys of exactly the steps the program's kernels use.

Client-aided steps (ReLU, max-pooling) send the segment's output ciphertexts to the client,
which decrypts them, reads the elements at their placement, applies the functions and
encrypts the next segment's input layout. **What the client learns** at a step, beyond the
throughput mode's list: the values are not permuted or scaled (the per-query plaintexts
would have to be re-encoded), and the slots outside the placement hold the kernels'
by-products (partial sums of the hybrid method). Use throughput mode when the weights must
be protected against a curious client, or the two-party protocol once it lands.
"""

from __future__ import annotations

import math
import secrets
import struct
import time

import numpy as np

from heinfer import _native
from heinfer.errors import ProtocolError, RangeError
from heinfer.program.latency import LatencyProgram
from heinfer.protocol.client import check_range
from heinfer.protocol.messages import Message, decode, encode
from heinfer.protocol.server import QueryTable, native_params, program_id
from heinfer.runtime.latency import PreparedSegment

__all__ = ["LatencyClient", "LatencyServer", "pack_cts", "unpack_cts"]


def pack_cts(cts: list) -> bytes:
    """Ciphertexts as one payload."""
    parts = [struct.pack("<I", len(cts))]
    for c in cts:
        b = c.to_bytes()
        parts += [struct.pack("<Q", len(b)), b]
    return b"".join(parts)


def unpack_cts(
    params: _native.Params, data: bytes, count: int, max_bytes: int, level: int | None = None, scale: float | None = None
) -> list:
    """``count`` ciphertexts from a payload, each validated by the engine; with ``level`` and
    ``scale`` (the client's fresh inputs) also their level, size 2 and scale."""
    if len(data) < 4:
        raise ProtocolError("ciphertext list is truncated")
    (n,) = struct.unpack_from("<I", data, 0)
    if n != count:
        raise ProtocolError(f"expected {count} ciphertexts, got {n}")
    off, out = 4, []
    for i in range(n):
        if off + 8 > len(data):
            raise ProtocolError(f"ciphertext {i} is truncated")
        (m,) = struct.unpack_from("<Q", data, off)
        off += 8
        if m > len(data) - off or m > max_bytes:
            raise ProtocolError(f"ciphertext {i} of {m} bytes overruns the message")
        ct = _native.Ciphertext.from_bytes(params, bytes(data[off : off + m]), max_bytes)
        off += m
        if level is not None and (ct.level != level or ct.size != 2 or abs(ct.scale / scale - 1) > 1e-9):
            raise ProtocolError(
                f"ciphertext {i}: expected level {level}, size 2, scale 2^{math.log2(scale):.2f}; "
                f"got level {ct.level}, size {ct.size}, scale 2^{math.log2(ct.scale):.2f}"
            )
        out.append(ct)
    if off != len(data):
        raise ProtocolError(f"{len(data) - off} trailing bytes after the ciphertexts")
    return out


class LatencyClient:
    """The key owner's side for a :class:`LatencyProgram` (secret key from the OS random
    source, never serialized)."""

    def __init__(self, program: LatencyProgram) -> None:
        self.program = program
        self.params = native_params(program)
        self._kg = _native.KeyGenerator(self.params)
        self._dec = _native.Decryptor(self.params, self._kg.secret_key())
        self._enc = _native.Encoder(self.params)
        self._outstanding: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"LatencyClient(params_id={self.params.id:#018x})"

    def __reduce__(self):  # noqa: D105
        raise TypeError("a client holds a secret key and cannot be pickled")

    def keys_message(self) -> bytes:
        """Relinearization key (if any squares) and exactly the rotation keys the program uses."""
        p = self.program
        rlk = self._kg.relin_key().to_bytes() if p.needs_relin_key else b""
        gk = self._kg.galois_keys(list(p.galois_steps), False).to_bytes() if p.galois_steps else b""
        return encode(Message("keys", {"program_id": program_id(p)}, struct.pack("<Q", len(rlk)) + rlk + gk))

    def query_message(self, session: str, x: np.ndarray) -> bytes:
        """Encrypts one item ``x`` of shape ``(1, *input_shape)`` in the first segment's layout."""
        p = self.program
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (1, *p.input_shape):
            raise ProtocolError(f"input has shape {x.shape}, a latency query takes (1, *{p.input_shape})")
        if not np.isfinite(x).all():
            raise RangeError("input holds non-finite values")
        v = x.reshape(1, -1)
        for f in p.pre:
            v = f.apply(v)
        check_range(v, p.input_bound, "input")
        ref = secrets.token_hex(16)
        self._outstanding[ref] = 1
        return encode(Message("query", {"session": session, "ref": ref, "items": 1}, self._encrypt(0, v[0])))

    def reply_message(self, step_message: bytes, max_bytes: int = 1 << 30) -> bytes:
        """Decrypts a step's values, applies its functions, encrypts the next segment's input."""
        msg = decode(step_message, "step")
        k = msg.header["step"]
        p = self.program
        if not 0 <= k < len(p.steps):
            raise ProtocolError(f"step {k} does not exist")
        self._items_of(msg)
        vals = self._decrypt(k, msg.payload, max_bytes)
        for f in p.steps[k]:
            vals = f.apply(vals[None, :])[0]
        return encode(Message("reply", {"query": msg.header["query"], "step": k}, self._encrypt(k + 1, vals)))

    def decode_result(self, result_message: bytes, max_bytes: int = 1 << 30) -> np.ndarray:
        """The output ``(1, *output_shape)``."""
        msg = decode(result_message, "result")
        self._items_of(msg)
        self._outstanding.pop(msg.header["ref"])
        p = self.program
        y = self._decrypt(len(p.segments) - 1, msg.payload, max_bytes)[None, :]
        for f in p.post:
            y = f.apply(y)
        return y.reshape((1, *p.output_shape))

    def _items_of(self, msg: Message) -> None:
        if msg.header["ref"] not in self._outstanding:
            raise ProtocolError("a message for a query this client did not send (or already finished)")
        if msg.header["items"] != 1:
            raise ProtocolError(f"the server answers for {msg.header['items']} items, a latency query has 1")

    def _encrypt(self, k: int, v: np.ndarray) -> bytes:
        seg = self.program.segments[k]
        if v.shape != (seg.in_size,):
            raise ProtocolError(f"segment {k} takes {seg.in_size} values, got {v.shape}")
        g = seg.gather
        slots = np.where(g >= 0, v[np.maximum(g, 0)], 0.0)
        scale = float(2 ** self.program.params["log_scale"])
        cts = [self._kg.encrypt_symmetric(self._enc.encode_real(np.ascontiguousarray(row), scale, seg.input_level, False)) for row in slots]
        return pack_cts(cts)

    def _decrypt(self, k: int, payload: bytes, max_bytes: int) -> np.ndarray:
        seg = self.program.segments[k]
        cts = unpack_cts(self.params, payload, seg.output.n_cts, max_bytes)
        slots = np.stack([self._enc.decode(self._dec.decrypt(c)).real for c in cts])
        vals = seg.output.gather(slots)
        check_range(vals, seg.output_bound, f"segment {k} output")
        return vals



class LatencyServer(QueryTable):
    """Evaluates a :class:`LatencyProgram` for any number of sessions (evaluation keys only);
    same methods as :class:`heinfer.protocol.server.Server`."""

    def __init__(self, program: LatencyProgram, max_sessions: int = 64, max_message_bytes: int = 1 << 30, baseline: bool | None = None) -> None:
        if baseline:
            raise ProtocolError("latency programs have no baseline mode (compile with strategy=... instead)")
        self.program = program
        self.params = native_params(program)
        self.scale = float(2 ** program.params["log_scale"])
        t0 = time.perf_counter()
        self.prepared = [PreparedSegment(self.params, seg, self.scale) for seg in program.segments]
        self.setup_seconds = time.perf_counter() - t0
        self.max_sessions = max_sessions
        self.max_message_bytes = max_message_bytes
        self._ev = _native.Evaluator(self.params)
        super().__init__()
        self.seconds = 0.0

    def open_session(self, keys_message: bytes) -> str:
        """Registers the client's relinearization and rotation keys (validated)."""
        msg = decode(keys_message, "keys")
        p = self.program
        if msg.header["program_id"] != program_id(p):
            raise ProtocolError(f"keys are for parameters {msg.header['program_id']}, this program uses {program_id(p)}")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"too many sessions (limit {self.max_sessions})")
        data = msg.payload
        if len(data) < 8:
            raise ProtocolError("keys message is truncated")
        (n,) = struct.unpack_from("<Q", data, 0)
        if n > len(data) - 8:
            raise ProtocolError("relinearization key overruns the keys message")
        rlk_b, gk_b = data[8 : 8 + n], data[8 + n :]
        if bool(rlk_b) != p.needs_relin_key or bool(gk_b) != bool(p.galois_steps):
            raise ProtocolError("the keys message does not hold exactly the keys this program needs")
        rlk = _native.RelinKey.from_bytes(self.params, rlk_b, self.max_message_bytes) if rlk_b else None
        gk = _native.GaloisKeys.from_bytes(self.params, gk_b, self.max_message_bytes) if gk_b else None
        if gk is not None:
            need = {self.params.rotation_galois_element(s) for s in p.galois_steps}
            if set(gk.elements()) != need:
                raise ProtocolError(f"rotation keys for {len(gk)} elements, the program needs exactly {len(need)}")
        sid = secrets.token_hex(16)
        self._sessions[sid] = (gk, rlk)
        return sid

    def begin(self, query_message: bytes) -> bytes:
        """Starts a query and runs until the first client step or the result."""
        msg = decode(query_message, "query")
        session = msg.header["session"]
        if session not in self._sessions:
            raise ProtocolError(f"unknown session {session[:16]!r}")
        if msg.header["items"] != 1:
            raise ProtocolError(f"{msg.header['items']} items in a latency query (one per query)")
        seg = self.program.segments[0]
        cts = unpack_cts(self.params, msg.payload, seg.n_input_cts, self.max_message_bytes, seg.input_level, self.scale)
        qid = secrets.token_hex(16)
        state = {"session": session, "ref": msg.header["ref"][:64], "segment": 0, "waiting": False}
        self._queries[qid] = state
        return self._run(qid, state, cts)

    def resume(self, reply_message: bytes) -> bytes:
        """Continues a query with the client's re-encrypted activations."""
        msg = decode(reply_message, "reply")
        qid = msg.header["query"]
        state = self._queries.get(qid)
        if state is None or not state["waiting"]:
            raise ProtocolError(f"no query {qid[:16]!r} is waiting for a reply")
        if msg.header["step"] != state["segment"] - 1:
            raise ProtocolError(f"reply to step {msg.header['step']}, the query waits for step {state['segment'] - 1}")
        seg = self.program.segments[state["segment"]]
        try:
            cts = unpack_cts(self.params, msg.payload, seg.n_input_cts, self.max_message_bytes, seg.input_level, self.scale)
        except Exception:
            self._queries.pop(qid, None)
            raise
        state["waiting"] = False
        return self._run(qid, state, cts)

    def _run(self, qid: str, state: dict, cts: list) -> bytes:
        k = state["segment"]
        gk, rlk = self._sessions[state["session"]]
        t0 = time.perf_counter()
        try:
            out = self.prepared[k].run(self._ev, cts, gk, rlk)
        except Exception:
            self._queries.pop(qid, None)
            raise
        state["segment"] += 1
        payload = pack_cts(out)
        self.seconds += time.perf_counter() - t0
        if k == len(self.program.steps):
            self._queries.pop(qid, None)
            return encode(Message("result", {"query": qid, "ref": state["ref"], "items": 1}, payload))
        state["waiting"] = True
        return encode(Message("step", {"query": qid, "ref": state["ref"], "items": 1, "step": k, "group_sizes": []}, payload))

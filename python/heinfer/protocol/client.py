"""The client: owns the secret key; encrypts inputs, runs client-aided steps, decrypts.

Batch-axis packing: tensor element ``f`` of every item is one ciphertext whose slot ``b``
holds item ``b`` — with complex packing (nGraph-HE2 §3.1.2) the real part of slot ``b``
holds item ``b`` and the imaginary part item ``b + N/2``, so one query carries ``N`` items;
with coefficient packing coefficient ``b`` of the plaintext holds item ``b`` (``N`` items,
no FFT to encode or decode, and a fresh error √N times smaller per item).
Every value decrypted is checked against the range the program was compiled for
(:class:`~heinfer.errors.RangeError` instead of a wrapped-around answer).
"""

from __future__ import annotations

import secrets

import numpy as np

from heinfer import _native
from heinfer.errors import ProtocolError, RangeError
from heinfer.program.model import ClientStep, Program
from heinfer.protocol.messages import Message, decode, encode
from heinfer.protocol.server import native_params, program_id

__all__ = ["Client", "check_range"]


def check_range(vals: np.ndarray, bound: float, what: str) -> None:
    """Raises :class:`RangeError` when decrypted ``vals`` exceed the planned ``bound`` (or are
    not finite): a wrapped-around result is refused, never returned."""
    m = float(np.abs(vals).max()) if vals.size else 0.0
    if not np.isfinite(m) or m > bound:
        raise RangeError(
            f"{what}: decrypted values reach {m:.4g}, beyond the bound {bound:.4g} the program was compiled for "
            "(recompile with calibration inputs that cover these inputs)"
        )


class Client:
    """The key owner's side of encrypted queries on ``program``.

    The secret key is generated from the OS random source on construction and never leaves
    this object (it is not serializable through this class). For a latency-mode program
    ``Client(program)`` returns a :class:`heinfer.protocol.latency.LatencyClient` (same methods).
    """

    def __new__(cls, program: Program, *args, **kwargs):  # noqa: D102 - one entry point per mode
        if cls is Client and getattr(program, "mode", None) == "latency":
            from heinfer.protocol.latency import LatencyClient

            return LatencyClient(program, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, program: Program) -> None:
        self.program = program
        self.params = native_params(program)
        self._kg = _native.KeyGenerator(self.params)
        self._dec = _native.Decryptor(self.params, self._kg.secret_key())
        self._outstanding: dict[str, int] = {}  # query reference → items

    def __repr__(self) -> str:
        return f"Client(params_id={self.params.id:#018x})"

    def __reduce__(self):  # noqa: D105 - secret keys are not pickled
        raise TypeError("a Client holds a secret key and cannot be pickled")

    # ------------------------------------------------------------------ messages
    def keys_message(self) -> bytes:
        """The evaluation keys the program needs (a relinearization key, or none)."""
        payload = self._kg.relin_key().to_bytes() if self.program.needs_relin_key else b""
        return encode(Message("keys", {"program_id": program_id(self.program)}, payload))

    def query_message(self, session: str, x: np.ndarray) -> bytes:
        """Encrypts up to ``batch_capacity`` items ``x`` of shape ``(n, *input_shape)``."""
        p = self.program
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != len(p.input_shape) + 1 or x.shape[1:] != p.input_shape:
            raise ProtocolError(f"input has shape {x.shape}, the model takes (batch, *{p.input_shape})")
        n = len(x)
        if not 1 <= n <= p.batch_capacity:
            raise ProtocolError(f"{n} items in one query; capacity is {p.batch_capacity}")
        if not np.isfinite(x).all():
            raise RangeError("input holds non-finite values")
        v = x.reshape(n, -1)
        for f in p.pre:
            v = f.apply(v)
        seg = p.segments[0]
        check_range(v, p.input_bound * 4.0, "input")
        batch = self._encrypt(v.T, seg.input_scale, seg.input_level)
        ref = secrets.token_hex(16)
        self._outstanding[ref] = n
        return encode(Message("query", {"session": session, "ref": ref, "items": n}, batch.to_bytes()))

    def reply_message(self, step_message: bytes, max_bytes: int = 1 << 30) -> bytes:
        """Decrypts a client step's values, applies its functions, re-encrypts fresh at the
        level of the next segment (the noise and depth restart)."""
        msg = decode(step_message, "step")
        k = msg.header["step"]
        p = self.program
        if not 0 <= k < len(p.steps):
            raise ProtocolError(f"step {k} does not exist")
        qid = msg.header["query"]
        n = self._items_of(msg)
        step = p.steps[k]
        sizes = msg.header["group_sizes"]
        if any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes):
            raise ProtocolError(f"step {k}: group sizes must be positive integers")
        count = sum(sizes) if sizes else step.in_size
        batch = _native.CiphertextBatch.from_bytes(self.params, msg.payload, max_bytes, max(count, 1))
        if len(batch) != count:
            raise ProtocolError(f"step {k}: {len(batch)} values, expected {count}")
        vals = self._decrypt(batch, n)
        check_range(vals, p.segments[k].output_bound, f"step {k} input")
        out = self._apply(step, vals, sizes)
        nxt = p.segments[k + 1]
        if out.shape[0] != nxt.in_size:
            raise ProtocolError(f"step {k} produced {out.shape[0]} values, the next segment takes {nxt.in_size}")
        enc = self._encrypt(out, nxt.input_scale, nxt.input_level)
        return encode(Message("reply", {"query": qid, "step": k}, enc.to_bytes()))

    def decode_result(self, result_message: bytes, max_bytes: int = 1 << 30) -> np.ndarray:
        """The outputs ``(n, *output_shape)`` of a finished query."""
        msg = decode(result_message, "result")
        p = self.program
        n = self._items_of(msg)
        self._outstanding.pop(msg.header["ref"])
        seg = p.segments[-1]
        batch = _native.CiphertextBatch.from_bytes(self.params, msg.payload, max_bytes, seg.out_size)
        if len(batch) != seg.out_size:
            raise ProtocolError(f"result has {len(batch)} values, expected {seg.out_size}")
        vals = self._decrypt(batch, n)
        check_range(vals, seg.output_bound, "output")
        y = vals.T
        for f in p.post:
            y = f.apply(y)
        return y.reshape((n, *p.output_shape))

    # ------------------------------------------------------------------ helpers
    def _items_of(self, msg: Message) -> int:
        """The item count of the query a server message answers (one this client sent)."""
        n = self._outstanding.get(msg.header["ref"])
        if n is None:
            raise ProtocolError("a message for a query this client did not send (or already finished)")
        if msg.header["items"] != n:
            raise ProtocolError(f"the server answers for {msg.header['items']} items, the query had {n}")
        return n

    def _encrypt(self, values: np.ndarray, scale: float, level: int) -> _native.CiphertextBatch:
        """``(count, n)`` real values, item ``b`` of row ``f`` → ciphertext ``f``."""
        if self.program.packing == "coeff":
            return _native.encrypt_batch_coefficients(self._kg, np.ascontiguousarray(values, dtype=np.float64), scale, level)
        return _native.encrypt_batch(self._kg, self._pack(values), scale, level)

    def _decrypt(self, batch: _native.CiphertextBatch, n: int) -> np.ndarray:
        """The first ``n`` items of every ciphertext: ``(count, n)`` real values."""
        if self.program.packing == "coeff":
            return _native.decrypt_batch_coefficients(self._dec, batch)[:, :n]
        return self._unpack(_native.decrypt_batch(self._dec, batch), n)

    def _pack(self, values: np.ndarray) -> np.ndarray:
        """``(count, n)`` real values → ``(count, n_slots)`` complex slots."""
        count, n = values.shape
        s = self.program.slots
        width = min(n, s)
        z = np.zeros((count, width), dtype=np.complex128)
        z.real[:, :width] = values[:, :width]
        if n > s:
            z.imag[:, : n - s] = values[:, s:]
        return z

    def _unpack(self, z: np.ndarray, n: int) -> np.ndarray:
        """``(count, slots)`` complex → ``(count, n)`` real, undoing :meth:`_pack`."""
        s = self.program.slots
        if n <= s:
            return z.real[:, :n].copy()
        return np.concatenate([z.real[:, :s], z.imag[:, : n - s]], axis=1)

    @staticmethod
    def _apply(step: ClientStep, vals: np.ndarray, sizes: list[int]) -> np.ndarray:
        """The step's functions on ``(count, n)`` values in the server's (permuted) order."""
        g = step.grouping
        fns = step.functions
        gi = fns.index(g) if g is not None else len(fns)
        for f in fns[:gi]:
            vals = f.apply(vals.T).T
        if g is not None:
            if not sizes:
                raise ProtocolError("a pooling/softmax step needs group sizes")
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            if g.kind == "maxpool":
                vals = np.maximum.reduceat(vals, starts, axis=0)
            else:
                shifted = vals - np.repeat(np.maximum.reduceat(vals, starts, axis=0), sizes, axis=0)
                e = np.exp(shifted)
                vals = e / np.repeat(np.add.reduceat(e, starts, axis=0), sizes, axis=0)
        elif sizes:
            raise ProtocolError("an element-wise step takes no group sizes")
        for f in fns[gi + 1 :]:
            vals = f.apply(vals.T).T
        return vals

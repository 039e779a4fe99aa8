"""The client of the service: :func:`connect` and :class:`RemoteSession` (layer: ``heinfer.serve``).

The key owner's side over the network. :func:`connect` generates the keys in this process
(the secret key never leaves the :class:`~heinfer.protocol.Client` object), uploads the
evaluation keys once (compressed when that helps, in chunks) and returns a session;
:meth:`RemoteSession.infer` runs queries of ``program.batch_capacity`` items, each on one
bidirectional ``Infer`` stream that carries the query, the client-aided rounds and the
result. Every failed call raises :class:`~heinfer.errors.ServiceError` with the status name
(``code``) and the server's message; what the server sends back is validated as strictly as
what it receives (frames, sizes, message kinds, query references).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import numpy as np

from heinfer.errors import ProtocolError, ServiceError
from heinfer.inference import InferenceResult
from heinfer.program.model import Program
from heinfer.protocol import Client
from heinfer.protocol.server import program_id
from heinfer.serve import wire
from heinfer.serve.framing import HEADER_BYTES, Assembler, compress, frames
from heinfer.serve.handlers import message_header
from heinfer.serve.limits import Limits
from heinfer.serve.status import from_rpc_error
from heinfer.serve.tls import TlsConfig

__all__ = ["Progress", "RemoteSession", "connect"]

#: ``progress(stage, done, total)``: stages ``"keygen"`` (0/1 then 1/1), ``"upload"`` (bytes of
#: the keys sent) and ``"query"`` (items answered, after each query).
Progress = Callable[[str, int, int], None]


def _identity(b: bytes) -> bytes:
    return b


def connect(
    address: str,
    program: Program,
    *,
    tls: TlsConfig | None = None,
    token: str | None = None,
    timeout_s: float = 600.0,
    progress: Progress | None = None,
    limits: Limits = Limits(),  # noqa: B008 - immutable
    wait_for_ready: bool = False,
) -> RemoteSession:
    """Opens a session with the service at ``address`` (``"host:port"``) for ``program``.

    Asks the server for its program and limits (``GetInfo``: a server running another
    program is refused before any key is made), generates the keys here, uploads the
    evaluation keys and returns the session.

    ``timeout_s``: the deadline of each call (the upload; one query with all its rounds).
    ``progress(stage, done, total)``: see :data:`Progress`; it must not raise.
    ``limits``: caps on what the server sends back (messages, chunks); its
    ``max_chunk_bytes`` is advertised to the server. ``wait_for_ready``: wait (up to
    ``timeout_s``) for a server that is still starting instead of failing at once with
    ``UNAVAILABLE``. Raises :class:`~heinfer.errors.ServiceError` when the server refuses
    the session or cannot be reached (``code`` names the status).
    """
    options = wire.channel_options(limits) + (tls.channel_options() if tls else [])
    if tls is None:
        channel = grpc.insecure_channel(address, options=options)
    else:
        channel = grpc.secure_channel(address, tls.channel_credentials(), options=options)
    try:
        return RemoteSession(
            channel, address, program, token, timeout_s, progress, limits, wait_for_ready
        )
    except BaseException:
        channel.close()
        raise


class RemoteSession:
    """A session on a remote service: ``infer(x)``, then ``close()`` (or use ``with``).

    Attributes: ``session_id``, ``address``, ``program``, ``keygen_s`` and ``upload_s``
    (the session's one-time costs), ``keys_bytes`` (the keys message, before compression),
    ``server_limits`` (what ``GetInfo`` announced). ``infer`` calls are serialized.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        address: str,
        program: Program,
        token: str | None,
        timeout_s: float,
        progress: Progress | None,
        limits: Limits,
        wait_for_ready: bool,
    ) -> None:
        self.address = address
        self.program = program
        self.limits = limits
        self._channel = channel
        self._timeout = timeout_s
        self._progress = progress or (lambda stage, done, total: None)
        self._metadata = [] if token is None else [("authorization", f"Bearer {token}")]
        self._lock = threading.Lock()
        self._closed = False
        self._open = channel.stream_unary(wire.OPEN_SESSION, _identity, _identity)
        self._infer = channel.stream_stream(wire.INFER, _identity, _identity)
        self._close = channel.unary_unary(wire.CLOSE_SESSION, _identity, _identity)
        info = channel.unary_unary(wire.GET_INFO, _identity, _identity)
        try:
            reply = info(
                b"", timeout=timeout_s, metadata=self._metadata, wait_for_ready=wait_for_ready
            )
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"GetInfo on {address}") from None
        self.server_limits = wire.parse_info_reply(reply)
        if self.server_limits["program_id"] != program_id(program):
            raise ServiceError(
                f"the server at {address} runs a program with parameters "
                f"{self.server_limits['program_id'][:32]!r}, this one has {program_id(program)!r}",
                code="FAILED_PRECONDITION",
            )
        if self.server_limits["program_digest"] != wire.program_digest(program):
            raise ServiceError(
                f"the server at {address} runs another program than this one (same parameters, "
                "different layers or weights): load the program the server was started with",
                code="FAILED_PRECONDITION",
            )
        self._send_chunk = min(limits.max_chunk_bytes, self.server_limits["max_chunk_bytes"])
        t0 = time.perf_counter()
        self._progress("keygen", 0, 1)
        self._client = Client(program)
        keys = self._client.keys_message()
        self.keygen_s = time.perf_counter() - t0
        self._progress("keygen", 1, 1)
        self.keys_bytes = len(keys)
        t0 = time.perf_counter()
        self.session_id: str = wire.parse_session_reply(self._upload(keys))
        self.upload_s = time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"RemoteSession(address={self.address!r}, session={self.session_id[:8]}…)"

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ public
    def infer(self, x: np.ndarray) -> InferenceResult:
        """Classifies ``x`` of shape ``(n, *input_shape)`` on the server, encrypted.

        The outputs and report are those of :func:`heinfer.infer`, with the same meaning:
        ``total_s`` and ``bytes_up`` include the session's one-time costs (key generation and
        the keys upload, made at :func:`connect`), ``queries_s`` and ``rounds`` cover this
        call's queries; ``server_s`` is the server's own time (sent back in trailing
        metadata). Added: ``transport: "grpc"``, ``session_s`` (key generation and upload),
        ``keys_bytes`` (the keys message) and ``wire_bytes_up``/``wire_bytes_down`` (every
        frame on the wire, headers and the compressed keys included).
        """
        p = self.program
        x = np.asarray(x)
        if x.ndim != len(p.input_shape) + 1:
            raise ProtocolError(
                f"input has shape {x.shape}, the model takes (batch, *{p.input_shape})"
            )
        if len(x) == 0:
            raise ProtocolError("x holds no items")
        with self._lock:
            if self._closed:
                raise ServiceError("the session is closed", code="FAILED_PRECONDITION")
            return self._infer_all(x)

    def close(self) -> None:
        """Closes the session on the server (its keys are freed) and the channel. Idempotent;
        a session the server already expired is not an error."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._close(
                    self.session_id.encode(),
                    timeout=min(self._timeout, 30.0),
                    metadata=self._metadata,
                )
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
                    raise from_rpc_error(e, "CloseSession") from None
            finally:
                self._channel.close()

    # ------------------------------------------------------------------ internals
    def _upload(self, keys: bytes) -> bytes:
        packed, compressed = compress(keys)
        self._keys_wire_bytes = 0
        total = len(packed)
        self._progress("upload", 0, total)

        def requests() -> Iterator[bytes]:
            sent = 0
            for f in frames(packed, self._send_chunk, compressed=compressed):
                self._keys_wire_bytes += len(f)
                yield f
                sent += len(f) - HEADER_BYTES
                self._progress("upload", sent, total)

        try:
            return self._open(
                requests(),
                timeout=self._timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"OpenSession on {self.address}") from None

    def _infer_all(self, x: np.ndarray) -> InferenceResult:
        p = self.program
        cap = p.batch_capacity
        n = len(x)
        totals = {
            "client_s": self.keygen_s,
            "server_s": 0.0,
            "rounds": 0,
            "up": self.keys_bytes,
            "down": 0,
            "wup": self._keys_wire_bytes,
            "wdown": 0,
        }
        outputs = []
        t_start = time.perf_counter()
        self._progress("query", 0, n)
        for start in range(0, n, cap):
            outputs.append(self._query(x[start : start + cap], totals))
            self._progress("query", min(start + cap, n), n)
        elapsed = time.perf_counter() - t_start
        report = {
            "items": n,
            "queries": -(-n // cap),
            "batch_capacity": cap,
            "total_s": self.keygen_s + self.upload_s + elapsed,
            "queries_s": elapsed,
            "client_s": totals["client_s"],
            "server_s": totals["server_s"],
            "keygen_s": self.keygen_s,
            "session_s": self.keygen_s + self.upload_s,
            "rounds": totals["rounds"],
            "bytes_up": totals["up"],
            "bytes_down": totals["down"],
            "bytes_per_item_up": totals["up"] / n,
            "bytes_per_item_down": totals["down"] / n,
            "wire_bytes_up": totals["wup"],
            "wire_bytes_down": totals["wdown"],
            "keys_bytes": self.keys_bytes,
            "params": dict(p.params),
            "packing": getattr(p, "packing", None),
            "mode": getattr(p, "mode", "throughput"),
            "security_bits": p.security,
            "predicted_error": getattr(p.segments[-1], "predicted_error", None),
            "transport": "grpc",
        }
        return InferenceResult(np.concatenate(outputs), report)

    def _query(self, xs: np.ndarray, totals: dict) -> np.ndarray:
        """One query on one ``Infer`` stream."""
        t0 = time.perf_counter()
        message = self._client.query_message(self.session_id, xs)
        totals["client_s"] += time.perf_counter() - t0
        outbox: queue.Queue = queue.Queue()
        outbox.put(message)
        totals["up"] += len(message)

        def requests() -> Iterator[bytes]:
            while (m := outbox.get()) is not None:
                for f in frames(m, self._send_chunk):
                    totals["wup"] += len(f)
                    yield f

        metadata = [*self._metadata, (wire.CHUNK_METADATA, str(self.limits.max_chunk_bytes))]
        call = self._infer(requests(), timeout=self._timeout, metadata=metadata)
        try:
            result = self._exchange(call, outbox, totals)
            outbox.put(None)  # half-closes the stream: the query is done
            seconds = dict(call.trailing_metadata() or ()).get(wire.SERVER_SECONDS_METADATA)
            try:
                totals["server_s"] += float(seconds) if seconds is not None else 0.0
            except ValueError:
                pass
            return result
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"Infer on {self.address}") from None
        except BaseException:
            call.cancel()
            raise
        finally:
            outbox.put(None)  # ends the request stream (and its sending thread) in every case

    def _exchange(self, call: Iterator[bytes], outbox: queue.Queue, totals: dict) -> np.ndarray:
        """Reads steps and answers them until the result arrives."""
        assembler = Assembler(self.limits, what="server message")
        for frame in call:
            totals["wdown"] += len(frame)
            message = assembler.feed(frame)
            if message is None:
                continue
            totals["down"] += len(message)
            kind, _ = message_header(message, ("step", "result"))
            t0 = time.perf_counter()
            if kind == "result":
                out = self._client.decode_result(message, self.limits.max_message_bytes)
                totals["client_s"] += time.perf_counter() - t0
                return out
            reply = self._client.reply_message(message, self.limits.max_message_bytes)
            totals["client_s"] += time.perf_counter() - t0
            totals["rounds"] += 1
            totals["up"] += len(reply)
            outbox.put(reply)
        raise ProtocolError(f"the server ended the query stream {assembler.describe_partial()}")

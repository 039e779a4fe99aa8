"""The client of the service: :func:`connect` and :class:`RemoteSession` (layer: ``heinfer.serve``).

The key owner's side over the network. :func:`connect` generates the keys in this process
(the secret key never leaves the :class:`~heinfer.protocol.Client` object), uploads the
evaluation keys once (in parts) and returns a session;
:meth:`RemoteSession.infer` runs queries of ``program.batch_capacity`` items, each on one
bidirectional ``Infer`` stream that carries the query, the client-aided rounds and the
result. Every failed call raises :class:`~heinfer.errors.ServiceError` with the status name
(``code``) and the server's message; what the server sends back is validated as strictly as
what it receives (parts, sizes from the public program, message kinds, query references).
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
from heinfer.program.model import PublicProgram
from heinfer.protocol import Client
from heinfer.serve import wire
from heinfer.serve.limits import Limits, effective_limits
from heinfer.protocol.messages import size as message_size
from heinfer.serve.parts import Assembler, split
from heinfer.serve.rpc import InferenceStub
from heinfer.serve.status import from_rpc_error
from heinfer.serve.tls import TlsConfig
from heinfer.v1 import service_pb2 as pb

__all__ = ["Progress", "RemoteSession", "connect"]

#: ``progress(stage, done, total)``: stages ``"keygen"`` (0/1 then 1/1), ``"upload"`` (bytes of
#: the keys sent), ``"query"`` (items answered, after each query) and ``"segment"`` (the
#: current query's server segments done, of the program's: one more at each client-aided
#: round, all at the result; a long single query shows where it is).
Progress = Callable[[str, int, int], None]


def connect(
    address: str,
    program: PublicProgram,
    *,
    tls: TlsConfig | None = None,
    token: str | None = None,
    timeout_s: float = 600.0,
    progress: Progress | None = None,
    limits: Limits = Limits(),  # noqa: B008 - immutable
    wait_for_ready: bool = False,
) -> RemoteSession:
    """Opens a session with the service at ``address`` (``"host:port"``) for ``program``
    (the client's :class:`~heinfer.PublicProgram`; given a full program, only its public
    part is used).

    Asks the server for its program id and limits (``GetInfo``: a server running another
    program is refused before any key is made), generates the keys here, uploads the
    evaluation keys and returns the session (its id and secret stay in this object).

    ``timeout_s``: the deadline of each call (the upload; one query with all its rounds).
    ``progress(stage, done, total)``: see :data:`Progress`; it must not raise.
    ``limits``: caps on what the server sends back (parts; messages: the program's exact
    bounds, lowered by ``max_message_bytes``); its ``max_part_bytes`` is advertised to the
    server. ``wait_for_ready``: wait (up to ``timeout_s``) for a server that is still
    starting instead of failing at once with ``UNAVAILABLE``. Raises
    :class:`~heinfer.errors.ServiceError` when the server refuses the session or cannot be
    reached (``code`` names the status).
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

    Attributes: ``session_id``, ``address``, ``program`` (public), ``keygen_s`` and
    ``upload_s`` (the session's one-time costs), ``keys_bytes`` (the keys message),
    ``server_info`` (what ``GetInfo`` announced). ``infer`` calls are serialized. The
    session secret is never shown (not in ``repr``).
    """

    def __init__(
        self,
        channel: grpc.Channel,
        address: str,
        program: PublicProgram,
        token: str | None,
        timeout_s: float,
        progress: Progress | None,
        limits: Limits,
        wait_for_ready: bool,
    ) -> None:
        if getattr(program, "protocol", None) == "two-party":
            raise TypeError("connect() opens client-aided sessions; a two-party program's client is heinfer.serve.two_party.connect_two_party")
        if not isinstance(program, PublicProgram):
            raise TypeError(
                f"connect() takes a heinfer.PublicProgram, got {type(program).__name__}"
            )
        self.address = address
        self.program = program.public()
        self.limits = limits
        self._channel = channel
        self._stub = InferenceStub(channel)  # wire.serialize: one-part messages go typed
        self._timeout = timeout_s
        self._progress = progress or (lambda stage, done, total: None)
        self._auth = [] if token is None else [("authorization", f"Bearer {token}")]
        self._lock = threading.Lock()
        self._closed = False
        #: Kind → the largest message accepted from the server (this program's own bounds).
        self.message_limits = effective_limits(limits, self.program)
        try:
            info = self._stub.GetInfo(
                pb.GetInfoRequest(),
                timeout=timeout_s,
                metadata=self._auth,
                wait_for_ready=wait_for_ready,
            )
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise ServiceError(
                    f"the server at {address} does not serve client-aided programs (no heinfer.v1.Inference): a two-party "
                    "service? Use the public file of the program it serves",
                    code="UNIMPLEMENTED",
                ) from None
            raise from_rpc_error(e, f"GetInfo on {address}") from None
        self.server_info = wire.parse_info(info)
        if self.server_info["program_id"] != self.program.id:
            raise ServiceError(
                f"the server at {address} runs another program ({self.server_info['program_id'][:16]}…) "
                f"than this one ({self.program.id[:16]}…): use the public file of the program it serves",
                code="FAILED_PRECONDITION",
            )
        self._send_part = min(limits.max_part_bytes, self.server_info["max_part_bytes"])
        t0 = time.perf_counter()
        self._progress("keygen", 0, 1)
        self._client = Client(self.program)
        keys = self._client.keys_message()
        self.keygen_s = time.perf_counter() - t0
        self._progress("keygen", 1, 1)
        self.keys_bytes = len(keys)
        t0 = time.perf_counter()
        opened = self._upload(keys)
        self.session_id: str = opened.session
        self._secret = opened.secret
        if not opened.session or not opened.secret or len(opened.secret) > 128:
            raise ProtocolError(
                "the server's OpenSession answer has no valid session id and secret"
            )
        self._metadata = [
            *self._auth,
            (wire.SESSION_METADATA, self.session_id),
            (wire.SECRET_METADATA, self._secret),
        ]
        self.upload_s = time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"RemoteSession(address={self.address!r}, session={self.session_id[:8]}…)"

    def __enter__(self) -> RemoteSession:  # noqa: PYI034 - Python 3.10: no typing.Self
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
        part on the wire, its own fields included).
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
                self._stub.CloseSession(
                    pb.CloseSessionRequest(session=self.session_id),
                    timeout=min(self._timeout, 30.0),
                    metadata=self._metadata,
                )
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
                    raise from_rpc_error(e, "CloseSession") from None
            finally:
                self._channel.close()

    # ------------------------------------------------------------------ internals
    def _upload(self, keys: bytes) -> pb.OpenSessionResponse:
        self._keys_wire_bytes = 0
        total = len(keys)
        self._progress("upload", 0, total)

        def requests() -> Iterator[pb.OpenSessionRequest]:
            sent = 0
            for request in split(keys, "keys", self._send_part, pb.OpenSessionRequest):
                self._keys_wire_bytes += request.part.ByteSize()
                sent = min(total, sent + self._send_part)
                self._progress("upload", sent, total)  # handed to gRPC
                yield request

        try:
            return self._stub.OpenSession(requests(), timeout=self._timeout, metadata=self._auth)
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"OpenSession on {self.address}") from None

    def _infer_all(self, x: np.ndarray) -> InferenceResult:
        p = self.program
        cap = p.batch_capacity
        n = len(x)
        totals = {"client_s": self.keygen_s, "server_s": 0.0, "rounds": 0, "up": self.keys_bytes, "down": 0,
                  "wup": self._keys_wire_bytes, "wdown": 0, "out_of_range": 0}  # fmt: skip
        outputs = []
        t_start = time.perf_counter()
        self._progress("query", 0, n)
        for start in range(0, n, cap):
            outputs.append(self._query(x[start : start + cap], totals))
            totals["out_of_range"] += self._client.last_out_of_range
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
            "packing": p.packing,
            "mode": p.mode,
            "security_bits": p.security,
            "predicted_error": (p.meta.get("predicted_error") or [None])[-1],
            "precision": p.segments[-1].precision,
            "out_of_range": totals["out_of_range"],
            "transport": "grpc",
        }
        return InferenceResult(np.concatenate(outputs), report)

    def _query(self, xs: np.ndarray, totals: dict) -> np.ndarray:
        """One query on one ``Infer`` stream. Messages go out in chunks of one part each: the
        query's chunks are encrypted here while gRPC's sending thread sends the previous ones,
        a step's chunks are decrypted as they arrive, and a reply's chunks travel while the
        next are encrypted (:mod:`heinfer.protocol.chunks`)."""
        messages = self._client.query_messages(self.session_id, xs, self._send_part)  # checks xs
        outbox: queue.Queue = queue.Queue()

        def requests() -> Iterator:
            while (item := outbox.get()) is not None:
                kind, m = item
                if len(m) <= self._send_part:  # every chunk: one typed message
                    typed = wire.Typed(m)
                    totals["wup"] += typed.wire_bytes()
                    yield typed
                    continue
                for request in split(m, kind, self._send_part, pb.InferRequest):
                    totals["wup"] += request.ByteSize()
                    yield request

        metadata = [*self._metadata, (wire.MAX_PART_METADATA, str(self.limits.max_part_bytes))]
        call = self._stub.Infer(requests(), timeout=self._timeout, metadata=metadata)
        try:
            self._send_all("query", messages, outbox, totals)
            result = self._exchange(call, outbox, totals)
            outbox.put(None)  # half-closes the stream: the query is done
            seconds = dict(call.trailing_metadata() or ()).get(wire.SERVER_SECONDS_METADATA)
            try:
                totals["server_s"] += float(seconds) if seconds is not None else 0.0
            except ValueError:
                pass
            return result
        except grpc.RpcError as e:
            self._client.forget(self._client.last_query_ref)  # refused or lost: its state and key go
            raise from_rpc_error(e, f"Infer on {self.address}") from None
        except BaseException:
            self._client.forget(self._client.last_query_ref)
            call.cancel()
            raise
        finally:
            outbox.put(None)  # ends the request stream (and its sending thread) in every case

    def _send_all(self, kind: str, messages: Iterator[bytes], outbox: queue.Queue, totals: dict) -> None:
        """Makes each message (encryption: client time) and hands it to the sending thread."""
        while True:
            t0 = time.perf_counter()
            m = next(messages, None)
            totals["client_s"] += time.perf_counter() - t0
            if m is None:
                return
            totals["up"] += len(m)
            outbox.put((kind, m))

    def _exchange(
        self, call: Iterator[pb.InferResponse], outbox: queue.Queue, totals: dict
    ) -> np.ndarray:
        """Reads steps and answers them until the result arrives."""
        segments, done_segments = len(self.program.segments), 0
        self._progress("segment", 0, segments)
        lim = self.message_limits
        assembler = Assembler(
            {"step": lim["step"], "result": lim["result"]},
            self.limits.max_part_bytes,
            "server message",
        )
        for response in call:
            n, typed = wire.received(response)
            totals["wdown"] += n
            done = assembler.take_typed(typed) if typed is not None else assembler.feed(response.part)
            if done is None:
                continue
            kind, message = done
            totals["down"] += message_size(message)
            t0 = time.perf_counter()
            if kind == "result":
                out = self._client.decode_result(message)
                totals["client_s"] += time.perf_counter() - t0
                self._progress("segment", segments, segments)
                return out
            replies = self._client.receive_step(message, self._send_part)
            totals["client_s"] += time.perf_counter() - t0
            if replies is not None:  # the step's last chunk
                totals["rounds"] += 1
                done_segments += 1
                self._progress("segment", done_segments, segments)
                self._send_all("reply", replies, outbox, totals)
        raise ProtocolError(f"the server ended the query stream {assembler.describe()}")

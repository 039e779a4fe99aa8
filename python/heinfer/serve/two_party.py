"""The two-party protocol over gRPC: ``heinfer.v1.TwoParty/Run`` (layer: ``heinfer.serve``).

One bidirectional call is one session. The client sends its keys (BFV public and rotation
keys, the base-OT message) and gets the base-OT answer; then per query it sends the offline
requests and gets the garbled circuits, sends each layer's encrypted share and gets the masked,
flooded result, sends each step's OT choices and gets the labels. Every message is a list of
blobs cut into :class:`TwoPartyFrame` parts of at most :data:`PART_BYTES`; :class:`Reassembler`
checks every frame (kind, step, blob order, offsets, sizes against the per-message limit,
which the server computes from the program: :mod:`heinfer.serve.two_party_limits`) before it
buffers a byte. The parties are :mod:`heinfer.protocol.two_party`'s.

TLS, mutual TLS and a bearer token work as for the CKKS service (:func:`heinfer.serve.serve`):
an address that is not loopback needs TLS unless ``insecure=True``.
"""

from __future__ import annotations

import enum
import hmac
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures

import grpc
import numpy as np

from heinfer.errors import ClusterError, HeinferError, ProtocolError, ServiceError
from heinfer.program.two_party import TwoPartyProgram
from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer, _params, prepare_server_layers, queries
from heinfer.runtime.executor import bad_budget
from heinfer.serve.limits import Limits
from heinfer.serve.service import is_loopback
from heinfer.serve.sessions import check_query_cap, check_session_caps, peer_address, release
from heinfer.serve.tls import TlsConfig
from heinfer.serve.two_party_limits import client_limits, items_per_query, server_limits
from heinfer.serve.two_party_ray import RayTwoParty, RemoteParty
from heinfer.serve.watchdog import SendWatch
from heinfer.v1 import service_pb2 as pb

__all__ = ["Kind", "Reassembler", "TwoPartyService", "connect_two_party", "serve_two_party"]

_LOG = logging.getLogger("heinfer.serve")
#: Largest frame payload.
PART_BYTES = 1 << 20
#: Largest message (all its blobs): CIFAR-10's garbled circuits are 1.1 GB per query.
MAX_MESSAGE_BYTES = 3 << 30
#: Most blobs in one message (ciphertexts of a layer, circuit steps).
MAX_BLOBS = 4096
_PATH = "/heinfer.v1.TwoParty/Run"


class Kind(enum.IntEnum):
    """Message kinds, in protocol order."""

    KEYS = 1
    SETUP = 2
    OFFLINE = 3
    GARBLED = 4
    LAYER = 5
    RESULT = 6
    CHOICES = 7
    LABELS = 8


def frames(kind: Kind, step: int, blobs: Iterable[bytes], count: int | None = None) -> Iterator[pb.TwoPartyFrame]:
    """A message as frames (an empty blob still sends one frame). ``blobs`` may be an iterator
    of ``count`` blobs, each framed as it arrives (the offline phase's circuits, step by step)."""
    count = len(blobs) if count is None else count  # type: ignore[arg-type]
    for i, b in enumerate(blobs):
        for off in range(0, max(len(b), 1), PART_BYTES):
            yield pb.TwoPartyFrame(kind=kind, step=step, count=count, blob=i, size=len(b), offset=off, data=b[off : off + PART_BYTES])


class Reassembler:
    """Frames → messages ``(kind, step, blobs)``, checking each frame before buffering it.
    ``limit(kind, step) → (most blobs, most bytes)`` (optional: the server's
    :func:`~heinfer.serve.two_party_limits.client_limits`) bounds each message by its kind
    and step, within ``max_bytes``."""

    def __init__(
        self,
        frames_in: Iterable[pb.TwoPartyFrame],
        max_bytes: int = MAX_MESSAGE_BYTES,
        limit: Callable[[int, int], tuple[int, int]] | None = None,
    ) -> None:
        self._it = iter(frames_in)
        self.max_bytes = max_bytes
        self._limit = limit

    def next(self) -> tuple[Kind, int, list[bytes]] | None:
        """The next whole message, or None when the stream ends between messages."""
        blobs: list[bytes] = []
        buf = bytearray()
        head = None
        total = size = 0
        max_bytes = self.max_bytes
        for f in self._it:
            if f.kind not in Kind.__members__.values():
                raise ProtocolError(f"unknown two-party message kind {f.kind}")
            if head is None:
                if not 1 <= f.count <= MAX_BLOBS or f.blob != 0 or f.offset != 0:
                    raise ProtocolError(f"a message must start with blob 0 at offset 0 and hold 1..{MAX_BLOBS} blobs")
                if self._limit is not None:
                    most, cap = self._limit(f.kind, f.step)
                    if most == 0:
                        raise ProtocolError(f"no {Kind(f.kind).name} message of step {f.step} is expected here")
                    if f.count > most:
                        raise ProtocolError(f"a {Kind(f.kind).name} message of step {f.step} holds at most {most} blobs, got {f.count}")
                    max_bytes = min(max_bytes, cap)
                head = (f.kind, f.step, f.count)
            if (f.kind, f.step, f.count) != head or f.blob != len(blobs) or f.offset != len(buf):
                raise ProtocolError("two-party frames out of order (kind, step, blob or offset)")
            if f.offset == 0:
                size = f.size
            elif f.size != size:
                raise ProtocolError("a two-party blob changed its declared size between frames")
            total += len(f.data)
            if f.size > max_bytes or total > max_bytes or len(buf) + len(f.data) > f.size:
                raise ProtocolError(f"a two-party message exceeds its size ({f.size}) or the limit of {max_bytes} bytes")
            buf += f.data
            if len(buf) == f.size:
                blobs.append(bytes(buf))
                buf = bytearray()
                if len(blobs) == f.count:
                    return Kind(head[0]), int(head[1]), blobs
        if head is not None:
            raise ProtocolError("the stream ended in the middle of a two-party message")
        return None


class TwoPartyService:
    """The server's side: the program's layers encoded once, one party per call. ``limits``
    (:class:`~heinfer.serve.limits.Limits`): the calls open at once (``max_sessions``, and
    ``max_sessions_per_peer`` per peer address), refused beyond with ``RESOURCE_EXHAUSTED``, and
    ``idle_timeout_s``: a call whose client sends nothing for that long is closed
    (``DEADLINE_EXCEEDED``), and ``query_timeout_s``: a call whose send has waited that long
    for the client to read (gRPC's flow control) is cancelled, so neither an idle client nor
    one that stops reading can hold the server's threads and session places."""

    def __init__(self, program: TwoPartyProgram, token: str | None = None, max_memory: int | None = None,
                 limits: Limits | None = None, backend: RayTwoParty | None = None) -> None:
        if program.is_public:
            raise ProtocolError("the server needs the program with its weights")
        self.program = program
        self.limits = limits or Limits()
        self._bearer = None if token is None else f"Bearer {token}".encode()
        #: Where the sessions run: None in this process, else a
        #: :class:`~heinfer.serve.two_party_ray.RayTwoParty` (whole sessions per actor).
        self.backend = backend
        self.layers = prepare_server_layers(_params(program), program, max_memory) if backend is None else None
        self._limit = client_limits(program)  # what a client of this program may send
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()  # calls open per peer
        self.sessions = 0
        self.errors = 0
        self._watch = SendWatch()
        self._closed = threading.Event()
        threading.Thread(target=self._reap, daemon=True, name="heinfer-two-party-reaper").start()

    def _reap(self) -> None:
        """Cancels the calls whose send has waited past ``query_timeout_s`` (a client that
        stopped reading), until :meth:`close`."""
        timeout = self.limits.query_timeout_s
        while not self._closed.wait(min(1.0, timeout / 4)):
            for context in self._watch.stalled(timeout):
                self.errors += 1
                context.cancel()

    def close(self) -> None:
        """Stops the housekeeping thread (the service's handle does on stop)."""
        self._closed.set()

    def _sent(self, responses: Iterable[pb.TwoPartyFrame], context: grpc.ServicerContext) -> Iterator[pb.TwoPartyFrame]:
        """``responses``, each watched while gRPC sends it (:meth:`_reap`); what makes the next
        one (garbling, a layer) is not."""
        key = id(context)
        try:
            for r in responses:
                self._watch.sending(key, context)
                yield r
                self._watch.sent(key)
        finally:
            self._watch.sent(key)

    def _enter(self, peer: str) -> None:
        with self._lock:
            check_session_caps(self.limits, sum(self._open.values()), peer, self._open[peer])
            self._open[peer] += 1

    def _leave(self, peer: str) -> None:
        with self._lock:
            release(self._open, peer)

    @property
    def open_sessions(self) -> int:
        """Calls open now."""
        with self._lock:
            return sum(self._open.values())

    def _frames(self, request_iterator: Iterable[pb.TwoPartyFrame]) -> Iterator[pb.TwoPartyFrame]:
        """The client's frames, read by a helper thread: each wait is bounded by
        ``idle_timeout_s`` (a ``DEADLINE_EXCEEDED`` :class:`ServiceError` past it)."""
        q: queue.Queue = queue.Queue(maxsize=64)  # at most 64 frames (64 MiB) read ahead
        done, stop = object(), threading.Event()

        def put(item: object) -> bool:
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.5)
                    return True
                except queue.Full:
                    continue
            return False

        def pump() -> None:
            try:
                for f in request_iterator:
                    if not put(f):
                        return
            except Exception:  # noqa: BLE001 - a cancelled call ends the stream
                pass
            put(done)

        threading.Thread(target=pump, daemon=True, name="heinfer-two-party-reader").start()
        idle = self.limits.idle_timeout_s
        try:
            while True:
                try:
                    f = q.get(timeout=idle)
                except queue.Empty:
                    raise ServiceError(
                        f"the client sent nothing for {idle:g} s: session closed (idle_timeout_s)", code="DEADLINE_EXCEEDED"
                    ) from None
                if f is done:
                    return
                yield f
        finally:
            stop.set()  # the reader gives up instead of waiting on a full queue

    def Run(self, request_iterator: Iterable[pb.TwoPartyFrame], context: grpc.ServicerContext) -> Iterator[pb.TwoPartyFrame]:  # noqa: N802 - the RPC's name
        """One session (see the module documentation)."""
        if self._bearer is not None:
            given = [v for k, v in context.invocation_metadata() if k == "authorization"]
            value = (given[0].encode() if isinstance(given[0], str) else bytes(given[0])) if len(given) == 1 else b""
            if not hmac.compare_digest(value, self._bearer):
                self.errors += 1
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "this service requires a valid token (metadata 'authorization: Bearer <token>')")
        peer = peer_address(context.peer())
        try:
            self._enter(peer)
        except ServiceError as e:
            self.errors += 1
            context.abort(getattr(grpc.StatusCode, e.code), str(e))
        try:
            yield from self._session(request_iterator, context)
        finally:
            self._leave(peer)

    def _session(self, request_iterator: Iterable[pb.TwoPartyFrame], context: grpc.ServicerContext) -> Iterator[pb.TwoPartyFrame]:
        asm = Reassembler(self._frames(request_iterator), limit=self._limit)
        party: TwoPartyInferenceServer | None = None
        started = 0
        try:
            while (msg := asm.next()) is not None:
                kind, step, blobs = msg
                if kind == Kind.KEYS:
                    if party is not None or len(blobs) != 3:
                        raise ProtocolError("keys are sent once, as three blobs (public key, rotation keys, base OT)")
                    keys = dict(zip(("pk", "galois", "ot"), blobs))
                    party = TwoPartyInferenceServer(self.program, keys, self.layers) if self.backend is None else self.backend.open(keys)
                    self.sessions += 1
                    yield from self._sent(frames(Kind.SETUP, 0, [party.setup_reply]), context)
                    continue
                if party is None:
                    raise ProtocolError("send the keys first")
                if kind == Kind.OFFLINE:  # a query starts
                    check_query_cap(self.limits, started, "this session (one TwoParty/Run call)")
                    started += 1
                    if isinstance(party, TwoPartyInferenceServer):  # each step's circuits sent as garbled
                        yield from self._sent(frames(Kind.GARBLED, 0, party.offline_steps(blobs), count=len(self.program.steps)), context)
                    else:
                        yield from self._sent(frames(Kind.GARBLED, 0, party.offline(blobs)), context)
                elif kind == Kind.LAYER:
                    if step >= len(self.program.segments):
                        raise ProtocolError(f"no layer {step}")
                    yield from self._sent(frames(Kind.RESULT, step, party.layer(step, blobs)), context)
                elif kind == Kind.CHOICES:
                    if step >= len(self.program.steps) or len(blobs) != 1:
                        raise ProtocolError(f"no circuit step {step}, or not one blob of choices")
                    yield from self._sent(frames(Kind.LABELS, step, [party.labels(step, blobs[0])]), context)
                else:
                    raise ProtocolError(f"a client does not send {kind.name}")
        except ServiceError as e:
            self.errors += 1
            context.abort(getattr(grpc.StatusCode, e.code, grpc.StatusCode.UNKNOWN), str(e))
        except ClusterError as e:  # the Ray backend lost the session's worker or its deadline
            self.errors += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{type(e).__name__}: {e}")
        except HeinferError as e:
            self.errors += 1
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{type(e).__name__}: {e}")
        except ValueError as e:  # errors of the garbled-circuit state machines
            self.errors += 1
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        finally:
            if isinstance(party, RemoteParty):  # a session on a Ray actor ends there too
                party.close()


class TwoPartyHandle:
    """A running two-party service: ``address``, ``port`` and :meth:`stop`."""

    def __init__(self, server: grpc.Server, service: TwoPartyService, host: str, port: int) -> None:
        self._server, self.service, self.port = server, service, port
        self.address = f"{host}:{port}"

    def stop(self, grace: float = 5.0) -> None:
        """Stops accepting calls and waits up to ``grace`` seconds for running ones; the Ray
        actors of a ``backend="ray"`` service stop with it."""
        self._server.stop(grace).wait()
        self.service.close()
        if self.service.backend is not None:
            self.service.backend.close()

    def __enter__(self) -> TwoPartyHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _options() -> list[tuple[str, int]]:
    size = PART_BYTES + (1 << 16)
    return [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size)]


def serve_two_party(
    program: TwoPartyProgram,
    address: str = "127.0.0.1:0",
    max_workers: int = 4,
    tls: TlsConfig | None = None,
    token: str | None = None,
    insecure: bool = False,
    max_memory: int | None = None,
    limits: Limits | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    ray_workers: int = 2,
) -> TwoPartyHandle:
    """Serves ``program`` on ``address`` until :meth:`TwoPartyHandle.stop`. ``tls``, ``token``
    and ``insecure`` as for :func:`heinfer.serve.serve`: without TLS only loopback, unless
    ``insecure=True``. ``max_memory``: bytes of encoded layer diagonals kept (default: half of
    physical memory at most, as for :func:`heinfer.serve.serve`); beyond it the largest layers
    are encoded during each query. ``backend="ray"``: the sessions run on ``ray_workers``
    Ray actors, whole sessions per actor (:class:`~heinfer.serve.two_party_ray.RayTwoParty`;
    on the cluster at ``ray_address`` or a local Ray on 127.0.0.1); the actors stop with the
    service."""
    host, _, port = address.rpartition(":")
    if (why := bad_budget(max_memory)) is not None:
        raise ValueError(why)
    if token is not None and (not isinstance(token, str) or not token or not token.isprintable()):
        raise ValueError("token must be a non-empty printable string")
    if tls is None and not is_loopback(host) and not insecure:
        raise ValueError(
            f"refusing to listen on {host} without TLS: the token and every message would travel in clear; "
            "give tls=TlsConfig(...), listen on 127.0.0.1, or pass insecure=True"
        )
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    limits = limits or Limits()
    pool = RayTwoParty(program, workers=ray_workers, address=ray_address, max_memory=max_memory) if backend == "ray" else None
    try:
        service = TwoPartyService(program, token, max_memory, limits, pool)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    # one thread per open call, and one more so that a refusal is answered at once
    workers = max(max_workers, limits.max_sessions + 1)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=_options())
    handler = grpc.stream_stream_rpc_method_handler(service.Run, request_deserializer=pb.TwoPartyFrame.FromString,
                                                    response_serializer=pb.TwoPartyFrame.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("heinfer.v1.TwoParty", {"Run": handler}),))
    where = f"{host}:{port or 0}"
    bound = server.add_insecure_port(where) if tls is None else server.add_secure_port(where, tls.server_credentials())
    if bound == 0:
        if pool is not None:
            pool.close()
        raise ServiceError(f"cannot listen on {address}", code="UNAVAILABLE")
    server.start()
    _LOG.info("two-party service on %s:%d%s", host, bound, f" ({ray_workers} Ray actors)" if pool is not None else "")
    return TwoPartyHandle(server, service, host, bound)


class _Call:
    """A client's bidirectional call: send messages, receive whole ones. The call itself has
    no deadline (it is the whole session: a deadline on it ended long sessions mid-query);
    each wait for the server's next frame is bounded by ``timeout_s`` instead."""

    def __init__(self, channel: grpc.Channel, timeout_s: float, token: str | None, limit: Callable[[int, int], tuple[int, int]]) -> None:
        self._q: queue.Queue = queue.Queue()
        call = channel.stream_stream(_PATH, request_serializer=pb.TwoPartyFrame.SerializeToString,
                                     response_deserializer=pb.TwoPartyFrame.FromString)
        auth = [] if token is None else [("authorization", f"Bearer {token}")]
        self._timeout = timeout_s
        self._responses = call(iter(self._q.get, None), metadata=auth)
        self._in: queue.Queue = queue.Queue()  # the server sends only what the client asked for
        threading.Thread(target=self._pump, daemon=True, name="heinfer-two-party-responses").start()
        self._asm = Reassembler(self._frames(), limit=limit)
        self.sent = self.received = 0

    def _pump(self) -> None:
        """Reads the server's frames into :attr:`_in` (then the end, or the call's error)."""
        try:
            for f in self._responses:
                self._in.put(f)
            self._in.put(None)
        except BaseException as e:  # noqa: BLE001 - handed to the reader, which raises it
            self._in.put(e)

    def _frames(self) -> Iterator[pb.TwoPartyFrame]:
        while True:
            try:
                item = self._in.get(timeout=self._timeout)
            except queue.Empty:
                self._responses.cancel()
                raise ServiceError(
                    f"the server sent nothing for {self._timeout:g} s (timeout_s): the session is closed", code="DEADLINE_EXCEEDED"
                ) from None
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def send(self, kind: Kind, step: int, blobs: list[bytes]) -> None:
        self.sent += sum(map(len, blobs))
        for f in frames(kind, step, blobs):
            self._q.put(f)

    def recv(self, kind: Kind, step: int) -> list[bytes]:
        try:
            msg = self._asm.next()
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise ServiceError(
                    "the server does not serve two-party programs (no heinfer.v1.TwoParty): a client-aided service? Use the "
                    "public file of the program it serves",
                    code="UNIMPLEMENTED",
                ) from None
            raise ServiceError(f"two-party call failed: {e.details()}", code=e.code().name) from None
        if msg is None or msg[0] != kind or msg[1] != step:
            raise ProtocolError(f"expected {kind.name} for step {step}, got {msg[0].name if msg else 'the end of the call'}")
        self.received += sum(map(len, msg[2]))
        return msg[2]

    def close(self) -> None:
        self._q.put(None)
        self._responses.cancel()


class TwoPartyConnection:
    """A client session with a two-party service: :meth:`infer` runs items in queries of the
    program's ``batch_capacity`` (one item in latency mode)."""

    def __init__(self, address: str, program: TwoPartyProgram, timeout_s: float = 600.0, tls: TlsConfig | None = None, token: str | None = None) -> None:
        self.program = program.public()
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=_options())
        else:
            self._channel = grpc.secure_channel(address, tls.channel_credentials(), options=_options() + tls.channel_options())
        # what a server of this program sends, at most
        self._call = _Call(self._channel, timeout_s, token, server_limits(self.program))
        self.client = TwoPartyInferenceClient(self.program)
        t0 = time.perf_counter()
        keys = self.client.keys_message()
        self._call.send(Kind.KEYS, 0, [keys["pk"], keys["galois"], keys["ot"]])
        self.client.finish_setup(self._call.recv(Kind.SETUP, 0)[0])
        self.setup_s = time.perf_counter() - t0
        self.setup_bytes = self._call.sent + self._call.received

    def infer(self, x: np.ndarray) -> tuple[np.ndarray, dict]:
        """The outputs of the items ``x`` and a report (offline/online seconds and bytes, the
        number of queries)."""
        c, prog = self._call, self.program
        rep = {"setup_s": self.setup_s, "setup_bytes": self.setup_bytes, "offline_s": 0.0, "online_s": 0.0, "offline_bytes": 0, "online_bytes": 0, "queries": 0}
        outs = []
        # queries whose garbled circuits fit one message of this transport
        for batch in queries(prog, np.asarray(x), items_per_query(prog, MAX_MESSAGE_BYTES)):
            b0, t0 = c.sent + c.received, time.perf_counter()
            c.send(Kind.OFFLINE, 0, self.client.offline_request(len(batch)))
            self.client.offline_finish(c.recv(Kind.GARBLED, 0))
            b1, t1 = c.sent + c.received, time.perf_counter()
            msgs = self.client.query(batch)
            for k in range(len(prog.segments)):
                c.send(Kind.LAYER, k, msgs)
                res = c.recv(Kind.RESULT, k)
                if k == len(prog.steps):
                    outs.append(self.client.finish(res))
                    break
                c.send(Kind.CHOICES, k, [self.client.choose(k, res)])
                msgs = self.client.next_input(k, c.recv(Kind.LABELS, k)[0])
            rep["offline_s"] += t1 - t0
            rep["online_s"] += time.perf_counter() - t1
            rep["offline_bytes"] += b1 - b0
            rep["online_bytes"] += c.sent + c.received - b1
            rep["queries"] += 1
        return np.concatenate(outs), rep

    def close(self) -> None:
        """Ends the session."""
        self._call.close()
        self._channel.close()

    def __enter__(self) -> TwoPartyConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_two_party(
    address: str, program: TwoPartyProgram, timeout_s: float = 600.0, tls: TlsConfig | None = None, token: str | None = None
) -> TwoPartyConnection:
    """Opens a session (keys and base OTs sent) with the two-party service at ``address``
    (over TLS with ``tls``; with ``token`` as ``authorization: Bearer``). ``timeout_s``: how
    long to wait for each of the server's messages (``DEADLINE_EXCEEDED`` past it); the
    session itself has no deadline."""
    return TwoPartyConnection(address, program, timeout_s, tls, token)


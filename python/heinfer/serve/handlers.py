"""The four calls of the service, on top of the protocol server (layer: ``heinfer.serve``).

:class:`Servicer` owns one protocol :class:`~heinfer.protocol.Server` (evaluation keys only;
no type here can hold a secret key) shared by every session, and checks everything the
protocol server does not: the bearer token, the frame stream (:mod:`heinfer.serve.framing`),
the caps of :class:`~heinfer.serve.limits.Limits`, the program id of uploaded keys, the
session of a query, and that each reply on a stream belongs to that stream's query. Every
failure ends the call with the status :mod:`heinfer.serve.status` assigns to it; every
resource a call took (its query slot, the query state in the protocol server, the helper
thread) is given back when the call ends, however it ends.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterator

import grpc

from heinfer.errors import ProtocolError, ServiceError
from heinfer.program.model import Program
from heinfer.protocol import Server
from heinfer.protocol.messages import peek_header
from heinfer.protocol.server import program_id
from heinfer.serve import wire
from heinfer.serve.framing import Assembler, frames
from heinfer.serve.inbox import Inbox
from heinfer.serve.limits import MIN_CHUNK_BYTES, Limits
from heinfer.serve.sessions import Registry, forget_query
from heinfer.serve.status import abort
from heinfer.serve.watchdog import SendWatch

__all__ = ["Servicer", "message_header"]


def _identity(b: bytes) -> bytes:
    return b


def message_header(data: bytes, kind: str | tuple[str, ...]) -> tuple[str, dict]:
    """``(kind, header fields)`` of a protocol message of one of the expected kinds,
    validated without copying its payload (:func:`heinfer.protocol.messages.peek_header`)."""
    got, head = peek_header(data)
    kinds = (kind,) if isinstance(kind, str) else kind
    if got not in kinds:
        raise ProtocolError(f"expected a {' or '.join(map(repr, kinds))} message, got {got!r}")
    return got, head


class Servicer:
    """``GetInfo``, ``OpenSession``, ``Infer`` and ``CloseSession`` for one program."""

    def __init__(
        self, program: Program, limits: Limits, token: str | None, watch: SendWatch
    ) -> None:
        self.program = program
        self.limits = limits
        self.server = Server(
            program, max_sessions=limits.max_sessions, max_message_bytes=limits.max_message_bytes
        )
        self.program_id = program_id(program)
        self.program_digest = wire.program_digest(program)
        self.registry = Registry(self.server, limits)
        self.watch = watch
        self._bearer = None if token is None else f"Bearer {token}".encode()

    def handler(self) -> grpc.GenericRpcHandler:
        """The gRPC handler of the service's methods (raw bytes in and out)."""
        raw = {"request_deserializer": _identity, "response_serializer": _identity}
        return grpc.method_handlers_generic_handler(
            wire.SERVICE,
            {
                "OpenSession": grpc.stream_unary_rpc_method_handler(self.open_session, **raw),
                "Infer": grpc.stream_stream_rpc_method_handler(self.infer, **raw),
                "CloseSession": grpc.unary_unary_rpc_method_handler(self.close_session, **raw),
                "GetInfo": grpc.unary_unary_rpc_method_handler(self.get_info, **raw),
            },
        )

    # ------------------------------------------------------------------ calls
    def open_session(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        """Reads one keys message, opens a session with it, answers the session reply."""
        try:
            self._authorize(context)
            self.registry.reserve_session()
            try:
                inbox = Inbox(requests, self._count_in)
                try:
                    keys = inbox.message(
                        Assembler(self.limits, self.limits.max_key_bytes, "keys message"),
                        self.limits.query_timeout_s,
                    )
                finally:
                    inbox.close()
                _, head = message_header(keys, "keys")
                if head["program_id"] != self.program_id:
                    raise ServiceError(
                        f"keys are for parameters {head['program_id'][:32]!r}, this service runs "
                        f"a program with parameters {self.program_id!r} (wrong program?)",
                        code="FAILED_PRECONDITION",
                    )
                session = self.server.open_session(keys)
            except BaseException:
                self.registry.release_reservation()
                raise
            self.registry.add_session(session)
            return wire.session_reply(session)
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self.registry.count("errors")
            abort(context, e)

    def get_info(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """The program id and the limits, for a client about to open a session."""
        try:
            self._authorize(context)
            return wire.info_reply(self.program_id, self.program_digest, self.limits)
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self.registry.count("errors")
            abort(context, e)

    def close_session(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Closes the session named by ``request`` (its keys are freed)."""
        try:
            self._authorize(context)
            if not isinstance(request, bytes) or not 1 <= len(request) <= 64:
                raise ProtocolError("CloseSession takes a session id of 1 to 64 ASCII characters")
            session = request.decode("ascii", errors="replace")
            self.registry.close_session(session)
            return b""
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self.registry.count("errors")
            abort(context, e)

    def infer(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        """One query: the query message in, steps out and replies in, the result out."""
        try:
            self._authorize(context)
            chunk = self._chunk_bytes(context)
            self.registry.start_query()
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self.registry.count("errors")
            abort(context, e)
        session = query = inbox = None
        ok = False
        try:
            inbox = Inbox(requests, self._count_in)
            message = inbox.message(Assembler(self.limits, what="query message"), self._timeout)
            _, head = message_header(message, "query")
            self.registry.attach(head["session"])
            session = head["session"]
            t0 = time.perf_counter()
            out = self.server.begin(message)
            seconds = time.perf_counter() - t0
            del message
            while True:
                kind, head = message_header(out, ("step", "result"))
                query = head["query"]
                if kind == "result":
                    context.set_trailing_metadata(
                        ((wire.SERVER_SECONDS_METADATA, f"{seconds:.6f}"),)
                    )
                    yield from self._send(out, chunk, context)
                    ok = True
                    return
                step = head["step"]
                yield from self._send(out, chunk, context)
                del out
                what = f"reply to step {step}"
                reply = inbox.message(Assembler(self.limits, what=what), self._timeout)
                _, rhead = message_header(reply, "reply")
                if rhead["query"] != query:
                    raise ProtocolError(
                        f"{what}: a reply for query {rhead['query'][:16]!r} on the stream of "
                        f"query {query[:16]!r}"
                    )
                t0 = time.perf_counter()
                out = self.server.resume(reply)
                seconds += time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            abort(context, e)
        finally:
            if inbox is not None:
                inbox.close()
            self.watch.sent(id(context))
            if query is not None and not ok:
                forget_query(self.server, query)
            self.registry.end_query(session, ok)

    # ------------------------------------------------------------------ helpers
    @property
    def _timeout(self) -> float:
        return self.limits.query_timeout_s

    def _send(self, message: bytes, chunk: int, context: grpc.ServicerContext) -> Iterator[bytes]:
        """The frames of ``message``, each watched until gRPC has sent it."""
        key = id(context)
        for frame in frames(message, chunk):
            self.watch.sending(key, context)
            yield frame
            self.watch.sent(key)
            self.registry.count("bytes_out", len(frame))

    def _count_in(self, n: int) -> None:
        self.registry.count("bytes_in", n)

    def _authorize(self, context: grpc.ServicerContext) -> None:
        """Checks the bearer token (``UNAUTHENTICATED``) when the service has one."""
        if self._bearer is None:
            return
        given = [v for k, v in context.invocation_metadata() if k == "authorization"]
        if not given:
            raise ServiceError(
                "this service requires a token (metadata 'authorization: Bearer <token>')",
                code="UNAUTHENTICATED",
            )
        value = given[0].encode() if isinstance(given[0], str) else bytes(given[0])
        if len(given) > 1 or not hmac.compare_digest(value, self._bearer):
            raise ServiceError("invalid token", code="UNAUTHENTICATED")

    def _chunk_bytes(self, context: grpc.ServicerContext) -> int:
        """The chunk size to send with: the client's ``heinfer-chunk-bytes`` within ours."""
        given = [v for k, v in context.invocation_metadata() if k == wire.CHUNK_METADATA]
        if not given:
            return self.limits.max_chunk_bytes
        try:
            n = int(given[0])
        except (TypeError, ValueError):
            raise ProtocolError(f"{wire.CHUNK_METADATA} must be an integer") from None
        return max(MIN_CHUNK_BYTES, min(n, self.limits.max_chunk_bytes))
